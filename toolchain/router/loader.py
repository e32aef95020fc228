"""Route file + router config -> the lookup's SRAM image (trie, next-hop table, header).

Route file: one route a line, `PREFIX/LEN NEXTHOP_IP PORT`, `#` comments: the format of
npkit.emulator.traffic.routes, whose parser `parse_routes` uses.

Router config (YAML, the format of examples/traffic/router.yaml): `ports` (list of
{address: A.B.C.D/LEN, mac: "xx:..."}, index = position), `arp` ({IPv4: MAC}).  Other
keys (routes, send_redirects, ...) are ignored here: the route file is given separately.

What goes into the trie besides the route file (LAYOUT.md §5):
- each port's subnet as a connected route: flags DIRECT|ARP_MISS (the next hop is the
  destination itself, whose MAC the fast path does not know);
- a /32 "adjacency" route for every ARP entry on a connected subnet whose longest match
  is that connected route: forwarded by the fast path with the host's MAC, flag DIRECT;
- a /32 per port address (LOCAL), per subnet broadcast address and 255.255.255.255
  (BROADCAST).
Static routes whose next hop has an ARP entry get its MAC; the others get ARP_MISS with
the next-hop address in the entry (so each unresolved next hop has its own entry).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .layout import LpmLayout, default_layout
from .lpm import Add, LpmTable, SramImage, Withdraw, Write, mask
from .nexthop import ARP_MISS, BROADCAST, DIRECT, LOCAL, NextHop, NextHopTable


class RouteFileError(ValueError):
    """A malformed route file or router config."""


@dataclass(frozen=True)
class RouteLine:
    prefix: int
    length: int
    next_hop: int  # 0 = directly connected
    port: int


def ip(text: str) -> int:
    try:
        return int(ipaddress.IPv4Address(text.strip()))
    except ValueError as exc:
        raise RouteFileError(f"bad IPv4 address {text!r}") from exc


def ip_str(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def parse_mac(text: str) -> bytes:
    parts = text.strip().split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise RouteFileError(f"bad MAC address {text!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError as exc:
        raise RouteFileError(f"bad MAC address {text!r}") from exc


def mac_str(value: bytes) -> str:
    return ":".join(f"{b:02x}" for b in value)


def parse_prefix(text: str) -> tuple[int, int]:
    addr, sep, length_text = text.partition("/")
    if not sep or not length_text.isdigit() or not 0 <= int(length_text) <= 32:
        raise RouteFileError(f"bad prefix {text!r} (want A.B.C.D/LEN, LEN 0..32)")
    prefix, length = ip(addr), int(length_text)
    if prefix & ~mask(length) & 0xFFFF_FFFF:
        raise RouteFileError(f"prefix {text} has host bits set")
    return prefix, length


def parse_routes(text: str, source: str = "<routes>") -> list[RouteLine]:
    """Parse route-file text with the project's one parser (npkit.emulator.traffic.routes)."""
    from npkit.emulator.traffic import routes as project_routes

    try:
        parsed = project_routes.parse_routes(text, source)
    except ValueError as exc:
        raise RouteFileError(str(exc)) from None
    return [RouteLine(r.prefix, r.length, r.next_hop, r.port) for r in parsed]


def load_routes(path: str | Path) -> list[RouteLine]:
    from npkit.emulator.traffic.routes import read_route_file

    return parse_routes(read_route_file(path, RouteFileError), str(path))


@dataclass(frozen=True)
class Port:
    index: int
    address: int
    length: int
    mac: bytes

    @property
    def network(self) -> int:
        return self.address & mask(self.length)

    @property
    def broadcast(self) -> int:
        return self.network | (~mask(self.length) & 0xFFFF_FFFF)

    def on_subnet(self, addr: int) -> bool:
        return addr & mask(self.length) == self.network


@dataclass
class RouterInfo:
    ports: list[Port] = field(default_factory=list)
    arp: dict[int, bytes] = field(default_factory=dict)


