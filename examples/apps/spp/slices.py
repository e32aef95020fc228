"""The SPP's slice configuration file (docs/spp.md §3): load, validate, compile.

`load_slices(path)` reads a slices.yaml and checks it (located errors,
`SliceError: slices.yaml:LINE: slices[I].FIELD: what`); the result, `Substrate`, gives

- `meta_if_rows()`: the meta-interface table (docs/spp.md §4.1),
- `tcam_rows()`: the TCAM entries, in priority order (§5): key, mask, result,
- `finger_blocks()`: the Chord finger tables of the I3 slices (§4.2),
- `tables()`: all three in the tables.yaml form `npk link --app` compiles.

This file belongs to the application (it is loaded by path, like model.py): npkit's
core knows nothing of slices.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from npkit.asm.base.reading import load_yaml
from npkit.asm.base.schema import at, irange, validate
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig, load_router_config

OPTIONS = {"ipv4": 1, "i3": 2}
KIND = OPTIONS  # the TCAM key's kind byte is the option's code
ACTIONS = {"forward": 1, "gpe": 2, "drop": 3}
PROTOS = {"tcp": 6, "udp": 17, "icmp": 1}
KEY_BITS = 144
KEY_WORDS = 5  # 144 bits written as 5 longwords, k4 bits 15..0 unused
MAX_SLICES = 255
MAX_META_IFS = 32  # the spp block keeps them in local memory (spp.uc)
MAX_NEXT_HOPS = 32  # the router config's ARP entries, in local memory too
MAX_FILTERS = 8192
META_IF_BASE = 0xC0010000
META_IF_GEN = META_IF_BASE + 16 * MAX_META_IFS  # the table's generation word (spp.uc SPP_MI_GEN_OFF)
FINGER_BASE = 0xC0011000
FINGER_BLOCK = 0x420
ID_BITS = 64
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_HOP = re.compile(r"(\d+\.\d+\.\d+\.\d+):(\d+)")


class SliceError(ValueError):
    """A slices.yaml that cannot be used; the message says where."""


def _ip(v: str, what: str) -> int:
    try:
        return int(ipaddress.IPv4Address(v))
    except ValueError:
        raise ValueError(f"{what}: {v!r} is not an IPv4 address a.b.c.d") from None


def _prefix32(v: Any, what: str) -> tuple[int, int]:
    """'*' | a.b.c.d | a.b.c.d/len -> (value, mask)."""
    if v == "*":
        return 0, 0
    if not isinstance(v, str):
        raise ValueError(f"{what}: a.b.c.d, a.b.c.d/len or '*', got {v!r}")
    try:
        net = ipaddress.IPv4Network(v, strict=True)
    except ValueError as e:
        raise ValueError(f"{what}: {v!r}: {e}") from None
    return int(net.network_address), int(net.netmask)


def _trigger(v: Any) -> tuple[int, int]:
    """0xHEX[/len] (at most 64 bits) -> (value, mask)."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = hex(v)
    if not isinstance(v, str):
        raise ValueError(f"trigger: 0x followed by up to 16 hex digits, optionally /len; got {v!r}")
    m = re.fullmatch(r"0x([0-9A-Fa-f]{1,16})(?:/(\d{1,2}))?", v.strip())
    if m is None:
        raise ValueError(f"trigger: 0x followed by up to 16 hex digits, optionally /len; got {v!r}")
    value = int(m.group(1), 16)
    length = ID_BITS if m.group(2) is None else int(m.group(2))
    if not 0 <= length <= ID_BITS:
        raise ValueError(f"trigger: prefix length {length} is not 0..64")
    mask = ((1 << length) - 1) << (ID_BITS - length)
    if value & ~mask:
        raise ValueError(f"trigger: {v}: bits set beyond the /{length} prefix")
    return value, mask


def _ident(v: Any, what: str) -> int:
    """A 64-bit Chord identifier: an int or a 0x string."""
    if isinstance(v, str) and re.fullmatch(r"0x[0-9A-Fa-f]{1,16}", v.strip()):
        return int(v, 16)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << ID_BITS:
        return v
    raise ValueError(f"{what}: a 64-bit identifier (0x + up to 16 hex digits), got {v!r}")


def _port_or_any(v: Any, what: str) -> tuple[int, int]:
    if v == "*":
        return 0, 0
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 0xFFFF:
        return v, 0xFFFF
    raise ValueError(f"{what}: 0..65535 or '*', got {v!r}")


