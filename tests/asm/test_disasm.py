"""Disassembler: every input format, and assemble -> disassemble -> assemble gives identical words."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npkit.asm.assembler import assemble, assemble_text
from npkit.asm.disasm import Words, disassemble, read_words
from npkit.asm.errors import AsmError, Diagnostics
from npkit.toolchain.image import to_bytes

ROOT = Path(__file__).resolve().parents[2]
# every stand-alone program in the tree; the router blocks in microcode/ include the
# npk_sys.h that `npk link` writes, so they are round-tripped after linking, not here
SOURCES = sorted(p for d in ("examples", "tests/asm/data/progs") for p in (ROOT / d).rglob("*.uc"))


def test_the_tree_has_programs_to_round_trip() -> None:
    names = {p.name for p in SOURCES}
    assert {"hello.uc", "ring_ping.uc", "ring_pong.uc", "idioms.uc"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_round_trip_every_source(path: Path) -> None:
    first = assemble(path, include_dirs=[path.parent], diags=Diagnostics())
    words = first.program.words
    text = disassemble(
        Words(words, first.program.ctx_mode, first.program.labels(), first.program.name)
    )
    again = assemble_text(text, "disasm.uc", diags=Diagnostics())
    assert again.program.words == words
    assert again.program.ctx_mode == first.program.ctx_mode


def test_round_trip_four_context_mode() -> None:
    a = assemble_text(".num_contexts 4\n.reg read $x\n.reg y\n sram[read, $x, y, 0, 1], ctx_swap[s1]\n"
                      " alu[y, --, b, $x]\n alu[y, y, +, $25]\n", diags=Diagnostics())  # fmt: skip
    text = disassemble(Words(a.program.words, 4))
    assert ".num_contexts 4" in text
    assert assemble_text(text, diags=Diagnostics()).program.words == a.program.words


def test_labels_where_targets_land(tmp_path: Path) -> None:
    a = assemble_text(".reg x\nloop#: alu[x, x, -, 1]\n bne[loop#]\n br[99]\n", diags=Diagnostics())
    text = disassemble(Words(a.program.words))
    assert (
        "l0#:" in text and "bne[l0#]" in text and "br[99]" in text
    )  # past the end: kept as a number
    with_names = disassemble(Words(a.program.words, labels=a.program.labels()))
    assert "loop#:" in with_names and "bne[loop#]" in with_names


def test_elf_input_uses_image_labels(tmp_path: Path) -> None:
    a = assemble_text(".reg x\ntop#: alu[x, x, -, 1]\n bne[top#]\n", diags=Diagnostics())
    f = tmp_path / "p.elf"
    f.write_bytes(to_bytes(a.image))
    (prog,) = read_words(f)
    assert prog.words == a.program.words and "top#:" in disassemble(prog)


def test_hex_dump_input(tmp_path: Path) -> None:
    a = assemble_text(".reg x\n alu[x, x, +, 1]\n halt\n", diags=Diagnostics())
    f = tmp_path / "p.hex"
    f.write_text(
        "# dump\n" + "".join(f"{i:04x}: {w:010x}\n" for i, w in enumerate(a.program.words))
    )
    (prog,) = read_words(f)
    assert prog.words == a.program.words
    f.write_text("".join(f"0x{w:010x}\n" for w in a.program.words))
    assert read_words(f)[0].words == a.program.words


def test_c_array_input_five_bytes_per_word(tmp_path: Path) -> None:
    # two words in the layout of Linux's ixp2400_rx.ucode
    f = tmp_path / "u.ucode"
    f.write_text(
        "static struct code c = {\n\t.mask = 0x000003fe,\n\t.regs = (struct r []) {\n\t\t{ -1, -1 }\n"
        "\t},\n\t.insns = (u8 []) {\n 0xf0, 0x00, 0x0c, 0xc0, 0x05,\n 0xe0, 0x00, 0x02, 0x00, 0x00,\n}\n};\n"
    )
    (prog,) = read_words(f)
    assert prog.words == [0xF0000CC005, 0xE000020000]
    text = disassemble(prog, show_addr=True)
    assert "halt" in text and "; " in text
    assert assemble_text(text, diags=Diagnostics()).program.words == prog.words


def test_bad_inputs_are_located_errors(tmp_path: Path) -> None:
    f = tmp_path / "bad.hex"
    f.write_text("0x1234\nnot a word\n")
    with pytest.raises(AsmError) as e:
        read_words(f)
    assert e.value.loc is not None and e.value.loc.line == 2
    g = tmp_path / "bad.c"
    g.write_text("{ 0x01, 0x02, 0x03, }")
    with pytest.raises(AsmError, match="five bytes per word"):
        read_words(g)


def test_non_instructions_become_dot_word() -> None:
    text = disassemble(Words([0xFFFFFFFFFF, 0xC000000021, 0xE000020000]))
    assert ".word 0xffffffffff" in text and ".word 0xc000000021" in text and "halt" in text
    assert assemble_text(text, diags=Diagnostics()).program.words == [
        0xFFFFFFFFFF,
        0xC000000021,
        0xE000020000,
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, (1 << 40) - 1), min_size=1, max_size=12), st.sampled_from([4, 8]))
def test_any_words_round_trip_through_disassembly(words: list[int], ctx_mode: int) -> None:
    # bias toward real instructions: half the words get a random class pattern
    from npkit.toolchain.isa import isa

    classes = list(isa().classes.values())
    words = [(w & ~classes[w % len(classes)].mask) | classes[w % len(classes)].value if w & 1 else w
             for w in words]  # fmt: skip
    text = disassemble(Words(words, ctx_mode))
    assert assemble_text(text, diags=Diagnostics()).program.words == words
