"""Structured control flow: .if/.elif/.else/.endif, .while/.endw, .repeat/.until.

Each construct expands, while the parser reads it, into compare-and-branch
instructions and generated labels (`__sN_...#`).  Conditions:

    (a == b)  (a != b)            alu[--, a, -, b] then beq / bne
    (a < b)   (a >= b)            alu[--, a, -, b] then blo / bhs   (UNSIGNED)
    (a > b)   (a <= b)            alu[--, b, -, a] then blo / bhs   (UNSIGNED)
    (a)                           alu[--, --, b, a] then bne (true when nonzero)
    BIT(reg, n)   !BIT(reg, n)    br_bset / br_bclr
    SIGNAL(sig)   !SIGNAL(sig)    br_signal / br_!signal (tests and clears the signal)
    c1 && c2,  c1 || c2, !(c)     short-circuit, C precedence (&& binds tighter)

Relational comparisons are unsigned: they compile to the carry-based branches
(blo = bcc, bhs = bcs).  Operands are anything an alu source accepts
(registers, transfer registers, constants up to 255, expressions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from .errors import AsmError, SourceLoc, at

_RELOPS = ("==", "!=", "<=", ">=", "<", ">")


@dataclass
class Cond:
    kind: str  # and | or | not | cmp | bit | signal | nonzero
    parts: tuple[Cond, ...] = ()
    a: str = ""
    b: str = ""
    op: str = ""
    off: int = 0  # offset of the condition in the logical line


@dataclass
class _Frame:
    kind: str  # if | while | repeat
    loc: SourceLoc
    end: str
    next: str | None = None  # .if: label of the next .elif/.else arm
    top: str = ""  # loops: label at the top


def _top_split(text: str, sep: str) -> list[tuple[str, int]]:
    """Split on `sep` outside parentheses; pieces with their offsets."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            out.append((text[start:i], start))
            i += len(sep)
            start = i
            continue
        i += 1
    out.append((text[start:], start))
    return out


