"""Split MEv2 instruction text into mnemonic, arguments and optional tokens.

`alu[a1, a2, +, 0x10], no_cc` -> ("alu", ["a1", "a2", "+", "0x10"], [("no_cc", None)])
Shared by the physical encoder and the assembler's parser (which feeds it
lines that still hold virtual register names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class SyntaxProblem(ValueError):
    """Malformed instruction text; `col` is the 0-based offset of the problem."""

    def __init__(self, message: str, col: int = 0):
        super().__init__(message)
        self.col = col


@dataclass(frozen=True)
class Token:
    name: str
    args: tuple[str, ...] | None  # None: no brackets
    col: int = 0


@dataclass(frozen=True)
class SplitInstr:
    mnemonic: str
    args: tuple[str, ...]
    arg_cols: tuple[int, ...]
    tokens: tuple[Token, ...]


def _split_top(text: str, start: int, closer: str) -> tuple[list[tuple[str, int]], int]:
    """Split text[start:] on top-level commas until `closer`; return pieces and end index."""
    pieces: list[tuple[str, int]] = []
    depth = 0
    piece_start = start
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                if c != closer:
                    raise SyntaxProblem(f"unbalanced '{c}'", i)
                pieces.append((text[piece_start:i], piece_start))
                return pieces, i + 1
            depth -= 1
        elif c == "," and depth == 0 and closer:
            pieces.append((text[piece_start:i], piece_start))
            piece_start = i + 1
        i += 1
    if closer:
        raise SyntaxProblem(f"missing '{closer}'", n)
    pieces.append((text[piece_start:], piece_start))
    return pieces, n


def _clean(pieces: list[tuple[str, int]]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    args: list[str] = []
    cols: list[int] = []
    for raw, col in pieces:
        stripped = raw.strip()
        cols.append(col + (len(raw) - len(raw.lstrip())))
        args.append(stripped)
    return tuple(args), tuple(cols)


def reference_count(text: str) -> int | None:
    """A memory command's count operand as written (`4`, `0x4`, `max_8`); None: not a number."""
    t = text.strip()
    m = re.fullmatch(r"max_(\d+)", t, re.IGNORECASE)
    if m:
        return int(m[1])
    try:
        return int(t, 0)
    except ValueError:
        return None


def split_instruction(text: str) -> SplitInstr:
    text = text.rstrip()
    i = 0
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    j = i
    while j < n and text[j] not in "[,":
        j += 1
    mnemonic = text[i:j].strip()
    if not mnemonic:
        raise SyntaxProblem("expected an instruction", i)
    if " " in mnemonic or "\t" in mnemonic:
        bad = i + max(mnemonic.find(" "), mnemonic.find("\t"))
        raise SyntaxProblem(f"unexpected text after '{mnemonic.split()[0]}'", bad + 1)
    args: tuple[str, ...] = ()
    arg_cols: tuple[int, ...] = ()
    if j < n and text[j] == "[":
        pieces, j = _split_top(text, j + 1, "]")
        args, arg_cols = _clean(pieces)
        if args == ("",):
            args, arg_cols = (), ()
    tokens: list[Token] = []
    while j < n:
        while j < n and text[j].isspace():
            j += 1
        if j >= n:
            break
        if text[j] != ",":
            raise SyntaxProblem("expected ',' before an optional token", j)
        j += 1
        while j < n and text[j].isspace():
            j += 1
        k = j
        while k < n and text[k] not in "[,":
            k += 1
        name = text[j:k].strip()
        if not name:
            raise SyntaxProblem("expected an optional token after ','", j)
        tok_args: tuple[str, ...] | None = None
        if k < n and text[k] == "[":
            pieces, k = _split_top(text, k + 1, "]")
            tok_args, _ = _clean(pieces)
        tokens.append(Token(name, tok_args, j))
        j = k
    return SplitInstr(mnemonic, args, arg_cols, tuple(tokens))
