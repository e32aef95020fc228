"""Shared helpers for the assembler tests."""

from __future__ import annotations

from npkit.asm.assembler import Assembly, assemble_text
from npkit.asm.errors import Diagnostics
from npkit.asm.isa import decode


def asm(src: str, **kw: object) -> Assembly:
    return assemble_text(src, "t.uc", diags=Diagnostics(), **kw)


def texts(a: Assembly) -> list[str]:
    return [decode(w, a.program.ctx_mode) for w in a.program.words]


def sym(a: Assembly, name: str) -> object:
    for s in a.program.symbols:
        if s.name == name:
            return s.value
    raise KeyError(name)


def warnings(a: Assembly) -> list[str]:
    return [m for m, _ in a.diags.warnings]