def parse_config(data: Any, source: str = "<config>", base_dir: Path | None = None) -> RouterInfo:
    """Ports and ARP table of a router config, read and checked by the project's one
    reader (npkit.emulator.traffic.router_config)."""
    from npkit.emulator.traffic.router_config import RouterConfig

    if isinstance(data, dict):  # the route file is given separately: do not load the config's
        data = {k: v for k, v in data.items() if k != "routes"}
    try:
        cfg = RouterConfig.from_dict(data, base_dir=base_dir, source=Path(source))
    except (ValueError, OSError) as exc:
        raise RouteFileError(str(exc)) from None
    return RouterInfo([Port(p.index, p.address, p.prefix_len, p.mac) for p in cfg.ports], dict(cfg.arp))


def load_config(path: str | Path) -> RouterInfo:
    from npkit.asm.base.schema import load_yaml

    path = Path(path)
    return parse_config(load_yaml(path, error=RouteFileError, what="router config").data, str(path), path.parent)


@dataclass
class RouterTables:
    """The built lookup state: trie, next-hop table, and what each entry came from."""

    table: LpmTable
    nexthops: NextHopTable
    next_hop_ip: dict[int, int]  # next-hop index -> next-hop IPv4 (0 = direct / none)
    image: SramImage
    config: RouterInfo = field(default_factory=RouterInfo)

    def add_route(self, route: RouteLine) -> list[Write]:
        """Add or replace a route while the fast path runs: the ordered SRAM writes.

        A next-hop entry the table did not have is written first (all 4 LW), then the
        trie writes that publish the route (LAYOUT.md §7, rule 5).  Adjacency /32s are
        not re-derived here (the daemon adds them as ARP entries appear).
        """
        if self.config.ports and route.port not in {p.index for p in self.config.ports}:
            raise RouteFileError(f"route {ip_str(route.prefix)}/{route.length}: no port {route.port}")
        known = len(self.nexthops)
        index = self.nexthops.intern(route_entry(route, self.config))
        out: list[Write] = []
        if index == known:  # new entry: write it before anything can point at it
            base = self.table.layout.nh_addr(index)
            out = [(base + 4 * i, w) for i, w in enumerate(self.nexthops.entries[index].encode())]
            self.image.apply(out)
            self.next_hop_ip[index] = route.next_hop
        return out + self.table.apply(Add(route.prefix, route.length, index))

    def withdraw_route(self, prefix: int, length: int) -> list[Write]:
        """Remove a route: the ordered SRAM writes (next-hop entries are left in place)."""
        return self.table.apply(Withdraw(prefix, length))

    def describe(self, index: int | None) -> dict[str, Any]:
        entry = self.nexthops.entries[index or 0]
        return {
            "index": index or 0,
            "port": entry.port,
            "next_hop": ip_str(self.next_hop_ip.get(index or 0, 0)),
            "dst_mac": mac_str(entry.dst_mac),
            "src_mac": mac_str(entry.src_mac),
            "flags": entry.flag_names(),
        }


def route_entry(r: RouteLine, config: RouterInfo) -> NextHop:
    """The next-hop entry of a route-file route under `config`'s ports and ARP table."""
    src = next((p.mac for p in config.ports if p.index == r.port), bytes(6))
    if r.next_hop == 0:
        return NextHop(r.port, src_mac=src, flags=DIRECT | ARP_MISS)
    hw = config.arp.get(r.next_hop)
    if hw is None:
        return NextHop(r.port, src_mac=src, flags=ARP_MISS, next_hop=r.next_hop)
    return NextHop(r.port, dst_mac=hw, src_mac=src)


