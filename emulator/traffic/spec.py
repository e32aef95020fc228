"""Traffic specification (YAML): what the generator makes, per port.

Example (examples/traffic/imix.yaml)::

    seed: 1
    router: router.yaml          # ports, MACs, addresses, routes (relative to this file)
    duration_ns: 1000000         # and/or count: N (packets per port); first reached stops
    link_bps: 1e9                # port speed (default 1 Gb/s)
    wire: ethernet               # size convention, see below
    defaults:                    # every port, unless overridden under ports:
      size: imix
      protocol: {udp: 0.8, tcp: 0.2}
      destinations: routes
      mix: {miss: 0.01, ttl_expiring: 0.01, bad_checksum: 0.005}
      load: 1.0                  # or rate_bps: 1e9 (offered rate on the wire)
      arrivals: constant
    ports:
      1: {size: 64, arrivals: poisson}
      4: {source: {pcap: capture.pcap, timing: original}}
      3: {enabled: false}

A port's settings are `defaults` updated by its own entry under `ports:`, key by key
(a port's `mix:` replaces the default `mix:` as a whole). Unset: size 64, protocol udp,
destinations routes, no mix, load 1.0, constant arrivals, wire ethernet, enabled.

Sizes and the wire (`wire:`). A packet's *size* is its Ethernet frame size as the
standard counts it, FCS included: 64..1518. The pcap record holds size - fcs bytes
(pcaps carry no FCS), and on the wire the packet occupies size + preamble + ifg bytes.

- `ethernet` (default): fcs 4, preamble+SFD 8, IFG 12. A 64-byte frame is 60 bytes in
  the pcap and 84 bytes (672 ns at 1 Gb/s) on the wire; 7,440,476 pkt/s at 5 x 1 Gb/s.
- `seed003`: fcs 0, preamble 0, IFG 12, the convention of seed 003 ("78 B at the chip,
  90 B on the wire"): size 78 is 78 bytes in the pcap and 90 bytes (720 ns at 1 Gb/s)
  on the wire; 6,944,444 pkt/s at 5 x 1 Gb/s. Use with `protocol: tunnel`.
- or a mapping `{fcs: F, preamble: P, ifg: G}`.

`size:` 64 | [64, 128, 256] (uniform choice) | {choice: {64: 7, 1518: 1}} (weighted) |
{uniform: [64, 1518]} (integers, inclusive) | imix | {imix: [[64, 7], [594, 4], [1518, 1]]}.
`imix` is the "simple IMIX" 7:4:1 of 64, 594 and 1518-byte frames (IP lengths 46, 576,
1500); mean frame 361.8 bytes.

`protocol:` udp | tcp | tunnel, or weights {udp: .., tcp: .., tunnel: ..}. `tunnel` is
seed 003's packet: Ethernet + outer IPv4 + UDP (dst port 49152) + inner IPv4 + inner UDP
+ payload; at 78 bytes it has 8 bytes of inner payload.

`destinations:` routes (default: the router's own table; normal packets are then drawn
so that they are forwarded: a host inside a random route whose longest match has a
resolvable next hop) | {routes: FILE} | {prefixes: ["1.2.3.0/24", ...]} (uniform over
the prefixes, then uniform inside; these are not checked against the router) |
{via_port: N} (the router's table, only hosts whose longest match leaves by port N: give
each input port its own N and no output port is offered more than its line rate).

`mix:` fractions of special packets (the rest are normal), each with the outcome the
oracle gives it: miss (no_route), ttl_expiring (ttl_expired), options (ip_options),
bad_checksum, bad_version, bad_ihl, truncated (ip_truncated), for_router
(local_delivery), arp, non_ipv4 (non_ipv4_ethertype), broadcast, multicast, martian_src,
martian_dst, runt (short_frame), wrong_mac (dst_mac_mismatch), arp_miss; and for the
control plane: redirect (from an on-link host to a destination routed back out of the
same port), link_bcast_unicast (a unicast IP datagram in a link broadcast), ping (echo
request to the router), record_route / timestamp / lsrr / ssrr / bad_option (IP
options: recorded, timestamped, loose and strict source routed through the router,
malformed), gateway_miss (routed via a next hop with no ARP entry), ttl_fragment (TTL
1 in a non-first fragment) and icmp_error_ttl (an ICMP error with TTL 1): no ICMP error
about either (RFC 1812 4.3.2.7).

`fields:` the L2-L4 fields of the normal packets, each a constant, a list (drawn),
{cycle: [...]}, {value: weight, ...} or {range: [lo, hi]}: dst_mac and src_mac (quoted
"xx:xx:xx:xx:xx:xx"), vlan (ids, or {ids: .., weight:
fraction tagged, pcp: P}), ip_proto (udp | tcp | icmp | 0..255), src and dst (addresses
or prefixes, uniform inside), src_port, dst_port, tcp_flags (S, SA, A, FA, ...), ttl,
tos, ip_options (router_alert | record_route | timestamp | nop | none | hex bytes) and
payload (zeros | random | {pattern: "de ad be ef"}, after the tag, or {header: HEX}: these
bytes first, then the tag and zeros -- an encapsulated protocol's header, as the SPP's
slice traffic carries an inner IPv4 or I3 header in its UDP payload -- or {header: HEX,
tag_at: N}: the tag written over the header's bytes N..N+7, for frames no longer than
their headers)::

    fields:
      vlan: {ids: [10, 20], weight: 0.2}
      ip_proto: {tcp: 0.6, udp: 0.3, icmp: 0.1}
      dst_port: {range: [1000, 2000]}
      tcp_flags: [S, SA, A]

A top-level `fields:` is the default of every port, like `defaults: {fields: ...}`; a
port's own `fields:` replaces it as a whole. They are drawn from the port's own stream
(spec_fields.FieldDraws); the frame keeps the size `size:` drew. The oracle judges such frames like any other (a VLAN-tagged frame is
a non_ipv4_ethertype drop for the IPv4 router; options go to the control plane).

Top level, for the control plane: `neighbours: {10.0.2.77: "02:00:0a:00:02:4d"}` are
hosts that answer the router's ARP requests: the generator acts as each, putting its ARP
reply on the wire `neighbour_delay_ns` (default 20000) after the first packet that
needs it; `route_changes: ["at 2ms add 10.1.0.0/16 via 10.0.3.2", "at 3ms del
10.1.0.0/16"]` change the route table at those emulated times (npk run, npk demo: the
daemon applies them; the oracle too).

Rates: `rate_bps` (bits/s on the wire, counting preamble and IFG per `wire`) or `load`
(fraction of `link_bps`); default load 1.0. Arrivals: `constant` (evenly spaced at the
offered rate), `poisson` (frames offered at exponential intervals with that mean, queued
at the source while the link is busy, so the mean rate is the offered one), {burst: N} (N frames
back-to-back at link speed, then idle so the average is the offered rate),
{on_off: {on_ns: A, off_ns: B, exponential: false}} (the offered rate during ON
periods, silence during OFF). Arrivals never overlap on the wire: a frame cannot start
before the previous one, its preamble and IFG have left the link.

Replay: `source: {pcap: FILE, timing: original | rate, loop: 1, pad: true}` replays a
capture on that port, at its own timestamps (shifted to start at `start_ns`, delayed
where the link is still busy) or evenly at the port's rate; frames under 60 bytes are
zero-padded as a sending MAC would, unless `pad: false`.

The schema (every key typed and bounded, errors at `file:line: key`) is spec_schema.py;
docs/formats.md lists it field by field.
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.asm.base.reading import Located, file_state, load_yaml

from . import spec_forms
from .packet import ip_str
from .router_config import ConfigError, RouterConfig
from .routes import Route, RouteError, change_problem, load_routes, route_problem
from .spec_forms import (  # noqa: F401  (the format's names, re-exported)
    IMIX,
    KINDS,
    MIN_PCAP_LEN,
    MIX_KINDS,
    NEIGHBOUR_DELAY_NS,
    PROTOCOLS,
    WIRE_PRESETS,
    RouteChange,
    parse_route_change_text,
)

if TYPE_CHECKING:
    from .spec_schema import TrafficSpecFile


class SpecError(ValueError):
    """An invalid traffic spec; the message names the file, line and key."""


@dataclass(frozen=True)
class WireModel:
    fcs: int = 4
    preamble: int = 8
    ifg: int = 12

    def pcap_len(self, size: int) -> int:
        return size - self.fcs

    def wire_bytes(self, pcap_len: int) -> int:
        """Bytes a frame of `pcap_len` captured bytes occupies on the link."""
        return pcap_len + self.fcs + self.preamble + self.ifg


@dataclass
class SizeDist:
    values: list[int]
    weights: list[float] | None = None  # None: uniform over values
    uniform: tuple[int, int] | None = None  # integer range instead of values

    def sample(self, rng: random.Random) -> int:
        if self.uniform:
            return rng.randint(*self.uniform)
        if self.weights is None:
            return self.values[rng.randrange(len(self.values))]
        return rng.choices(self.values, self.weights)[0]

    @property
    def minimum(self) -> int:
        return self.uniform[0] if self.uniform else min(self.values)

    @property
    def maximum(self) -> int:
        return self.uniform[1] if self.uniform else max(self.values)

    def mean(self) -> float:
        if self.uniform:
            return sum(self.uniform) / 2
        if self.weights is None:
            return sum(self.values) / len(self.values)
        return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / sum(
            self.weights
        )


@dataclass
class Arrivals:
    kind: str = "constant"  # constant | poisson | burst | on_off
    burst: int = 1
    on_ns: int = 0
    off_ns: int = 0
    exponential: bool = False


@dataclass
class Replay:
    path: Path
    timing: str = "original"  # original | rate
    loop: int = 1
    pad: bool = True


@dataclass
class PortSpec:
    index: int
    enabled: bool = True
    size: SizeDist = field(default_factory=lambda: SizeDist([64]))
    protocols: dict[str, float] = field(default_factory=lambda: {"udp": 1.0})
    destinations: list[Route] | None = None  # None: the router's table, forwardable only
    via_port: int | None = None  # with the router's table: only destinations leaving by this port
    mix: dict[str, float] = field(default_factory=dict)
    rate_bps: int = 1_000_000_000
    arrivals: Arrivals = field(default_factory=Arrivals)
    wire: WireModel = field(default_factory=WireModel)
    replay: Replay | None = None
    start_ns: int = 0
    fields: dict[str, Any] = field(default_factory=dict)  # `fields:` as spec_fields draws ({}: none)


@dataclass
class TrafficSpec:
    seed: int
    router: RouterConfig
    ports: list[PortSpec]
    count: int | None = None
    duration_ns: int | None = None
    link_bps: int = 1_000_000_000
    raw: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    neighbours: dict[int, bytes] = field(default_factory=dict)  # IPv4 -> MAC: they answer ARP
    neighbour_delay_ns: int = NEIGHBOUR_DELAY_NS
    route_changes: list[RouteChange] = field(default_factory=list)  # in time order


# ---------------------------------------------------------------------------- parsing


def parse_rate(value: Any, key: str) -> int:
    """1e9, 1000000000, '1G', '500M', '10k' -> integer bits/s."""
    try:
        return spec_forms.parse_rate(value)
    except ValueError as e:
        raise SpecError(f"{key}: {e}") from None


def _port(index: int, s: dict[str, Any]) -> PortSpec:
    """A port's spec from its merged, validated settings (spec_schema.TrafficSpecFile.merged)."""
    size = s.get("size") or spec_forms.parse_size(64)
    dest = s.get("destinations") or {"kind": "table"}
    destinations = None
    if dest["kind"] == "prefixes":
        destinations = [Route(p, n, 0, 0) for p, n in dest["prefixes"]]
    arr = s.get("arrivals") or {"kind": "constant"}
    replay = s.get("source")
    return PortSpec(
        index=index,
        enabled=s.get("enabled", True),
        size=SizeDist(list(size["values"]), size["weights"], tuple(size["uniform"]) if size["uniform"] else None),
        protocols=dict(s.get("protocol") or {"udp": 1.0}),
        destinations=destinations,
        via_port=dest.get("port") if dest["kind"] == "via_port" else None,
        mix=dict(s.get("mix") or {}),
        rate_bps=s["_rate"],
        arrivals=Arrivals(arr["kind"], burst=arr.get("burst", 1), on_ns=arr.get("on_ns", 0),
                          off_ns=arr.get("off_ns", 0), exponential=arr.get("exponential", False)),
        wire=WireModel(**(s.get("wire") or WIRE_PRESETS["ethernet"])),
        replay=Replay(Path(replay.pcap), replay.timing, replay.loop, replay.pad) if replay else None,
        start_ns=s.get("start_ns", 0),
        fields=s["fields"].draws() if s.get("fields") is not None else {},
    )


