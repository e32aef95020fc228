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

Tables of any size: the static routes are `RouteColumns` (flat arrays), `lookup` is the
C longest-prefix match of `RouteIndex` over the connected and static routes, and the
dict-based `RouteTable` (`routes`) is built only when asked for.  `RouterConfig.load`
reads and checks a file once per process (the linker, the oracle, the generator and the
harness share the result: treat it as read-only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from npkit.asm.base.reading import Located, load_yaml

from .packet import ip_str, mac_str
from .routes import (
    Route,
    RouteColumns,
    RouteError,
    RouteIndex,
    RouteTable,
    check_route_file,
    load_route_columns,
    mask,
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

    # -- (de)serialisation

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path | None = None,
                  source: Path | None = None, located: Located | None = None) -> RouterConfig:
        """A config from parsed YAML, checked against its schema (router_schema.py); a
        route file named by `routes` is read relative to `base_dir`."""
        where = str(source) if source else "<router config>"
        return cls._build(_checked_fields(data, where, located, base_dir), base_dir, source, lambda: located)

    @classmethod
    def _build(cls, fields: dict[str, Any], base_dir: Path | None, source: Path | None,
               located: Callable[[], Located | None]) -> RouterConfig:  # fmt: skip
        """The config from its checked fields (`_checked_fields`): the static routes read
        and checked against the ports.  `located` gives the line map for an error."""
        where = str(source) if source else "<router config>"
        ports = [PortConfig(i, addr, length, mac) for i, (addr, length, mac) in enumerate(fields["ports"])]
        routes = fields["routes"]
        route_file = None
        if isinstance(routes, list):
            static = parse_route_columns("\n".join(routes), f"{where}: routes")
        elif isinstance(routes, str):
            route_file = Path(routes)
            if base_dir is not None and not route_file.is_absolute():
                route_file = base_dir / route_file

            def at_routes() -> str:
                loc = located()
                line = loc.line(("routes",)) if loc is not None else None
                return f"{where}:{line}: routes" if line else f"{where}: routes"

            try:
                static = load_route_columns(route_file)
                check_route_file([(p.address, p.prefix_len) for p in ports], static, route_file)
            except (OSError, RouteError) as exc:
                raise ConfigError(f"{at_routes()}: {exc}") from None
        else:
            static = RouteColumns()
        return cls(ports=ports, arp=fields["arp"], static_routes=static, send_redirects=fields["send_redirects"],
                   route_file=route_file, source=source)  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> RouterConfig:
        """Read and check a router config (and its route file) once per process: the same
        object while neither file changes.  The schema's part of the checks is cached
        (npkit.asm.base.cache.checked) while the file is unchanged."""
        from npkit.asm.base.cache import checked

        path = Path(path)
        try:
            key = _file_key(path)
        except OSError as exc:
            raise ConfigError(f"{path}: {exc.strerror or exc}") from None
        hit = _LOADED.get(key)
        if hit is not None and (hit.route_file is None or _LOADED_ROUTES.get(key) == _route_key(hit.route_file)):
            return hit

        def read() -> Located:
            return load_yaml(path, error=ConfigError, what="router config")

        def check() -> dict[str, Any]:
            located = read()
            return _checked_fields(located.data, str(path), located, path.parent)

        fields = checked("router-config/1", [str(path)], check)
        cfg = cls._build(fields, path.parent, path, read)
        if len(_LOADED) > 8:
            _LOADED.clear()
        _LOADED[key] = cfg
        if cfg.route_file is not None:
            _LOADED_ROUTES[key] = _route_key(cfg.route_file)
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
_LOADED_ROUTES: dict[tuple[str, int, int, int], tuple[str, int, int, int] | None] = {}


def _file_key(path: Path) -> tuple[str, int, int, int]:
    """The path as given (a config read through another spelling of its path keeps that
    spelling in `source` and `route_file`), and what changes when the file does."""
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _route_key(path: Path) -> tuple[str, int, int, int] | None:
    try:
        return _file_key(path)
    except OSError:
        return None


def _checked_fields(data: Any, where: str, located: Located | None, base_dir: Path | None) -> dict[str, Any]:
    """The config checked against its schema (router_schema.py), as plain data: ports as
    (address, prefix length, MAC), ARP, routes (a file name, a list of lines or None),
    send_redirects."""
    # the schema (and pydantic) only when the cache has no result for this config
    from npkit.asm.base.schema import validate

    from .router_schema import RouterConfigFile

    model = validate(RouterConfigFile, data, where, located=located, error=ConfigError,
                     context={"base": base_dir})  # fmt: skip
    return {"ports": [(p.address[0], p.address[1], p.mac) for p in model.ports], "arp": dict(model.arp),
            "routes": list(model.routes) if isinstance(model.routes, list) else model.routes,
            "send_redirects": model.send_redirects}  # fmt: skip


def load_router_config(path: str | Path) -> RouterConfig:
    return RouterConfig.load(path)
