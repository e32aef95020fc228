"""What the SPP's data path does with each frame (docs/spp.md §1-8): the reference model.

`SppModel(substrate).decide(frame, in_port)` gives the outcome -- Forward(port, exact
bytes), Drop(reason) or Except(reason) -- and `slice_of(frame, in_port)` the slice the
frame belongs to (its input meta-interface's), for per-slice accounting.  The order of
the tests is the microcode's (spp/spp.uc); a change of one is a change of both.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from npkit.emulator.traffic.model import tcam_match
from npkit.emulator.traffic.oracle import Drop, Forward, Outcome

HERE = Path(__file__).resolve().parent


def _option(name: str):
    """options/<name>/model.py, loaded by path (the application is not a package)."""
    key = f"npk_spp_option_{name}_{abs(hash(str(HERE)))}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / "options" / name / "model.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


OPTIONS = {name: _option(name) for name in ("ipv4", "i3")}  # the code options (docs/spp.md §10)
ETH, OUTER = 14, 42  # the slice payload starts after Ethernet (14) + IPv4 (20) + UDP (8)
OUT_TTL = 64
UDP = 17


def checksum(data: bytes) -> int:
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


@dataclass
class SppModel:
    sub: object  # slices.Substrate (loaded by path: no import of the app's module here)
    filters: list  # the TCAM table's rows (tables["spp_filters"]: the image's, matched by tcam_match)

    def __post_init__(self) -> None:
        self._mi = {(m.port, m.ip, m.udp): m for m in self.sub.meta_ifs}
        self._seen: dict[tuple[int, ...], list] = {}  # lookup key -> matching rows

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
        return OPTIONS[sl.option].decide(self, frame, sl, m)

    def lookup(self, sid: int, kind: int, w1: int, w2: int, dport: int, sport: int, proto: int, mi: int) -> list:
        """The TCAM's matching rows, in priority order (docs/spp.md §5's key)."""
        k = (sid, kind, w1, w2, dport, sport, proto, mi)
        hits = self._seen.get(k)
        if hits is None:  # the TCAM's contents do not change during a run: its answers are kept
            if len(self._seen) >= 1 << 16:
                self._seen.clear()
            key = {"slice": sid, "kind": kind, "pad0": 0, "w1": w1, "w2": w2, "dport": dport, "sport": sport,
                   "proto": proto, "in_mi": mi}  # fmt: skip
            hits = self._seen[k] = tcam_match(self.filters, key)
        return hits

    def out(self, frame: bytes, out_mi: int, nh_ip: int, nh_port: int, payload: bytes) -> Forward:
        """The frame re-encapsulated for the output meta-interface (docs/spp.md §2)."""
        mi = self.sub.meta_ifs[out_mi]
        port = self.sub.router.ports[mi.port]
        total, udp_len = struct.unpack_from("!H", frame, 16)[0], struct.unpack_from("!H", frame, 38)[0]
        ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, total, 0, 0, OUT_TTL, UDP, 0, mi.ip, nh_ip))
        ip[10:12] = checksum(bytes(ip)).to_bytes(2, "big")
        udp = struct.pack("!HHHH", mi.udp, nh_port, udp_len, 0)
        eth = self.sub.router.arp[nh_ip] + port.mac + b"\x08\x00"
        return Forward(mi.port, eth + bytes(ip) + udp + payload)



@dataclass
class MetaRow:
    """A meta-interface as the table in SRAM has it (docs/spp.md §4.1)."""

    index: int
    ip: int
    udp: int
    port: int
    code: int
    slice_id: int
    slice_index: int


@dataclass
class LiveSlice:
    """A slice as far as the fast path knows it: its id (the TCAM key's first field)."""

    id: int


class LiveSpp(SppModel):
    """What the fast path makes of a frame now: the meta-interface table as it is in SRAM
    (the GPE's daemon adds and removes rows at run time, `npk slice add|del`) and the TCAM's
    entries as they are (`chip.tcam_lookup`: no timing, no counters).  The judge of a run
    with the daemon asks it about frames the link-time model drops for want of a
    meta-interface.  Only the ipv4 option is decided here (an I3 slice added at run time
    has no finger block the model knows): None for the others."""

    CODES = {1: "ipv4"}

    def __init__(self, sub: object, chip: object, base: int, rows: int) -> None:
        super().__init__(sub, [])
        self.chip, self.base, self.rows = chip, base, rows

    def row(self, i: int) -> MetaRow | None:
        a = self.base + 16 * i
        ip, w1, w2, w3 = (self.chip.read32("sram", a + 4 * k) for k in range(4))
        if not w3 >> 31:
            return None
        return MetaRow(i, ip, w1 >> 16, (w1 >> 8) & 0xFF, w1 & 0xFF, w2 >> 16, w2 & 0xFFFF)

    def meta_if(self, frame: bytes, in_port: int) -> MetaRow | None:
        if len(frame) < OUTER:
            return None
        dst, udp = struct.unpack_from("!I", frame, 30)[0], struct.unpack_from("!H", frame, 36)[0]
        for i in range(self.rows):
            m = self.row(i)
            if m is not None and (m.port, m.ip, m.udp) == (in_port, dst, udp):
                return m
        return None

    def decide(self, frame: bytes, in_port: int) -> Outcome | None:  # type: ignore[override]
        if self._outer_bad(frame, in_port):
            return Drop("spp_bad_outer")
        m = self.meta_if(frame, in_port)
        if m is None:
            return Drop("spp_no_meta_if")
        name = self.CODES.get(m.code)
        return None if name is None else OPTIONS[name].decide(self, frame, LiveSlice(m.slice_id), m)

    def lookup(self, sid: int, kind: int, w1: int, w2: int, dport: int, sport: int, proto: int, mi: int) -> list:
        """The TCAM's answer now (docs/spp.md §5's key): its first match, as many times as it matched."""
        key = [sid << 16 | kind << 8, w1, w2, dport << 16 | sport, proto << 24 | mi << 16]
        r = self.chip.tcam_lookup(key)
        if not r["hit"]:
            return []
        res = r["result"]
        hit = {"action": res >> 56, "out_mi": (res >> 48) & 0xFF, "nh_port": (res >> 32) & 0xFFFF,
               "nh_ip": res & 0xFFFFFFFF}  # fmt: skip
        return [hit] * r["count"]

    def out(self, frame: bytes, out_mi: int, nh_ip: int, nh_port: int, payload: bytes) -> Outcome:  # type: ignore[override]
        m = self.row(out_mi)
        if m is None or nh_ip not in self.sub.router.arp:
            return Drop("spp_no_arp")
        total, udp_len = struct.unpack_from("!H", frame, 16)[0], struct.unpack_from("!H", frame, 38)[0]
        ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, total, 0, 0, OUT_TTL, UDP, 0, m.ip, nh_ip))
        ip[10:12] = checksum(bytes(ip)).to_bytes(2, "big")
        udp = struct.pack("!HHHH", m.udp, nh_port, udp_len, 0)
        eth = self.sub.router.arp[nh_ip] + self.sub.router.ports[m.port].mac + b"\x08\x00"
        return Forward(m.port, eth + bytes(ip) + udp + payload)
