"""Traffic generation: a spec (npkit.emulator.traffic.spec) in, timed frames out.

Why the work is split in two passes: each port first draws its *schedule* (arrival
time, size, kind) from its own random stream, then the ports are merged in time order,
which fixes the global packet ids, and only then are the frame bytes built, each port
again from its own stream. So a port's traffic does not change when another port's
settings do, the whole output is a function of the spec and the seed, and the payload
can carry the packet id.

Packet ids: the rank of a packet in (arrival time, port, per-port index) order,
starting at 0. `dataset.load_traffic` gives the same ids to any directory of pcaps, so
ids mean the same thing for generated and replayed traffic.

Timestamps: the instant the packet's first byte on the wire (preamble, if the wire
model counts one) begins to arrive, in nanoseconds from 0. Its last frame byte arrives
(preamble + pcap length + FCS) * 8 / link_bps seconds later; the IFG follows.

Payload: every generated frame with room for it carries b"NPK1" + the 32-bit packet id
at the start of its (innermost) payload, then zeros, so a frame found anywhere can be
traced to its input.

Output (`write_traffic`): DIR/port<N>.pcap (nanosecond pcap, one per enabled port) and
DIR/manifest.json::

    {"format": "npkit-traffic/1", "seed": ..., "spec": {...as given...},
     "link_bps": ..., "ports": [{"port", "pcap", "packets", "bytes", "wire": {...}}],
     "kinds": ["normal", ...],
     "packets": {"port": [...], "time_ns": [...], "len": [...], "kind": [...]}}

`packets` is columnar, indexed by packet id; `kind` indexes `kinds`.
"""

from __future__ import annotations

import itertools
import json
import random
import struct
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from npkit.toolchain.writing import make_dir

from .packet import (
    ARP,
    ARP_REPLY,
    ARP_REQUEST,
    BROADCAST_MAC,
    ETHERTYPE_ARP,
    ETHERTYPE_IPV6,
    ICMP,
    IPPROTO_ICMP,
    IPPROTO_TCP,
    IPPROTO_UDP,
    TCP_ACK,
    TCP_PSH,
    UDP,
    Ethernet,
    IPv4,
    internet_checksum,
    pad_frame,
)
from .pcap import PcapReader, PcapWriter
from .router_config import RouterConfig
from .routes import Route, RouteColumns, is_reserved, mask
from .spec import KINDS, PortSpec, SpecError, TrafficSpec
from .spec_forms import MAX_PACKETS
from .window import Window, offsets

TUNNEL_PORT = 49152  # outer UDP destination port of seed-003 tunnel packets
ROUTER_ALERT = b"\x94\x04\x00\x00"  # RFC 2113 IP option: 4 bytes, IHL 6
TAG = b"NPK1"
BENCHMARK_NET = 0xC6120000  # 198.18.0.0/15 (RFC 2544): sources of generated traffic
KIND_INDEX = {k: i for i, k in enumerate(KINDS)}
# the control plane forwards packets with IP options: long enough for TCP, 16 bytes of
# options and the whole tag, so that a forwarded one names its input
OPTION_KINDS = ("record_route", "timestamp", "lsrr", "ssrr", "bad_option")
MIN_TAGGED_WITH_OPTIONS = 14 + 20 + 16 + 20 + 8
MANIFEST = "manifest.json"


@dataclass
class GenPacket:
    id: int
    port: int
    time_ns: int
    data: bytes
    kind: str


def tester_mac(port: int) -> bytes:
    """MAC of the traffic source attached to `port` (locally administered)."""
    return bytes([0x02, 0x00, 0x00, 0xFF, 0x00, port & 0xFF])


def _martian_dst(addr: int) -> bool:
    top = addr >> 24
    return top in (0, 127) or addr >= 0xE0000000


# ---------------------------------------------------------------------------- arrivals


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Clock:
    """Arrival process: `next(wire_bits)` gives the start time of the next frame.

    Integer arithmetic where the process is deterministic (constant, burst, on-off), so
    a 672-ns spacing stays exactly 672 ns over millions of packets."""

    def __init__(self, port: PortSpec, link_bps: int, rng: random.Random) -> None:
        self.arr = port.arrivals
        self.rate = port.rate_bps
        self.link = link_bps
        self.rng = rng
        self.start = port.start_ns
        self.bits = 0  # wire bits offered so far (constant, burst)
        self.now = float(port.start_ns)  # poisson
        self.in_burst = self.arr.burst  # burst: frames sent in the current burst
        self.burst_start = port.start_ns
        self.burst_bits = 0
        self.period = port.start_ns  # on-off: start of the current ON period
        self.on_end = port.start_ns + self._draw(self.arr.on_ns)
        self.last_end = port.start_ns

    def _draw(self, mean_ns: int) -> int:
        if not self.arr.exponential or mean_ns == 0:
            return mean_ns
        return max(1, round(self.rng.expovariate(1.0 / mean_ns)))

    def next(self, wbits: int) -> int:
        kind = self.arr.kind
        ns = 1_000_000_000
        if kind == "constant":
            t = self.start + self.bits * ns // self.rate
            self.bits += wbits
            return t
        if kind == "poisson":
            # Poisson offers queue at the sender; a frame starts when it has been offered
            # and the link is free, so the long-run rate is the offered rate (for load < 1)
            t = max(int(self.now), self.last_end)
            self.now += self.rng.expovariate(1.0) * wbits * 1e9 / self.rate
            self.last_end = t + _ceil_div(wbits * ns, self.link)
            return t
        if kind == "burst":
            if self.in_burst >= self.arr.burst:
                self.burst_start = self.start + self.bits * ns // self.rate
                self.in_burst, self.burst_bits = 0, 0
            t = self.burst_start + self.burst_bits * ns // self.link
            self.in_burst += 1
            self.burst_bits += wbits
            self.bits += wbits
            return t
        # on_off
        t = self.period + self.bits * ns // self.rate
        if t >= self.on_end:
            self.period = max(self.on_end + self._draw(self.arr.off_ns), self.last_end)
            self.on_end = self.period + self._draw(self.arr.on_ns)
            self.bits = 0
            t = self.period
        self.bits += wbits
        self.last_end = t + _ceil_div(wbits * ns, self.link)
        return t


