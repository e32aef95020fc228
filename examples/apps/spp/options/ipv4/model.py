"""The IPv4 code option's model (docs/spp.md §10): what the option does with a frame of
one of its slices -- the inner header's checks, the TCAM lookup of §5.1 (first match
wins), the filter's action, and the inner TTL - 1 with its checksum (RFC 1624 eq. 3, one
fold, as options/ipv4/ipv4.h computes it).  `spp` is spp_model.SppModel (lookup, out)."""

import struct

from npkit.emulator.traffic.oracle import Drop, Except, Outcome

OUTER = 42  # the slice payload after Ethernet, the outer IPv4 and UDP headers
TCP, UDP = 6, 17
KIND = 1  # the TCAM key's kind, the meta-interface table's option code


def ttl_checksum(ck: int) -> int:
    """RFC 1624 eq. 3 for a TTL decrement, as hdr_format computes it (one fold)."""
    c = (~ck & 0xFFFF) + 0xFEFF
    c = (c & 0xFFFF) + (c >> 16)
    return ~c & 0xFFFF


def decide(spp, frame: bytes, sl, m) -> Outcome:
    p = frame[OUTER:]
    if len(p) < 20 or p[0] >> 4 != 4 or p[0] & 0xF < 5:
        return Drop("spp_bad_inner")
    if p[8] <= 1:
        return Drop("spp_ttl_expired")
    proto = p[9]
    src, dst = struct.unpack_from("!II", p, 12)
    sport = dport = 0
    if p[0] == 0x45 and proto in (TCP, UDP) and len(p) >= 24:
        sport, dport = struct.unpack_from("!HH", p, 20)
    hits = spp.lookup(sl.id, KIND, dst, src, dport, sport, proto, m.index)
    if not hits:
        return Drop("spp_no_filter")
    f = hits[0]
    if f["action"] != 1:
        return Except("spp_to_gpe") if f["action"] == 2 else Drop("spp_filter_drop")
    inner = bytearray(p)
    inner[8] -= 1
    inner[10:12] = ttl_checksum(struct.unpack_from("!H", p, 10)[0]).to_bytes(2, "big")
    return spp.out(frame, f["out_mi"], f["nh_ip"], f["nh_port"], bytes(inner))

