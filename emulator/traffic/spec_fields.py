"""A traffic spec's `fields:` section: the L2-L4 fields of a port's normal packets, each
a constant, a list, a cycle, a weighted choice or a range (format: spec.py, reference:
docs/formats.md).  The parsers turn each field's form into plain data (a "draw"), which
the checked spec keeps; `FieldDraws` samples those for each frame from the port's own
fields stream, and frames.FrameBuilder builds the frames from what it drew.

A draw is {"form": "const" | "choice" | "cycle" | "weights" | "range", "values": [...],
"weights": [...] | None}; for "range" the values are [lo, hi] (inclusive).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from typing import Any

from npkit.asm.base.reading import at, strict_int

from .packet import ip as parse_ip
from .packet import mac as parse_mac
from .routes import RouteError, parse_prefix
from .spec_forms import parse_weight

FIELD_NAMES = ("dst_mac", "src_mac", "vlan", "ip_proto", "src", "dst", "src_port", "dst_port", "tcp_flags", "ttl", "tos",
               "ip_options", "payload")  # fmt: skip
MAX_CHOICES = 4096
IP_PROTO_NAMES = {"icmp": 1, "tcp": 6, "udp": 17}
L4_HEADER = {1: 8, 6: 20, 17: 8}  # other protocols: the tag right after the IP header
TCP_FLAG_BITS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20, "E": 0x40, "C": 0x80}
# named IP options (bytes, a multiple of 4): those the generator's special kinds send
IP_OPTIONS = {
    "none": b"",
    "router_alert": b"\x94\x04\x00\x00",  # RFC 2113
    "record_route": bytes([7, 15, 4]) + bytes(13),  # RFC 791, room for 3 addresses
    "timestamp": bytes([68, 12, 5, 0]) + bytes(8),  # RFC 791, timestamps only, 2 slots
    "nop": b"\x01\x01\x01\x00",  # NOPs then end of list
}
MAX_OPTIONS = 40
MAX_PATTERN = 1500
PAYLOADS = ("zeros", "random")
VLAN_ETHERTYPE = 0x8100


# ---- items: one value of a field ---------------------------------------------------------


def _int_item(name: str, lo: int, hi: int) -> Callable[[Any], Any]:
    def item(v: Any) -> int:
        return strict_int(v, name, lo, hi)

    return item


def _proto_item(v: Any) -> int:
    if isinstance(v, str) and v.lower() in IP_PROTO_NAMES:
        return IP_PROTO_NAMES[v.lower()]
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255:
        return v
    raise ValueError(f"an IP protocol ({', '.join(IP_PROTO_NAMES)} or a number 0..255), got {v!r}")


def _address_item(v: Any) -> list[int]:
    """A.B.C.D or A.B.C.D/LEN -> [prefix, length] (an address is a /32)."""
    if not isinstance(v, str):
        raise ValueError(f"an address A.B.C.D or a prefix A.B.C.D/LEN, got {v!r}")
    try:
        if "/" in v:
            prefix, length = parse_prefix(v.strip())
            return [prefix, length]
        return [parse_ip(v.strip()), 32]
    except (RouteError, ValueError) as e:
        raise ValueError(f"{v!r}: {e}") from None


def _mac_item(v: Any) -> str:
    """A MAC address 'xx:xx:xx:xx:xx:xx' -> its 12 hex digits."""
    if isinstance(v, int) and not isinstance(v, bool):
        raise ValueError(f"a MAC address in quotes: YAML reads an unquoted one like 12:34:56:00:00:01 as the "
                         f"number {v}")  # fmt: skip
    if not isinstance(v, str):
        raise ValueError(f"a MAC address 'xx:xx:xx:xx:xx:xx', got {v!r}")
    return parse_mac(v).hex()


def _flags_item(v: Any) -> int:
    """TCP flags: letters of FSRPAUEC ('SA' is SYN+ACK), '' or none for no flag, or 0..255."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255:
        return v
    if v is None or v == "none":
        return 0
    if isinstance(v, str) and all(c in TCP_FLAG_BITS for c in v.upper()):
        bits = 0
        for c in v.upper():
            bits |= TCP_FLAG_BITS[c]
        return bits
    raise ValueError(f"TCP flags: letters of {''.join(TCP_FLAG_BITS)} (S, SA, FA, ...) or 0..255, got {v!r}")


def _hex(v: str, what: str, limit: int) -> bytes:
    text = re.sub(r"[\s:]", "", v)
    if text.lower().startswith("0x"):
        text = text[2:]
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{what}: hex bytes like 'de ad be ef', got {v!r}") from None
    if not 1 <= len(data) <= limit:
        raise ValueError(f"{what}: 1..{limit} bytes, got {len(data)}")
    return data


