"""Register allocation: banks, bank-conflict moves, live ranges, limits, xfers, signals."""

from __future__ import annotations

import copy
import random

import pytest

from npkit.asm.errors import AsmError
from npkit.asm.isa import model, operand_roles, split_instruction
from npkit.emulator.binding import Chip

from .helpers import asm, sym, texts, warnings


def _check_banks(a: object) -> None:
    """Every instruction's A/B groups hold registers of opposite banks (the encoder agrees)."""
    for t in texts(a):  # type: ignore[arg-type]
        sp = split_instruction(t)
        roles = operand_roles(sp.mnemonic, list(sp.args))
        regs = [sp.args[i] for i, r in enumerate(roles) if r.group and sp.args[i][:1] in "ab"]
        if len(regs) == 2:
            assert regs[0][0] != regs[1][0], t


def test_chain_of_constraints_is_two_coloured() -> None:
    a = asm(".reg p q r s\n alu[p, q, +, r]\n alu[s, r, +, p]\n alu[q, p, xor, s]\n")
    bank = {n: str(sym(a, n))[0] for n in "pqrs"}
    assert bank["q"] != bank["r"] and bank["r"] != bank["p"] and bank["p"] != bank["s"]
    assert len(a.program.words) == 3  # no copies needed
    _check_banks(a)


def test_odd_cycle_gets_a_move_and_warning() -> None:
    a = asm(".reg x y z\n alu[x, x, +, y]\n alu[y, y, +, z]\n alu[z, z, +, x]\n")
    assert len(a.program.words) == 4  # x-y, y-z, z-x: a triangle needs one copy
    assert any("temporary" in w for w in warnings(a))
    _check_banks(a)


def test_same_register_twice_needs_copy() -> None:
    a = asm(".reg y z\n alu[z, y, +, y]\n")
    t = texts(a)
    assert len(t) == 2 and t[0].startswith("alu[") and ", --, B, " + sym(a, "y") in t[0]  # type: ignore[operator]
    _check_banks(a)


def test_physical_partner_fixes_bank() -> None:
    a = asm(".reg v\n alu[v, a3, +, v]\n")
    assert str(sym(a, "v")).startswith("b")


def test_fixed_bank_roles() -> None:
    a = asm(".reg e t\n cam_write[e, t, 1]\n")
    assert str(sym(a, "e")).startswith("b") and str(sym(a, "t")).startswith("a")


def test_byte_compare_with_a_register_value_puts_the_tested_register_in_bank_b() -> None:
    # br=byte tells the register tested from the compare value by the B field: with two
    # registers, the one tested is in B and the value in A (mev2.yaml paired_bank)
    src = ".reg x y z\n immed[x, 5]\n immed[y, 7]\n alu[z, x, +, y]\n br!=byte[z, 0, 9, done#]\n" \
          " br=byte[x, 1, y, done#]\n alu[x, z, +, 1]\ndone#:\n ctx_arb[kill]\n"  # fmt: skip
    a = asm(src)
    assert str(sym(a, "x")).startswith("b") and str(sym(a, "y")).startswith("a")
    assert len(a.program.words) == 7 and not warnings(a)
    # a constant compare value leaves the register in either bank
    a = asm(".reg x y\n alu[x, y, +, 1]\n br=byte[x, 1, 0x12, l#]\n br=byte[y, 2, 0x34, l#]\nl#: halt\n")
    assert len(a.program.words) == 4 and not warnings(a)
    # a transfer register as the value is a register too
    a = asm(".reg x\n.reg read $v\n br=byte[x, 1, $v, l#]\nl#: halt\n")
    assert str(sym(a, "x")).startswith("b")


def test_byte_compare_banks_come_from_the_description() -> None:
    """The allocator and the encoder read one rule (mev2.yaml paired_bank): in a copy of the
    description with the two banks swapped both follow the copy."""
    raw = copy.deepcopy(model.isa().raw)
    raw["roles"]["pair_rb"]["paired_bank"], raw["roles"]["pair_ra"]["paired_bank"] = "a", "b"
    src = ".reg x y\n br=byte[x, 1, y, l#]\nl#: halt\n"
    with model.use(model.from_dict(raw)):
        a = asm(src)
        assert str(sym(a, "x")).startswith("a") and str(sym(a, "y")).startswith("b")
        with pytest.raises(AsmError, match="tested must be in bank A and the compare value in bank B"):
            asm(".reg y\n br=byte[b1, 1, y, l#]\nl#: halt\n")
    a = asm(src)
    assert str(sym(a, "x")).startswith("b") and str(sym(a, "y")).startswith("a")


