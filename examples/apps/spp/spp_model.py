"""What the SPP's data path does with each frame (docs/spp.md §1-8): the reference model.

`SppModel(substrate).decide(frame, in_port)` gives the outcome -- Forward(port, exact
bytes), Drop(reason) or Except(reason) -- and `slice_of(frame, in_port)` the slice the
frame belongs to (its input meta-interface's), for per-slice accounting.  The order of
the tests is the microcode's (spp/spp.uc); a change of one is a change of both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from npkit.emulator.traffic.model import tcam_match
from npkit.emulator.traffic.oracle import Drop, Except, Forward, Outcome

ETH, OUTER = 14, 42  # the slice payload starts after Ethernet (14) + IPv4 (20) + UDP (8)
I3_HEADER = 27
OUT_TTL = 64
TCP, UDP = 6, 17


def checksum(data: bytes) -> int:
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ttl_checksum(ck: int) -> int:
    """RFC 1624 eq. 3 for a TTL decrement, as hdr_format computes it (one fold)."""
    c = (~ck & 0xFFFF) + 0xFEFF
    c = (c & 0xFFFF) + (c >> 16)
    return ~c & 0xFFFF


@dataclass
class SppModel:
    sub: object  # slices.Substrate (loaded by path: no import of the app's module here)
    filters: list  # the TCAM table's rows (tables["spp_filters"]: the image's, matched by tcam_match)

    def __post_init__(self) -> None:
        self._mi = {(m.port, m.ip, m.udp): m for m in self.sub.meta_ifs}

    def meta_if(self, frame: bytes, in_port: int):  # -> MetaIf | None
        if len(frame) < OUTER:
            return None
        dst, udp = struct.unpack_from("!I", frame, 30)[0], struct.unpack_from("!H", frame, 36)[0]
        return self._mi.get((in_port, dst, udp))

    def slice_of(self, frame: bytes, in_port: int) -> str | None:
        if self._outer_bad(frame, in_port):
            return None
        m = self.meta_if(frame, in_port)
        return None if m is None else self.sub.slices[m.slice_index].name

    def _outer_bad(self, frame: bytes, in_port: int) -> bool:
        if len(frame) < OUTER or frame[12:14] != b"\x08\x00" or frame[14] != 0x45:
            return True
        total, frag, proto = struct.unpack_from("!H", frame, 16)[0], struct.unpack_from("!H", frame, 20)[0], frame[23]
        if proto != UDP or frag & 0x3FFF or total < 28 or total > len(frame) - ETH:
            return True
        return checksum(frame[14:34]) != 0

    def decide(self, frame: bytes, in_port: int) -> Outcome:
        if self._outer_bad(frame, in_port):
            return Drop("spp_bad_outer")
        m = self.meta_if(frame, in_port)
        if m is None:
            return Drop("spp_no_meta_if")
        sl = self.sub.slices[m.slice_index]
        if sl.option == "ipv4":
            return self._ipv4(frame, sl, m)
        return self._i3(frame, sl, m)

    def _lookup(self, sid: int, kind: int, w1: int, w2: int, dport: int, sport: int, proto: int, mi: int) -> list:
        """The TCAM's matching rows, in priority order (docs/spp.md §5's key)."""
        key = {"slice": sid, "kind": kind, "pad0": 0, "w1": w1, "w2": w2, "dport": dport, "sport": sport,
               "proto": proto, "in_mi": mi}  # fmt: skip
        return tcam_match(self.filters, key)

    def _ipv4(self, frame: bytes, sl, m) -> Outcome:
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
        hits = self._lookup(sl.id, 1, dst, src, dport, sport, proto, m.index)
        if not hits:
            return Drop("spp_no_filter")
        f = hits[0]
        if f["action"] != 1:
            return Except("spp_to_gpe") if f["action"] == 2 else Drop("spp_filter_drop")
        inner = bytearray(p)
        inner[8] -= 1
        inner[10:12] = ttl_checksum(struct.unpack_from("!H", p, 10)[0]).to_bytes(2, "big")
        return self._out(frame, f["out_mi"], f["nh_ip"], f["nh_port"], bytes(inner))

    def _i3(self, frame: bytes, sl, m) -> Outcome:
        p = frame[OUTER:]
        if len(p) < I3_HEADER or p[0] >> 4 != 1:
            return Drop("spp_bad_inner")
        if p[0] & 1:
            return Except("i3_complex")
        if p[1] <= 1:
            return Drop("i3_hop_limit")
        t = struct.unpack_from("!Q", p, 4)[0]
        if sl.in_range(t):
            hits = self._lookup(sl.id, 2, t >> 32, t & 0xFFFFFFFF, 0, 0, 0, m.index)
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
        return self._out(frame, out, nh_ip, nh_port, bytes(body))

    def _out(self, frame: bytes, out_mi: int, nh_ip: int, nh_port: int, payload: bytes) -> Forward:
        """The frame re-encapsulated for the output meta-interface (docs/spp.md §2)."""
        mi = self.sub.meta_ifs[out_mi]
        port = self.sub.router.ports[mi.port]
        total, udp_len = struct.unpack_from("!H", frame, 16)[0], struct.unpack_from("!H", frame, 38)[0]
        ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, total, 0, 0, OUT_TTL, UDP, 0, mi.ip, nh_ip))
        ip[10:12] = checksum(bytes(ip)).to_bytes(2, "big")
        udp = struct.pack("!HHHH", mi.udp, nh_port, udp_len, 0)
        eth = self.sub.router.arp[nh_ip] + port.mac + b"\x08\x00"
        return Forward(mi.port, eth + bytes(ip) + udp + payload)

