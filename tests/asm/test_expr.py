"""Compile-time expression evaluator: grammar, semantics, located errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npkit.asm.errors import AsmError, SourceLoc
from npkit.asm.expr import (
    ExprError,
    evaluate,
    is_constant_expression,
    is_identifier,
    tokenize_expr,
)

LOC = SourceLoc("t.uc", 7, 10, "        #if X")


def ev(text: str, **kw) -> int:
    return evaluate(text, LOC, **kw)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("0x1F", 31),
        ("0b1011", 11),
        ("010", 10),  # leading zero is decimal, not octal
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),  # left associative
        ("2 * 3 % 4", 2),
        ("1 << 4 | 1", 17),  # shift binds tighter than |
        ("1 | 2 ^ 3 & 5", 1 | (2 ^ (3 & 5))),
        ("3 == 3 && 2 != 2", 0),
        ("1 < 2 == 1", 1),  # relational binds tighter than equality
        ("5 >= 5", 1),
        ("4 <= 3", 0),
        ("-3 + +4", 1),
        ("~0", -1),
        ("!0 + !7", 1),
        ("0x80 >> 3", 16),
        ("1 ? 2 : 3", 2),
        ("0 ? 2 : 0 ? 4 : 5", 5),  # right associative
        ("1 || 0 && 0", 1),  # && binds tighter than ||
        ("(0x80 | (5 << 3))", 0xA8),
    ],
)
def test_grammar_and_precedence(text: str, value: int) -> None:
    assert ev(text) == value


def test_division_truncates_toward_zero_like_c() -> None:
    assert ev("-7 / 2") == -3
    assert ev("-7 % 2") == -1
    assert ev("7 / -2") == -3
    assert ev("7 % -2") == 1


def test_bits_reduces_only_the_result_to_unsigned() -> None:
    assert ev("-1", bits=32) == 0xFFFFFFFF
    assert ev("0x1_0000_0000".replace("_", "") + " + 5", bits=32) == 5
    assert ev("-1") == -1  # unbounded by default
    assert ev("1 << 40") == 1 << 40


def test_names_go_through_resolve() -> None:
    values = {"X": 5, "$xfer": 3, "done#": 12}
    assert ev("X * 2 + $xfer", resolve=values.get) == 13
    assert ev("done# + 1", resolve=values.get) == 13


def test_address_of_goes_through_address_of() -> None:
    addrs = {"sig1": 2, "$rsw0": 17}
    value = ev("(0x80 | (&sig1 << 3))", address_of=addrs.get)
    assert value == 0x80 | (2 << 3)
    assert ev("(&$rsw0 | (&sig1 << 12))", address_of=addrs.get) == 17 | (2 << 12)
    # & between operands is still bitwise and
    assert ev("6 & 3") == 2


def test_undefined_symbol_is_located_at_the_token() -> None:
    with pytest.raises(ExprError) as info:
        ev("1 + foo", resolve={"bar": 1}.get)
    err = info.value
    assert err.message == "undefined symbol 'foo' in expression"
    assert err.kind == "undefined"
    assert err.loc is not None
    assert (err.loc.file, err.loc.line, err.loc.col) == ("t.uc", 7, 14)


def test_no_resolver_means_every_name_is_undefined() -> None:
    with pytest.raises(AsmError, match="undefined symbol 'x'"):
        ev("x")


def test_unknown_address_is_an_error() -> None:
    with pytest.raises(AsmError, match="no address known for '&sig'") as info:
        ev("2 + &sig")
    assert info.value.loc is not None and info.value.loc.col == 15


def test_division_by_zero_is_located() -> None:
    with pytest.raises(ExprError, match="division by zero") as info:
        ev("4 / (2 - 2)")
    assert info.value.kind == "value"
    assert info.value.loc is not None and info.value.loc.col == 12
    with pytest.raises(ExprError, match="division by zero"):
        ev("4 % 0")


def test_defined_both_spellings() -> None:
    known = {"A"}
    assert ev("defined(A)", is_defined=known.__contains__) == 1
    assert ev("defined A + defined(B)", is_defined=known.__contains__) == 1
    assert ev("!defined B", is_defined=known.__contains__) == 1
    # without is_defined, "defined" means "resolve knows it"
    assert ev("defined(A)", resolve={"A": 0}.get) == 1
    assert ev("defined(Z)") == 0


def test_short_circuit_skips_names_and_faults() -> None:
    is_def = set().__contains__
    assert ev("defined(X) && X > 2", is_defined=is_def) == 0
    assert ev("1 || undefined_name") == 1
    assert ev("0 && 1 / 0") == 0
    assert ev("1 ? 5 : 1 / 0") == 5
    assert ev("0 ? nope : 9") == 9
    # but the skipped part must still parse
    with pytest.raises(AsmError, match="unexpected"):
        ev("0 && (1 +")


def test_is_ct_const_probes_its_argument() -> None:
    values = {"K": 4}
    assert ev("is_ct_const(3 + K)", resolve=values.get) == 1
    assert ev("is_ct_const(my_reg)", resolve=values.get) == 0
    assert ev("isnum($xfer) + 10") == 10
    assert ev("!is_ct_const(*l$index0)") == 1  # not even an expression
    with pytest.raises(AsmError, match="division by zero"):
        ev("is_ct_const(1 / 0)")


@pytest.mark.parametrize(
    ("text", "message", "col_offset"),
    [
        ("1 +", "unexpected end of expression", 3),
        ("(1", "expected ')'", 2),
        ("1 2", "unexpected '2'", 2),
        ("0x", "invalid number '0x'", 0),
        ("12ab", "invalid number '12ab'", 0),
        ("1_000", "invalid number '1_000'", 0),
        ("3 $", "unexpected character '$'", 2),
        ("'a'", "unexpected character", 0),
        ("", "missing expression", 0),
        ("   ", "missing expression", 0),
        (")", "unexpected ')'", 0),
        ("& 3", "expected a name after '&'", 2),
        ("defined(3)", "expected a name after 'defined'", 8),
        ("1 ? 2", "expected ':'", 5),
        ("1 << -1", "negative shift count", 2),
        ("1 << 100000", "shift count", 2),
    ],
)
def test_errors_point_at_the_offending_token(text: str, message: str, col_offset: int) -> None:
    with pytest.raises(AsmError) as info:
        ev(text)
    assert message in info.value.message
    assert info.value.loc is not None
    assert info.value.loc.col == LOC.col + col_offset
    assert info.value.loc.line == LOC.line


def test_huge_values_are_errors_not_hangs() -> None:
    with pytest.raises(AsmError, match="too large"):
        ev("(1 << 60000) * (1 << 60000)")
    with pytest.raises(AsmError, match="invalid number"):
        ev("9" * 5000)  # more digits than int() accepts


def test_deep_nesting_is_an_error_not_a_recursion_crash() -> None:
    with pytest.raises(AsmError, match="nested too deeply"):
        ev("(" * 500 + "1" + ")" * 500)
    with pytest.raises(AsmError, match="nested too deeply"):
        ev("-" * 500 + "1")
    assert ev("(" * 50 + "1" + ")" * 50) == 1


def test_tokenize_expr_kinds_and_offsets() -> None:
    toks = tokenize_expr("(&$x << 0x3) >= lbl#")
    assert [(t.kind, t.text, t.offset) for t in toks] == [
        ("op", "(", 0),
        ("op", "&", 1),
        ("id", "$x", 2),
        ("op", "<<", 5),
        ("num", "0x3", 8),
        ("op", ")", 11),
        ("op", ">=", 13),
        ("id", "lbl#", 16),
        ("end", "", 20),
    ]
    assert toks[4].value == 3


def test_is_constant_expression() -> None:
    assert is_constant_expression("(1 << 3) | 0x80")
    assert is_constant_expression("defined(X) || 2")
    assert not is_constant_expression("x + 1")
    assert not is_constant_expression("1 +")
    assert not is_constant_expression("1 / 0")
    assert not is_constant_expression("")


def test_is_identifier() -> None:
    assert is_identifier("$$xfer")
    assert is_identifier("@abs")
    assert is_identifier("loop#")
    assert not is_identifier("1abc")
    assert not is_identifier("a b")


_ATOMS = st.sampled_from(
    ["0", "1", "7", "0x1f", "0b11", "x", "$r", "&s", "defined(x)", "is_ct_const(x)", "(", ")"]
)
_OPS = st.sampled_from(
    [
        "+",
        "-",
        "*",
        "/",
        "%",
        "<<",
        ">>",
        "&",
        "|",
        "^",
        "&&",
        "||",
        "==",
        "!=",
        "<",
        ">=",
        "?",
        ":",
        "!",
        "~",
        " ",
        "@",
        "'",
        "9" * 30,
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_ATOMS, _OPS), max_size=30))
def test_fuzz_only_values_or_located_errors(parts: list[str]) -> None:
    text = " ".join(parts)
    try:
        value = evaluate(text, LOC, resolve={"x": 3}.get, address_of={"s": 1}.get, bits=32)
    except AsmError as exc:
        assert exc.loc is not None
        assert exc.loc.line == LOC.line
        assert LOC.col <= exc.loc.col <= LOC.col + len(text)
    else:
        assert 0 <= value < 1 << 32


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_fuzz_arbitrary_text(text: str) -> None:
    try:
        evaluate(text, LOC, resolve=lambda name: 1)
    except AsmError as exc:
        assert exc.loc is not None