def parse_route_change(text: str, router: RouterConfig | None = None) -> RouteChange:
    """One timed route change (`at 2ms add 10.1.0.0/16 via 10.0.3.2`); with `router` the
    next hop and port are checked (and the port of `via NEXTHOP` found from the next
    hop's subnet)."""
    where = f"route_changes: {text!r}"
    try:
        c = parse_route_change_text(text)
    except ValueError as e:
        raise SpecError(f"{where}: {e}") from None
    problem = None if router is None else route_change_problem(c, router)
    if problem:
        raise SpecError(f"{where}: {problem}")
    if router is not None and c.op == "add" and c.next_hop and c.port < 0:
        found = router.port_for_subnet(c.next_hop)
        assert found is not None
        c = replace(c, port=found.index)
    return c


def route_change_problem(c: RouteChange, router: RouterConfig) -> str:
    """What is wrong with a route change for this router ('' if nothing)."""
    too_short = change_problem(c.prefix, c.length)
    if too_short:
        return too_short
    if c.op != "add":
        return ""
    port = c.port
    if c.next_hop and port < 0:
        found = router.port_for_subnet(c.next_hop)
        if found is None:
            return f"next hop {ip_str(c.next_hop)} is on none of the router's subnets"
        port = found.index
    if not 0 <= port < len(router.ports):
        return f"the router has no port {port}"
    problem = route_problem([(p.address, p.prefix_len) for p in router.ports], Route(c.prefix, c.length, c.next_hop, port))
    return problem or ""


