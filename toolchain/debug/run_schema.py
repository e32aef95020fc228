"""Run directory (JSON): the schema of `DIR/run.json`, the run `npk why --run DIR` replays.

run.json names what ran: the image (required), or several as `images` (each IMAGE[@MES],
as `npk run` takes them), and optionally the chip config, the MEs, the traffic, the cycles
and the packet buffers (`BASE:SIZE`), with layout parameters, the sources' preprocessor
defines and include directories (`-I`), and the scratch rings of plain images (each as
`--ring` takes it); paths are relative to DIR.  The file is read as YAML (JSON is YAML), so
an error names its line; other keys are errors.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from npkit.asm.base.schema import at, irange

from .ring_schema import RING_SYNTAX, is_ring_file, read_ring

MAX_CYCLES = 1 << 40  # a replay's cycle budget (far past any run worth replaying)


def parse_buffer(text: str) -> tuple[int, int]:
    """'BASE:SIZE' -> (base, size): base >= 0, size >= 1 (ValueError says what is wrong)."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        base, size = int(parts[0], 0), int(parts[1], 0)
    except ValueError:
        raise ValueError(f"expected BASE:SIZE (two integers), got '{text}'") from None
    if base < 0:
        raise ValueError(f"BASE must be >= 0, got {base}")
    if size < 1:
        raise ValueError(f"SIZE must be >= 1 byte, got {size}")
    return base, size


def _ring_spec(text: str) -> str:
    """A ring as --ring spells it, checked here; a ring file is read when the run is
    opened (its path is relative to the run directory)."""
    if not is_ring_file(text):
        read_ring(text, repr(text), ValueError)
    return text


class RunFile(BaseModel):
    """A run directory's run.json: what `npk why --run DIR` replays (paths relative to DIR)."""

    model_config = ConfigDict(extra="forbid")
    image: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        None, description="image, .uc or layout that ran (IMAGE[@MES]); required unless `images` is given")
    config: str | None = Field(None, description="chip config name or YAML path")
    mes: str | None = Field(None, description="MEs the image was loaded on (as --me)")
    traffic: str | None = Field(None, description="traffic spec or pcap directory")
    cycles: irange(0, MAX_CYCLES) | None = Field(None, description="cycles run")  # type: ignore[valid-type]
    buffer: str | None = Field(None, description="packet buffers, BASE:SIZE")
    params: dict[str, Any] | None = Field(None, description="layout parameters (as -D for a layout)")
    images: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(
        None, min_length=1, description="images or .uc sources that ran, each IMAGE[@MES] (instead of image)")
    defines: dict[str, str] | None = Field(None, description="the .uc sources' preprocessor defines (as -D)")
    include_dirs: list[Annotated[str, StringConstraints(min_length=1)]] | None = Field(
        None, min_length=1, description="the .uc sources' include directories, searched in order (as -I)")
    rings: list[Annotated[str, AfterValidator(_ring_spec)]] | None = Field(
        None, min_length=1, description="scratch rings for plain images, each as --ring: "
        f"{RING_SYNTAX} or a ring file (YAML)")

    @model_validator(mode="after")
    def _one_way_to_name_images(self) -> RunFile:
        if self.image is None and self.images is None:
            raise at("image", "missing (required), or `images`: a list of IMAGE[@MES]")
        if self.image is not None and self.images is not None:
            raise at("images", "give `image` or `images`, not both")
        if self.images is not None and len(self.images) > 1 and self.mes is not None:
            raise at("mes", "names the MEs of a single image; with several, give each as IMAGE@MES")
        return self

    @field_validator("buffer")
    @classmethod
    def _buffer(cls, v: str | None) -> str | None:
        if v is not None:
            parse_buffer(v)
        return v