def _halted_at(src: str, **regs: int) -> str:
    """The label of the halt the program stops at, run with the registers named set."""
    a = asm(src)
    names = {s.name: str(s.value) for s in a.program.symbols if s.kind == "reg"}
    labels = {s.value: s.name for s in a.program.symbols if s.kind == "label"}
    with Chip() as chip:
        chip.load(0, a.program.words, a.program.ctx_mode)
        for name, value in regs.items():
            chip.set_reg(0, names[name], value)
        chip.enable(0, 1)
        assert chip.run_until_halt(10_000) == "halted"
        return str(labels.get(chip.me_status(0)["pc"], ""))


@pytest.mark.parametrize("pin", [".areg x 3", ".breg y 3", ".areg x 3\n.breg y 4"])
def test_byte_compare_with_pinned_registers_in_the_wrong_bank_copies_them(pin: str) -> None:
    src = f".reg x y\n{pin}\n br=byte[x, 1, y, hit#]\n halt\nhit#:\n halt\n"
    a = asm(src)
    moves = [w for w in warnings(a) if "temporary" in w]
    assert len(moves) == pin.count("\n") + 1 and all("where 'br=byte' needs this operand" in w for w in moves)
    assert len(a.program.words) == 3 + len(moves)
    for x, y, hit in ((0x5512, 0x55, True), (0x5512, 0x12, False), (0x12, 0x12, False)):
        assert (_halted_at(src, x=x, y=y) == "hit") == hit, (x, y)


def test_byte_compare_with_physical_registers_in_the_wrong_bank_is_an_error() -> None:
    # a register the source names cannot be moved: the encoder says which bank each needs
    with pytest.raises(AsmError) as e:
        asm(".reg y\n br=byte[a1, 1, y, l#]\nl#: halt\n")
    assert "the register tested must be in bank B and the compare value in bank A; got a1 and a0" \
        in e.value.message and "(y is a0)" in e.value.message  # fmt: skip
    with pytest.raises(AsmError, match="got b0 and b1"):
        asm(".reg x\n br=byte[x, 1, b1, l#]\nl#: halt\n")


def test_memory_address_operands_in_opposite_banks() -> None:
    a = asm(".reg base off\n sram[read, $0, base, off, 1], ctx_swap[s1]\n")
    assert str(sym(a, "base"))[0] != str(sym(a, "off"))[0]


def test_random_programs_always_satisfy_bank_rule() -> None:
    rng = random.Random(3)
    for _ in range(30):
        names = [f"v{i}" for i in range(8)]
        lines = [".reg " + " ".join(names)]
        for _ in range(25):
            d, x, y = (rng.choice(names) for _ in range(3))
            lines.append(f" alu[{d}, {x}, {rng.choice(['+', 'and', 'xor', '-'])}, {y}]")
        _check_banks(asm("\n".join(lines) + "\n"))


def test_live_ranges_reuse_physical_registers() -> None:
    src = ".reg keep\n immed[keep, 1]\n" + "".join(
        f".begin\n.reg a{i} b{i} c{i}\n alu[a{i}, b{i}, +, c{i}]\n alu[keep, keep, +, a{i}]\n.end\n"
        for i in range(20))  # fmt: skip
    a = asm(src)
    regs = {s.value for s in a.program.symbols if s.kind == "reg"}
    assert len(regs) <= 4
    assert sym(a, "keep") not in {sym(a, f"a{i}") for i in range(20)}


def test_nested_scope_does_not_reuse_outer_register() -> None:
    a = asm(
        ".begin\n.reg o\n immed[o, 1]\n.begin\n.reg i\n immed[i, 2]\n.end\n alu[o, o, +, 1]\n.end\n"
    )
    assert sym(a, "o") != sym(a, "i")


def test_eight_context_gpr_limit_is_32() -> None:
    ok = " ".join(f"r{i}" for i in range(32))
    asm(f".reg {ok}\n" + "".join(f" immed[r{i}, 1]\n" for i in range(32)))
    with pytest.raises(AsmError, match="8-context mode"):
        asm(f".reg {ok} r32\n" + "".join(f" immed[r{i}, 1]\n" for i in range(33)))


