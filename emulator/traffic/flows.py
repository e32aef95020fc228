"""The flow table of `-D classify=flows` (microcode/classify/, docs/flows.md): declared
once (`microcode/classify/flows.yaml`), compiled here into the SRAM image the
classify step reads, and read here by the model that says what a flow entry does to a
packet.  The same hash (the chip's hash unit, hash_128) places an entry at link time,
in the daemon (xscale/npkd/flows.c) and in the model.

An exact-match key: (source, destination, protocol, source port, destination port);
the ports are the TCP/UDP header's first four bytes for a first fragment (fragment
offset 0) of TCP or UDP, else 0.  SRAM (FlowLayout):

  keys  KEY_BASE + 32 * bucket: two ways of 4 longwords (one sram[read, ..., 8])
        LW0 source, LW1 destination, LW2 sport << 16 | dport,
        LW3 proto << 24 | action << 16 | arg (action 0: the way is empty)
  aux   AUX_BASE + 32 * (2 * bucket + way): LW0 packets, LW1 bytes (IP total length),
        LW2..3 0, LW4..7 the flow's own next-hop entry (route action; the next-hop
        table's format, toolchain/router/nexthop.py), named by the next-hop index
        (address - LPM_NH_BASE) / 16 that hdr_format reads like any other.
  gen   AUX_BASE + 64 * buckets: the generation, + 1 at every change the daemon makes.

Actions: count (count, then the normal route), route (count, this flow's next hop
instead of the route lookup's), plugin (count, hand the packet to the control plane
with the exception `plugin`; npkd runs the plugin in slot `arg`).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ACTIONS = {"count": 1, "route": 2, "plugin": 3}
PROTOS = {"icmp": 1, "tcp": 6, "udp": 17}
WAYS = 2
KEY_BASE = 0xC020_0000  # SRAM channel 3, clear of an application's tables at 0xC0010000
MULT128 = (0xC2B2AE3D27D4EB4F << 64) | 0x9E3779B97F4A7C15  # emulator/configs/ixp2800.yaml


class FlowError(ValueError):
    """A flow declaration that cannot be used: the message names file:line: field."""


def gf_hash128(key: int, mult: int = MULT128) -> int:
    """The hash unit's hash_128 (emulator/src/units/hash.c): key * mult over GF(2)
    reduced modulo x^128 + x^7 + x^2 + x + 1."""
    r = 0
    mask = (1 << 128) - 1
    for i in range(127, -1, -1):
        top = r >> 127
        r = (r << 1) & mask
        if top:
            r ^= 0x87
        if (mult >> i) & 1:
            r ^= key
    return r


@dataclass(frozen=True)
class FlowKey:
    src: int
    dst: int
    proto: int
    sport: int = 0
    dport: int = 0

    def words(self) -> tuple[int, int, int, int]:
        return self.src, self.dst, (self.sport << 16) | self.dport, self.proto

    def bucket(self, buckets: int, mult: int = MULT128) -> int:
        w = self.words()
        key = (w[0] << 96) | (w[1] << 64) | (w[2] << 32) | w[3]
        return gf_hash128(key, mult) & (buckets - 1)

    def __str__(self) -> str:
        a, b = ipaddress.IPv4Address(self.src), ipaddress.IPv4Address(self.dst)
        return f"{a}:{self.sport} > {b}:{self.dport} proto {self.proto}"


def key_of(frame: bytes) -> FlowKey | None:
    """The flow key of an IPv4 Ethernet frame as the classify step reads it (frame
    bytes 16..39: the IP header without options, then 4 bytes), None if not IPv4."""
    if len(frame) < 38 or frame[12:14] != b"\x08\x00":
        return None
    frag = struct.unpack_from("!H", frame, 20)[0] & 0x1FFF
    proto = frame[23]
    src, dst = struct.unpack_from("!II", frame, 26)
    sport = dport = 0
    if frag == 0 and proto in (6, 17):
        sport, dport = struct.unpack_from("!HH", frame, 34)
    return FlowKey(src, dst, proto, sport, dport)


@dataclass(frozen=True)
class Flow:
    key: FlowKey
    action: str  # count | route | plugin
    port: int = 0  # route: output port
    via: int = 0  # route: next hop (its MAC from the router's ARP table)
    plugin: int = 0  # plugin: slot 1..15
    line: int = 0


@dataclass
class FlowTable:
    """The declared flows, their places and the SRAM they compile to."""

    buckets: int = 1024
    flows: list[Flow] = field(default_factory=list)
    plugins: dict[int, dict[str, Any]] = field(default_factory=dict)  # slot -> {name, args} at start
    source: str = ""
    slots: dict[FlowKey, int] = field(default_factory=dict)  # key -> entry index (2 * bucket + way)
    idle_us: int = 0  # the daemon expires an entry idle this long (to twice that); 0: never
    _index: dict[FlowKey, Flow] | None = field(default=None, repr=False, compare=False)

    @property
    def key_base(self) -> int:
        return KEY_BASE

    @property
    def aux_base(self) -> int:
        return KEY_BASE + 32 * self.buckets

    @property
    def gen_addr(self) -> int:
        """The table's generation: the control daemon adds 1 at every change (the CAM
        cache of `flow_cache` holds entries of one generation)."""
        return self.aux_base + 32 * WAYS * self.buckets

    @property
    def end(self) -> int:
        return self.gen_addr + 16

    def place(self, mult: int = MULT128) -> None:
        used: dict[int, int] = {}
        for f in self.flows:
            if f.key in self.slots:
                raise FlowError(f"{self.source}:{f.line}: flows: {f.key} declared twice")
            b = f.key.bucket(self.buckets, mult)
            way = used.get(b, 0)
            if way >= WAYS:
                raise FlowError(f"{self.source}:{f.line}: flows: bucket {b} already holds {WAYS} flows "
                                f"(more buckets: `buckets:`)")  # fmt: skip
            used[b] = way + 1
            self.slots[f.key] = 2 * b + way

    def nh_index(self, entry: int, nh_base: int) -> int:
        return ((self.aux_base + 32 * entry + 16 - nh_base) & 0xFFFFFFFF) >> 4

    def sram(self, router: Any, nh_base: int) -> list[tuple[int, bytes]]:
        """(address, bytes) runs: every bucket (zeros where empty) and every aux entry."""
        keys = bytearray(32 * self.buckets)
        aux = bytearray(32 * WAYS * self.buckets)
        for f in self.flows:
            e = self.slots[f.key]
            arg = f.plugin if f.action == "plugin" else (e if f.action == "route" else 0)
            w = f.key.words()
            struct.pack_into(">IIII", keys, 16 * e, w[0], w[1], w[2],
                             (f.key.proto << 24) | (ACTIONS[f.action] << 16) | (arg & 0xFFFF))  # fmt: skip
            if f.action == "route":
                struct.pack_into(">16s", aux, 32 * e + 16, nexthop_bytes(router, f))
        return [(self.key_base, bytes(keys)), (self.aux_base, bytes(aux))]

    def lookup(self, key: FlowKey) -> Flow | None:
        return self._by_key().get(key)

    def _by_key(self) -> dict[FlowKey, Flow]:
        if self._index is None:
            self._index = {f.key: f for f in self.flows}
        return self._index

    def record(self) -> dict[str, Any]:
        """What the image's meta keeps (the model and the daemon read it back)."""
        return {"buckets": self.buckets, "source": self.source, "key_base": self.key_base, "idle_us": self.idle_us,
                "aux_base": self.aux_base, "plugins": {str(k): v for k, v in self.plugins.items()},
                "flows": [{"src": f.key.src, "dst": f.key.dst, "proto": f.key.proto, "sport": f.key.sport,
                           "dport": f.key.dport, "action": f.action, "port": f.port, "via": f.via,
                           "plugin": f.plugin, "entry": self.slots.get(f.key, -1)} for f in self.flows]}  # fmt: skip

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> FlowTable:
        t = cls(int(rec["buckets"]), source=str(rec.get("source", "")), idle_us=int(rec.get("idle_us", 0)),
                plugins={int(k): v for k, v in (rec.get("plugins") or {}).items()})  # fmt: skip
        for r in rec.get("flows", []):
            k = FlowKey(r["src"], r["dst"], r["proto"], r["sport"], r["dport"])
            t.flows.append(Flow(k, r["action"], r["port"], r["via"], r["plugin"]))
            t.slots[k] = int(r["entry"])
        return t