def _options_item(v: Any) -> str:
    """A named option or hex bytes (padded to a multiple of 4 with end-of-list) -> hex."""
    if isinstance(v, str) and v in IP_OPTIONS:
        return IP_OPTIONS[v].hex()
    if v is None:
        return ""
    if isinstance(v, str):
        data = _hex(v, "IP options", MAX_OPTIONS)
        return (data + bytes(-len(data) % 4)).hex()
    raise ValueError(f"IP options: {', '.join(IP_OPTIONS)} or hex bytes (at most {MAX_OPTIONS}), got {v!r}")


def _payload_item(v: Any) -> str:
    """zeros | random | {pattern: HEX} | {header: HEX} -> 'zeros', 'random', 'pattern:HEX'
    or 'header:HEX' (bytes before the tag: an encapsulated protocol's header)."""
    if v in PAYLOADS:
        return str(v)
    if isinstance(v, dict) and len(v) == 1 and set(v) <= {"pattern", "header"}:
        (kind, hexed), = v.items()
        if isinstance(hexed, str):
            return f"{kind}:" + _hex(hexed, kind, MAX_PATTERN).hex()
    if isinstance(v, dict) and set(v) == {"header", "tag_at"} and isinstance(v["header"], str):
        head = _hex(v["header"], "header", MAX_PATTERN)
        at = v["tag_at"]
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= len(head) - 8:
            raise ValueError(f"tag_at: the tag's 8 bytes go inside the header: 0..{len(head) - 8}, got {at!r}")
        return f"header:{head.hex()}@{at}"
    raise ValueError("zeros, random, {pattern: 'de ad be ef'}, {header: '45 00 ...'} or "
                     f"{{header: HEX, tag_at: N}}, got {v!r}")


# ---- forms: how a field's values are drawn ---------------------------------------------------


def _const(v: Any) -> dict[str, Any]:
    return {"form": "const", "values": [v], "weights": None}


def parse_draw(value: Any, item: Callable[[Any], Any], ranged: bool = False) -> dict[str, Any]:
    """A field's form: VALUE | [VALUE, ...] (drawn) | {cycle: [...]} | {VALUE: weight, ...}
    | {range: [lo, hi]} (integer fields) -> a draw."""
    if isinstance(value, list):
        return {"form": "choice", "values": _items(value, item), "weights": None}
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("cycle", "range"):
        ((form, arg),) = value.items()
        if form == "cycle":
            if not isinstance(arg, list):
                raise at("cycle", f"a list of values, taken in turn, got {arg!r}")
            return {"form": "cycle", "values": _items(arg, item, "cycle"), "weights": None}
        if not ranged:
            raise at("range", "a range is for integer fields (ports, vlan ids, ttl, tos)")
        if not isinstance(arg, list) or len(arg) != 2:
            raise at("range", f"[lo, hi], got {arg!r}")
        lo, hi = _items(arg, item, "range")
        if lo > hi:
            raise at("range", f"the range [{lo}, {hi}] is empty")
        return {"form": "range", "values": [lo, hi], "weights": None}
    if isinstance(value, dict) and not (len(value) == 1 and set(value) <= {"pattern", "header"}) \
            and set(value) != {"header", "tag_at"}:
        if not value or len(value) > MAX_CHOICES:
            raise ValueError(f"a mapping of 1..{MAX_CHOICES} values to weights")
        vals, weights = [], []
        for k, w in value.items():
            try:
                vals.append(item(k))
            except ValueError as e:
                raise at(k, str(e)) from None
            try:
                weights.append(parse_weight(w))
            except ValueError as e:
                raise at(k, str(e)) from None
        if sum(weights) <= 0:
            raise ValueError("the weights sum to zero")
        return {"form": "weights", "values": vals, "weights": weights}
    return _const(item(value))


def _items(values: list[Any], item: Callable[[Any], Any], *where: str) -> list[Any]:
    if not values or len(values) > MAX_CHOICES:
        message = f"a list of 1..{MAX_CHOICES} values, got {len(values)}"
        raise at(where, message) if where else ValueError(message)
    out = []
    for i, v in enumerate(values):
        try:
            out.append(item(v))
        except ValueError as e:
            raise at((*where, i), str(e)) from None
    return out


def parse_vlan(value: Any) -> dict[str, Any]:
    """none | ID-form (every frame tagged) | {ids: ID-form, weight: fraction, pcp: 0..7}
    -> {"ids": draw, "weight": fraction tagged, "pcp": priority}."""
    if value in (None, "none"):
        return {"ids": _const(0), "weight": 0.0, "pcp": 0}
    ids_item = _int_item("a VLAN id", 0, 4095)
    if isinstance(value, dict) and "ids" in value:
        if set(value) - {"ids", "weight", "pcp"}:
            extra = sorted(map(str, set(value) - {"ids", "weight", "pcp"}))[0]
            raise at(extra, "unknown key; a vlan is {ids: ..., weight: fraction, pcp: 0..7}")
        try:
            ids = parse_draw(value["ids"], ids_item, ranged=True)
        except ValueError as e:
            raise _under("ids", e) from None
        w = value.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1:
            raise at("weight", f"the fraction of frames tagged, in [0, 1], got {w!r}")
        try:
            pcp = strict_int(value.get("pcp", 0), "a priority (PCP)", 0, 7)
        except ValueError as e:
            raise at("pcp", str(e)) from None
        return {"ids": ids, "weight": float(w), "pcp": pcp}
    return {"ids": parse_draw(value, ids_item, ranged=True), "weight": 1.0, "pcp": 0}


