"""The XScale core: a Unicorn ARM core (model PXA255, an XScale) running one
static Linux EABI executable in user mode.

    core = XScaleCore("xscale/build/arm/xs_demo.elf", ["compute"])
    while core.state == "running":
        core.run(100_000)             # instructions, stopped by the C budget hook
    core.stdout, core.exit_code

The process image is what Linux gives an ELF executable: segments at their
addresses, a stack with argc/argv/envp/auxv (AT_PHDR, AT_PHENT, AT_PHNUM,
AT_PAGESZ, AT_ENTRY, AT_RANDOM, AT_PLATFORM "v5l", AT_HWCAP without VFP or
iWMMXt), the kernel-user helpers page at 0xffff0000, and a system-call layer
(npkit.xscale.linux).  Time: the core counts instructions; `cycle` is the
chip time (microengine cycles) the current run started at and `ratio` the ME
cycles per XScale instruction (one instruction per XScale clock).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from unicorn import UC_ARCH_ARM, UC_HOOK_INTR, UC_MODE_ARM, Uc, UcError
from unicorn import arm_const as A
from unicorn import unicorn_const as U

from .elf import ArmElf, read_elf
from .guest import (
    KUSER_PAGE,
    PAGE,
    STACK_SIZE,
    STACK_TOP,
    Wait,
    page_down,
    page_up,
)
from .linux import LinuxABI

HERE = Path(__file__).resolve().parent
BUDGET_LIB = HERE / "build" / "libnpk_xs_budget.so"

HWCAP = 0x1 | 0x2 | 0x4 | 0x10 | 0x80   # SWP HALF THUMB FAST_MULT EDSP; no VFP (64), no IWMMXT (512)
GUEST_BIN = "/usr/sbin/"  # where the guest believes its program is (argv[0])
EXCP_UDEF, EXCP_SWI, EXCP_PREFETCH_ABORT, EXCP_DATA_ABORT = 1, 2, 3, 4

AT = {"NULL": 0, "PHDR": 3, "PHENT": 4, "PHNUM": 5, "PAGESZ": 6, "BASE": 7, "FLAGS": 8, "ENTRY": 9,
      "UID": 11, "EUID": 12, "GID": 13, "EGID": 14, "PLATFORM": 15, "HWCAP": 16, "CLKTCK": 17,
      "SECURE": 23, "RANDOM": 25, "HWCAP2": 26, "EXECFN": 31}  # fmt: skip


class XScaleError(RuntimeError):
    """The XScale program cannot be loaded or run (message says why)."""


class _Budget(ctypes.Structure):
    _fields_ = [("executed", ctypes.c_uint64), ("limit", ctypes.c_uint64), ("blocks", ctypes.c_uint64),
                ("stop", ctypes.c_void_p)]  # fmt: skip


def _kuser_page() -> bytes:
    """ARM code of the kernel-user helpers (user-mode, single core: no exclusives needed)."""
    page = bytearray(PAGE)

    def put(addr: int, words: list[int]) -> None:
        off = addr - KUSER_PAGE
        page[off : off + 4 * len(words)] = struct.pack(f"<{len(words)}I", *words)

    bx_lr = 0xE12FFF1E
    put(0xFFFF0FA0, [bx_lr])                                   # __kuser_memory_barrier
    put(0xFFFF0FC0, [0xE5923000,   # ldr  r3, [r2]               __kuser_cmpxchg(old r0, new r1, ptr r2)
                     0xE0533000,   # subs r3, r3, r0
                     0x05821000,   # streq r1, [r2]
                     0xE2730000,   # rsbs r0, r3, #0           r0 = 0 and C set when stored
                     bx_lr])
    put(0xFFFF0FE0, [0xE59F0008,   # ldr r0, [pc, #8]  -> TLS_SLOT   __kuser_get_tls
                     bx_lr])
    put(0xFFFF0FFC, [3])                                       # __kuser_helper_version
    return bytes(page)


class XScaleCore:
    """One XScale core running one program.  Not thread-safe; one per chip."""

    def __init__(self, program: str | os.PathLike[str], argv: list[str] | None = None,
                 env: dict[str, str] | None = None, *, seed: int = 1,
                 ratio: Fraction | int = 2, echo: Callable[[int, bytes], None] | None = None,
                 cpu_model: int = A.UC_CPU_ARM_PXA255, mounts: dict[str, Path] | None = None) -> None:  # fmt: skip
        """`mounts`: guest directory -> host directory, for the files the program opens
        (a run's own files at a fixed guest path: what the program reads does not depend
        on where the host keeps them)."""
        self.elf: ArmElf = read_elf(program)
        self.program = Path(program)
        self.ratio = Fraction(ratio)
        self.cycle = 0                # chip time (ME cycles) when the current run started
        self.instructions = 0         # retired instructions, all runs
        self.state = "running"        # running | waiting | exited | crashed
        self.exit_code: int | None = None
        self.fault: str | None = None
        self.wait: Wait | None = None
        self.syscalls = 0
        self.kill_pending = False     # SIGKILL sent: taken at the next system call (kernel entry)
        self._run_start_exec = 0
        self._stop_reason: str | None = None
        self._bus_error: str | None = None      # a refused device access, reported when the core stopped
        self.uc = Uc(UC_ARCH_ARM, UC_MODE_ARM)
        self.uc.ctl_set_cpu_model(cpu_model)     # first: fails once memory is mapped
        self._budget = _Budget()
        self._install_budget()
        self._load(self.elf)
        self.linux = LinuxABI(self, seed=seed, echo=echo)
        self.mounts = {g.rstrip("/"): Path(h) for g, h in (mounts or {}).items()}
        # argv[0] and /proc/self/exe name the program at a fixed guest path: the C
        # library's start-up reads them, and the host's path would change the instruction count
        self.guest_path = GUEST_BIN + Path(self.program).name
        self._setup_stack([self.guest_path, *(argv or [])], env or {}, seed)
        self.uc.hook_add(UC_HOOK_INTR, self._on_intr)
        self.code_hooks: dict[int, int] = {}      # breakpoints (gdb stub)
        self.on_break: Callable[[int], None] | None = None

    # ---- set-up --------------------------------------------------------------------
    def _install_budget(self) -> None:
        if not BUDGET_LIB.exists():
            raise XScaleError(f"{BUDGET_LIB} is missing: run `make` at the top of the tree")
        from unicorn.unicorn_py3.unicorn import uclib

        lib = ctypes.CDLL(str(BUDGET_LIB))
        self._budget_lib = lib
        self._budget.stop = ctypes.cast(uclib.uc_emu_stop, ctypes.c_void_p).value
        self._budget.limit = 1 << 62
        h = ctypes.c_size_t()
        fn = ctypes.cast(lib.npk_xs_budget_hook, ctypes.c_void_p)
        rc = uclib.uc_hook_add(self.uc._uch, ctypes.byref(h), U.UC_HOOK_BLOCK, fn,
                               ctypes.cast(ctypes.byref(self._budget), ctypes.c_void_p),
                               ctypes.c_uint64(1), ctypes.c_uint64(0))  # fmt: skip
        if rc != 0:
            raise XScaleError(f"cannot install the budget hook (unicorn error {rc})")

    def _load(self, elf: ArmElf) -> None:
        # every page a segment touches, mapped read-write-execute (the segments' own
        # flags are not enforced)
        pages = {pg for s in elf.segments for pg in range(page_down(s.vaddr), page_up(s.vaddr + s.memsz), PAGE)}
        runs: list[list[int]] = []  # [start, end): one mapping per run of pages (a mapping costs ~30 us)
        for pg in sorted(pages):
            if runs and runs[-1][1] == pg:
                runs[-1][1] = pg + PAGE
            else:
                runs.append([pg, pg + PAGE])
        for lo, hi in runs:
            self.uc.mem_map(lo, hi - lo, U.UC_PROT_ALL)
        for s in elf.segments:
            self.uc.mem_write(s.vaddr, s.data)
        self.brk_base = self.brk = page_up(elf.end)
        self.uc.mem_map(STACK_TOP - STACK_SIZE, STACK_SIZE, U.UC_PROT_READ | U.UC_PROT_WRITE)
        self.uc.mem_map(KUSER_PAGE, PAGE, U.UC_PROT_READ | U.UC_PROT_EXEC)
        self.uc.mem_write(KUSER_PAGE, _kuser_page())

    def _setup_stack(self, argv: list[str], env: dict[str, str], seed: int) -> None:
        sp = STACK_TOP - 16
        strings: list[int] = []

        def push_bytes(b: bytes) -> int:
            nonlocal sp
            sp -= len(b)
            self.uc.mem_write(sp, b)
            return sp

        for s in [*argv, *(f"{k}={v}" for k, v in env.items())]:
            strings.append(push_bytes(s.encode() + b"\0"))
        platform = push_bytes(b"v5l\0")
        rnd = push_bytes(bytes((seed * 2654435761 + i * 40503) & 0xFF for i in range(16)))
        sp &= ~15
        e = self.elf
        aux = [(AT["PHDR"], e.phdr_vaddr), (AT["PHENT"], e.phentsize), (AT["PHNUM"], e.phnum),
               (AT["PAGESZ"], PAGE), (AT["BASE"], 0), (AT["FLAGS"], 0), (AT["ENTRY"], e.entry),
               (AT["UID"], 0), (AT["EUID"], 0), (AT["GID"], 0), (AT["EGID"], 0),
               (AT["PLATFORM"], platform), (AT["HWCAP"], HWCAP), (AT["CLKTCK"], 100),
               (AT["SECURE"], 0), (AT["RANDOM"], rnd), (AT["HWCAP2"], 0), (AT["EXECFN"], strings[0]),
               (AT["NULL"], 0)]  # fmt: skip
        words = [len(argv), *strings[: len(argv)], 0, *strings[len(argv) :], 0]
        for k, v in aux:
            words += [k, v]
        if len(words) % 2:
            words.append(0)
        sp -= 4 * len(words)
        self.uc.mem_write(sp, struct.pack(f"<{len(words)}I", *words))
        self.uc.reg_write(A.UC_ARM_REG_CPSR, 0x10)      # user mode before SP (banked)
        self.uc.reg_write(A.UC_ARM_REG_SP, sp)
        self.uc.reg_write(A.UC_ARM_REG_PC, e.entry)

    # ---- registers and memory ---------------------------------------------------------
    @property
    def pc(self) -> int:
        return int(self.uc.reg_read(A.UC_ARM_REG_PC))

    def reg(self, n: int) -> int:
        return int(self.uc.reg_read(A.UC_ARM_REG_R0 + n)) if n < 13 else int(
            self.uc.reg_read([A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_PC][n - 13]))

    def set_reg(self, n: int, value: int) -> None:
        rid = A.UC_ARM_REG_R0 + n if n < 13 else [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_PC][n - 13]
        self.uc.reg_write(rid, value & 0xFFFFFFFF)

    def read(self, addr: int, n: int) -> bytes:
        return bytes(self.uc.mem_read(addr, n))

    def write(self, addr: int, data: bytes) -> None:
        self.uc.mem_write(addr, bytes(data))

    def cstring(self, addr: int, limit: int = 4096) -> str:
        out = bytearray()
        while len(out) < limit:
            chunk = self.read(addr + len(out), min(64, PAGE - ((addr + len(out)) % PAGE)))
            k = chunk.find(b"\0")
            if k >= 0:
                return (out + chunk[:k]).decode(errors="replace")
            out += chunk
        return out.decode(errors="replace")

    # ---- time ----------------------------------------------------------------------------
    @property
    def executed_in_run(self) -> int:
        return int(self._budget.executed) - self._run_start_exec

    def now_cycle(self) -> int:
        """Chip time (ME cycles) of the instruction executing now."""
        return self.cycle + self.executed_in_run * self.ratio.numerator // self.ratio.denominator

    # ---- running -------------------------------------------------------------------------
    def run(self, max_instructions: int) -> int:
        """Execute up to max_instructions (stops early on a blocking system call, exit,
        fault or breakpoint); return the number executed."""
        if self.state != "running" or max_instructions <= 0:
            return 0
        start = int(self._budget.executed)
        self._run_start_exec = start
        self._budget.limit = start + max_instructions
        self._stop_reason = None
        cpsr = int(self.uc.reg_read(A.UC_ARM_REG_CPSR))
        begin = self.pc | (1 if cpsr & 0x20 else 0)
        try:
            self.uc.emu_start(begin, 1)         # `until` 1: never reached in ARM state
        except UcError as e:
            sig = 4 if e.errno == U.UC_ERR_INSN_INVALID else 11
            what = "illegal instruction (SIGILL)" if sig == 4 else "segmentation fault (SIGSEGV)"
            self._crash(f"{what}: {e} at pc {self.pc:#x} ({self.where()})", sig)
        if self._bus_error is not None:
            self._crash(f"bus error (SIGBUS): {self._bus_error} at pc {self.pc:#x} ({self.where()})", 7)
            self._bus_error = None
        n = int(self._budget.executed) - start
        self.instructions += n
        return n

    def resume(self, result: int) -> None:
        """Finish the blocked system call with `result` and make the core runnable."""
        self.uc.reg_write(A.UC_ARM_REG_R0, result & 0xFFFFFFFF)
        self.wait = None
        if self.state == "waiting":
            self.state = "running"

    def block(self, wait: Wait) -> None:
        self.wait = wait
        self.state = "waiting"
        self.uc.emu_stop()

    def exit(self, code: int) -> None:
        self.exit_code = code
        self.state = "exited"
        self.uc.emu_stop()

    def bus_error(self, why: str) -> None:
        """A device access the chip refused (from an MMIO callback): SIGBUS.  The core is
        stopped here and the crash recorded once emu_start returned: inside the callback
        Unicorn's pc is still the translation block's, not the faulting instruction's."""
        self._bus_error = why
        self.uc.emu_stop()

    def _crash(self, why: str, sig: int = 11) -> None:
        self.fault = why
        self.state = "crashed"
        self.exit_code = 128 + sig
        self.uc.emu_stop()

    def _on_intr(self, uc: Any, intno: int, _user: Any) -> None:
        if intno == EXCP_SWI:
            self.syscalls += 1
            if self.kill_pending:         # the kernel delivers the signal on its way out of the call
                self.fault = "killed (SIGKILL)"
                self.exit(128 + 9)
                return
            self.linux.syscall()
            return
        names = {EXCP_UDEF: "illegal instruction (SIGILL)", EXCP_PREFETCH_ABORT: "prefetch abort (SIGSEGV)",
                 EXCP_DATA_ABORT: "data abort (SIGSEGV)"}  # fmt: skip
        self._crash(f"{names.get(intno, f'exception {intno}')} at pc {self.pc:#x} ({self.where()})",
                    4 if intno == EXCP_UDEF else 11)

    # ---- debugger view ----------------------------------------------------------------------
    def where(self, pc: int | None = None) -> str:
        pc = self.pc if pc is None else pc
        return self.elf.function_at(pc) or "?"

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "pc": self.pc, "function": self.where(),
                "waiting_on": self.wait.what if self.wait else None,
                "instructions": self.instructions, "syscalls": self.syscalls,
                "exit_code": self.exit_code, "fault": self.fault}  # fmt: skip
