"""Load an npkit image (npkit.asm.image) onto an emulated chip: the one loader.

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
   (`set_sigs`), local memory data (`init_mem` entries of space lmem: each ME's own),
   then its contexts enabled (`ctx_enable`, else all 8 or 0/2/4/6);
3. initial memory (`init_mem`: scratch, SRAM, DRAM).

Anything that does not fit this chip raises LoadError with the reason; nothing is
written past a memory's end.  Everything is checked first (plan_load) and written after,
so that a refused image leaves the chip as it was.

Several images on one chip (`npk run A.elf@0-3 B.elf@4-7`) share one Claims record,
passed to each load_image call: what the images before hold.  An image is refused
(LoadError naming both images) when it would take an ME another holds; configure a
scratch ring number another configured with a different base, size or margin (the same
ring in two images, a producer's and a consumer's, is shared and configured once); put a
ring over another image's ring or initialised scratch data (or such data over a ring);
write bytes another image initialised with different values (the same values are fine);
allocate SRAM, DRAM or scratch another image's program allocated, unless declared alike
(name, address, size) or initialised alike by both; or signal, at load, an ME another
image holds (NEXT/PREV_NEIGHBOR_SIGNAL in init_regs).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import me_names
from .binding import K_PC, K_STATE, K_WAIT, MEM_SPACES, Chip, EmulatorError, load_config


class LoadError(ValueError):
    """The image cannot be loaded on this chip; the message says why."""


class MeListError(LoadError):
    """MEs named (--me, IMAGE@MES) that do not parse or are not on this chip."""


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
        raise MeListError(str(e)) from None


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
    """Each ring number once, inside scratch at a longword address, no two rings sharing a
    byte (LoadError)."""
    n_rings, scratch = int(chip.config["scratch_rings"]), int(chip.config["scratch_bytes"])
    seen: dict[int, dict[str, Any]] = {}
    for r in rings:
        num, base, size = int(r["ring"]), int(r["base"]), int(r["size"])
        if not 0 <= num < n_rings:
            raise LoadError(f"{r.get('name', 'scratch ring')}: ring number {num} is not 0..{n_rings - 1}")
        if num in seen:
            raise LoadError(f"{_ring_text(r)}: ring {num} is configured twice (also by {_ring_text(seen[num])})")
        if base < 0 or base % 4 or size <= 0:
            raise LoadError(f"{r.get('name', 'scratch ring')}: base {base} and size {size} make no ring "
                            "(base: a multiple of 4; size: longwords, at least 1)")  # fmt: skip
        if base + 4 * size > scratch:
            raise LoadError(f"{_ring_text(r)}: ends past the end of scratch (0x0..0x{scratch - 1:x})")
        for o in seen.values():
            if base < int(o["base"]) + 4 * int(o["size"]) and int(o["base"]) < base + 4 * size:
                raise LoadError(f"{_ring_text(r)} overlaps {_ring_text(o)}")
        seen[num] = r


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


# ---- what the images of one chip hold ----------------------------------------------


@dataclass(frozen=True)
class MemWrite:
    """Bytes an image writes at load (a program's init_mem entry), and whose they are."""

    space: str
    addr: int
    data: bytes
    owner: str  # "IMAGE (program 'p')"

    @property
    def end(self) -> int:
        return self.addr + len(self.data)


@dataclass(frozen=True)
class Alloc:
    """Memory a program allocates (`.alloc_mem`: a mem symbol with its size), and whose it is."""

    space: str
    addr: int
    size: int
    name: str
    owner: str  # "IMAGE (program 'p')"

    @property
    def end(self) -> int:
        return self.addr + self.size

    def text(self) -> str:
        return f"{self.owner}: {self.name}, 0x{self.addr:x}..0x{self.end - 1:x}"


@dataclass
class Claims:
    """What the images loaded so far on one chip hold, kept across load_image calls so that
    a later image that would overwrite an earlier one's state is refused before any of it
    is written:

    mes      ME -> program name (what load_image returns, merged)
    images   ME -> the image that holds it, as the messages name it
    rings    scratch ring number -> (ring entry, owner: the image, None for a caller's ring)
    memory   the bytes written at load (MemWrite)
    allocs   the SRAM, DRAM and scratch the programs allocate (Alloc), written or not
    signals  ME -> who signalled it at load (a neighbour-signal CSR in init_regs)"""

    mes: dict[int, str] = field(default_factory=dict)
    images: dict[int, str] = field(default_factory=dict)
    rings: dict[int, tuple[dict[str, Any], str | None]] = field(default_factory=dict)
    memory: list[MemWrite] = field(default_factory=list)
    allocs: list[Alloc] = field(default_factory=list)
    signals: dict[int, str] = field(default_factory=dict)


@dataclass
class _Program:
    """One program of an image as it will be loaded (every check passed)."""

    prog: Any
    name: str
    words: list[int]
    ctx_mode: int
    mask: int
    targets: list[int]
    regs: list[tuple[str, int, int]]  # (register, context, value) per ME: `@` ones once
    sigs: list[int]
    memory: list[MemWrite]  # written once, whatever its MEs
    local: list[tuple[int, int]]  # (local memory word, value): written on each of its MEs
    allocs: list[Alloc]  # its SRAM, DRAM and scratch allocations


@dataclass
class _Plan:
    """Everything one load_image call will write, checked against the claims first."""

    label: str
    rings: list[dict[str, Any]]  # to configure (a ring another image configured already is not)
    ring_owners: list[tuple[dict[str, Any], str | None]]
    programs: list[_Program]
    signals: dict[int, str]

    @property
    def memory(self) -> list[MemWrite]:
        return [w for p in self.programs for w in p.memory]

    @property
    def allocs(self) -> list[Alloc]:
        return [a for p in self.programs for a in p.allocs]

    def loaded(self) -> dict[int, str]:
        return {me: p.name for p in self.programs for me in p.targets}


def image_label(image: Any) -> str:
    """How the messages name an image loaded without a path: by its programs."""
    names = [str(getattr(p, "name", "?")) for p in getattr(image, "programs", []) or []]
    return "the image of " + ", ".join(f"'{n}'" for n in names)


def _regs(chip: Chip, prog: Any, ctx_mode: int) -> list[tuple[str, int, int]]:
    """The program's initial registers as (name, context, value) writes, each one checked
    as the chip would take it (so that none fails half-way through a load)."""
    ctxs = range(0, 8, 2) if ctx_mode == 4 else range(8)
    out = []
    for reg, ctx, value in getattr(prog, "init_regs", []) or []:
        reg = str(reg)
        every = ctx is None and not reg.startswith("@")
        for c in ctxs if every else [0 if ctx is None else int(ctx)]:
            if not 0 <= c <= 7:
                raise LoadError(f"program '{prog.name}': initial value of {reg}: context {c} is not 0..7")
            try:
                ref = chip.reg_ref(0, reg, c, ctx_mode=ctx_mode)
            except EmulatorError as e:
                raise LoadError(f"program '{prog.name}': initial value of {reg}: {e}") from None
            if ref.kind in (K_STATE, K_WAIT):
                raise LoadError(f"program '{prog.name}': initial value of {reg}: not a register a load can set")
            if ref.kind == K_PC and not 0 <= int(value) < int(chip.config["ustore_words"]):
                raise LoadError(f"program '{prog.name}': initial pc {value} is outside the control store")
            out.append((reg, c, int(value)))
    return out


def _sigs(prog: Any) -> list[int]:
    sigs = [int(s) for s in getattr(prog, "set_sigs", []) or []]
    bad = next((s for s in sigs if not 1 <= s <= 15), None)
    if bad is not None:
        raise LoadError(f"program '{prog.name}': .set_sig signal {bad} out of range (1-15)")
    return sigs


def _program(chip: Chip, prog: Any, mes: list[int] | None, label: str) -> _Program:
    name = str(getattr(prog, "name", "?"))
    words = _check_words(prog, int(chip.config["ustore_words"]))
    ctx_mode = int(getattr(prog, "ctx_mode", 8))
    if ctx_mode not in (4, 8):
        raise LoadError(f"program '{name}' has context mode {ctx_mode} (must be 4 or 8)")
    mask = int(getattr(prog, "ctx_enable", 0) or 0) or (0x55 if ctx_mode == 4 else 0xFF)
    targets = _targets(prog, chip.num_me, mes)
    owner = f"{label} (program '{name}')"
    memory = _memory(chip, prog, owner)
    regs = _regs(chip, prog, ctx_mode)
    return _Program(prog, name, words, ctx_mode, mask, targets, regs, _sigs(prog), memory, _local(chip, prog),
                    _allocs(prog, owner))  # fmt: skip


def _allocs(prog: Any, owner: str) -> list[Alloc]:
    """The program's `.alloc_mem` areas outside local memory (each ME's own)."""
    return [Alloc(str(sym.scope), int(sym.value), int(sym.size), str(sym.name), owner)
            for sym in getattr(prog, "symbols", []) or []
            if sym.kind == "mem" and sym.scope in MEM_SPACES and isinstance(sym.value, int) and int(sym.size) > 0]  # fmt: skip


def _mem_fits(chip: Chip, space: str, addr: int, n: int) -> bool:
    """Does [addr, addr + n) lie inside the chip's `space` (the emulator's own rule:
    SRAM addresses carry the channel in bits 31:30)?"""
    cfg = chip.config
    if space == "sram":
        channel, offset = addr >> 30, addr & 0x3FFF_FFFF
        return channel < int(cfg["units"]["sram"]["channels"]) and offset + n <= int(cfg["sram_channel_bytes"])
    return addr + n <= int(cfg["dram_bytes" if space == "dram" else "scratch_bytes"])


def _local(chip: Chip, prog: Any) -> list[tuple[int, int]]:
    """The program's local memory data (`.local_mem` + `.init`) as (word, value): local
    memory is each ME's own, so it is written on every ME the program runs on and is no
    other image's concern."""
    out = []
    words = int(chip.config["lm_words"])
    for space, addr, data in getattr(prog, "init_mem", []) or []:
        if space != "lmem":
            continue
        addr, data = int(addr), bytes(data)
        if addr % 4 or len(data) % 4:
            raise LoadError(f"program '{prog.name}': lmem data at byte {addr} ({len(data)} bytes) is not whole longwords")
        if not (0 <= addr and addr + len(data) <= 4 * words):
            raise LoadError(f"program '{prog.name}': {len(data)} bytes of lmem data at byte {addr} lie outside "
                            f"the {words} words of local memory")  # fmt: skip
        out += [(addr // 4 + i, int.from_bytes(data[4 * i : 4 * i + 4], "big")) for i in range(len(data) // 4)]
    return out


def _memory(chip: Chip, prog: Any, owner: str) -> list[MemWrite]:
    out = []
    for space, addr, data in getattr(prog, "init_mem", []) or []:
        if space == "lmem":
            continue  # _local
        if space not in MEM_SPACES:
            raise LoadError(f"program '{prog.name}': unknown memory space '{space}'")
        addr, data = int(addr), bytes(data)
        if not 0 <= addr < 1 << 64:
            raise LoadError(f"program '{prog.name}': {space} data address {addr} is not an unsigned 64-bit value")
        if not _mem_fits(chip, space, addr, len(data)):
            raise LoadError(f"program '{prog.name}': {len(data)} bytes of {space} data at 0x{addr:x} "
                            f"lie outside the {space} of this chip")  # fmt: skip
        out.append(MemWrite(space, addr, data, owner))
    return out


# local CSRs whose write at load signals another ME: CSR name -> that ME's offset from the writer
NEIGHBOUR_SIGNALS = {"NEXT_NEIGHBOR_SIGNAL": 1, "PREV_NEIGHBOR_SIGNAL": -1}


def _signals(chip: Chip, progs: list[_Program], label: str) -> dict[int, str]:
    """The MEs a program signals at load through a neighbour-signal CSR in its init_regs."""
    out: dict[int, str] = {}
    for p in progs:
        for reg, _, _ in p.regs:
            step = NEIGHBOUR_SIGNALS.get(reg.upper())
            for me in p.targets if step else []:
                if 0 <= me + step < chip.num_me:
                    out.setdefault(me + step, f"program '{p.name}' of {label} ({reg.upper()} on ME {chip.me_name(me)})")
    return out


def _check_mes(chip: Chip, plan: _Plan, claims: Claims, taken: Mapping[int, str]) -> None:
    """Each ME for one program of one image; none signalled at load by another image."""
    mine: dict[int, str] = {}
    for p in plan.programs:
        for me in p.targets:
            if me in mine:
                raise LoadError(f"ME {chip.me_name(me)} is assigned to both '{mine[me]}' and '{p.name}' ({plan.label})")
            other = claims.mes.get(me) or taken.get(me)
            if other is not None:
                whose = f" ({claims.images[me]})" if me in claims.images else ""
                raise LoadError(f"ME {chip.me_name(me)} is assigned to both '{other}'{whose} and '{p.name}' ({plan.label})")
            if me in claims.signals:
                raise LoadError(f"ME {chip.me_name(me)}: program '{p.name}' of {plan.label} would be loaded on an ME "
                                f"that {claims.signals[me]} signals at load")  # fmt: skip
            mine[me] = p.name
    for me, who in plan.signals.items():
        if me in claims.images:
            raise LoadError(f"ME {chip.me_name(me)} holds program '{claims.mes[me]}' of {claims.images[me]}, "
                            f"and {who} would signal it at load")  # fmt: skip


def _ring_who(r: dict[str, Any], owner: str | None) -> str:
    return _ring_text(r) + (f" of {owner}" if owner else "")


def _ring_differs(new: dict[str, Any], old: dict[str, Any]) -> str:
    fields = (("base", lambda v: f"0x{v:x}"), ("size", str), ("margin", str))
    return ", ".join(f"{k} {f(int(new.get(k, 0)))} vs {f(int(old.get(k, 0)))}" for k, f in fields
                     if int(new.get(k, 0)) != int(old.get(k, 0)))  # fmt: skip


def _ring_span(r: dict[str, Any]) -> tuple[int, int]:
    return int(r["base"]), int(r["base"]) + 4 * int(r["size"])


def _check_rings(plan: _Plan, claims: Claims) -> None:
    """The image's rings against those of the images before it: a ring number twice only
    as the same ring (shared, configured once), no two rings sharing a byte, no ring over
    scratch data another image initialises (and no such data over a ring)."""
    for r, owner in plan.ring_owners:
        lo, hi = _ring_span(r)
        same = claims.rings.get(int(r["ring"]))
        if same is not None and _ring_differs(r, same[0]):
            raise LoadError(f"scratch ring {r['ring']} is configured differently by {_ring_who(r, owner)} and "
                            f"{_ring_who(*same)} ({_ring_differs(r, same[0])}); images share a ring only as the "
                            "same ring (base, size and margin)")  # fmt: skip
        for o, o_owner in claims.rings.values():
            o_lo, o_hi = _ring_span(o)
            if int(o["ring"]) != int(r["ring"]) and lo < o_hi and o_lo < hi:
                raise LoadError(f"{_ring_who(r, owner)} overlaps {_ring_who(o, o_owner)}")
        for w in claims.memory:
            if w.space == "scratch" and lo < w.end and w.addr < hi:
                raise LoadError(f"{_ring_who(r, owner)} overlaps the scratch data 0x{w.addr:x}..0x{w.end - 1:x} "
                                f"that {w.owner} initialises")  # fmt: skip
    for w in plan.memory:
        for o, o_owner in claims.rings.values():
            lo, hi = _ring_span(o)
            if w.space == "scratch" and lo < w.end and w.addr < hi:
                raise LoadError(f"{w.owner} initialises scratch 0x{w.addr:x}..0x{w.end - 1:x}, which overlaps "
                                f"{_ring_who(o, o_owner)}")  # fmt: skip


def _first_difference(new: MemWrite, old: MemWrite) -> int | None:
    """The first address both write with different bytes (None: they agree, or do not meet)."""
    lo, hi = max(new.addr, old.addr), min(new.end, old.end)
    if lo >= hi:
        return None
    a = new.data[lo - new.addr : hi - new.addr]
    b = old.data[lo - old.addr : hi - old.addr]
    if a == b:
        return None
    return lo + next(i for i in range(hi - lo) if a[i] != b[i])


def _check_memory(plan: _Plan, claims: Claims) -> None:
    """Bytes another image initialised may be written again only with the same value."""
    for w in plan.memory:
        for o in claims.memory:
            d = None if o.space != w.space else _first_difference(w, o)
            if d is not None:
                lo, hi = max(w.addr, o.addr), min(w.end, o.end)
                raise LoadError(f"{w.space} 0x{lo:x}..0x{hi - 1:x} is initialised by both {o.owner} and {w.owner}, "
                                f"with different bytes (at 0x{d:x}: 0x{o.data[d - o.addr]:02x}, then "
                                f"0x{w.data[d - w.addr]:02x}); images may write the same bytes twice, not different ones")  # fmt: skip


def _covered(writes: list[MemWrite], owner: str, space: str, lo: int, hi: int) -> bool:
    """Does `owner` initialise every byte of [lo, hi) in `space`?"""
    at = lo
    for w in sorted((w for w in writes if w.owner == owner and w.space == space), key=lambda w: w.addr):
        if w.addr > at:
            break
        at = max(at, w.end)
    return at >= hi


def _check_allocs(plan: _Plan, claims: Claims) -> None:
    """Memory another image's program allocated is this image's only as the same
    allocation (name, address and size: declared alike to be shared), or where both
    initialise it with the same bytes (_check_memory compares them): otherwise the two
    programs would use one area for two things, unseen until it corrupts."""
    for a in plan.allocs:
        for o in claims.allocs:
            lo, hi = max(a.addr, o.addr), min(a.end, o.end)
            if o.space != a.space or lo >= hi or (a.name, a.addr, a.size) == (o.name, o.addr, o.size):
                continue
            if _covered(plan.memory, a.owner, a.space, lo, hi) and _covered(claims.memory, o.owner, o.space, lo, hi):
                continue
            raise LoadError(f"{a.space} 0x{lo:x}..0x{hi - 1:x} is allocated by both {o.text()} and {a.text()}; "
                            "each program places its allocations from address 0 of the space: programs that "
                            "run together declare an area they share alike (the same name and size, in the same "
                            "place), and one whose areas must lie apart declares the others' first")  # fmt: skip


def _check_tcam(chip: Chip, meta: dict[str, Any], label: str) -> None:
    """An image linked with TCAM entries (meta `tcam`, docs/tcam.md) needs a chip with the
    same TCAM window: elsewhere its entries would be plain SRAM."""
    want = meta.get("tcam")
    if not isinstance(want, dict):
        return
    have = chip.tcam_info()
    if have is None or have["base"] != want.get("base") or have["key_bits"] != want.get("key_bits"):
        what = "has no TCAM" if have is None else f"has its TCAM at 0x{have['base']:08x} with {have['key_bits']}-bit keys"
        raise LoadError(f"{label}: linked for a TCAM at 0x{int(want.get('base', 0)):08x} with {want.get('key_bits')}-bit "
                        f"keys (chip config {want.get('config')}); this chip ({chip.config.get('name')}) {what}")  # fmt: skip


def plan_load(chip: Chip, image: Any, mes: list[int] | None = None, rings: Iterable[dict[str, Any]] = (),
              claims: Claims | None = None, label: str | None = None,
              taken: Mapping[int, str] | None = None) -> _Plan:  # fmt: skip
    """Check `image` for this chip and against what earlier images claim, writing
    nothing; the plan that load_image then carries out (LoadError when it cannot load)."""
    claims = Claims() if claims is None else claims
    programs = list(getattr(image, "programs", []) or [])
    if not programs:
        raise LoadError("image has no programs")
    label = label or image_label(image)
    _check_tcam(chip, getattr(image, "meta", None) or {}, label)
    own, extra = ring_entries(image), list(rings)
    check_rings(chip, [*own, *extra])
    progs = [_program(chip, prog, mes, label) for prog in programs]
    ring_owners: list[tuple[dict[str, Any], str | None]] = [(r, label) for r in own] + [(r, None) for r in extra]
    fresh = [r for r, _ in ring_owners if int(r["ring"]) not in claims.rings]
    plan = _Plan(label, fresh, ring_owners, progs, _signals(chip, progs, label))
    _check_mes(chip, plan, claims, taken or {})
    _check_rings(plan, claims)
    _check_memory(plan, claims)
    _check_allocs(plan, claims)
    return plan


def _apply(chip: Chip, plan: _Plan, enable: bool) -> None:
    """Write a checked plan to the chip: rings, then each program on its MEs and its data."""
    for r in plan.rings:
        try:
            chip.scratch_ring(int(r["ring"]), int(r["base"]), int(r["size"]), int(r.get("margin", 0)))
        except EmulatorError as e:
            raise LoadError(f"{_ring_text(r)}: {e}") from None
    for p in plan.programs:
        for me in p.targets:
            chip.load(me, p.words, p.ctx_mode)
            for reg, ctx, value in p.regs:
                chip.set_reg(me, reg, value, ctx=ctx)
            for sig in p.sigs:
                chip.set_signal(me, sig)
            for word, value in p.local:
                chip.set_reg(me, f"lm{word}", value)
            if enable:
                chip.enable(me, p.mask)
        for w in p.memory:
            chip.mem_write(w.space, w.addr, w.data)


def _commit(plan: _Plan, claims: Claims) -> None:
    for p in plan.programs:
        for me in p.targets:
            claims.mes[me] = p.name
            claims.images[me] = plan.label
    for r, owner in plan.ring_owners:
        claims.rings.setdefault(int(r["ring"]), (r, owner))
    claims.memory.extend(plan.memory)
    claims.allocs.extend(plan.allocs)
    for me, who in plan.signals.items():
        claims.signals.setdefault(me, who)


def load_image(chip: Chip, image: Any, mes: list[int] | None = None, enable: bool = True,
               rings: Iterable[dict[str, Any]] = (), taken: dict[int, str] | None = None,
               claims: Claims | None = None, label: str | None = None) -> dict[int, str]:  # fmt: skip
    """Load every program of `image`; return {me: program name}.

    `claims` holds what the earlier images of the same run hold (MEs, scratch rings,
    initialised memory): the image is checked against it before anything is written, so
    a refused image (LoadError naming both images) leaves the chip as it was, and what it
    holds is added on success.  `label` names the image in the messages (its path; by
    default its programs).  `taken` ({me: program name}) is the older form of the same
    record, for the MEs alone: checked, and updated with the MEs loaded."""
    claims = Claims() if claims is None else claims
    plan = plan_load(chip, image, mes, rings, claims, label, taken)
    _apply(chip, plan, enable)
    _commit(plan, claims)
    loaded = plan.loaded()
    if taken is not None:
        taken.update(loaded)
    return loaded


def configure_rings(chip: Chip, rings: Iterable[dict[str, Any]], claims: Claims | None = None) -> None:
    """Configure scratch rings ({ring, base, size[, margin][, name]}; size in longwords)
    that no image brings (`npk run --ring`): checked together first (check_rings), and
    against `claims` (the rings and scratch data of the images there) as an image's rings
    are; recorded in it, so that the images loaded after are checked against them too."""
    rings = list(rings)
    check_rings(chip, rings)
    claims = Claims() if claims is None else claims
    fresh = [r for r in rings if int(r["ring"]) not in claims.rings]
    plan = _Plan("", fresh, [(r, None) for r in rings], [], {})
    _check_rings(plan, claims)
    _apply(chip, plan, enable=False)
    _commit(plan, claims)


def load_images(chip: Chip, images: Iterable[tuple[str, Any, list[int] | None]],
                rings: Iterable[dict[str, Any]] = ()) -> list[dict[int, str]]:  # fmt: skip
    """The rings (`npk run --ring`), then every image (label, image, MEs) on its MEs: one
    load_image call each, on one Claims record, so that an image that would overwrite
    what the rings or an earlier image hold is refused (LoadError naming both).  Returns
    each image's {me: program name}."""
    claims = Claims()
    configure_rings(chip, rings, claims)
    return [load_image(chip, img, mes, claims=claims, label=label) for label, img, mes in images]


def load_path(chip: Chip, path: str | Path, mes: list[int] | None = None,
              rings: Iterable[dict[str, Any]] = (), taken: dict[int, str] | None = None,
              claims: Claims | None = None) -> dict[int, str]:  # fmt: skip
    """Read an image file (npkit ELF) and load it (named by its path in the messages)."""
    return load_image(chip, read_path(path), mes, rings=rings, taken=taken, claims=claims, label=str(path))


def read_path(path: str | Path) -> Any:
    """Read an image file, with a LoadError naming the file when it is not one."""
    from npkit.asm.image import ImageError, read_image

    try:
        return read_image(path)
    except ImageError as e:
        raise LoadError(str(e)) from None
