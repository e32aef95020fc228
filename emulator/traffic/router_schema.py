"""Router config (YAML): the schema of the file `RouterConfig.load` reads.

Every check of the format lives here, so that each problem is reported at its line:
ports (address/prefix, unicast MAC, distinct MACs, subnets that do not overlap), the ARP
table (a mapping of IPv4 address to unicast MAC), the routes (a file that exists, or a
list of route lines; each route's port exists, its next hop is on that port's subnet, it
does not repeat a connected subnet nor claim an address the router answers for itself)
and `send_redirects` (a real boolean).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from npkit.asm.base.schema import Doc, at, file_state

from .packet import ip, ip_str, mac_str
from .routes import RouteError, mask, parse_routes, route_problems  # noqa: F401  (route_problems: re-exported)

MAX_PORTS = 16  # the MSF device's limit (emulator/src/units/msf_dev.c)
MAX_PORT_PREFIX = 30  # a /31 or /32 port has no host addresses besides the router's
_MAC_RE = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}")


def parse_mac(value: Any) -> bytes:
    if isinstance(value, bytes) and len(value) == 6:
        return value
    if not isinstance(value, str):
        hint = " (write it in quotes: YAML reads some unquoted MACs as numbers)" if isinstance(value, int) else ""
        raise ValueError(f"expected a MAC address such as \"02:00:00:00:00:01\", got {value!r}{hint}")
    if not _MAC_RE.fullmatch(value.strip()):
        raise ValueError(f"not a MAC address (six two-digit hex bytes separated by ':'): {value!r}")
    return bytes.fromhex(value.strip().replace(":", "").replace("-", ""))


def parse_unicast_mac(value: Any) -> bytes:
    hw = parse_mac(value)
    if hw[0] & 1:
        raise ValueError(f"MAC {mac_str(hw)} is not unicast (I/G bit set: a group address)")
    return hw


def parse_ipv4(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFFFF:
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an IPv4 address A.B.C.D, got {value!r}")
    return ip(value)


def parse_interface(value: Any) -> tuple[int, int]:
    """'10.0.0.1/24' -> (address, prefix length)."""
    if isinstance(value, tuple):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected A.B.C.D/LEN, got {value!r}")
    addr_text, sep, len_text = value.partition("/")
    if not sep:
        raise ValueError(f"address {value!r} needs a /prefix length")
    if not len_text.strip().isdigit() or not 0 <= int(len_text) <= 32:
        raise ValueError(f"prefix length {len_text.strip()!r} of {value!r} is not in 0..32")
    return ip(addr_text), int(len_text)


Mac = Annotated[bytes, BeforeValidator(parse_unicast_mac), Doc("MAC \"xx:xx:xx:xx:xx:xx\"", "unicast")]
IPv4 = Annotated[int, BeforeValidator(parse_ipv4), Doc("IPv4 address A.B.C.D")]
Interface = Annotated[tuple[int, int], BeforeValidator(parse_interface),
                      Doc("A.B.C.D/LEN", f"LEN 0..{MAX_PORT_PREFIX}; a host address of its subnet")]  # fmt: skip
RoutesField = Annotated[str | list[str], Doc("file name | list of route lines",
                                              "a file relative to this config; lines: PREFIX/LEN NEXTHOP PORT")]  # fmt: skip


class PortEntry(BaseModel):
    """One port; its index is its position in `ports`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: Interface = Field(description="the router's address on this port and the subnet's length")
    mac: Mac = Field(description="the port's MAC address")

    @property
    def network(self) -> int:
        return self.address[0] & mask(self.address[1])

    @property
    def broadcast(self) -> int:
        return self.network | (~mask(self.address[1]) & 0xFFFFFFFF)

    def on_subnet(self, addr: int) -> bool:
        return addr & mask(self.address[1]) == self.network

    def text(self, index: int) -> str:
        return f"port {index} ({ip_str(self.address[0])}/{self.address[1]})"


class RouterConfigFile(BaseModel):
    """The router: ports, ARP table, routes (examples/traffic/router.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ports: list[PortEntry] = Field(min_length=1, max_length=MAX_PORTS,
                                   description=f"1..{MAX_PORTS} ports, index = position in the list")  # fmt: skip
    arp: dict[IPv4, Mac] = Field(default_factory=dict,
                                 description="next hop (or on-link host) IPv4 address -> its MAC")  # fmt: skip
    routes: RoutesField | None = Field(None, description="static routes: a route file or a list of lines")
    send_redirects: StrictBool = Field(True, description="send ICMP redirects (RFC 1812 5.2.7.2)")

    @field_validator("arp", mode="before")
    @classmethod
    def _arp_mapping(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError(f"expected a mapping of IPv4 address -> MAC, got {'a list' if isinstance(v, list) else repr(v)}")
        return v

    @field_validator("routes", mode="before")
    @classmethod
    def _routes(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return None
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("an empty file name")
            base = (info.context or {}).get("base")
            path = Path(v) if base is None or Path(v).is_absolute() else Path(base) / v
            state = file_state(path)
            if state != "file":
                raise ValueError(f"route file {str(path)!r} " + ("does not exist" if state == "missing" else f"is {state}"))
            return v
        if isinstance(v, list):
            for i, line in enumerate(v):
                if not isinstance(line, str):
                    raise at(i, f"expected a route line 'PREFIX/LEN NEXTHOP PORT', got {line!r}")
                try:
                    parse_routes(line, f"routes[{i}]")
                except RouteError as e:
                    raise at(i, str(e).split(": ", 2)[-1]) from None
            return v
        raise ValueError(f"expected a route file name or a list of route lines, got {v!r}")

    @model_validator(mode="after")
    def _ports(self) -> RouterConfigFile:
        macs: dict[bytes, int] = {}
        for i, p in enumerate(self.ports):
            addr, length = p.address
            if length > MAX_PORT_PREFIX:
                raise at(("ports", i, "address"), f"prefix length {length} leaves no host address besides "
                                                  f"the router's (at most /{MAX_PORT_PREFIX})")  # fmt: skip
            if addr in (p.network, p.broadcast):
                raise at(("ports", i, "address"), f"{ip_str(addr)} is the subnet's network or broadcast "
                                                  "address, not a host address")  # fmt: skip
            if p.mac in macs:
                raise at(("ports", i, "mac"), f"MAC {mac_str(p.mac)} is used by another port (port {macs[p.mac]})")
            macs[p.mac] = i
            for j, q in enumerate(self.ports[:i]):
                if q.on_subnet(p.network) or p.on_subnet(q.network):
                    raise at(("ports", i, "address"), f"subnet {ip_str(p.network)}/{length} overlaps "
                                                      f"{q.text(j)}")  # fmt: skip
        if isinstance(self.routes, list):
            try:
                routes = parse_routes("\n".join(self.routes), "routes")
            except RouteError as e:  # across lines: a duplicate prefix
                m = re.match(r"routes:(\d+): (.*)", str(e), re.S)
                raise (at(("routes", int(m[1]) - 1), m[2]) if m else at("routes", str(e))) from None
            for i, message in route_problems([p.address for p in self.ports], routes):
                raise at(("routes", i), message)
        return self
