"""Operand and source checks found missing by the exploratory QA pass, and the shape of
their messages: context-relative register ranges, unterminated comments, asr shifts,
.num_contexts twice, br=byte bank errors, a missing comma, binary input and long lines."""

from __future__ import annotations

import pytest

from npkit.asm.disasm import Words, disassemble
from npkit.asm.errors import AsmError, SourceLoc, format_diagnostic
from npkit.asm.isa import EncodeError, decode, encode

from .helpers import asm, texts

# (instruction, the relative register out of range in 8-context mode): every operand
# position and field kind -- unrestricted, restricted, transfer, next-neighbour
RELATIVE_ABOVE_15 = [
    ("immed[a16, 0x1616]", "a16"),
    ("immed[b17, 0x1717]", "b17"),
    ("alu[$$16, --, b, 1]", "$$16"),
    ("alu[a0, --, b, b31]", "b31"),
    ("alu[a0, a20, +, b1]", "a20"),
    ("alu[n$16, --, b, 1]", "n$16"),
    ("alu_shf[a20, --, b, b1, <<2]", "a20"),
    ("alu_shf[a2, --, b, b31, <<2]", "b31"),
    ("ld_field[a1, 0001, $20]", "$20"),
    ("br_bset[a17, 3, x#]", "a17"),
    ("br=byte[b16, 1, 3, x#]", "b16"),
    ("jump[a16, x#]", "a16"),
    ("local_csr_wr[ctx_enables, a16]", "a16"),
    ("mul_step[a16, b1], 32x32_step1", "a16"),
    ("asr[a16, b1, >>3]", "a16"),
    ("sram[read, $16, a0, 0, 1], ctx_swap[s1]", "$16"),
    ("dram[read, $$16, a0, 0, 1], ctx_swap[s1]", "$$16"),
    ("sram[read, $1, a16, 0, 1], ctx_swap[s1]", "a16"),
]


def _program(ins: str, head: str = "") -> str:
    return f"{head}    {ins}\nx#:\n    halt\n"


@pytest.mark.parametrize(("ins", "reg"), RELATIVE_ABOVE_15)
def test_relative_registers_above_15_are_errors_in_8_context_mode(ins: str, reg: str) -> None:
    with pytest.raises(AsmError) as e:
        asm(_program(ins))
    what = {"$": "transfer", "n": "next-neighbour"}.get(reg[0], "relative")
    assert e.value.message.startswith(f"{what}") and f"{reg} out of range in 8-context mode (0-15)" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == 1
    assert e.value.loc.col == 5 + ins.index(reg)  # the caret is under the register
    # in 4-context mode a context has 32 of each: the same instruction assembles
    assert len(asm(_program(ins, ".num_contexts 4\n")).program.words) == 2


def test_the_register_range_error_has_the_line_and_a_caret() -> None:
    with pytest.raises(AsmError) as e:
        asm("    br!=ctx[0, idle#]\n    immed[a16, 0x1616]\nidle#:\n    ctx_arb[kill]\n")
    assert str(e.value).splitlines() == [
        "t.uc:2:11: error: relative register a16 out of range in 8-context mode (0-15)",
        "        immed[a16, 0x1616]",
        "              ^",
    ]


def test_registers_0_to_15_and_absolute_registers_stay_valid_in_8_context_mode() -> None:
    a = asm(_program("alu[a15, a14, +, @b40]\n    alu[$$15, --, B, n$15]"))
    assert texts(a)[1] == "alu[$$15, --, B, n$15]"
    assert "a15" in texts(a)[0] and "a14" in texts(a)[0] and "@b40" in texts(a)[0]


def test_init_and_set_of_a_register_number_above_15_in_8_context_mode() -> None:
    for src in (".init a20 5\n    halt\n", ".set a21\n    halt\n", ".init $17 3\n    halt\n"):
        with pytest.raises(AsmError, match=r"out of range in 8-context mode \(0-15\)"):
            asm(src)
        assert asm(".num_contexts 4\n" + src).program.ctx_mode == 4


def test_encoder_checks_the_context_mode_and_disassembly_keeps_such_words_as_data() -> None:
    word = encode("alu[a16, --, b, 1]", ctx_mode=4)
    with pytest.raises(EncodeError, match="a16 out of range in 8-context mode"):
        encode("alu[a16, --, b, 1]", ctx_mode=8)
    assert decode(word, 8) == "alu[a16, --, B, 1]"  # the bit pattern: ctx 1's a0 from ctx 0
    # in an 8-context image the word is not something the assembler writes: it stays a
    # .word, so the disassembly still reassembles to the same word
    text = disassemble(Words([word, encode("halt")], 8))
    assert f".word 0x{word:010x}" in text and "8-context mode" in text
    assert asm(text).program.words == [word, encode("halt")]


def test_unterminated_block_comment_is_an_error_at_its_start() -> None:
    with pytest.raises(AsmError) as e:
        asm("    alu[a0, --, b, 1]  /* unterminated comment\n    halt\n    alu[a1, --, b, 2]\n")
    assert e.value.message == "unterminated comment"
    assert e.value.loc is not None and (e.value.loc.line, e.value.loc.col) == (1, 24)
    # a closed comment followed by one that stays open: the open one is reported
    with pytest.raises(AsmError) as e:
        asm("/* a\n b */ /* c\n    halt\n")
    assert e.value.loc is not None and (e.value.loc.line, e.value.loc.col) == (2, 7)
    # closed ones are fine, across lines too
    assert len(asm("    alu[a0, --, b, 1] /* x\n y */ halt /* z */\n").program.words) == 2


