"""Load an npkit image (npkit.toolchain.image) onto an emulated chip: the one loader.

    chip = Chip("ixp2800")
    loaded = load_image(chip, read_image("prog.elf"))       # -> {me: program name}

Every command that runs an image (`npk run`, `debug`, `trace`, `why`, `demo`, the
benchmarks, the test harnesses) loads it here, so that a linked system image and a plain
assembled one run the same everywhere.  In order:

1. scratch rings: the image's `meta["rings"]` ({name: {ring, base, size[, margin]}},
   as `npk link` writes it) and any `rings` the caller adds (`npk run --ring`);
2. each Program on its `.mes` (flat ME indices, npkit.emulator.me_names; ME 0 when
   empty; `mes=` overrides that default and filters explicit lists): control store,
   initial registers (`init_regs`, ctx None =
   every context of the program's mode; `@` absolute registers once), signals
   (`set_sigs`), then its contexts enabled (`ctx_enable`, else all 8 or 0/2/4/6);
3. initial memory (`init_mem`).

Anything that does not fit this chip raises LoadError with the reason; nothing is
written past a memory's end.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import me_names
from .binding import MEM_SPACES, Chip, EmulatorError, load_config


class LoadError(ValueError):
    """The image cannot be loaded on this chip; the message says why."""


def parse_me_list(text: str | None, config: str | os.PathLike[str] | Mapping[str, Any] = "ixp2800") -> list[int] | None:
    """The MEs a user names, as the flat indices the loader takes; empty -> None (the
    image's own assignment).  `config` is the chip (config name, path or loaded dict):
    '0x10' (hardware number), '1:0' (cluster:ME) or '8' (flat index), and ranges of
    them: '0x00-0x03,0x10', '1:0-1:3', '0,2-4' (npkit.emulator.me_names)."""
    if not text:
        return None
    try:
        raw = config if isinstance(config, Mapping) else load_config(config)
    except EmulatorError as e:
        raise LoadError(str(e)) from None
    try:
        return me_names.parse_me_list(text, me_names.per_cluster(raw), int(raw["num_me"]))
    except me_names.MeNameError as e:
        raise LoadError(str(e)) from None


def _targets(prog: Any, num_me: int, mes: list[int] | None) -> list[int]:
    explicit = list(getattr(prog, "mes", []) or [])
    if not explicit:
        targets = list(mes) if mes else [0]
    else:
        targets = [m for m in explicit if mes is None or m in mes]
    for m in targets:
        if not 0 <= m < num_me:
            raise LoadError(f"program '{prog.name}' is assigned to ME {m} (flat index), but the chip has {num_me} MEs")
    return targets


def ring_entries(image: Any) -> list[dict[str, Any]]:
    """The scratch rings an image asks for, as [{name, ring, base, size, margin}]."""
    rings = (getattr(image, "meta", None) or {}).get("rings") or {}
    if not isinstance(rings, dict):
        raise LoadError("image meta 'rings' is not a mapping of ring name to {ring, base, size}")
    out = []
    for name, r in rings.items():
        try:
            out.append({"name": str(name), "ring": int(r["ring"]), "base": int(r["base"]),
                        "size": int(r["size"]), "margin": int(r.get("margin", 0))})  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise LoadError(f"image ring {name!r}: expected {{ring, base, size[, margin]}}, got {r!r}") from None
    return out


def _ring_text(r: dict[str, Any]) -> str:
    name = r.get("name", f"scratch ring {r['ring']}")
    base, size = int(r["base"]), int(r["size"])
    return f"{name} (ring {r['ring']}, scratch 0x{base:x}..0x{base + 4 * size - 1:x})"


def check_rings(chip: Chip, rings: list[dict[str, Any]]) -> None:
    """Each ring number once, inside scratch, no two rings sharing a byte (LoadError)."""
    n_rings, scratch = int(chip.config["scratch_rings"]), int(chip.config["scratch_bytes"])
    seen: dict[int, dict[str, Any]] = {}
    for r in rings:
        num, base, size = int(r["ring"]), int(r["base"]), int(r["size"])
        if not 0 <= num < n_rings:
            raise LoadError(f"{r.get('name', 'scratch ring')}: ring number {num} is not 0..{n_rings - 1}")
        if num in seen:
            raise LoadError(f"{_ring_text(r)}: ring {num} is configured twice (also by {_ring_text(seen[num])})")
        if base + 4 * size > scratch:
            raise LoadError(f"{_ring_text(r)}: ends past the end of scratch (0x0..0x{scratch - 1:x})")
        for o in seen.values():
            if base < int(o["base"]) + 4 * int(o["size"]) and int(o["base"]) < base + 4 * size:
                raise LoadError(f"{_ring_text(r)} overlaps {_ring_text(o)}")
        seen[num] = r


def configure_rings(chip: Chip, rings: Iterable[dict[str, Any]]) -> None:
    """Configure scratch rings ({ring, base, size[, margin][, name]}; size in longwords),
    checked together first (check_rings)."""
    rings = list(rings)
    check_rings(chip, rings)
    for r in rings:
        try:
            chip.scratch_ring(int(r["ring"]), int(r["base"]), int(r["size"]), int(r.get("margin", 0)))
        except EmulatorError as e:
            raise LoadError(f"{_ring_text(r)}: {e}") from None


def _check_words(prog: Any, limit: int) -> list[int]:
    name = getattr(prog, "name", "?")
    words = [int(w) for w in prog.words]
    if not words:
        raise LoadError(f"program '{name}' is empty")
    if len(words) > limit:
        raise LoadError(f"program '{name}' has {len(words)} words; the control store holds {limit}")
    bad = next((i for i, w in enumerate(words) if not 0 <= w < (1 << 40)), None)
    if bad is not None:
        raise LoadError(f"program '{name}' word {bad} is not a 40-bit value")
    return words


def _init_regs(chip: Chip, me: int, prog: Any, ctxs: range) -> None:
    for reg, ctx, value in getattr(prog, "init_regs", []) or []:
        try:
            if ctx is None and not str(reg).startswith("@"):
                for c in ctxs:
                    chip.set_reg(me, reg, value, ctx=c)
            else:
                chip.set_reg(me, reg, value, ctx=0 if ctx is None else int(ctx))
        except EmulatorError as e:
            raise LoadError(f"program '{prog.name}': initial value of {reg}: {e}") from None


def _init_mem(chip: Chip, prog: Any) -> None:
    for space, addr, data in getattr(prog, "init_mem", []) or []:
        if space not in MEM_SPACES:
            raise LoadError(f"program '{prog.name}': unknown memory space '{space}'")
        addr, data = int(addr), bytes(data)
        if not 0 <= addr < 1 << 64:
            raise LoadError(f"program '{prog.name}': {space} data address {addr} is not an unsigned 64-bit value")
        try:
            chip.mem_write(space, addr, data)
        except EmulatorError:
            raise LoadError(f"program '{prog.name}': {len(data)} bytes of {space} data at 0x{addr:x} "
                            f"lie outside the {space} of this chip") from None  # fmt: skip


def load_image(chip: Chip, image: Any, mes: list[int] | None = None, enable: bool = True,
               rings: Iterable[dict[str, Any]] = (), taken: dict[int, str] | None = None) -> dict[int, str]:  # fmt: skip
    """Load every program of `image`; return {me: program name}.  `taken` holds MEs
    already loaded by earlier images of the same run (a conflict is an error)."""
    programs = list(getattr(image, "programs", []) or [])
    if not programs:
        raise LoadError("image has no programs")
    configure_rings(chip, [*ring_entries(image), *rings])
    limit = int(chip.config["ustore_words"])
    taken = {} if taken is None else taken
    loaded: dict[int, str] = {}
    for prog in programs:
        name = getattr(prog, "name", "?")
        words = _check_words(prog, limit)
        ctx_mode = int(getattr(prog, "ctx_mode", 8))
        if ctx_mode not in (4, 8):
            raise LoadError(f"program '{name}' has context mode {ctx_mode} (must be 4 or 8)")
        mask = int(getattr(prog, "ctx_enable", 0) or 0) or (0x55 if ctx_mode == 4 else 0xFF)
        for me in _targets(prog, chip.num_me, mes):
            owner = loaded.get(me) or taken.get(me)
            if owner is not None:
                raise LoadError(f"ME {chip.me_name(me)} is assigned to both '{owner}' and '{name}'")
            chip.load(me, words, ctx_mode)
            _init_regs(chip, me, prog, range(0, 8, 2) if ctx_mode == 4 else range(8))
            for sig in getattr(prog, "set_sigs", []) or []:
                if not 1 <= int(sig) <= 15:
                    raise LoadError(f"program '{name}': .set_sig signal {sig} out of range (1-15)")
                chip.set_signal(me, int(sig))
            if enable:
                chip.enable(me, mask)
            loaded[me] = name
        _init_mem(chip, prog)
    taken.update(loaded)
    return loaded


def load_path(chip: Chip, path: str | Path, mes: list[int] | None = None,
              rings: Iterable[dict[str, Any]] = (), taken: dict[int, str] | None = None) -> dict[int, str]:  # fmt: skip
    """Read an image file (npkit ELF) and load it."""
    return load_image(chip, read_path(path), mes, rings=rings, taken=taken)


def read_path(path: str | Path) -> Any:
    """Read an image file, with a LoadError naming the file when it is not one."""
    from npkit.toolchain.image import ImageError, read_image

    try:
        return read_image(path)
    except ImageError as e:
        raise LoadError(str(e)) from None
