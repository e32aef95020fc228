"""Panama's aggregate route cache (seed 000 §3.1.1, after Chiueh and Pradhan's
address-range caching): the control plane's side.

The trie (LAYOUT.md) answers every IPv4 address; read as a list of address ranges
(maximal runs of addresses with one next-hop index) it is what the cache caches.  The
control plane chooses K index bits of the destination address.  They split the address
space into 2^K partitions (the addresses whose index bits spell set number i); inside a
partition, ranges that were not adjacent in the address space may become adjacent and
merge when their answers are equal (the paper's "non-contiguous address ranges merged
into one cacheable unit").  The bits are chosen greedily, one at a time, each the one
that leaves the fewest ranges in total over the partitions (ties: the smallest variance
of the per-partition counts), as the paper describes; `choice="top"` takes the K most
significant bits instead (only adjacent ranges merge: the paper's naive scheme).

Each of the 2^K sets holds one merged range: {lo, hi, next-hop index}, lo and hi being
addresses with the index bits cleared, so an address hits when `lo <= (addr & ~mask) <=
hi` (clearing fixed bits keeps the order of a partition's addresses).  The range a set
holds is the one of its partition that the most sample destinations fall in (by default
one random address in every route, as `npk traffic` draws them); the cache is filled
once by the control plane and kept consistent by it (npkd invalidates the sets a route
change overlaps, xscale/npkd/lpm.c), never filled by the fast path.  A miss walks the
trie on the ME (the paper posted misses to the main CPU; here the XScale is not asked).

Memory (scratch, on chip; microcode/README.md §5): the sets at the top of scratch,
16 bytes each {lo, hi, index, 0}; a header at RC_HDR {magic, base, sets, mask} that npkd
reads; the fast path's hit and miss counters at RC_HITS / RC_MISSES and npkd's counts of
invalidated and narrowed sets at RC_INVALIDATED / RC_NARROWED.
"""

from __future__ import annotations

import bisect
import random
import struct
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import layout as L
from .layout import LpmLayout, default_layout
from .walk import runs_index

SCRATCH_TOP = 0x4000  # 16 KB of scratch (sysmap.SysMap.scratch_bytes)
ENTRY_BYTES = 16
RC_HDR = 0x0960  # in the statistics area (sysmap: stats end at 0x0940)
RC_HITS = 0x0970
RC_MISSES = 0x0974
RC_INVALIDATED = 0x0978  # written by npkd (lpm.c)
RC_NARROWED = 0x097C  # written by npkd: invalidated sets cached again with what the change left them
MAGIC = 0x52434131  # "RCA1"
MAX_BITS = 8  # 256 sets x 16 B = the top 4 KB of scratch
GRID_SHIFT = 12  # the greedy choice counts ranges over /20 cells (bits 12..31 are candidates)
INVALID = (0xFFFF_FFFF, 0, 0)  # lo > hi: never a hit


class RangeCacheError(ValueError):
    """Bad parameters for the cache (the link reports it with the layout's name)."""


