"""SRAM image files (`npk route build -o`), documented in microcode/lookup/LAYOUT.md §8.

Binary (default):
    bytes 0..7   magic b"NPKSRAM1"
    bytes 8..11  number of runs R (uint32, big-endian)
    then R runs: start byte address (uint32 BE), longword count N (uint32 BE),
                 N longwords (uint32 BE each)
JSON (`--json`):
    {"format": "npkit-sram", "version": 1, "meta": {...},
     "runs": [{"addr": <int>, "words": [<int>, ...]}, ...]}
A run is a maximal block of consecutive written longwords; unlisted longwords are not
part of the image (the loader leaves them alone).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from npkit.asm.base.reading import read_bytes

from .lpm import SramImage

MAGIC = b"NPKSRAM1"


def to_bytes(image: SramImage) -> bytes:
    runs = image.runs()
    parts = [MAGIC, struct.pack(">I", len(runs))]
    for addr, words in runs:
        parts.append(struct.pack(f">II{len(words)}I", addr, len(words), *words))
    return b"".join(parts)


def from_bytes(data: bytes) -> SramImage:
    if data[:8] != MAGIC:
        raise ValueError("not an npkit SRAM image (bad magic)")
    (count,) = struct.unpack_from(">I", data, 8)
    pos = 12
    image = SramImage()
    for _ in range(count):
        addr, n = struct.unpack_from(">II", data, pos)
        pos += 8
        for i, word in enumerate(struct.unpack_from(f">{n}I", data, pos)):
            image.write(addr + 4 * i, word)
        pos += 4 * n
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes after the last run")
    return image


def to_json(image: SramImage, meta: dict[str, Any] | None = None) -> str:
    return json.dumps(
        {
            "format": "npkit-sram",
            "version": 1,
            "meta": meta or {},
            "runs": [{"addr": a, "words": w} for a, w in image.runs()],
        }
    )


def from_json(text: str) -> SramImage:
    data = json.loads(text)
    if data.get("format") != "npkit-sram":
        raise ValueError("not an npkit SRAM image (format)")
    image = SramImage()
    for run in data["runs"]:
        for i, word in enumerate(run["words"]):
            image.write(int(run["addr"]) + 4 * i, int(word))
    return image


SRAM_FILE_LIMIT = 1 << 30  # bytes: the JSON form of a full SRAM image is about 12 x its size


def load(path: str | Path) -> SramImage:
    data = read_bytes(path, limit=SRAM_FILE_LIMIT, what="SRAM image")
    return from_bytes(data) if data[:8] == MAGIC else from_json(data.decode())
