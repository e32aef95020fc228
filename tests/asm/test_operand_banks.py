"""Every mnemonic of mev2.yaml with register operands, written with virtual registers.

For each instruction shape (one example per mnemonic and per operand form, and every
memory command of every unit) each register operand is, in turn, a virtual register of
its own, an absolute one (`.reg @g`), the register of an earlier operand, a constant and
a transfer register.
The oracle is the encoder: when some choice of banks for the virtual registers encodes,
the allocator must find one (no bank copy); when none does, it copies through a
temporary or says why it cannot.  Whatever it assembles disassembles into source that
reassembles to the same words, and, when no copy was needed, runs on the emulator as the
same instruction written with hand-picked physical registers.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from npkit.asm.assembler import Assembly, assemble_text
from npkit.asm.disasm import Words, disassemble
from npkit.asm.errors import AsmError, Diagnostics
from npkit.asm.isa import EncodeError, Role, encode, isa, operand_roles
from npkit.asm.isa.operands import OperandError, parse_physical
from npkit.emulator.binding import Chip

from ..emulator.test_isa_agreement import EXAMPLES

REGISTER_KINDS = ("dest", "src", "srcdest", "addr")
# forms of mev2.yaml `mnemonics` the examples do not show (test_every_form_is_covered)
FORMS = ["alu[a2, a1, OR, b1, <<3]", "mul_step[a2, --], 32x32_last"]
VALUES = (0x11223344, 0x44, 0x80FF0012, 0x7)  # register k (v<k>, @g<k>) starts as VALUES[k]
XFER_VALUE = 0x44
TARGET = 2  # the branch target: the second halt
MOVE = "temporary"  # the word of the allocator's bank-copy warning


def _memory_shapes() -> Iterator[str]:
    """Every command of every unit with address operands, from the unit tables."""
    for unit_name, unit in isa().units.items():
        mn = isa().mnemonics.get(unit_name)
        if mn is None or "addr" not in mn.operands:
            continue
        for cmd in unit.commands.values():
            xfer = "--" if cmd.no_xfer else "$$0" if unit.xfer == "dram" else "$0"
            count = ", 1" if cmd.count else ""
            sig = "" if cmd.no_sig else ", ctx_swap[s2]"
            yield f"{unit_name}[{cmd.name}, {xfer}, a1, b1{count}]{sig}"


def shapes() -> list[str]:
    return [*EXAMPLES.values(), *FORMS, *_memory_shapes()]


def _split(text: str) -> tuple[str, list[str], str]:
    """(mnemonic, operands, optional tokens) of a shape; its operands hold no brackets."""
    head, _, tail = text.partition("]")
    mn, _, args = head.partition("[")
    return mn, [a.strip() for a in args.split(",")] if args else [], tail


def _kind(text: str) -> str:
    try:
        return parse_physical(text).kind
    except OperandError:
        return "word"


def _register_positions(mn: str, args: list[str]) -> list[tuple[int, Role]]:
    """Operands a register can take, written as a GPR or a constant in the shape."""
    roles = operand_roles(mn, args)
    return [(i, r) for i, r in enumerate(roles)
            if r.kind in REGISTER_KINDS and _kind(args[i]) in ("gpr", "imm")]  # fmt: skip


@dataclass(frozen=True)
class Case:
    shape: str
    choice: tuple[str, ...]  # per register position: new | same | abs | const | xfer

    @property
    def id(self) -> str:
        return f"{self.shape} <- {'/'.join(self.choice)}"

    def build(self) -> tuple[str, list[str]]:
        """The instruction with virtual names v0, v1, ... (and the names in order)."""
        mn, args, tail = _split(self.shape)
        names: list[str] = []
        out = list(args)
        roles = operand_roles(mn, args)
        for (i, _role), how in zip(_register_positions(mn, args), self.choice, strict=True):
            if how == "new":
                names.append(f"v{len(names)}")
                out[i] = names[-1]
            elif how == "abs":
                names.append(f"@g{len(names)}")
                out[i] = names[-1]
            elif how == "same":
                out[i] = names[0]
            elif how == "xfer":
                out[i] = "$1"
            elif _kind(args[i]) != "imm":
                out[i] = "9"
        for i, r in enumerate(roles):
            if r.kind == "label":
                out[i] = "done#"
        text = f"{mn}[{', '.join(out)}]{tail}" if args else self.shape
        return text, names


def _choices(mn: str, args: list[str]) -> Iterator[tuple[str, ...]]:
    positions = _register_positions(mn, args)
    options = []
    for _i, role in positions:
        opts = ["new", "same", "abs", "xfer"]
        if role.kind not in ("dest", "srcdest"):
            opts.append("const")
        options.append(opts)
    for choice in itertools.product(*options):
        first = next((k for k, how in enumerate(choice) if how in ("new", "abs")), len(choice))
        if "same" in choice[: first + 1]:
            continue  # "same" names the first register declared, so one must come before it
        yield choice


def cases() -> list[Case]:
    out = []
    for shape in shapes():
        mn, args, _ = _split(shape)
        out.extend(Case(shape, c) for c in _choices(mn, args) if c)
    return out


CASES = cases()


def _program(text: str, names: list[str]) -> str:
    decl = f".reg {' '.join(names)}\n" if names else ""
    return f"{decl}    {text}\n    halt\ndone#:\n    halt\n"


def _substitute(text: str, regs: dict[str, str]) -> str:
    return re.sub(r"@g\d+|\bv\d+\b", lambda m: regs[m[0]], text)


def _hand_picked(text: str, names: list[str]) -> dict[str, str] | None:
    """A choice of physical registers the encoder takes (None: no choice of banks does)."""
    target = text.replace("done#", str(TARGET))
    for banks in itertools.product("ab", repeat=len(names)):
        regs = {n: f"@{b}{100 + k}" if n[0] == "@" else f"{b}{4 + k}"
                for k, (n, b) in enumerate(zip(names, banks, strict=True))}  # fmt: skip
        try:
            encode(_substitute(target, regs))
        except EncodeError:
            continue
        return regs
    return None


def _allocated(a: Assembly) -> dict[str, str]:
    return {s.name: str(s.value) for s in a.program.symbols if s.kind == "reg"}


def _run(chip: Chip, words: list[int], regs: dict[str, str]) -> tuple[object, ...]:
    chip.reset()
    chip.load(0, words, 8)
    for name, reg in regs.items():
        chip.set_reg(0, reg, VALUES[int(name.lstrip("@gv"))])
    chip.set_reg(0, "$1", XFER_VALUE)
    chip.enable(0, 1)
    chip.run(3000)
    st = chip.me_status(0)
    return st["state"], st["pc"], st["reason"], tuple(chip.reg(0, regs[n]) for n in sorted(regs))


@pytest.fixture(scope="module")
def chip() -> Iterator[Chip]:
    with Chip("ixp2800") as c:
        yield c


def _plain(role: Role) -> Role:
    """A role as mev2.yaml `roles` defines it (without what a memory command adds)."""
    return replace(role, xfer_dir="", unit="", bank="" if role.kind == "addr" else role.bank)


def test_every_form_is_covered() -> None:
    """Each operand list of mev2.yaml (a mnemonic's, or one of its forms) that holds a
    register operand has a shape here, so a new mnemonic or form is audited too."""
    seen: dict[str, list[tuple[Role, ...]]] = {}
    for shape in shapes():
        mn, args, _ = _split(shape)
        seen.setdefault(mn, []).append(tuple(_plain(r) for r in operand_roles(mn, args)))
    for name, m in isa().mnemonics.items():
        for operands in (m.operands, *(f.operands for f in m.forms)):
            roles = tuple(_plain(Role(**isa().roles[r])) for r in operands)
            last = max((i for i, r in enumerate(roles) if r.kind in REGISTER_KINDS), default=-1)
            if last >= 0:
                assert any(len(s) > last and roles[: len(s)] == s for s in seen.get(name, [])), (name, operands)


def test_every_register_position_is_varied() -> None:
    assert len(CASES) > 500
    for shape in shapes():
        mn, args, _ = _split(shape)
        for p, (_i, role) in enumerate(_register_positions(mn, args)):
            hit = {c.choice[p] for c in CASES if c.shape == shape}
            want = {"new", "abs", "xfer"} | ({"same"} if p else set())
            want |= {"const"} if role.kind not in ("dest", "srcdest") else set()
            assert hit == want, (shape, p)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_virtual_registers_assemble_round_trip_and_run_alike(case: Case, chip: Chip) -> None:
    text, names = case.build()
    src = _program(text, names)
    picked = _hand_picked(text, names)
    try:
        a = assemble_text(src, "t.uc", diags=Diagnostics())
    except AsmError as e:
        assert picked is None, f"{text}: the encoder takes {picked}, the assembler says: {e.message}"
        return
    moved = any(MOVE in m for m, _ in a.diags.warnings)
    if picked is not None:
        assert not moved, f"{text}: a bank copy where {picked} needs none"
        assert len(a.program.words) == 3
        regs = _allocated(a)
        assert a.program.words[0] == encode(_substitute(text.replace("done#", str(TARGET)), regs))
    else:
        assert moved, f"{text}: no banks encode it, yet it assembled without a copy"
    again = assemble_text(disassemble(Words(a.program.words, a.program.ctx_mode)), "d.uc",
                          diags=Diagnostics())  # fmt: skip
    assert again.program.words == a.program.words
    if picked is None:
        return
    by_hand = assemble_text(_program(_substitute(text, picked), []), "h.uc", diags=Diagnostics())
    assert _run(chip, a.program.words, _allocated(a)) == _run(chip, by_hand.program.words, picked)
