"""Router layout (microcode/layouts/*.yaml): the schema `load_layout` checks a layout
against, after its `${param}`s are substituted and -D overrides applied.

Fields are typed and bounded (ring numbers 0..15, sizes 128..1024 longwords, 4 or 8
threads, MEs 0..15, qm limits); the model's cross-checks are the layout's rules: ring
numbers used once, a split ring's list long enough and its consumer on as many MEs,
every ring a block names declared, each ring with producers and exactly one consumer,
microcode producers only on rings 0..11 (which have a full flag), MEs used once, block
sources found, and the rings fitting the scratch ring store.

The control plane (`control:`, or `xscale:` spelled the old way; one of them): where it
runs, its program and tunables; the block that sends its frames on names the ring in
`control_in:` (the queue manager), and the control plane is that ring's producer.

Validation context: `microcode` (the directory block sources are relative to), `sources`
(an application's folders, looked up in order instead, npkit.toolchain.system.app),
`ring_store`/`scratch_bytes` (where ring storage starts and ends in scratch) and
`control_options` (the control program's tunables, xscale/npkd/cfg.h NPKD_OPTIONS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from npkit.asm.base.schema import Doc, at, file_state, irange, strict_int
from npkit.emulator.me_names import MeNameError, me_name
from npkit.emulator.me_names import parse_me as parse_me_name

RING_SIZES = (128, 256, 512, 1024)
NUM_MES = 16
ME_PER_CLUSTER = 8  # layouts are written for the IXP2800 (flat index = cluster * 8 + ME)
FULL_FLAG_RINGS = 12  # scratch rings 0..11 have a full flag (SCR_RINGn_STATUS)
MAX_QLIMIT = 4096  # the buffers there are (SysMap.n_bufs): a longer queue cannot fill


def parse_ring_numbers(v: Any) -> list[int]:
    """`ring: N` or, for a split ring, `ring: [N, ...]` -> list of ring numbers."""
    items = v if isinstance(v, list) else [v]
    if not items:
        raise ValueError("an empty list of ring numbers")
    out = []
    for i, n in enumerate(items):
        n = strict_int(n, "ring")
        if not 0 <= n <= 15:
            raise at(i, f"scratch ring number {n} outside 0..15") if isinstance(v, list) else \
                ValueError(f"scratch ring number {n} outside 0..15")  # fmt: skip
        out.append(n)
    return out


def parse_ring_size(v: Any) -> int:
    v = strict_int(v, "size")
    if v not in RING_SIZES:
        raise ValueError(f"size {v} is not 128, 256, 512 or 1024 longwords")
    return v


def parse_me(v: Any) -> int:
    """One ME of a layout: an int is its flat index (0..15); a string may also name it the
    hardware way, "0x10" or "1:0" (IXP2800 numbering, npkit.emulator.me_names).  The one
    place that reads a layout's ME names."""
    if isinstance(v, str):
        try:
            return parse_me_name(v, ME_PER_CLUSTER, NUM_MES)
        except MeNameError as e:
            raise ValueError(str(e)) from None
    return strict_int(v, "ME")


def me_text(me: int) -> str:
    """An ME as messages show it: its hardware number (0x10)."""
    return me_name(me, ME_PER_CLUSTER)


def parse_mes(v: Any) -> list[int]:
    """`mes: [0, 1]`, `mes: 3` or `mes: {first: F, count: N}` -> list of MEs."""
    if isinstance(v, dict):
        if set(v) != {"first", "count"}:
            raise ValueError(f"{{first: F, count: N}} needs exactly first and count, got {sorted(map(str, v))}")
        first, count = strict_int(v["first"], "first"), strict_int(v["count"], "count")
        if not 0 <= count <= NUM_MES:
            raise at("count", f"count {count} outside 0..{NUM_MES}")
        mes = list(range(first, first + count))
    elif isinstance(v, list):
        mes = [parse_me(x) for x in v]
    else:
        mes = [parse_me(v)]
    for me in mes:
        if not 0 <= me < NUM_MES:
            raise ValueError(f"ME {me} outside 0..{NUM_MES - 1}")
    return mes


