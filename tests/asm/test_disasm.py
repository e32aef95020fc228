"""Disassembler: every input format, and assemble -> disassemble -> assemble gives identical words."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npkit.asm.assembler import assemble, assemble_text
from npkit.asm.disasm import Words, disassemble, pick, read_words
from npkit.asm.errors import AsmError, Diagnostics
from npkit.asm.image import to_bytes

ROOT = Path(__file__).resolve().parents[2]
# every stand-alone program in the tree; the router blocks in microcode/ include the
# npk_sys.h that `npk link` writes, so they are round-tripped after linking, not here
# (and so are the blocks of the example applications, examples/apps/*)
SOURCES = sorted(p for d in ("examples", "tests/asm/data/progs") for p in (ROOT / d).rglob("*.uc")
                 if not p.relative_to(ROOT).parts[:2] == ("examples", "apps"))  # fmt: skip


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
    from npkit.asm.isa import isa

    classes = list(isa().classes.values())
    words = [(w & ~classes[w % len(classes)].mask) | classes[w % len(classes)].value if w & 1 else w
             for w in words]  # fmt: skip
    text = disassemble(Words(words, ctx_mode))
    assert assemble_text(text, diags=Diagnostics()).program.words == words


@pytest.mark.parametrize("source", [
    "loop#:\n br[end#]\n halt\nend#:\n",  # a label as the last line
    ".reg x\n alu[x, x, +, 1]\n.if (x == 3)\n  alu[x, --, b, 0]\n.endif\n",  # leaves __sN_endif# last
])  # fmt: skip
def test_label_after_the_last_word_is_kept(source: str) -> None:
    a = assemble_text(source, diags=Diagnostics())
    end = len(a.program.words)
    assert end in a.program.labels()  # the label past the last word this test is about
    text = disassemble(Words(a.program.words, labels=a.program.labels()))
    assert text.rstrip().splitlines()[-1] == f"{a.program.labels()[end]}#:"
    assert assemble_text(text, diags=Diagnostics()).program.words == a.program.words


def _router() -> list[Words]:
    from npkit.toolchain.system.link import link

    return [Words(p.words, p.ctx_mode, p.labels(), p.name) for p in link("pipelined").programs]


@pytest.mark.parametrize("name", ["rx", "parse", "lookup", "hdr_format", "qm", "tx"])
def test_round_trip_every_program_of_the_linked_router(name: str) -> None:
    (prog,) = pick(_router(), name, "router.elf")
    again = assemble_text(disassemble(prog), f"{name}.uc", diags=Diagnostics())
    assert again.program.words == prog.words and again.program.ctx_mode == prog.ctx_mode


def test_pick_one_program_of_several() -> None:
    progs = [Words([0xE000020000], name="a"), Words([0xE000020000, 0xE000020000], name="b")]
    assert pick(progs, "b", "x.elf") == [progs[1]]
    assert pick(progs, None, "x.elf", every=True) == progs
    with pytest.raises(AsmError, match=r"x.elf holds 2 programs; pick one with --program \(a, b\)"):
        pick(progs, None, "x.elf")
    with pytest.raises(AsmError, match=r"no program 'c' in x.elf \(it holds: a, b\)"):
        pick(progs, "c", "x.elf")
    with pytest.raises(AsmError, match="raw words"):
        pick([Words([0xE000020000], raw=True)], "a", "w.hex")


def _branch_and_halt() -> list[int]:
    return assemble_text("br[end#]\nend#: halt\n", diags=Diagnostics()).program.words


def test_hex_dump_words_go_to_their_addresses(tmp_path: Path) -> None:
    br, halt = _branch_and_halt()
    f = tmp_path / "o.hex"
    f.write_text(f"1: {halt:010x}\n0: {br:010x}\n")  # out of order
    (prog,) = read_words(f)
    assert prog.words == [br, halt]
    text = disassemble(prog)
    assert "br[l1#]" in text  # the target is the word the dump puts at 1
    assert assemble_text(text, diags=Diagnostics()).program.words == [br, halt]
    f.write_text(f"0: {br:010x}\n{halt:010x}\n")  # a line without an address follows the one before
    assert read_words(f)[0].words == [br, halt]


@pytest.mark.parametrize(("dump", "line", "message"), [
    ("0: {br}\n1: {halt}\n0: {halt}\n", 3, r"address 0x0 is given twice \(first on line 1\)"),
    ("0: {br}\n{halt}\n1: {halt}\n", 3, r"address 0x1 is given twice \(first on line 2\)"),
    ("0: {br}\n# a gap\n5: {halt}\n", 3, r"no words at 0x1\.\.0x4 \(this line is at 0x5\): .*no \.org"),
    ("3: {halt}\n2: {br}\n", 2, r"no words at 0x0\.\.0x1 \(this line is at 0x2\)"),
    ("0: {br}\n2: {halt}\n", 2, r"no word at 0x1 "),
])  # fmt: skip
def test_hex_dump_addresses_given_twice_or_with_gaps_are_errors(tmp_path: Path, dump: str, line: int,
                                                                message: str) -> None:  # fmt: skip
    br, halt = _branch_and_halt()
    f = tmp_path / "h.hex"
    f.write_text(dump.format(br=f"{br:010x}", halt=f"{halt:010x}"))
    with pytest.raises(AsmError, match=message) as e:
        read_words(f)
    assert e.value.loc is not None and (e.value.loc.file, e.value.loc.line) == (str(f), line)


def test_binary_input_is_one_short_error(tmp_path: Path) -> None:
    f = tmp_path / "zeros.bin"
    f.write_bytes(b"\n\n" + b"\0" * 3_000_000)
    with pytest.raises(AsmError) as e:
        read_words(f)
    assert str(e.value) == (f"{f}:3:1: error: holds a NUL byte: a binary file, not an npkit image, "
                            "a hex dump or a C array")  # fmt: skip