# ---------------------------------------------------------------------------- schedules


def synthetic_arrivals(spec: TrafficSpec, port: PortSpec, count: int, end: int) -> Iterator[tuple[int, int, int]]:
    """A synthetic port's arrivals, lazily: (time, pcap length, kind index), drawn from the
    port's schedule stream until `count` packets or time `end`."""
    rng = random.Random(f"npkit-traffic:{spec.seed}:{port.index}:schedule")
    clock = _Clock(port, spec.link_bps, rng)
    wire = port.wire
    overhead = wire.fcs + wire.preamble + wire.ifg
    normal = KIND_INDEX["normal"]
    runt = KIND_INDEX["runt"]
    long_kinds = {KIND_INDEX[k] for k in OPTION_KINDS}
    kind_ids = [KIND_INDEX[k] for k in port.mix] + [normal]
    cum = []
    acc = 0.0
    for w in [*port.mix.values(), max(0.0, 1.0 - sum(port.mix.values()))]:
        acc += w
        cum.append(acc)
    sizes = port.size
    fixed = sizes.values[0] if len(sizes.values) == 1 and sizes.uniform is None else None
    random_ = rng.random
    clock_next = clock.next
    mix = bool(port.mix)
    fcs = wire.fcs
    n = 0
    while n < count:
        size = fixed if fixed is not None else sizes.sample(rng)
        plen = size - fcs
        kind = normal
        if mix:
            r = random_() * acc
            for i, c in enumerate(cum):
                if r < c:
                    kind = kind_ids[i]
                    break
            if kind == runt:
                plen = rng.randint(42, 59)
            elif kind in long_kinds:
                plen = max(plen, MIN_TAGGED_WITH_OPTIONS)
        t = clock_next((plen + overhead) * 8)
        if t >= end:
            return
        if n >= MAX_PACKETS:
            raise SpecError(f"ports.{port.index}: more than {MAX_PACKETS:,} packets: lower count or duration_ns")
        yield t, plen, kind
        n += 1


class Schedule:
    """One port's arrivals: parallel arrays of time, pcap length and kind index.

    Synthetic ports draw sizes and kinds from the port's schedule stream; replay ports
    take both from the capture (kind "replay") and keep the frames in `frames`."""

    def __init__(self, spec: TrafficSpec, port: PortSpec) -> None:
        self.port = port
        self.times = array("q")
        self.lens = array("H")
        self.kinds = array("B")
        self.frames: list[bytes] | None = None
        self.delayed = 0  # replayed frames moved later because the link was busy
        if not port.enabled:
            return
        count = spec.count if spec.count is not None else 1 << 62
        end = spec.duration_ns if spec.duration_ns is not None else 1 << 62
        if port.replay is not None:
            self._replay(spec, port, count, end)
        else:
            self._synthetic(spec, port, count, end)

    def __len__(self) -> int:
        return len(self.times)

    def _synthetic(self, spec: TrafficSpec, port: PortSpec, count: int, end: int) -> None:
        times, lens, kinds = self.times, self.lens, self.kinds
        for t, plen, kind in synthetic_arrivals(spec, port, count, end):
            times.append(t)
            lens.append(plen)
            kinds.append(kind)

    def _replay(self, spec: TrafficSpec, port: PortSpec, count: int, end: int) -> None:
        assert port.replay is not None
        replay = port.replay
        try:
            with PcapReader(replay.path) as reader:
                records = list(reader)
        except (OSError, ValueError) as exc:
            raise SpecError(f"ports.{port.index}.source: {exc}") from None
        frames_in = [pad_frame(r.data) if replay.pad else r.data for r in records]
        if not frames_in:
            self.frames = []
            return
        wire = port.wire
        ns = 1_000_000_000
        ser = [_ceil_div(wire.wire_bytes(len(f)) * 8 * ns, spec.link_bps) for f in frames_in]
        clock = _Clock(port, spec.link_bps, random.Random(0))
        base = records[0].timestamp_ns
        span = records[-1].timestamp_ns - base + ser[-1]
        frames: list[bytes] = []
        busy_until = port.start_ns
        replay_kind = KIND_INDEX["replay"]
        self.frames = frames
        for loop in range(replay.loop):
            for rec, frame, s in zip(records, frames_in, ser, strict=True):
                if len(frames) >= count:
                    return
                if replay.timing == "original":
                    t = port.start_ns + rec.timestamp_ns - base + loop * span
                    if t < busy_until:
                        self.delayed += 1
                        t = busy_until
                else:
                    t = clock.next(wire.wire_bytes(len(frame)) * 8)
                if t >= end:  # every later frame, of this loop and the next, is later still
                    return
                if len(frames) >= MAX_PACKETS:
                    raise SpecError(f"ports.{port.index}.source: the replay would make more than "
                                    f"{MAX_PACKETS:,} packets: lower loop, or set count or duration_ns")  # fmt: skip
                busy_until = t + s
                self.times.append(t)
                self.lens.append(len(frame))
                self.kinds.append(replay_kind)
                frames.append(frame)


# ---------------------------------------------------------------------------- frame bytes


