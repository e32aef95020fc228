"""The traffic spec's values and their forms, without the schema: constants, the parsers
of the polymorphic forms (a size is `64`, `[64, 128]`, `imix`, ...) and timed route
changes.  spec_schema.py (the pydantic models) uses them and re-exports them; spec.py and
the generator import them from here, so that a spec whose checked result is cached
(npkit.asm.base.cache.checked) is used without importing pydantic."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.asm.base.reading import at, file_state, strict_int

from .packet import ip as parse_ip
from .packet import ip_str
from .packet import mac as parse_mac
from .routes import RouteError, parse_prefix

if TYPE_CHECKING:
    from pydantic import ValidationInfo

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
MIX_KINDS = tuple(k for k in KINDS[1:-1] if k != "arp_reply")  # arp_reply: the neighbours' answers
PROTOCOLS = ("udp", "tcp", "tunnel")
IMIX = ((64, 7), (594, 4), (1518, 1))
WIRE_PRESETS = {
    "ethernet": {"fcs": 4, "preamble": 8, "ifg": 12},
    "seed003": {"fcs": 0, "preamble": 0, "ifg": 12},
}
# Smallest pcap length each protocol's headers fit in (options add 4 more).
MIN_PCAP_LEN = {"udp": 60, "tcp": 60, "tunnel": 70}
MAX_PCAP_LEN = 1514

MIN_RATE_BPS = 1000  # offered rates below this make one frame a minute: a typo, not a test
MAX_LINK_BPS = 10**12
MIN_LOAD = 1e-6
MAX_PACKETS = 10_000_000  # per port: what one spec may generate (count, or duration x rate)
MAX_DURATION_NS = 60 * 10**9
MAX_SEED = (1 << 63) - 1  # a traffic spec's seed, and npk traffic routes --seed
MAX_LOOP = 1_000_000
MAX_SIZES = 10_000
MAX_FRAME = 16_384
MAX_NEIGHBOURS = 1024
MAX_ROUTE_CHANGES = 4096  # what the daemon's change log holds (toolchain/system/sysmap.py CP_CHANGES_CAP)
NEIGHBOUR_DELAY_NS = 20_000


def parse_weight(v: Any, what: str = "") -> float:
    """A weight of a distribution: a finite number >= 0 (ValueError naming `what`)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{what + ': ' if what else ''}a weight is a finite number >= 0, got {v!r}")
    return float(v)


# ---- polymorphic forms ----------------------------------------------------------------


def parse_size(value: Any) -> dict[str, Any]:
    """-> {"values": [...], "weights": [...] | None, "uniform": [lo, hi] | None}."""
    size = f"a frame size in 1..{MAX_FRAME}"
    if value == "imix":
        value = {"imix": [list(p) for p in IMIX]}
    if isinstance(value, int) and not isinstance(value, bool):
        return {"values": [strict_int(value, "size", 1, MAX_FRAME)], "weights": None, "uniform": None}
    if isinstance(value, list):
        if not value or len(value) > MAX_SIZES:
            raise ValueError(f"a list of 1..{MAX_SIZES} frame sizes, got {len(value)}")
        vals = []
        for i, v in enumerate(value):
            try:
                vals.append(strict_int(v, size, 1, MAX_FRAME))
            except ValueError as e:
                raise at(i, str(e)) from None
        return {"values": vals, "weights": None, "uniform": None}
    if isinstance(value, dict) and len(value) == 1:
        ((form, arg),) = value.items()
        if form == "imix":
            if not isinstance(arg, list) or not arg or len(arg) > MAX_SIZES:
                raise at("imix", f"a list of 1..{MAX_SIZES} [size, weight] pairs, got {arg!r}")
            vals, weights = [], []
            for i, pair in enumerate(arg):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise at(("imix", i), f"a [size, weight] pair, got {pair!r}")
                try:
                    vals.append(strict_int(pair[0], size, 1, MAX_FRAME))
                    weights.append(parse_weight(pair[1], "weight"))
                except ValueError as e:
                    raise at(("imix", i), str(e)) from None
            return _weighted(vals, weights, "imix")
        if form == "choice":
            if not isinstance(arg, dict) or not arg or len(arg) > MAX_SIZES:
                raise at("choice", f"a mapping of 1..{MAX_SIZES} sizes to weights, got {arg!r}")
            vals, weights = [], []
            for k, w in arg.items():
                try:
                    vals.append(strict_int(k, size, 1, MAX_FRAME))
                    weights.append(parse_weight(w, "weight"))
                except ValueError as e:
                    raise at(("choice", k), str(e)) from None
            return _weighted(vals, weights, "choice")
        if form == "uniform":
            if not isinstance(arg, list) or len(arg) != 2:
                raise at("uniform", f"[lo, hi], got {arg!r}")
            try:
                lo, hi = (strict_int(v, size, 1, MAX_FRAME) for v in arg)
            except ValueError as e:
                raise at("uniform", str(e)) from None
            if lo > hi:
                raise at("uniform", f"the range [{lo}, {hi}] is empty")
            return {"values": [lo, hi], "weights": None, "uniform": [lo, hi]}
    raise ValueError("size must be N, [N, ...], imix, {imix: [[N, w], ...]}, {choice: {N: w}} or {uniform: [lo, hi]}")


