"""Structured control flow: .if/.elif/.else, .while, .repeat/.until, conditions.

The generated code is run on a tiny reference interpreter of the few
instructions structured flow uses (immed, alu +/-/B, compare, beq/bne/blo/bhs,
br_bset/br_bclr, br), with unsigned comparisons: after `alu[--, a, -, b]`,
carry set means a >= b (bhs = bcs, blo = bcc).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npkit.asm.errors import AsmError
from npkit.asm.isa import split_instruction

from .helpers import asm, texts


def run(src: str, regs: dict[str, int], steps: int = 2000) -> dict[str, int]:
    """Assemble `src` and interpret it; `regs` gives virtual register values in and out."""
    a = asm(src)
    phys = {s.name: s.value for s in a.program.symbols if s.kind == "reg"}
    state = {phys[k]: v & 0xFFFFFFFF for k, v in regs.items()}
    prog = [split_instruction(t) for t in texts(a)]
    pc, z, c = 0, False, False

    def val(op: str) -> int:
        return state.get(op, 0) if re.fullmatch(r"[ab]\d+", op) else int(op, 0)

    for _ in range(steps):
        if pc >= len(prog):
            break
        ins = prog[pc]
        m, args = ins.mnemonic, ins.args
        pc += 1
        if m == "immed":
            state[args[0]] = int(args[1], 0)
        elif m == "alu":
            x = 0 if args[1] == "--" else val(args[1])
            y = val(args[3])
            op = args[2]
            if op == "+":
                r = (x + y) & 0xFFFFFFFF
            elif op == "-":
                r, c = (x - y) & 0xFFFFFFFF, x >= y
            elif op == "B":
                r = y
            else:
                raise AssertionError(f"interpreter lacks {op}")
            z = r == 0
            if args[0] != "--":
                state[args[0]] = r
        elif m in ("beq", "bne", "bcs", "bcc", "br"):
            taken = {"beq": z, "bne": not z, "bcs": c, "bcc": not c, "br": True}[m]
            if taken:
                pc = int(args[0])
        elif m in ("br_bset", "br_bclr"):
            bit = (val(args[0]) >> int(args[1])) & 1
            if bit == (m == "br_bset"):
                pc = int(args[2])
        else:
            raise AssertionError(f"interpreter lacks {m}")
    return {k: state.get(phys[k], 0) for k in regs}


IF_SRC = """
.reg x y r
.if (x == y)
    immed[r, 1]
.elif (x < y)
    immed[r, 2]
.elif (BIT(x, 3) && !(y >= 200))
    immed[r, 3]
.else
    immed[r, 4]
