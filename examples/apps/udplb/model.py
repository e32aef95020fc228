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
_HEADER = struct.Struct("!10H")  # the IPv4 header's 16-bit words


def backend_index(src: int, sport: int, first: int, count: int) -> int:
    """The row of `backends` a frame from (src, sport) goes to (see the module doc)."""
    x = src ^ sport
    h = (x >> 16) ^ (x & 0xFFFF)
    return first + ((h * count) >> 16)


def _add(ck: int, old: int, new: int) -> int:
    """One 16-bit word `old` -> `new` into a running sum of RFC 1624 eq. 3."""
    return ck + (~old & 0xFFFF) + new


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
    if frame[0:6] != macs[in_port]:
        return NOT_OURS
    if frame[12] != 8 or frame[13] != 0:
        return NOT_IPV4
    total = frame[16] << 8 | frame[17]
    if frame[14] != 0x45 or total < 20 or total > n - 14:
        return BAD_HEADER
    if _fold(sum(_HEADER.unpack_from(frame, 14))) != 0xFFFF:
        return BAD_HEADER
    if (frame[20] << 8 | frame[21]) & 0x3FFF:
        return FRAGMENT
    if frame[23] != 17:
        return NOT_UDP
    dst = int.from_bytes(frame[30:34], "big")
    svc = services.get((dst, frame[36] << 8 | frame[37]))
    if svc is None:
        return NO_SERVICE
    ttl = frame[22]
    if ttl <= 1:
        return TTL_EXPIRED
    src = int.from_bytes(frame[26:30], "big")
    ip, macs12, port = backends[backend_index(src, frame[34] << 8 | frame[35], *svc)]
    old_hi, old_lo, new_hi, new_lo = dst >> 16, dst & 0xFFFF, ip >> 16, ip & 0xFFFF
    ck = _add(_add((~(frame[24] << 8 | frame[25])) & 0xFFFF, old_hi, new_hi), old_lo, new_lo) + 0xFEFF
    ck = ~_fold(ck) & 0xFFFF
    uck = frame[40] << 8 | frame[41]
    if uck:
        uck = ~_fold(_add(_add((~uck) & 0xFFFF, old_hi, new_hi), old_lo, new_lo)) & 0xFFFF or 0xFFFF
    return forward(port, b"".join((macs12, frame[12:22], bytes((ttl - 1, 17)), ck.to_bytes(2, "big"),
                                   frame[26:30], ip.to_bytes(4, "big"), frame[34:40], uck.to_bytes(2, "big"),
                                   frame[42:])))