def _control_part(model: TrafficSpecFile, router: RouterConfig, where: str,
                  located: Located | None) -> tuple[dict[int, bytes], list[RouteChange]]:  # fmt: skip
    """The spec's neighbours and route changes, checked against its router."""

    def fail(path: tuple[Any, ...], message: str) -> SpecError:
        line = located.line(path) if located is not None else None
        key = ".".join(map(str, path))
        return SpecError(f"{where}:{line}: {key}: {message}" if line else f"{where}: {key}: {message}")

    raw = located.data if located is not None else {}
    keys = list((raw.get("neighbours") or {}) if isinstance(raw, dict) else {})
    for k, addr in enumerate(model.neighbours):
        if router.port_for_subnet(addr) is None:
            name = keys[k] if k < len(keys) else ip_str(addr)
            raise fail(("neighbours", name), f"{ip_str(addr)} is on none of the router's subnets")
    changes = []
    for i, c in enumerate(model.route_changes):
        problem = route_change_problem(c, router)
        if problem:
            raise fail(("route_changes", i), problem)
        if c.op == "add" and c.next_hop and c.port < 0:
            found = router.port_for_subnet(c.next_hop)
            assert found is not None
            c = replace(c, port=found.index)
        changes.append(c)
    return dict(model.neighbours), sorted(changes, key=lambda c: c.at_ns)