@dataclass
class RangeCache:
    bits: list[int]  # index bit j of the set number is address bit bits[j] (ascending)
    entries: list[tuple[int, int, int]]  # per set: (lo, hi, next-hop index), masked addresses
    ranges: list[int]  # merged ranges in each partition
    choice: str = "greedy"
    sample_hit_rate: float = 0.0  # of the sample destinations the sets were filled from
    base: int = field(init=False)

    def __post_init__(self) -> None:
        self.base = SCRATCH_TOP - ENTRY_BYTES * len(self.entries)

    @property
    def mask(self) -> int:
        return sum(1 << b for b in self.bits)

    def index(self, addr: int) -> int:
        return sum(((addr >> b) & 1) << j for j, b in enumerate(self.bits))

    def lookup(self, addr: int) -> int | None:
        """The fast path's answer: the next-hop index on a hit, None on a miss."""
        lo, hi, nhi = self.entries[self.index(addr)]
        m = addr & ~self.mask & 0xFFFF_FFFF
        return nhi if lo <= m <= hi else None

    def scratch_image(self) -> list[tuple[int, bytes]]:
        """(scratch byte address, big-endian bytes): the sets, the header and zeroed counters."""
        sets = b"".join(struct.pack(">4I", lo, hi, nhi, 0) for lo, hi, nhi in self.entries)
        hdr = struct.pack(">4I", MAGIC, self.base, len(self.entries), self.mask) + bytes(16)
        return [(self.base, sets), (RC_HDR, hdr)]

    def groups(self) -> list[tuple[int, int, int]]:
        """Runs of consecutive index bits: (address bit, width, set-number bit)."""
        out: list[tuple[int, int, int]] = []
        for j, b in enumerate(self.bits):
            if out and out[-1][0] + out[-1][1] == b:
                out[-1] = (out[-1][0], out[-1][1] + 1, out[-1][2])
            else:
                out.append((b, 1, j))
        return out

    def header(self) -> str:
        """The npk_sys.h lines of the cache: its addresses and the macro that forms the
        byte offset of a destination's set (index bits gathered, times 16)."""
        lines = ["// range cache (toolchain/router/range_cache.py): index bits "
                 + ", ".join(str(b) for b in self.bits),
                 f"#define RC_BASE 0x{self.base:x}", f"#define RC_MASK 0x{self.mask:08x}",
                 f"#define RC_MASK_LO 0x{self.mask & 0xFFFF:x}", f"#define RC_MASK_HI 0x{self.mask >> 16:x}",
                 f"#define RC_HITS 0x{RC_HITS:x}", f"#define RC_MISSES 0x{RC_MISSES:x}",
                 "#macro npk_rc_index(OUT, DST)", ".begin", "    .reg rcu"]  # fmt: skip
        for n, (b, w, j) in enumerate(self.groups()):
            m = (1 << w) - 1
            if b == 0:
                lines.append(f"    alu[rcu, DST, and, 0x{m:x}]")
            else:
                lines.append(f"    alu_shf[rcu, 0x{m:x}, and, DST, >>{b}]")
            op = "alu_shf[OUT, --, b, rcu" if n == 0 else "alu_shf[OUT, OUT, or, rcu"
            lines.append(f"    {op}, <<{j + 4}]")
        lines += [".end", "#endm", ""]
        return "\n".join(lines)

    def meta(self) -> dict[str, Any]:
        covered = sum(1 for lo, hi, _ in self.entries if lo <= hi)
        return {"bits": len(self.bits), "index_bits": list(self.bits), "choice": self.choice,
                "sets": len(self.entries), "base": self.base, "mask": self.mask, "header": RC_HDR,
                "hits_addr": RC_HITS, "misses_addr": RC_MISSES, "invalidated_addr": RC_INVALIDATED,
                "narrowed_addr": RC_NARROWED,
                "sets_filled": covered, "ranges_total": sum(self.ranges),
                "ranges_max": max(self.ranges) if self.ranges else 0,
                "sample_hit_rate": round(self.sample_hit_rate, 4)}  # fmt: skip


# --- reading the trie --------------------------------------------------------------