@lru_cache(maxsize=16)
def forwardable_pool(cfg: RouterConfig, via_port: int | None) -> RouteColumns:
    """Routes whose packets the router forwards (leaving by `via_port`, if given): the
    next hop has an ARP entry; for connected subnets, the on-link hosts that have one
    (as /32s).  Not the way back to the generator's own sources (routes inside
    BENCHMARK_NET).  Computed once per router config and port."""
    from npkit.emulator.pktlib import lib

    st = cfg.static_routes
    assert isinstance(st, RouteColumns)
    good = array("I", sorted(h for h in cfg.arp if h))  # next hops with an ARP entry (0: direct)
    n = len(st)
    ffi, c = lib()
    pool = RouteColumns(array("I", bytes(4 * n)), array("B", bytes(n)), array("I", bytes(4 * n)), array("I", bytes(4 * n)))
    if n:
        k = c.npk_routes_select(n, ffi.from_buffer("uint32_t[]", st.prefix), ffi.from_buffer("uint8_t[]", st.length),
                                ffi.from_buffer("uint32_t[]", st.next_hop), ffi.from_buffer("uint32_t[]", st.port),
                                ffi.from_buffer("uint32_t[]", good) if good else ffi.NULL, len(good),
                                -1 if via_port is None else via_port, BENCHMARK_NET, 15,
                                ffi.from_buffer("uint32_t[]", pool.prefix),
                                ffi.from_buffer("uint8_t[]", pool.length), ffi.from_buffer("uint32_t[]", pool.next_hop),
                                ffi.from_buffer("uint32_t[]", pool.port))  # fmt: skip
    else:
        k = 0
    for col in (pool.prefix, pool.length, pool.next_hop, pool.port):
        del col[k:]
    for addr in sorted(cfg.arp):
        port = cfg.port_for_subnet(addr)
        if port is not None and addr != port.address and (via_port is None or port.index == via_port):
            pool.append(Route(addr, 32, 0, port.index))
    return pool


