"""The I3 code option's model (docs/spp.md §4.2, §6, §10): the I3 header's checks, then
for a trigger in the router's range the TCAM (exactly one matching trigger filter), out
of it the Chord finger table; forwarding decrements the hop limit.  `spp` is
spp_model.SppModel (lookup, out)."""

import struct

from npkit.emulator.traffic.oracle import Drop, Except, Outcome

OUTER = 42
I3_HEADER = 27
KIND = 2


def decide(spp, frame: bytes, sl, m) -> Outcome:
    p = frame[OUTER:]
    if len(p) < I3_HEADER or p[0] >> 4 != 1:
        return Drop("spp_bad_inner")
    if p[0] & 1:
        return Except("i3_complex")
    if p[1] <= 1:
        return Drop("i3_hop_limit")
    t = struct.unpack_from("!Q", p, 4)[0]
    if sl.in_range(t):
        hits = spp.lookup(sl.id, KIND, t >> 32, t & 0xFFFFFFFF, 0, 0, 0, m.index)
        if not hits:
            return Except("i3_no_trigger")
        if len(hits) > 1:
            return Except("i3_multi_trigger")
        f = hits[0]
        if f["action"] != 1:
            return Except("spp_to_gpe") if f["action"] == 2 else Drop("spp_filter_drop")
        out, nh_ip, nh_port = f["out_mi"], f["nh_ip"], f["nh_port"]
    else:
        fg = sl.fingers.get(sl.finger_for(t))
        if fg is None:
            return Except("i3_no_finger")
        out, nh_ip, nh_port = fg.out_mi, fg.nh_ip, fg.nh_port
    body = bytearray(p)
    body[1] -= 1
    return spp.out(frame, out, nh_ip, nh_port, bytes(body))

