"""Fuzzing: mutated and random sources give an image or a located AsmError, never another exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.asm.assembler import assemble_text
from npkit.asm.errors import AsmError, Diagnostics

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [p.read_text() for p in sorted((ROOT / "tests/asm/data/progs").glob("*.uc"))] + [
    p.read_text()
    for p in sorted((ROOT / "examples").glob("*.uc"))
    if "#include" not in p.read_text()
]

TOKENS = [
    "alu",
    "alu_shf",
    "immed",
    "[",
    "]",
    ",",
    "--",
    "+",
    "-",
    "b",
    "and",
    "<<4",
    ">>indirect",
    "x",
    "y",
    "$x",
    "$$d",
    "@g",
    ".reg",
    ".sig",
    ".begin",
    ".end",
    ".if",
    ".endif",
    ".while",
    ".endw",
    "(",
    ")",
    "==",
    "<",
    "&&",
    "BIT(x, 3)",
    "SIGNAL(s)",
    "s",
    "sram",
    "dram",
    "read",
    "ctx_swap[s]",
    "sig_done[s]",
    "ctx_arb[s]",
    "l#:",
    "br[l#]",
    "defer[1]",
    "0x12345678",
    "&s",
    "a3",
    "*l$index0[2]",
    ".xfer_order",
    ".addr",
    ".init",
    ".set_sig",
    ".alloc_mem",
    "lmem",
    "16",
    "\n",
    " ",
    "#define",
    "#macro",
    "#endm",
    ".num_contexts",
    "4",
    "max_8",
    "local_csr_wr",
    "ACTIVE_LM_ADDR_0",
    "halt",
    "nop",
    ".repeat",
    ".until",
]


def _check(src: str) -> None:
    try:
        a = assemble_text(src, "fuzz.uc", diags=Diagnostics())
    except AsmError as e:
        assert e.loc is not None, f"error without a location: {e.message}"
        assert e.loc.file in ("fuzz.uc", "<command line>") or e.loc.file.endswith(".h"), e.loc
        return
    assert a.program.words and all(0 <= w < 1 << 40 for w in a.program.words)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SEEDS)).splitlines()
    for _ in range(draw(st.integers(1, 6))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.integers(0, 4))
        line = lines[i]
        if kind == 0:
            del lines[i]
        elif kind == 1:
            lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
        elif kind == 2 and line:
            j = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:j] + draw(st.sampled_from(TOKENS)) + line[j + 1 :]
        elif kind == 3 and line:
            j = draw(st.integers(0, len(line)))
            lines[i] = line[:j] + line[j + draw(st.integers(1, 5)) :]
        else:
            lines[i] = line + draw(st.text(max_size=8))
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_sources(src: str) -> None:
    _check(src)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_token_soup(tokens: list[str]) -> None:
    _check(" ".join(tokens))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_text(src: str) -> None:
    _check(src)
