"""Ring file (YAML): the schema of the scratch rings `npk run --ring` configures.

A ring file lists scratch rings for plain images (the rings a linked image needs are in
its metadata, `meta.rings`): `rings: [{ring, base, size[, margin]}, ...]`, each entry the
fields of an image's RingMeta, no other keys.  `--ring scratch:N:base=A,size=W[,margin=M]`
gives one ring and is checked against the same model.  `npk run`, `debug`, `trace` and
`why` take either as `--ring`, and a run directory's run.json either in `rings`.
"""

# The readers below serve the commands (npkit.toolchain.commands.run.parse_rings) and
# run.json (npkit.toolchain.debug.why) alike; each raises the error class its caller
# names, so an option's errors stay a usage error and run.json's the file's.

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from npkit.asm.base.schema import load_yaml, validate
from npkit.asm.image_schema import RingMeta

RING_SYNTAX = "scratch:N:base=ADDR,size=WORDS[,margin=M]"


class RingOption(RingMeta):
    """One scratch ring of `npk run --ring`: scratch:N:base=A,size=W[,margin=M] or an entry of a ring file."""

    model_config = ConfigDict(extra="forbid")


class RingFile(BaseModel):
    """`npk run --ring FILE.yaml`: scratch rings for plain images (examples/ring_pingpong.rings.yaml)."""

    model_config = ConfigDict(extra="forbid")
    rings: list[RingOption] = Field(min_length=1, max_length=16, description="the rings")


def is_ring_file(text: str) -> bool:
    """A --ring that names a ring file (YAML) rather than one ring."""
    return text.endswith((".yaml", ".yml"))


def ring_values(text: str) -> dict[str, int]:
    """'scratch:3:base=0x1000,size=128[,margin=2]' -> {ring: 3, base: 4096, size: 128,
    margin: 2}, not yet checked against RingOption; ValueError says what is wrong."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] != "scratch":
        raise ValueError(f"expected {RING_SYNTAX}")
    try:
        fields = dict(kv.split("=", 1) for kv in parts[2].split(",") if kv)
        values = {"ring": int(parts[1], 0), **{k: int(v, 0) for k, v in fields.items()}}
    except ValueError:
        raise ValueError("numbers expected (N, base=, size=, margin=)") from None
    unknown = set(fields) - {"base", "size", "margin"}
    if unknown or not {"base", "size"} <= set(fields):
        raise ValueError(f"give base= and size= (and optionally margin=), not {sorted(unknown)}")
    return values


def read_ring(text: str, where: str, error: type[Exception]) -> dict[str, Any]:
    """One ring as --ring spells it -> {name: where, ring, base, size, margin}, checked
    against RingOption; `error` says what is wrong, after `where`."""
    try:
        values = ring_values(text)
    except ValueError as e:
        raise error(f"{where}: {e}") from None
    return {"name": where, **validate(RingOption, values, where, error=error).model_dump()}


def read_ring_file(path: str, error: type[Exception]) -> list[dict[str, Any]]:
    """A ring file -> [{name: 'FILE:LINE (rings[N])', ring, base, size, margin}, ...],
    checked against RingFile; `error` names the file and line of what is wrong."""
    located = load_yaml(path, error=error, what="ring file")
    checked = validate(RingFile, located.data, path, located=located, error=error)
    return [{"name": f"{path}:{located.line(('rings', n))} (rings[{n}])", **r.model_dump()}
            for n, r in enumerate(checked.rings)]  # fmt: skip
