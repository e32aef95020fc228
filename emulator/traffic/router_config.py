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
that port); the route file must not repeat a connected prefix. The file's schema and
every check made on load (a wrong config otherwise shows up as puzzling packet
outcomes) are in router_schema.py; errors name the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from npkit.toolchain.schema import Located, load_yaml, validate

from .packet import ip_str, mac_str
from .router_schema import RouterConfigFile, route_problems
from .routes import Route, RouteError, RouteTable, load_routes, mask, parse_routes


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


@dataclass
class RouterConfig:
    ports: list[PortConfig]
    arp: dict[int, bytes]
    static_routes: list[Route]
    send_redirects: bool = True
    route_file: Path | None = None
    source: Path | None = None
    routes: RouteTable = field(init=False)

    def __post_init__(self) -> None:
        self.routes = RouteTable([*self.connected_routes(), *self.static_routes])

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

    def route_problems(self, routes: Iterable[Any]) -> list[str]:
        """What is wrong with `routes` (a route file given apart from the config) under
        these ports: the checks router_schema makes of the config's own routes."""
        return [p for _, p in route_problems([(q.address, q.prefix_len) for q in self.ports], routes)]

    def next_hops(self) -> list[tuple[int, int]]:
        """(ARP-resolvable next hop, port) pairs: what random routes may point at."""
        pairs = []
        for addr in sorted(self.arp):
            port = self.port_for_subnet(addr)
            if port is not None and addr != port.address:
                pairs.append((addr, port.index))
        return pairs

    # -- (de)serialisation

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path | None = None,
                  source: Path | None = None, located: Located | None = None) -> RouterConfig:
        """A config from parsed YAML, checked against its schema (router_schema.py); a
        route file named by `routes` is read relative to `base_dir`."""
        where = str(source) if source else "<router config>"
        model = validate(RouterConfigFile, data, where, located=located, error=ConfigError,
                         context={"base": base_dir})  # fmt: skip
        ports = [PortConfig(i, p.address[0], p.address[1], p.mac) for i, p in enumerate(model.ports)]
        route_file = None
        if isinstance(model.routes, list):
            static = parse_routes("\n".join(model.routes), f"{where}: routes")
        elif isinstance(model.routes, str):
            route_file = Path(model.routes)
            if base_dir is not None and not route_file.is_absolute():
                route_file = base_dir / route_file
            line = located.line(("routes",)) if located is not None else None
            at_routes = f"{where}:{line}: routes" if line else f"{where}: routes"
            try:
                static = load_routes(route_file)
            except (OSError, RouteError) as exc:
                raise ConfigError(f"{at_routes}: {exc}") from None
            for _, problem in route_problems([p.address for p in model.ports], static):
                raise ConfigError(f"{at_routes}: {route_file}: {problem}")
        else:
            static = []
        return cls(ports=ports, arp=dict(model.arp), static_routes=static, send_redirects=model.send_redirects,
                   route_file=route_file, source=source)  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> RouterConfig:
        path = Path(path)
        located = load_yaml(path, error=ConfigError, what="router config")
        return cls.from_dict(located.data, base_dir=path.parent, source=path, located=located)

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


def load_router_config(path: str | Path) -> RouterConfig:
    return RouterConfig.load(path)