def parse_threads(v: Any) -> int:
    v = strict_int(v, "threads")
    if v not in (4, 8):
        raise ValueError(f"threads must be 4 or 8, got {v}")
    return v


def parse_define(v: Any) -> Any:
    if v is not None and not isinstance(v, (str, int, float, bool)):
        raise ValueError(f"a define is a number, a string or true/false, got {v!r}")
    return v


FLAG_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def parse_flag(v: Any) -> bool:
    """A flag's value: true/false, 1/0, yes/no, on/off (a -D value or a parameter)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in FLAG_WORDS:
        return FLAG_WORDS[v.strip().lower()]
    raise ValueError(f"a flag is true or false (or 1/0, yes/no, on/off), got {v!r}")


RingNumbers = Annotated[list[int], BeforeValidator(parse_ring_numbers), Doc("N | [N, ...] (split)", "0..15")]
RingSize = Annotated[int, BeforeValidator(parse_ring_size), Doc("longwords", "128, 256, 512 or 1024")]
MeList = Annotated[list[int], BeforeValidator(parse_mes), Doc("[ME, ...] | ME | {first: F, count: N}", "MEs 0..15 (flat), or \"0x10\" / \"1:0\"")]
Threads = Annotated[int, BeforeValidator(parse_threads), Doc("4 | 8")]
Define = Annotated[Any, BeforeValidator(parse_define), Doc("number | string | bool", "false/null: left out")]
Flag = Annotated[bool, BeforeValidator(parse_flag), Doc("true | false", "also 1/0, yes/no, on/off")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RingSpec(_Strict):
    """A scratch ring between blocks."""

    ring: RingNumbers = Field(description="scratch ring number, or a list of them for a split ring")
    size: RingSize = Field(512, description="ring size")
    split: irange(1, NUM_MES) | None = Field(None, description="split ring: how many rings of the list are used")

    @model_validator(mode="after")
    def _split(self) -> RingSpec:
        if self.split is None and len(self.ring) > 1:
            raise at("ring", "a list of ring numbers needs split: N")
        if self.split is not None and self.split > len(self.ring):
            raise at("split", f"split {self.split} needs a list of at least {self.split} ring numbers")
        return self


class QmSpec(_Strict):
    """Queue manager parameters (become QM_* defines of npk_sys.h)."""

    quanta: irange(1, 255) | list[irange(1, 255)] = Field(
        1, description="WRR packets a visit: one value or one a port")
    qlimit: irange(1, MAX_QLIMIT) = Field(256, description="packets a port queue may hold (more: drop queue_full)")
    tx_window: irange(1, 1024) = Field(40, description="TBUF elements a port may have in flight")
    fifo_bytes: irange(64, 1 << 20) = Field(4096, description="PHY transmit FIFO a port, bytes")
    # the scheduler variants (qm: drr | dfq; docs/schedulers.md)
    classes: Literal[1, 2, 4, 8] = Field(8, description="drr: class queues a port")
    key_qlimit: irange(1, MAX_QLIMIT) = Field(64, description="drr/dfq: packets a class or connection queue may hold")
    class_by: Literal["inport", "msg"] = Field(
        "inport", description="drr/dfq: a packet's class or connection: its input port, or bits 8.. of the message's LW1")
    drr_quanta: irange(1, 65535) | list[irange(1, 65535)] = Field(
        1514, description="drr: bytes a visit, one value or one a class (1, 2, 4 or 8 values; class c: [c mod n])")
    dfq_t_ns: irange(100, 10_000_000) = Field(100_000, description="dfq: the discretization interval T, ns")
    dfq_paced: StrictBool = Field(
        False, description="dfq: Panama's fixed cycles (a round starts T after the last; not work conserving)")
    dfq_rates_mbps: irange(1, 10_000) | list[irange(1, 10_000)] = Field(
        200, description="dfq: reserved rate a connection, Mb/s, one value or 1, 2, 4 or 8 (connection f: [f mod n])")

    @field_validator("drr_quanta", "dfq_rates_mbps", mode="after")
    @classmethod
    def _per_key(cls, v: Any) -> Any:
        if isinstance(v, list) and len(v) not in (1, 2, 4, 8):
            raise ValueError(f"1, 2, 4 or 8 values (key k takes value [k mod n]), got {len(v)}")
        return v

    @field_validator("quanta", mode="before")
    @classmethod
    def _quanta(cls, v: Any) -> Any:
        items = v if isinstance(v, list) else [v]
        for i, q in enumerate(items):
            if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 255:
                message = f"a quantum is an integer in 1..255, got {q!r}"
                raise at(i, message) if isinstance(v, list) else ValueError(message)
        if isinstance(v, list) and not v:
            raise ValueError("an empty list")
        return v


class BlockSpec(_Strict):
    """A block: microcode on MEs, between its input and output rings."""

    source: StrictStr | None = Field(None, description="microcode source, relative to microcode/")
    variant: StrictStr | None = Field(None, description="which of `variants` to build")
    variants: dict[str, StrictStr] | None = Field(None, description="variant name -> source ('external': host)")
    external: StrictBool = Field(False, description="no microcode: the host or the XScale plays the block")
    mes: MeList = Field(default_factory=list, description="MEs the block runs on")
    threads: Threads = Field(8, description="contexts (4 or 8)")
    in_: StrictStr | None = Field(None, alias="in", description="input ring")
    out: StrictStr | None = Field(None, description="output ring")
    control_in: StrictStr | None = Field(None, description="ring the control plane sends its frames on (the qm)")
    defines: dict[str, Define] | None = Field(None, description="preprocessor defines (true -> 1, false left out)")
    flags: dict[str, Flag] | None = Field(None, description="switches: defined (as 1) when true, left out when false")

    def source_file(self) -> str | None:
        """The microcode source, None for an external block."""
        if self.external:
            return None
        if self.variants is not None:
            src = self.variants.get(str(self.variant))
            return None if src is None or src == "external" else src
        return self.source

    @model_validator(mode="after")
    def _source(self) -> BlockSpec:
        if self.variants is not None and str(self.variant) not in self.variants:
            raise at("variant", f"variant {self.variant!r} is not one of {', '.join(self.variants)}")
        if not self.external and self.variants is None and self.source is None:
            raise at("source", "needs 'source' (or 'variants' + 'variant', or 'external: true')")
        both = sorted(set(self.defines or {}) & set(self.flags or {}))
        if both:
            raise at("flags", f"{', '.join(both)}: in both defines and flags")
        return self


class ControlSection(_Strict):
    """The router's control plane (npkit.toolchain.system.control): its daemon reads the
    exception ring and sends frames on the `control_in` ring of a block."""

    placement: Literal["xscale", "gpe", "host"] = Field(
        "xscale", description="xscale: the emulated XScale; gpe: a host process; host: no daemon, the host's reader")
    program: StrictStr = Field("npkd", description="a program name (xscale/toolchain.py), C sources or an ELF")
    args: list[StrictStr] = Field(default_factory=list, description="extra arguments of the program")
    ring: StrictStr | None = Field(None, description="the ring it sends on (default: the block's control_in)")
    options: dict[str, irange(0, 0xFFFFFFFF)] = Field(default_factory=dict,
                                                       description="tunables (xscale/npkd/cfg.h NPKD_OPTIONS)")  # fmt: skip

    @field_validator("options", mode="before")
    @classmethod
    def _options(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return {}
        known = (info.context or {}).get("control_options")
        # another program's own (the SPP's I3 daemon: xscale/i3d/i3d.h I3D_OPTIONS)
        by_program = (info.context or {}).get("control_options_by_program") or {}
        known = by_program.get((info.data or {}).get("program"), known)
        if isinstance(v, dict) and known is not None:
            for k in v:
                if k not in known:
                    raise at(k, f"unknown option {k!r} (known: {', '.join(known)})")
        return v


class LayoutFile(_Strict):
    """A router layout: parameters, scratch rings, blocks (microcode/layouts/pipelined.yaml)."""

    name: StrictStr | None = Field(None, description="layout name (default: the file's stem)")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="parameters: ${name} anywhere else is replaced; -D name=value overrides")  # fmt: skip
    rings: dict[str, RingSpec] = Field(description="scratch rings by name")
    exceptions: StrictStr = Field(description="the ring carrying exception records to the XScale")
    qm: QmSpec = Field(default_factory=QmSpec, description="queue manager parameters")
    blocks: dict[str, BlockSpec] = Field(description="blocks by name")
    control: ControlSection | None = Field(None, description="the control plane (absent: the host's reader)")
    xscale: ControlSection | None = Field(None, description="the control plane, spelled the old way (not with control)")
    _bases: dict[str, int] = PrivateAttr(default_factory=dict)

    @field_validator("params", "rings", "blocks", mode="before")
    @classmethod
    def _mapping(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None and info.field_name != "blocks":
            return {}
        if not isinstance(v, dict):
            raise ValueError(f"expected a mapping of name -> settings, got {'a list' if isinstance(v, list) else repr(v)}")
        return v

    def members(self, name: str) -> list[tuple[str, int]]:
        """(ring name, number) of a declared ring: one, or a split ring's members."""
        r = self.rings[name]
        if r.split is None:
            return [(name, r.ring[0])]
        return [(f"{name}.{k}", r.ring[k]) for k in range(r.split)]

    def ring_bases(self) -> dict[str, int]:
        """Ring storage: member ring name -> base byte address in scratch."""
        return dict(self._bases)

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> LayoutFile:
        ctx = info.context or {}
        numbers: dict[int, str] = {}
        for name in self.rings:
            for member, num in self.members(name):
                if num in numbers:
                    raise at(("rings", name, "ring"), f"rings {numbers[num]} and {member} both use scratch ring {num}")
                numbers[num] = member
        splits = [n for n, r in self.rings.items() if r.split is not None]
        if len(splits) > 1:
            raise at(("rings", splits[1]), f"at most one split ring ({', '.join(splits)})")
        producers: dict[str, list[str]] = {m: [] for n in self.rings for m, _ in self.members(n)}
        consumers: dict[str, list[str]] = {m: [] for m in producers}
        used: dict[int, str] = {}
        microcode = ctx.get("microcode")
        for bname, b in self.blocks.items():
            src = b.source_file()
            dirs = ctx.get("sources") or ([Path(microcode)] if microcode is not None else [])
            if src is not None and dirs and not any(file_state(Path(d) / src) == "file" for d in dirs):
                key = "variants" if b.variants is not None else "source"
                where = "microcode/" if ctx.get("sources") is None else ", ".join(map(str, dirs))
                raise at(("blocks", bname, key), f"source {src} not found under {where}")
            if src is not None and not b.mes:
                raise at(("blocks", bname, "mes"), "no MEs")
            for me in b.mes:
                if me in used:
                    raise at(("blocks", bname, "mes"), f"ME {me_text(me)} is already used by block {used[me]}")
                used[me] = bname
            for key, ring in (("in", b.in_), ("out", b.out), ("control_in", b.control_in)):
                if ring is not None and ring not in self.rings:
                    raise at(("blocks", bname, key), f"{key} ring {ring!r} is not declared under rings")
            if b.in_ is not None:
                ms = self.members(b.in_)
                if len(ms) > 1 and src is not None and len(b.mes) != len(ms):
                    raise at(("blocks", bname, "mes"), f"reads split ring {b.in_} of {len(ms)} rings but runs on "
                                                       f"{len(b.mes)} MEs")  # fmt: skip
                for m, _ in ms:
                    consumers[m].append(bname)
            if b.out is not None:
                for m, _ in self.members(b.out):
                    producers[m].append(bname)
        self._control_rules(producers, consumers)
        if self.exceptions not in self.rings:
            raise at("exceptions", f"exceptions ring {self.exceptions!r} is not declared under rings")
        for bname, b in self.blocks.items():
            if b.source_file() is not None:
                producers[self.exceptions].append(bname)
        consumers[self.exceptions].append("xscale")
        for name in self.rings:
            for m, num in self.members(name):
                if name != self.exceptions and (len(consumers[m]) != 1 or not producers[m]):
                    raise at(("rings", name), f"ring {m} needs producers and exactly one consumer (producers: "
                                              f"{producers[m] or 'none'}, consumers: {consumers[m] or 'none'})")  # fmt: skip
                if num >= FULL_FLAG_RINGS and any(self.blocks[p].source_file() for p in producers[m] if p in self.blocks):
                    raise at(("rings", name, "ring"), f"ring {m}: microcode puts to it, but only scratch rings "
                                                      f"0..{FULL_FLAG_RINGS - 1} have a full flag (SCR_RINGn_STATUS)")  # fmt: skip
        self._place_rings(ctx.get("ring_store", 0x1000), ctx.get("scratch_bytes", 0x4000))
        self._producers, self._consumers = producers, consumers
        return self

    def control_section(self) -> ControlSection | None:
        """The control plane, under either spelling."""
        return self.control if self.control is not None else self.xscale

    def control_ring(self) -> str | None:
        """The ring the control plane sends on (a block's control_in), or None."""
        return next((b.control_in for b in self.blocks.values() if b.control_in is not None), None)

    def _control_rules(self, producers: dict[str, list[str]], consumers: dict[str, list[str]]) -> None:
        if self.control is not None and self.xscale is not None:
            raise at("xscale", "give the control plane once, as control: (xscale: is the same section)")
        cp = {bname: b.control_in for bname, b in self.blocks.items() if b.control_in is not None}
        if len(set(cp.values())) > 1 or len(cp) > 1:
            second = list(cp)[1]
            raise at(("blocks", second, "control_in"), f"more than one block serves a control_in ring "
                                                       f"({', '.join(f'{b}: {r}' for b, r in cp.items())})")  # fmt: skip
        for bname, ring in cp.items():
            if len(self.members(ring)) > 1:
                raise at(("blocks", bname, "control_in"), f"control_in ring {ring} is a split ring")
            consumers[ring].append(bname)
            producers[ring].append("control")
        section = self.control_section()
        key = "control" if self.control is not None else "xscale"
        if section is None:
            return
        ring = next(iter(cp.values()), None)
        if section.ring is not None and section.ring != ring:
            raise at((key, "ring"), f"ring {section.ring!r} is not the ring a block serves as control_in "
                                    f"({ring or 'none'})")  # fmt: skip
        if ring is None and section.placement != "host":
            raise at(key, "the control plane needs a block with `control_in: RING` (the queue manager) "
                          "to send its frames")  # fmt: skip

    def _place_rings(self, store: int, end: int) -> None:
        """Each ring at a multiple of its own size, in ring-number order; when that leaves
        too much padding to fit, largest first (which needs none: every size is a power of
        two), so a layout that fits at all is placed (the parallel layout's nine input rings)."""
        members = sorted((num, m, self.rings[n].size * 4) for n in self.rings for m, num in self.members(n))
        for order in (members, sorted(members, key=lambda r: -r[2])):
            bases, addr = _aligned_bases(order, store)
            if addr <= end:
                self._bases.update(bases)
                return
        raise at("rings", f"the rings need {addr - store} bytes of scratch, {end - store} are free")

    _producers: dict[str, list[str]] = PrivateAttr(default_factory=dict)
    _consumers: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    def ring_users(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """(producers, consumers) of every member ring."""
        return self._producers, self._consumers


def _aligned_bases(order: list[tuple[int, str, int]], store: int) -> tuple[dict[str, int], int]:
    """Bases for (number, ring, bytes) in the order given, each at a multiple of its size
    from `store` on, and the address after the last."""
    bases: dict[str, int] = {}
    addr = store
    for _, m, nbytes in order:
        addr = (addr + nbytes - 1) // nbytes * nbytes
        bases[m] = addr
        addr += nbytes
    return bases, addr
