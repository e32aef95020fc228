"""Traffic spec (YAML): the schema of the file `load_spec` reads (format: spec.py).

The polymorphic forms of the format (a size is `64`, `[64, 128]`, `imix`,
`{choice: {64: 7}}`, ...) are parsed here into one canonical form each; spec.py builds
its dataclasses from those.  Every field is typed and bounded, and the checks that need
more than one field (a port's rate against the link, its frame sizes against its
protocols, the packets a duration would generate) are made on each port's merged
settings, reported at the key the offending value came from.

Validation context: `base` (directory of the spec, for relative file names) and `nports`
(ports of the spec's router, loaded before validation).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from npkit.asm.base.schema import Doc, at, irange

from . import spec_fields
from .spec_forms import (  # noqa: F401  (the format's values and forms, re-exported)
    IMIX,
    KINDS,
    MAX_DURATION_NS,
    MAX_FRAME,
    MAX_LINK_BPS,
    MAX_LOOP,
    MAX_NEIGHBOURS,
    MAX_PACKETS,
    MAX_PCAP_LEN,
    MAX_ROUTE_CHANGES,
    MAX_SEED,
    MAX_SIZES,
    MIN_LOAD,
    MIN_PCAP_LEN,
    MIN_RATE_BPS,
    MIX_KINDS,
    NEIGHBOUR_DELAY_NS,
    PROTOCOLS,
    WIRE_PRESETS,
    RouteChange,
    _file,
    parse_arrivals,
    parse_destinations,
    parse_mix,
    parse_neighbours,
    parse_protocol,
    parse_rate,
    parse_route_change_text,
    parse_route_changes,
    parse_size,
    parse_time_ns,
    parse_wire,
)

# ---- the models --------------------------------------------------------------------------

Size = Annotated[dict[str, Any], BeforeValidator(parse_size),
                 Doc("N | [N, ...] | imix | {imix: [[N, w], ...]} | {choice: {N: w}} | {uniform: [lo, hi]}",
                     "frame sizes incl. FCS: 64..1518 for ethernet; weights >= 0")]  # fmt: skip
Protocol = Annotated[dict[str, float], BeforeValidator(parse_protocol),
                     Doc("udp | tcp | tunnel | {udp: w, tcp: w, tunnel: w}", "weights >= 0")]  # fmt: skip
Mix = Annotated[dict[str, float], BeforeValidator(parse_mix),
                Doc("{kind: fraction, ...}", "fractions in [0, 1], sum <= 1; kinds: " + ", ".join(MIX_KINDS))]  # fmt: skip
Rate = Annotated[int, BeforeValidator(parse_rate),
                 Doc("bits/s: number or 10k | 500M | 1G", f"{MIN_RATE_BPS}..1e12, finite")]  # fmt: skip
Arrivals = Annotated[dict[str, Any], BeforeValidator(parse_arrivals),
                     Doc("constant | poisson | {burst: N} | {on_off: {on_ns: A, off_ns: B, exponential: bool}}",
                         "N 1..1e6; on_ns >= 1, off_ns >= 0")]  # fmt: skip
Wire = Annotated[dict[str, int], BeforeValidator(parse_wire),
                 Doc("ethernet | seed003 | {fcs: F, preamble: P, ifg: G}", "bytes 0..1024")]  # fmt: skip
Destinations = Annotated[dict[str, Any], BeforeValidator(parse_destinations),
                         Doc("routes | {routes: FILE} | {prefixes: [A.B.C.D/LEN, ...]} | {via_port: N}")]  # fmt: skip
Load = Annotated[float, Doc("fraction of link_bps", f"[{MIN_LOAD:g}, 1]")]
RouteChanges = Annotated[list[RouteChange], BeforeValidator(parse_route_changes),
                         Doc("['at TIME add PREFIX/LEN via NEXTHOP [port P]' | 'at TIME add PREFIX/LEN dev P' | "
                             "'at TIME del PREFIX/LEN', ...]",
                             f"TIME: N[ns|us|ms|s]; at most {MAX_ROUTE_CHANGES}")]  # fmt: skip
Neighbours = Annotated[dict[int, bytes], BeforeValidator(parse_neighbours),
                       Doc("{A.B.C.D: MAC, ...}", f"on the router's subnets; at most {MAX_NEIGHBOURS}")]  # fmt: skip


_FORMS = "V | [V, ...] (drawn) | {cycle: [V, ...]} | {V: weight, ...}"
_RANGED = _FORMS + " | {range: [lo, hi]}"


def _field(name: str, form: str, values: str) -> Any:
    return Annotated[dict[str, Any] | None, BeforeValidator(spec_fields.parser(name)), Doc(form, values)]


_OPTION_NAMES = " | ".join(k for k in spec_fields.IP_OPTIONS if k != "none")
VlanField = _field("vlan", "IDS | {ids: IDS, weight: fraction, pcp: P} | none; IDS: " + _RANGED,
                   "ids 0..4095, weight in [0, 1], P 0..7")  # fmt: skip
MacField = _field("dst_mac", _FORMS, "V: 'xx:xx:xx:xx:xx:xx' (quoted)")
ProtoField = _field("ip_proto", _FORMS, "V: udp | tcp | icmp | 0..255")
AddressField = _field("src", _FORMS, "V: A.B.C.D | A.B.C.D/LEN (uniform inside)")
PortField = _field("src_port", _RANGED, "0..65535")
FlagsField = _field("tcp_flags", _FORMS, "V: letters of FSRPAUEC (S, SA, A, FA, R, PA) | 0..255")
ByteField = _field("ttl", _RANGED, "0..255")
OptionsField = _field("ip_options", _FORMS, f"V: none | {_OPTION_NAMES} | hex bytes (at most 40, padded to 4)")
PayloadField = _field("payload", _FORMS, "V: zeros | random | {pattern: HEX} (repeated after the tag) | {header: HEX} (before the tag) | {header: HEX, tag_at: N} (the tag in the header at byte N)")


class Fields(BaseModel):
    """`fields:` the L2-L4 fields of a port's normal packets (the mix's special packets
    keep theirs).  Each field is a constant V, a list drawn uniformly, `{cycle: [...]}`
    taken in turn, `{V: weight, ...}` or, for integers, `{range: [lo, hi]}` (inclusive);
    unset fields are drawn as without `fields:`.  A port's `fields:` replaces the
    defaults' (or the top level's) as a whole; replayed ports (`source:`) ignore them.
    Frames stay the size `size:` draws: a VLAN tag, options and headers take room from
    the payload (the smallest size must hold them), and the payload still starts with the
    packet's tag (cut short when it does not fit)."""

    model_config = ConfigDict(extra="forbid")
    dst_mac: MacField = Field(None, description="Ethernet destination (default the receiving port's MAC: "
                                                "another unicast MAC is a dst_mac_mismatch drop)")  # fmt: skip
    src_mac: MacField = Field(None, description="Ethernet source (default 02:00:00:ff:00:PP, P the port)")
    vlan: VlanField = Field(None, description="an 802.1Q tag on `weight` of the frames (default all)")
    ip_proto: ProtoField = Field(None, description="IPv4 protocol (replaces `protocol:`; icmp: echo requests; "
                                                   "other numbers: the payload right after the IP header)")  # fmt: skip
    src: AddressField = Field(None, description="source address (default 198.18.0.0/15)")
    dst: AddressField = Field(None, description="destination address (replaces `destinations:`; not checked "
                                                "against the router)")  # fmt: skip
    src_port: PortField = Field(None, description="UDP/TCP source port")
    dst_port: PortField = Field(None, description="UDP/TCP destination port")
    tcp_flags: FlagsField = Field(None, description="TCP flags (default PA)")
    ttl: ByteField = Field(None, description="IPv4 TTL (default 64)")
    tos: ByteField = Field(None, description="IPv4 TOS byte, DSCP and ECN (default 0)")
    ip_options: OptionsField = Field(None, description="IPv4 options (the router hands packets with options "
                                                       "to the control plane)")  # fmt: skip
    payload: PayloadField = Field(None, description="the payload after the tag (default zeros)")

    def draws(self) -> dict[str, Any]:
        """The fields the spec sets, as plain draws (spec_fields)."""
        return {k: getattr(self, k) for k in spec_fields.FIELD_NAMES
                if k in self.model_fields_set and getattr(self, k) is not None}  # fmt: skip


