"""Helpers for emulator tests: assemble lists of physical instructions."""

from __future__ import annotations

import re

from npkit.asm.isa import encode
from npkit.emulator.binding import Chip

_LABEL = re.compile(r"^\s*([A-Za-z_][\w]*#):\s*(.*)$")


def assemble(lines: list[str], ctx_mode: int = 8) -> list[int]:
    """Encode physical instructions; `name#:` labels may prefix a line (alone or
    before an instruction) and be used as branch targets."""
    labels: dict[str, int] = {}
    body: list[str] = []
    for raw in lines:
        text = raw.split(";")[0].strip()
        while True:
            m = _LABEL.match(text)
            if not m:
                break
            labels[m[1]] = len(body)
            text = m[2].strip()
        if text:
            body.append(text)

    def resolve(name: str) -> int | None:
        return labels.get(name if name.endswith("#") else name + "#", labels.get(name))

    return [encode(t, resolve=resolve, ctx_mode=ctx_mode) for t in body]


def chip_with(programs: dict[int, list[str]], config: str = "ixp2800", ctx_mask: int = 1,
              ctx_mode: int = 8, **overrides: object) -> Chip:
    """A chip with each ME in `programs` loaded and enabled with `ctx_mask`."""
    chip = Chip(config, **overrides)
    for me, prog in programs.items():
        chip.load(me, assemble(prog, ctx_mode), ctx_mode)
        chip.enable(me, ctx_mask)
    return chip


def run_prog(lines: list[str], cycles: int = 2000, ctx_mask: int = 1, **overrides: object) -> Chip:
    chip = chip_with({0: lines}, ctx_mask=ctx_mask, **overrides)
    chip.run(cycles)
    return chip


def ld32(reg: str, value: int) -> list[str]:
    """Two instructions loading a 32-bit constant."""
    value &= 0xFFFFFFFF
    return [f"immed_w0[{reg}, 0x{value & 0xFFFF:x}]", f"immed_w1[{reg}, 0x{value >> 16:x}]"]
