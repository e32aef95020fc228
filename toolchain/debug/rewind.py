"""Going back in `npk debug` (`back N`, `reverse-step N`): a log of what the session did
to the chip, replayed on the target built again from scratch.

Every call by which the session changes the chip goes through a Recorder: the runs (with
their exact cycle budgets, as the run loop sliced them), the steps of a thread, the
debugger's own writes (`set`), and the breakpoints and watchpoints added and deleted
(they decide where a run stops, inside a cycle).  After each call the Recorder notes the
chip's cycle, its history hash (npk_history_hash: every event the chip recorded, so
every instruction of every thread, summed up) and each thread's instruction count.

Everything else that reaches the chip is fixed when the target is opened: the images,
the traffic handed to the MSF device up front, the route changes the control daemon
applies at their times, the exception path's reader (a chip service on the cycle grid)
and the XScale, whose quanta lie on a fixed grid of its instruction count whatever the
slicing of the runs (npkit.xscale.system).  The emulator is deterministic, so the same
calls on the target opened again reach the same state; each replayed call is checked
against what the session noted (cycle and hash), and a difference is an error, never a
wrong state.  See docs/debugging.md, "Going back".
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npkit.emulator.binding import Chip

from .target import Target


class RewindError(ValueError):
    """The session cannot go back there; the message says why."""


@dataclass
class Action:
    """One call that changed the chip, what the chip answered, and the chip after it."""

    kind: str  # a key of APPLY
    args: tuple[Any, ...]
    result: Any  # run: the stop reason; bp_add / wp_add: the id
    cycle: int
    hash: int
    repeat: int = 1  # made this many times in a row (runs of one budget that used it up)

    def text(self) -> str:
        times = f" ({self.repeat} times)" if self.repeat > 1 else ""
        return f"{self.kind} {' '.join(str(a) for a in self.args)}".strip() + times


def _step(chip: Chip, me: int, ctx: int) -> None:
    """npk_step as the debugger calls it: its own return code is not an error (it stops
    early at a breakpoint; last_stop says why)."""
    chip.lib.npk_step(chip._chip, me, ctx)


def _bp_add(chip: Chip, pc: int, me: int, ctx: int) -> int:
    return chip.add_breakpoint(pc, me=me, ctx=ctx)


def _wp_add(chip: Chip, what: str, me: int, ctx: int, length: int) -> int:
    return chip.add_watchpoint(what, me=me, ctx=ctx, length=length)


def _bp_pass_clear(chip: Chip, me: int) -> int:
    return int(chip.lib.npk_bp_resume_clear(chip._chip, me))


APPLY: dict[str, Callable[..., Any]] = {
    "run": Chip.run,
    "step": _step,
    "set_reg": Chip.set_reg,
    "mem_write": Chip.mem_write,
    "bp_add": _bp_add,
    "bp_del": Chip.del_breakpoint,
    "wp_add": _wp_add,
    "wp_del": Chip.del_watchpoint,
    "bp_pass_clear": _bp_pass_clear,
}


def not_rewindable(target: Target) -> str:
    """Why the session on `target` cannot go back ('' when it can)."""
    if target.reopen is None:
        return "this target was not opened from files (it cannot be built again to replay the session)"
    if target.not_again:
        return target.not_again
    if target.control is not None and target.control.placement == "gpe":
        return ("the control plane runs as a native process (placement gpe): a host process outside "
                "emulated time, whose state cannot be rewound; link the layout with -D control=xscale "
                "(the daemon on the emulated XScale) to go back")  # fmt: skip
    return ""


class Recorder:
    """The chip's state-changing calls of a session, in order, with the chip after each."""

    def __init__(self, chip: Chip, mes: list[int]) -> None:
        self.chip = chip
        self.mes = list(mes)
        self.actions: list[Action] = []
        self.counts = array("Q")  # 8 per ME of `mes` after each action; the first row: at the start
        self.start = (chip.cycle, chip.history_hash())
        self.bps: set[int] = set()  # breakpoint and watchpoint ids live on the chip
        self.wps: set[int] = set()
        self._st = chip.ffi.new("npk_me_stats *")
        self._stale = False  # the last row of counts is older than the chip (a run repeated since)
        self.counts.extend(self._counts())

    # the calls, as the session makes them
    def run(self, cycles: int) -> str:
        return str(self.do("run", int(cycles)))

    def step(self, me: int, ctx: int) -> None:
        self.do("step", me, ctx)

    def set_reg(self, me: int, name: str, value: int, ctx: int) -> None:
        self.do("set_reg", me, name, value, ctx)

    def mem_write(self, space: str, addr: int, data: bytes) -> None:
        self.do("mem_write", space, addr, bytes(data))

    def add_breakpoint(self, pc: int, me: int = -1, ctx: int = -1) -> int:
        return int(self.do("bp_add", pc, me, ctx))

    def del_breakpoint(self, bp_id: int) -> None:
        self.do("bp_del", bp_id)

    def add_watchpoint(self, what: str, me: int = -1, ctx: int = 0, length: int = 4) -> int:
        return int(self.do("wp_add", what, me, ctx, length))

    def del_watchpoint(self, wp_id: int) -> None:
        self.do("wp_del", wp_id)

    def do(self, kind: str, *args: Any) -> Any:
        last = self.actions[-1] if self.actions else None
        if last is not None and kind == last.kind == "run" and args == last.args and last.result == "budget":
            # runs of one budget after one that used it up (the debugger's one-cycle runs
            # while a stepped thread sleeps): one entry, whose counts are read when another
            # call comes (`back` finds a point inside it as inside any run)
            last.result = APPLY[kind](self.chip, *args)
            last.cycle, last.hash, last.repeat = self.chip.cycle, self.chip.history_hash(), last.repeat + 1
            self._stale = True
            return last.result
        self._flush()
        result = APPLY[kind](self.chip, *args)
        self.actions.append(Action(kind, args, result, self.chip.cycle, self.chip.history_hash()))
        self.counts.extend(self._counts())
        live = {"bp_add": self.bps, "wp_add": self.wps}.get(kind)
        if live is not None:
            live.add(result)
        elif kind in ("bp_del", "wp_del"):
            (self.bps if kind == "bp_del" else self.wps).discard(args[0])
        return result

    def _flush(self) -> None:
        if self._stale:
            width = 8 * len(self.mes)
            self.counts[len(self.counts) - width :] = array("Q", self._counts())
            self._stale = False

    def _counts(self) -> list[int]:
        out: list[int] = []
        for me in self.mes:
            self.chip.lib.npk_stats_me(self.chip._chip, me, self._st)
            out.extend(self.chip.ffi.unpack(self._st.ctx_instructions, 8))
        return out

    def count(self, me: int, ctx: int, row: int = -1) -> int:
        """Instructions ME:CTX had executed after action `row` (-1: now; 0: at the start)."""
        self._flush()
        width = 8 * len(self.mes)
        rows = len(self.counts) // width
        r = row % rows if row < 0 else row
        return int(self.counts[r * width + 8 * self.mes.index(me) + ctx])

    # going back
    def locate(self, me: int, ctx: int, n: int) -> tuple[int, int]:
        """(how many actions to replay whole, the instruction count to stop at) for the
        state N instructions of ME:CTX ago: just before it executes instruction K - N + 1
        (K: its count now), the latest moment it had executed K - N."""
        col = [self.count(me, ctx, r) for r in range(len(self.actions) + 1)]
        target = col[-1] - n
        if target < col[0]:
            raise RewindError(f"ME {self.chip.me_name(me)} ctx {ctx} executed {col[-1] - col[0]} instruction"
                              f"{'s' if col[-1] - col[0] != 1 else ''} since the session began, not {n}")  # fmt: skip
        return bisect_right(col, target) - 1, target

    def replay(self, fresh: Recorder, whole: int, target: int, me: int, ctx: int,
               after_each: Callable[[], None]) -> bool:  # fmt: skip
        """Make on `fresh` (a Recorder on the target opened again) the first `whole` calls
        of this session, each checked against what it did here, then, when ME:CTX's count
        `target` falls inside the next call, that call up to just before the thread's
        instruction target + 1 (True when it stopped inside that call)."""
        if fresh.start != self.start:
            raise RewindError(f"the target opened again starts at cycle {fresh.start[0]} with history hash "
                              f"{fresh.start[1]:#x}, not as this session did ({self.start[0]}, "
                              f"{self.start[1]:#x})")  # fmt: skip
        for i, a in enumerate(self.actions[:whole]):
            for _ in range(a.repeat):
                result = fresh.do(a.kind, *a.args)
                after_each()
            b = fresh.actions[-1]
            if (b.cycle, b.hash) != (a.cycle, a.hash) or (a.kind.endswith("_add") and result != a.result):
                raise RewindError(f"the replay parted from the session at its call {i + 1} of {len(self.actions)} "
                                  f"({a.text()}): cycle {b.cycle} history hash {b.hash:#x} instead of cycle "
                                  f"{a.cycle} hash {a.hash:#x}; something outside the images and the traffic "
                                  "changed what the chip does")  # fmt: skip
        if fresh.count(me, ctx) == target:
            return False
        fresh.finish_inside(self.actions[whole], target, me, ctx, after_each)
        return True

    def finish_inside(self, a: Action, target: int, me: int, ctx: int, after_each: Callable[[], None]) -> None:
        """Make call `a` (a run in which ME:CTX's count passes `target`) up to the moment
        the thread is about to execute instruction target + 1: a breakpoint for that thread
        at its next pc stops the chip there, as any breakpoint does (before the word, in the
        cycle it issues).  In between, runs of (target - count) cycles never pass the
        count: a thread executes at most one instruction a cycle."""
        if a.kind != "run":
            who = f"ME {self.chip.me_name(a.args[0])} ctx {a.args[1]}" if a.kind == "step" else a.kind
            raise RewindError(f"that instruction ran while the session stepped {who}; go back to a "
                              "point before or after that step (history lists the cycles)")  # fmt: skip
        end = self.chip.cycle + int(a.args[0]) * a.repeat  # where run `a`, made next here, ends unless stopped
        while True:
            count = self.count(me, ctx)
            self._stop_before_next(me, ctx, end, after_each)
            if count == target:
                return
            self._run_for(min(target - count, end - self.chip.cycle), after_each)

    def _stop_before_next(self, me: int, ctx: int, end: int, after_each: Callable[[], None]) -> None:
        """Run until ME:CTX is about to execute its next word (at most to cycle `end`).  The
        pass a breakpoint stop leaves its ME (npk_bp_resume_clear) is dropped first, so the
        stop cannot be skipped; a breakpoint that stops another thread instead is one the
        session's run went past: the run goes on (a stop and a resume change nothing)."""
        bp = self.add_breakpoint(self.chip.reg(me, "pc", ctx), me, ctx)
        self.do("bp_pass_clear", me)
        try:
            while True:
                reason = self.run(max(0, end - self.chip.cycle))
                after_each()
                st = self.chip.last_stop()
                if reason == "breakpoint" and (st["id"] == bp or (st["me"], st["ctx"]) == (me, ctx)):
                    return
                if reason != "breakpoint" or self.chip.cycle >= end:
                    raise RewindError(f"the replay did not reach the next instruction of ME {self.chip.me_name(me)} ctx {ctx} "
                                      f"within the session's run (it stopped: {reason} at cycle {self.chip.cycle})")  # fmt: skip
        finally:
            self.del_breakpoint(bp)

    def _run_for(self, cycles: int, after_each: Callable[[], None]) -> None:
        """Run `cycles` cycles, on past breakpoint stops the session's run did not make."""
        end = self.chip.cycle + cycles
        while self.chip.cycle < end:
            reason = self.run(end - self.chip.cycle)
            after_each()
            if reason not in ("budget", "breakpoint"):
                raise RewindError(f"the replay stopped ({reason}) at cycle {self.chip.cycle} where the session's "
                                  "run went on")  # fmt: skip