class Replay(BaseModel):
    """`source:` replay a capture on this port."""

    model_config = ConfigDict(extra="forbid")
    pcap: StrictStr = Field(description="capture file (relative to the spec)")
    timing: Literal["original", "rate"] = Field("original",
                        description="original: the capture's timestamps; rate: evenly at the port's rate")  # fmt: skip
    loop: irange(1, MAX_LOOP) = Field(1, description="times the capture is replayed")
    pad: StrictBool = Field(True, description="zero-pad frames under 60 bytes")

    @field_validator("pcap")
    @classmethod
    def _pcap_exists(cls, v: str, info: ValidationInfo) -> str:
        return _file(v, info, "pcap")


class PortSettings(BaseModel):
    """One port's settings (under `defaults:` or `ports: {N: ...}`); a port's own keys
    replace the defaults' key by key."""

    model_config = ConfigDict(extra="forbid")
    enabled: StrictBool = Field(True, description="the port sends")
    size: Size = Field(64, description="frame size distribution")
    protocol: Protocol = Field("udp", description="transport of normal packets")
    destinations: Destinations = Field("routes", description="where normal packets go")
    mix: Mix = Field(None, description="fractions of special packets")
    rate_bps: Rate | None = Field(None, description="offered rate on the wire (not with load)")
    load: Load | None = Field(None, description="offered rate as a fraction of link_bps (default 1.0)")
    arrivals: Arrivals = Field("constant", description="arrival process")
    wire: Wire = Field("ethernet", description="size convention and wire overhead")
    source: Replay | None = Field(None, description="replay a capture instead of generating")
    fields: Fields | None = Field(None, description="L2-L4 fields of the normal packets")
    start_ns: irange(0, MAX_DURATION_NS) = Field(0, description="first arrival, ns")

    @field_validator("load", mode="before")
    @classmethod
    def _load(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"a fraction of link_bps in [{MIN_LOAD:g}, 1], got {v!r}")
        if not (math.isfinite(v) and MIN_LOAD <= v <= 1):
            raise ValueError(f"{v!r} is outside [{MIN_LOAD:g}, 1]: load is the fraction of link_bps "
                             f"offered (use rate_bps for an absolute rate)")  # fmt: skip
        return float(v)