def _proto(v: Any) -> tuple[int, int]:
    if v == "*":
        return 0, 0
    if isinstance(v, str) and v in PROTOS:
        return PROTOS[v], 0xFF
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255:
        return v, 0xFF
    raise ValueError(f"proto: tcp, udp, icmp, 0..255 or '*', got {v!r}")


def _next_hop(v: Any) -> tuple[int, int]:
    m = _HOP.fullmatch(v.strip()) if isinstance(v, str) else None
    if m is None or not 0 <= int(m.group(2)) <= 0xFFFF:
        raise ValueError(f"next_hop: a.b.c.d:port, got {v!r}")
    return _ip(m.group(1), "next_hop"), int(m.group(2))


# ---- the file's schema -----------------------------------------------------------------------


class MetaIfSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="1..32 of [A-Za-z0-9_.-], unique in the slice")
    port: irange(0, 31) = Field(description="physical port")
    ip: str = Field(description="the meta-interface's address: its port's address")
    udp: irange(1, 65535) = Field(description="UDP port")

    @model_validator(mode="after")
    def _check(self) -> MetaIfSpec:
        if not _NAME.fullmatch(self.name):
            raise at("name", f"{self.name!r}: 1..32 of letters, digits, _ . -")
        try:
            _ip(self.ip, "ip")
        except ValueError as e:
            raise at("ip", str(e)) from None
        return self


class FilterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["forward", "gpe", "drop"] = "forward"
    out: str | None = None
    next_hop: str | None = None
    in_: str | None = Field(None, alias="in")
    dst: Any = "*"
    src: Any = "*"
    proto: Any = "*"
    dport: Any = "*"
    sport: Any = "*"
    trigger: Any = None

    @model_validator(mode="after")
    def _check(self) -> FilterSpec:
        if self.action == "forward" and (self.out is None or self.next_hop is None):
            raise at("out" if self.out is None else "next_hop", "a forwarding filter needs out and next_hop")
        for name, fn in (("dst", lambda v: _prefix32(v, "dst")), ("src", lambda v: _prefix32(v, "src")),
                         ("proto", _proto), ("dport", lambda v: _port_or_any(v, "dport")),
                         ("sport", lambda v: _port_or_any(v, "sport"))):  # fmt: skip
            try:
                fn(getattr(self, name))
            except ValueError as e:
                raise at(name, str(e)) from None
        if self.next_hop is not None:
            try:
                _next_hop(self.next_hop)
            except ValueError as e:
                raise at("next_hop", str(e)) from None
        if self.trigger is not None:
            try:
                _trigger(self.trigger)
            except ValueError as e:
                raise at("trigger", str(e)) from None
        return self


class FingerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: irange(0, 63) = Field(description="finger index: the successor of node_id + 2^k")
    next_hop: str
    out: str

    @model_validator(mode="after")
    def _check(self) -> FingerSpec:
        try:
            _next_hop(self.next_hop)
        except ValueError as e:
            raise at("next_hop", str(e)) from None
        return self


class I3Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: Any
    predecessor: Any
    fingers: list[FingerSpec] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _check(self) -> I3Spec:
        for name in ("node_id", "predecessor"):
            try:
                _ident(getattr(self, name), name)
            except ValueError as e:
                raise at(name, str(e)) from None
        if _ident(self.node_id, "") == _ident(self.predecessor, ""):
            raise at("predecessor", "equal to node_id: the router's range would be the whole ring or nothing")
        seen: set[int] = set()
        for i, f in enumerate(self.fingers):
            if f.k in seen:
                raise at(("fingers", i, "k"), f"finger {f.k} given twice")
            seen.add(f.k)
        return self


class SliceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: irange(1, 4095)
    name: str
    code_option: Literal["ipv4", "i3"]
    share: float = Field(gt=0, le=1)
    meta_interfaces: list[MetaIfSpec] = Field(min_length=1, max_length=MAX_META_IFS)
    filters: list[FilterSpec] = Field(default_factory=list, max_length=MAX_FILTERS)
    i3: I3Spec | None = None

    @model_validator(mode="after")
    def _check(self) -> SliceSpec:
        if not _NAME.fullmatch(self.name):
            raise at("name", f"{self.name!r}: 1..32 of letters, digits, _ . -")
        names = [m.name for m in self.meta_interfaces]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise at(("meta_interfaces", i, "name"), f"meta-interface {n!r} named twice in the slice")
        if (self.code_option == "i3") != (self.i3 is not None):
            raise at("i3", "an i3 slice needs `i3:` (node_id, predecessor, fingers); an ipv4 slice has none")
        for i, f in enumerate(self.filters):
            self._check_filter(i, f, names)
        for i, f in enumerate(self.i3.fingers if self.i3 else []):
            if f.out not in names:
                raise at(("i3", "fingers", i, "out"), f"{f.out!r} is not a meta-interface of slice {self.name}")
        return self

    def _check_filter(self, i: int, f: FilterSpec, names: list[str]) -> None:
        for fld in ("out", "in_"):
            v = getattr(f, fld)
            if v is not None and v not in names:
                raise at(("filters", i, fld.rstrip("_")), f"{v!r} is not a meta-interface of slice {self.name}")
        v4 = ("dst", "src", "proto", "dport", "sport")
        if self.code_option == "i3":
            if f.trigger is None:
                raise at(("filters", i, "trigger"), "an i3 filter needs its trigger")
            for fld in v4:
                if getattr(f, fld) != "*":
                    raise at(("filters", i, fld), f"{fld}: not a field of an i3 filter (trigger, in, out, next_hop, action)")
        elif f.trigger is not None:
            raise at(("filters", i, "trigger"), "trigger: not a field of an ipv4 filter")


class SlicesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    router: str = Field(description="router config (ports, ARP), relative to this file")
    slices: list[SliceSpec] = Field(min_length=1, max_length=MAX_SLICES)

    @model_validator(mode="after")
    def _check(self) -> SlicesFile:
        ids, names, mis = {}, {}, {}
        for i, s in enumerate(self.slices):
            if s.id in ids:
                raise at(("slices", i, "id"), f"slice id {s.id} is slices[{ids[s.id]}]'s too")
            if s.name in names:
                raise at(("slices", i, "name"), f"slice name {s.name!r} is slices[{names[s.name]}]'s too")
            ids[s.id], names[s.name] = i, i
            for j, m in enumerate(s.meta_interfaces):
                key = (m.port, _ip(m.ip, "ip"), m.udp)
                if key in mis:
                    raise at(("slices", i, "meta_interfaces", j),
                             f"port {m.port} {m.ip}:{m.udp} is already {mis[key]}")  # fmt: skip
                mis[key] = f"slice {s.name}'s {m.name}"
        if len(mis) > MAX_META_IFS:
            raise at("slices", f"{len(mis)} meta-interfaces: at most {MAX_META_IFS}")
        total = sum(s.share for s in self.slices)
        if total > 1 + 1e-9:
            raise at("slices", f"the shares add up to {total:g}: at most 1")
        return self


# ---- the compiled configuration ------------------------------------------------------------


@dataclass(frozen=True)
class MetaIf:
    index: int  # global: the meta-interface table's row
    name: str
    port: int
    ip: int
    udp: int
    slice_index: int


@dataclass(frozen=True)
class Filter:
    key: int  # 144 bits
    mask: int
    action: int
    out_mi: int
    nh_ip: int
    nh_port: int
    slice_index: int
    line: int = 0

    @property
    def result(self) -> int:
        return (self.action << 56) | (self.out_mi << 48) | (self.nh_port << 32) | self.nh_ip


@dataclass(frozen=True)
class Finger:
    k: int
    out_mi: int
    nh_ip: int
    nh_port: int


@dataclass(frozen=True)
class Slice:
    index: int
    id: int
    name: str
    option: str
    share: float
    meta_ifs: tuple[MetaIf, ...]
    filters: tuple[Filter, ...]
    node_id: int = 0
    predecessor: int = 0
    fingers: dict[int, Finger] = field(default_factory=dict)
    i3_index: int = -1  # the j of its finger block

    @property
    def code(self) -> int:
        return OPTIONS[self.option]

    def in_range(self, ident: int) -> bool:
        """docs/spp.md §4.2: 0 < (t - predecessor) <= (node_id - predecessor), mod 2^64."""
        m = (1 << ID_BITS) - 1
        d = (ident - self.predecessor) & m
        return 0 < d <= ((self.node_id - self.predecessor) & m)

    def finger_for(self, ident: int) -> int:
        """The finger index k for an identifier out of range: the highest set bit of t - node_id."""
        return ((ident - self.node_id) & ((1 << ID_BITS) - 1)).bit_length() - 1


