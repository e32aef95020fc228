"""Load an npkit image (npkit.toolchain.image) onto an emulated chip.

    chip = Chip("ixp2800")
    loaded = load_image(chip, read_image("prog.elf"))       # -> {me: program name}

Each Program goes on its `.mes` (ME 0 when empty; `mes=` overrides that
default and filters explicit lists).  Initial registers (`init_regs`, with
ctx None meaning every context), signals (`set_sigs`, all contexts) and
memory (`init_mem`) are applied, then the program's contexts are enabled
(all 8, or 0/2/4/6 in 4-context mode).  Anything that does not fit this chip
raises LoadError with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .binding import MEM_SPACES, Chip, EmulatorError


class LoadError(ValueError):
    """The image cannot be loaded on this chip; the message says why."""


def _targets(prog: Any, num_me: int, mes: list[int] | None) -> list[int]:
    explicit = list(getattr(prog, "mes", []) or [])
    if not explicit:
        targets = list(mes) if mes else [0]
    else:
        targets = [m for m in explicit if mes is None or m in mes]
    for m in targets:
        if not 0 <= m < num_me:
            raise LoadError(f"program '{prog.name}' is assigned to ME {m}, but the chip has {num_me} MEs")
    return targets


def load_image(chip: Chip, image: Any, mes: list[int] | None = None, enable: bool = True) -> dict[int, str]:
    """Load every program of `image`; return {me: program name}."""
    programs = list(getattr(image, "programs", []) or [])
    if not programs:
        raise LoadError("image has no programs")
    limit = int(chip.config["ustore_words"])
    loaded: dict[int, str] = {}
    for prog in programs:
        name = getattr(prog, "name", "?")
        words = [int(w) for w in prog.words]
        if not words:
            raise LoadError(f"program '{name}' is empty")
        if len(words) > limit:
            raise LoadError(f"program '{name}' has {len(words)} words; the control store holds {limit}")
        bad = next((i for i, w in enumerate(words) if not 0 <= w < (1 << 40)), None)
        if bad is not None:
            raise LoadError(f"program '{name}' word {bad} is not a 40-bit value")
        ctx_mode = int(getattr(prog, "ctx_mode", 8))
        if ctx_mode not in (4, 8):
            raise LoadError(f"program '{name}' has context mode {ctx_mode} (must be 4 or 8)")
        for me in _targets(prog, chip.num_me, mes):
            if me in loaded:
                raise LoadError(f"ME {me} is assigned to both '{loaded[me]}' and '{name}'")
            chip.load(me, words, ctx_mode)
            ctxs = range(0, 8, 2) if ctx_mode == 4 else range(8)
            for reg, ctx, value in getattr(prog, "init_regs", []) or []:
                try:
                    if ctx is None and not str(reg).startswith("@"):
                        for c in ctxs:
                            chip.set_reg(me, reg, value, ctx=c)
                    else:
                        chip.set_reg(me, reg, value, ctx=0 if ctx is None else int(ctx))
                except EmulatorError as e:
                    raise LoadError(f"program '{name}': initial value of {reg}: {e}") from None
            for sig in getattr(prog, "set_sigs", []) or []:
                if not 1 <= int(sig) <= 15:
                    raise LoadError(f"program '{name}': .set_sig signal {sig} out of range (1-15)")
                chip.set_signal(me, int(sig))
            if enable:
                chip.enable(me, 0x55 if ctx_mode == 4 else 0xFF)
            loaded[me] = name
        for space, addr, data in getattr(prog, "init_mem", []) or []:
            if space not in MEM_SPACES:
                raise LoadError(f"program '{name}': unknown memory space '{space}'")
            addr, data = int(addr), bytes(data)
            if not 0 <= addr < 1 << 64:
                raise LoadError(f"program '{name}': {space} data address {addr} is not an unsigned 64-bit value")
            try:
                chip.mem_write(space, addr, data)
            except EmulatorError:
                raise LoadError(f"program '{name}': {len(data)} bytes of {space} data at 0x{addr:x} "
                                f"lie outside the {space} of this chip") from None  # fmt: skip
    return loaded


def load_path(chip: Chip, path: str | Path, mes: list[int] | None = None) -> dict[int, str]:
    """Read an image file (npkit ELF) and load it."""
    from npkit.toolchain.image import ImageError, read_image

    try:
        image = read_image(path)
    except ImageError as e:
        raise LoadError(str(e)) from None
    return load_image(chip, image, mes)
