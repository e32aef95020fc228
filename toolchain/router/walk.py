"""The lookup walk, exactly as the lookup microblock performs it (LAYOUT.md §4).

Every SRAM access goes through `read(addr, count) -> longwords`, one call per
sram[read, ...] the microcode issues, so a counting callback measures reads per lookup
and their sizes.  At most 3 dependent reads, each of 1 or 4 longwords.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import layout as L
from .layout import LpmLayout, default_layout

ReadFn = Callable[[int, int], Sequence[int]]

MAX_READS = 3  # dependent SRAM reads per IPv4 lookup (root, level 2, level 3)
MAX_READ_LONGWORDS = 4


class WalkError(RuntimeError):
    """The structure is not valid: the walk met something the builder never writes."""


_default: LpmLayout | None = None


def _layout() -> LpmLayout:
    global _default
    if _default is None:
        _default = default_layout()
    return _default


def runs_index(header: int, byte: int) -> int:
    """Which of a RUNS node's 5 values covers `byte`: how many boundaries are <= byte."""
    return (
        (byte >= header >> 24)
        + (byte >= (header >> 16) & 0xFF)
        + (byte >= (header >> 8) & 0xFF)
        + (byte >= header & 0xFF)
    )


def walk(read: ReadFn, addr: int, layout: LpmLayout | None = None) -> tuple[int | None, int]:
    """(next-hop index, or None for no route; number of SRAM reads) for IPv4 `addr`."""
    lay = layout or _layout()
    reads = 1
    (entry,) = read(lay.root_addr(addr >> 16), 1)  # read 1: root[addr 31..16]
    for shift in (8, 0):  # level 2 indexes with addr 15..8, level 3 with addr 7..0
        if not entry & L.ENTRY_CHILD:
            break
        byte = (addr >> shift) & 0xFF
        node = lay.node_addr(entry & L.OFFSET_MASK)
        node_type = (entry >> L.TYPE_SHIFT) & L.TYPE_MASK
        reads += 1
        if node_type == L.DENSE32:
            (entry,) = read(node + 4 * byte, 1)
            if shift == 0 and entry & L.ENTRY_CHILD:
                raise WalkError(f"child pointer at level 3 (addr {addr:#010x})")
        elif node_type == L.DENSE16:
            (word,) = read(node + 4 * (byte >> 1), 1)
            entry = word & 0xFFFF if byte & 1 else word >> 16
            break
        elif node_type == L.RUNS:
            words = read(node, 4)
            i = runs_index(words[0], byte)
            entry = (words[1 + i // 2] >> (0 if i & 1 else 16)) & 0xFFFF
            break
        else:
            raise WalkError(f"node type {node_type} in entry {entry:#010x}")
    if entry & ~L.NH_MASK:
        raise WalkError(f"leaf {entry:#010x} has reserved bits set")
    return (entry or None), reads


class CountingReader:
    """A read callback over an SramImage-like `read(addr, count)` that records each access."""

    def __init__(self, read: ReadFn) -> None:
        self._read = read
        self.sizes: list[int] = []

    def __call__(self, addr: int, count: int) -> Sequence[int]:
        if count > MAX_READ_LONGWORDS:
            raise WalkError(f"read of {count} longwords exceeds {MAX_READ_LONGWORDS}")
        self.sizes.append(count)
        return self._read(addr, count)