def key_of(slice_id: int, kind: int, w1: int, w2: int, dport: int, sport: int, proto: int, in_mi: int) -> int:
    """The 144-bit key (docs/spp.md §5): k0 slice|kind|0, k1, k2, k3 dport|sport, k4 proto|in_mi."""
    return ((slice_id << 128) | (kind << 120) | (w1 << 80) | (w2 << 48) | (dport << 32) | (sport << 16)
            | (proto << 8) | in_mi)  # fmt: skip


def key_words(key: int) -> list[int]:
    """The 5 longwords k0..k4 the microcode writes (k4 bits 15..0 = 0)."""
    padded = key << 16
    return [(padded >> (32 * (KEY_WORDS - 1 - i))) & 0xFFFFFFFF for i in range(KEY_WORDS)]


@dataclass(frozen=True)
class Substrate:
    slices: tuple[Slice, ...]
    meta_ifs: tuple[MetaIf, ...]
    router: RouterConfig
    source: str

    @staticmethod
    def key(slice_id: int, kind: int, w1: int, w2: int, dport: int, sport: int, proto: int, in_mi: int) -> int:
        return key_of(slice_id, kind, w1, w2, dport, sport, proto, in_mi)

    def by_name(self, name: str) -> Slice:
        return next(s for s in self.slices if s.name == name)

    def demux(self, port: int, ip: int, udp: int) -> MetaIf | None:
        for m in self.meta_ifs:
            if (m.port, m.ip, m.udp) == (port, ip, udp):
                return m
        return None

    def filters(self) -> list[Filter]:
        """Every TCAM entry, in priority order (entry index = position)."""
        return [f for s in self.slices for f in s.filters]

    def meta_if_rows(self) -> list[dict[str, int]]:
        return [{"ip": m.ip, "udp": m.udp, "port": m.port, "option": self.slices[m.slice_index].code,
                 "slice": self.slices[m.slice_index].id, "slice_index": m.slice_index, "valid": 1}
                for m in self.meta_ifs]  # fmt: skip

    def finger_blocks(self) -> list[tuple[int, list[int]]]:
        """(address, words) of each I3 slice's finger block (docs/spp.md §4.2)."""
        out = []
        for s in self.slices:
            if s.option != "i3":
                continue
            words = [s.id << 16 | len(s.fingers), 0, s.node_id >> 32, s.node_id & 0xFFFFFFFF,
                     0, 0, s.predecessor >> 32, s.predecessor & 0xFFFFFFFF]  # fmt: skip
            for k in range(ID_BITS):
                f = s.fingers.get(k)
                words += [1 << 31 | f.out_mi << 16 | f.nh_port, f.nh_ip, 0, 0] if f else [0, 0, 0, 0]
            out.append((FINGER_BASE + s.i3_index * FINGER_BLOCK, words))
        return out

    def tcam_rows(self) -> list[dict[str, Any]]:
        """The TCAM's entries (index = priority): key and mask as 5 longwords, result as 2."""
        return [{"key": key_words(f.key), "mask": key_words(f.mask),
                 "result": [f.result >> 32, f.result & 0xFFFFFFFF], "slice": self.slices[f.slice_index].name}
                for f in self.filters()]  # fmt: skip


# ---- loading ---------------------------------------------------------------------------------


def load_slices(path: str | Path) -> Substrate:
    """The slice file at `path`, checked and compiled (SliceError: located)."""
    p = Path(path)
    located = load_yaml(p, error=SliceError, what="slice configuration")
    spec = validate(SlicesFile, located.data, str(p), located=located, error=SliceError)

    def fail(where: tuple[Any, ...], msg: str) -> SliceError:
        line = located.line(where)
        shown = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in where).replace(".[", "[")
        return SliceError(f"{p}:{line}: {shown}: {msg}" if line else f"{p}: {shown}: {msg}")

    rpath = (p.parent / spec.router).resolve()
    try:
        router = load_router_config(rpath)
    except (ConfigError, OSError) as e:
        raise fail(("router",), f"{spec.router}: {e}") from None
    if len(router.arp) > MAX_NEXT_HOPS:
        raise fail(("router",), f"{spec.router}: {len(router.arp)} ARP entries: the spp block keeps at most "
                                f"{MAX_NEXT_HOPS} next hops")  # fmt: skip
    return _compile(spec, router, str(p), fail)