def _matching_paren(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _find_relop(text: str) -> tuple[str, int] | None:
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0:
            two = text[i : i + 2]
            if two in ("<<", ">>"):
                i += 2
                continue
            for op in _RELOPS:
                if text.startswith(op, i):
                    return op, i
        i += 1
    return None


MAX_COND_DEPTH = 100


def parse_cond(text: str, off: int, loc: SourceLoc, depth: int = 0) -> Cond:
    """Parse a condition; `off` is its offset in the logical line (for errors)."""
    if depth > MAX_COND_DEPTH:
        raise AsmError(f"condition nested too deeply (limit {MAX_COND_DEPTH})", at(loc, off))
    stripped = text.strip()
    if not stripped:
        raise AsmError("expected a condition", at(loc, off))
    off += len(text) - len(text.lstrip())
    text = stripped
    ors = _top_split(text, "||")
    if len(ors) > 1:
        return Cond("or", tuple(parse_cond(t, off + o, loc, depth + 1) for t, o in ors), off=off)
    ands = _top_split(text, "&&")
    if len(ands) > 1:
        return Cond("and", tuple(parse_cond(t, off + o, loc, depth + 1) for t, o in ands), off=off)
    if text.startswith("!") and not text.startswith("!="):
        return Cond("not", (parse_cond(text[1:], off + 1, loc, depth + 1),), off=off)
    if text.startswith("(") and _matching_paren(text, 0) == len(text) - 1:
        # parentheses around the whole condition group it, whatever it holds: `(x)` is the
        # nonzero test of x, not an operand `(x)` (which would be read as a C expression)
        return parse_cond(text[1:-1], off + 1, loc, depth + 1)
    m = re.fullmatch(r"(BIT|SIGNAL)\s*\((.*)\)", text, re.IGNORECASE | re.DOTALL)
    if m:
        args = [a.strip() for a, _ in _top_split(m[2], ",")]
        if m[1].upper() == "BIT":
            if len(args) != 2 or not all(args):
                raise AsmError("expected BIT(register, bit_number)", at(loc, off))
            return Cond("bit", a=args[0], b=args[1], off=off)
        if len(args) != 1 or not args[0]:
            raise AsmError("expected SIGNAL(signal_name)", at(loc, off))
        return Cond("signal", a=args[0], off=off)
    rel = _find_relop(text)
    if rel is None:
        return Cond("nonzero", a=text, off=off)
    op, i = rel
    a, b = text[:i].strip(), text[i + len(op) :].strip()
    if not a or not b:
        raise AsmError(f"'{op}' needs an operand on each side", at(loc, off + i))
    return Cond("cmp", a=a, b=b, op=op, off=off)


_NEGATE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


class _Placed(Protocol):
    offs: list[int]
    mn_off: int


class Emitter(Protocol):
    """What the structured directives write into: the parser's instructions and labels."""

    def instruction(self, text: str, loc: SourceLoc, off: int, note: str = "") -> _Placed: ...

    def label(self, name: str, loc: SourceLoc, generated: bool = False) -> None: ...


class Structured:
    def __init__(self, parser: Emitter):
        self.p = parser
        self.stack: list[_Frame] = []
        self.serial = 0

    def handles(self, name: str) -> bool:
        return name in (
            "if",
            "elif",
            "else",
            "endif",
            "while",
            "endw",
            "repeat",
            "until",
            "break",
            "continue",
        )

    def new_label(self, what: str) -> str:
        self.serial += 1
        return f"__s{self.serial}_{what}"

    def emit(self, text: str, loc: SourceLoc, off: int) -> None:
        ins = self.p.instruction(text, loc, 0, note="structured")
        ins.offs = [off] * len(ins.offs)
        ins.mn_off = off

    def place(self, name: str, loc: SourceLoc) -> None:
        self.p.label(name, loc, generated=True)

    def jump_if(self, c: Cond, target: str, sense: bool, loc: SourceLoc) -> None:
        """Branch to `target` when condition `c` evaluates to `sense`."""
        if c.kind == "not":
            self.jump_if(c.parts[0], target, not sense, loc)
        elif c.kind in ("and", "or"):
            short = (c.kind == "and") != sense  # and/False or or/True: each part can jump alone
            if short:
                for part in c.parts:
                    self.jump_if(part, target, sense, loc)
            else:
                skip = self.new_label("skip")
                for part in c.parts[:-1]:
                    self.jump_if(part, skip, not sense, loc)
                self.jump_if(c.parts[-1], target, sense, loc)
                self.place(skip, loc)
        elif c.kind == "bit":
            mn = "br_bset" if sense else "br_bclr"
            self.emit(f"{mn}[{c.a}, {c.b}, {target}#]", loc, c.off)
        elif c.kind == "signal":
            mn = "br_signal" if sense else "br_!signal"
            self.emit(f"{mn}[{c.a}, {target}#]", loc, c.off)
        elif c.kind == "nonzero":
            self.emit(f"alu[--, --, b, {c.a}]", loc, c.off)
            self.emit(f"{'bne' if sense else 'beq'}[{target}#]", loc, c.off)
        else:
            op = c.op if sense else _NEGATE[c.op]
            a, b = (c.b, c.a) if op in (">", "<=") else (c.a, c.b)
            self.emit(f"alu[--, {a}, -, {b}]", loc, c.off)
            br = {"==": "beq", "!=": "bne", "<": "blo", ">=": "bhs", ">": "blo", "<=": "bhs"}[op]
            self.emit(f"{br}[{target}#]", loc, c.off)

    def cond(self, rest: str, loc: SourceLoc, off: int, name: str) -> Cond:
        text = rest.rstrip()
        if not text.lstrip().startswith("("):
            raise AsmError(
                f".{name} expects a condition in parentheses, e.g. .{name} (x == 0)", at(loc, off)
            )
        depth = 0
        for k, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth < 0:
                raise AsmError("unbalanced ')' in condition", at(loc, off + k))
        if depth:
            raise AsmError("missing ')' in condition", at(loc, off + len(text)))
        return parse_cond(text, off, loc)

    def frame(self, kinds: tuple[str, ...], name: str, dloc: SourceLoc) -> _Frame:
        if not self.stack or self.stack[-1].kind not in kinds:
            opener = {"if": ".if", "while": ".while", "repeat": ".repeat"}[kinds[0]]
            raise AsmError(f".{name} without a matching {opener}", dloc)
        return self.stack[-1]

    def directive(self, name: str, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        if name in ("if", "while", "until", "elif"):
            c = self.cond(rest, loc, off, name)
        elif rest.strip():
            raise AsmError(f"unexpected text after .{name}", at(loc, off))
        if name == "if":
            f = _Frame("if", dloc, self.new_label("endif"), self.new_label("else"))
            self.stack.append(f)
            self.jump_if(c, f.next or "", False, loc)
        elif name == "elif":
            f = self.frame(("if",), name, dloc)
            if f.next is None:
                raise AsmError(".elif after .else", dloc)
            self.emit(f"br[{f.end}#]", loc, off)
            self.place(f.next, loc)
            f.next = self.new_label("else")
            self.jump_if(c, f.next, False, loc)
        elif name == "else":
            f = self.frame(("if",), name, dloc)
            if f.next is None:
                raise AsmError("second .else in one .if", dloc)
            self.emit(f"br[{f.end}#]", loc, off)
            self.place(f.next, loc)
            f.next = None
        elif name == "endif":
            f = self.frame(("if",), name, dloc)
            self.stack.pop()
            if f.next is not None:
                self.place(f.next, loc)
            self.place(f.end, loc)
        elif name == "while":
            f = _Frame("while", dloc, self.new_label("endw"), top=self.new_label("while"))
            self.stack.append(f)
            self.place(f.top, loc)
            self.jump_if(c, f.end, False, loc)
        elif name == "endw":
            f = self.frame(("while",), name, dloc)
            self.stack.pop()
            self.emit(f"br[{f.top}#]", loc, off)
            self.place(f.end, loc)
        elif name == "repeat":
            f = _Frame("repeat", dloc, self.new_label("until"), top=self.new_label("repeat"))
            self.stack.append(f)
            self.place(f.top, loc)
        elif name == "until":
            f = self.frame(("repeat",), name, dloc)
            self.stack.pop()
            self.jump_if(c, f.top, False, loc)
            self.place(f.end, loc)
        else:  # break / continue
            loops = [f for f in self.stack if f.kind in ("while", "repeat")]
            if not loops:
                raise AsmError(f".{name} outside .while or .repeat", dloc)
            f = loops[-1]
            if name == "continue" and f.kind == "repeat":
                raise AsmError(".continue is only supported in .while loops", dloc)
            self.emit(f"br[{f.end if name == 'break' else f.top}#]", loc, off)

    def finish(self) -> None:
        if self.stack:
            f = self.stack[-1]
            closer = {"if": ".endif", "while": ".endw", "repeat": ".until"}[f.kind]
            raise AsmError(f".{f.kind} without a matching {closer}", f.loc)
