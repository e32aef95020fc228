"""The router's configuration: ports, ARP table, routes (YAML).

Why a file of its own: the oracle, the generator, the comparator, the emulator's
loader and the XScale daemon all need the same facts about the router, so they read
the same file. Example (`examples/traffic/router.yaml`)::

    ports:                          # port index = position in this list (0..N-1)
      - {address: 10.0.0.1/24, mac: "02:00:00:00:00:00"}
      - {address: 10.0.1.1/24, mac: "02:00:00:00:00:01"}
    arp:                            # next-hop (or on-link host) IPv4 -> MAC
      10.0.0.2: "02:00:00:00:f0:02"
      10.0.1.2: "02:00:00:00:f1:02"
    routes: routes.txt              # route file (relative to this YAML), or a list
                                    # of "PREFIX/LEN NEXTHOP PORT" strings
    send_redirects: true            # RFC 1812 5.2.7.2 / 4.3.3.2 (default true)

Each port's subnet is also a *connected route* (next hop 0.0.0.0 = on-link, out of
that port); the route file must not repeat a connected prefix. Checks made on load,
because a wrong config otherwise shows up as puzzling packet outcomes: port addresses
are unicast host addresses of their subnet, subnets do not overlap, MACs are unicast and
distinct, route ports exist, and a route's next hop lies on its output port's subnet.

Tables of any size: the static routes are `RouteColumns` (flat arrays), `lookup` is the
C longest-prefix match of `RouteIndex` over the connected and static routes, and the
dict-based `RouteTable` (`routes`) is built only when asked for.  `RouterConfig.load`
reads and checks a file once per process (the linker, the oracle, the generator and the
harness share the result: treat it as read-only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from .packet import ip, ip_str, is_group_mac, mac, mac_str
from .routes import (
    Route,
    RouteColumns,
    RouteError,
    RouteIndex,
    RouteTable,
    load_route_columns,
    mask,
    parse_prefix,
    parse_route_columns,
)


class ConfigError(ValueError):
    """An invalid router configuration, naming the file and the offending entry."""


@dataclass(frozen=True)
class PortConfig:
    index: int
    address: int
    prefix_len: int
    mac: bytes

    @cached_property
    def netmask(self) -> int:
        return mask(self.prefix_len)

    @cached_property
    def network(self) -> int:
        return self.address & self.netmask

    @cached_property
    def broadcast(self) -> int:
        return self.network | (~self.netmask & 0xFFFFFFFF)

    def on_subnet(self, addr: int) -> bool:
        return (addr & self.netmask) == self.network

    def __str__(self) -> str:
        return f"port {self.index}: {ip_str(self.address)}/{self.prefix_len} {mac_str(self.mac)}"


@dataclass(eq=False)
class RouterConfig:
    ports: list[PortConfig]
    arp: dict[int, bytes]
    static_routes: Sequence[Route]
    send_redirects: bool = True
    route_file: Path | None = None
    source: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.static_routes, RouteColumns):
            self.static_routes = RouteColumns.of(self.static_routes)
        self.validate()

    @cached_property
    def all_routes(self) -> RouteColumns:
        """Connected routes, then the static ones (what `index` numbers)."""
        cols = RouteColumns.of(self.connected_routes())
        assert isinstance(self.static_routes, RouteColumns)
        cols.extend(self.static_routes)
        return cols

    @cached_property
    def index(self) -> RouteIndex:
        """Longest-prefix match over the connected and static routes (C)."""
        return RouteIndex(self.all_routes)

    def lookup(self, addr: int) -> Route | None:
        """The most specific route containing `addr`, or None."""
        return self.index.route(addr)

    @cached_property
    def routes(self) -> RouteTable:
        """The reference table (one dict per prefix length), built on first use."""
        return RouteTable(self.all_routes)

    # -- derived facts

    def connected_routes(self) -> list[Route]:
        return [Route(p.network, p.prefix_len, 0, p.index) for p in self.ports]

    @property
    def addresses(self) -> dict[int, int]:
        """Router's own IPv4 addresses -> port index."""
        return {p.address: p.index for p in self.ports}

    def port_for_subnet(self, addr: int) -> PortConfig | None:
        for port in self.ports:
            if port.on_subnet(addr):
                return port
        return None

    def next_hops(self) -> list[tuple[int, int]]:
        """(ARP-resolvable next hop, port) pairs: what random routes may point at."""
        pairs = []
        for addr in sorted(self.arp):
            port = self.port_for_subnet(addr)
            if port is not None and addr != port.address:
                pairs.append((addr, port.index))
        return pairs

    # -- checks

    def _fail(self, message: str) -> ConfigError:
        where = f"{self.source}: " if self.source else ""
        return ConfigError(where + message)

    def validate(self) -> None:
        if not self.ports:
            raise self._fail("no ports")
        macs: set[bytes] = set()
        for p in self.ports:
            if is_group_mac(p.mac):
                raise self._fail(f"{p}: MAC must be unicast (I/G bit clear)")
            if p.mac in macs:
                raise self._fail(f"{p}: MAC used by another port")
            macs.add(p.mac)
            if p.prefix_len > 30:
                raise self._fail(f"{p}: prefix length must be <= 30")
            if p.address in (p.network, p.broadcast):
                raise self._fail(f"{p}: address is the subnet's network or broadcast address")
            for q in self.ports[: p.index]:
                if q.on_subnet(p.network) or p.on_subnet(q.network):
                    raise self._fail(f"{p}: subnet overlaps {q}")
        for addr, hw in self.arp.items():
            if is_group_mac(hw):
                raise self._fail(f"arp {ip_str(addr)}: MAC {mac_str(hw)} is not unicast")
        connected = {(p.network, p.prefix_len) for p in self.ports}
        cols = self.static_routes
        assert isinstance(cols, RouteColumns)
        # one check per distinct (port, next hop) and per connected prefix, then the first
        # offending route in file order (the same message as checking route by route)
        nports = len(self.ports)
        bad_pairs = {(port, hop) for port, hop in set(zip(cols.port, cols.next_hop, strict=True))
                     if not 0 <= port < nports or (hop and not self.ports[port].on_subnet(hop))}  # fmt: skip
        n = len(cols)
        first_conn = next((i for i, key in enumerate(zip(cols.prefix, cols.length, strict=True))
                           if key in connected), n)  # fmt: skip
        first_pair = next((i for i, pair in enumerate(zip(cols.port, cols.next_hop, strict=True))
                           if pair in bad_pairs), n) if bad_pairs else n  # fmt: skip
        if min(first_pair, first_conn) < n:
            r = cols[min(first_pair, first_conn)]
            if not 0 <= r.port < nports:
                raise self._fail(f"route {r}: port {r.port} does not exist")
            if (r.prefix, r.length) in connected:
                raise self._fail(f"route {r}: repeats the connected subnet of port {r.port}")
            raise self._fail(
                f"route {r}: next hop {ip_str(r.next_hop)} is not on port {r.port}'s "
                f"subnet {ip_str(self.ports[r.port].network)}/{self.ports[r.port].prefix_len}"
            )

    # -- (de)serialisation

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path | None = None,
                  source: Path | None = None) -> RouterConfig:
        where = f"{source}: " if source else ""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}top level must be a mapping")
        unknown = set(data) - {"ports", "arp", "routes", "send_redirects"}
        if unknown:
            raise ConfigError(f"{where}unknown keys: {', '.join(sorted(unknown))}")
        ports = []
        for i, entry in enumerate(data.get("ports") or []):
            try:
                addr, length = _address_with_prefix(str(entry["address"]))
                ports.append(PortConfig(i, addr, length, mac(str(entry["mac"]))))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{where}ports[{i}]: {exc}") from None
        arp = {}
        for key, value in (data.get("arp") or {}).items():
            try:
                arp[ip(str(key))] = mac(str(value))
            except ValueError as exc:
                raise ConfigError(f"{where}arp: {exc}") from None
        routes_spec = data.get("routes")
        route_file = None
        try:
            if routes_spec is None:
                static = RouteColumns()
            elif isinstance(routes_spec, str):
                route_file = Path(routes_spec)
                if base_dir is not None and not route_file.is_absolute():
                    route_file = base_dir / route_file
                static = load_route_columns(route_file)
            elif isinstance(routes_spec, list):
                static = parse_route_columns("\n".join(map(str, routes_spec)), f"{where}routes")
            else:
                raise ConfigError(f"{where}routes: a file name or a list of route lines")
        except (OSError, RouteError) as exc:
            raise ConfigError(f"{where}routes: {exc}") from None
        return cls(
            ports=ports,
            arp=arp,
            static_routes=static,
            send_redirects=bool(data.get("send_redirects", True)),
            route_file=route_file,
            source=source,
        )

    @classmethod
    def load(cls, path: str | Path) -> RouterConfig:
        """Read and check a router config (and its route file) once per process: the same
        object while neither file changes."""
        path = Path(path)
        try:
            key = _file_key(path)
            hit = _LOADED.get(key)
            if hit is not None and (hit.route_file is None or _LOADED_ROUTES.get(key) == _file_key(hit.route_file)):
                return hit
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        cfg = cls.from_dict(data, base_dir=path.parent, source=path)
        if len(_LOADED) > 8:
            _LOADED.clear()
        _LOADED[key] = cfg
        if cfg.route_file is not None:
            _LOADED_ROUTES[key] = _file_key(cfg.route_file)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {
            "ports": [
                {"address": f"{ip_str(p.address)}/{p.prefix_len}", "mac": mac_str(p.mac)}
                for p in self.ports
            ],
            "arp": {ip_str(a): mac_str(m) for a, m in sorted(self.arp.items())},
            "routes": str(self.route_file) if self.route_file else [str(r) for r in
                                                                    self.static_routes],
            "send_redirects": self.send_redirects,
        }


_LOADED: dict[tuple[str, int, int, int], RouterConfig] = {}
_LOADED_ROUTES: dict[tuple[str, int, int, int], tuple[str, int, int, int]] = {}


def _file_key(path: Path) -> tuple[str, int, int, int]:
    """The path as given (a config read through another spelling of its path keeps that
    spelling in `source` and `route_file`), and what changes when the file does."""
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _address_with_prefix(text: str) -> tuple[int, int]:
    addr_text, sep, len_text = text.partition("/")
    if not sep:
        raise ValueError(f"address {text!r} needs a /prefix length")
    _, length = parse_prefix(f"0.0.0.0/{len_text}")
    return ip(addr_text), length


def load_router_config(path: str | Path) -> RouterConfig:
    return RouterConfig.load(path)