def _compile(spec: SlicesFile, router: RouterConfig, source: str, fail: Any) -> Substrate:
    mis: list[MetaIf] = []
    for i, s in enumerate(spec.slices):
        for j, m in enumerate(s.meta_interfaces):
            where = ("slices", i, "meta_interfaces", j)
            if m.port >= len(router.ports):
                raise fail((*where, "port"), f"port {m.port}: the router has ports 0..{len(router.ports) - 1}")
            if _ip(m.ip, "ip") != router.ports[m.port].address:
                raise fail((*where, "ip"), f"{m.ip} is not port {m.port}'s address ({router.ports[m.port]})")
            mis.append(MetaIf(len(mis), m.name, m.port, _ip(m.ip, "ip"), m.udp, i))
    slices = []
    n_i3 = 0
    for i, s in enumerate(spec.slices):
        own = {m.name: m for m in mis if m.slice_index == i}
        filters = tuple(_filter(spec, router, i, j, f, own, fail) for j, f in enumerate(s.filters))
        fingers: dict[int, Finger] = {}
        node = pred = 0
        i3_index = -1
        if s.i3 is not None:
            node, pred = _ident(s.i3.node_id, ""), _ident(s.i3.predecessor, "")
            for j, f in enumerate(s.i3.fingers):
                ip, port = _hop_checked(router, own[f.out], f.next_hop, ("slices", i, "i3", "fingers", j, "next_hop"), fail)
                fingers[f.k] = Finger(f.k, own[f.out].index, ip, port)
            i3_index, n_i3 = n_i3, n_i3 + 1
        slices.append(Slice(i, s.id, s.name, s.code_option, s.share, tuple(own.values()), filters,
                            node, pred, fingers, i3_index))  # fmt: skip
    total = sum(len(s.filters) for s in slices)
    if total > MAX_FILTERS:
        raise fail(("slices",), f"{total} filters: the TCAM has {MAX_FILTERS} entries")
    return Substrate(tuple(slices), tuple(mis), router, source)


def _hop_checked(router: RouterConfig, out: MetaIf, hop: str, where: tuple[Any, ...], fail: Any) -> tuple[int, int]:
    ip, port = _next_hop(hop)
    if ip not in router.arp:
        raise fail(where, f"{hop}: the next hop has no ARP entry in the router config")
    if not router.ports[out.port].on_subnet(ip):
        raise fail(where, f"{hop}: not on the subnet of port {out.port} ({router.ports[out.port]})")
    return ip, port


def _filter(spec: SlicesFile, router: RouterConfig, i: int, j: int, f: FilterSpec,
            own: dict[str, MetaIf], fail: Any) -> Filter:  # fmt: skip
    s = spec.slices[i]
    where = ("slices", i, "filters", j)
    out_mi, nh_ip, nh_port = 0, 0, 0
    if f.out is not None and f.next_hop is not None:
        nh_ip, nh_port = _hop_checked(router, own[f.out], f.next_hop, (*where, "next_hop"), fail)
        out_mi = own[f.out].index
    in_v, in_m = (own[f.in_].index, 0xFF) if f.in_ is not None else (0, 0)
    kind = KIND[s.code_option]
    if s.code_option == "i3":
        t, tm = _trigger(f.trigger)
        key = key_of(s.id, kind, t >> 32, t & 0xFFFFFFFF, 0, 0, 0, in_v)
        mask = key_of(0xFFFF, 0xFF, tm >> 32, tm & 0xFFFFFFFF, 0, 0, 0, in_m)
    else:
        (d, dm), (sr, sm) = _prefix32(f.dst, "dst"), _prefix32(f.src, "src")
        (pv, pm), (dp, dpm), (sp, spm) = _proto(f.proto), _port_or_any(f.dport, "dport"), _port_or_any(f.sport, "sport")
        key = key_of(s.id, kind, d, sr, dp, sp, pv, in_v)
        mask = key_of(0xFFFF, 0xFF, dm, sm, dpm, spm, pm, in_m)
    return Filter(key, mask, ACTIONS[f.action], out_mi, nh_ip, nh_port, i)


# ---- tables.yaml: what `npk link --app` compiles (generated: `python slices.py`) -------------

ARP_BASE = 0xC0010800


def _words_table(base: int, prefix: str, n: int, rows: list[list[int]], note: str) -> dict[str, Any]:
    return {"note": note, "memory": "sram", "base": base,
            "fields": {f"{prefix}{k}": {"bits": 32} for k in range(n)},
            "rows": [{f"{prefix}{k}": v for k, v in enumerate(r)} for r in rows]}  # fmt: skip