def build_tables(
    routes: list[RouteLine], config: RouterInfo | None = None, layout: LpmLayout | None = None
) -> RouterTables:
    """Fill the trie and next-hop table from routes + config and lay out the SRAM image."""
    layout = layout or default_layout()
    config = config or RouterInfo()
    ports = {p.index: p for p in config.ports}
    nht = NextHopTable(layout.nh_capacity)
    table = LpmTable(layout)
    hop_ip: dict[int, int] = {}

    def put(prefix: int, length: int, entry: NextHop, via: int, replace: bool = False) -> None:
        if table.get(prefix, length) is not None and not replace:
            raise RouteFileError(f"duplicate route {ip_str(prefix)}/{length}")
        index = nht.intern(entry)
        hop_ip.setdefault(index, via)
        table.add(prefix, length, index)

    if ports:
        for r in routes:
            if r.port not in ports:
                raise RouteFileError(f"route {ip_str(r.prefix)}/{r.length}: no port {r.port}")
    for p in config.ports:
        put(p.network, p.length, NextHop(p.index, src_mac=p.mac, flags=DIRECT | ARP_MISS), 0)
    for r in routes:
        put(r.prefix, r.length, route_entry(r, config), r.next_hop)
    for host, hw in sorted(config.arp.items()):
        for p in config.ports:
            if p.on_subnet(host) and host not in (p.address, p.network, p.broadcast):
                if table.match_reference(host) == (p.network, p.length):
                    put(host, 32, NextHop(p.index, hw, p.mac, DIRECT), host)
    for p in config.ports:
        put(p.address, 32, NextHop(p.index, src_mac=p.mac, flags=LOCAL), 0, replace=True)
        put(p.broadcast, 32, NextHop(p.index, src_mac=p.mac, flags=BROADCAST), 0, replace=True)
    if config.ports:
        put(0xFFFF_FFFF, 32, NextHop(0, flags=BROADCAST), 0, replace=True)
    image = table.build()
    image.apply(nht.writes(layout.nh_base))
    return RouterTables(table, nht, hop_ip, image, config)


