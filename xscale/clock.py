"""Time and state shared by a System and the control program it runs, on either placement
(npkit.xscale.system's XScaleHost, npkit.xscale.gpe's GpeHost): the clock that follows
the chip, the chip config's `xscale:` section, and a program's state timeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npkit.emulator.binding import Chip

TIMELINE_MAX = 100_000     # state changes kept for a trace (oldest dropped first)


def note_state(timeline: list[tuple[int, str, str]], cycle: int, state: str, what: str) -> None:
    """A control program's state from `cycle` on ("running" | "waiting" | "exited" |
    "crashed", what it waits on), added to its timeline when it changed."""
    last = timeline[-1]
    if (last[1], last[2]) != (state, what):
        if len(timeline) >= TIMELINE_MAX:
            del timeline[: TIMELINE_MAX // 10]
        timeline.append((cycle, state, what))


def xscale_config(chip: Chip) -> dict[str, Any]:
    """The chip config's `xscale:` section with defaults."""
    raw = dict(chip.config.get("xscale") or {})
    raw.setdefault("clock_mhz", 700)
    raw.setdefault("quantum", 20000)
    raw.setdefault("gpe_link_latency_ns", 1000)
    raw.setdefault("gpe_reply_timeout_s", 60)
    return raw


class Clock:
    """Emulated time of a System: follows the chip, and runs on alone once the chip halted."""

    def __init__(self, chip: Chip) -> None:
        self.chip = chip
        self.now = chip.cycle

    def run_chip(self, cycles: int) -> str:
        if cycles <= 0:
            return "budget"
        reason = self.chip.run_raw(cycles)
        if reason == "halted":
            self.now += cycles       # no ME left: time goes on for the control processor
        else:
            self.now = max(self.now, self.chip.cycle)
        return reason