def _router(data: Any, base: Path, where: str, located: Located | None) -> RouterConfig | None:
    """The spec's router, loaded before the spec is validated (its ports bound the spec's)."""
    value = data.get("router") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None  # the schema reports it
    path = Path(value) if Path(value).is_absolute() else base / value
    if file_state(path) != "file":
        return None  # the schema says why
    try:
        return RouterConfig.load(path)
    except ConfigError as exc:
        line = located.line(("router",)) if located is not None else None
        raise SpecError(f"{where}:{line}: router: {exc}" if line else f"{where}: router: {exc}") from None


def spec_from_dict(
    data: dict[str, Any], base: Path, source: Path | None = None,
    overrides: dict[str, Any] | None = None, located: Located | None = None,
) -> TrafficSpec:
    """Build a spec; `overrides` (seed, count, duration_ns, router, ...) replace top-level
    keys.  Checked against spec_schema.TrafficSpecFile; errors name file:line: key."""
    where = str(source) if source else "<traffic spec>"
    if isinstance(data, dict):
        data = copy.deepcopy(data)
        for k, v in (overrides or {}).items():
            if v is not None:
                data[k] = v
                if located is not None:
                    located.unlocated[(k,)] = f"the override {k}={v!r}"
    router = _router(data, base, where, located)
    if router is None:  # the schema says what is wrong with `router`
        _checked_spec(data, base, source, located, None)
    assert router is not None

    from npkit.asm.base.cache import checked

    args = [str(source), str(base), data, [(p.address, p.prefix_len) for p in router.ports]]
    got = checked("traffic-spec/1", args, lambda: _checked_spec(data, base, source, located, router),
                  classes=(PortSpec, SizeDist, Arrivals, WireModel, Replay, Route, RouteChange))  # fmt: skip
    return TrafficSpec(router=router, **got)


