"""What the history records of memory commands say, read through mev2.yaml's command
table (the one the emulator executes with): a record keeps the unit and the cmd field."""

from __future__ import annotations

from npkit.asm.isa import isa
from npkit.asm.isa.model import MemCmd
from npkit.emulator.binding import UNITS, HistEvent


def unit_name(ev: HistEvent) -> str:
    return UNITS[ev.unit] if 0 <= ev.unit < len(UNITS) else str(ev.unit)


def commands(ev: HistEvent) -> list[MemCmd]:
    """The commands a mem_issue / mem_done record can be (its cmd field, any sub)."""
    return isa().commands_with_cmd(unit_name(ev), ev.a0 & 0xFF)


def command_name(ev: HistEvent) -> str:
    """`read`, `rbuf_rd`, `put/get` (one cmd field, several commands), or `cmd N`."""
    names = [c.name for c in commands(ev)]
    return "/".join(names) if names else f"cmd {ev.a0 & 0xFF}"


def is_command(ev: HistEvent, *names: str) -> bool:
    return any(c.name in names for c in commands(ev))


def names_descriptor(ev: HistEvent, kind: str) -> bool:
    """The record's address is an SRAM ring or queue descriptor (mev2.yaml `descriptor`)."""
    return any(c.descriptor == kind for c in commands(ev))
