"""Python binding of the C emulator core (cffi, ABI mode).

    from npkit.emulator.binding import Chip
    chip = Chip("ixp2800")                 # or a path to a config YAML
    chip.load(0, words, ctx_mode=8)
    chip.enable(0, 0xFF)
    chip.run(10_000)
    chip.reg(0, "a3", ctx=2); chip.mem_read("sram", 0x100, 16); chip.stats()

The declarations come from emulator/include/npk_emu.h and npk_msf.h (the blocks
between CDEF-BEGIN and CDEF-END), the library from emulator/build/libnpkemu.so
(override with NPKEMU_LIB).  Configs are YAML files in emulator/configs.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import me_names
from .cffi_cache import ffi_for

HERE = Path(__file__).resolve().parent
HEADERS = (HERE / "include" / "npk_emu.h", HERE / "include" / "npk_msf.h")
LIBRARY = HERE / "build" / "libnpkemu.so"
CONFIG_DIR = HERE / "configs"

class EmulatorError(RuntimeError):
    pass


def cdef_block(header: Path, error: type[Exception] = EmulatorError) -> str:
    """The declarations cffi reads from a C header: what stands between CDEF-BEGIN and
    CDEF-END (emulator/include/*.h, emulator/pkt/npk_pkt.h)."""
    m = re.search(r"/\* CDEF-BEGIN \*/(.*)/\* CDEF-END \*/", header.read_text(), re.S)
    if not m:
        raise error(f"{header} has no CDEF block")
    return m.group(1)


def _cdef_text() -> str:
    """The CDEF blocks of the C API headers, in order (npk_msf.h builds on npk_emu.h)."""
    return "\n".join(cdef_block(header) for header in HEADERS)


@lru_cache(maxsize=1)
def _ffi() -> Any:
    return ffi_for("npkemu", _cdef_text())


@lru_cache(maxsize=1)
def _lib() -> tuple[Any, Any]:
    ffi = _ffi()
    path = Path(os.environ.get("NPKEMU_LIB") or str(LIBRARY))   # (set but empty: the default)
    if not path.exists():
        raise EmulatorError(
            f"emulator library {path} is missing: run `make` at the top of the tree "
            "(or `make -C emulator PY=.venv/bin/python`)"
        )
    return ffi, ffi.dlopen(str(path))


# ---- the C API's constants, read from its headers (no copies) ---------------------------

_C = _ffi().dlopen(None)  # the integer constants of the CDEF blocks (needs no library)


def _enum(prefix: str, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """NPK_<PREFIX>_NAME constants as {"name": value}, in value order."""
    items = [(n[len(prefix):].lower(), int(getattr(_C, n))) for n in dir(_C) if n.startswith(prefix)]
    return dict(sorted(((k, v) for k, v in items if k not in skip), key=lambda kv: kv[1]))


UNITS = list(_enum("NPK_UNIT_", ("count",)))  # unit names by NPK_UNIT_* number
MEM_SPACES = _enum("NPK_MEM_")
CTX_STATES = {v: k for k, v in _enum("NPK_CTX_").items()}
STOP_REASONS = {v: k for k, v in _enum("NPK_STOP_").items()}
ME_STATES = {v: k for k, v in _enum("NPK_ME_").items()}
EVENT_KINDS = {v: k for k, v in _enum("NPK_EV_").items()}
FAULT_KINDS = list(_enum("NPK_FAULT_", ("kinds", "log")))  # fault kinds by NPK_FAULT_* number
ERRORS = {_C.NPK_EINVAL: "invalid argument", _C.NPK_ERANGE: "out of range", _C.NPK_ENOMEM: "out of memory",
          _C.NPK_ESTATE: "wrong state"}  # fmt: skip

# register kinds (npk_reg_read / npk_reg_write)
K_GPR_A, K_GPR_B, K_NN, K_LM = _C.NPK_REG_GPR_A, _C.NPK_REG_GPR_B, _C.NPK_REG_NN, _C.NPK_REG_LM
K_SIN, K_SOUT, K_DIN, K_DOUT = _C.NPK_REG_SXFER_IN, _C.NPK_REG_SXFER_OUT, _C.NPK_REG_DXFER_IN, _C.NPK_REG_DXFER_OUT
K_CAM_TAG, K_CAM_STATE, K_CSR, K_PC = _C.NPK_REG_CAM_TAG, _C.NPK_REG_CAM_STATE, _C.NPK_REG_CSR, _C.NPK_REG_PC
K_CC, K_SIG, K_STATE, K_WAIT = _C.NPK_REG_CC, _C.NPK_REG_SIGNALS, _C.NPK_REG_CTX_STATE, _C.NPK_REG_WAIT_MASK
PC_UNIT = _C.NPK_PC_UNIT  # npk_stop_info.pc of a register written by a memory unit's completion


# ---- configuration --------------------------------------------------------------

def _fields(ctype: str) -> list[tuple[str, str]]:
    """(name, kind) of the fields of a C API struct: kind primitive, struct or array."""
    return [(name, f.type.kind) for name, f in _ffi().typeof(ctype).fields]


def config_path(name_or_path: str | os.PathLike[str]) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    cand = CONFIG_DIR / f"{name_or_path}.yaml"
    if not cand.exists():
        known = ", ".join(sorted(x.stem for x in CONFIG_DIR.glob("*.yaml")))
        raise EmulatorError(f"unknown chip config '{name_or_path}' (known: {known})")
    return cand


def load_config(name_or_path: str | os.PathLike[str] = "ixp2800", **overrides: Any) -> dict[str, Any]:
    """Read a config YAML, checked against its schema (emulator/config_schema.py), into a
    dict; keyword overrides replace top-level keys (units={"sram": {...}} and msf={...}
    replace single fields of a unit).  A config may name another as its `base` and give
    only what differs (mappings such as units and msf merge key by key):
    examples/chips/ixp2800_sram64.yaml is ixp2800 with 64 MB SRAM channels.  Raises
    EmulatorError `file:line: field: problem`."""
    from npkit.asm.base.cache import checked

    path = config_path(name_or_path)
    return checked("chip-config/1", [str(path), overrides], lambda: _checked_config(path, overrides))


def _checked_config(path: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """load_config without the cache."""
    # the schema (and pydantic) only when the cache has no result for this config
    from npkit.asm.base.schema import validate

    from .config_schema import ChipConfig

    located = _read_located(path, ())
    raw = located.data
    if overrides and isinstance(raw, dict):
        raw = dict(raw)
        for k, v in overrides.items():
            if k in ("units", "msf") and isinstance(v, dict) and isinstance(raw.get(k), dict):
                merged = dict(raw[k])
                for sub, fields in v.items():
                    if k == "units" and isinstance(fields, dict) and isinstance(merged.get(sub), dict):
                        merged[sub] = {**merged[sub], **fields}
                        located.unlocated.update({(k, sub, f): f"the override {k}.{sub}.{f}" for f in fields})
                    else:
                        merged[sub] = fields
                        located.unlocated[(k, sub)] = f"the override {k}.{sub}"
                raw[k] = merged
            else:
                raw[k] = v
                located.unlocated[(k,)] = f"the override {k}={v!r}"
    cfg = validate(ChipConfig, raw, str(path), located=located, error=EmulatorError)
    return cfg.model_dump()


def _read_located(path: Path, seen: tuple[str, ...]) -> Any:
    """A chip config file as parsed, with its `base` (if any) merged underneath: keys
    only the base sets are reported against it, not against this file's lines."""
    from npkit.asm.base.reading import load_yaml

    located = load_yaml(path, error=EmulatorError, what="chip config")
    raw = located.data
    if not isinstance(raw, dict) or "base" not in raw:
        return located
    raw = dict(raw)
    base = raw.pop("base")
    if not isinstance(base, str):
        raise EmulatorError(f"{path}:{located.lines.get(('base',), '?')}: base: a chip config name or YAML file")
    if str(path) in seen:
        raise EmulatorError(f"{path}: `base` loops back to it")
    where = Path(base) if Path(base).is_absolute() or Path(base).suffix not in (".yaml", ".yml") else path.parent / base
    try:
        parent = _read_located(config_path(where), (*seen, str(path)))
    except EmulatorError as e:  # located at this file's `base:` (an unknown name, a missing file...)
        raise EmulatorError(f"{path}:{located.lines.get(('base',), '?')}: base: {e}") from None
    for key in parent.data if isinstance(parent.data, dict) else ():
        if key not in raw:
            located.unlocated[(key,)] = f"the base config {where}"
    located.data = _merge(copy.deepcopy(parent.data), raw)
    return located


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, mappings merged key by key."""
    for k, v in over.items():
        base[k] = _merge(dict(base[k]), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def _fill_config(ffi: Any, raw: dict[str, Any]) -> Any:
    """npk_config from a checked config dict, field by field as the C struct declares them
    (a unit's timing is a struct field named after the unit)."""
    cfg = ffi.new("npk_config *")
    name = str(raw.get("name", "chip")).encode()[:31]
    ffi.memmove(cfg.name, name, len(name))
    for field, kind in _fields("npk_config"):
        if field == "tcam":
            _fill_tcam(cfg.tcam, raw.get("tcam"))
        elif kind == "struct":
            dst = getattr(cfg, field)
            for f, _ in _fields("npk_unit_cfg"):
                setattr(dst, f, int(raw["units"][field][f]))
        elif field == "me_per_cluster":
            cfg.me_per_cluster = me_names.per_cluster(raw)
        elif kind == "primitive":
            setattr(cfg, field, int(raw[field]))
    return cfg


def _fill_tcam(dst: Any, tcam: dict[str, Any] | None) -> None:
    """npk_tcam_cfg from the config's `tcam:` block (None: no TCAM, present = 0)."""
    dst.present = 1 if tcam else 0
    for f, _ in _fields("npk_tcam_cfg"):
        if tcam and f != "present":
            setattr(dst, f, int(tcam[f]))


TCAM_KEY_WORDS = _C.NPK_TCAM_KEY_WORDS


def _tcam_words(words: list[int] | tuple[int, ...], what: str) -> list[int]:
    """A key or mask as the C API takes it: 9 longwords, MSB first (fewer: zeros after)."""
    if len(words) > TCAM_KEY_WORDS:
        raise EmulatorError(f"a TCAM {what} is at most {TCAM_KEY_WORDS} longwords, got {len(words)}")
    return [int(w) & 0xFFFFFFFF for w in words] + [0] * (TCAM_KEY_WORDS - len(words))


# ---- register names -----------------------------------------------------------------

# beyond the operand syntax (asm/isa/operands.py register_name): @ on transfer and
# next-neighbour registers (absolute), .in / .out (the half), local memory and CAM entries
_REG_EXTRA_RE = re.compile(r"^(?P<abs>@)?(?P<reg>\$\$?\d+|n\$\d+)(?P<half>\.(?:in|out))?$|^lm(?P<li>\d+)$|^cam(?P<ci>\d+)(?P<cs>\.state)?$")


@dataclass(frozen=True)
class RegRef:
    kind: int
    index: int
    per_ctx: bool = False


def parse_reg(name: str, ctx: int, ctx_mode: int) -> RegRef:
    """Map a register name to (kind, absolute index).

    a3 / b7 context-relative GPRs; @a5 absolute; $2 / $$5 transfer registers
    (read half; add .out for the write half); @$9 absolute; n$1 next-neighbour
    (relative), @n$9 absolute; lm12 local-memory word; cam3 / cam3.state;
    pc, cc, signals, state, wait; any local CSR name from mev2.yaml.  Register names
    are read as the assembler reads them (operands.register_name)."""
    from npkit.asm.isa import isa
    from npkit.asm.isa.operands import register_name

    t = name.strip()
    low = t.lower()
    base = ctx * 16 if ctx_mode == 8 else (ctx // 2) * 32
    special = {"pc": K_PC, "cc": K_CC, "signals": K_SIG, "sig": K_SIG, "state": K_STATE, "wait": K_WAIT}
    if low in special:
        return RegRef(special[low], 0, True)
    csrs = isa().local_csrs
    if t.upper() in csrs:
        return RegRef(K_CSR, csrs[t.upper()])
    m = _REG_EXTRA_RE.match(low)
    if m and m["li"] is not None:
        return RegRef(K_LM, int(m["li"]))
    if m and m["ci"] is not None:
        return RegRef(K_CAM_STATE if m["cs"] else K_CAM_TAG, int(m["ci"]))
    op = register_name(m["reg"] if m else low)
    if op is None:
        raise EmulatorError(f"unknown register '{name}'")
    if op.kind in ("gpr", "abs"):
        kind = K_GPR_A if op.bank == "a" else K_GPR_B
        if op.kind == "abs":
            if op.index > 127:
                raise EmulatorError(f"absolute register {name} out of range")
            return RegRef(kind, op.index)
        _check_relative(name, op.index, ctx_mode)
        return RegRef(kind, base + op.index)
    if not m["abs"]:
        _check_relative(name, op.index, ctx_mode)
    idx = op.index if m["abs"] else base + op.index
    if op.kind == "nn":
        if idx > 127:
            raise EmulatorError(f"next-neighbour register {name} out of range")
        return RegRef(K_NN, idx)
    out = m["half"] == ".out"
    kind = (K_DOUT if out else K_DIN) if op.kind == "dxfer" else (K_SOUT if out else K_SIN)
    if idx > 127:
        raise EmulatorError(f"transfer register {name} out of range")
    return RegRef(kind, idx)


def _check_relative(name: str, index: int, ctx_mode: int) -> None:
    """A context-relative register number within its context's (the assembler's rule)."""
    from npkit.asm.isa.operands import relative_registers

    per_ctx = relative_registers(ctx_mode)
    if index >= per_ctx:
        raise EmulatorError(f"relative register {name} out of range in {ctx_mode}-context mode "
                            f"(0..{per_ctx - 1} a context; @ names an absolute one)")  # fmt: skip


# ---- chip ------------------------------------------------------------------------------


@dataclass
class HistEvent:
    cycle: int
    me: int
    ctx: int
    kind: str
    unit: int
    a0: int
    a1: int


@dataclass
class _Service:
    fn: Callable[[], None]
    period: int
    next: int


class Chip:
    """One emulated chip.  Every method raises EmulatorError on a bad argument."""

    def __init__(self, config: str | os.PathLike[str] = "ixp2800", **overrides: Any):
        self.ffi, self.lib = _lib()
        self.config = load_config(config, **overrides)
        self._cfg = _fill_config(self.ffi, self.config)
        self._chip = self.lib.npk_create(self._cfg)
        if self._chip == self.ffi.NULL:
            raise EmulatorError(f"the emulator rejected config {config}")
        self.ctx_mode = [8] * int(self.config["num_me"])
        self._msf_keep: Any = None
        self._cb_error: Exception | None = None
        self._rings: dict[int, tuple[int, int, int]] = {}  # scratch ring -> (base, size, margin) as configured
        self._services: list[_Service] = []
        self._driver: Callable[[int], str] | None = None

    def close(self) -> None:
        if getattr(self, "_chip", None) is not None and self._chip != self.ffi.NULL:
            self.lib.npk_destroy(self._chip)
            self._chip = self.ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Chip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers
    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            err = self.ffi.string(self.lib.npk_last_error(self._chip)).decode()
            raise EmulatorError(f"{what}: {ERRORS.get(rc, rc)}" + (f" ({err})" if err else ""))
        return rc

    @property
    def num_me(self) -> int:
        return int(self.config["num_me"])

    # -- ME numbers: the C API and images use flat indices; users see the hardware's
    # cluster numbering (npkit.emulator.me_names)
    @property
    def me_per_cluster(self) -> int:
        return me_names.per_cluster(self.config)

    def me_name(self, me: int) -> str:
        """How ME `me` (flat index) is printed: '0x10'."""
        return me_names.me_name(me, self.me_per_cluster)

    def me_number(self, me: int) -> int:
        """The hardware ME number of flat index `me` (what ACTIVE_CTX_STS[7:3] reports)."""
        return self._check(self.lib.npk_me_number(self._chip, me), f"ME {me}")

    def me_index(self, name: str | int) -> int:
        """Flat index of an ME named '0x10', '1:0' or '8' (an int is a flat index)."""
        if isinstance(name, int):
            return me_names.parse_me(str(name), self.me_per_cluster, self.num_me)
        return me_names.parse_me(name, self.me_per_cluster, self.num_me)

    @property
    def cycle(self) -> int:
        return int(self.lib.npk_cycle(self._chip))

    def reset(self) -> None:
        self.lib.npk_reset(self._chip)
        self._rings.clear()

    # -- loading
    def load(self, me: int, words: list[int], ctx_mode: int = 8) -> None:
        buf = self.ffi.new("uint64_t[]", [int(w) for w in words] or [0])
        self._check(self.lib.npk_load_ustore(self._chip, me, buf, len(words), ctx_mode), f"load ME {me}")
        self.ctx_mode[me] = ctx_mode

    def enable(self, me: int, ctx_mask: int = 0xFF) -> None:
        self._check(self.lib.npk_me_enable(self._chip, me, ctx_mask), f"enable ME {me}")

    def set_signal(self, me: int, sig: int, ctx: int | None = None) -> None:
        self._check(self.lib.npk_set_signal(self._chip, me, -1 if ctx is None else ctx, sig), "set_signal")

    def me_status(self, me: int) -> dict[str, Any]:
        st = self.ffi.new("npk_me_info *")
        self._check(self.lib.npk_me_status(self._chip, me, st), "me_status")
        return {
            "state": ME_STATES.get(st.state, str(st.state)),
            "ctx": st.ctx,
            "pc": st.pc,
            "word": st.word,
            "cycle": st.cycle,
            "reason": self.ffi.string(st.reason).decode(),
        }

    # -- running
    def add_service(self, fn: Callable[[], None], period: int) -> None:
        """Call fn() whenever the chip's cycle count reaches a multiple of `period`.

        What the host does between slices of a run (the exception path's reader, later
        the XScale): every run loop (`npk run`, demo, debug, trace, why) goes through
        `run`, which stops at those boundaries, so a service runs in all of them at the
        same emulated cycles."""
        if period <= 0:
            raise ValueError("service period must be positive")
        self._services.append(_Service(fn, period, (self.cycle // period + 1) * period))

    def set_driver(self, driver: Callable[[int], str] | None) -> None:
        """Let `driver(cycles)` advance the chip from now on (None: back to the chip alone).

        A chip with a control processor (npkit.xscale.system.System) is advanced by the
        System, which runs the microengines through `run_raw` in lockstep with the
        XScale; every run loop keeps calling `run` and so co-runs the XScale too."""
        self._driver = driver

    @property
    def driver(self) -> Callable[[int], str] | None:
        return self._driver

    def run(self, cycles: int) -> str:
        """Run `cycles` cycles (fewer if the chip stops: breakpoint, halt, ...); with a
        driver (an attached control processor) the driver advances chip and processor."""
        if self._driver is not None:
            return self._driver(int(cycles))
        return self.run_raw(cycles)

    def run_raw(self, cycles: int) -> str:
        """The microengines (and chip services) alone, whatever driver is set."""
        if not self._services:
            return self._run(cycles)
        end = self.cycle + int(cycles)
        while True:
            due = min(s.next for s in self._services)
            reason = self._run(max(0, min(end, due) - self.cycle))
            now = self.cycle
            for s in self._services:
                if now >= s.next:
                    s.next = (now // s.period + 1) * s.period
                    s.fn()
            if reason != "budget" or now >= end:
                return reason

    def _run(self, cycles: int) -> str:
        reason = self.ffi.new("int *")
        self._check(self.lib.npk_run(self._chip, int(cycles), reason), "run")
        if self._cb_error is not None:
            err, self._cb_error = self._cb_error, None
            raise EmulatorError(f"MSF device callback failed: {err!r}") from err
        return STOP_REASONS.get(reason[0], str(reason[0]))

    def run_until_halt(self, max_cycles: int = 10_000_000) -> str:
        return self.run(max_cycles)

    def run_until(self, predicate: Any, max_cycles: int = 10_000_000, chunk: int = 1000) -> str:
        """Run in chunks of `chunk` cycles until predicate(chip) is true ("condition"),
        the chip stops for another reason, or max_cycles pass ("budget")."""
        start = self.cycle
        while self.cycle - start < max_cycles:
            if predicate(self):
                return "condition"
            reason = self.run(min(chunk, max_cycles - (self.cycle - start)))
            if reason != "budget":
                return reason
        return "condition" if predicate(self) else "budget"

    def step(self, me: int, ctx: int) -> None:
        self._check(self.lib.npk_step(self._chip, me, ctx), f"step ME {me} ctx {ctx}")

    def last_stop(self) -> dict[str, Any]:
        s = self.ffi.new("npk_stop_info *")
        self.lib.npk_last_stop(self._chip, s)
        return {"reason": STOP_REASONS.get(s.reason, str(s.reason)), "me": s.me, "ctx": s.ctx,
                "pc": s.pc, "id": s.id, "cycle": s.cycle}  # fmt: skip

    def add_breakpoint(self, pc: int, me: int = -1, ctx: int = -1) -> int:
        return self._check(self.lib.npk_bp_add(self._chip, me, ctx, pc), "breakpoint")

    def del_breakpoint(self, bp_id: int) -> None:
        self._check(self.lib.npk_bp_del(self._chip, bp_id), "delete breakpoint")

    def add_watchpoint(self, what: str, me: int = -1, ctx: int = 0, length: int = 4) -> int:
        """'sram:0x100' / 'dram:..' / 'scratch:..' for memory (stops on every write), else a
        register name: stops when a write changes its value, and last_stop() names the
        writing thread and pc (0xFFFFFFFF when a memory unit's completion wrote it)."""
        if ":" in what:
            space, addr = what.split(":", 1)
            if space not in MEM_SPACES:
                raise EmulatorError(f"unknown memory space '{space}'")
            return self._check(
                self.lib.npk_wp_add_mem(self._chip, MEM_SPACES[space], int(addr, 0), length), "watchpoint"
            )
        ref = self.reg_ref(me if me >= 0 else 0, what, ctx)
        return self._check(self.lib.npk_wp_add_reg(self._chip, me, ref.kind, ref.index), "watchpoint")

    def del_watchpoint(self, wp_id: int) -> None:
        self._check(self.lib.npk_wp_del(self._chip, wp_id), "delete watchpoint")

    # -- registers
    def reg_ref(self, me: int, name: str, ctx: int = 0, ctx_mode: int | None = None) -> RegRef:
        """parse_reg for ME, with local-memory and CAM indices checked against the config;
        `ctx_mode` reads the name as for a program of that mode (default: the ME's now)."""
        ref = parse_reg(name, ctx, self.ctx_mode[me] if ctx_mode is None else ctx_mode)
        for kinds, key, what in (((K_LM,), "lm_words", "local memory word"),
                                 ((K_CAM_TAG, K_CAM_STATE), "cam_entries", "CAM entry")):  # fmt: skip
            n = int(self.config[key])
            if ref.kind in kinds and ref.index >= n:
                raise EmulatorError(f"{what} {name} out of range (0..{n - 1})")
        return ref

    def reg(self, me: int, name: str, ctx: int = 0) -> int:
        ref = self.reg_ref(me, name, ctx)
        out = self.ffi.new("uint32_t *")
        self._check(self.lib.npk_reg_read(self._chip, me, ctx, ref.kind, ref.index, out), f"read {name}")
        return int(out[0])

    def set_reg(self, me: int, name: str, value: int, ctx: int = 0) -> None:
        ref = self.reg_ref(me, name, ctx)
        rc = self.lib.npk_reg_write(self._chip, me, ctx, ref.kind, ref.index, int(value) & 0xFFFFFFFF)
        self._check(rc, f"write {name}")

    def ctx_state(self, me: int, ctx: int) -> str:
        return CTX_STATES[self.reg(me, "state", ctx)]

    # -- memory
    def mem_read(self, space: str, addr: int, n: int) -> bytes:
        buf = self.ffi.new("uint8_t[]", max(n, 1))
        self._check(self.lib.npk_mem_read(self._chip, MEM_SPACES[space], addr, buf, n), f"read {space}")
        return bytes(self.ffi.buffer(buf, n))

    def mem_write(self, space: str, addr: int, data: bytes) -> None:
        buf = self.ffi.from_buffer(bytes(data) or b"\0")
        self._check(self.lib.npk_mem_write(self._chip, MEM_SPACES[space], addr, buf, len(data)), f"write {space}")

    def read32(self, space: str, addr: int) -> int:
        return int.from_bytes(self.mem_read(space, addr, 4), "big")

    def write32(self, space: str, addr: int, value: int) -> None:
        self.mem_write(space, addr, (value & 0xFFFFFFFF).to_bytes(4, "big"))

    def scratch_ring(self, ring: int, base: int, size_words: int, full_margin: int = 0) -> None:
        self._check(self.lib.npk_scratch_ring_config(self._chip, ring, base, size_words, full_margin), "ring")
        self._rings[ring] = (base, size_words, full_margin)

    def scratch_ring_count(self, ring: int) -> int:
        out = self.ffi.new("uint32_t *")
        self._check(self.lib.npk_scratch_ring_count(self._chip, ring, out), "ring count")
        return int(out[0])

    def scratch_ring_info(self, ring: int) -> dict[str, int]:
        """Configuration (as set through scratch_ring; size 0 = never configured) and count."""
        base, size, margin = self._rings.get(ring, (0, 0, 0))
        return {"base": base, "size": size, "full_margin": margin, "count": self.scratch_ring_count(ring)}

    def cap_csr(self, addr: int) -> int:
        out = self.ffi.new("uint32_t *")
        self._check(self.lib.npk_cap_csr_read(self._chip, addr, out), "cap csr")
        return int(out[0])

    def xscale_irq(self, clear: bool = False) -> int:
        return int(self.lib.npk_xscale_irq(self._chip, 1 if clear else 0))

    def xscale_irq_stop(self, mask: int) -> None:
        """Make run() return "irq" in the cycle an interrupt bit in `mask` is raised (0: never)."""
        self._check(self.lib.npk_xscale_irq_stop(self._chip, mask & 0xFFFFFFFF), "irq stop")

    def scratch_ring_get(self, ring: int) -> int | None:
        """The XScale's ring get: the oldest word, None when the ring is empty."""
        out = self.ffi.new("uint32_t *")
        return int(out[0]) if self._check(self.lib.npk_scratch_ring_get(self._chip, ring, out), "ring get") else None

    def scratch_ring_put(self, ring: int, word: int) -> bool:
        """The XScale's ring put: False when the ring is full (the word is dropped)."""
        return bool(self._check(self.lib.npk_scratch_ring_put(self._chip, ring, word & 0xFFFFFFFF), "ring put"))

    def backing(self, space: str) -> tuple[int, int, int, int]:
        """(address, size, mapped length, memfd or -1) of a memory's page-aligned backing store."""
        b = self.ffi.new("npk_backing *")
        self._check(self.lib.npk_mem_backing(self._chip, MEM_SPACES[space], b), "backing")
        return int(self.ffi.cast("uintptr_t", b.ptr)), int(b.size), int(b.mapped), int(b.fd)

    def msf_stub_counts(self) -> dict[str, int]:
        out = self.ffi.new("uint64_t[5]")
        self.lib.npk_msf_stub_counts(self._chip, out)
        return dict(zip(["read", "write", "fast_wr", "rbuf_rd", "tbuf_wr"], [int(x) for x in out], strict=True))

    # -- MSF plug-in
    def set_msf(self, device: Any | None) -> None:
        """Attach an MSF device implemented in Python (None = loopback stub).

        The device may define any of: read(me, ctx, addr, n) -> list[int],
        write(me, ctx, addr, words), fast_wr(me, addr, data),
        rbuf_rd(msf_addr, nbytes) -> bytes, tbuf_wr(msf_addr, data),
        next_event() -> int | None (next cycle it wants advance() called),
        advance(now) (may call chip.msf_deliver).  An exception raised in a
        callback stops nothing in C; it is re-raised by the next run()."""
        if device is None:
            self._msf_keep = None
            self.lib.npk_set_msf(self._chip, self.ffi.NULL)
            return
        ffi = self.ffi
        ops = ffi.new("npk_msf_ops *")
        keep: list[Any] = [ops]

        def cb(sig: str, fn: Any, default: Any = None) -> Any:
            f = ffi.callback(sig, guard(fn, default))
            keep.append(f)  # the callback lives as long as the device is attached
            return f

        def guard(fn: Any, default: Any = None) -> Any:
            def inner(*args: Any) -> Any:
                try:
                    return fn(*args)
                except Exception as e:  # noqa: BLE001 - reported by run()
                    if self._cb_error is None:
                        self._cb_error = e
                    return default

            return inner

        if hasattr(device, "read"):
            def _read(_u: Any, me: int, ctx: int, addr: int, words: Any, n: int) -> None:
                vals = list(device.read(me, ctx, addr, n))
                for i in range(n):
                    words[i] = int(vals[i]) & 0xFFFFFFFF if i < len(vals) else 0
            ops.read = cb("void(void *, int, int, uint32_t, uint32_t *, unsigned)", _read)
        if hasattr(device, "write"):
            def _write(_u: Any, me: int, ctx: int, addr: int, words: Any, n: int) -> None:
                device.write(me, ctx, addr, [int(words[i]) for i in range(n)])
            ops.write = cb("void(void *, int, int, uint32_t, const uint32_t *, unsigned)", _write)
        if hasattr(device, "fast_wr"):
            ops.fast_wr = cb("void(void *, int, uint32_t, uint32_t)",
                             lambda _u, me, addr, data: device.fast_wr(me, addr, data))
        if hasattr(device, "rbuf_rd"):
            def _rbuf(_u: Any, addr: int, buf: Any, n: int) -> None:
                data = bytes(device.rbuf_rd(addr, n))[:n]
                ffi.memmove(buf, data.ljust(n, b"\0"), n)
            ops.rbuf_rd = cb("void(void *, uint32_t, uint8_t *, unsigned)", _rbuf)
        if hasattr(device, "tbuf_wr"):
            ops.tbuf_wr = cb("void(void *, uint32_t, const uint8_t *, unsigned)",
                             lambda _u, addr, buf, n: device.tbuf_wr(addr, bytes(ffi.buffer(buf, n))))
        if hasattr(device, "next_event"):
            def _next(_u: Any) -> int:
                t = device.next_event()
                return (1 << 64) - 1 if t is None else int(t)
            ops.next_event = cb("uint64_t(void *)", _next, (1 << 64) - 1)
        if hasattr(device, "advance"):
            ops.advance = cb("void(void *, npk_chip *, uint64_t)", lambda _u, _c, now: device.advance(now))
        self._msf_keep = keep
        self._check(self.lib.npk_set_msf(self._chip, ops), "set_msf")

    def msf_deliver(self, me: int, ctx: int, xfer_abs: int, words: list[int], sig: int) -> None:
        """Write words into SRAM read-transfer registers from absolute index
        xfer_abs of ME `me` and raise signal `sig` of context `ctx`."""
        buf = self.ffi.new("uint32_t[]", [int(w) & 0xFFFFFFFF for w in words] or [0])
        self._check(self.lib.npk_msf_deliver(self._chip, me, ctx, xfer_abs, buf, len(words), sig), "msf_deliver")

    # -- TCAM (docs/tcam.md)
    def _tcam_call(self, rc: int, what: str) -> None:
        if rc == _C.NPK_ESTATE:
            raise EmulatorError(f"{what}: chip config {self.config.get('name', '')} has no TCAM "
                                "(a `tcam:` block: examples/chips/ixp2850_spp.yaml, docs/tcam.md)")  # fmt: skip
        self._check(rc, what)

    def tcam_info(self) -> dict[str, int] | None:
        """The chip's TCAM: {channel, window, base (its SRAM address), entries, key_bits,
        key_words, result_bits, lookup_latency, cycles_per_lookup}, or None without one."""
        cfg = self.ffi.new("npk_tcam_cfg *")
        base = self.ffi.new("uint32_t *")
        if self.lib.npk_tcam_info(self._chip, cfg, base) != 0:
            return None
        info = {f: int(getattr(cfg, f)) for f, _ in _fields("npk_tcam_cfg") if f != "present"}
        return {**info, "base": int(base[0]), "key_words": (info["key_bits"] + 31) // 32}

    def tcam_write(self, index: int, key: list[int], mask: list[int], result: int, valid: bool = True) -> None:
        """Entry `index`: key and mask (<= 9 longwords each, MSB first; mask bit 1 =
        compare), its 64-bit result, valid or not."""
        k = self.ffi.new("uint32_t[]", _tcam_words(key, "key"))
        m = self.ffi.new("uint32_t[]", _tcam_words(mask, "mask"))
        self._tcam_call(self.lib.npk_tcam_write(self._chip, index, k, m, int(result) & (2**64 - 1), 1 if valid else 0),
                    f"tcam entry {index}")  # fmt: skip

    def tcam_read(self, index: int) -> dict[str, Any]:
        """Entry `index`: {"key": [9 longwords], "mask": [...], "result": int, "valid": bool}."""
        k = self.ffi.new("uint32_t[]", TCAM_KEY_WORDS)
        m = self.ffi.new("uint32_t[]", TCAM_KEY_WORDS)
        r = self.ffi.new("uint64_t *")
        v = self.ffi.new("int *")
        self._tcam_call(self.lib.npk_tcam_read(self._chip, index, k, m, r, v), f"tcam entry {index}")
        return {"key": list(k), "mask": list(m), "result": int(r[0]), "valid": bool(v[0])}

    def tcam_invalidate(self, index: int) -> None:
        self._tcam_call(self.lib.npk_tcam_invalidate(self._chip, index), f"tcam entry {index}")

    def tcam_lookup(self, key: list[int]) -> dict[str, Any]:
        """The match alone (no timing, no counters): {"hit", "count", "index", "result"}."""
        k = self.ffi.new("uint32_t[]", _tcam_words(key, "key"))
        out = self.ffi.new("npk_tcam_result *")
        self._tcam_call(self.lib.npk_tcam_lookup(self._chip, k, out), "tcam lookup")
        return {"hit": bool(out.hit), "count": int(out.count), "index": int(out.index), "result": int(out.result)}

    def tcam_stats(self) -> dict[str, int]:
        """Lookups made by commands so far, how many hit, how many matched more than one entry."""
        st = self.ffi.new("npk_tcam_stats *")
        self._tcam_call(self.lib.npk_tcam_stats_get(self._chip, st), "tcam stats")
        return {"lookups": int(st.lookups), "hits": int(st.hits), "multi_hits": int(st.multi_hits)}

    # -- statistics
    def stats(self) -> dict[str, Any]:
        now = self.cycle
        mes = []
        ms = self.ffi.new("npk_me_stats *")
        for me in range(self.num_me):
            self.lib.npk_stats_me(self._chip, me, ms)
            mes.append({
                "me": me,
                "me_name": self.me_name(me),
                "status": self.me_status(me)["state"],
                "executing_cycles": ms.executing_cycles,
                "aborted_cycles": ms.aborted_cycles,
                "stalled_cycles": ms.stalled_cycles,
                "idle_cycles": ms.idle_cycles,
                "instructions": ms.instructions,
                "ctx_swaps": ms.ctx_swaps,
                "ctx": [{"instructions": ms.ctx_instructions[i], "sleep_cycles": ms.ctx_sleep_cycles[i],
                         "ready_cycles": ms.ctx_ready_cycles[i]} for i in range(8)],
            })  # fmt: skip
        units: dict[str, list[dict[str, float]]] = {}
        us = self.ffi.new("npk_unit_stats *")
        for u, name in enumerate(UNITS):
            chans = []
            for ch in range(self.lib.npk_unit_channels(self._chip, u)):
                self.lib.npk_stats_unit(self._chip, u, ch, us)
                chans.append({
                    "commands": us.commands, "bytes": us.bytes, "busy_cycles": us.busy_cycles,
                    "utilization": (us.busy_cycles / now) if now else 0.0,
                    "queue_max": us.queue_max,
                    "queue_mean": (us.queue_sum / us.commands) if us.commands else 0.0,
                })  # fmt: skip
            units[name] = chans
        return {"cycle": now, "config": self.config.get("name", ""), "mes": mes, "units": units}

    # -- faults
    def faults(self) -> dict[str, Any]:
        """Faults so far (npk_emu.h NPK_FAULT_*): {"total", "counts": {kind: n} (kinds seen),
        "last": [{cycle, me, ctx, pc, kind, address}, ...] oldest first}; me/ctx -1 = an API call."""
        counts = self.ffi.new("uint64_t[]", len(FAULT_KINDS))
        total = int(self.lib.npk_fault_counts(self._chip, counts, len(FAULT_KINDS)))
        log = self.ffi.new("npk_fault[]", self.lib.NPK_FAULT_LOG)
        n = self.lib.npk_fault_log(self._chip, log, self.lib.NPK_FAULT_LOG)
        last = [{"cycle": f.cycle, "me": f.me, "ctx": f.ctx, "pc": f.pc,
                 "kind": FAULT_KINDS[f.kind] if 0 <= f.kind < len(FAULT_KINDS) else str(f.kind),
                 "address": f.addr} for f in log[0:n]]  # fmt: skip
        return {"total": total, "counts": {k: int(counts[i]) for i, k in enumerate(FAULT_KINDS) if counts[i]},
                "last": last}  # fmt: skip

    # -- per-instruction profile
    def profile_enable(self, on: bool = True) -> None:
        """Count every instruction's executions (and conditional branches' taken ones) per
        ME and address (npk_profile_enable: the run takes the lock-step path, slower)."""
        self._check(self.lib.npk_profile_enable(self._chip, 1 if on else 0), "profile")

    def profile(self, me: int, n: int | None = None) -> tuple[list[int], list[int]]:
        """ME me's counts for addresses [0, n) (default: the control store): executions and
        taken branches; EmulatorError while the profile is off."""
        size = int(self.config["ustore_words"]) if n is None else n
        ex = self.ffi.new("uint64_t[]", max(1, size))
        tk = self.ffi.new("uint64_t[]", max(1, size))
        self._check(self.lib.npk_profile_read(self._chip, me, ex, tk, size), "profile (is it enabled?)")
        return [int(v) for v in ex[0:size]], [int(v) for v in tk[0:size]]

    # -- guarded scratch words
    def scratch_guard(self, base: int, allowed: list[bool]) -> None:
        """Guard len(allowed) scratch longwords from byte address `base`: a thread's write
        to one whose entry is False is recorded (`guard_hits`); [] disarms (npk_emu.h)."""
        bits = bytearray((len(allowed) + 7) // 8)
        for k, ok in enumerate(allowed):
            if ok:
                bits[k >> 3] |= 1 << (k & 7)
        buf = self.ffi.new("uint8_t[]", bytes(bits) or b"\0")
        self._check(self.lib.npk_scratch_guard(self._chip, base, len(allowed), buf), "scratch guard")

    def guard_hits(self) -> list[dict[str, int]]:
        """The guarded words written against the guard, first written first: {addr, count,
        cycle, me, ctx, pc} of the first write (me/ctx -1: not a thread)."""
        buf = self.ffi.new("npk_guard_hit[]", self.lib.NPK_GUARD_LOG)
        n = min(int(self.lib.npk_guard_hits(self._chip, buf, self.lib.NPK_GUARD_LOG)), self.lib.NPK_GUARD_LOG)
        return [{"addr": h.addr, "count": h.count, "cycle": h.cycle, "me": h.me, "ctx": h.ctx, "pc": h.pc}
                for h in buf[0:n]]  # fmt: skip

    # -- history
    def history_enable(self, level: int = 1) -> None:
        self._check(self.lib.npk_history_enable(self._chip, level), "history")

    def history(self, max_events: int = 1 << 20) -> list[HistEvent]:
        out: list[HistEvent] = []
        buf = self.ffi.new("npk_hist_event[]", 4096)
        while len(out) < max_events:
            n = self.lib.npk_history_drain(self._chip, buf, 4096)
            if n == 0:
                break
            for i in range(n):
                e = buf[i]
                out.append(HistEvent(e.cycle, e.me, e.ctx, EVENT_KINDS.get(e.kind, str(e.kind)), e.unit, e.a0, e.a1))
        return out

    def history_hash(self) -> int:
        return int(self.lib.npk_history_hash(self._chip))
