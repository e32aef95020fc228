"""A chip and its control processor on one clock.

    chip = Chip("ixp2800"); load_path(chip, "me.elf")
    system = System(chip)
    xs = system.attach_xscale("xscale/build/arm/xs_demo.elf")        # or placement="gpe"
    system.run(1_000_000)          # ME cycles, like chip.run; per slice from a traffic loop
    xs.stdout, xs.status()

Placement `xscale`: the program runs on the Unicorn XScale core in lockstep with
the microengines: the core runs a quantum of instructions at the chip's current
time, then the chip runs the ME cycles those instructions took (clock ratio
from the chip config, `xscale.clock_mhz`).  A core asleep in a system call costs
no host time: the chip runs alone (event-driven skips intact) until the wait's
deadline or, when it waits on the device, the cycle an interrupt is raised
(npk_xscale_irq_stop).

Quanta lie on a fixed grid of the core's instruction count (and end where the
core blocks), so how a caller slices System.run changes nothing in the run.
System.run stops exactly at the requested cycle; when the core's last quantum
ended past it the chip catches up first in the next call.

Placement `gpe`: the native build of the same program runs as a host process
(npkit.xscale.gpe).  Results are the same; only timing differs.

`System.run(cycles)` returns the chip's stop reason ("budget", "halted",
"breakpoint", ...); `System.cycle` is the emulated time in ME cycles.
"""

from __future__ import annotations

import bisect
import os
from collections import deque
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .clock import Clock, note_state, xscale_config
from .core import XScaleCore, XScaleError
from .device import Ixp2800Device
from .guest import Wait

if TYPE_CHECKING:
    from npkit.emulator.binding import Chip

PLACEMENTS = ("xscale", "gpe")