def _weighted(vals: list[int], weights: list[float], form: str) -> dict[str, Any]:
    if sum(weights) <= 0:
        raise at(form, "the weights sum to zero")
    return {"values": vals, "weights": weights, "uniform": None}


def parse_protocol(value: Any) -> dict[str, float]:
    if isinstance(value, str):
        value = {value: 1.0}
    if not isinstance(value, dict) or not value:
        raise ValueError(f"a protocol name or a mapping of protocol -> weight ({', '.join(PROTOCOLS)})")
    out = {}
    for name, weight in value.items():
        if name not in PROTOCOLS:
            raise at(name, f"unknown protocol {name!r}; allowed: {', '.join(PROTOCOLS)}")
        try:
            out[name] = parse_weight(weight, name)
        except ValueError as e:
            raise at(name, str(e)) from None
    if sum(out.values()) <= 0:
        raise ValueError("the weights sum to zero")
    return out


def parse_mix(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("a mapping of kind -> fraction")
    mix = {}
    for name, frac in value.items():
        if name not in MIX_KINDS:
            raise at(name, f"unknown kind {name!r}; known: {', '.join(MIX_KINDS)}")
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 <= frac <= 1:
            raise at(name, f"a fraction in [0, 1], got {frac!r}")
        if frac:
            mix[name] = float(frac)
    if sum(mix.values()) > 1 + 1e-9:
        raise ValueError(f"fractions sum to {sum(mix.values()):.3f} > 1")
    return mix


def parse_rate(value: Any) -> int:
    """1e9, 1000000000, '1G', '500M', '10k' -> integer bits/s (finite, >= MIN_RATE_BPS)."""
    shown = value
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("bps").removesuffix("b/s")
        scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1:], 1)
        number = text[:-1] if scale != 1 else text
        try:
            value = float(number) * scale
        except ValueError:
            raise ValueError(f"not a rate: {shown!r} (a number of bits/s, or 10k, 500M, 1G)") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"a finite rate in bits/s is needed, got {shown!r}")
    if not MIN_RATE_BPS <= value <= MAX_LINK_BPS:
        raise ValueError(f"must be in {MIN_RATE_BPS}..{MAX_LINK_BPS:.0e} bits/s, got {shown!r}")
    return int(round(value))


def parse_arrivals(value: Any) -> dict[str, Any]:
    form = "constant, poisson, {burst: N} or {on_off: {on_ns, off_ns}}"
    if value in ("constant", "poisson"):
        return {"kind": value}
    if isinstance(value, dict) and len(value) == 1:
        ((kind, arg),) = value.items()
        if kind == "burst":
            try:
                return {"kind": "burst", "burst": strict_int(arg, "a packet count", 1, 1_000_000)}
            except ValueError as e:
                raise at("burst", str(e)) from None
        if kind == "on_off":
            if not isinstance(arg, dict) or set(arg) - {"on_ns", "off_ns", "exponential"} or not {"on_ns", "off_ns"} <= set(arg):
                raise at("on_off", "needs on_ns and off_ns (and optionally exponential)")
            out: dict[str, Any] = {"kind": "on_off"}
            for k, lo in (("on_ns", 1), ("off_ns", 0)):
                try:
                    out[k] = strict_int(arg[k], k, lo, MAX_DURATION_NS)
                except ValueError as e:
                    raise at(("on_off", k), str(e)) from None
            exp = arg.get("exponential", False)
            if not isinstance(exp, bool):
                raise at(("on_off", "exponential"), f"expected true or false, got {exp!r}")
            out["exponential"] = exp
            return out
    raise ValueError(form)


def parse_wire(value: Any) -> dict[str, int]:
    if isinstance(value, str):
        if value not in WIRE_PRESETS:
            raise ValueError(f"unknown preset {value!r}; known: {', '.join(WIRE_PRESETS)}")
        return dict(WIRE_PRESETS[value])
    if not isinstance(value, dict) or set(value) - {"fcs", "preamble", "ifg"}:
        raise ValueError("a preset name or {fcs, preamble, ifg}")
    out = dict(WIRE_PRESETS["ethernet"])
    for k, v in value.items():
        try:
            out[k] = strict_int(v, f"{k} (bytes)", 0, 1024)
        except ValueError as e:
            raise at(k, str(e)) from None
    return out


