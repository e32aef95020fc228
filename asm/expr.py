"""Compile-time integer expressions.

One evaluator serves two masters: the preprocessor (``#if``, ``#elif``,
``#while``, ``#define_eval``) and the assembler proper (operand expressions
such as ``(0x80 | (&sig1 << 3))``).  Both need the same C-like grammar and
the same located errors, so it lives here once.

Grammar, loosest binding first (C precedence)::

    ternary  := lor ['?' ternary ':' ternary]
    lor      := land  {'||' land}
    land     := bor   {'&&' bor}
    bor      := bxor  {'|' bxor}
    bxor     := band  {'^' band}
    band     := eq    {'&' eq}
    eq       := rel   {('==' | '!=') rel}
    rel      := shift {('<' | '<=' | '>' | '>=') shift}
    shift    := add   {('<<' | '>>') add}
    add      := mul   {('+' | '-') mul}
    mul      := unary {('*' | '/' | '%') unary}
    unary    := ('-' | '+' | '~' | '!') unary | '&' NAME | primary
    primary  := NUMBER | NAME | '(' ternary ')'
              | 'defined' ['('] NAME [')'] | ('is_ct_const' | 'isnum') '(' ternary ')'

Semantics worth knowing:

* Numbers are decimal, ``0x`` hex or ``0b`` binary.  A leading zero does
  *not* mean octal (``010`` is ten): microcode is written by people who
  mean decimal when they pad.
* Arithmetic uses unbounded Python integers; ``/`` and ``%`` truncate toward
  zero like C.  ``bits=32`` reduces only the final result to 32-bit
  unsigned, so ``-1`` becomes ``0xffffffff``.
* ``&&``, ``||`` and ``?:`` short-circuit: the branch not taken is parsed
  but never evaluated, so ``defined(X) && X > 2`` is fine with X undefined
  and ``0 && 1/0`` is 0.
* ``is_ct_const(e)`` / ``isnum(e)`` are 1 when ``e`` is a compile-time
  constant (every name in it resolves), else 0; IXA macro libraries test
  their arguments with them.
* Names may carry the register prefixes ``$``, ``$$`` and ``@`` and the
  label suffix ``#`` so ``&$xfer`` and ``&label#`` parse.

Every failure is an :class:`ExprError` (an :class:`AsmError`) whose column
points at the offending token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .errors import AsmError, SourceLoc

__all__ = [
    "ExprError",
    "Token",
    "evaluate",
    "is_constant_expression",
    "tokenize_expr",
]

Resolver = Callable[[str], "int | None"]

# Bounds that keep hostile input from eating the machine: values and shift
# counts beyond this many bits, and parse nesting beyond this depth.
MAX_BITS = 65536
MAX_NESTING = 100


class ExprError(AsmError):
    """An expression error; ``kind`` tells callers why it failed.

    ``kind`` is ``"syntax"`` (not an expression), ``"undefined"`` (a name did
    not resolve) or ``"value"`` (division by zero, overflow...).  The
    preprocessor's ``#define_eval`` keeps non-expression text verbatim but
    must still report arithmetic faults, hence the distinction.
    """

    def __init__(self, message: str, loc: SourceLoc | None, kind: str):
        super().__init__(message, loc)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "num", "id", "op", "end"
    text: str
    offset: int  # 0-based index in the expression text
    value: int = 0  # for "num"


_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<num>[0-9][A-Za-z0-9_]*)
      | (?P<id>[$@]*[A-Za-z_][A-Za-z0-9_$@]*\#?)
      | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>?:()])
      | (?P<bad>\S)
    )""",
    re.VERBOSE | re.ASCII,
)
_HEX_RE = re.compile(r"0[xX]([0-9a-fA-F]+)", re.ASCII)
_BIN_RE = re.compile(r"0[bB]([01]+)", re.ASCII)
_DEC_RE = re.compile(r"[0-9]+", re.ASCII)
_IDENT_RE = re.compile(r"[$@]*[A-Za-z_][A-Za-z0-9_$@]*#?", re.ASCII)

_BINARY_PREC: dict[str, int] = {
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    "<=": 7,
    ">": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}
_CONST_FUNCS = frozenset({"is_ct_const", "isnum"})


def _at(loc: SourceLoc, offset: int) -> SourceLoc:
    """The location of a token ``offset`` characters into the expression."""
    if offset == 0:
        return loc
    return SourceLoc(loc.file, loc.line, loc.col + offset, loc.text, loc.expansion)


def _parse_number(text: str) -> int | None:
    """Value of a numeric literal, or None if it is malformed."""
    try:
        if m := _HEX_RE.fullmatch(text):
            return int(m.group(1), 16)
        if m := _BIN_RE.fullmatch(text):
            return int(m.group(1), 2)
        if _DEC_RE.fullmatch(text):
            return int(text)
    except ValueError:  # more digits than int() accepts
        return None
    return None


