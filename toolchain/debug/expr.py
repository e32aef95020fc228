"""Expressions in debugger commands: `break L if a3 == 5`, `print len + 2`, `packet buf + 2`.

Python expression syntax restricted to integers, names, arithmetic, bitwise and
comparison operators and `and`/`or`/`not`.  Names are resolved by a callback (register
names, `.reg` names, labels, signals); `$x`, `$$x`, `@a5` and `n$3` are accepted as
names by rewriting them before parsing.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable

_BIN = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}  # fmt: skip
_CMP = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip
_NAME = re.compile(r"(?<![\w$@])((?:@)?(?:\$\$?|n\$)?[A-Za-z_][\w]*(?:\.(?:in|out|state))?|(?:@)?(?:\$\$?|n\$)\d+(?:\.(?:in|out))?)")


MAX_SHIFT = 64  # a shift count beyond the widest value the debugger shows is a mistake
MAX_BITS = 256  # values (and intermediate results) wider than this are refused
MAX_LENGTH = 4096  # characters of expression text


class ExprError(ValueError):
    """A malformed or unsupported expression; `col` is the 0-based column in the text, or -1."""

    def __init__(self, message: str, col: int = -1) -> None:
        super().__init__(message)
        self.col = col


def _checked(op: type[ast.operator], a: int, b: int, text: str) -> int:
    """One binary operator, with shift counts and result sizes bounded (a shift of
    99,999,999,999 would otherwise build a number the size of the machine's memory)."""
    if op in (ast.LShift, ast.RShift) and not 0 <= b <= MAX_SHIFT:
        raise ExprError(f"shift count {b} in '{text}' is outside 0..{MAX_SHIFT}")
    if op is ast.Mult and a.bit_length() + b.bit_length() > MAX_BITS + 1:
        raise ExprError(f"value too large in '{text}' (more than {MAX_BITS} bits)")
    if op in (ast.FloorDiv, ast.Div, ast.Mod) and b == 0:
        raise ExprError(f"division by zero in '{text}'")
    value = int(_BIN[op](a, b))
    if value.bit_length() > MAX_BITS:
        raise ExprError(f"value too large in '{text}' (more than {MAX_BITS} bits)")
    return value


def names_in(text: str) -> list[str]:
    return [m[1] for m in _NAME.finditer(text) if not re.fullmatch(r"and|or|not|0x\w+", m[1])]


_TOKEN = re.compile(rf"{_NAME.pattern}|&&|\|\||!(?!=)")


def _rewrite(text: str, sub: Callable[[re.Match[str]], str]) -> tuple[str, list[int]]:
    """`text` as Python source (names through `sub`, && || ! as and/or/not), and the
    column in `text` of every character of the source (plus its end), for error positions."""
    out: list[str] = []
    cols: list[int] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        for i in range(pos, m.start()):
            out.append(text[i])
            cols.append(i)
        tok = m[0]
        rep = {"&&": " and ", "||": " or ", "!": " not "}.get(tok) or sub(m)
        out.append(rep)
        cols += [m.start()] * len(rep)
        pos = m.end()
    for i in range(pos, len(text)):
        out.append(text[i])
        cols.append(i)
    cols.append(len(text))
    src = "".join(out)
    lead = len(src) - len(src.lstrip())
    return src.strip(), cols[lead:]


def evaluate(text: str, lookup: Callable[[str], int]) -> int:
    """Value of `text`; comparisons and logic give 0/1."""
    mapping: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        name = m[1]
        if name in ("and", "or", "not") or re.fullmatch(r"\d\w*", name):
            return name
        key = f"_v{len(mapping)}"
        mapping[key] = name
        return key

    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression too long ({len(text)} characters, at most {MAX_LENGTH})")
    src, cols = _rewrite(text, sub)
    try:
        tree = ast.parse(src, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:  # ValueError: a NUL byte
        off = getattr(e, "offset", None) or 0  # 0: at the end of the text
        col = cols[min(off - 1, len(cols) - 1)] if off > 0 else cols[-1]
        why = "it ends too early" if off <= 0 else getattr(e, "msg", "invalid syntax")
        raise ExprError(f"cannot parse expression '{text.strip()}': {why}", col) from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            if node.value.bit_length() > MAX_BITS:
                raise ExprError(f"constant too large in '{text}' (more than {MAX_BITS} bits)")
            return int(node.value)
        if isinstance(node, ast.Name):
            name = mapping.get(node.id, node.id)
            return int(lookup(name))
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _checked(type(node.op), ev(node.left), ev(node.right), text)
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.Invert):
                return ~v & 0xFFFFFFFF
            if isinstance(node.op, ast.Not):
                return int(not v)
            if isinstance(node.op, ast.UAdd):
                return v
        if isinstance(node, ast.BoolOp):
            vals = (ev(v) for v in node.values)
            return int(all(vals)) if isinstance(node.op, ast.And) else int(any(vals))
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node)
                if type(op) not in _CMP or not _CMP[type(op)](left, right):
                    return 0
                left = right
            return 1
        raise ExprError(f"unsupported expression '{text}'")

    try:
        return ev(tree)
    except RecursionError:
        raise ExprError(f"expression nested too deeply: '{text[:60]}'") from None
