"""Guarded scratch words (npk_scratch_guard, issue 45): a thread's write to a word the guard
does not allow is carried out and recorded with the thread and PC of the instruction; a
write to an allowed word, or outside the guarded range, is not."""

from __future__ import annotations

import pytest

from npkit.emulator.binding import Chip, EmulatorError

from .util import chip_with

# ctx 0..7 of ME 0: incr of word 0x104 (pc 1), incr of 0x100 (pc 3), write to 0x108 (pc 4)
PROGRAM = ["immed[a0, 0x104]", "scratch[incr, --, a0, 0]", "immed[a0, 0x100]", "scratch[incr, --, a0, 0]",
           "scratch[write, $0, a0, 8, 1], ctx_swap[s1]", "halt"]  # fmt: skip


def test_writes_to_words_not_allowed_are_recorded_with_thread_and_pc() -> None:
    chip = chip_with({0: PROGRAM}, ctx_mask=0xFF)
    chip.scratch_guard(0x100, [True, False, True])
    chip.run(10_000)
    assert chip.read32("scratch", 0x104) == 8  # the write itself happened
    hits = chip.guard_hits()
    assert [(h["addr"], h["me"], h["pc"], h["count"]) for h in hits] == [(0x104, 0, 1, 8)]
    assert 0 <= hits[0]["ctx"] < 8


def test_unguarded_chip_records_nothing_and_bad_ranges_are_refused() -> None:
    chip = chip_with({0: PROGRAM}, ctx_mask=0xFF)
    chip.run(10_000)
    assert chip.read32("scratch", 0x104) == 8
    assert chip.guard_hits() == []
    with pytest.raises(EmulatorError):
        Chip("ixp2800").scratch_guard(0x102, [False])
    with pytest.raises(EmulatorError):
        Chip("ixp2800").scratch_guard(0x3FFC, [False, False])
