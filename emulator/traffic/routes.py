"""Route tables: a text format, a longest-prefix-match lookup, and random tables.

File format (one route per line)::

    # comment; blank lines are ignored, and so is anything after a '#'
    PREFIX/LEN  NEXTHOP_IP  PORT
    198.51.100.0/24   10.0.2.2   2
    0.0.0.0/0         10.0.0.2   0     # a default route
    10.0.3.0/24       0.0.0.0    3     # next hop 0.0.0.0: directly connected

- PREFIX/LEN: dotted quad and length 0..32. Host bits below LEN must be zero (a
  route written `10.1.2.3/16` is an error, not silently masked: it is almost always
  a typo).
- NEXTHOP_IP: the IPv4 address of the next router; `0.0.0.0` means the destination
  is on the link itself, so the packet's own destination address is the next hop
  (whose MAC the ARP table must then hold).
- PORT: output port index, 0..N-1.
- The same PREFIX/LEN twice is an error (which one would win would be an accident of
  the reader).

`RouteTable`'s lookup is longest-prefix match written to be obviously correct rather
than fast: one dict per prefix length, probed from /32 down to /0. It is the reference
the SRAM trie in the microcode (and the XScale's incremental updates) and `RouteIndex`
are checked against.

Large tables (a full Internet table is 1,000,000 prefixes) are held as `RouteColumns`
(four flat arrays, 13 bytes a route, `Route` objects made on access), parsed by the C
parser of the packet library when the text is plain (`parse_route_columns`; anything it
does not take, errors included, goes to `parse_routes`, which says what is wrong), and
looked up through `RouteIndex` (the route set as sorted disjoint address intervals, a
binary search in C). `load_route_columns` reads each file once per process.

`random_routes` makes large tables (e.g. 10,000 prefixes) with a seed: lengths drawn
from a distribution shaped like a BGP table (mostly /24, then /22-/23, /16-/21, a few
shorter), all outside special-use space (RFC 6890: 0/8, 10/8, 100.64/10, 127/8,
169.254/16, 172.16/12, 192.0.0/24, 192.0.2/24, 192.168/16, 198.18/15, 198.51.100/24,
203.0.113/24, 224/4, 240/4), no duplicates; nested prefixes are allowed and occur
naturally, which is what exercises longest-prefix match.
"""

from __future__ import annotations

import bisect
import itertools
import random
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from .packet import ip, ip_str

DIRECT = 0  # next hop 0.0.0.0: deliver to the destination address itself


class RouteError(ValueError):
    """A malformed route file line or route, with its location."""


@dataclass(frozen=True, order=True)
class Route:
    prefix: int
    length: int
    next_hop: int
    port: int

    @property
    def direct(self) -> bool:
        return self.next_hop == DIRECT

    def __str__(self) -> str:
        return f"{ip_str(self.prefix)}/{self.length} {ip_str(self.next_hop)} {self.port}"