class FrameBuilder:
    """Builds the bytes of one port's frames, from that port's content stream."""

    def __init__(self, spec: TrafficSpec, port: PortSpec) -> None:
        self.spec = spec
        self.port = port
        self.cfg = spec.router
        self.me = spec.router.ports[port.index]
        self.rng = random.Random(f"npkit-traffic:{spec.seed}:{port.index}:content")
        self.src_mac = tester_mac(port.index)
        self.ident = 0
        protos = [p for p, w in port.protocols.items() if w > 0]
        self.protos = protos
        self._proto_cum = list(itertools.accumulate(port.protocols[p] for p in protos))
        self._proto_total = self._proto_cum[-1]
        self._dest_pool = RouteColumns()
        self._forwardable = port.destinations is None
        self._not_unicast = set(self.cfg.addresses)  # own, network, broadcast addresses
        for p in self.cfg.ports:
            self._not_unicast |= {p.network, p.broadcast}
        self._via_port = port.via_port
        if port.destinations is None:
            self._dest_pool = forwardable_pool(self.cfg, self._via_port)
        else:
            self._dest_pool = RouteColumns.of(port.destinations)
        self.build: dict[str, Callable[[int, int], bytes]] = {
            "normal": self._normal,
            "miss": self._miss,
            "ttl_expiring": self._ttl_expiring,
            "options": self._options,
            "bad_checksum": self._bad_checksum,
            "bad_version": self._bad_version,
            "bad_ihl": self._bad_ihl,
            "truncated": self._truncated,
            "for_router": self._for_router,
            "arp": self._arp,
            "non_ipv4": self._non_ipv4,
            "broadcast": self._broadcast,
            "multicast": self._multicast,
            "martian_src": self._martian_src,
            "martian_dst": self._martian_dst,
            "runt": self._runt,
            "wrong_mac": self._wrong_mac,
            "arp_miss": self._arp_miss,
            "redirect": self._redirect,
            "link_bcast_unicast": self._link_bcast_unicast,
            "ping": self._ping,
            "record_route": self._record_route,
            "timestamp": self._timestamp,
            "lsrr": self._lsrr,
            "ssrr": self._ssrr,
            "bad_option": self._bad_option,
            "gateway_miss": self._gateway_miss,
            "ttl_fragment": self._ttl_fragment,
            "icmp_error_ttl": self._icmp_error_ttl,
            "arp_reply": self._arp_reply,
        }
        self.replies: deque[int] = deque()  # the neighbours whose ARP replies come next (SpecReader)
        self._pools: dict[str, list[Route]] = {}

    # -- addresses

    def _resolves(self, dst: int) -> bool:
        cfg = self.cfg
        if _martian_dst(dst) or dst in self._not_unicast:
            return False
        route = cfg.lookup(dst)
        if route is None:
            return False
        return (dst if route.direct else route.next_hop) in cfg.arp

    def _leaves_by_via_port(self, dst: int) -> bool:
        if self._via_port is None:
            return True
        route = self.cfg.lookup(dst)
        return route is not None and route.port == self._via_port

    def dst_normal(self) -> int:
        rng = self.rng
        pool = self._dest_pool
        if not pool:
            raise SpecError(f"ports.{self.port.index}: no destination the router would forward")
        for _ in range(100):
            r = pool[rng.randrange(len(pool))]
            dst = r.prefix | (rng.getrandbits(32) & ~mask(r.length) & 0xFFFFFFFF)
            if not self._forwardable or (self._resolves(dst) and self._leaves_by_via_port(dst)):
                return dst
        raise SpecError(f"ports.{self.port.index}: could not draw a forwardable destination")

    def src_normal(self) -> int:
        return BENCHMARK_NET | self.rng.getrandbits(17)

    # -- frames

    def _proto(self) -> str:
        if len(self.protos) == 1:
            return self.protos[0]
        r = self.rng.random() * self._proto_total
        for name, edge in zip(self.protos, self._proto_cum, strict=True):
            if r < edge:
                return name
        return self.protos[-1]

    def ip_frame(
        self, length: int, pid: int, src: int, dst: int, *, ttl: int = 64,
        options: bytes = b"", eth_dst: bytes | None = None, proto: str | None = None,
    ) -> bytes:
        """An IPv4 frame of exactly `length` bytes (the payload fills it, so there is no
        Ethernet padding and the IP total length is length - 14). Falls back to UDP if
        the chosen protocol's headers do not fit.

        UDP and TCP are packed here directly rather than through `packet`'s dataclasses:
        this is the generator's hot path. The payload is the tag then zeros, and zeros
        add nothing to a one's complement sum, so the L4 checksum covers the pseudo-
        header, the L4 header and the tag only. Tests check every checksum."""
        assert len(options) % 4 == 0
        rng = self.rng
        proto = proto or self._proto()
        hl = 14 + 20 + len(options)
        l4 = {"udp": 8, "tcp": 20, "tunnel": 8 + 20 + 8}[proto]
        if hl + l4 > length:
            proto, l4 = "udp", 8
        payload_len = length - hl - l4
        tag = (TAG + (pid & 0xFFFFFFFF).to_bytes(4, "big"))[:payload_len]
        zeros = bytes(payload_len - len(tag))
        self.ident = ident = (self.ident + 1) & 0xFFFF
        bits = rng.getrandbits(32)
        sport, dport = 1024 + (bits >> 16) % 64512, (bits & 0xFFFF) or 1
        eth = (eth_dst or self.me.mac) + self.src_mac + b"\x08\x00"
        if proto == "tunnel":
            # outer UDP (8) + inner IPv4 (20, TEST-NET-2 -> TEST-NET-3) + inner UDP (8)
            # + payload: 78 bytes leaves 8 bytes of payload, exactly the tag.
            hdr = IPv4(src, dst, IPPROTO_UDP, ttl=ttl, identification=ident, options=options)
            inner = IPv4(0xC6336400 | rng.getrandbits(8), 0xCB007100 | rng.getrandbits(8),
                         IPPROTO_UDP, identification=ident)
            inner_body = UDP(sport, dport).pack(tag + zeros, inner.src, inner.dst)
            body = inner.pack(len(inner_body)) + inner_body
            outer = UDP(sport, TUNNEL_PORT).pack(body, src, dst)
            return eth + hdr.pack(len(outer)) + outer
        seg_len = l4 + payload_len
        if proto == "tcp":
            pnum, flags, ck_off = IPPROTO_TCP, 2, 16
            l4hdr = struct.pack("!HHIIBBHHH", sport, dport, rng.getrandbits(32),
                                rng.getrandbits(32), 5 << 4, TCP_ACK | TCP_PSH, 65535, 0, 0)
        else:
            pnum, flags, ck_off = IPPROTO_UDP, 0, 6
            l4hdr = struct.pack("!HHHH", sport, dport, seg_len, 0)
        ck = internet_checksum(struct.pack("!IIBBH", src, dst, 0, pnum, seg_len) + l4hdr + tag)
        if ck == 0 and pnum == IPPROTO_UDP:
            ck = 0xFFFF  # 0 would mean "no checksum" (RFC 768)
        l4hdr = l4hdr[:ck_off] + ck.to_bytes(2, "big") + l4hdr[ck_off + 2 :]
        iphdr = bytearray(struct.pack("!BBHHHBBHII", 0x40 | (5 + len(options) // 4), 0,
                                      length - 14, ident, flags << 13, ttl, pnum, 0, src, dst))
        iphdr += options
        iphdr[10:12] = internet_checksum(iphdr).to_bytes(2, "big")
        return eth + iphdr + l4hdr + tag + zeros

    def _normal(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal())

    def _miss(self, length: int, pid: int) -> bytes:
        cfg = self.cfg
        for _ in range(10_000):
            dst = self.rng.getrandbits(32)
            if not is_reserved(dst, 32) and cfg.lookup(dst) is None:
                return self.ip_frame(length, pid, self.src_normal(), dst)
        raise SpecError("mix.miss: the route table covers the address space (a default "
                        "route?); cannot draw destinations without a route")

    def _ttl_expiring(self, length: int, pid: int) -> bytes:
        ttl = self.rng.choice((0, 1))
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), ttl=ttl)

    def _options(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(),
                             options=ROUTER_ALERT)

    @staticmethod
    def _refresh_checksum(frame: bytearray, ihl: int) -> None:
        frame[24:26] = b"\x00\x00"
        ck = internet_checksum(bytes(frame[14 : 14 + max(ihl, 5) * 4]))
        frame[24:26] = ck.to_bytes(2, "big")

    def _bad_checksum(self, length: int, pid: int) -> bytes:
        frame = bytearray(self._normal(length, pid))
        good = frame[24] << 8 | frame[25]
        while True:
            bad = good ^ self.rng.randrange(1, 0x10000)
            frame[24:26] = bad.to_bytes(2, "big")
            if internet_checksum(bytes(frame[14:34])) != 0:
                return bytes(frame)

    def _bad_version(self, length: int, pid: int) -> bytes:
        frame = bytearray(self._normal(length, pid))
        version = self.rng.choice([v for v in range(16) if v != 4])
        frame[14] = version << 4 | 5
        self._refresh_checksum(frame, 5)
        return bytes(frame)

    def _bad_ihl(self, length: int, pid: int) -> bytes:
        frame = bytearray(self._normal(length, pid))
        frame[14] = 0x40 | self.rng.randrange(0, 5)
        self._refresh_checksum(frame, 5)
        return bytes(frame)

    def _truncated(self, length: int, pid: int) -> bytes:
        frame = bytearray(self._normal(length, pid))
        total = (length - 14) + self.rng.randrange(1, 65)
        frame[16:18] = total.to_bytes(2, "big")
        self._refresh_checksum(frame, 5)
        return bytes(frame)

    def _for_router(self, length: int, pid: int) -> bytes:
        dst = self.cfg.ports[self.rng.randrange(len(self.cfg.ports))].address
        return self.ip_frame(length, pid, self.src_normal(), dst)

    def _arp(self, length: int, pid: int) -> bytes:
        me = self.me
        host = me.network | 200 if me.prefix_len <= 24 else me.broadcast - 1
        arp = ARP(ARP_REQUEST, self.src_mac, host, bytes(6), me.address)
        frame = Ethernet(BROADCAST_MAC, self.src_mac, ETHERTYPE_ARP).pack() + arp.pack()
        return frame + bytes(length - len(frame))

    def _non_ipv4(self, length: int, pid: int) -> bytes:
        frame = Ethernet(self.me.mac, self.src_mac, ETHERTYPE_IPV6).pack()
        ipv6 = struct.pack("!IHBB", 6 << 28, length - 14 - 40, 59, 64)  # next header: none
        return frame + ipv6 + bytes(length - len(frame) - len(ipv6))

    def _broadcast(self, length: int, pid: int) -> bytes:
        if self.rng.random() < 0.5:
            return self.ip_frame(length, pid, self.src_normal(), 0xFFFFFFFF,
                                 eth_dst=BROADCAST_MAC, proto="udp")
        subnet = self.cfg.ports[self.rng.randrange(len(self.cfg.ports))]
        return self.ip_frame(length, pid, self.src_normal(), subnet.broadcast, proto="udp")

    def _multicast(self, length: int, pid: int) -> bytes:
        rng = self.rng
        group = 0xE0000000 | rng.getrandbits(8) if rng.random() < 0.5 else (
            0xEF000000 | rng.getrandbits(24))
        eth_dst = bytes([0x01, 0x00, 0x5E]) + (group & 0x7FFFFF).to_bytes(3, "big")
        return self.ip_frame(length, pid, self.src_normal(), group, eth_dst=eth_dst, proto="udp")

    def _martian_src(self, length: int, pid: int) -> bytes:
        rng = self.rng
        block = rng.choice((0x00000000, 0x7F000000, 0xE0000000, 0xF0000000))
        bits = 24 if block in (0, 0x7F000000) else 28
        src = block | rng.getrandbits(bits)
        return self.ip_frame(length, pid, src, self.dst_normal())

    def _martian_dst(self, length: int, pid: int) -> bytes:
        rng = self.rng
        while True:
            block = rng.choice((0x00000000, 0x7F000000, 0xF0000000))
            bits = 24 if block in (0, 0x7F000000) else 28
            dst = block | rng.getrandbits(bits)
            if dst != 0xFFFFFFFF:
                return self.ip_frame(length, pid, self.src_normal(), dst)

    def _runt(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), proto="udp")

    def _wrong_mac(self, length: int, pid: int) -> bytes:
        while True:
            other = bytes([0x02]) + self.rng.randbytes(5)
            if other != self.me.mac:
                return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(),
                                     eth_dst=other)

    # -- the control plane's cases

    def _pick(self, pool: list[Route], what: str) -> int:
        if not pool:
            raise SpecError(f"mix.{what}: the router's table has no route for it")
        r = pool[self.rng.randrange(len(pool))]
        return r.prefix | (self.rng.getrandbits(32) & ~mask(r.length) & 0xFFFFFFFF)

    def _pool(self, name: str) -> list[Route]:
        """The forwardable routes a control-plane kind draws from (once per builder):
        `redirect`: leaving by this port; `ssrr`: behind a gateway; `gateway_miss`:
        routes whose next hop has no ARP entry."""
        pool = self._pools.get(name)
        if pool is None:
            cfg, me = self.cfg, self.me
            if name == "gateway_miss":
                st = cfg.static_routes
                assert isinstance(st, RouteColumns)
                pool = [st[i] for i, h in enumerate(st.next_hop) if h and h not in cfg.arp]
            else:
                fwd = forwardable_pool(cfg, None)
                pool = [r for r in fwd if r.length < 32 and (name != "redirect" or r.port == me.index)]
            self._pools[name] = pool
        return pool

    def _redirect(self, length: int, pid: int) -> bytes:
        """From an on-link host with an ARP entry to a destination whose route leaves by
        the same port: the router forwards it and sends a Redirect (RFC 1812 5.2.7.2)."""
        me, cfg = self.me, self.cfg
        hosts = [a for a in sorted(cfg.arp) if me.on_subnet(a) and a != me.address]
        pool = self._pool("redirect")
        if not hosts:
            raise SpecError("mix.redirect: no host with an ARP entry on the port's subnet")
        src = hosts[self.rng.randrange(len(hosts))]
        for _ in range(100):
            dst = self._pick(pool, "redirect")
            route = cfg.lookup(dst)
            if self._resolves(dst) and route is not None and route.port == me.index:
                return self.ip_frame(length, pid, src, dst)
        raise SpecError("mix.redirect: could not draw a destination routed back out of the port")

    def _link_bcast_unicast(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), eth_dst=BROADCAST_MAC)

    def icmp_frame(self, length: int, pid: int, src: int, dst: int, icmp_type: int, code: int,
                   rest: bytes = b"\x00\x00\x00\x00", ttl: int = 64, body: bytes | None = None) -> bytes:  # fmt: skip
        """An ICMP message in an IPv4 frame of exactly `length` bytes (payload: `body`, or
        the tag then zeros)."""
        room = length - 14 - 20 - 8
        payload = (body if body is not None else TAG + (pid & 0xFFFFFFFF).to_bytes(4, "big"))[:room]
        payload += bytes(room - len(payload))
        self.ident = ident = (self.ident + 1) & 0xFFFF
        msg = ICMP(icmp_type, code, rest).pack(payload)
        hdr = IPv4(src, dst, IPPROTO_ICMP, ttl=ttl, identification=ident).pack(len(msg))
        return self.me.mac + self.src_mac + b"\x08\x00" + hdr + msg

    def _ping(self, length: int, pid: int) -> bytes:
        dst = self.cfg.ports[self.rng.randrange(len(self.cfg.ports))].address
        return self.icmp_frame(length, pid, self.src_normal(), dst, 8, 0, (pid & 0xFFFF).to_bytes(2, "big") + b"\x00\x01")

    def _record_route(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), options=bytes([7, 15, 4]) + bytes(13))

    def _timestamp(self, length: int, pid: int) -> bytes:
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), options=bytes([68, 12, 5, 0]) + bytes(8))

    def _lsrr(self, length: int, pid: int) -> bytes:
        """Loose source route through the router (its receiving port's address) to a
        forwardable destination."""
        hop = self.dst_normal().to_bytes(4, "big")
        return self.ip_frame(length, pid, self.src_normal(), self.me.address, options=bytes([131, 7, 4]) + hop + b"\0")

    def _ssrr(self, length: int, pid: int) -> bytes:
        """Strict source route through the router to a destination behind a gateway: not
        on-link, so the router answers Source Route Failed."""
        hop = self._pick(self._pool("ssrr"), "ssrr").to_bytes(4, "big")
        return self.ip_frame(length, pid, self.src_normal(), self.me.address, options=bytes([137, 7, 4]) + hop + b"\0")

    def _bad_option(self, length: int, pid: int) -> bytes:
        """Record route with a length of 2: Parameter Problem pointing at the length."""
        return self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), options=bytes([7, 2, 0, 0]))

    def _gateway_miss(self, length: int, pid: int) -> bytes:
        """To a route whose next hop has no ARP entry (routes.txt: 44/8 via 10.0.2.77)."""
        cfg = self.cfg
        pool = self._pool("gateway_miss")
        for _ in range(100):
            dst = self._pick(pool, "gateway_miss")
            route = cfg.lookup(dst)
            if route is not None and not route.direct and route.next_hop not in cfg.arp:
                return self.ip_frame(length, pid, self.src_normal(), dst)
        raise SpecError("mix.gateway_miss: could not draw a destination behind an unresolved next hop")

    def _ttl_fragment(self, length: int, pid: int) -> bytes:
        """A non-first fragment with TTL 1: dropped, and no ICMP error (RFC 1812 4.3.2.7)."""
        frame = bytearray(self.ip_frame(length, pid, self.src_normal(), self.dst_normal(), ttl=1, proto="udp"))
        frame[20:22] = (185).to_bytes(2, "big")         # offset 185 x 8 bytes, no more fragments
        self._refresh_checksum(frame, 5)
        return bytes(frame)

    def _icmp_error_ttl(self, length: int, pid: int) -> bytes:
        """An ICMP error (Destination Unreachable) with TTL 1: no error about an error."""
        quoted = IPv4(self.src_normal(), self.dst_normal(), IPPROTO_UDP).pack(8) + bytes(8)
        body = quoted + TAG + (pid & 0xFFFFFFFF).to_bytes(4, "big")
        return self.icmp_frame(length, pid, self.src_normal(), self.dst_normal(), 3, 1, ttl=1, body=body)

    def arp_reply(self, length: int, neighbour: int, hw: bytes) -> bytes:
        """A neighbour's answer to the router's ARP request (RFC 826), to this port."""
        arp = ARP(ARP_REPLY, hw, neighbour, self.me.mac, self.me.address)
        frame = Ethernet(self.me.mac, hw, ETHERTYPE_ARP).pack() + arp.pack()
        return frame + bytes(length - len(frame))

    def _arp_reply(self, length: int, pid: int) -> bytes:
        """The next neighbour's reply (`replies`, in this port's arrival order)."""
        hop = self.replies.popleft()
        return self.arp_reply(length, hop, self.spec.neighbours[hop])

    def _arp_miss(self, length: int, pid: int) -> bytes:
        cfg, rng = self.cfg, self.rng
        for _ in range(10_000):
            port = cfg.ports[rng.randrange(len(cfg.ports))]
            dst = port.network | (rng.getrandbits(32) & ~port.netmask & 0xFFFFFFFF)
            if (dst not in cfg.arp and dst not in cfg.addresses
                    and dst not in (port.network, port.broadcast)):
                return self.ip_frame(length, pid, self.src_normal(), dst)
        raise SpecError("mix.arp_miss: every on-link address has an ARP entry")