def parse_duration(value: Any) -> int:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"a number of nanoseconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"a finite number of nanoseconds, got {value!r}")
    if not 0 <= value <= MAX_DURATION_NS:
        raise ValueError(f"must be in 0..{MAX_DURATION_NS} ns (60 s), got {value:g}")
    return int(value)


Duration = Annotated[int, BeforeValidator(parse_duration), Doc("nanoseconds (1e6 = 1 ms)", "0..6e10 (60 s)")]


class TrafficSpecFile(BaseModel):
    """What the generator makes, per port (examples/traffic/*.yaml)."""

    model_config = ConfigDict(extra="forbid")
    seed: irange(0, MAX_SEED) = Field(0, description="seed of every random choice")
    router: StrictStr = Field(description="router config (YAML), relative to this file")
    count: irange(0, MAX_PACKETS) | None = Field(None, description="packets per port (and/or duration_ns)")
    duration_ns: Duration | None = Field(None, description="arrivals before this time (and/or count)")
    link_bps: Rate = Field(1_000_000_000, description="port speed")
    wire: Wire | None = Field(None, description="default wire model of every port")
    fields: Fields | None = Field(None, description="default `fields:` of every port (like defaults.fields)")
    defaults: PortSettings | None = Field(None, description="settings of every port")
    ports: dict[int, PortSettings | None] = Field(default_factory=dict,
                                                  description="per-port settings by port index")  # fmt: skip
    neighbours: Neighbours = Field(default_factory=dict, description="hosts that answer the router's ARP requests (the "
                                                     "generator puts their replies on the wire)")  # fmt: skip
    neighbour_delay_ns: irange(0, MAX_DURATION_NS) = Field(
        NEIGHBOUR_DELAY_NS, description="a neighbour's ARP reply: this long after the first packet that needs it")
    route_changes: RouteChanges = Field(default_factory=list, description="timed changes of the route table (the control "
                                                          "plane applies them; the oracle too)")  # fmt: skip
    _merged: list[tuple[dict[str, Any], dict[str, tuple[Any, ...]]]] = PrivateAttr(default_factory=list)
    _nports: int = PrivateAttr(0)

    @field_validator("ports", mode="before")
    @classmethod
    def _ports(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError("a mapping of port index -> settings")
        n = (info.context or {}).get("nports")
        for idx in v:
            if isinstance(idx, bool) or not isinstance(idx, int) or (n is not None and not 0 <= idx < n):
                shown = f"0..{n - 1}" if n else "none"
                raise at(idx, f"{idx!r} is not a port of the router (ports {shown})")
        return v

    @field_validator("router")
    @classmethod
    def _router(cls, v: str, info: ValidationInfo) -> str:
        return _file(v, info, "router config")

    def merged(self) -> list[tuple[dict[str, Any], dict[str, tuple[Any, ...]]]]:
        """Per port: (settings, where each came from) -- defaults updated by the port's keys."""
        return self._merged

    @model_validator(mode="after")
    def _cross(self, info: ValidationInfo) -> TrafficSpecFile:
        if self.count is None and self.duration_ns is None:
            raise at("count", "give count (packets per port) and/or duration_ns")
        n = (info.context or {}).get("nports") or (max(self.ports) + 1 if self.ports else 0)
        self._nports = n
        base: dict[str, Any] = {}
        origin: dict[str, tuple[Any, ...]] = {}
        if self.wire is not None:
            base["wire"], origin["wire"] = self.wire, ("wire",)
        if self.fields is not None:
            base["fields"], origin["fields"] = self.fields, ("fields",)
        if self.defaults is not None:
            for k in self.defaults.model_fields_set:
                base[k], origin[k] = getattr(self.defaults, k), ("defaults", k)
        self._merged = []
        for i in range(n):
            settings, where = dict(base), dict(origin)
            own = self.ports.get(i)
            if own is not None:
                for k in own.model_fields_set:
                    settings[k], where[k] = getattr(own, k), ("ports", i, k)
            self._check_port(i, settings, where)
            self._merged.append((settings, where))
        return self

    def _check_port(self, i: int, s: dict[str, Any], where: dict[str, tuple[Any, ...]]) -> None:
        def place(*keys: str) -> tuple[Any, ...]:
            for k in keys:
                if k in where:
                    return where[k]
            return ("ports", i) if i in self.ports else ("defaults",) if self.defaults is not None else ("ports",)

        if "rate_bps" in s and "load" in s and s["rate_bps"] is not None and s["load"] is not None:
            raise at(place("load"), f"port {i}: give rate_bps or load, not both (rate_bps is set at "
                                    f"{'.'.join(map(str, where['rate_bps']))})")  # fmt: skip
        rate = s.get("rate_bps") or int(round(self.link_bps * (s.get("load") or 1.0)))
        if rate > self.link_bps:
            raise at(place("rate_bps", "load"), f"port {i}: offered rate {rate} b/s exceeds the link's {self.link_bps} b/s")
        if rate < MIN_RATE_BPS:
            raise at(place("load", "rate_bps"), f"port {i}: offered rate {rate} b/s is below {MIN_RATE_BPS} b/s")
        s["_rate"] = rate
        dest = s.get("destinations") or {}
        if dest.get("kind") == "via_port" and not 0 <= dest["port"] < self._nports:
            raise at((*place("destinations"), "via_port"), f"port {i}: via_port {dest['port']} is not a port of "
                                                           f"the router (ports 0..{self._nports - 1})")  # fmt: skip
        if not s.get("enabled", True) or s.get("source") is not None:
            return
        wire = s.get("wire") or WIRE_PRESETS["ethernet"]
        size = s.get("size") or parse_size(64)
        lo, hi = min(size["values"]), max(size["values"])
        protos = s.get("protocol") or {"udp": 1.0}
        needs = max(MIN_PCAP_LEN[p] for p, w in protos.items() if w > 0)
        fields = s["fields"].draws() if s.get("fields") is not None else {}
        if fields and "ip_proto" not in fields and protos.get("tunnel", 0) > 0:
            raise at(place("fields", "protocol"), f"port {i}: fields: not with protocol tunnel (set "
                                                  f"fields.ip_proto, or leave tunnel out)")  # fmt: skip
        room = spec_fields.header_room(fields, protos) if fields else 0
        if fields and lo - wire["fcs"] < room:
            raise at(place("size", "fields"), f"port {i}: {lo} bytes is too small for the headers of its fields: "
                                              f"they need {room + wire['fcs']} (frame incl. {wire['fcs']}-byte FCS)")  # fmt: skip
        if lo - wire["fcs"] < needs:
            raise at(place("size", "protocol", "wire"), f"port {i}: {lo} bytes is too small: the protocols need "
                                                        f"{needs + wire['fcs']} (frame incl. {wire['fcs']}-byte FCS)")  # fmt: skip
        if hi - wire["fcs"] > MAX_PCAP_LEN:
            raise at(place("size", "wire"), f"port {i}: {hi} exceeds the {MAX_PCAP_LEN + wire['fcs']}-byte maximum")
        if self.duration_ns is not None:
            bits = (lo + wire["preamble"] + wire["ifg"]) * 8
            estimate = self.duration_ns * rate / (bits * 1e9)
            if min(estimate, self.count if self.count is not None else math.inf) > MAX_PACKETS:
                raise at("duration_ns", f"port {i} would get about {estimate:,.0f} packets in {self.duration_ns} ns "
                                        f"(more than {MAX_PACKETS:,} a port): shorten it, or set count")  # fmt: skip
