"""Route file format, longest-prefix match, and random tables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npkit.emulator.traffic.packet import ip
from npkit.emulator.traffic.routes import (
    Route,
    RouteError,
    RouteTable,
    format_routes,
    is_reserved,
    mask,
    parse_routes,
    random_routes,
)

TEXT = """
# a comment
1.0.0.0/8      10.0.0.2  0
1.2.0.0/16     10.0.1.2  1   # trailing comment
1.2.3.0/24     10.0.2.2  2
1.2.3.128/25   10.0.3.2  3
1.2.3.200/32   10.0.4.2  4
10.0.3.0/24    0.0.0.0   3
"""


def test_parse_format_round_trip() -> None:
    routes = parse_routes(TEXT)
    assert len(routes) == 6
    assert routes[0] == Route(ip("1.0.0.0"), 8, ip("10.0.0.2"), 0)
    assert routes[5].direct
    assert parse_routes(format_routes(routes, "header\nline")) == routes


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1.2.3.4/16 10.0.0.2 0", "host bits"),
        ("1.2.3.0 10.0.0.2 0", "no /LEN"),
        ("1.2.3.0/33 10.0.0.2 0", "outside 0..32"),
        ("1.2.3.0/24 10.0.0.2", "3 fields|2 fields"),
        ("1.2.3.0/24 10.0.0 0", "not an IPv4"),
        ("1.2.3.0/24 10.0.0.2 x", "port"),
    ],
)
def test_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(RouteError, match=message) as info:
        parse_routes("# ok\n" + line, "r.txt")
    assert str(info.value).startswith("r.txt:2:")


def test_duplicate_prefix_rejected() -> None:
    with pytest.raises(RouteError, match="duplicate"):
        RouteTable(parse_routes("1.0.0.0/8 10.0.0.2 0\n1.0.0.0/8 10.0.0.3 1"))


def test_longest_prefix_wins() -> None:
    table = RouteTable(parse_routes(TEXT))
    assert table.lookup(ip("1.2.3.200")).port == 4
    assert table.lookup(ip("1.2.3.129")).port == 3
    assert table.lookup(ip("1.2.3.1")).port == 2
    assert table.lookup(ip("1.2.4.1")).port == 1
    assert table.lookup(ip("1.9.9.9")).port == 0
    assert table.lookup(ip("2.0.0.0")) is None
    table.add(Route(0, 0, ip("10.0.0.9"), 0))
    assert table.lookup(ip("2.0.0.0")).length == 0
    table.remove(ip("1.2.3.200"), 32)
    assert table.lookup(ip("1.2.3.200")).port == 3


def _brute_force(routes: list[Route], addr: int) -> Route | None:
    best = None
    for r in routes:
        if addr & mask(r.length) == r.prefix and (best is None or r.length > best.length):
            best = r
    return best


@st.composite
def tables(draw: st.DrawFn) -> list[Route]:
    entries = draw(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)),
                            max_size=40))
    seen, routes = set(), []
    for addr, length in entries:
        prefix = addr & mask(length)
        if (prefix, length) not in seen:
            seen.add((prefix, length))
            routes.append(Route(prefix, length, 1, len(routes) % 5))
    return routes


@settings(max_examples=200)
@given(tables(), st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20))
def test_lookup_matches_brute_force(routes: list[Route], addrs: list[int]) -> None:
    table = RouteTable(routes)
    # probe inside every prefix too, not only at random addresses
    probes = addrs + [r.prefix | (a & ~mask(r.length) & 0xFFFFFFFF) for r, a in
                      zip(routes, addrs * (len(routes) // len(addrs) + 1), strict=False)]
    for addr in probes:
        assert table.lookup(addr) == _brute_force(routes, addr)


def test_random_routes_deterministic_distinct_and_public() -> None:
    hops = [(ip("10.0.1.2"), 1), (ip("10.0.2.2"), 2)]
    a = random_routes(10_000, 1, hops)
    assert a == random_routes(10_000, 1, hops)
    assert a != random_routes(10_000, 2, hops)
    assert len({(r.prefix, r.length) for r in a}) == 10_000
    assert not any(is_reserved(r.prefix, r.length) for r in a)
    assert {(r.next_hop, r.port) for r in a} == set(hops)
    hist = RouteTable(a).length_histogram()
    assert max(hist, key=hist.__getitem__) == 24  # shaped like a BGP table
    assert RouteTable(a).lookup(ip("10.1.2.3")) is None