class XScaleHost:
    """The `xscale` placement: an XScaleCore co-run with the chip."""

    placement = "xscale"

    def __init__(self, chip: Chip, clock: Clock, program: str | os.PathLike[str], argv: list[str],
                 *, quantum: int | None = None, echo: Callable[[int, bytes], None] | None = None,
                 env: dict[str, str] | None = None, mounts: dict[str, Path] | None = None) -> None:  # fmt: skip
        cfg = xscale_config(chip)
        self.chip = chip
        self.clock = clock
        self.me_mhz, self.xs_mhz = int(chip.config["clock_mhz"]), int(cfg["clock_mhz"])
        self.ratio = Fraction(self.me_mhz, self.xs_mhz)
        self.quantum = int(quantum or cfg["quantum"])
        if self.quantum < 1:
            raise XScaleError("the XScale quantum must be at least one instruction")
        self.core = XScaleCore(program, argv, env, seed=int(chip.config.get("seed", 1)), ratio=self.ratio,
                               echo=echo, mounts=mounts)  # fmt: skip
        self.core.linux.me_mhz = int(chip.config["clock_mhz"])
        self.device = Ixp2800Device(chip, self.core.uc, self.core.bus_error)
        self.device.now_cycle = self.core.now_cycle
        self.core.linux.device = self.device
        self.core.cycle = clock.now
        self._rem = 0           # ME-cycle remainder (in 1/xs_mhz units) carried between quanta
        self._debt = 0          # ME cycles the core ran ahead of the chip (a quantum ends on a block boundary)
        self.quanta: deque[int] = deque([clock.now], maxlen=4096)  # the cycles the latest quanta began at
        self.gdb: Any = None
        self._closed = False
        self.wait_cycles = 0
        # (ME cycle, "running" | "waiting" | "exited" | "crashed", what it waits on): for a trace track
        self.timeline: list[tuple[int, str, str]] = [(clock.now, "running", "")]

    def _mark(self) -> None:
        core = self.core
        what = core.wait.what if core.wait is not None and core.state == "waiting" else ""
        note_state(self.timeline, core.now_cycle(), core.state, what)

    # -- results
    @property
    def stdout(self) -> bytes:
        return bytes(self.core.linux.stdout)

    @property
    def stderr(self) -> bytes:
        return bytes(self.core.linux.stderr)

    @property
    def state(self) -> str:
        return self.core.state

    @property
    def exit_code(self) -> int | None:
        return self.core.exit_code

    @property
    def instructions(self) -> int:
        return self.core.instructions

    def status(self, with_line: bool = False) -> dict[str, Any]:
        """PC, function, waiting on what, instructions executed ... (with_line: source
        file:line from DWARF, through arm-linux-gnueabi-addr2line)."""
        st = self.core.status()
        if with_line:
            st["line"] = self.core.elf.line_at(self.core.pc)
        st.update(placement=self.placement, wait_cycles=self.wait_cycles, interrupts=self.device.count,
                  unimplemented_syscalls={str(k): v for k, v in self.core.linux.unimplemented.items()})  # fmt: skip
        return st

    # -- co-running
    def advance(self, target: int) -> str:
        """Run chip and core together until emulated time `target` (ME cycles)."""
        clock, core = self.clock, self.core
        last = "budget"
        while clock.now < target:
            if self.gdb is not None:
                self.gdb.poll(self)
            if self._debt:
                start = clock.now
                reason = clock.run_chip(min(self._debt, target - clock.now))
                self._debt -= clock.now - start     # a breakpoint may stop the chip short of it
            elif core.state == "running":
                reason = self._quantum(target)
            elif core.state == "waiting" and core.wait is not None:
                reason = self._sleep(core.wait, target)
            else:
                reason = clock.run_chip(target - clock.now)
            if reason not in ("budget", "irq", "halted"):
                return reason
            last = "halted" if reason == "halted" else "budget"
        return last

    def _quantum(self, target: int) -> str:
        core, clock = self.core, self.clock
        core.cycle = clock.now
        if self.quanta[-1] != clock.now:
            self.quanta.append(clock.now)
        # quanta sit on a fixed grid of the core's instruction count, not on the caller's
        # slices, so how System.run is sliced does not change the interleaving
        n = core.run(self.quantum - core.instructions % self.quantum)
        if core.state != "running":
            self._mark()
        dt, self._rem = divmod(n * self.me_mhz + self._rem, self.xs_mhz)
        if core.state == "stopped" and self.gdb is not None:
            self.gdb.stopped(self)
        # the chip stops at the target, or at a breakpoint before it: the rest is owed
        start = clock.now
        reason = clock.run_chip(min(dt, target - clock.now))
        self._debt = dt - (clock.now - start)
        return reason

    def visible_from(self, cycle: int) -> int:
        """From which chip cycle the chip sees what the core wrote to its memories when its
        own clock read `cycle`: the start of the quantum that ran the write (the chip runs
        a quantum's cycles after it, the core's clock goes through them).  Recent quanta
        only: an older cycle is its own answer."""
        k = bisect.bisect_right(self.quanta, cycle) - 1
        return self.quanta[k] if k >= 0 else cycle

    def _sleep(self, wait: Wait, target: int) -> str:
        core, clock, chip = self.core, self.clock, self.chip
        core.cycle = clock.now
        core._run_start_exec = int(core._budget.executed)
        result = wait.retry()         # what the chip did while catching up with the core may do
        if result is not None:
            core.resume(result)
            self._mark()
            return "budget"
        wake = target if wait.deadline is None else max(clock.now, min(target, wait.deadline))
        # host sockets (wait.host) are looked at when the run slice ends: their input is
        # outside emulated time anyway
        start = clock.now
        if wait.irq:
            chip.xscale_irq_stop(0xFFFFFFFF)
        try:
            reason = clock.run_chip(wake - clock.now) if wake > clock.now else "budget"
        finally:
            if wait.irq:
                chip.xscale_irq_stop(0)
        self.wait_cycles += clock.now - start
        core.cycle = clock.now
        core._run_start_exec = int(core._budget.executed)
        result = wait.retry()
        if result is not None:
            core.resume(result)
            self._mark()
        elif wait.deadline is None and not wait.host and reason == "halted" and clock.now >= target:
            return "halted"
        return reason

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.gdb is not None:
            self.gdb.close()
        linux = self.core.linux
        for start, end, kind in list(linux.maps):       # unmap the chip's memories before they go
            if kind == "device":
                linux.sys_munmap(start, end - start)
        linux.close_all()


EXIT_RESTART = 75     # a program that exits with this status asks to be started again