def sram_runs(routes: Any, config: RouterInfo | None = None, layout: LpmLayout | None = None) -> list[tuple[int, bytes]]:
    """What `build_tables(routes, config, layout).image.runs()` holds, as (start address,
    big-endian bytes), built in one pass in C (npk_lpm_build): the same trie, next-hop
    table and control block, for tables of any size (a 1,000,000-prefix table in
    seconds).  `routes`: RouteColumns (npkit.emulator.traffic.routes), or RouteLines."""
    from array import array

    from npkit.emulator.pktlib import lib
    from npkit.emulator.traffic.routes import RouteColumns, RouteIndex

    from . import layout as L

    layout = layout or default_layout()
    config = config or RouterInfo()
    cols = routes if isinstance(routes, RouteColumns) else RouteColumns.of(routes)  # type: ignore[arg-type]
    ports = {p.index: p for p in config.ports}
    if ports:
        bad = next((i for i, port in enumerate(cols.port) if port not in ports), None)
        if bad is not None:
            r = cols[bad]
            raise RouteFileError(f"route {ip_str(r.prefix)}/{r.length}: no port {r.port}")
    nht = NextHopTable(layout.nh_capacity)
    # the route set in build_tables' order: connected subnets, the routes, adjacencies, then
    # the port addresses and broadcasts (which replace a route of the same prefix)
    prefix, length, nh = array("I"), array("B"), array("H")
    keys: dict[tuple[int, int], int] = {}

    def put(p: int, n: int, entry: NextHop, replace: bool = False) -> None:
        k = keys.get((p, n))
        if k is not None and not replace:
            raise RouteFileError(f"duplicate route {ip_str(p)}/{n}")
        index = nht.intern(entry)
        if k is None:
            keys[(p, n)] = len(prefix)
            prefix.append(p)
            length.append(n)
            nh.append(index)
        else:
            nh[k] = index

    for port in config.ports:
        put(port.network, port.length, NextHop(port.index, src_mac=port.mac, flags=DIRECT | ARP_MISS))
    first_static = len(prefix)
    entries: dict[tuple[int, int], int] = {}
    route_nh = array("H", bytes(2 * len(cols)))
    for i, pair in enumerate(zip(cols.port, cols.next_hop, strict=True)):
        index = entries.get(pair)
        if index is None:
            index = entries[pair] = nht.intern(route_entry(RouteLine(0, 0, pair[1], pair[0]), config))
        route_nh[i] = index
    prefix.extend(cols.prefix)
    length.extend(cols.length)
    nh.extend(route_nh)
    # duplicates among connected + static routes: the C index finds them
    everything = RouteColumns(array("I", prefix), array("B", length), array("I", bytes(4 * len(prefix))),
                              array("I", bytes(4 * len(prefix))))  # fmt: skip
    try:
        index_all = RouteIndex(everything)
    except ValueError as exc:
        raise RouteFileError(str(exc).replace("duplicate route for", "duplicate route")) from None
    for i in range(first_static, len(prefix)):  # later puts are /32s: they meet only /32s
        if length[i] == 32:
            keys.setdefault((prefix[i], 32), i)
    for host, hw in sorted(config.arp.items()):
        for port in config.ports:
            if port.on_subnet(host) and host not in (port.address, port.network, port.broadcast):
                best = index_all.lookup(host)
                if best >= 0 and (everything.prefix[best], everything.length[best]) == (port.network, port.length):
                    put(host, 32, NextHop(port.index, hw, port.mac, DIRECT))
    for port in config.ports:
        put(port.address, 32, NextHop(port.index, src_mac=port.mac, flags=LOCAL), replace=True)
        put(port.broadcast, 32, NextHop(port.index, src_mac=port.mac, flags=BROADCAST), replace=True)
    if config.ports:
        put(0xFFFF_FFFF, 32, NextHop(0, flags=BROADCAST), replace=True)

    ffi, c = lib()
    root = ffi.new("uint32_t[]", L.ROOT_ENTRIES)
    cap = layout.node_bytes // 4
    nodes = ffi.new_allocator(should_clear_after_alloc=False)("uint32_t[]", cap)  # written up to the high-water mark
    hw = ffi.new("uint64_t *")
    rc = c.npk_lpm_build(len(prefix), ffi.from_buffer("uint32_t[]", prefix), ffi.from_buffer("uint8_t[]", length),
                         ffi.from_buffer("uint16_t[]", nh), root, nodes, cap, hw)  # fmt: skip
    if rc == -1:
        raise MemoryError(f"LPM node pool full ({layout.node_bytes} bytes); enlarge lpm_nodes")
    if rc:
        raise RouteFileError("the LPM build refused the route set")

    def be(words: Any, n: int) -> bytes:
        c.npk_words_to_be(words, n)
        return bytes(ffi.buffer(words, 4 * n))

    nh_words = array("I", [w for e in nht.entries for w in e.encode()])
    segments = [(layout.ctl_base, be(ffi.new("uint32_t[]", [L.CTL_MAGIC, L.CTL_VERSION, 0, hw[0]]), 4)),
                (layout.root_base, be(root, L.ROOT_ENTRIES)),
                (layout.nh_base, be(ffi.from_buffer("uint32_t[]", nh_words), len(nh_words))),
                (layout.node_base, be(nodes, 4 * hw[0]))]  # fmt: skip
    runs: list[tuple[int, bytes]] = []
    for start, data in sorted(seg for seg in segments if seg[1]):
        if runs and runs[-1][0] + len(runs[-1][1]) == start:
            runs[-1] = (runs[-1][0], runs[-1][1] + data)
        else:
            runs.append((start, data))
    return runs


def build_from_files(
    routes_path: str | Path, config_path: str | Path | None = None,
    layout: LpmLayout | None = None,
) -> RouterTables:
    from npkit.emulator.traffic.routes import RouteError, check_route_file

    config = load_config(config_path) if config_path else None
    routes = load_routes(routes_path)
    if config is not None:  # the checks `npk link --routes` makes, with the file's line
        try:
            check_route_file([(p.address, p.length) for p in config.ports], routes, routes_path)
        except (RouteError, OSError) as exc:
            raise RouteFileError(str(exc)) from None
    return build_tables(routes, config, layout)