# ---------------------------------------------------------------------------- driver


def schedules(spec: TrafficSpec) -> list[Schedule]:
    return [Schedule(spec, port) for port in spec.ports]


class _Port:
    """One port's arrivals as the reader pulls them, with one packet of look-ahead; and
    `extra` arrivals merged in (the neighbours' ARP replies: (time, length, kind), after
    an arrival of the same time)."""

    def __init__(self, spec: TrafficSpec, port: PortSpec, extra: list[tuple[int, int, int]] | None = None) -> None:
        self.port = port
        self.frames: list[bytes] | None = None
        self.index = 0  # per-port index of the next arrival
        self.fidx = 0  # index of the next replayed frame
        self.extra = deque(sorted(extra or []))
        if not port.enabled:
            self.it: Iterator[tuple[int, int, int]] = iter(())
        elif port.replay is not None:
            sched = Schedule(spec, port)
            self.frames = sched.frames
            self.it = zip(sched.times, sched.lens, sched.kinds, strict=True)
        else:
            count = spec.count if spec.count is not None else 1 << 62
            end = spec.duration_ns if spec.duration_ns is not None else 1 << 62
            self.it = synthetic_arrivals(spec, port, count, end)
        self.head = next(self.it, None)

    @property
    def next_time(self) -> int | None:
        t = self.head[0] if self.head is not None else None
        if self.extra and (t is None or self.extra[0][0] < t):
            t = self.extra[0][0]
        return t

    def until(self, t_ns: int) -> list[tuple[int, int, int, int, int]]:
        """(time, per-port index, length, kind, replayed frame index or -1) of the arrivals
        before t_ns."""
        out = []
        head, it, i, extra = self.head, self.it, self.index, self.extra
        while True:
            if extra and extra[0][0] < t_ns and (head is None or extra[0][0] < head[0]):
                t, n, kind = extra.popleft()
                out.append((t, i, n, kind, -1))
            elif head is not None and head[0] < t_ns:
                out.append((head[0], i, head[1], head[2], self.fidx if self.frames is not None else -1))
                self.fidx += self.frames is not None
                head = next(it, None)
            else:
                break
            i += 1
        self.head, self.index = head, i
        return out


