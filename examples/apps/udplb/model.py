"""The UDP load balancer's reference model (docs/applications.md, "A data path of your
own"): the application has no base, so this model decides every frame, in the order of
reasons.yaml -- the first test that holds drops the frame with its reason; a frame that
passes them all goes to a backend of its service.

The backend is chosen by a hash of the source address and port (udplb/udplb.uc computes
the same)::

    x = src_ip ^ src_port;  h = (x >> 16) ^ (x & 0xFFFF)      # 16 bits
    backend = service.first + (h * service.count >> 16)       # count backends, h spread evenly

The frame leaves on the backend's port with the backend's MAC as destination, the
port's MAC (router.yaml) as source, the backend's address as destination address, TTL
one less, and both checksums updated incrementally (RFC 1624 eq. 3): the IPv4 header's
for the TTL and the address, the UDP checksum for the address (it is in the pseudo
header) -- a zero UDP checksum ("none", RFC 768) stays zero, a result of zero is sent as
0xFFFF.  The UDP checksum is kept right rather than zeroed so that the backend still
checks the datagram end to end.
"""

import struct

from npkit.emulator.traffic.model import decide, drop, forward

RUNT = drop("lb_runt")
NOT_OURS = drop("lb_not_ours")
NOT_IPV4 = drop("lb_not_ipv4")
BAD_HEADER = drop("lb_bad_header")
FRAGMENT = drop("lb_fragment")
NOT_UDP = drop("lb_not_udp")
NO_SERVICE = drop("lb_no_service")
TTL_EXPIRED = drop("lb_ttl_expired")
_HEADER = struct.Struct("!10H")  # the IPv4 header's 16-bit words (at byte 14)
# frame bytes 0..41: destination MAC, EtherType, version/IHL, total length, flags/offset,
# TTL, protocol, header checksum, source and destination address, UDP ports and checksum
_HEADERS = struct.Struct("!6s6xHBxH2xHBBHIIHH2xH")
_REWRITE = struct.Struct("!BBHII")  # bytes 22..33: TTL, protocol, checksum, addresses
_U16 = struct.Struct("!H")


def backend_index(src: int, sport: int, first: int, count: int) -> int:
    """The row of `backends` a frame from (src, sport) goes to (see the module doc)."""
    x = src ^ sport
    h = (x >> 16) ^ (x & 0xFFFF)
    return first + ((h * count) >> 16)


def _fold(s: int) -> int:
    s = (s & 0xFFFF) + (s >> 16)
    return (s & 0xFFFF) + (s >> 16)


def setup(tables, router):
    """Services by (vip, port) -> (first, count); backends as what a frame's rewrite needs;
    the ports' MACs.  A service pointing past the backends is an error here."""
    backends = tables["backends"]
    services = {}
    for k, s in enumerate(tables["services"]):
        if not 1 <= s["count"] <= 16 or s["first"] + s["count"] > len(backends):
            raise ValueError(f"services row {k}: backends {s['first']}..{s['first'] + s['count'] - 1} "
                             f"(count 1..16, rows of backends 0..{len(backends) - 1})")
        services.setdefault((s["vip"], s["port"]), (s["first"], s["count"]))
    macs = [bytes(p.mac) for p in router.ports]
    out = []
    for k, b in enumerate(backends):
        if b["port"] >= len(macs):
            raise ValueError(f"backends row {k}: port {b['port']}: the router has ports 0..{len(macs) - 1}")
        mac = b["mac_hi"].to_bytes(4, "big") + b["mac_lo"].to_bytes(2, "big")
        out.append((b["ip"], mac + macs[b["port"]], b["port"]))
    return services, out, macs


@decide(setup=setup)
def udplb(frame, in_port, ctx):
    services, backends, macs = ctx.state
    n = len(frame)
    if n < 60:
        return RUNT
    dmac, etype, ver_ihl, total, frag, ttl, proto, hc, src, dst, sport, dport, uck = _HEADERS.unpack_from(frame)
    if dmac != macs[in_port]:
        return NOT_OURS
    if etype != 0x0800:
        return NOT_IPV4
    if ver_ihl != 0x45 or total < 20 or total > n - 14 or _fold(sum(_HEADER.unpack_from(frame, 14))) != 0xFFFF:
        return BAD_HEADER
    if frag & 0x3FFF:
        return FRAGMENT
    if proto != 17:
        return NOT_UDP
    svc = services.get((dst, dport))
    if svc is None:
        return NO_SERVICE
    if ttl <= 1:
        return TTL_EXPIRED
    ip, macs12, port = backends[backend_index(src, sport, *svc)]
    ds = (~dst >> 16 & 0xFFFF) + (~dst & 0xFFFF) + (ip >> 16) + (ip & 0xFFFF)  # the address's change
    ck = ~_fold((~hc & 0xFFFF) + 0xFEFF + ds) & 0xFFFF  # + 0xFEFF: TTL - 1 in the word TTL|protocol
    if uck:
        uck = ~_fold((~uck & 0xFFFF) + ds) & 0xFFFF or 0xFFFF
    out = bytearray(frame)
    out[0:12] = macs12
    _REWRITE.pack_into(out, 22, ttl - 1, proto, ck, src, ip)
    _U16.pack_into(out, 40, uck)
    return forward(port, out)
