"""The bytes of generated frames: one port's frames of every kind, drawn from that
port's content stream (FrameBuilder), and the destinations a forwardable frame may take.
The generator (npkit.emulator.traffic.generator) schedules them; the C builder
(npkit.emulator.traffic.cpkt.CFrameBuilder) builds the same frames faster."""

from __future__ import annotations

import itertools
import random
import struct
from array import array
from collections import deque
from collections.abc import Callable
from functools import lru_cache

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
    TCP,
    TCP_ACK,
    TCP_PSH,
    UDP,
    Ethernet,
    IPv4,
    internet_checksum,
)
from .router_config import RouterConfig
from .routes import Route, RouteColumns, is_reserved, mask
from .spec import PortSpec, SpecError, TrafficSpec
from .spec_fields import IP_PROTO_NAMES, L4_HEADER, VLAN_ETHERTYPE, FieldDraws

TUNNEL_PORT = 49152  # outer UDP destination port of seed-003 tunnel packets
ROUTER_ALERT = b"\x94\x04\x00\x00"  # RFC 2113 IP option: 4 bytes, IHL 6
TAG = b"NPK1"
BENCHMARK_NET = 0xC6120000  # 198.18.0.0/15 (RFC 2544): sources of generated traffic
# the control plane forwards packets with IP options: long enough for TCP, 16 bytes of
# options and the whole tag, so that a forwarded one names its input
OPTION_KINDS = ("record_route", "timestamp", "lsrr", "ssrr", "bad_option")
MIN_TAGGED_WITH_OPTIONS = 14 + 20 + 16 + 20 + 8


def tester_mac(port: int) -> bytes:
    """MAC of the traffic source attached to `port` (locally administered)."""
    return bytes([0x02, 0x00, 0x00, 0xFF, 0x00, port & 0xFF])


def _martian_dst(addr: int) -> bool:
    top = addr >> 24
    return top in (0, 127) or addr >= 0xE0000000


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
        self.fields: FieldDraws | None = None
        if port.fields:  # `fields:` shape the normal packets, from a stream of their own
            self.fields = FieldDraws(port.fields, random.Random(f"npkit-traffic:{spec.seed}:{port.index}:fields"))
            self.build["normal"] = self._fields_normal

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

    def _fields_normal(self, length: int, pid: int) -> bytes:
        """A normal packet with the port's `fields:`: each field the spec sets drawn from
        the fields stream, the others from the content stream as ip_frame draws them."""
        fd = self.fields
        assert fd is not None
        dst_mac, src_mac = fd.draw("dst_mac"), fd.draw("src_mac")
        vlan, proto = fd.draw("vlan"), fd.draw("ip_proto")
        src, dst = fd.address("src"), fd.address("dst")
        sport, dport, flags = fd.draw("src_port"), fd.draw("dst_port"), fd.draw("tcp_flags")
        ttl, tos = fd.draw("ttl"), fd.draw("tos")
        options = bytes.fromhex(fd.draw("ip_options") or "")
        filler = fd.draw("payload") or "zeros"
        src = self.src_normal() if src is None else src
        dst = self.dst_normal() if dst is None else dst
        proto = IP_PROTO_NAMES[self._proto()] if proto is None else proto
        bits = self.rng.getrandbits(32)
        sport = 1024 + (bits >> 16) % 64512 if sport is None else sport
        dport = (bits & 0xFFFF) or 1 if dport is None else dport
        eth = (self.me.mac if dst_mac is None else bytes.fromhex(dst_mac)) + (
            self.src_mac if src_mac is None else bytes.fromhex(src_mac))
        if vlan is not None:
            eth += struct.pack("!HH", VLAN_ETHERTYPE, self.port.fields["vlan"]["pcp"] << 13 | vlan)
        eth += b"\x08\x00"
        ip_len = length - len(eth)
        room = ip_len - 20 - len(options) - L4_HEADER.get(proto, 0)
        if room < 0:  # the schema checks the smallest size against the fields' headers
            raise SpecError(f"ports.{self.port.index}.fields: a {length}-byte frame has no room for its headers")
        tag = (TAG + (pid & 0xFFFFFFFF).to_bytes(4, "big"))[:room]
        if filler.startswith("header:"):  # an encapsulated header, then the tag and zeros
            hexed, _, at = filler.removeprefix("header:").partition("@")
            head = bytes.fromhex(hexed)
            if at:  # the tag inside the header, at its offset (so a frame of the header alone has one)
                k = int(at)
                head = head[:k] + tag + head[k + len(tag) :]
                tag = b""
            head = head[:room]
            tag = tag[: room - len(head)]
            payload = head + tag + bytes(room - len(head) - len(tag))
        else:
            payload = tag + self._filler(filler, room - len(tag))
        self.ident = ident = (self.ident + 1) & 0xFFFF
        if proto == IPPROTO_UDP:
            seg = UDP(sport, dport).pack(payload, src, dst)
        elif proto == IPPROTO_TCP:
            seq, ack = self.rng.getrandbits(32), self.rng.getrandbits(32)
            seg = TCP(sport, dport, seq, ack, TCP_ACK | TCP_PSH if flags is None else flags).pack(payload, src, dst)
        elif proto == IPPROTO_ICMP:  # an echo request
            seg = ICMP(8, 0, struct.pack("!HH", ident, pid & 0xFFFF)).pack(payload)
        else:
            seg = payload
        hdr = IPv4(src, dst, proto, ttl=64 if ttl is None else ttl, tos=tos or 0, identification=ident,
                   flags=2 if proto == IPPROTO_TCP else 0, options=options)  # fmt: skip
        return eth + hdr.pack(len(seg)) + seg

    def _filler(self, kind: str, n: int) -> bytes:
        """The payload after the tag: zeros, bytes of the fields stream, or a pattern."""
        if kind == "zeros" or n <= 0:
            return bytes(max(n, 0))
        if kind == "random":
            assert self.fields is not None
            return self.fields.rng.randbytes(n)
        pattern = bytes.fromhex(kind.removeprefix("pattern:"))
        return (pattern * (n // len(pattern) + 1))[:n]

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