def test_four_context_gpr_limit_is_64() -> None:
    names = " ".join(f"r{i}" for i in range(64))
    asm(f".reg {names}\n" + "".join(f" immed[r{i}, 1]\n" for i in range(64)), ctx_mode=4)
    with pytest.raises(AsmError, match="4-context mode"):
        asm(f".reg {names} r64\n" + "".join(f" immed[r{i}, 1]\n" for i in range(65)), ctx_mode=4)


def test_xfer_limits_per_mode() -> None:
    names = " ".join(f"$x{i}" for i in range(17))
    uses = "".join(f" alu[--, --, b, $x{i}]\n" for i in range(17))
    with pytest.raises(AsmError, match="out of transfer registers"):
        asm(f".reg read {names}\n{uses}")
    asm(f".reg read {names}\n{uses}", ctx_mode=4)


def test_xfer_order_with_pin() -> None:
    a = asm(".reg read $a $b\n.xfer_order $a $b\n.addr $b 6\n alu[--, $a, +, $b]\n")
    assert (sym(a, "$a"), sym(a, "$b")) == ("$5", "$6")


def test_explicit_xfer_is_reserved() -> None:
    a = asm(".reg read $a\n alu[--, $0, +, $a]\n")
    assert sym(a, "$a") != "$0"


def test_signal_exhaustion_and_pairs() -> None:
    names = " ".join(f"q{i}" for i in range(16))
    with pytest.raises(AsmError, match="out of signals"):
        asm(f".sig {names}\n" + "".join(f" ctx_arb[q{i}]\n" for i in range(16)))
    a = asm(
        ".sig d1 d2 x\n.reg y\n dram[read, $$0, y, 0, 1], sig_done[d1]\n"
        " dram[write, $$2, y, 0, 1], sig_done[d2]\n ctx_arb[d1, d2]\n ctx_arb[x]\n"
    )
    d1, d2, x = sym(a, "d1"), sym(a, "d2"), sym(a, "x")
    assert d1 % 2 == 0 and d2 % 2 == 0 and x not in (d1, d1 + 1, d2, d2 + 1)  # type: ignore[operator]
    assert (
        texts(a)[2]
        == f"ctx_arb[s{min(d1, d2)}, s{min(d1, d2) + 1}, s{max(d1, d2)}, s{max(d1, d2) + 1}]"
    )  # type: ignore[call-overload]


def test_absolute_globals_eight_per_relative_index() -> None:
    names = " ".join(f"@g{i}" for i in range(9))
    a = asm(f".reg {names}\n" + "".join(f" immed[@g{i}, {i}]\n" for i in range(9)))
    vals = [str(sym(a, f"@g{i}")) for i in range(9)]
    assert len(set(vals)) == 9
    rel = {(v[1], int(v[2:]) % 16) for v in vals}
    assert len(rel) <= 3  # 9 globals use few relative indices, from the top
    assert all(r >= 14 for _, r in rel)


def test_component_is_flipped_when_its_bank_overflows() -> None:
    # 15 long-lived registers pinned to bank A by a B partner; 20 short-lived B registers make
    # the count-balancing put the two-sided part of {p, q, r} into A (17 > 16): the allocator
    # must flip that component and retry
    fixed = " ".join(f"f{i}" for i in range(15))
    src = f".reg {fixed} p q r\n" + "".join(f" alu[f{i}, f{i}, +, b0]\n" for i in range(15))
    src += " alu[q, p, +, q]\n alu[r, p, +, r]\n"
    src += "".join(f".begin\n.reg s{i}\n alu[s{i}, s{i}, +, f0]\n.end\n" for i in range(20))
    a = asm(src)
    assert {str(sym(a, f"f{i}"))[0] for i in range(15)} == {"a"}
    assert str(sym(a, "p"))[0] == "a" and str(sym(a, "q"))[0] == str(sym(a, "r"))[0] == "b"
    _check_banks(a)


def test_free_registers_fill_the_emptier_bank() -> None:
    names = " ".join(f"r{i}" for i in range(32))
    a = asm(f".reg {names}\n" + "".join(f" immed[r{i}, {i}]\n" for i in range(32)))
    banks = [str(sym(a, f"r{i}"))[0] for i in range(32)]
    assert banks.count("a") == banks.count("b") == 16
