"""npkd beside i3d on the GPE (`-D gpe_ipv4=1` of the SPP's spp_gpe layout; docs/spp.md
§12): the IPv4 slices' slow path.

i3d takes every exception record and relays those of the IPv4 slices (`spp_to_gpe`: a
filter whose action is gpe) on the ring `gpe_relay`; npkd, a second host process on
the same clock loop (System.attach_beside), answers them in its SPP mode (its
configuration's `spp_mi` / `spp_local` lines, xscale/npkd/cp.c spp_exception) and hands
its frames back to i3d on `npkd_back`, which puts them on `cp_to_qm` whole.

`spp_conf` writes npkd's configuration; `spp_answer` is the Python twin of what npkd
makes of a packet (the control judge's IPv4 builders over the inner packet, then the
encapsulation of docs/spp.md §2), by which the run judges npkd's frames.
"""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path
from typing import Any

import yaml

from npkit.emulator.traffic.control import echo_reply, icmp_error
from npkit.emulator.traffic.packet import internet_checksum

OUTER = 42  # Ethernet + outer IPv4 + UDP
ZERO_MAC = bytes(6)
ICMP, UDP = 1, 17


def gpe_prefixes(folder: Path) -> list[tuple[int, int]]:
    """The IPv4 slices' addresses on the GPE: the prefixes of their filters whose action
    is gpe (the slice file, docs/spp.md §3)."""
    doc = yaml.safe_load((folder / "slices.yaml").read_text()) or {}
    out: list[tuple[int, int]] = []
    for s in doc.get("slices") or []:
        if s.get("code_option") != "ipv4":
            continue
        for f in s.get("filters") or []:
            if f.get("action") == "gpe" and f.get("dst"):
                net = ipaddress.ip_network(str(f["dst"]), strict=False)
                out.append((int(net.network_address), net.prefixlen))
    return out


def ipv4_mis(sub: Any) -> list[tuple[int, int, int]]:
    """(port, address, UDP port) of every meta-interface of an IPv4 slice."""
    return [(m.port, m.ip, m.udp) for s in sub.slices if s.option == "ipv4" for m in s.meta_ifs]


def spp_conf(base: str, sub: Any, folder: Path) -> str:
    """npkd's configuration in SPP mode: `base` (daemon_conf's) and the SPP lines."""
    lines = [base.rstrip("\n"), "# SPP mode: the IPv4 slices' meta-interfaces and their GPE prefixes"]
    lines += [f"spp_mi {port} {ip:#x} {udp}" for port, ip, udp in ipv4_mis(sub)]
    lines += [f"spp_local {p:#x} {n}" for p, n in gpe_prefixes(folder)]
    return "\n".join(lines) + "\n"


class SppAnswers:
    """What npkd in SPP mode sends about a received frame (None: nothing)."""

    def __init__(self, sub: Any, folder: Path) -> None:
        self.mis = ipv4_mis(sub)
        self.local = gpe_prefixes(folder)

    def _is_local(self, a: int, mi_ip: int) -> bool:
        if a == mi_ip:
            return True
        for p, n in self.local:
            m = (0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF if n else 0
            if a & m == p & m:
                return True
        return False

    def answer(self, frame: bytes, port: int) -> bytes | None:
        if len(frame) < OUTER + 20 or frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[23] != UDP:
            return None
        dst = int.from_bytes(frame[30:34], "big")
        dport = int.from_bytes(frame[36:38], "big")
        mi = next(((p, ip, u) for p, ip, u in self.mis if (p, ip, u) == (port, dst, dport)), None)
        if mi is None:
            return None
        inner = bytes(12) + b"\x08\x00" + frame[OUTER:]
        reply = self._inner_answer(inner, mi[1])
        if reply is None:
            return None
        return encapsulate(frame, reply, mi[1], mi[2])

    def _inner_answer(self, f: bytes, mi_ip: int) -> bytes | None:
        if f[14] >> 4 != 4 or (f[14] & 15) < 5:
            return None
        ihl = 4 * (f[14] & 15)
        tot, frag, ttl, proto = (int.from_bytes(f[16:18], "big"), int.from_bytes(f[20:22], "big"), f[22], f[23])
        if frag & 0x1FFF or tot + 14 > len(f):
            return None
        src, dst = int.from_bytes(f[26:30], "big"), int.from_bytes(f[30:34], "big")
        off = 14 + ihl
        if self._is_local(dst, mi_ip):
            if proto == ICMP and tot - ihl >= 8 and f[off] == 8 and not frag & 0x2000:
                if internet_checksum(f[off : 14 + tot]) != 0:
                    return None
                r = echo_reply(ZERO_MAC, ZERO_MAC, f, frozenset({dst}), dst, 0)
                return None if r is None else r[0]
            if proto == ICMP:
                return None
            return _error(f, 3, 3 if proto == UDP else 2, mi_ip)
        return _error(f, 11, 0, mi_ip) if ttl <= 1 else _error(f, 3, 0, mi_ip)


def _error(f: bytes, icmp_type: int, code: int, mi_ip: int) -> bytes | None:
    proto, src = f[23], int.from_bytes(f[26:30], "big")
    ihl = 4 * (f[14] & 15)
    if proto == ICMP and f[14 + ihl] not in (0, 8, 13, 14, 15, 16, 17, 18):
        return None  # no error about an ICMP error
    if src >> 24 in (0, 127) or src >> 28 >= 14 or src == 0xFFFFFFFF:
        return None
    return icmp_error(ZERO_MAC, ZERO_MAC, mi_ip, f, icmp_type, code)


def encapsulate(received: bytes, reply: bytes, mi_ip: int, mi_udp: int) -> bytes:
    """The inner answer (a frame: Ethernet, IPv4) back to the sender of `received`: from the
    meta-interface (mi_ip, mi_udp) to its outer source address and UDP port (docs/spp.md §2)."""
    ilen = int.from_bytes(reply[16:18], "big")
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + ilen, 0, 0, 64, UDP, 0,
                               mi_ip.to_bytes(4, "big"), received[26:30]))  # fmt: skip
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    udp = struct.pack("!H2sHH", mi_udp, received[34:36], 8 + ilen, 0)
    return received[6:12] + received[0:6] + b"\x08\x00" + bytes(ip) + udp + reply[14 : 14 + ilen]
