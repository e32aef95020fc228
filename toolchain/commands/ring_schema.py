"""Ring file (YAML): the schema of the scratch rings `npk run --ring` configures.

A ring file lists scratch rings for plain images (the rings a linked image needs are in
its metadata, `meta.rings`): `rings: [{ring, base, size[, margin]}, ...]`, each entry the
fields of an image's RingMeta, no other keys.  `--ring scratch:N:base=A,size=W[,margin=M]`
gives one ring and is checked against the same model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from npkit.toolchain.image_schema import RingMeta


class RingOption(RingMeta):
    """One scratch ring of `npk run --ring`: scratch:N:base=A,size=W[,margin=M] or an entry of a ring file."""

    model_config = ConfigDict(extra="forbid")


class RingFile(BaseModel):
    """`npk run --ring FILE.yaml`: scratch rings for plain images (examples/ring_pingpong.rings.yaml)."""

    model_config = ConfigDict(extra="forbid")
    rings: list[RingOption] = Field(min_length=1, max_length=16, description="the rings")