def _needs(spec: TrafficSpec, frame: bytes | memoryview) -> int | None:
    """The next hop the router must resolve to forward `frame`, if it has no ARP entry."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return None
    dst = int.from_bytes(frame[30:34], "big")
    route = spec.router.lookup(dst)
    if route is None:
        return None
    hop = dst if route.direct else route.next_hop
    return hop if hop not in spec.router.arp else None


def neighbour_replies(spec: TrafficSpec, use_c: bool = True) -> dict[int, list[tuple[int, int]]]:
    """The generator acting as the neighbours of `spec.neighbours`: each answers the
    router's ARP request `neighbour_delay_ns` after the first packet that needs it
    arrives.  {port: [(time, neighbour), ...]}: a reply from its MAC on its port.  (A
    pass over the spec's packets, without keeping them, until every neighbour is found.)"""
    first: dict[int, int] = {}
    reader = SpecReader(spec, use_c, replies=False)
    t = 0
    while not reader.done and len(first) < len(spec.neighbours):
        t = max(t + 100_000, reader.next_time + 1)
        w = reader.take(t)
        if w is None:
            continue
        for i in range(len(w)):
            hop = _needs(spec, w.frame(i))
            if hop in spec.neighbours and hop not in first:
                first[hop] = w.times[i]
    out: dict[int, list[tuple[int, int]]] = {}
    for hop, t0 in sorted(first.items(), key=lambda kv: kv[1]):
        port = spec.router.port_for_subnet(hop)
        assert port is not None  # the spec checked it
        out.setdefault(port.index, []).append((t0 + spec.neighbour_delay_ns, hop))
    return out


ARP_REPLY_LEN = 60


class SpecReader:
    """A spec's packets in windows of arrival time, in packet-id order: each port's
    arrivals up to the window's end, merged by (time, port, per-port index), then the
    frame bytes, each port from its own content stream (in C where the C builder does the
    kind, see npkit.emulator.traffic.cpkt; `use_c=False`: the Python builder only).
    With `spec.neighbours`, their ARP replies are arrivals of their ports (kind
    arp_reply; `replies=False`: left out)."""

    def __init__(self, spec: TrafficSpec, use_c: bool = True, replies: bool = True) -> None:
        self.spec = spec
        self.use_c = use_c
        answers = neighbour_replies(spec, use_c) if replies and spec.neighbours else {}
        reply = KIND_INDEX["arp_reply"]
        self.ports = [_Port(spec, p, [(t, ARP_REPLY_LEN, reply) for t, _hop in answers.get(p.index, [])])
                      for p in spec.ports if p.enabled or p.index in answers]  # fmt: skip
        self.answers = answers
        self.builders: dict[int, Any] = {}
        self.next_id = 0

    @property
    def done(self) -> bool:
        return all(p.next_time is None for p in self.ports)

    @property
    def next_time(self) -> int:
        """Arrival time of the next packet (done: -1)."""
        return min((t for p in self.ports if (t := p.next_time) is not None), default=-1)

    def _builder(self, port: PortSpec) -> Any:
        b = self.builders.get(port.index)
        if b is None:
            b = FrameBuilder(self.spec, port)
            b.replies.extend(hop for _t, hop in self.answers.get(port.index, []))
            if self.use_c:
                from .cpkt import CFrameBuilder

                b = CFrameBuilder(b)
            self.builders[port.index] = b
        return b

    def take(self, until_ns: int) -> Window | None:
        """The packets arriving before `until_ns` not taken yet (None: none)."""
        keyed: list[tuple[int, int, int, int, int, int, int]] = []
        for k, p in enumerate(self.ports):
            pi = p.port.index
            keyed.extend((t, pi, i, n, kind, k, f) for t, i, n, kind, f in p.until(until_ns))
        if not keyed:
            return None
        keyed.sort()
        first = self.next_id
        self.next_id += len(keyed)
        w = Window(first, array("Q", [x[0] for x in keyed]), array("B", [x[1] for x in keyed]),
                   array("H", [x[3] for x in keyed]), kinds=bytes(x[4] for x in keyed))  # fmt: skip
        w.off, total = offsets(w.lens)
        w.data = bytearray(total)
        per_port: dict[int, list[int]] = {}
        for j, x in enumerate(keyed):
            if x[6] >= 0:  # a replayed frame
                f = self.ports[x[5]].frames[x[6]]  # type: ignore[index]
                w.data[w.off[j] : w.off[j] + len(f)] = f
            else:
                per_port.setdefault(x[5], []).append(j)
        for k, rows in per_port.items():
            p = self.ports[k]
            b = self._builder(p.port)
            pids = array("I", [first + j for j in rows])
            kinds = bytes(w.kinds[j] for j in rows)
            lens = array("H", [w.lens[j] for j in rows])
            if self.use_c:  # the frames straight into the window, at their places
                b.build(kinds, lens, pids, w.data, array("Q", [w.off[j] for j in rows]))
            else:
                for j, pid in zip(rows, pids, strict=True):
                    f = b.build[KINDS[w.kinds[j]]](w.lens[j], pid)
                    w.data[w.off[j] : w.off[j] + len(f)] = f
        return w


def iter_packets(spec: TrafficSpec, use_c: bool = True, window_ns: int = 100_000) -> Iterator[GenPacket]:
    """All packets of all ports, in packet-id (arrival) order."""
    reader = SpecReader(spec, use_c)
    t = 0
    while not reader.done:
        t = max(t + window_ns, reader.next_time + 1)
        w = reader.take(t)
        if w is None:
            continue
        for i in range(len(w)):
            yield GenPacket(w.first + i, w.ports[i], w.times[i], w.frame(i), KINDS[w.kinds[i]])


def generate(spec: TrafficSpec) -> list[GenPacket]:
    """Everything in memory (tests, small runs); `write_traffic` streams to disk."""
    return list(iter_packets(spec))


def write_traffic(
    spec: TrafficSpec,
    outdir: str | Path,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write DIR/port<N>.pcap and DIR/manifest.json; returns a summary."""
    outdir = make_dir(outdir)
    started = time.perf_counter()
    scheds = schedules(spec)
    total = sum(len(s) for s in scheds)
    writers = {
        s.port.index: PcapWriter(outdir / f"port{s.port.index}.pcap")
        for s in scheds if s.port.enabled
    }
    ports_of = {p.index: p for p in spec.ports}
    col_port = array("B")
    col_time = array("q")
    col_len = array("H")
    col_kind = array("B")
    byte_count = dict.fromkeys(writers, 0)
    try:
        for pkt in iter_packets(spec):
            if pkt.port not in writers:  # a neighbour's ARP reply on a port that sends nothing else
                writers[pkt.port] = PcapWriter(outdir / f"port{pkt.port}.pcap")
                byte_count[pkt.port] = 0
            writers[pkt.port].write(pkt.time_ns, pkt.data)
            col_port.append(pkt.port)
            col_time.append(pkt.time_ns)
            col_len.append(len(pkt.data))
            col_kind.append(KIND_INDEX[pkt.kind])
            byte_count[pkt.port] += len(pkt.data)
            if progress is not None and pkt.id % 65536 == 0:
                progress(pkt.id, total)
    finally:
        for w in writers.values():
            w.close()
    elapsed = time.perf_counter() - started
    ports = []
    per_port: dict[int, tuple[array[int], array[int]]] = {p: (array("q"), array("H")) for p in writers}
    for port, t, n in zip(col_port, col_time, col_len, strict=True):
        per_port[port][0].append(t)
        per_port[port][1].append(n)
    delayed = {s.port.index: s.delayed for s in scheds}
    for index in sorted(writers):
        port = ports_of[index]
        times, lens = per_port[index]
        w = port.wire
        wire_bytes = sum(w.wire_bytes(n) for n in lens)
        span = (times[-1] - times[0]) if len(times) > 1 else 0
        entry: dict[str, Any] = {
            "port": index,
            "pcap": f"port{index}.pcap",
            "packets": len(times),
            "bytes": byte_count[index],
            "wire_bytes": wire_bytes,
            "wire": {"fcs": w.fcs, "preamble": w.preamble, "ifg": w.ifg},
            "offered_bps": port.rate_bps,
            "first_ns": times[0] if len(times) else None,
            "last_ns": times[-1] if len(times) else None,
        }
        if span:
            entry["mean_gap_ns"] = span / (len(times) - 1)
        if port.replay is not None:
            entry["replay"] = str(port.replay.path)
            entry["delayed"] = delayed[index]
        ports.append(entry)
    manifest = {
        "format": "npkit-traffic/1",
        "seed": spec.seed,
        "spec": _jsonable(spec.raw),
        "link_bps": spec.link_bps,
        "ports": ports,
        "kinds": list(KINDS),
        "packets": {
            "port": col_port.tolist(),
            "time_ns": col_time.tolist(),
            "len": col_len.tolist(),
            "kind": col_kind.tolist(),
        },
    }
    # dumps, not dump: only the one-shot encoder is the fast C one
    (outdir / MANIFEST).write_text(json.dumps(manifest, separators=(",", ":")))
    kinds_count: dict[str, int] = {}
    for k in col_kind:
        kinds_count[KINDS[k]] = kinds_count.get(KINDS[k], 0) + 1
    return {
        "dir": str(outdir),
        "seed": spec.seed,
        "packets": len(col_port),
        "ports": [{k: v for k, v in p.items() if k != "wire"} for p in ports],
        "kinds": kinds_count,
        "elapsed_s": round(elapsed, 3),
        "packets_per_s": round(len(col_port) / elapsed) if elapsed > 0 else None,
    }


def _jsonable(value: Any) -> Any:
    """The spec echo: YAML scalars that JSON cannot hold become strings."""
    return json.loads(json.dumps(value, default=str))
