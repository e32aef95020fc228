"""A window of traffic: consecutive input packets (ids first .. first+n-1) as flat arrays,
the unit in which packets are generated, checked by the oracle, handed to the MSF and
forgotten once every one of them has a fate."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any


@dataclass
class Window:
    first: int  # id of packet 0
    times: array[int] = field(default_factory=lambda: array("Q"))  # arrival, ns
    ports: array[int] = field(default_factory=lambda: array("B"))  # input port
    lens: array[int] = field(default_factory=lambda: array("H"))
    off: array[int] = field(default_factory=lambda: array("Q"))  # frame i at data[off[i]:]
    data: bytearray = field(default_factory=bytearray)
    kinds: bytes = b""  # spec.KINDS indices (generated traffic only)
    # the run's work on this window by name (traffic/feed.py: WindowFeed.prepare); a
    # slice or a join of windows has none
    prepared: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.lens)

    @property
    def end(self) -> int:
        """One past the last id."""
        return self.first + len(self.lens)

    def frame(self, i: int) -> bytes:
        o = self.off[i]
        return bytes(self.data[o : o + self.lens[i]])

    def slice(self, lo: int, hi: int) -> Window:
        """Packets lo..hi-1 as a window of their own."""
        base = self.off[lo] if lo < hi else 0
        data = bytearray(self.span(lo, hi))
        off = array("Q", (o - base for o in self.off[lo:hi]))
        return Window(self.first + lo, self.times[lo:hi], self.ports[lo:hi], self.lens[lo:hi], off, data,
                      self.kinds[lo:hi])  # fmt: skip

    def span(self, lo: int, hi: int) -> bytes:
        """The bytes of frames lo..hi-1, back to back."""
        if lo >= hi:
            return b""
        return bytes(self.data[self.off[lo] : self.off[hi - 1] + self.lens[hi - 1]])


def offsets(lens: array[int]) -> tuple[array[int], int]:
    """Offsets of frames of these lengths laid back to back, and the total."""
    off = array("Q", accumulate(lens, initial=0))
    total = off.pop()
    return off, total


def concat(parts: list[Window]) -> Window | None:
    """Consecutive windows as one (None: no window)."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    w = Window(parts[0].first)
    for p in parts:
        if p.first != w.end:
            raise ValueError(f"windows are not consecutive: packet {p.first} after {w.end}")
        w.times += p.times
        w.ports += p.ports
        w.lens += p.lens
        w.off += array("Q", (o + len(w.data) for o in p.off))
        w.data += p.data
        w.kinds += p.kinds
    return w


def window_of(first: int, times: list[int], ports: list[int], frames: list[bytes]) -> Window:
    """A window from frames in memory."""
    lens = array("H", map(len, frames))
    off, _ = offsets(lens)
    return Window(first, array("Q", times), array("B", ports), lens, off, bytearray(b"".join(frames)))