class _Runs:
    """Longword reads over an SRAM image given as (start address, big-endian bytes) runs."""

    def __init__(self, runs: Iterable[tuple[int, bytes]]) -> None:
        self.starts: list[int] = []
        self.words: list[array] = []
        for start, data in sorted(runs):
            w = array("I", data[: len(data) // 4 * 4])
            w.byteswap()
            self.starts.append(start)
            self.words.append(w)

    def read(self, addr: int, n: int) -> Sequence[int]:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return [0] * n
        off = (addr - self.starts[i]) // 4
        got = list(self.words[i][off : off + n])
        return got + [0] * (n - len(got))


def _node_values(mem: _Runs, lay: LpmLayout, entry: int) -> list[int]:
    """The 256 entries of the node `entry` points to (leaves, or level-3 pointers in a
    DENSE32 at level 2)."""
    node = lay.node_addr(entry & L.OFFSET_MASK)
    kind = (entry >> L.TYPE_SHIFT) & L.TYPE_MASK
    if kind == L.DENSE32:
        return list(mem.read(node, 256))
    if kind == L.DENSE16:
        out: list[int] = []
        for w in mem.read(node, 128):
            out += [w >> 16, w & 0xFFFF]
        return out
    w = mem.read(node, 4)
    vals = [(w[1 + i // 2] >> (0 if i & 1 else 16)) & 0xFFFF for i in range(5)]
    return [vals[runs_index(w[0], b)] for b in range(256)]


def intervals(runs: Iterable[tuple[int, bytes]], lay: LpmLayout | None = None) -> tuple[list[int], list[int]]:
    """The trie of an SRAM image as ranges: (starts, next-hop indices), starts[0] = 0,
    adjacent ranges with different indices."""
    lay = lay or default_layout()
    mem = _Runs(runs)
    starts: list[int] = []
    vals: list[int] = []

    def emit(a: int, v: int) -> None:
        if not vals or vals[-1] != v:
            starts.append(a)
            vals.append(v)

    root = mem.read(lay.root_addr(0), 1 << 16)
    for k, e in enumerate(root):
        if not e & L.ENTRY_CHILD:
            emit(k << 16, e & L.NH_MASK)
            continue
        for b, e2 in enumerate(_node_values(mem, lay, e)):
            if not e2 & L.ENTRY_CHILD:
                emit(k << 16 | b << 8, e2 & L.NH_MASK)
                continue
            for c, e3 in enumerate(_node_values(mem, lay, e2)):
                emit(k << 16 | b << 8 | c, e3 & L.NH_MASK)
    return starts, vals


# --- choosing the index bits -------------------------------------------------------


def _grid(starts: list[int], vals: list[int]) -> Any:
    """Value of every /20 cell, a cell holding more than one range a value of its own."""
    import numpy as np

    st = np.asarray(starts, dtype=np.int64)
    cells = np.arange(1 << (32 - GRID_SHIFT), dtype=np.int64) << GRID_SHIFT
    which = np.searchsorted(st, cells, side="right") - 1
    inner = np.searchsorted(st, cells + (1 << GRID_SHIFT), side="left") - np.searchsorted(st, cells, side="right")
    out = np.asarray(vals, dtype=np.int64)[which]
    mixed = inner > 0
    out[mixed] = (1 << 16) + np.nonzero(mixed)[0]
    return out


def _range_counts(grid: Any, bits: list[int]) -> Any:
    """Merged ranges per partition of the /20 grid for address bits `bits`."""
    import numpy as np

    nb = 32 - GRID_SHIFT
    t = grid.reshape((2,) * nb)
    axes = [nb - 1 - (b - GRID_SHIFT) for b in sorted(bits, reverse=True)]
    rest = [ax for ax in range(nb) if ax not in axes]
    s = np.transpose(t, axes + rest).reshape(1 << len(bits), -1)
    return (s[:, 1:] != s[:, :-1]).sum(axis=1) + 1


def choose_bits(starts: list[int], vals: list[int], k: int, choice: str = "greedy") -> list[int]:
    """K index bits, ascending: the paper's greedy choice, or the K most significant."""
    if choice == "top":
        return list(range(32 - k, 32))
    grid = _grid(starts, vals)
    chosen: list[int] = []
    for _ in range(k):
        best: tuple[int, float, int] | None = None
        for c in range(GRID_SHIFT, 32):
            if c in chosen:
                continue
            counts = _range_counts(grid, chosen + [c])
            key = (int(counts.sum()), float(counts.var()), -c)
            if best is None or key < best:
                best = key
        assert best is not None
        chosen.append(-best[2])
    return sorted(chosen)


# --- filling the sets ---------------------------------------------------------------


def _blocks(lo: int, hi: int) -> Iterable[tuple[int, int]]:
    """[lo, hi] as aligned power-of-two blocks (base, log2 size), in address order."""
    while lo <= hi:
        s = (lo & -lo).bit_length() - 1 if lo else 32
        while s > 0 and lo + (1 << s) - 1 > hi:
            s -= 1
        yield lo, s
        lo += 1 << s


def partition_ranges(starts: list[int], vals: list[int], bits: list[int]) -> list[list[tuple[int, int, int]]]:
    """Per partition, its merged ranges in order: (lo, hi, index) as masked addresses."""
    mask = sum(1 << b for b in bits)
    inv = ~mask & 0xFFFF_FFFF
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(1 << len(bits))]
    ends = starts[1:] + [1 << 32]
    for a, e, v in zip(starts, ends, vals, strict=True):
        for base, s in _blocks(a, e - 1):
            fixed = sum(((base >> b) & 1) << j for j, b in enumerate(bits) if b >= s)
            free = [j for j, b in enumerate(bits) if b < s]
            lo_m, hi_m = base & inv, (base | ((1 << s) - 1)) & inv
            for sub in range(1 << len(free)):
                p = fixed | sum(((sub >> i) & 1) << j for i, j in enumerate(free))
                rs = out[p]
                if rs and rs[-1][2] == v:
                    rs[-1] = (rs[-1][0], hi_m, v)
                else:
                    rs.append((lo_m, hi_m, v))
    return out


def sample_destinations(routes: Iterable[tuple[int, int]], seed: int = 1) -> list[int]:
    """One random address inside every route, as `npk traffic` draws destinations."""
    rng = random.Random(seed)
    out = []
    for prefix, length in routes:
        host = (1 << (32 - length)) - 1
        out.append((prefix & ~host & 0xFFFF_FFFF) | (rng.getrandbits(32) & host))
    return out


def build(runs: list[tuple[int, bytes]], routes: Iterable[tuple[int, int]], k: int, choice: str = "greedy",
          lay: LpmLayout | None = None, sample: list[int] | None = None) -> RangeCache:  # fmt: skip
    """The cache for the trie in SRAM image `runs` (the link's tables) and its routes."""
    if not 1 <= k <= MAX_BITS:
        raise RangeCacheError(f"rc_bits: {k}: the cache has 2^K sets in scratch; K must be 1..{MAX_BITS}")
    if choice not in ("greedy", "top"):
        raise RangeCacheError(f"rc_choice: {choice!r}: greedy or top")
    starts, vals = intervals(runs, lay)
    bits = choose_bits(starts, vals, k, choice)
    parts = partition_ranges(starts, vals, bits)
    mask = sum(1 << b for b in bits)
    dests = sample if sample is not None else sample_destinations(routes)
    votes: list[dict[int, int]] = [{} for _ in parts]
    idx = RangeCache(bits, [INVALID] * len(parts), []).index
    for d in dests:
        p = idx(d)
        los = [r[0] for r in parts[p]]
        i = bisect.bisect_right(los, d & ~mask & 0xFFFF_FFFF) - 1
        votes[p][i] = votes[p].get(i, 0) + 1
    entries = []
    for p, rs in enumerate(parts):
        best = max(range(len(rs)), key=lambda i: (votes[p].get(i, 0), rs[i][1] - rs[i][0]))
        entries.append(rs[best])
    cache = RangeCache(bits, entries, [len(rs) for rs in parts], choice)
    hits = sum(1 for d in dests if cache.lookup(d) is not None)
    cache.sample_hit_rate = hits / len(dests) if dests else 0.0
    return cache


# --- what the cache does for a set of destinations ------------------------------------


def evaluate(cache: RangeCache, runs: list[tuple[int, bytes]], dests: Sequence[int],
             lay: LpmLayout | None = None) -> dict[str, float]:  # fmt: skip
    """Hit rate over `dests`, and the lookup's dependent memory references: the trie
    alone (1-3 SRAM reads) against the cache first (1 scratch read, then the trie's
    reads on a miss)."""
    from .walk import walk

    mem = _Runs(runs)
    hits = trie = cached = 0
    for d in dests:
        _, reads = walk(mem.read, d, lay)
        trie += reads
        if cache.lookup(d) is None:
            cached += reads
        else:
            hits += 1
    n = max(1, len(dests))
    return {"destinations": len(dests), "hit_rate": round(hits / n, 4),
            "trie_sram_reads": round(trie / n, 3), "cached_sram_reads": round(cached / n, 3),
            "cached_scratch_reads": 1.0}  # fmt: skip


def image_runs(image: Any) -> list[tuple[int, bytes]]:
    """An SramImage's runs as (start address, big-endian bytes), as the link's tables."""
    return [(a, struct.pack(f">{len(w)}I", *w)) for a, w in image.runs()]