@pytest.mark.parametrize("shift", ["<<3", ">>rot3", "<<rot3", "<<indirect", ">>0"])
def test_asr_takes_only_a_right_shift(shift: str) -> None:
    src = f"    asr[a2, a1, {shift}]\n    halt\n"
    with pytest.raises(AsmError) as e:
        asm(src)
    assert e.value.message == "asr takes a right shift of 1-31 or >>indirect"
    assert e.value.loc is not None and e.value.loc.col == 17


def test_asr_right_shifts_assemble() -> None:
    a = asm("    asr[a2, a1, >>3]\n    asr[a2, a1, >>indirect]\n    asr[a2, a1, >> 31]\n")
    assert texts(a) == ["asr[a2, a1, >>3]", "asr[a2, a1, >>indirect]", "asr[a2, a1, >>31]"]


def test_num_contexts_twice() -> None:
    with pytest.raises(AsmError) as e:
        asm(".num_contexts 4\n.num_contexts 8\n    halt\n")
    assert e.value.message == ".num_contexts 8 contradicts .num_contexts 4 at t.uc:1:1"
    assert e.value.loc is not None and e.value.loc.line == 2
    assert asm(".num_contexts 4\n.num_contexts 4\n    halt\n").program.ctx_mode == 4


def test_br_byte_bank_error_names_the_mnemonic_and_the_registers() -> None:
    with pytest.raises(AsmError) as e:
        asm("    br!=byte[b1, 3, b2, x#]\nx#: halt\n")
    assert e.value.message.startswith("br!=byte: with a register as the compare value")
    assert "got b1 and b2" in e.value.message
    assert e.value.loc is not None and e.value.loc.col == 21  # the compare value in bank B
    with pytest.raises(AsmError) as e:
        asm("    br=byte[a1, 3, a2, x#]\nx#: halt\n")
    assert e.value.message.startswith("br=byte:") and "got a1 and a2" in e.value.message
    assert e.value.loc is not None and e.value.loc.col == 13  # the register tested in bank A
    # allocated registers: the message says which source name became which register
    with pytest.raises(AsmError) as e:
        asm(".reg y\n    br!=byte[a1, 3, y, l#]\nl#:\n    halt\n")
    assert e.value.message.startswith("br!=byte:") and "got a1 and a0 (y is a0)" in e.value.message
    # an absolute register is not a bank problem
    with pytest.raises(AsmError, match="absolute register @a1 is not allowed"):
        asm("    br=byte[@a1, 3, 7, x#]\nx#: halt\n")
    # "--" is neither a register to test nor a compare value (it used to encode as a0)
    with pytest.raises(AsmError, match="br=byte: the compare value is a register or a constant, not --"):
        asm("    br=byte[b1, 3, --, x#]\nx#: halt\n")
    with pytest.raises(AsmError, match="br!=byte: the first operand is the register tested, not --"):
        asm("    br!=byte[--, 3, 7, x#]\nx#: halt\n")
    # two constants share the one immediate MSB
    with pytest.raises(AsmError, match="share bit 7"):
        asm("    br=byte[5, 3, 0x85, x#]\nx#: halt\n")


def test_missing_comma_between_operands() -> None:
    with pytest.raises(AsmError) as e:
        asm("    alu[a0 --, b, 1]\n")
    assert e.value.message == "expected ',' between 'a0' and '--'"
    assert e.value.loc is not None and e.value.loc.col == 12
    with pytest.raises(AsmError, match="expected ',' between 'a0' and 'b0'"):
        asm("    sram[read, $1, a0 b0, 1], ctx_swap[s1]\n")
    # expressions with operators between their words are still expressions
    assert len(asm("    alu[a0, --, b, 1 << 3]\n    alu[a1, --, b, (1 + 2)]\n").program.words) == 2


def test_source_holding_a_nul_byte_is_rejected_in_one_line() -> None:
    with pytest.raises(AsmError) as e:
        asm("    halt\n  \0\0\0\0\n")
    assert str(e.value) == "t.uc:2:3: error: a NUL byte: a binary file, not assembler source"


def test_echoed_line_is_cut_around_the_caret_and_escapes_control_characters() -> None:
    long_line = "    " + "a" * 100_000 + "[a0]"
    text = format_diagnostic("error", "m", SourceLoc("f.uc", 1, 50_000, long_line))
    shown, caret = text.splitlines()[1:]
    assert len(shown) < 220 and shown.count("\u2026") == 2  # cut at both ends
    assert caret.index("^") < len(shown) and shown[caret.index("^")] == "a"
    text = format_diagnostic("error", "bad \x1b[2J", SourceLoc("f.uc", 3, 3, "a\x00b\x1bc"))
    assert text.splitlines() == ["f.uc:3:3: error: bad \\x1b[2J", "    a\\x00b\\x1bc", "         ^"]
    assert "\x00" not in text and "\x1b" not in text
    # short lines with tabs are shown as before, the caret under the column
    text = format_diagnostic("error", "m", SourceLoc("f.uc", 1, 2, "\tx"))
    assert text.splitlines()[1:] == ["            x", "            ^"]


def test_a_huge_unknown_mnemonic_is_quoted_short() -> None:
    with pytest.raises(AsmError) as e:
        asm("    " + "a" * 100_000 + "[a0]\n")
    assert len(str(e.value)) < 1000 and "unknown instruction 'aaa" in str(e.value)