@lru_cache(maxsize=8192)
def _tokenize_cached(text: str) -> tuple[Token, ...] | tuple[str, int, str]:
    """Tokens of ``text``, or an error triple (message, offset, kind).

    Cached because the assembler evaluates the same operand text (``(&sig <<
    3)``) many times; errors are returned rather than raised so the cache
    stays location-free.
    """
    toks: list[Token] = []
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind is None:  # trailing whitespace only
            break
        tok_text = m.group(kind)
        off = m.start(kind)
        if kind == "num":
            value = _parse_number(tok_text)
            if value is None:
                return (f"invalid number '{tok_text}'", off, "syntax")
            toks.append(Token("num", tok_text, off, value))
        elif kind == "bad":
            return (f"unexpected character '{tok_text}' in expression", off, "syntax")
        else:
            toks.append(Token(kind, tok_text, off))
    toks.append(Token("end", "", len(text.rstrip())))
    return tuple(toks)


def tokenize_expr(text: str, loc: SourceLoc | None = None) -> list[Token]:
    """Split ``text`` into expression tokens (the last one has kind ``"end"``)."""
    result = _tokenize_cached(text)
    if isinstance(result[0], str):
        message, offset, kind = result  # type: ignore[misc]
        where = _at(loc, offset) if loc is not None else None  # type: ignore[arg-type]
        raise ExprError(message, where, kind)  # type: ignore[arg-type]
    return list(result)  # type: ignore[arg-type]


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C (and the SDK) do."""
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


class _Parser:
    """Precedence-climbing evaluator that computes while it parses.

    ``active`` is False inside a short-circuited branch: the text must still
    parse, but names are not looked up and arithmetic faults are ignored.
    """

    __slots__ = ("toks", "pos", "loc", "resolve", "address_of", "is_defined", "depth")

    def __init__(
        self,
        toks: Sequence[Token],
        loc: SourceLoc,
        resolve: Resolver | None,
        address_of: Resolver | None,
        is_defined: Callable[[str], bool] | None,
    ):
        self.toks = toks
        self.pos = 0
        self.loc = loc
        self.resolve = resolve
        self.address_of = address_of
        self.is_defined = is_defined
        self.depth = 0

    # -- helpers -------------------------------------------------------------
    def error(self, message: str, tok: Token, kind: str = "syntax") -> ExprError:
        return ExprError(message, _at(self.loc, tok.offset), kind)

    def peek(self) -> Token:
        return self.toks[self.pos]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        if tok.kind != "end":
            self.pos += 1
        return tok

    def expect(self, op: str) -> Token:
        tok = self.peek()
        if tok.kind != "op" or tok.text != op:
            raise self.unexpected(tok, f"expected '{op}'")
        return self.next()

    def unexpected(self, tok: Token, what: str = "") -> ExprError:
        if tok.kind == "end":
            msg = "unexpected end of expression"
        else:
            msg = f"unexpected '{tok.text}' in expression"
        return self.error(f"{msg}{': ' + what if what else ''}", tok)

    def enter(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"expression nested too deeply (limit {MAX_NESTING})", tok)

    def check_size(self, value: int, tok: Token) -> int:
        if value.bit_length() > MAX_BITS:
            raise self.error(f"value too large (more than {MAX_BITS} bits)", tok, "value")
        return value

    # -- grammar -------------------------------------------------------------
    def ternary(self, active: bool) -> int:
        start = self.peek()
        self.enter(start)
        cond = self.binary(1, active)
        tok = self.peek()
        if tok.kind == "op" and tok.text == "?":
            self.next()
            yes = self.ternary(active and cond != 0)
            self.expect(":")
            no = self.ternary(active and cond == 0)
            cond = yes if cond != 0 else no
        self.depth -= 1
        return cond

    def binary(self, min_prec: int, active: bool) -> int:
        left = self.unary(active)
        while True:
            tok = self.peek()
            prec = _BINARY_PREC.get(tok.text) if tok.kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.next()
            op = tok.text
            if op == "&&":
                right = self.binary(prec + 1, active and left != 0)
                left = int(left != 0 and right != 0)
            elif op == "||":
                right = self.binary(prec + 1, active and left == 0)
                left = int(left != 0 or right != 0)
            else:
                right = self.binary(prec + 1, active)
                left = self.apply(op, left, right, tok, active)

    def apply(self, op: str, a: int, b: int, tok: Token, active: bool) -> int:
        """One binary operator; faults only count in an active branch."""
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            if a.bit_length() + b.bit_length() > MAX_BITS + 1:
                if not active:
                    return 0
                raise self.error(f"value too large (more than {MAX_BITS} bits)", tok, "value")
            return a * b
        if op in ("/", "%"):
            if b == 0:
                if not active:
                    return 0
                raise self.error("division by zero", tok, "value")
            q = _c_div(a, b)
            return q if op == "/" else a - b * q
        if op in ("<<", ">>"):
            if b < 0 or b > MAX_BITS:
                if not active:
                    return 0
                what = "negative" if b < 0 else "too large a"
                raise self.error(f"{what} shift count {b}", tok, "value")
            return self.check_size(a << b, tok) if op == "<<" else a >> b
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "==":
            return int(a == b)
        if op == "!=":
            return int(a != b)
        if op == "<":
            return int(a < b)
        if op == "<=":
            return int(a <= b)
        if op == ">":
            return int(a > b)
        return int(a >= b)  # ">="

    def unary(self, active: bool) -> int:
        tok = self.peek()
        if tok.kind == "op":
            if tok.text in ("-", "+", "~", "!"):
                self.next()
                self.enter(tok)
                value = self.unary(active)
                self.depth -= 1
                if tok.text == "-":
                    return -value
                if tok.text == "~":
                    return ~value
                if tok.text == "!":
                    return int(value == 0)
                return value
            if tok.text == "&":
                self.next()
                return self.address(active)
            if tok.text == "(":
                self.next()
                value = self.ternary(active)
                self.expect(")")
                return value
            raise self.unexpected(tok, "expected a number, a name or '('")
        if tok.kind == "num":
            self.next()
            return tok.value
        if tok.kind == "id":
            self.next()
            if tok.text == "defined":
                return self.defined(active)
            if tok.text in _CONST_FUNCS and self.peek().text == "(":
                return self.const_probe(active)
            return self.name(tok, active)
        raise self.unexpected(tok, "expected a number, a name or '('")

    def name(self, tok: Token, active: bool) -> int:
        if not active:
            return 0
        value = self.resolve(tok.text) if self.resolve is not None else None
        if value is None:
            raise self.error(f"undefined symbol '{tok.text}' in expression", tok, "undefined")
        return value

    def address(self, active: bool) -> int:
        tok = self.next()
        if tok.kind != "id":
            raise self.unexpected(tok, "expected a name after '&'")
        if not active:
            return 0
        value = self.address_of(tok.text) if self.address_of is not None else None
        if value is None:
            raise self.error(f"no address known for '&{tok.text}'", tok, "undefined")
        return value

    def defined(self, active: bool) -> int:
        paren = self.peek().kind == "op" and self.peek().text == "("
        if paren:
            self.next()
        tok = self.next()
        if tok.kind != "id":
            raise self.unexpected(tok, "expected a name after 'defined'")
        if paren:
            self.expect(")")
        if not active:
            return 0
        if self.is_defined is not None:
            return int(self.is_defined(tok.text))
        return int(self.resolve is not None and self.resolve(tok.text) is not None)

    def const_probe(self, active: bool) -> int:
        """``is_ct_const(e)``: 1 if ``e`` evaluates without unknown names."""
        self.expect("(")
        start, depth = self.pos, self.depth
        try:
            self.ternary(True)
            self.expect(")")
        except ExprError as exc:
            # Not an expression ('*l$index0') or not constant ('my_reg'): 0.
            # An arithmetic fault in a live branch is still the user's bug.
            if exc.kind == "value" and active:
                raise
            self.pos, self.depth = start, depth
            self.skip_to_close()
            return 0
        return 1

    def skip_to_close(self) -> None:
        level = 1
        while True:
            tok = self.next()
            if tok.kind == "end":
                raise self.unexpected(tok, "expected ')'")
            if tok.kind == "op" and tok.text == "(":
                level += 1
            elif tok.kind == "op" and tok.text == ")":
                level -= 1
                if level == 0:
                    return


def evaluate(
    text: str,
    loc: SourceLoc,
    resolve: Resolver | None = None,
    address_of: Resolver | None = None,
    *,
    bits: int | None = None,
    is_defined: Callable[[str], bool] | None = None,
) -> int:
    """Evaluate ``text``; ``loc`` is where the text starts in the source.

    ``resolve(name)`` gives a name's value (None: undefined), ``address_of``
    does the same for ``&name``, and ``is_defined`` answers ``defined(name)``
    (without it, "defined" means "resolve knows it").  ``bits`` reduces the
    result to that many bits, unsigned.
    """
    toks = _tokenize_cached(text)
    if isinstance(toks[0], str):
        tokenize_expr(text, loc)  # raises the located error
    parser = _Parser(toks, loc, resolve, address_of, is_defined)  # type: ignore[arg-type]
    if parser.peek().kind == "end":
        raise ExprError("missing expression", loc, "syntax")
    try:
        value = parser.ternary(True)
    except RecursionError:  # only reachable when the caller's stack is already deep
        raise ExprError("expression nested too deeply", loc, "syntax") from None
    tok = parser.peek()
    if tok.kind != "end":
        raise parser.unexpected(tok, "expected an operator or the end of the expression")
    if bits is not None:
        value &= (1 << bits) - 1
    return value


_NOWHERE = SourceLoc("<expression>", 1)


def is_constant_expression(text: str) -> bool:
    """True if ``text`` is a well-formed expression that needs no symbols."""
    try:
        evaluate(text, _NOWHERE)
    except AsmError:
        return False
    return True


def is_identifier(text: str) -> bool:
    """True if ``text`` is one name as expressions spell it (``$x``, ``l#``)."""
    return _IDENT_RE.fullmatch(text) is not None