def mask(length: int) -> int:
    """Netmask for a prefix length: mask(24) == 0xFFFFFF00."""
    return (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF if length else 0


def parse_prefix(text: str) -> tuple[int, int]:
    """'10.0.0.0/8' -> (0x0a000000, 8); host bits must be zero."""
    addr_text, sep, len_text = text.partition("/")
    if not sep:
        raise RouteError(f"prefix {text!r} has no /LEN")
    try:
        length = int(len_text)
    except ValueError:
        raise RouteError(f"prefix length {len_text!r} is not a number") from None
    if not 0 <= length <= 32:
        raise RouteError(f"prefix length {length} outside 0..32")
    try:
        addr = ip(addr_text)
    except ValueError as exc:
        raise RouteError(str(exc)) from None
    if addr & ~mask(length) & 0xFFFFFFFF:
        raise RouteError(f"prefix {text} has host bits set (did you mean "
                         f"{ip_str(addr & mask(length))}/{length}?)")
    return addr, length


class RouteTable:
    """Longest-prefix-match table: {length: {masked prefix: Route}}."""

    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self._by_len: dict[int, dict[int, Route]] = {}
        self._lengths: list[int] = []
        for route in routes:
            self.add(route)

    def add(self, route: Route) -> None:
        if route.prefix & ~mask(route.length) & 0xFFFFFFFF:
            raise RouteError(f"route {route} has host bits set")
        table = self._by_len.setdefault(route.length, {})
        if route.prefix in table:
            raise RouteError(f"duplicate route for {ip_str(route.prefix)}/{route.length}")
        table[route.prefix] = route
        self._lengths = sorted(self._by_len, reverse=True)

    def remove(self, prefix: int, length: int) -> Route:
        route = self._by_len[length].pop(prefix)
        if not self._by_len[length]:
            del self._by_len[length]
            self._lengths = sorted(self._by_len, reverse=True)
        return route

    def lookup(self, addr: int) -> Route | None:
        """The most specific route containing `addr`, or None."""
        for length in self._lengths:
            route = self._by_len[length].get(addr & mask(length))
            if route is not None:
                return route
        return None

    def __contains__(self, key: tuple[int, int]) -> bool:
        prefix, length = key
        return prefix in self._by_len.get(length, {})

    def __iter__(self) -> Iterator[Route]:
        for length in sorted(self._by_len):
            yield from sorted(self._by_len[length].values())

    def __len__(self) -> int:
        return sum(len(t) for t in self._by_len.values())

    def length_histogram(self) -> dict[int, int]:
        return {length: len(self._by_len[length]) for length in sorted(self._by_len)}


BOM = "\ufeff"  # a UTF-8 byte-order mark some editors put first: not part of the first route


def parse_routes(text: str, source: str = "<routes>") -> list[Route]:
    """Parse route-file text; errors name source:line."""
    text = text.removeprefix(BOM)
    routes = []
    first_line: dict[tuple[int, int], int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        try:
            if len(fields) != 3:
                raise RouteError(f"expected 'PREFIX/LEN NEXTHOP_IP PORT', got {len(fields)} fields")
            prefix, length = parse_prefix(fields[0])
            try:
                next_hop = ip(fields[1])
            except ValueError as exc:
                raise RouteError(str(exc)) from None
            if not fields[2].isdigit():
                raise RouteError(f"port {fields[2]!r} is not a non-negative integer")
            if (prefix, length) in first_line:  # two next hops for one prefix: ambiguous
                raise RouteError(f"duplicate route for {fields[0]} (first on line "
                                 f"{first_line[(prefix, length)]})")
            first_line[(prefix, length)] = lineno
            routes.append(Route(prefix, length, next_hop, int(fields[2])))
        except RouteError as exc:
            raise RouteError(f"{source}:{lineno}: {exc}") from None
    return routes


ROUTE_FILE_LIMIT = 256 << 20  # bytes: a few million routes
# random tables (`npk traffic routes --count`): 5 M lines of at most 41 bytes
# ("255.255.255.255/32 255.255.255.255 65535") stay inside the route-file limit
MAX_RANDOM_ROUTES = 5_000_000


def read_route_file(path: str | Path, error: type[Exception] = RouteError) -> str:
    """The text of a route file: UTF-8, at most ROUTE_FILE_LIMIT bytes, no NUL byte
    (`/dev/zero` or a binary file is an error naming the file, found at once)."""
    from npkit.asm.base.reading import read_text

    return read_text(path, limit=ROUTE_FILE_LIMIT, error=error, what="route file")


def load_routes(path: str | Path) -> list[Route]:
    return parse_routes(read_route_file(path), str(path))


class RouteColumns(Sequence[Route]):
    """Routes as four flat arrays (prefix, length, next hop, port); `Route`s on access."""

    def __init__(self, prefix: array[int] | None = None, length: array[int] | None = None,
                 next_hop: array[int] | None = None, port: array[int] | None = None) -> None:  # fmt: skip
        self.prefix = prefix if prefix is not None else array("I")
        self.length = length if length is not None else array("B")
        self.next_hop = next_hop if next_hop is not None else array("I")
        self.port = port if port is not None else array("I")

    @classmethod
    def of(cls, routes: Iterable[Route]) -> RouteColumns:
        cols = cls()
        for r in routes:
            cols.append(r)
        return cols

    def append(self, r: Route) -> None:
        self.prefix.append(r.prefix)
        self.length.append(r.length)
        self.next_hop.append(r.next_hop)
        self.port.append(r.port)

    def extend(self, other: RouteColumns) -> None:
        self.prefix.extend(other.prefix)
        self.length.extend(other.length)
        self.next_hop.extend(other.next_hop)
        self.port.extend(other.port)

    def __len__(self) -> int:
        return len(self.prefix)

    @overload
    def __getitem__(self, i: int) -> Route: ...
    @overload
    def __getitem__(self, i: slice) -> list[Route]: ...
    def __getitem__(self, i: int | slice) -> Route | list[Route]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return Route(self.prefix[i], self.length[i], self.next_hop[i], self.port[i])

    def __iter__(self) -> Iterator[Route]:
        return map(Route, self.prefix, self.length, self.next_hop, self.port)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RouteColumns):
            return (self.prefix, self.length, self.next_hop, self.port) == (
                other.prefix, other.length, other.next_hop, other.port)  # fmt: skip
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def parse_route_columns(text: str | bytes, source: str = "<routes>") -> RouteColumns:
    """`parse_routes` as columns: the C parser when the text is plain; anything else
    (every error among it) goes to `parse_routes`, which says what is wrong."""
    raw = (text.encode() if isinstance(text, str) else text).removeprefix(BOM.encode())
    from npkit.emulator.pktlib import lib

    ffi, c = lib()
    cap = raw.count(b"\n") + 1
    cols = RouteColumns(array("I", bytes(4 * cap)), array("B", bytes(cap)), array("I", bytes(4 * cap)),
                        array("I", bytes(4 * cap)))  # fmt: skip
    n = c.npk_routes_parse(ffi.from_buffer(raw), len(raw), cap, ffi.from_buffer("uint32_t[]", cols.prefix),
                           ffi.from_buffer("uint8_t[]", cols.length), ffi.from_buffer("uint32_t[]", cols.next_hop),
                           ffi.from_buffer("uint32_t[]", cols.port))  # fmt: skip
    if n < 0:
        from npkit.asm.base.reading import decode_text

        return RouteColumns.of(parse_routes(decode_text(raw, source, error=RouteError, what="route file"), source))
    for a in (cols.prefix, cols.length, cols.next_hop, cols.port):
        del a[n:]
    return cols


_COLUMNS_MEMO: dict[tuple[str, int, int, int], RouteColumns] = {}


def load_route_columns(path: str | Path) -> RouteColumns:
    """The routes of a file, parsed once per process (per path, size and mtime): the
    linker, the LPM builder, the oracle and the generator all get the same columns.
    Treat them as read-only."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    cols = _COLUMNS_MEMO.get(key)
    if cols is None:
        from npkit.asm.base.reading import (
            read_bytes,  # bounded; a NUL byte (/dev/zero) stops it at once
        )

        data = read_bytes(path, limit=ROUTE_FILE_LIMIT, error=RouteError, what="route file", text=True)
        cols = parse_route_columns(data, str(path))
        if len(_COLUMNS_MEMO) > 8:
            _COLUMNS_MEMO.clear()
        _COLUMNS_MEMO[key] = cols
    return cols


class RouteIndex:
    """Longest-prefix match over `RouteColumns`: the route set as sorted disjoint address
    intervals (at most 2n + 1), each naming its longest route; a lookup is a binary search
    in C.  `lookup` returns the route's index in the columns, or -1.  Duplicate
    (prefix, length) pairs are an error, as in `RouteTable`."""

    def __init__(self, routes: RouteColumns) -> None:
        from npkit.emulator.pktlib import lib

        self.routes = routes
        self.ffi, self.lib = lib()
        n = len(routes)
        ffi = self.ffi
        self.starts = ffi.new("uint32_t[]", 2 * n + 1)
        self.vals = ffi.new("int32_t[]", 2 * n + 1)
        dup = ffi.new("uint32_t[2]")
        count = self.lib.npk_rt_build(n, ffi.from_buffer("uint32_t[]", routes.prefix),
                                      ffi.from_buffer("uint8_t[]", routes.length), self.starts, self.vals, dup)  # fmt: skip
        if count == -1:
            r = routes[dup[0]]
            raise RouteError(f"duplicate route for {ip_str(r.prefix)}/{r.length}")
        if count < 0:
            bad = next(r for r in routes if r.length > 32 or r.prefix & ~mask(r.length) & 0xFFFFFFFF)
            raise RouteError(f"route {bad} has host bits set")
        self.count = int(count)
        self.next_hop = ffi.from_buffer("uint32_t[]", routes.next_hop)
        self._port16 = array("H", routes.port)
        self.port = ffi.from_buffer("uint16_t[]", self._port16)

    def lookup(self, addr: int) -> int:
        return int(self.lib.npk_rt_lookup(self.starts, self.vals, self.count, addr))

    def route(self, addr: int) -> Route | None:
        i = self.lookup(addr)
        return None if i < 0 else self.routes[i]

    def c_routes(self) -> Any:
        """An npk_routes (cdata) over this index, for the generator and the oracle."""
        r = self.ffi.new("npk_routes *")
        r.starts, r.vals, r.count = self.starts, self.vals, self.count
        r.next_hop, r.port = self.next_hop, self.port
        return r


def format_routes(routes: Iterable[Route], header: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [
        f"{ip_str(r.prefix) + '/' + str(r.length):<19} {ip_str(r.next_hop):<15} {r.port}"
        for r in routes
    ]
    return "\n".join(lines) + "\n"


def write_routes(path: str | Path, routes: Iterable[Route], header: str = "") -> None:
    Path(path).write_text(format_routes(routes, header))


# ---------------------------------------------------------------------------- random tables

# RFC 6890 special-purpose blocks (and multicast/reserved): never generated.
RESERVED_BLOCKS: tuple[tuple[int, int], ...] = tuple(
    parse_prefix(p)
    for p in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)

# Share of each prefix length, roughly the shape of a global BGP table.
LENGTH_WEIGHTS: dict[int, float] = {
    8: 0.002, 10: 0.002, 12: 0.005, 13: 0.005, 14: 0.01, 15: 0.01, 16: 0.03,
    17: 0.015, 18: 0.025, 19: 0.04, 20: 0.05, 21: 0.06, 22: 0.12, 23: 0.10, 24: 0.526,
}  # fmt: skip


# The shape of the global IPv4 BGP table (about 1,000,000 prefixes): mostly /24, the
# /22-/23 and /16-/21 bands, a few short prefixes, and some /28 and /32 more-specifics
# (`npk traffic routes --lengths bgp`; npkit.toolchain.router.stats measures tables with it).
BGP_LENGTHS: dict[int, float] = {
    8: 0.002, 10: 0.002, 12: 0.005, 13: 0.005, 14: 0.01, 15: 0.01, 16: 0.03,
    17: 0.015, 18: 0.025, 19: 0.04, 20: 0.05, 21: 0.06, 22: 0.12, 23: 0.10, 24: 0.516,
    28: 0.005, 32: 0.005,
}  # fmt: skip


def overlaps(prefix: int, length: int, other: int, other_len: int) -> bool:
    shorter = min(length, other_len)
    return (prefix & mask(shorter)) == (other & mask(shorter))


# the reserved blocks as sorted, merged address intervals [start, end)
_RESERVED_SPANS: list[tuple[int, int]] = []
for _p, _n in sorted(RESERVED_BLOCKS):
    _e = _p + (1 << (32 - _n))
    if _RESERVED_SPANS and _p <= _RESERVED_SPANS[-1][1]:
        _RESERVED_SPANS[-1] = (_RESERVED_SPANS[-1][0], max(_RESERVED_SPANS[-1][1], _e))
    else:
        _RESERVED_SPANS.append((_p, _e))
_RESERVED_STARTS = [a for a, _ in _RESERVED_SPANS]


def is_reserved(prefix: int, length: int) -> bool:
    """Whether the prefix overlaps a special-use block (CIDR blocks overlap exactly when
    their address ranges intersect)."""
    end = prefix + (1 << (32 - length))
    k = bisect.bisect_right(_RESERVED_STARTS, prefix) - 1
    if k >= 0 and _RESERVED_SPANS[k][1] > prefix:
        return True
    return k + 1 < len(_RESERVED_STARTS) and _RESERVED_STARTS[k + 1] < end


def random_routes(
    count: int,
    seed: int,
    next_hops: list[tuple[int, int]],
    length_weights: dict[int, float] | None = None,
) -> RouteColumns:
    """`count` distinct random routes, deterministic for `seed`.

    `next_hops` is a list of (next_hop_ip, port) to choose from uniformly (typically
    every ARP entry of the router config that lies on one of its port subnets).
    """
    if not 0 <= count <= MAX_RANDOM_ROUTES:
        raise RouteError(f"count must be in 0..{MAX_RANDOM_ROUTES:,} (a route file of at most "
                         f"{ROUTE_FILE_LIMIT >> 20} MB), got {count}")
    if not next_hops:
        raise RouteError("need at least one (next hop, port) pair: the router config has no ARP entry "
                         "on a port subnet")
    weights = length_weights or LENGTH_WEIGHTS
    lengths = list(weights)
    # what rng.choices(lengths, weights) draws, without rebuilding the sums each time
    cum = list(itertools.accumulate(weights.values()))
    total = cum[-1] + 0.0
    hi = len(cum) - 1
    rng = random.Random(f"npkit-routes:{seed}")
    rand, bits, below = rng.random, rng.getrandbits, rng.randrange
    seen: set[int] = set()
    routes = RouteColumns()
    nhops = len(next_hops)
    attempts = 0
    while len(routes) < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(f"could not find {count} distinct prefixes (got {len(routes)})")
        length = lengths[bisect.bisect(cum, rand() * total, 0, hi)]
        prefix = bits(32) & mask(length)
        key = prefix << 6 | length
        if key in seen or is_reserved(prefix, length):
            continue
        seen.add(key)
        hop, port = next_hops[below(nhops)]
        routes.prefix.append(prefix)
        routes.length.append(length)
        routes.next_hop.append(hop)
        routes.port.append(port)
    return routes


# ---- routes against a router's ports (router_schema checks a config's own routes with these)


# Destinations the fast path never forwards (microcode/reasons.yaml: martian_dst, and
# multicast goes to the exception path): a route inside one would never be used.
NEVER_FORWARDED: tuple[tuple[int, int, str], ...] = (
    (0x00000000, 8, "network 0"),
    (0x7F000000, 8, "loopback"),
    (0xE0000000, 4, "multicast"),
    (0xF0000000, 4, "reserved, class E"),
)


def _port_facts(ports: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], dict[tuple[int, int], int], dict[int, str]]:
    nets = [(a & mask(n), n) for a, n in ports]
    connected = {net: i for i, net in enumerate(nets)}
    own = {}
    for i, ((addr, _), (net, n)) in enumerate(zip(ports, nets, strict=True)):
        own[addr] = f"port {i}'s own address"
        own[net | (~mask(n) & 0xFFFFFFFF)] = f"port {i}'s subnet broadcast address"
    own[0xFFFFFFFF] = "the limited broadcast address"
    return nets, connected, own


def route_problem(ports: list[tuple[int, int]], route: Any) -> str | None:
    """What is wrong with one route (prefix, length, next_hop, port) for the ports
    ((address, prefix length) each), or None.  The rules every route meets whichever way
    it arrives; the control daemon has them in C (xscale/npkd/rcheck.c, the same
    messages: tests/xscale/test_route_rules.py)."""
    return _route_problem(route, *_port_facts(ports))


CHANGE_MIN_LEN = 4  # xscale/npkd/rcheck.h NPKD_CHANGE_MIN_LEN


def change_problem(prefix: int, length: int) -> str | None:
    """What is wrong with changing this prefix while the router runs (a timed change, `npk
    route add|del`), or None: a prefix shorter than /4 rewrites up to 65,536 root entries
    of the trie in one go (xscale/npkd/rcheck.c npkd_change_problem, the same message)."""
    if length >= CHANGE_MIN_LEN:
        return None
    return (f"{ip_str(prefix)}/{length} is shorter than /{CHANGE_MIN_LEN}: changed while the router runs it "
            f"would rewrite {1 << (16 - length)} of the 65536 root entries at once and hold up the exception "
            "path; put it in the route table")


def route_problems(ports: list[tuple[int, int]], routes: Iterable[Any]) -> Iterator[tuple[int, str]]:
    """(index, problem) of each static route (prefix, length, next_hop, port) that
    contradicts the ports ((address, prefix length) each, index = position)."""
    nets, connected, own = _port_facts(ports)
    if isinstance(routes, RouteColumns) and _columns_clean(routes, nets, connected, own):
        return
    for k, r in enumerate(routes):
        problem = _route_problem(r, nets, connected, own)
        if problem is not None:
            yield k, f"route {ip_str(r.prefix)}/{r.length} {ip_str(r.next_hop)} {r.port}: {problem}"


def route_line(path: str | Path, index: int) -> int | None:
    """The line of file `path` that holds its `index`-th route (counting from 0), or None."""
    n = -1
    for lineno, raw in enumerate(read_route_file(path).removeprefix(BOM).splitlines(), 1):
        if raw.split("#", 1)[0].strip():
            n += 1
            if n == index:
                return lineno
    return None


def check_route_file(ports: list[tuple[int, int]], routes: Iterable[Any], path: str | Path) -> None:
    """The check a route file given apart from a router config meets (`npk link --routes`,
    `npk demo --routes`, `npk route --config`), as the config's own route file does: the
    first route that contradicts `ports` (route_problems) is a RouteError `path:line: ...`."""
    for k, problem in route_problems(ports, routes):
        line = route_line(path, k)
        raise RouteError(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


def _columns_clean(cols: RouteColumns, nets: list[tuple[int, int]], connected: dict[tuple[int, int], int],
                   own: dict[int, str]) -> bool:  # fmt: skip
    """True when no route of `cols` has a problem `_route_problem` would find, decided
    over the distinct values of each column (set operations in C) instead of route by
    route: a table of 10,000 routes is checked in a fifth of the time.  False says only
    that some route may have one; the routes are then checked one by one."""
    if any(not 0 <= port < len(nets) for port in set(cols.port)):
        return False
    if not connected.keys().isdisjoint(zip(cols.prefix, cols.length, strict=True)):
        return False
    if not own.keys().isdisjoint(cols.prefix):  # a /32 route to one of them (or a shorter one: checked again)
        return False
    first = cols.prefix.tobytes()[3 if sys.byteorder == "little" else 0 :: 4]   # each prefix's first octet
    if max(first, default=0) >= 0xE0 or first.count(127) or first.count(0) > cols.length.tobytes().count(0):
        return False                            # maybe inside a block never forwarded to (or 0/N, N < 8)
    return all(_route_problem(Route(0, 0, hop, port), nets, {}, own) is None
               for hop, port in set(zip(cols.next_hop, cols.port, strict=True)))  # fmt: skip


def _route_problem(r: Any, nets: list[tuple[int, int]], connected: dict[tuple[int, int], int],
                   own: dict[int, str]) -> str | None:  # fmt: skip
    """What is wrong with one route, or None (kept cheap: a million routes pass through)."""
    if not 0 <= r.port < len(nets):
        return f"port {r.port} does not exist (ports 0..{len(nets) - 1})"
    if (r.prefix, r.length) in connected:
        return f"repeats the connected subnet of port {connected[(r.prefix, r.length)]}"
    if r.length == 32 and r.prefix in own:
        return f"{ip_str(r.prefix)} is {own[r.prefix]}; the router answers it itself, so this route would never be used"
    for net, n, what in NEVER_FORWARDED:
        if r.length >= n and r.prefix & mask(n) == net:
            return (f"{ip_str(r.prefix)}/{r.length} lies in {ip_str(net)}/{n} ({what}), "
                    "which the router never forwards to")
    if r.next_hop:
        net, n = nets[r.port]
        if r.next_hop & mask(n) != net:
            return f"next hop {ip_str(r.next_hop)} is not on port {r.port}'s subnet {ip_str(net)}/{n}"
        if r.next_hop in own:
            return f"next hop {ip_str(r.next_hop)} is {own[r.next_hop]}"
    return None
