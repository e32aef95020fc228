"""The SRAM trie: walk == reference LPM, read bounds, and safe incremental updates."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.toolchain.router import layout as L
from npkit.toolchain.router.layout import LpmLayout, default_layout
from npkit.toolchain.router.lpm import Add, LpmTable, SramImage, Update, Withdraw, mask
from npkit.toolchain.router.walk import MAX_READS, CountingReader, WalkError, walk

LAYOUT = default_layout()


def ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def probes(prefixes: list[tuple[int, int]], rng: random.Random, extra: int = 20) -> list[int]:
    """Addresses where an LPM answer can change: each prefix's first/last address and its
    neighbours, one inside, plus random ones."""
    out: set[int] = set()
    for p, n in prefixes:
        last = p | (~mask(n) & 0xFFFF_FFFF)
        out.update({p, last, (p - 1) & 0xFFFF_FFFF, (last + 1) & 0xFFFF_FFFF})
        out.add(p | (rng.getrandbits(32 - n) if n < 32 else 0))
    out.update(rng.getrandbits(32) for _ in range(extra))
    return sorted(out)


def check_walk(table: LpmTable, image: SramImage, addrs: list[int]) -> None:
    for a in addrs:
        reader = CountingReader(image.read)
        nh, reads = walk(reader, a, LAYOUT)
        assert nh == table.lookup_reference(a), f"addr {a:#010x}"
        assert reads == len(reader.sizes) <= MAX_READS
        assert all(size in (1, 4) for size in reader.sizes)


# Route sets with heavy overlap: prefixes are cut from a few random "anchor" addresses,
# so /8 ⊃ /16 ⊃ /20 ⊃ /24 ⊃ /30 ⊃ /32 chains and siblings occur in nearly every example.
LENGTHS = st.sampled_from([0, 1, 7, 8, 12, 15, 16, 17, 20, 23, 24, 25, 28, 30, 31, 32])
ANCHORS = st.lists(st.integers(0, 0xFFFF_FFFF), min_size=1, max_size=4)


@st.composite
def route_sets(draw: st.DrawFn, max_routes: int = 40) -> list[tuple[int, int, int]]:
    anchors = draw(ANCHORS)
    items = draw(st.lists(st.tuples(st.integers(0, len(anchors) - 1), LENGTHS,
                                    st.integers(0, 255), st.integers(1, 6)),
                          max_size=max_routes))
    routes: dict[tuple[int, int], int] = {}
    for which, n, jitter, nh in items:
        addr = anchors[which] ^ (jitter << 8 if n <= 24 else jitter)  # siblings nearby
        routes[(addr & mask(n), n)] = nh
    return [(p, n, nh) for (p, n), nh in routes.items()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(route_sets(), st.randoms(use_true_random=False))
def test_walk_equals_reference_lpm(routes: list[tuple[int, int, int]], rng: random.Random) -> None:
    table = LpmTable(LAYOUT)
    for p, n, nh in routes:
        table.add(p, n, nh)
    image = table.build()
    check_walk(table, image, probes([(p, n) for p, n, _ in routes], rng))


def test_empty_table_has_no_route_and_one_read() -> None:
    table = LpmTable(LAYOUT)
    image = table.build()
    for a in (0, 1, ip("10.0.0.1"), 0xFFFF_FFFF):
        assert walk(image.read, a, LAYOUT) == (None, 1)


def test_default_route_host_routes_and_nesting() -> None:
    table = LpmTable(LAYOUT)
    for text, nh in [("0.0.0.0/0", 1), ("1.0.0.0/8", 2), ("1.2.0.0/16", 3), ("1.2.3.0/24", 4),
                     ("1.2.3.128/25", 5), ("1.2.3.200/32", 6), ("255.255.255.255/32", 7)]:
        addr, n = text.split("/")
        table.add(ip(addr), int(n), nh)
    image = table.build()
    expect = {"9.9.9.9": (1, 1), "1.9.9.9": (2, 1), "1.2.4.1": (3, 2), "1.2.3.1": (4, 3),
              "1.2.3.129": (5, 3), "1.2.3.200": (6, 3), "1.2.3.201": (5, 3),
              "255.255.255.255": (7, 3), "255.255.255.254": (1, 3), "0.0.0.0": (1, 1)}
    for text, (nh, reads) in expect.items():
        assert walk(image.read, ip(text), LAYOUT) == (nh, reads), text


def test_withdraw_exposes_the_shorter_prefix() -> None:
    table = LpmTable(LAYOUT)
    table.add(ip("20.0.0.0"), 8, 1)
    table.add(ip("20.32.0.0"), 11, 2)
    table.add(ip("20.32.5.0"), 24, 3)
    table.add(ip("20.32.5.7"), 32, 4)
    image = table.build()
    assert walk(image.read, ip("20.32.5.7"), LAYOUT)[0] == 4
    steps = [((ip("20.32.5.7"), 32), {"20.32.5.7": 3}),
             ((ip("20.32.0.0"), 11), {"20.32.9.9": 1, "20.32.5.7": 3}),
             ((ip("20.32.5.0"), 24), {"20.32.5.7": 1}),
             ((ip("20.0.0.0"), 8), {"20.32.5.7": None, "20.1.1.1": None})]
    for (p, n), expect in steps:
        image.apply(table.withdraw(p, n))
        for text, nh in expect.items():
            assert walk(image.read, ip(text), LAYOUT)[0] == nh, (p, n, text)
    assert table.stats()["node_bytes"] == 0  # every node retired


def test_node_types_and_sizes() -> None:
    """A /16 with one /24 is a 16-byte RUNS node; many /24s make a DENSE16 node; a /32
    under a /24 makes a DENSE32 node with a level-3 child."""
    table = LpmTable(LAYOUT)
    table.add(ip("30.1.2.0"), 24, 1)
    for i in range(0, 200, 20):
        table.add(ip(f"31.1.{i}.0"), 24, 1 + i % 3)
    table.add(ip("32.1.0.0"), 16, 1)
    table.add(ip("32.1.7.9"), 32, 2)
    table.build()
    s = table.stats()
    assert (s["nodes_runs"], s["nodes_dense16"], s["nodes_dense32"]) == (2, 1, 1)
    assert s["node_bytes"] == 16 + 512 + 1024 + 16


def test_runs_node_words_match_layout_md() -> None:
    """The worked example in LAYOUT.md §3.3: 30.1.0.0/16 -> 5, 30.1.2.0/24 -> 7."""
    table = LpmTable(LAYOUT)
    table.add(ip("30.1.0.0"), 16, 5)
    table.add(ip("30.1.2.0"), 24, 7)
    image = table.build()
    root = image.read(LAYOUT.root_addr(ip("30.1.0.0") >> 16), 1)[0]
    assert root >> 28 == 0x8 | L.RUNS and root & L.OFFSET_MASK == 0
    assert image.read(LAYOUT.node_base, 4) == [0x0203FFFF, 0x00050007, 0x00050005, 0x00050000]


def test_walk_rejects_what_the_builder_never_writes() -> None:
    image = SramImage()
    image.write(LAYOUT.root_addr(1), L.ENTRY_CHILD | (7 << L.TYPE_SHIFT))
    with pytest.raises(WalkError):
        walk(image.read, 1 << 16, LAYOUT)
    image.write(LAYOUT.root_addr(2), 0x0001_0001)  # leaf with reserved bits
    with pytest.raises(WalkError):
        walk(image.read, 2 << 16, LAYOUT)


def test_bad_routes_are_refused() -> None:
    table = LpmTable(LAYOUT)
    with pytest.raises(ValueError):
        table.add(ip("10.0.0.1"), 24, 1)  # host bits
    with pytest.raises(ValueError):
        table.add(0, 33, 1)
    with pytest.raises(ValueError):
        table.add(0, 8, 0)  # index 0 is "no route"
    with pytest.raises(KeyError):
        table.withdraw(ip("10.0.0.0"), 8)


def test_node_pool_exhaustion_is_reported() -> None:
    tiny = LpmLayout(ctl_base=0, root_base=0x1000, nh_base=0x41000, nh_capacity=16,
                     node_base=0x42000, node_bytes=1024)
    table = LpmTable(tiny)
    for b in (1, 2, 3):  # three DENSE16 nodes (512 B each) do not fit in 1 KB
        for i in range(0, 256, 2):
            table.add(ip(f"40.{b}.{i}.0"), 24, 1 + i % 5)
    with pytest.raises(MemoryError):
        table.build()


# ------------------------------------------------------------------ incremental updates


def reachable_units(image: SramImage, lay: LpmLayout) -> set[int]:
    """Every node-pool byte address the walk can reach from the root array."""
    out: set[int] = set()

    def node(entry: int, level: int) -> None:
        t = (entry >> L.TYPE_SHIFT) & L.TYPE_MASK
        base = lay.node_addr(entry & L.OFFSET_MASK)
        out.update(range(base, base + L.NODE_UNITS[t] * L.UNIT, 4))
        if t == L.DENSE32:
            for e in image.read(base, 256):
                if e & L.ENTRY_CHILD:
                    assert level == 2, "child pointer below level 2"
                    node(e, 3)

    for k in range(L.ROOT_ENTRIES):
        e = image.words.get(lay.root_addr(k), 0)
        if e & L.ENTRY_CHILD:
            node(e, 2)
    return out


class Overlay:
    """SRAM after the first few writes of an update: `writes` over `base`."""

    def __init__(self, base: SramImage, writes: dict[int, int]) -> None:
        self.base, self.writes = base.words, writes

    def __call__(self, addr: int, count: int) -> list[int]:
        return [self.writes.get(x, self.base.get(x, 0)) for x in range(addr, addr + 4 * count, 4)]


class Straddle:
    """A slow lookup: its first read sees `before`, the later ones `after`."""

    def __init__(self, before: SramImage, after: SramImage) -> None:
        self.images = [before, after]

    def __call__(self, addr: int, count: int) -> list[int]:
        image = self.images[0] if len(self.images) == 2 else self.images[-1]
        if len(self.images) == 2:
            self.images = self.images[1:]
        return image.read(addr, count)


@st.composite
def update_sequences(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[Update]]:
    initial = draw(route_sets(max_routes=25))
    extra = draw(route_sets(max_routes=15))
    live = {(p, n): nh for p, n, nh in initial}
    fallback = draw(st.tuples(st.integers(0, 0xFFFF_FFFF), LENGTHS))
    pool = list(live) + [(p, n) for p, n, _ in extra] + [(fallback[0] & mask(fallback[1]),
                                                          fallback[1])]
    ops: list[Update] = []
    for _ in range(draw(st.integers(1, 8))):
        p, n = draw(st.sampled_from(pool))
        if (p, n) in live and draw(st.booleans()):
            ops.append(Withdraw(p, n))
            del live[(p, n)]
        else:
            nh = draw(st.integers(1, 6))
            ops.append(Add(p, n, nh))
            live[(p, n)] = nh
    return initial, ops


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(update_sequences(), st.randoms(use_true_random=False), st.booleans())
def test_every_intermediate_state_answers_old_or_new(
    seq: tuple[list[tuple[int, int, int]], list[Update]], rng: random.Random, grace: bool
) -> None:
    initial, ops = seq
    table = LpmTable(LAYOUT)
    for p, n, nh in initial:
        table.add(p, n, nh)
    image = table.build().copy()
    prefixes = [(p, n) for p, n, _ in initial] + [(op.prefix, op.length) for op in ops]
    addrs = probes(prefixes, rng, extra=5)
    root_end = LAYOUT.root_base + 4 * L.ROOT_ENTRIES
    ctl_end = LAYOUT.ctl_base + 16
    for op in ops:
        old = {a: table.lookup_reference(a) for a in addrs}
        live_before = reachable_units(image, LAYOUT)
        writes = table.apply(op)
        new = {a: table.lookup_reference(a) for a in addrs}
        for addr, _ in writes:
            # only single-longword root/ctl writes touch what a lookup can already reach
            in_root = LAYOUT.root_base <= addr < root_end or LAYOUT.ctl_base <= addr < ctl_end
            assert in_root or addr not in live_before, f"write into live node at {addr:#x}"
        before = image.copy()
        # every state after 0..len(writes) writes (sampled evenly when there are many)
        step = max(1, len(writes) // 40)
        for count in sorted({*range(0, len(writes) + 1, step), len(writes)}):
            state = Overlay(before, dict(writes[:count]))
            for a in addrs:
                got, reads = walk(state, a, LAYOUT)
                assert got in (old[a], new[a]) and reads <= MAX_READS
        image.apply(writes)
        # a lookup that read the root before the update and the nodes after it
        for a in addrs:
            assert walk(Straddle(before, image), a, LAYOUT)[0] == old[a]
        check_walk(table, image, addrs)
        if grace:
            table.grace()
    # the incrementally maintained image answers like a fresh build and holds no more nodes
    fresh = LpmTable(LAYOUT)
    for p, n, nh in table.routes():
        fresh.add(p, n, nh)
    fresh_image = fresh.build()
    for a in addrs:
        assert walk(image.read, a, LAYOUT)[0] == walk(fresh_image.read, a, LAYOUT)[0]
    assert table.stats()["node_bytes"] == fresh.stats()["node_bytes"]


def test_writes_equal_the_tables_own_image() -> None:
    """apply() returns exactly the writes it made to table.image (nothing hidden)."""
    table = LpmTable(LAYOUT)
    table.add(ip("50.0.0.0"), 8, 1)
    mirror = table.build().copy()
    for op in (Add(ip("50.1.2.0"), 24, 2), Add(ip("50.1.2.3"), 32, 3), Add(0, 0, 4),
               Withdraw(ip("50.0.0.0"), 8), Withdraw(ip("50.1.2.3"), 32)):
        mirror.apply(table.apply(op))
        assert mirror.words == table.image.words


def test_update_touching_nothing_writes_nothing() -> None:
    table = LpmTable(LAYOUT)
    table.add(ip("60.0.0.0"), 8, 1)
    table.build()
    assert table.apply(Add(ip("60.0.0.0"), 8, 1)) == []  # same next hop again
    assert table.apply(Add(ip("60.1.0.0"), 16, 1)) == []  # same answer everywhere
    assert table.apply(Withdraw(ip("60.1.0.0"), 16)) == []


def test_limbo_nodes_are_reused_only_after_grace() -> None:
    table = LpmTable(LAYOUT)
    table.add(ip("70.1.0.0"), 24, 1)
    table.build()
    first = table.stats()["pool_high_water_bytes"]
    table.apply(Add(ip("70.1.0.0"), 24, 2))  # rebuilds the node elsewhere
    assert table.stats()["pool_high_water_bytes"] == 2 * first
    table.apply(Add(ip("70.1.0.0"), 24, 3))  # limbo not yet reusable
    assert table.stats()["pool_high_water_bytes"] == 3 * first
    table.grace()
    table.apply(Add(ip("70.1.0.0"), 24, 4))
    assert table.stats()["pool_high_water_bytes"] == 3 * first


def test_random_10k_table_bounds() -> None:
    from npkit.toolchain.router.stats import probe_addresses, random_table, read_figures

    table = random_table(10_000, seed=3)
    image = table.build()
    addrs = probe_addresses(table, seed=3, extra_random=2_000)
    figures = read_figures(image, addrs, LAYOUT)
    assert figures["max_reads"] <= MAX_READS
    assert figures["mean_longwords"] <= 4 * MAX_READS
    for a in addrs[::7]:
        assert walk(image.read, a, LAYOUT)[0] == table.lookup_reference(a)
