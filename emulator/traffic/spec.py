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
"""

from __future__ import annotations

import copy
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .router_config import ConfigError, RouterConfig
from .routes import Route, RouteError, load_routes, parse_prefix


class SpecError(ValueError):
    """An invalid traffic spec; the message names the key."""


KINDS = (
    "normal", "miss", "ttl_expiring", "options", "bad_checksum", "bad_version", "bad_ihl",
    "truncated", "for_router", "arp", "non_ipv4", "broadcast", "multicast", "martian_src",
    "martian_dst", "runt", "wrong_mac", "arp_miss",
    # the control plane's cases (xscale/npkd): RFC 1812 redirect, ICMP echo, IP options,
    # the no-ICMP rules of 4.3.2.7, a next hop only a neighbour's ARP reply resolves
    "redirect", "link_bcast_unicast", "ping", "record_route", "timestamp", "lsrr", "ssrr",
    "bad_option", "gateway_miss", "ttl_fragment", "icmp_error_ttl",
    "arp_reply", "replay",
)  # fmt: skip
MIX_KINDS = tuple(k for k in KINDS[1:-1] if k != "arp_reply")   # arp_reply: the neighbours' answers
PROTOCOLS = ("udp", "tcp", "tunnel")
IMIX = ((64, 7), (594, 4), (1518, 1))
WIRE_PRESETS = {
    "ethernet": {"fcs": 4, "preamble": 8, "ifg": 12},
    "seed003": {"fcs": 0, "preamble": 0, "ifg": 12},
}
# Smallest pcap length each protocol's headers fit in (options add 4 more).
MIN_PCAP_LEN = {"udp": 60, "tcp": 60, "tunnel": 70}


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
    neighbour_delay_ns: int = 20_000
    route_changes: list[Any] = field(default_factory=list)  # RouteChange, in time order


# ---------------------------------------------------------------------------- parsing


def parse_rate(value: Any, key: str) -> int:
    """1e9, 1000000000, '1G', '500M', '10k' -> integer bits/s."""
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("bps").removesuffix("b/s")
        scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1:], 1)
        number = text[:-1] if scale != 1 else text
        try:
            value = float(number) * scale
        except ValueError:
            raise SpecError(f"{key}: not a rate: {value!r}") from None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"{key}: rate must be a positive number of bits/s")
    return int(round(value))


def _size(value: Any, key: str) -> SizeDist:
    if value == "imix":
        value = {"imix": [list(p) for p in IMIX]}
    if isinstance(value, int) and not isinstance(value, bool):
        return SizeDist([value])
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return SizeDist(list(value))
    if isinstance(value, dict) and len(value) == 1:
        (form, arg), = value.items()
        try:
            if form == "imix":
                return SizeDist([int(s) for s, _ in arg], [float(w) for _, w in arg])
            if form == "choice":
                return SizeDist([int(s) for s in arg], [float(w) for w in arg.values()])
            if form == "uniform":
                lo, hi = (int(v) for v in arg)
                if lo > hi:
                    raise SpecError(f"{key}: uniform range [{lo}, {hi}] is empty")
                return SizeDist([lo, hi], uniform=(lo, hi))
        except (TypeError, ValueError, AttributeError):
            raise SpecError(f"{key}: malformed {form} size") from None
    raise SpecError(
        f"{key}: size must be N, [N, ...], imix, {{imix: [[N, w], ...]}}, "
        f"{{choice: {{N: w}}}} or {{uniform: [lo, hi]}}"
    )


def _weights(value: Any, allowed: tuple[str, ...], key: str) -> dict[str, float]:
    if isinstance(value, str):
        value = {value: 1.0}
    if not isinstance(value, dict) or not value:
        raise SpecError(f"{key}: a name or a mapping of name -> weight")
    unknown = set(value) - set(allowed)
    if unknown:
        raise SpecError(f"{key}: unknown {sorted(unknown)}; allowed: {', '.join(allowed)}")
    out = {}
    for name, weight in value.items():
        if not isinstance(weight, (int, float)) or weight < 0:
            raise SpecError(f"{key}.{name}: weight must be a non-negative number")
        out[name] = float(weight)
    if sum(out.values()) <= 0:
        raise SpecError(f"{key}: weights sum to zero")
    return out


def _mix(value: Any, key: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{key}: a mapping of kind -> fraction")
    mix = {}
    for name, frac in value.items():
        if name not in MIX_KINDS:
            raise SpecError(f"{key}: unknown kind {name!r}; known: {', '.join(MIX_KINDS)}")
        if not isinstance(frac, (int, float)) or not 0 <= frac <= 1:
            raise SpecError(f"{key}.{name}: fraction must be in [0, 1]")
        if frac:
            mix[name] = float(frac)
    if sum(mix.values()) > 1 + 1e-9:
        raise SpecError(f"{key}: fractions sum to {sum(mix.values()):.3f} > 1")
    return mix


def _arrivals(value: Any, key: str) -> Arrivals:
    if value in ("constant", "poisson"):
        return Arrivals(str(value))
    if isinstance(value, dict) and len(value) == 1:
        (form, arg), = value.items()
        if form == "burst":
            if not isinstance(arg, int) or arg < 1:
                raise SpecError(f"{key}.burst: a positive packet count")
            return Arrivals("burst", burst=arg)
        if form == "on_off" and isinstance(arg, dict):
            try:
                on, off = int(arg["on_ns"]), int(arg["off_ns"])
            except (KeyError, TypeError, ValueError):
                raise SpecError(f"{key}.on_off: needs on_ns and off_ns") from None
            if on <= 0 or off < 0:
                raise SpecError(f"{key}.on_off: on_ns > 0 and off_ns >= 0")
            return Arrivals("on_off", on_ns=on, off_ns=off, exponential=bool(arg.get("exponential")))
    raise SpecError(f"{key}: constant, poisson, {{burst: N}} or {{on_off: {{on_ns, off_ns}}}}")


def _wire(value: Any, key: str) -> WireModel:
    if isinstance(value, str):
        if value not in WIRE_PRESETS:
            raise SpecError(f"{key}: unknown preset {value!r}; known: {', '.join(WIRE_PRESETS)}")
        value = WIRE_PRESETS[value]
    if not isinstance(value, dict) or set(value) - {"fcs", "preamble", "ifg"}:
        raise SpecError(f"{key}: a preset name or {{fcs, preamble, ifg}}")
    try:
        model = WireModel(**{k: int(v) for k, v in value.items()})
    except (TypeError, ValueError):
        raise SpecError(f"{key}: fcs, preamble and ifg are byte counts") from None
    if min(model.fcs, model.preamble, model.ifg) < 0:
        raise SpecError(f"{key}: byte counts cannot be negative")
    return model


def _via_port(value: Any, key: str) -> int | None:
    if isinstance(value, dict) and set(value) == {"via_port"}:
        port = value["via_port"]
        if not isinstance(port, int) or port < 0:
            raise SpecError(f"{key}.via_port: a port number")
        return port
    return None


def _destinations(value: Any, key: str, base: Path) -> list[Route] | None:
    if value in (None, "routes") or _via_port(value, key) is not None:
        return None
    if isinstance(value, dict) and len(value) == 1:
        (form, arg), = value.items()
        try:
            if form == "routes":
                path = Path(str(arg))
                routes = load_routes(path if path.is_absolute() else base / path)
            elif form == "prefixes" and isinstance(arg, list):
                routes = [Route(*parse_prefix(str(p)), 0, 0) for p in arg]
            else:
                raise SpecError(f"{key}: routes, {{routes: FILE}}, {{prefixes: [...]}} or {{via_port: N}}")
        except (OSError, RouteError) as exc:
            raise SpecError(f"{key}: {exc}") from None
        if not routes:
            raise SpecError(f"{key}: no destinations")
        return routes
    raise SpecError(f"{key}: routes, {{routes: FILE}}, {{prefixes: [...]}} or {{via_port: N}}")


def _replay(value: Any, key: str, base: Path) -> Replay:
    if not isinstance(value, dict) or "pcap" not in value:
        raise SpecError(f"{key}: needs pcap: FILE")
    extra = set(value) - {"pcap", "timing", "loop", "pad"}
    if extra:
        raise SpecError(f"{key}: unknown keys {sorted(extra)}")
    timing = value.get("timing", "original")
    if timing not in ("original", "rate"):
        raise SpecError(f"{key}.timing: original or rate")
    loop = value.get("loop", 1)
    if not isinstance(loop, int) or loop < 1:
        raise SpecError(f"{key}.loop: a positive integer")
    path = Path(str(value["pcap"]))
    return Replay(path if path.is_absolute() else base / path, timing, loop,
                  bool(value.get("pad", True)))


PORT_KEYS = {
    "enabled", "size", "protocol", "destinations", "mix", "rate_bps", "load", "arrivals",
    "wire", "source", "start_ns",
}  # fmt: skip
TOP_KEYS = {"seed", "router", "count", "duration_ns", "link_bps", "wire", "defaults", "ports", "neighbours",
            "neighbour_delay_ns", "route_changes"}
NEIGHBOUR_DELAY_NS = 20_000


@dataclass(frozen=True)
class RouteChange:
    """A timed route change: `at 2ms add 10.1.0.0/16 via 10.0.3.2 [port 3]`, `at 2ms add
    10.1.0.0/16 dev 3` (on-link), `at 3ms del 10.1.0.0/16`."""

    at_ns: int
    op: str  # add | del
    prefix: int
    length: int
    next_hop: int = 0  # 0: on-link
    port: int = -1  # add: the output port

    @property
    def route_text(self) -> str:
        """The route as npkd reads it (xscale/npkd/cfg.h parse_route)."""
        from .packet import ip_str

        p = f"{ip_str(self.prefix)}/{self.length}"
        if self.op == "del":
            return p
        return f"{p} via {ip_str(self.next_hop)} port {self.port}" if self.next_hop else f"{p} dev {self.port}"


_TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _time_ns(text: str, where: str) -> int:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s)?", text.strip())
    if not m:
        raise SpecError(f"{where}: time {text!r}: a number with ns, us, ms or s")
    return round(float(m[1]) * _TIME_UNITS[m[2] or "ns"])


def parse_route_change(text: str, router: RouterConfig | None = None) -> RouteChange:
    """One timed route change; with `router` the next hop and port are checked (and the
    port of `via NEXTHOP` found from the next hop's subnet)."""
    from .packet import ip as parse_ip

    where = f"route_changes: {text!r}"
    words = str(text).split()
    if len(words) < 4 or words[0] != "at" or words[2] not in ("add", "del"):
        raise SpecError(f"{where}: expected 'at TIME add PREFIX/LEN via NEXTHOP' or 'at TIME del PREFIX/LEN'")
    at = _time_ns(words[1], where)
    try:
        prefix, length = parse_prefix(words[3])
    except (RouteError, ValueError) as e:
        raise SpecError(f"{where}: {e}") from None
    rest = words[4:]
    if words[2] == "del":
        if rest:
            raise SpecError(f"{where}: del takes a prefix only")
        return RouteChange(at, "del", prefix, length)
    next_hop, port = 0, -1
    try:
        if len(rest) == 2 and rest[0] == "dev":
            port = int(rest[1])
        elif len(rest) in (2, 4) and rest[0] == "via":
            if rest[1].isdigit():
                port = int(rest[1])             # via P: out of port P, on-link
            else:
                next_hop = parse_ip(rest[1])
            if len(rest) == 4:
                if rest[2] != "port":
                    raise ValueError("expected 'port P' after the next hop")
                port = int(rest[3])
        else:
            raise ValueError("expected 'via NEXTHOP [port P]', 'via P' or 'dev P'")
    except ValueError as e:
        raise SpecError(f"{where}: {e}") from None
    if router is not None:
        if next_hop and port < 0:
            found = router.port_for_subnet(next_hop)
            if found is None:
                raise SpecError(f"{where}: next hop {rest[1]} is on none of the router's subnets")
            port = found.index
        if not 0 <= port < len(router.ports):
            raise SpecError(f"{where}: the router has no port {port}")
        if next_hop and not router.ports[port].on_subnet(next_hop):
            raise SpecError(f"{where}: next hop {rest[1]} is not on port {port}'s subnet")
    return RouteChange(at, "add", prefix, length, next_hop, port)


def _port(index: int, settings: dict[str, Any], link_bps: int, base: Path) -> PortSpec:
    key = f"ports.{index}"
    unknown = set(settings) - PORT_KEYS
    if unknown:
        raise SpecError(f"{key}: unknown keys {sorted(unknown)}; allowed: {sorted(PORT_KEYS)}")
    if "rate_bps" in settings and "load" in settings:
        raise SpecError(f"{key}: give rate_bps or load, not both")
    if "rate_bps" in settings:
        rate = parse_rate(settings["rate_bps"], f"{key}.rate_bps")
    else:
        load = settings.get("load", 1.0)
        if not isinstance(load, (int, float)) or not 0 < load <= 1:
            raise SpecError(f"{key}.load: a fraction in (0, 1]")
        rate = int(round(link_bps * load))
    if rate > link_bps:
        raise SpecError(f"{key}: offered rate {rate} b/s exceeds the link's {link_bps} b/s")
    port = PortSpec(
        index=index,
        enabled=bool(settings.get("enabled", True)),
        size=_size(settings.get("size", 64), f"{key}.size"),
        protocols=_weights(settings.get("protocol", "udp"), PROTOCOLS, f"{key}.protocol"),
        destinations=_destinations(settings.get("destinations"), f"{key}.destinations", base),
        via_port=_via_port(settings.get("destinations"), f"{key}.destinations"),
        mix=_mix(settings.get("mix"), f"{key}.mix"),
        rate_bps=rate,
        arrivals=_arrivals(settings.get("arrivals", "constant"), f"{key}.arrivals"),
        wire=_wire(settings.get("wire", "ethernet"), f"{key}.wire"),
        replay=_replay(settings["source"], f"{key}.source", base) if "source" in settings else None,
        start_ns=int(settings.get("start_ns", 0)),
    )
    if port.replay is None and port.enabled:
        lo, hi = port.size.minimum, port.size.maximum
        needs = max(MIN_PCAP_LEN[p] for p, w in port.protocols.items() if w > 0)
        if port.wire.pcap_len(lo) < needs:
            raise SpecError(
                f"{key}.size: {lo} bytes is too small: the protocols need "
                f"{needs + port.wire.fcs} (frame incl. {port.wire.fcs}-byte FCS)"
            )
        if port.wire.pcap_len(hi) > 1514:
            raise SpecError(f"{key}.size: {hi} exceeds the {1514 + port.wire.fcs}-byte maximum")
    return port


def spec_from_dict(
    data: dict[str, Any], base: Path, source: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> TrafficSpec:
    """Build a spec; `overrides` (seed, count, duration_ns) replace top-level keys."""
    if not isinstance(data, dict):
        raise SpecError("top level must be a mapping")
    data = copy.deepcopy(data)
    for k, v in (overrides or {}).items():
        if v is not None:
            data[k] = v
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SpecError(f"unknown keys {sorted(unknown)}; allowed: {sorted(TOP_KEYS)}")
    if "router" not in data:
        raise SpecError("router: the router config (YAML) is required")
    router_path = Path(str(data["router"]))
    try:
        router = RouterConfig.load(router_path if router_path.is_absolute() else base / router_path)
    except ConfigError as exc:
        raise SpecError(f"router: {exc}") from None
    seed = data.get("seed", 0)
    if not isinstance(seed, int):
        raise SpecError("seed: an integer")
    count, duration = data.get("count"), data.get("duration_ns")
    if count is None and duration is None:
        raise SpecError("give count (packets per port) and/or duration_ns")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise SpecError("count: a non-negative integer")
    if duration is not None:
        duration = int(float(duration))
        if duration < 0:
            raise SpecError("duration_ns: non-negative")
    link_bps = parse_rate(data.get("link_bps", 1e9), "link_bps")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SpecError("defaults: a mapping")
    if "wire" in data:
        defaults = {"wire": data["wire"], **defaults}
    per_port = data.get("ports") or {}
    if not isinstance(per_port, dict):
        raise SpecError("ports: a mapping of port index -> settings")
    n = len(router.ports)
    for idx in per_port:
        if not isinstance(idx, int) or not 0 <= idx < n:
            raise SpecError(f"ports: {idx!r} is not a port of the router (0..{n - 1})")
    ports = [
        _port(i, {**defaults, **(per_port.get(i) or {})}, link_bps, base) for i in range(n)
    ]
    neighbours = _neighbours(data.get("neighbours"), router)
    delay = int(float(data.get("neighbour_delay_ns", NEIGHBOUR_DELAY_NS)))
    if delay < 0:
        raise SpecError("neighbour_delay_ns: non-negative")
    changes = data.get("route_changes") or []
    if not isinstance(changes, list):
        raise SpecError("route_changes: a list of 'at TIME add|del ...' strings")
    route_changes = sorted((parse_route_change(str(c), router) for c in changes), key=lambda c: c.at_ns)
    return TrafficSpec(
        seed=seed, router=router, ports=ports, count=count, duration_ns=duration,
        link_bps=link_bps, raw=data, source=source, neighbours=neighbours,
        neighbour_delay_ns=delay, route_changes=route_changes,
    )


def _neighbours(value: Any, router: RouterConfig) -> dict[int, bytes]:
    from .packet import ip as parse_ip
    from .packet import mac as parse_mac

    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError("neighbours: a mapping of IPv4 address -> MAC")
    out = {}
    for k, v in value.items():
        try:
            addr, hw = parse_ip(str(k)), parse_mac(str(v))
        except ValueError as e:
            raise SpecError(f"neighbours: {e}") from None
        if router.port_for_subnet(addr) is None:
            raise SpecError(f"neighbours: {k} is on none of the router's subnets")
        out[addr] = hw
    return out


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> TrafficSpec:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: {exc}") from None
    try:
        return spec_from_dict(data, path.parent, path, overrides)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def line_rate_pps(wire_bytes: float, link_bps: int) -> float:
    """Packets/s one link carries back-to-back at `wire_bytes` per packet."""
    return link_bps / (wire_bytes * 8) if wire_bytes > 0 else math.inf