def _file(value: Any, info: ValidationInfo, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a {what} file name, got {value!r}")
    base = (info.context or {}).get("base")
    path = Path(value) if base is None or Path(value).is_absolute() else Path(base) / value
    state = file_state(path)
    if state != "file":
        raise ValueError(f"{what} file {str(path)!r} " + ("does not exist" if state == "missing" else f"is {state}"))
    return str(path)


def parse_destinations(value: Any, info: ValidationInfo) -> dict[str, Any]:
    form = "routes, {routes: FILE}, {prefixes: [...]} or {via_port: N}"
    if value in (None, "routes"):
        return {"kind": "table"}
    if isinstance(value, dict) and len(value) == 1:
        ((kind, arg),) = value.items()
        if kind == "via_port":
            if isinstance(arg, bool) or not isinstance(arg, int) or not 0 <= arg < 64:
                raise at("via_port", f"a port number, got {arg!r}")
            return {"kind": "via_port", "port": arg}
        if kind == "routes":
            try:
                return {"kind": "file", "path": _file(arg, info, "route")}
            except ValueError as e:
                raise at("routes", str(e)) from None
        if kind == "prefixes":
            if not isinstance(arg, list) or not arg:
                raise at("prefixes", f"a non-empty list of A.B.C.D/LEN prefixes, got {arg!r}")
            out = []
            for i, p in enumerate(arg):
                try:
                    out.append(parse_prefix(str(p)))
                except RouteError as e:
                    raise at(("prefixes", i), str(e)) from None
            return {"kind": "prefixes", "prefixes": out}
    raise ValueError(form)


@dataclass(frozen=True)
class RouteChange:
    """A timed route change: `at 2ms add 10.1.0.0/16 via 10.0.3.2 [port 3]`, `at 2ms add
    10.1.0.0/16 dev 3` (on-link), `at 3ms del 10.1.0.0/16`."""

    at_ns: int
    op: str  # add | del
    prefix: int
    length: int
    next_hop: int = 0  # 0: on-link
    port: int = -1  # add: the output port (-1: the next hop's subnet says, spec.parse_route_change)

    @property
    def route_text(self) -> str:
        """The route as npkd reads it (xscale/npkd/cfg.h parse_route)."""
        p = f"{ip_str(self.prefix)}/{self.length}"
        if self.op == "del":
            return p
        return f"{p} via {ip_str(self.next_hop)} port {self.port}" if self.next_hop else f"{p} dev {self.port}"


_TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_time_ns(text: str) -> int:
    """'2ms', '150us', '0.5ms', '1000' (ns) -> ns, within MAX_DURATION_NS."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s)?", text.strip())
    if not m:
        raise ValueError(f"time {text!r}: a number with ns, us, ms or s")
    ns = round(float(m[1]) * _TIME_UNITS[m[2] or "ns"])
    if ns > MAX_DURATION_NS:
        raise ValueError(f"time {text!r} is after {MAX_DURATION_NS / 1e9:g} s")
    return ns


def parse_route_change_text(text: Any) -> RouteChange:
    """The syntax of one timed route change (the router checks are spec.parse_route_change's)."""
    if not isinstance(text, str):
        raise ValueError(f"a string 'at TIME add|del PREFIX/LEN ...', got {text!r}")
    words = text.split()
    if len(words) < 4 or words[0] != "at" or words[2] not in ("add", "del"):
        raise ValueError("expected 'at TIME add PREFIX/LEN via NEXTHOP' or 'at TIME del PREFIX/LEN'")
    at_ns = parse_time_ns(words[1])
    try:
        prefix, length = parse_prefix(words[3])
    except RouteError as e:
        raise ValueError(str(e)) from None
    rest = words[4:]
    if words[2] == "del":
        if rest:
            raise ValueError("del takes a prefix only")
        return RouteChange(at_ns, "del", prefix, length)
    next_hop, port = 0, -1
    if len(rest) == 2 and rest[0] == "dev":
        port = strict_int(rest[1] if not rest[1].isdigit() else int(rest[1]), "port", 0, 63)
    elif len(rest) in (2, 4) and rest[0] == "via":
        if rest[1].isdigit():
            port = strict_int(int(rest[1]), "port", 0, 63)  # via P: out of port P, on-link
        else:
            next_hop = parse_ip(rest[1])
        if len(rest) == 4:
            if rest[2] != "port" or not rest[3].isdigit():
                raise ValueError("expected 'port P' after the next hop")
            port = strict_int(int(rest[3]), "port", 0, 63)
    else:
        raise ValueError("expected 'via NEXTHOP [port P]', 'via P' or 'dev P'")
    return RouteChange(at_ns, "add", prefix, length, next_hop, port)


def parse_route_changes(value: Any) -> list[RouteChange]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("a list of 'at TIME add|del ...' strings")
    if len(value) > MAX_ROUTE_CHANGES:
        raise ValueError(f"{len(value)} route changes: at most {MAX_ROUTE_CHANGES}")
    out = []
    for i, c in enumerate(value):
        try:
            out.append(parse_route_change_text(c))
        except ValueError as e:
            raise at(i, str(e)) from None
    return out


def parse_neighbours(value: Any) -> dict[int, bytes]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("a mapping of IPv4 address -> MAC")
    if len(value) > MAX_NEIGHBOURS:
        raise ValueError(f"{len(value)} neighbours: at most {MAX_NEIGHBOURS}")
    out = {}
    for k, v in value.items():
        try:
            out[parse_ip(str(k))] = parse_mac(str(v))
        except ValueError as e:
            raise at(k, str(e)) from None
    return out
