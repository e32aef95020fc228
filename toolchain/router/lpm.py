"""Longest-prefix-match table for IPv4, laid out as a 16-8-8 leaf-pushed multibit trie.

Layout: microcode/lookup/LAYOUT.md (the reference; this module implements it).

- `LpmTable.add` / `withdraw` change the route set; before `build()` nothing is written.
- `build()` lays the whole structure out and returns an `SramImage` ({address: value}).
- After `build()`, `apply(Add(...))` / `apply(Withdraw(...))` (and `add`/`withdraw`,
  which call it) return the ordered SRAM writes that take the structure from the old
  route set to the new one.  Applied one at a time, in order, every intermediate
  state is a valid structure that answers every address with the old or the new
  next hop: a node is always written into memory the walk cannot reach, and only then
  published by one single-longword write of a root entry (see LAYOUT.md §7).
- Nodes replaced by an update go to a limbo list; `grace()` (the daemon calls it once
  every lookup that could have started before the update has finished) makes them
  reusable.  Until then they are never written, so a lookup that read the old root
  entry still walks a consistent old node.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import layout as L
from .layout import LpmLayout, default_layout

Write = tuple[int, int]  # (byte address, uint32 value)


def mask(length: int) -> int:
    return (0xFFFF_FFFF << (32 - length)) & 0xFFFF_FFFF if length else 0


class SramImage:
    """Sparse SRAM contents: byte address (longword aligned) -> uint32."""

    def __init__(self, words: dict[int, int] | None = None) -> None:
        self.words: dict[int, int] = dict(words or {})

    def write(self, addr: int, value: int) -> None:
        if addr % 4:
            raise ValueError(f"unaligned SRAM write at {addr:#x}")
        if not 0 <= value <= 0xFFFF_FFFF:
            raise ValueError(f"SRAM value {value:#x} is not a uint32")
        self.words[addr] = value

    def apply(self, writes: Iterable[Write]) -> None:
        for addr, value in writes:
            self.write(addr, value)

    def read(self, addr: int, count: int) -> list[int]:
        """Longwords at addr..; never-written longwords read as 0."""
        return [self.words.get(addr + 4 * i, 0) for i in range(count)]

    def copy(self) -> SramImage:
        return SramImage(self.words)

    def runs(self) -> list[tuple[int, list[int]]]:
        """Contiguous runs of written longwords: [(start address, [values])]."""
        out: list[tuple[int, list[int]]] = []
        for addr in sorted(self.words):
            if out and out[-1][0] + 4 * len(out[-1][1]) == addr:
                out[-1][1].append(self.words[addr])
            else:
                out.append((addr, [self.words[addr]]))
        return out

    def __len__(self) -> int:
        return len(self.words)


@dataclass(frozen=True)
class Add:
    prefix: int
    length: int
    nexthop: int


@dataclass(frozen=True)
class Withdraw:
    prefix: int
    length: int


Update = Add | Withdraw


@dataclass
class _Node:
    """A materialised level-2 node of one /16 and its level-3 children."""

    node_type: int
    offset: int  # 16-byte units into the node pool
    children: list[tuple[int, int]]  # (node type, offset) of level-3 nodes
    sig: tuple[bytes, tuple[tuple[int, bytes], ...]]


@dataclass
class _Allocator:
    capacity: int  # units
    high_water: int = 0
    free: dict[int, list[int]] = field(default_factory=dict)  # units -> offsets
    limbo: list[tuple[int, int]] = field(default_factory=list)  # (units, offset)
    in_use: int = 0

    def alloc(self, units: int) -> int:
        self.in_use += units
        pool = self.free.get(units)
        if pool:
            return pool.pop()
        if self.high_water + units > self.capacity:
            raise MemoryError(
                f"LPM node pool full ({self.capacity * L.UNIT} bytes); enlarge lpm_nodes"
            )
        offset = self.high_water
        self.high_water += units
        return offset

    def retire(self, units: int, offset: int) -> None:
        self.in_use -= units
        self.limbo.append((units, offset))

    def grace(self) -> None:
        for units, offset in self.limbo:
            self.free.setdefault(units, []).append(offset)
        self.limbo.clear()


# A plan for one /16: an int (leaf next-hop index for the root entry) or
# (256 level-2 values, {byte: 256 level-3 values}).
_Plan = int | tuple[list[int], dict[int, list[int]]]


def _runs(vals: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = 0
    for value, group in itertools.groupby(vals):
        out.append((start, value))
        start += sum(1 for _ in group)
    return out


def encode_leaf_node(vals: list[int]) -> tuple[int, list[int]]:
    """(node type, longwords) of a leaves-only node: RUNS if it fits, else DENSE16."""
    runs = _runs(vals)
    if len(runs) <= L.RUNS_MAX:
        bounds = [start for start, _ in runs[1:]] + [0xFF] * (L.RUNS_MAX - len(runs))
        values = [v for _, v in runs] + [runs[-1][1]] * (L.RUNS_MAX - len(runs))
        return L.RUNS, [
            (bounds[0] << 24) | (bounds[1] << 16) | (bounds[2] << 8) | bounds[3],
            (values[0] << 16) | values[1],
            (values[2] << 16) | values[3],
            values[4] << 16,
        ]
    return L.DENSE16, [(vals[2 * i] << 16) | vals[2 * i + 1] for i in range(128)]


def _sig(plan: tuple[list[int], dict[int, list[int]]]) -> tuple[bytes, tuple[tuple[int, bytes], ...]]:
    vals, children = plan
    return (
        array("H", vals).tobytes(),
        tuple((b, array("H", children[b]).tobytes()) for b in sorted(children)),
    )


class LpmTable:
    """IPv4 route set -> SRAM trie (16-8-8, leaf-pushed; see LAYOUT.md)."""

    def __init__(self, layout: LpmLayout | None = None) -> None:
        self.layout = layout or default_layout()
        self._routes: list[dict[int, int]] = [{} for _ in range(33)]  # length -> prefix -> nh
        self._inner16: dict[int, set[tuple[int, int]]] = {}  # /16 -> routes longer than /16
        self._inner24: dict[int, set[tuple[int, int]]] = {}  # /24 -> routes longer than /24
        self._short: list[tuple[int, int]] = [(-1, 0)] * L.ROOT_ENTRIES  # best route <= /16
        self._built = False
        self._root: list[int] = [0] * L.ROOT_ENTRIES
        self._nodes: dict[int, _Node] = {}
        self._alloc = _Allocator(self.layout.node_units)
        self.image = SramImage()
        self.generation = 0

    # ------------------------------------------------------------------ route set

    def __len__(self) -> int:
        return sum(len(t) for t in self._routes)

    def routes(self) -> list[tuple[int, int, int]]:
        return [(p, n, nh) for n in range(33) for p, nh in sorted(self._routes[n].items())]

    def get(self, prefix: int, length: int) -> int | None:
        return self._routes[length].get(prefix)

    def add(self, prefix: int, length: int, nexthop_index: int) -> list[Write]:
        """Add (or replace) a route.  After build(): the SRAM writes, in order."""
        return self.apply(Add(prefix, length, nexthop_index))

    def withdraw(self, prefix: int, length: int) -> list[Write]:
        """Remove a route (KeyError if absent).  After build(): the SRAM writes, in order."""
        return self.apply(Withdraw(prefix, length))

    def lookup_reference(self, addr: int) -> int | None:
        """Longest-prefix match by probing every length: obviously right, slow."""
        for length in range(32, -1, -1):
            nh = self._routes[length].get(addr & mask(length))
            if nh is not None:
                return nh
        return None

    def match_reference(self, addr: int) -> tuple[int, int] | None:
        """(prefix, length) of the longest matching route, or None."""
        for length in range(32, -1, -1):
            if (addr & mask(length)) in self._routes[length]:
                return addr & mask(length), length
        return None

    def _check(self, prefix: int, length: int) -> None:
        if not 0 <= length <= 32:
            raise ValueError(f"prefix length {length} outside 0..32")
        if not 0 <= prefix <= 0xFFFF_FFFF or prefix & ~mask(length) & 0xFFFF_FFFF:
            raise ValueError(f"prefix {prefix:#010x}/{length} has host bits set")

    def _set_route(self, update: Update) -> list[int]:
        """Change the route set; return the /16 indices whose content may have changed."""
        p, n = update.prefix, update.length
        self._check(p, n)
        if isinstance(update, Add):
            if not 1 <= update.nexthop <= L.NH_MASK:
                raise ValueError(f"next-hop index {update.nexthop} outside 1..{L.NH_MASK}")
            self._routes[n][p] = update.nexthop
            if n > 16:
                self._inner16.setdefault(p >> 16, set()).add((p, n))
            if n > 24:
                self._inner24.setdefault(p >> 8, set()).add((p, n))
        else:
            del self._routes[n][p]  # KeyError: no such route
            if n > 16:
                self._discard(self._inner16, p >> 16, (p, n))
            if n > 24:
                self._discard(self._inner24, p >> 8, (p, n))
        if n > 16:
            return [p >> 16]
        return self._update_short(p, n, update)

    @staticmethod
    def _discard(index: dict[int, set[tuple[int, int]]], key: int, item: tuple[int, int]) -> None:
        bucket = index[key]
        bucket.discard(item)
        if not bucket:
            del index[key]

    def _update_short(self, p: int, n: int, update: Update) -> list[int]:
        first, count = p >> 16, 1 << (16 - n)
        short = self._short
        changed = []
        if isinstance(update, Add):
            new = (n, update.nexthop)
            for k in range(first, first + count):
                if short[k][0] <= n and short[k] != new:
                    short[k] = new
                    changed.append(k)
        else:
            repl = (-1, 0)
            for m in range(n - 1, -1, -1):
                nh = self._routes[m].get(p & mask(m))
                if nh is not None:
                    repl = (m, nh)
                    break
            for k in range(first, first + count):
                if short[k][0] == n:
                    if short[k][1] != repl[1]:
                        changed.append(k)
                    short[k] = repl
        return changed

    # ------------------------------------------------------------------ planning

    def _plan(self, k: int) -> _Plan:
        base = self._short[k][1]
        inner = self._inner16.get(k)
        if not inner:
            return base
        vals = [base] * 256
        deep: set[int] = set()
        for p, n in sorted(inner, key=lambda r: r[1]):
            if n <= 24:
                start, span = (p >> 8) & 0xFF, 1 << (24 - n)
                vals[start : start + span] = [self._routes[n][p]] * span
            else:
                deep.add(p >> 8)
        children: dict[int, list[int]] = {}
        for k24 in deep:
            b = k24 & 0xFF
            sub = [vals[b]] * 256
            for p, n in sorted(self._inner24[k24], key=lambda r: r[1]):
                start, span = p & 0xFF, 1 << (32 - n)
                sub[start : start + span] = [self._routes[n][p]] * span
            if sub.count(sub[0]) == 256:
                vals[b] = sub[0]  # the deep routes only repeat their cover's next hop
            else:
                children[b] = sub
        if not children and vals.count(vals[0]) == 256:
            return vals[0]
        return vals, children

    def _materialise(self, k: int, plan: _Plan, out: list[Write]) -> None:
        """Append the writes that make /16 `k` hold `plan`: fresh nodes, then the root entry."""
        old = self._nodes.pop(k, None)
        if isinstance(plan, int):
            entry = L.leaf(plan)
        else:
            vals, children = plan
            child_ptrs: dict[int, int] = {}
            placed: list[tuple[int, int]] = []
            for b in sorted(children):
                ctype, words = encode_leaf_node(children[b])
                off = self._place(ctype, words, out)
                placed.append((ctype, off))
                child_ptrs[b] = L.child(ctype, off)
            if child_ptrs:
                ntype = L.DENSE32
                words = [child_ptrs.get(b, vals[b]) for b in range(256)]
            else:
                ntype, words = encode_leaf_node(vals)
            off = self._place(ntype, words, out)
            self._nodes[k] = _Node(ntype, off, placed, _sig(plan))
            entry = L.child(ntype, off)
        if self._root[k] != entry:
            self._root[k] = entry
            if self._built:  # build() writes the whole root array after the nodes
                out.append((self.layout.root_addr(k), entry))
        if old is not None:
            for ctype, off in [*old.children, (old.node_type, old.offset)]:
                self._alloc.retire(L.NODE_UNITS[ctype], off)

    def _place(self, node_type: int, words: list[int], out: list[Write]) -> int:
        off = self._alloc.alloc(L.NODE_UNITS[node_type])
        base = self.layout.node_addr(off)
        out.extend((base + 4 * i, w) for i, w in enumerate(words))
        return off

    def _same(self, k: int, plan: _Plan) -> bool:
        node = self._nodes.get(k)
        if isinstance(plan, int):
            return node is None and self._root[k] == L.leaf(plan)
        return node is not None and node.sig == _sig(plan)

    def _ctl_writes(self) -> list[Write]:
        c = self.layout.ctl_base
        return [
            (c + 0, L.CTL_MAGIC),
            (c + 4, L.CTL_VERSION),
            (c + 8, self.generation & 0xFFFF_FFFF),
            (c + 12, self._alloc.high_water),
        ]

    # ------------------------------------------------------------------ build / update

    def build(self) -> SramImage:
        """Lay out the whole structure from scratch; returns (and keeps) the image."""
        self._built = False
        self._nodes = {}
        self._alloc = _Allocator(self.layout.node_units)
        self.generation = 0
        out: list[Write] = []
        self._root = [nh for _, nh in self._short]  # leaves; /16s with nodes follow
        for k in sorted(self._inner16):
            self._materialise(k, self._plan(k), out)
        root = self.layout.root_addr(0)
        out.extend((root + 4 * k, entry) for k, entry in enumerate(self._root))
        self._built = True
        self.image = SramImage()
        self.image.apply(self._ctl_writes())
        self.image.apply(out)
        return self.image

    def apply(self, update: Update) -> list[Write]:
        """Change one route; return the ordered SRAM writes (empty before build())."""
        touched = self._set_route(update)
        if not self._built:
            return []
        out: list[Write] = []
        for k in touched:
            plan = self._plan(k)
            if not self._same(k, plan):
                self._materialise(k, plan, out)
        if out:
            self.generation += 1
            c = self.layout.ctl_base
            out += [(c + 12, self._alloc.high_water), (c + 8, self.generation & 0xFFFF_FFFF)]
        self.image.apply(out)
        return out

    def grace(self) -> None:
        """Every lookup begun before the last update has ended: reuse retired nodes."""
        self._alloc.grace()

    # ------------------------------------------------------------------ figures

    def stats(self) -> dict[str, int]:
        counts = {name: 0 for name in L.NODE_NAMES.values()}
        for node in self._nodes.values():
            counts[L.NODE_NAMES[node.node_type]] += 1
            for ctype, _ in node.children:
                counts[L.NODE_NAMES[ctype]] += 1
        node_bytes = self._alloc.in_use * L.UNIT
        return {
            "routes": len(self),
            **{f"nodes_{name}": n for name, n in counts.items()},
            "nodes": sum(counts.values()),
            "root_bytes": 4 * L.ROOT_ENTRIES,
            "node_bytes": node_bytes,
            "pool_high_water_bytes": self._alloc.high_water * L.UNIT,
            "limbo_bytes": sum(u for u, _ in self._alloc.limbo) * L.UNIT,
            "trie_bytes": 4 * L.ROOT_ENTRIES + node_bytes,
        }
