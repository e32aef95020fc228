"""Image metadata: the schema of the `.npk.meta` JSON section of an npkit image
(npkit.asm.image), checked by `read_image` before anything is built from it.

Register values are 32-bit, signals 1..15, contexts 0..7, MEs 0..31, memory
initialisers name a memory space and lie inside its 32-bit address space, and `meta` is a
mapping whose `rings` (written by `npk link`, configured by the loader) are scratch rings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from npkit.asm.base.schema import U32, Doc, at, irange

from .image_format import MAX_MES, MAX_USTORE

SPACES = ("sram", "dram", "scratch", "lmem")
ADDRESS_SPACE = 1 << 32


def parse_hex(v: Any) -> bytes:
    if not isinstance(v, str):
        raise ValueError(f"expected the data as a hex string, got {v!r}")
    try:
        return bytes.fromhex(v)
    except ValueError:
        raise ValueError(f"not a hex string: {v[:40]!r}") from None


HexBytes = Annotated[bytes, BeforeValidator(parse_hex), Doc("hex string", "at most the space's size")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SymbolMeta(_Strict):
    """A symbol: label (word address), register, signal, transfer register or memory."""

    name: StrictStr = Field(description="symbol name")
    kind: Literal["label", "reg", "signal", "xfer", "const", "mem"] = Field(description="what it names")
    value: StrictInt | StrictStr = Field(description="address, number or physical register name")
    scope: StrictStr = Field("", description="scope (registers) or memory space (mem)")
    size: irange(0, ADDRESS_SPACE) = Field(0, description="bytes (mem: the .alloc_mem size)")


class LineMeta(_Strict):
    """Line table entry: the source line of a control-store word."""

    addr: irange(0, MAX_USTORE - 1) = Field(description="word address")
    file: StrictStr = Field(description="source file")
    line: irange(0, 1 << 31) = Field(description="source line")
    macro: StrictStr = Field("", description="macro expansion chain, outermost first")


class ProgramMeta(_Strict):
    """One program: everything but its words (those are the `.text.N` section)."""

    name: Annotated[str, Field(min_length=1, max_length=256)] = Field(description="program name")
    ctx_mode: Literal[4, 8] = Field(description="4- or 8-context mode")
    mes: list[irange(0, MAX_MES - 1)] = Field(description="MEs it loads on (empty: ME 0 or as told)")
    symbols: list[SymbolMeta] = Field(description="symbols")
    lines: list[LineMeta] = Field(description="line table")
    init_regs: list[tuple[StrictStr, irange(0, 7) | None, U32]] = Field(
        description="[register, context (null: every context), 32-bit value]")
    set_sigs: list[irange(1, 15)] = Field(description="signals raised at load")
    init_mem: list[tuple[Literal["sram", "dram", "scratch", "lmem"], irange(0, ADDRESS_SPACE - 1), HexBytes]] = Field(
        description="[space, byte address, hex data] written at load")
    source_files: list[StrictStr] = Field(default_factory=list, description="sources it was built from")
    ctx_enable: irange(0, 0xFF) = Field(0, description="contexts enabled at load (bit n = context n; 0: all)")

    @model_validator(mode="after")
    def _ranges(self) -> ProgramMeta:
        if len(set(self.mes)) != len(self.mes):
            raise at("mes", f"an ME is listed twice: {self.mes}")
        for i, (_, addr, data) in enumerate(self.init_mem):
            if addr + len(data) > ADDRESS_SPACE:
                raise at(("init_mem", i), f"{len(data)} bytes at 0x{addr:x} run past the 32-bit address space")
        return self


class RingMeta(BaseModel):
    """A scratch ring the loader configures (`meta.rings`, written by `npk link`)."""

    model_config = ConfigDict(extra="allow")
    ring: irange(0, 15) = Field(description="scratch ring number")
    base: irange(0, ADDRESS_SPACE - 4, multiple_of=4) = Field(description="byte address in scratch")
    size: Literal[128, 256, 512, 1024] = Field(description="longwords")
    margin: irange(0, 1024) = Field(0, description="entries kept free for in-flight puts")


class ControlMeta(BaseModel):
    """A router image's control plane (`meta.control`, written by `npk link`; what `npk run`
    starts the daemon from)."""

    model_config = ConfigDict(extra="allow")
    placement: Literal["xscale", "gpe", "host"] = Field(description="where the daemon runs")
    program: StrictStr = Field(description="the daemon's program (xscale/<program>)")
    args: list[StrictStr] = Field(default_factory=list, description="its command line")
    ring: StrictStr | None = Field(None, description="the layout's ring the daemon sends frames on")
    options: dict[str, StrictInt] = Field(default_factory=dict, description="the daemon's tunables")
    exceptions_ring: irange(0, 15) = Field(description="scratch ring number of the exception path")
    ring_number: irange(0, 15) | None = Field(None, description="scratch ring number of `ring`")
    elf: StrictStr | None = Field(None, description="the ARM build")
    native: StrictStr | None = Field(None, description="the native build (placement gpe)")


class ExtraMeta(BaseModel):
    """Image metadata from the linker (layout, graph, router, ...): free-form beyond the
    fields typed here, which the commands that run an image read."""

    model_config = ConfigDict(extra="allow")
    rings: dict[str, RingMeta] | None = Field(None, description="scratch rings by name")
    control: ControlMeta | None = Field(None, description="the control plane of a router image")
    router: dict[str, Any] | None = Field(None, description="the router configuration linked in (mapping)")
    router_config: StrictStr | None = Field(None, description="the file it came from")
    sysmap: dict[str, StrictInt] | None = Field(None, description="the system memory map (name: value)")
    params: dict[str, Any] | None = Field(None, description="the layout's parameters")
    layout: StrictStr | None = Field(None, description="the layout's name")
    exceptions: StrictStr | None = Field(None, description="the layout's exception ring")
    graph: dict[str, Any] | None = Field(None, description="blocks and rings, as `npk link --json` prints")


class ImageMeta(_Strict):
    """The `.npk.meta` section."""

    format: Literal[1] = Field(description="format version")
    config: StrictStr = Field("", description="chip config the image was linked for ('' = any)")
    meta: ExtraMeta = Field(default_factory=ExtraMeta, description="what the linker records (mapping)")
    programs: list[ProgramMeta] = Field(min_length=1, description="the programs, in .text.N order")

    @field_validator("meta", mode="before")
    @classmethod
    def _meta(cls, v: Any) -> Any:
        return {} if v is None else v