.endif
"""


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255))
def test_if_elif_else_chain(x: int, y: int) -> None:
    out = run(IF_SRC, {"x": x, "y": y, "r": 0})
    want = 1 if x == y else 2 if x < y else 3 if (x >> 3) & 1 and not y >= 200 else 4
    assert out["r"] == want


@pytest.mark.parametrize("op,fn", [("==", lambda a, b: a == b), ("!=", lambda a, b: a != b),
                                   ("<", lambda a, b: a < b), (">", lambda a, b: a > b),
                                   ("<=", lambda a, b: a <= b), (">=", lambda a, b: a >= b)])  # fmt: skip
def test_each_relational_operator_unsigned(op: str, fn: object) -> None:
    for x in (0, 1, 7, 8, 9, 0x80000000, 0xFFFFFFFF):
        for y in (0, 8, 0xFFFFFFFF):
            out = run(
                f".reg x y r\n immed[r, 0]\n.if (x {op} y)\n immed[r, 1]\n.endif\n",
                {"x": x, "y": y, "r": 0},
            )
            assert out["r"] == int(fn(x, y)), (x, op, y)  # type: ignore[operator]


def test_or_condition_and_nonzero_test() -> None:
    src = ".reg x y r\n.if ((x == 1) || y)\n immed[r, 1]\n.else\n immed[r, 2]\n.endif\n"
    assert run(src, {"x": 1, "y": 0, "r": 0})["r"] == 1
    assert run(src, {"x": 0, "y": 5, "r": 0})["r"] == 1
    assert run(src, {"x": 0, "y": 0, "r": 0})["r"] == 2


@pytest.mark.parametrize("cond", ["(x)", "((x))", "(!(!(x)))"])
def test_parenthesised_nonzero_test(cond: str) -> None:
    # `.if (x)` is the nonzero test of register x (LANGUAGE.md, "(a) (non-zero)"), the
    # only way to write it alone since .if needs its parentheses
    src = f".reg x r\n.if {cond}\n immed[r, 1]\n.else\n immed[r, 2]\n.endif\n"
    assert run(src, {"x": 9, "r": 0})["r"] == 1
    assert run(src, {"x": 0, "r": 0})["r"] == 2


def test_while_nonzero_counts_down() -> None:
    src = ".reg n acc\n.while (n)\n alu[acc, acc, +, 2]\n alu[n, n, -, 1]\n.endw\n"
    assert run(src, {"n": 4, "acc": 0}) == {"n": 0, "acc": 8}


def test_while_loop_counts() -> None:
    src = ".reg n acc\n.while (n != 0)\n alu[acc, acc, +, 3]\n alu[n, n, -, 1]\n.endw\n"
    assert run(src, {"n": 5, "acc": 0}) == {"n": 0, "acc": 15}


def test_repeat_until_runs_at_least_once() -> None:
    src = ".reg n acc\n.repeat\n alu[acc, acc, +, 1]\n alu[n, n, +, 1]\n.until (n >= 4)\n"
    assert run(src, {"n": 10, "acc": 0})["acc"] == 1
    assert run(src, {"n": 0, "acc": 0})["acc"] == 4


def test_break_leaves_loop() -> None:
    src = ".reg n\n.while (n < 100)\n alu[n, n, +, 1]\n.if (n == 7)\n.break\n.endif\n.endw\n"
    assert run(src, {"n": 0})["n"] == 7


def test_nested_constructs() -> None:
    src = (".reg i j cnt\n immed[i, 0]\n.while (i < 4)\n immed[j, 0]\n.while (j < 3)\n"
           " alu[cnt, cnt, +, 1]\n alu[j, j, +, 1]\n.endw\n alu[i, i, +, 1]\n.endw\n")  # fmt: skip
    assert run(src, {"i": 0, "j": 0, "cnt": 0})["cnt"] == 12


def test_signal_condition_uses_br_signal() -> None:
    a = asm(".sig s\n.reg r\n.if (SIGNAL(s))\n immed[r, 1]\n.endif\n")
    assert texts(a)[0].startswith("br_!signal[")


@pytest.mark.parametrize("src,msg", [
    (".if (x == 1)\n nop\n", "without a matching .endif"),
    (" nop\n.endif\n", ".endif without"),
    (".reg x\n.if x == 1\n nop\n.endif\n", "parentheses"),
    (".reg x\n.if (x == )\n nop\n.endif\n", "operand on each side"),
    (".reg x\n.while (x)\n.else\n.endw\n", ".else without"),
    (" nop\n.break\n", "outside"),
    (".reg x\n.if (x ==\n nop\n.endif\n", "missing ')'"),
    (".reg x\n.while (x))\n.endw\n", "unbalanced ')'"),
    (".reg x\n.if (BIT(x))\n.endif\n nop\n", "BIT(register"),
])  # fmt: skip
def test_structured_errors(src: str, msg: str) -> None:
    with pytest.raises(AsmError) as e:
        asm(src)
    assert msg in e.value.message and e.value.loc is not None


def test_continue_skips_rest_of_body() -> None:
    src = (".reg n skipped\n.while (n != 0)\n alu[n, n, -, 1]\n.if (n < 3)\n.continue\n.endif\n"
           " alu[skipped, skipped, +, 1]\n.endw\n")  # fmt: skip
    assert run(src, {"n": 6, "skipped": 0}) == {"n": 0, "skipped": 3}