def _under(key: str, e: ValueError) -> ValueError:
    """Error `e` of a value found under `key`, its place kept."""
    inner = getattr(e, "context", None)
    if isinstance(inner, dict) and "at" in inner:
        return at((key, *inner["at"]), str(inner["message"]))
    return at(key, str(e))


def parser(name: str) -> Callable[[Any], Any]:
    """The parser of field `name` (a pydantic BeforeValidator)."""
    items: dict[str, tuple[Callable[[Any], Any], bool]] = {
        "dst_mac": (_mac_item, False),
        "src_mac": (_mac_item, False),
        "ip_proto": (_proto_item, False),
        "src": (_address_item, False),
        "dst": (_address_item, False),
        "src_port": (_int_item("a port", 0, 65535), True),
        "dst_port": (_int_item("a port", 0, 65535), True),
        "tcp_flags": (_flags_item, False),
        "ttl": (_int_item("a TTL", 0, 255), True),
        "tos": (_int_item("a TOS byte", 0, 255), True),
        "ip_options": (_options_item, False),
        "payload": (_payload_item, False),
    }
    if name == "vlan":
        return parse_vlan
    item, ranged = items[name]

    def parse(value: Any) -> dict[str, Any]:
        return parse_draw(value, item, ranged)

    return parse


# ---- what a port's fields allow --------------------------------------------------------------


def values_of(draw: dict[str, Any]) -> list[Any]:
    """Every value a draw can give (a range: its ends)."""
    if draw["form"] == "weights":
        return [v for v, w in zip(draw["values"], draw["weights"], strict=True) if w > 0]
    return list(draw["values"])


def header_room(fields: dict[str, Any], protocols: dict[str, float]) -> int:
    """The most header bytes (Ethernet, VLAN tag, IPv4 with options, L4) a frame with these
    fields can have: the smallest frame must hold them."""
    vlan = fields.get("vlan")
    tag = 4 if vlan is not None and vlan["weight"] > 0 else 0
    opts = fields.get("ip_options")
    optlen = max((len(v) // 2 for v in values_of(opts)), default=0) if opts else 0
    proto = fields.get("ip_proto")
    if proto is not None:
        l4 = max(L4_HEADER.get(p, 0) for p in values_of(proto))
    else:
        l4 = max({"udp": 8, "tcp": 20, "tunnel": 36}[p] for p, w in protocols.items() if w > 0)
    return 14 + tag + 20 + optlen + l4


# ---- drawing them ----------------------------------------------------------------------------


class FieldDraws:
    """A port's fields drawn frame by frame from its fields stream (one draw per field
    the spec sets, in FIELD_NAMES order: a port's frames are a function of the seed)."""

    def __init__(self, fields: dict[str, Any], rng: random.Random) -> None:
        self.fields = fields
        self.rng = rng
        self._turn: dict[str, int] = {}
        self._cum = {k: _cumulative(d) for k, d in fields.items() if k != "vlan"}
        if "vlan" in fields:
            self._cum["vlan"] = _cumulative(fields["vlan"]["ids"])

    def draw(self, name: str) -> Any:
        """The next value of field `name` (None: not set; vlan: an id or None, untagged)."""
        spec = self.fields.get(name)
        if spec is None:
            return None
        if name == "vlan":
            if spec["weight"] < 1 and self.rng.random() >= spec["weight"]:
                return None
            return self._pick(name, spec["ids"])
        return self._pick(name, spec)

    def _pick(self, name: str, d: dict[str, Any]) -> Any:
        form, values = d["form"], d["values"]
        if form == "const":
            return values[0]
        if form == "cycle":
            k = self._turn.get(name, 0)
            self._turn[name] = (k + 1) % len(values)
            return values[k]
        if form == "range":
            return self.rng.randint(values[0], values[1])
        if form == "choice":
            return values[self.rng.randrange(len(values))]
        cum = self._cum[name]
        r = self.rng.random() * cum[-1]
        for v, edge in zip(values, cum, strict=True):
            if r < edge:
                return v
        return values[-1]

    def address(self, name: str) -> int | None:
        """An address drawn from field `name`'s prefixes (uniform inside the prefix)."""
        p = self.draw(name)
        if p is None:
            return None
        prefix, length = p
        host = self.rng.getrandbits(32 - length) if length < 32 else 0
        return int(prefix | host)


def _cumulative(d: dict[str, Any]) -> list[float]:
    return list(itertools.accumulate(d["weights"] or []))
