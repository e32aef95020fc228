"""The `gpe` placement: the program's native build runs as a host Linux process
attached to the running emulator through the same device interface
(xscale/lib/npk_xscale.c with NPK_GPE).

The process inherits the chip's memfds (SRAM, DRAM, scratch: shared with the
emulator, no copies) and one end of a Unix socket pair, the link.  Each CSR
access or interrupt wait is a request on the link (npk_gpe_proto.h).  The
emulator serves requests in emulated time: a request takes effect, and its
answer reaches the process, `link latency` after it was sent; an interrupt
wait is answered `link latency` after the interrupt.  While the process
computes the chip does not move, so a run is deterministic: results equal the
xscale placement's, timing differs.  The process must reach the device (a CSR
access or a wait) to let emulated time pass.

Two processes (the SPP's GPE: i3d and npkd, each its slice's slow path) share one
clock loop: the second runs *beside* the first (`beside`): every stretch of chip time
the first lets pass goes through the second's `advance`, which serves the second's
requests at their due cycles on the way (so both are served in emulated-time order),
and returns early on an interrupt when the first waits for one.  Interrupts go to both
(a shared sample: each process's UIO count sees every one; a wake-up meant for the
other finds nothing to do and waits again).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.asm.base.reading import open_regular

from .clock import Clock, note_state, xscale_config
from .core import XScaleError
from .device import ChipWindows, DeviceFault

if TYPE_CHECKING:
    from npkit.emulator.binding import Chip

READ, WRITE, SWAP, WAIT, WAIT_UNTIL = 1, 2, 3, 4, 5
MSG = struct.Struct("=IIII")


def native_twin(program: str | os.PathLike[str]) -> Path:
    """xscale/build/arm/NAME.elf -> xscale/build/gpe/NAME (other paths: unchanged)."""
    p = Path(program)
    if p.suffix == ".elf" and p.parent.name == "arm":
        twin = p.parent.parent / "gpe" / p.stem
        if twin.exists():
            return twin
    return p


class GpeHost:
    def __init__(self, chip: Chip, clock: Clock, program: str | os.PathLike[str], argv: list[str], *,
                 echo: Callable[[int, bytes], None] | None = None, link_latency_ns: int | None = None,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.placement = "gpe"
        self.chip = chip
        self.clock = clock
        self.echo = echo
        self.windows = ChipWindows(chip)
        self.windows.now_cycle = lambda: clock.now
        ns = link_latency_ns if link_latency_ns is not None else int(xscale_config(chip)["gpe_link_latency_ns"])
        self.latency = max(0, int(ns) * int(chip.config["clock_mhz"]) // 1000)
        self.program = native_twin(program).resolve()
        with open_regular(self.program, error=XScaleError, what="gpe program") as f:
            if f.read(4) == b"\x7fELF" and f.read(1) == b"\x01":
                raise XScaleError(f"{self.program} is a 32-bit (ARM) build: the gpe placement runs the native "
                                  "build (`npk xscale build --gpe`)")
        fds = [chip.backing(n)[3] for n in ("sram", "dram", "scratch")]
        if min(fds) < 0:
            raise XScaleError("the chip's memories are not in memfds: the gpe placement cannot share them")
        self.link, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # host seconds the emulator waits (blocked in recv, no CPU) for the process's next
        # request: emulated time stands still while it computes, so no cycle budget can end the wait
        self.reply_timeout_s = float(xscale_config(chip)["gpe_reply_timeout_s"])
        self.link.settimeout(self.reply_timeout_s)
        spec = ",".join(str(x) for x in [child.fileno(), *fds, int(chip.config["sram_channel_bytes"])])
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        self._out_pos = self._err_pos = 0
        self.stdout_buf = bytearray()
        self.stderr_buf = bytearray()
        self.proc = subprocess.Popen([str(self.program), *argv], stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err, pass_fds=[child.fileno(), *fds],
                                     env={**os.environ, **(env or {}), "NPK_GPE": spec})  # fmt: skip
        child.close()
        self.pending: tuple[int, int, int, int] | None = None   # (op, addr, value, due cycle)
        self.deadline: int | None = None         # a WAIT_UNTIL's deadline (ME cycle)
        self._irq_due: int | None = None         # a wait's interrupt came: answer at this cycle
        self.requests = 0
        self.wait_cycles = 0
        self.exit_code: int | None = None
        self.fault: str | None = None
        self.state = "running"
        # (ME cycle, "running" | "waiting" | "exited" | "crashed", what it waits on): a kill
        # and a trace's XScale track read it, as of the xscale placement
        self.timeline: list[tuple[int, str, str]] = [(clock.now, "running", "")]
        self.beside: GpeHost | None = None   # a second process running beside this one
        self._beside_irq = False              # this one waits for an interrupt (beside's runs stop on one)
        self.outer_irq = False                # (as the one beside) the other waits for an interrupt

    # -- results
    def _drain_output(self) -> None:
        for f, attr, fd in ((self._out, "_out_pos", 1), (self._err, "_err_pos", 2)):
            f.seek(getattr(self, attr))
            data = f.read()
            if data:
                setattr(self, attr, getattr(self, attr) + len(data))
                (self.stdout_buf if fd == 1 else self.stderr_buf).extend(data)
                if self.echo is not None:
                    self.echo(fd, data)

    @property
    def stdout(self) -> bytes:
        self._drain_output()
        return bytes(self.stdout_buf)

    @property
    def stderr(self) -> bytes:
        self._drain_output()
        return bytes(self.stderr_buf)

    @property
    def instructions(self) -> int:
        return 0

    def visible_from(self, cycle: int) -> int:
        """What the process writes to the shared memories the chip sees at once: emulated
        time stands still while it runs (XScaleHost.visible_from)."""
        return cycle

    def status(self) -> dict[str, Any]:
        waiting = None
        if self.pending is not None:
            waiting = "interrupt" if self.pending[0] == WAIT else f"link request {self.pending[0]}"
        return {"placement": "gpe", "state": self.state, "pid": self.proc.pid, "requests": self.requests,
                "waiting_on": waiting, "wait_cycles": self.wait_cycles, "interrupts": self.windows.count,
                "exit_code": self.exit_code, "fault": self.fault, "latency_cycles": self.latency}  # fmt: skip

    # -- the link
    def _receive(self) -> bool:
        """Wait (host time) for the process's next request; False when it has ended."""
        data = b""
        try:
            while len(data) < MSG.size:
                chunk = self.link.recv(MSG.size - len(data))
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            raise XScaleError(f"the gpe process {self.proc.pid} sent no request for {self.reply_timeout_s:g} s of "
                              "host time (it must reach the device to let emulated time pass; the cycle budget "
                              "cannot end a process that computes without reaching it; the limit is the chip "
                              "config's xscale.gpe_reply_timeout_s)") from None  # fmt: skip
        if len(data) < MSG.size:
            self.exit_code = self.proc.wait()
            self.state = "exited" if self.exit_code >= 0 else "crashed"
            self._note(self.state)
            self._drain_output()
            return False
        op, addr, value, pad = MSG.unpack(data)
        self.requests += 1
        self.pending = (op, addr, value, self.clock.now + self.latency)
        self.deadline = None
        if op == WAIT_UNTIL:     # the emulated deadline in ns, as ME cycles (rounded up)
            ns = addr | pad << 32
            self.deadline = None if ns == (1 << 64) - 1 else -(-ns * int(self.chip.config["clock_mhz"]) // 1000)
        if op in (WAIT, WAIT_UNTIL):
            self._note("waiting", "interrupt")
        return True

    def _note(self, state: str, what: str = "") -> None:
        note_state(self.timeline, self.clock.now, state, what)

    def _reply(self, status: int, value: int) -> None:
        self.link.sendall(MSG.pack(status & 0xFFFFFFFF, 0, value & 0xFFFFFFFF, 0))
        self.pending = None
        self._irq_due = None
        self._note("running")

    def advance(self, target: int) -> str:
        clock = self.clock
        while clock.now < target:
            if self.state != "running":
                return self._run_chip(target - clock.now)
            if self.pending is None and not self._receive():
                continue
            assert self.pending is not None
            op, addr, value, due = self.pending
            if op in (WAIT, WAIT_UNTIL):
                reason = self._wait(value, target)
            else:
                if due > clock.now:
                    reason = self._run_chip(min(due, target) - clock.now)
                    if clock.now < due:
                        if reason not in ("budget", "halted"):
                            return reason
                        continue
                else:
                    reason = "budget"
                try:
                    result = self._access(op, addr, value)
                except DeviceFault as e:
                    self._bus_error(str(e))
                    continue
                self._reply(0 if op in (READ, WRITE, SWAP) else -22, result)
            if reason not in ("budget", "irq", "halted") or (reason == "irq" and self.outer_irq):
                return reason
        self._drain_output()
        return "budget"

    # -- a second process beside this one (the module docstring)
    def _run_chip(self, cycles: int) -> str:
        """Let `cycles` of chip time pass: the chip's, or the process beside's advance."""
        if cycles <= 0:
            return "budget"
        if self.beside is not None and self.beside.state == "running":
            return self.beside.advance_beside(self.clock.now + cycles, self._beside_irq)
        if self.outer_irq:
            self.chip.xscale_irq_stop(0xFFFFFFFF)
        return self.clock.run_chip(cycles)

    def _irq_stop(self, on: bool) -> None:
        if self.beside is not None and self.beside.state == "running":
            self._beside_irq = on
        else:
            self.chip.xscale_irq_stop(0xFFFFFFFF if on or self.outer_irq else 0)

    def advance_beside(self, target: int, outer_irq: bool) -> str:
        """As the process beside another: run to `target`, serving this one's requests; back
        early ("irq") on an interrupt when the other waits for one."""
        self.outer_irq = outer_irq
        try:
            return self.advance(target)
        finally:
            self.outer_irq = False
            self.chip.xscale_irq_stop(0)

    def _access(self, op: int, addr: int, value: int) -> int:
        w = self.windows
        result = w.read(addr) if op == READ else w.swap(addr, value) if op == SWAP else 0
        if op == WRITE:
            w.write(addr, value)
        return result

    def _bus_error(self, why: str) -> None:
        """A request the chip refused: the process gets a SIGBUS, as a bad access on the part would."""
        self.proc.send_signal(signal.SIGBUS)
        self.proc.wait()
        self.pending = None
        self.exit_code = 128 + signal.SIGBUS
        self.state = "crashed"
        self._note(self.state)
        self.fault = f"bus error (SIGBUS): {why}"
        self._drain_output()

    def _wait(self, seen: int, target: int) -> str:
        """WAIT / WAIT_UNTIL: the answer leaves `latency` after the interrupt (status 1),
        or at the deadline (status 0, WAIT_UNTIL only)."""
        clock, w = self.clock, self.windows
        assert self.pending is not None
        start = clock.now
        w.sample()
        reason = "budget"
        if self._irq_due is None and w.count == seen:
            deadline = self.deadline
            if deadline is not None and clock.now >= deadline:
                self._reply(0, w.count)
                return reason
            self._irq_stop(True)
            try:
                reason = self._run_chip((target if deadline is None else min(target, deadline)) - clock.now)
            finally:
                self._irq_stop(False)
            w.sample()
            if w.count == seen:
                self.wait_cycles += clock.now - start
                if deadline is not None and clock.now >= deadline:
                    self._reply(0, w.count)
                return reason
            self._irq_due = clock.now + self.latency
        due = self._irq_due if self._irq_due is not None else self.pending[3]
        if due > clock.now:
            reason = self._run_chip(min(due, target) - clock.now)
        self.wait_cycles += clock.now - start
        if clock.now >= due:
            w.seen = w.count
            self._reply(1, w.count)
        return reason

    def at_wait(self) -> bool:
        """True when the process is blocked waiting on the device (where a kill is taken)."""
        return self.pending is not None and self.pending[0] in (WAIT, WAIT_UNTIL)

    def close(self) -> None:
        if self.beside is not None:
            self.beside.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.link.close()
        self._drain_output()


def share_interrupts(hosts: list[GpeHost]) -> None:
    """Every interrupt the chip raises is counted by each host's windows (one sample for all)."""
    windows = [h.windows for h in hosts]
    first = windows[0]
    raw_sample = type(first).sample

    def sample() -> int:
        bits = raw_sample(first)
        if bits:
            for w in windows[1:]:
                w.raw[0] |= bits & 0xFFFF
                w.raw[1] |= bits >> 16
                w.count += bin(bits).count("1")
        return bits

    for w in windows:
        w.sample = sample  # type: ignore[method-assign]