class System:
    """One chip plus (optionally) its control processor, advanced together.

    Supervision (for a daemon): with `respawn`, a program that exits with status 75 is
    started again at once; `kill_at` / `restart_at` (ME cycles) kill it (no clean-up of
    its own: fault injection) and start it again, at exactly those cycles.  Restarts
    start the same program with the same arguments (a new process: memory and open
    files gone, the chip's memories as they are); `starts` counts them."""

    def __init__(self, chip: Chip, *, respawn: bool = False, kill_at: int | None = None,
                 restart_at: int | None = None) -> None:  # fmt: skip
        self.chip = chip
        self.clock = Clock(chip)
        self.xscale: Any = None
        self.respawn = respawn
        self.kill_at = kill_at
        self.restart_at = restart_at
        self.killed = False
        self._killing = False
        self.starts = 0
        self.events: list[tuple[int, str]] = []     # (ME cycle, "killed" | "restarted" | "respawned")
        # called (ME cycle, "killed" | "exited") the instant the program is gone (killed, or
        # exited to be respawned), before anything else runs: to look at what it left
        self.on_stop: list[Callable[[int, str], None]] = []
        self._attach: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self.beside: Any = None     # a second gpe program (attach_beside)

    @property
    def cycle(self) -> int:
        return self.clock.now

    def attach_xscale(self, program: str | os.PathLike[str], argv: list[str] | None = None, *,
                      placement: str = "xscale", quantum: int | None = None,
                      echo: Callable[[int, bytes], None] | None = None, gdb_port: int | str | None = None,
                      link_latency_ns: int | None = None, env: dict[str, str] | None = None,
                      mounts: dict[str, Path] | None = None) -> Any:  # fmt: skip
        """Start `program` on the control processor; return its host object.

        placement "xscale": an ARM ELF on the Unicorn core; "gpe": the native build
        (when `program` is the ARM build under xscale/build/arm, its twin under
        xscale/build/gpe is used).  `mounts` (xscale only): guest directories that are
        host directories (npkit.xscale.core.XScaleCore)."""
        if self.xscale is not None:
            raise XScaleError("an XScale program is already attached")
        self._attach = ((program, argv), {"placement": placement, "quantum": quantum, "echo": echo,
                                          "link_latency_ns": link_latency_ns, "env": env, "mounts": mounts})  # fmt: skip
        if placement not in PLACEMENTS:
            raise XScaleError(f"unknown placement '{placement}' (known: {', '.join(PLACEMENTS)})")
        if not Path(program).exists():
            raise XScaleError(f"XScale program {program} does not exist")
        if placement == "xscale":
            host: Any = XScaleHost(self.chip, self.clock, program, list(argv or []), quantum=quantum,
                                   echo=echo, env=env, mounts=mounts)  # fmt: skip
            if gdb_port is not None:
                from .gdbstub import GdbStub

                host.gdb = GdbStub(host.core, gdb_port)
                host.gdb.wait_for_client()
        else:
            if gdb_port is not None:
                raise XScaleError("--xscale-gdb needs the xscale placement (attach gdb to a gpe process directly)")
            if mounts:
                raise XScaleError("mounts are for the xscale placement (a gpe process sees the host's files)")
            from .gpe import GpeHost

            host = GpeHost(self.chip, self.clock, program, list(argv or []), echo=echo,
                           link_latency_ns=link_latency_ns, env=env)  # fmt: skip
        self.xscale = host
        self._link_beside()
        self.starts += 1
        self.chip.set_driver(self.run)      # every loop that runs the chip now co-runs the XScale
        return host

    def attach_beside(self, program: str | os.PathLike[str], argv: list[str] | None = None, *,
                      echo: Callable[[int, bytes], None] | None = None, link_latency_ns: int | None = None,
                      env: dict[str, str] | None = None) -> Any:  # fmt: skip
        """Start a second program, as a host process (placement gpe), beside the attached
        one (which must be a gpe process too): one clock loop serves both links in
        emulated-time order (npkit.xscale.gpe, "beside").  It is not supervised (kill,
        restart and respawn are the first program's); return its host."""
        if self.xscale is None or self.xscale.placement != "gpe":
            raise XScaleError("a program beside another needs a first program on the gpe placement")
        if self.beside is not None:
            raise XScaleError("a second program is already attached beside the first")
        if not Path(program).exists():
            raise XScaleError(f"XScale program {program} does not exist")
        from .gpe import GpeHost

        self.beside = GpeHost(self.chip, self.clock, program, list(argv or []), echo=echo,
                              link_latency_ns=link_latency_ns, env=env)  # fmt: skip
        self._link_beside()
        return self.beside

    def _link_beside(self) -> None:
        if self.beside is None or self.xscale is None:
            return
        from .gpe import share_interrupts

        self.xscale.beside = self.beside
        share_interrupts([self.xscale, self.beside])

    def _run_alone(self, cycles: int) -> str:
        """Chip time while the first program is gone (killed): the one beside still runs."""
        if self.beside is not None and self.beside.state == "running":
            return self.beside.advance_beside(self.clock.now + cycles, False)
        return self.clock.run_chip(cycles)

    def _start_again(self, why: str) -> None:
        assert self._attach is not None
        (program, argv), kw = self._attach
        old = self.xscale
        timeline = old.timeline if old is not None else []
        if old is not None:
            old.beside = None          # the one beside lives on
            old.close()
        self.xscale = None
        self.killed = False
        self.attach_xscale(program, argv, **kw)
        self.xscale.timeline[:0] = timeline
        self.events.append((self.clock.now, why))

    def _kill_now(self) -> None:
        now = self.clock.now
        self.kill_at = None
        self._killing = False
        self.xscale.beside = None          # the one beside lives on
        self.xscale.close()
        self.xscale.timeline.append((now, "killed", ""))
        self.killed = True
        self.events.append((now, "killed"))
        for fn in self.on_stop:
            fn(now, "killed")

    def _supervise(self) -> None:
        """Kill at kill_at as a SIGKILL is taken: at once when the program is in a system
        call (asleep), else at its next call (xscale: the next SWI; gpe: its next wait on
        the device) -- never between two of its own instructions, as a real kernel
        delivers a signal on its way back to user space, here only at call boundaries."""
        now = self.clock.now
        host = self.xscale
        if self.kill_at is not None and now >= self.kill_at and not self.killed and host is not None:
            asleep = host.state == "waiting" if host.placement == "xscale" else host.at_wait()
            if asleep or host.state in ("exited", "crashed"):
                self._kill_now()
            elif host.placement == "xscale":
                host.core.kill_pending = True
                self._killing = True
        if self._killing and host is not None and host.state in ("exited", "crashed", "waiting"):
            self._kill_now()
        if self.killed and self.restart_at is not None and now >= self.restart_at:
            self.restart_at = None
            self._start_again("restarted")
        host = self.xscale
        if (self.respawn and not self.killed and host is not None and host.state == "exited"
                and host.exit_code == EXIT_RESTART):  # fmt: skip
            for fn in self.on_stop:
                fn(self.clock.now, "exited")
            self._start_again("respawned")

    def run(self, cycles: int) -> str:
        """Advance chip and control processor by `cycles` ME cycles."""
        target = self.clock.now + int(cycles)
        if self.xscale is None and self.kill_at is None and self.restart_at is None:
            return self.clock.run_chip(int(cycles))
        last = "budget"
        while self.clock.now < target:
            stop = target
            for t in (self.kill_at, self.restart_at):
                if t is not None and self.clock.now < t < stop:
                    stop = t
            if self._killing and stop - self.clock.now > 1000:
                stop = self.clock.now + 1000          # look again soon: the kill waits for a call
            if self.killed or self.xscale is None:
                reason = self._run_alone(stop - self.clock.now)
            else:
                reason = self.xscale.advance(stop)
            self._supervise()
            if reason not in ("budget", "halted", "irq"):
                return reason
            last = "halted" if reason == "halted" else "budget"
        return last

    def run_until_exit(self, max_cycles: int, slice_cycles: int = 1_000_000) -> str:
        """Run until the control program ended (returns "exited"), a chip stop, or max_cycles ("budget")."""
        end = self.clock.now + max_cycles
        while self.clock.now < end:
            if self.xscale is not None and self.xscale.state in ("exited", "crashed"):
                return "exited"
            reason = self.run(min(slice_cycles, end - self.clock.now))
            if reason not in ("budget", "halted"):
                return reason
        return "exited" if self.xscale is not None and self.xscale.state in ("exited", "crashed") else "budget"

    def status(self) -> dict[str, Any] | None:
        if self.xscale is None:
            return None
        st = dict(self.xscale.status())
        if self.killed:
            st.update(state="killed", waiting_on=None)
        st["starts"] = self.starts
        if self.beside is not None:
            st["beside"] = self.beside.status()
        return st

    def close(self) -> None:
        if self.chip.driver == self.run:
            self.chip.set_driver(None)
        if self.xscale is not None:
            self.xscale.close()
        if self.beside is not None:
            self.beside.close()
