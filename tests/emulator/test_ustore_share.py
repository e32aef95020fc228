"""MEs loaded with the same control store share its pre-decoded words (chip.c
npk_load_ustore); a word one of them writes (local_csr_wr USTORE_DATA_UPPER) or a new load
on one of them changes only that ME's program."""

from __future__ import annotations

import pytest

from npkit.asm.isa import encode
from npkit.emulator.binding import Chip

from .util import assemble

OLD, NEW = 0x11, 0x22
# b1 = 1: write NEW's word over target# (USTORE_ADDRESS a4, the word's low 32 bits a2, high
# 8 bits a3); b1 = 0: wait (two SRAM reads) until the writer has written, then run target#
SELF_WRITE = [
    "alu[--, b1, -, 0]", "beq[wait#]",
    "local_csr_wr[USTORE_ADDRESS, a4]", "nop", "nop", "nop",
    "local_csr_wr[USTORE_DATA_LOWER, a2]", "nop", "nop", "nop",
    "local_csr_wr[USTORE_DATA_UPPER, a3]", "nop", "nop", "nop",
    "br[target#]",
    "wait#: sram[read, $0, a5, 0, 1], ctx_swap[s1]",   # (the words after a completion run
    "sram[read, $0, a5, 0, 1], ctx_swap[s1]",          # after what came before it: no run-ahead)
    f"target#: immed[a1, {OLD:#x}]",
    "ctx_arb[kill]",
]  # fmt: skip
TARGET = 17  # target#'s address in SELF_WRITE


def _chip_running(words: list[int], mes: list[int]) -> Chip:
    chip = Chip("ixp2800")
    new_word = encode(f"immed[a1, {NEW:#x}]")
    for me in mes:
        chip.load(me, words)
    for me in mes:
        chip.set_reg(me, "a2", new_word & 0xFFFFFFFF)
        chip.set_reg(me, "a3", new_word >> 32)
        chip.set_reg(me, "a4", TARGET)
        chip.enable(me, 1)
    return chip


@pytest.mark.parametrize("writer", [0, 1, 2])
def test_a_word_written_changes_only_its_mes_program(writer: int) -> None:
    words = assemble(SELF_WRITE)
    assert words[TARGET] == encode(f"immed[a1, {OLD:#x}]")
    chip = _chip_running(words, [0, 1, 2])  # 1 and 2 share 0's pre-decoded words
    for me in (0, 1, 2):
        chip.set_reg(me, "b1", int(me == writer))
    chip.run(2000)
    for me in (0, 1, 2):
        assert chip.ctx_state(me, 0) == "inactive", me  # (killed: done)
        assert chip.reg(me, "a1") == (NEW if me == writer else OLD), me


def test_a_new_load_changes_only_its_mes_program() -> None:
    same = assemble(["immed[a1, 0x11]", "ctx_arb[kill]"])
    chip = Chip("ixp2800")
    for me in (0, 1, 2):
        chip.load(me, same)
    chip.load(0, assemble(["immed[a1, 0x33]", "ctx_arb[kill]"]))  # the one the others shared
    chip.load(1, assemble(["immed[a1, 0x44]", "ctx_arb[kill]"]))
    chip.load(3, same)
    for me in range(4):
        chip.enable(me, 1)
    chip.run(100)
    assert [chip.reg(me, "a1") for me in range(4)] == [0x33, 0x44, 0x11, 0x11]