# docs/spp.md §5: the key, MSB first (name, bits, bit offset from the key's LSB of 144)
KEY_FIELDS = (("slice", 16, 128), ("kind", 8, 120), ("pad0", 8, 112), ("w1", 32, 80), ("w2", 32, 48),
              ("dport", 16, 32), ("sport", 16, 16), ("proto", 8, 8), ("in_mi", 8, 0))  # fmt: skip
RESULT_FIELDS = (("action", 8, 56), ("out_mi", 8, 48), ("nh_port", 16, 32), ("nh_ip", 32, 0))


def _tcam_row(f: Filter) -> dict[str, Any]:
    """A filter as a `memory: tcam` row: each key field {value, mask} (or "*"), the result's fields."""
    row: dict[str, Any] = {}
    for name, bits, off in KEY_FIELDS:
        ones = (1 << bits) - 1
        v, m = (f.key >> off) & ones, (f.mask >> off) & ones
        row[name] = "*" if m == 0 else v if m == ones else {"value": v, "mask": m}
    for name, bits, off in RESULT_FIELDS:
        row[name] = (f.result >> off) & ((1 << bits) - 1)
    return row


def tables(sub: Substrate) -> dict[str, Any]:
    """The tables.yaml form of the slice file (docs/spp.md §4-5)."""
    ip = lambda v: str(ipaddress.IPv4Address(v))  # noqa: E731
    mi_rows = [{"ip": ip(r["ip"]), "udp": r["udp"], "port": r["port"], "option": r["option"], "slice": r["slice"],
                "slice_index": r["slice_index"], "valid": 1, "pad": 0,
                "fblk": max(sub.slices[r["slice_index"]].i3_index, 0)} for r in sub.meta_if_rows()]  # fmt: skip
    arp = [{"ip": ip(a), "mac_hi": int.from_bytes(m[:4], "big"), "mac_lo": int.from_bytes(m[4:], "big")}
           for a, m in sorted(sub.router.arp.items())]  # fmt: skip
    fingers = [w for _, words in sub.finger_blocks() for w in (words[k : k + 4] for k in range(0, len(words), 4))]
    tcam = [_tcam_row(f) for f in sub.filters()]
    out: dict[str, Any] = {
        "spp_meta_if": {"memory": "sram", "base": META_IF_BASE, "fields": {
            "ip": {"type": "ipv4"}, "udp": {"bits": 16}, "port": {"bits": 8}, "option": {"bits": 8},
            "slice": {"bits": 16}, "slice_index": {"bits": 16}, "valid": {"bits": 1}, "pad": {"bits": 23},
            "fblk": {"bits": 8}}, "rows": mi_rows},
        "spp_arp": {"memory": "sram", "base": ARP_BASE, "fields": {
            "ip": {"type": "ipv4"}, "mac_hi": {"bits": 32}, "mac_lo": {"bits": 16}}, "rows": arp},
    }  # fmt: skip
    if fingers:
        out["spp_fingers"] = _words_table(FINGER_BASE, "w", 4, fingers, "")
    if tcam:
        out["spp_filters"] = {"memory": "tcam", "first_entry": 0,
                              "fields": {n: {"bits": b} for n, b, _ in KEY_FIELDS},
                              "result": {n: {"bits": b} for n, b, _ in RESULT_FIELDS}, "rows": tcam}  # fmt: skip
    for t in out.values():
        t.pop("note", None)
    return out


def tables_text(sub: Substrate, source: str) -> str:
    import yaml

    head = (f"# GENERATED from {source} by `python slices.py` (examples/apps/spp): do not edit.\n"
            "# The slice file is the one source; tests/spp/test_slices.py checks this file is current.\n"
            "# spp_filters is the TCAM (docs/tcam.md `memory: tcam`; the key and result of docs/spp.md §5).\n")  # fmt: skip
    return head + yaml.safe_dump(tables(sub), sort_keys=False, default_flow_style=None, width=200)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="compile slices.yaml into tables.yaml (docs/spp.md)")
    ap.add_argument("slices", nargs="?", default=str(Path(__file__).with_name("slices.yaml")))
    ap.add_argument("-o", "--output", default=None, help="tables.yaml to write (default: beside the slice file)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the tables file is not current")
    a = ap.parse_args(argv)
    try:
        sub = load_slices(a.slices)
    except SliceError as e:
        print(e, file=sys.stderr)
        return 1
    out = Path(a.output) if a.output else Path(a.slices).with_name("tables.yaml")
    text = tables_text(sub, Path(a.slices).name)
    if a.check:
        if not out.exists() or out.read_text() != text:
            print(f"{out}: not current: run `python {Path(__file__).name}`", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