def _checked_spec(data: Any, base: Path, source: Path | None, located: Located | None,
                  router: RouterConfig | None) -> dict[str, Any]:  # fmt: skip
    """spec_from_dict without the cache, after the overrides: the spec's fields but its
    router, checked against its schema (spec_schema.py) and the router's ports."""
    # the schema (and pydantic) only when the cache has no result for this spec
    from npkit.asm.base.schema import validate

    from .spec_schema import TrafficSpecFile

    where = str(source) if source else "<traffic spec>"
    context = {"base": base, "nports": len(router.ports) if router else None}
    model = validate(TrafficSpecFile, data, where, located=located, error=SpecError, context=context)
    assert router is not None  # the schema checked the file exists; _router loaded it
    ports = []
    for i, (settings, where_from) in enumerate(model.merged()):
        dest = settings.get("destinations") or {}
        if dest.get("kind") == "file":
            try:
                routes = load_routes(dest["path"])
            except (OSError, RouteError) as exc:
                line = located.line(where_from["destinations"]) if located is not None else None
                key = ".".join(map(str, where_from["destinations"]))
                raise SpecError(f"{where}:{line}: {key}: {exc}" if line else f"{where}: {key}: {exc}") from None
            if not routes:
                raise SpecError(f"{where}: {'.'.join(map(str, where_from['destinations']))}: no destinations")
            ports.append(_port(i, settings))
            ports[-1].destinations = routes
        else:
            ports.append(_port(i, settings))
    raw = data if isinstance(data, dict) else {}
    neighbours, changes = _control_part(model, router, where, located)
    spec = TrafficSpec(
        seed=model.seed, router=router, ports=ports, count=model.count, duration_ns=model.duration_ns,
        link_bps=model.link_bps, raw=raw, source=source, neighbours=neighbours,
        neighbour_delay_ns=model.neighbour_delay_ns, route_changes=changes,
    )  # fmt: skip
    return {f.name: getattr(spec, f.name) for f in fields(TrafficSpec) if f.name != "router"}


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> TrafficSpec:
    path = Path(path)
    located = load_yaml(path, error=SpecError, what="traffic spec")
    return spec_from_dict(located.data, path.parent, path, overrides, located)


def line_rate_pps(wire_bytes: float, link_bps: int) -> float:
    """Packets/s one link carries back-to-back at `wire_bytes` per packet."""
    return link_bps / (wire_bytes * 8) if wire_bytes > 0 else math.inf