def nexthop_bytes(router: Any, f: Flow) -> bytes:
    """The 16-byte next-hop entry of a route flow: flags 0 | port << 16, the next hop's
    MAC then the port's (microcode/lookup/LAYOUT.md §5)."""
    ports = {p.index: p for p in router.ports}
    mac = router.arp.get(f.via)
    return struct.pack(">I", f.port << 16) + bytes(mac) + bytes(ports[f.port].mac)


def _ip(v: Any, where: str) -> int:
    try:
        return int(ipaddress.IPv4Address(str(v)))
    except ValueError:
        raise FlowError(f"{where}: {v!r}: an IPv4 address (a.b.c.d)") from None


def _int(v: Any, lo: int, hi: int, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise FlowError(f"{where}: {v!r}: an integer {lo}..{hi}")
    return v


class _Loader(yaml.SafeLoader):
    pass


def _mapping_with_line(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[str, Any]:
    d = loader.construct_mapping(node, deep=True)
    d["__line__"] = node.start_mark.line + 1
    return d


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_line)

_FLOW_KEYS = {"src", "dst", "proto", "sport", "dport", "action", "via", "port", "plugin"}


def parse_flow(r: dict[str, Any], where: str, router: Any = None, line: int = 0) -> Flow:
    """One flow of a declaration (or of `npk flow add`'s words, as a dict)."""
    extra = sorted(set(r) - _FLOW_KEYS - {"__line__"})
    if extra:
        raise FlowError(f"{where}: {extra[0]}: not a field of a flow ({', '.join(sorted(_FLOW_KEYS))})")
    for need in ("src", "dst", "proto", "action"):
        if need not in r:
            raise FlowError(f"{where}: {need}: missing")
    proto = PROTOS.get(str(r["proto"]), r["proto"])
    proto = _int(proto, 0, 255, f"{where}: proto")
    sport = _int(r.get("sport", 0), 0, 65535, f"{where}: sport")
    dport = _int(r.get("dport", 0), 0, 65535, f"{where}: dport")
    if proto not in (6, 17) and (sport or dport):
        raise FlowError(f"{where}: sport: only TCP and UDP flows have ports")
    key = FlowKey(_ip(r["src"], f"{where}: src"), _ip(r["dst"], f"{where}: dst"), proto, sport, dport)
    action = str(r["action"])
    if action not in ACTIONS:
        raise FlowError(f"{where}: action: {action!r}: one of {', '.join(ACTIONS)}")
    if action == "route":
        if "via" not in r or "port" not in r:
            raise FlowError(f"{where}: action route needs via (the next hop) and port")
        port, via = _int(r["port"], 0, 255, f"{where}: port"), _ip(r["via"], f"{where}: via")
        if router is not None:
            if port >= len(router.ports):
                raise FlowError(f"{where}: port: {port}: the router has ports 0..{len(router.ports) - 1}")
            if via not in router.arp:
                raise FlowError(f"{where}: via: {ipaddress.IPv4Address(via)}: not in the router's ARP table "
                                "(a flow's next hop must be resolved)")  # fmt: skip
        return Flow(key, action, port=port, via=via, line=line)
    if action == "plugin":
        return Flow(key, action, plugin=_int(r.get("plugin", 0), 1, 15, f"{where}: plugin"), line=line)
    return Flow(key, action, line=line)


def load_flows(path: str | Path, router: Any = None, mult: int = MULT128) -> FlowTable:
    """A flow declaration file (microcode/classify/flows.yaml's format), checked and placed."""
    p = Path(path)
    try:
        data = yaml.load(p.read_text(), Loader=_Loader) or {}  # noqa: S506 - SafeLoader subclass
    except (OSError, yaml.YAMLError) as e:
        raise FlowError(f"{p}: {e}") from None
    if not isinstance(data, dict):
        raise FlowError(f"{p}:1: a mapping with buckets, flows, plugins")
    for k in data:
        if k not in ("buckets", "idle_us", "flows", "plugins", "__line__"):
            raise FlowError(f"{p}:{data['__line__']}: {k}: not a field (buckets, idle_us, flows, plugins)")
    buckets = data.get("buckets", 1024)
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 16 or buckets > 16384 or buckets & (buckets - 1):
        raise FlowError(f"{p}:{data['__line__']}: buckets: {buckets!r}: a power of two 16..16384")
    idle = data.get("idle_us", 0)
    if isinstance(idle, bool) or not isinstance(idle, int) or not 0 <= idle <= 60_000_000:
        raise FlowError(f"{p}:{data['__line__']}: idle_us: {idle!r}: microseconds 0..60000000 (0: never)")
    t = FlowTable(buckets, source=str(p), idle_us=idle)
    for r in data.get("flows") or []:
        line = int(r.get("__line__", 0)) if isinstance(r, dict) else 0
        if not isinstance(r, dict):
            raise FlowError(f"{p}: flows: each flow is a mapping")
        t.flows.append(parse_flow(r, f"{p}:{line}", router, line))
    for slot, v in (data.get("plugins") or {}).items():
        if slot == "__line__":
            continue
        line = data["plugins"]["__line__"]
        if not isinstance(slot, int) or not 1 <= slot <= 15:
            raise FlowError(f"{p}:{line}: plugins: {slot!r}: a slot 1..15")
        if not isinstance(v, dict) or "name" not in v:
            raise FlowError(f"{p}:{line}: plugins.{slot}: {{name: PLUGIN, args: [..]}}")
        from .plugins import PLUGINS

        if v["name"] not in PLUGINS:
            raise FlowError(f"{p}:{line}: plugins.{slot}.name: {v['name']!r}: one of {', '.join(PLUGINS)}")
        t.plugins[slot] = {"name": str(v["name"]), "args": [int(a) for a in v.get("args", [])]}
    t.place(mult)
    return t


_LATE = ("no_route", "ttl_expired", "redirect", "arp_miss")  # what parse leaves to lookup and hdr_format


class FlowModel:
    """What the flow table does to each packet (composed after the base's verdicts, as
    an application's model is): a packet that parse passes (the base forwards it, or
    decides at step 19 or later) and whose key has an entry is counted; a route entry
    gives it hdr_format's steps 20-23 on the flow's own next hop (TTL, redirect, the
    rewrite) instead of the route lookup's; a plugin entry hands it to the control plane
    (`plugin`).  `counts`: the packets and bytes each flow should have counted."""

    def __init__(self, table: FlowTable, router: Any) -> None:
        self.table = table
        self.router = router
        self.counts: dict[FlowKey, list[int]] = {f.key: [0, 0] for f in table.flows}
        self.hits = 0
        self.plugin_state: dict[int, dict[str, Any]] = {}
        self.slots: dict[int, dict[str, Any] | None] = dict(table.plugins)  # as the daemon has them
        self.changes: dict[FlowKey, list[tuple[int, Flow | None]]] = {}  # what the daemon changed, when
        self.window_ns = 20_000  # around a change the fast path may have either table (ControlJudge sets it)
        self.history: list[tuple[int, int, dict[str, Any] | None, dict[str, Any] | None]] = []  # at, slot, before, after

    def decide(self, frame: bytes, in_port: int, count: bool = True) -> tuple[str, Any] | None:
        """("forward", (port, bytes)) | ("exception", reason) | None (the base stands), by
        the declared table (the fast path's at the start)."""
        key = key_of(frame)
        f = self.table.lookup(key) if key is not None else None
        if f is None:
            return None
        if count:
            c = self.counts[f.key]
            c[0] += 1
            c[1] += struct.unpack_from("!H", frame, 16)[0]
            self.hits += 1
        return self._outcome(f, frame, in_port)

    def _outcome(self, f: Flow, frame: bytes, in_port: int) -> tuple[str, Any] | None:
        if f.action == "count":
            return None
        if f.action == "plugin":
            return "exception", "plugin"
        if frame[22] <= 1:
            return "exception", "ttl_expired"
        p_in = self.router.ports[in_port]
        if self.router.send_redirects and f.port == in_port and p_in.on_subnet(f.key.src):
            return "exception", "redirect"
        from .oracle import rewrite

        return "forward", (f.port, rewrite(frame, bytes(self.router.arp[f.via]), bytes(self.router.ports[f.port].mac)))

    # -- the table as the control daemon changes it (its log: flow_changed)
    def flow_changed(self, at_ns: int, key: FlowKey, word: int) -> None:
        """The daemon made `key`'s entry `word` (proto << 24 | action << 16 | arg; action 0:
        deleted) at `at_ns`, before the fast path had it."""
        action, arg = (word >> 16) & 0xFF, word & 0xFFFF
        names = {v: k for k, v in ACTIONS.items()}
        was = self.flow_at(key, at_ns)
        f: Flow | None = None
        if action in names:
            name = names[action]
            if name == "route" and was is not None and was.action == "route":
                f = was  # (a route entry is declared; the socket rebinds it, it does not make one)
            elif name != "route":
                f = Flow(key, name, plugin=arg if name == "plugin" else 0)
        self.changes.setdefault(key, []).append((at_ns, f))

    def flow_at(self, key: FlowKey, t: int) -> Flow | None:
        f = self.table.lookup(key)
        for at, g in self.changes.get(key, ()):
            if at > t:
                break
            f = g
        return f

    def _versions_near(self, key: FlowKey, t: int, window: int) -> list[Flow | None]:
        out: list[Flow | None] = []
        f = self.table.lookup(key)
        for at, g in self.changes.get(key, ()):
            if abs(at - t) <= window:
                out += [f, g]
            f = g
        return out

    def compose(self, base: Any, frame: bytes, in_port: int, t: int = 0, window: int = 0) -> tuple[Any, list[Any]]:
        """The oracle's Outcome of a packet (the Python one's) with the flow table as it
        was at `t` applied, and the outcomes by the tables of the changes within `window`
        of t (the fast path may have had either)."""
        from .oracle import Except, Forward

        if not isinstance(base, Forward) and not (isinstance(base, Except) and base.reason in _LATE):
            return base, []
        key = key_of(frame)
        if key is None:
            return base, []
        main = self._with(base, self.flow_at(key, t), frame, in_port)
        alts = [self._with(base, g, frame, in_port) for g in self._versions_near(key, t, window)]
        return main, [a for a in alts if a != main]

    def _with(self, base: Any, f: Flow | None, frame: bytes, in_port: int) -> Any:
        from .oracle import Except, Forward

        d = self._outcome(f, frame, in_port) if f is not None else None
        if d is None:
            return base
        return Except(d[1]) if d[0] == "exception" else Forward(*d[1])

    def slot_of(self, frame: bytes, t: int | None = None) -> int:
        key = key_of(frame)
        if key is None:
            return 0
        f = self.table.lookup(key) if t is None else self.flow_at(key, t)
        return f.plugin if f is not None and f.action == "plugin" else 0

    def plugin_frame(self, frame: bytes, now_ns: int, state: dict[str, Any] | None = None,
                     use_state: bool = False) -> bytes | None:  # fmt: skip
        """What the daemon's plugin slot bound to the frame's flow makes of it (None: it
        dropped it): the slot as the daemon's plugin log says it now is (flows.yaml
        `plugins:` at its start), or `state` with `use_state`; an empty slot passes it
        unchanged."""
        from .plugins import PLUGINS

        slot = self.slot_of(frame, now_ns)
        p = state if use_state else self.slots.get(slot)
        if p is None or not (slot or use_state):
            return frame
        own = {} if use_state else self.plugin_state.setdefault(slot, {})
        return PLUGINS[p["name"]](frame, list(p.get("args", [])), own, now_ns)

    def plugin_changed(self, at_ns: int, slot: int, state: dict[str, Any] | None) -> None:
        before = self.slots.get(slot)
        self.slots[slot] = state
        self.plugin_state.pop(slot, None)
        self.history.append((at_ns, slot, before, state))

    def slot_states_near(self, frame: bytes, t: int) -> list[dict[str, Any] | None]:
        """The plugins of the slots the flow's entry named within `window_ns` of t (the
        fast path's lookup put the one it found in the packet word)."""
        key = key_of(frame)
        if key is None:
            return []
        now = self.flow_at(key, t)
        return [self.slots.get(g.plugin) for g in self._versions_near(key, t, self.window_ns)
                if g is not None and g.action == "plugin" and g != now]

    def states_near(self, frame: bytes, t: int, window: int) -> list[dict[str, Any] | None]:
        """The slot's states before and after each change within `window` of t."""
        slot = self.slot_of(frame, t)
        out: list[dict[str, Any] | None] = []
        for at, s, before, after in self.history:
            if s == slot and abs(at - t) <= window:
                out += [before, after]
        return out

    def apply(self, v: Any, data: bytes | bytearray, off: Any, lens: Any, ports: Any) -> Any:
        from dataclasses import replace

        from .cpkt import EXCEPTION, FORWARD, PYTHON

        names = v.names if "plugin" in v.names else (*v.names, "plugin")
        v = replace(v, names=names)
        late = {names.index(n) for n in _LATE}
        index = {n: k for k, n in enumerate(names)}
        mv = memoryview(data)
        for i in range(len(lens)):
            k = v.kind[i]
            if k == PYTHON or (k != FORWARD and v.reason[i] not in late):
                continue
            frame = bytes(mv[off[i] : off[i] + lens[i]])
            d = self.decide(frame, ports[i])
            if d is None:
                continue
            if d[0] == "exception":
                v.kind[i], v.reason[i] = EXCEPTION, index[d[1]]
            else:
                port, out = d[1]
                v.kind[i], v.reason[i], v.port[i] = FORWARD, 0, port
                v.out[off[i] : off[i] + lens[i]] = out
        return v
