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
    """The IPv4 slices' addresses on the GPE, as (address, 32): the first host of each
    prefix of their filters whose action is gpe (the slice file, docs/spp.md §3) -- the
    slice's slow path owns that address and routes the rest of the prefix nowhere."""
    doc = yaml.safe_load((folder / "slices.yaml").read_text()) or {}
    out: list[tuple[int, int]] = []
    for s in doc.get("slices") or []:
        if s.get("code_option") != "ipv4":
            continue
        for f in s.get("filters") or []:
            if f.get("action") == "gpe" and f.get("dst"):
                net = ipaddress.ip_network(str(f["dst"]), strict=False)
                first = int(net.network_address) + (1 if net.prefixlen < 31 else 0)
                out.append((first, 32))
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
        dst = int.from_bytes(f[30:34], "big")
        off = 14 + ihl
        if self._is_local(dst, mi_ip):
            if proto == ICMP and tot - ihl >= 8 and f[off] == 8 and not frag & 0x2000:
                if internet_checksum(f[off : 14 + tot]) != 0 or not _unicast(int.from_bytes(f[26:30], "big")):
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
    if not _unicast(src):
        return None
    return icmp_error(ZERO_MAC, ZERO_MAC, mi_ip, f, icmp_type, code)


def _unicast(a: int) -> bool:
    """pkt.c ip_is_unicast_src: not 0/8, 127/8, class D or E, the limited broadcast."""
    return a >> 24 not in (0, 127) and a >> 28 < 14


def encapsulate(received: bytes, reply: bytes, mi_ip: int, mi_udp: int) -> bytes:
    """The inner answer (a frame: Ethernet, IPv4) back to the sender of `received`: from the
    meta-interface (mi_ip, mi_udp) to its outer source address and UDP port (docs/spp.md §2)."""
    ilen = int.from_bytes(reply[16:18], "big")
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + ilen, 0, 0, 64, UDP, 0,
                               mi_ip.to_bytes(4, "big"), received[26:30]))  # fmt: skip
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    udp = struct.pack("!H2sHH", mi_udp, received[34:36], 8 + ilen, 0)
    return received[6:12] + received[0:6] + b"\x08\x00" + bytes(ip) + udp + reply[14 : 14 + ilen]


def exception_codes(folder: Path) -> list[int]:
    """The application's exception codes (reasons.yaml `exceptions:`): npkd answers each in
    SPP mode ("CODE spp" in its exceptions file)."""
    doc = yaml.safe_load((folder / "reasons.yaml").read_text()) or {}
    return sorted(int(r["code"]) for r in (doc.get("exceptions") or {}).values())


def exceptions_file(sub: Any, folder: Path) -> str:
    """npkd's exceptions file (xscale/npkd/cp.h NPKD_APP_EXCEPTIONS) in SPP mode: every
    exception code to SPP mode, the IPv4 slices' meta-interfaces and GPE prefixes."""
    lines = [f"{code} spp" for code in exception_codes(folder)]
    lines += [f"spp_mi {port} {ip:x} {udp}" for port, ip, udp in ipv4_mis(sub)]
    lines += [f"spp_local {p:x} {n}" for p, n in gpe_prefixes(folder)]
    return "\n".join(lines) + "\n"


def start_beside(system: Any, chip: Any, router: Any, sub: Any, folder: Path, run_dir: Path,
                 rings: tuple[int, int], echo: Any = None) -> Any:  # fmt: skip
    """npkd (its gpe build) started beside i3d on the same System: records in on
    rings[0] (i3d's relay), frames out on rings[1] (back to i3d); its host."""
    from npkit.xscale.toolchain import BuildError, program

    from .control import APP_EXCEPTIONS, daemon_conf
    from .errors import LinkError

    try:
        prog = program("npkd", native=True)
    except BuildError as e:
        raise LinkError(f"npkd beside i3d: {e}") from None
    routes = run_dir / "npkd.routes"  # none: the slow path answers, it does not route
    routes.write_text("")
    sram = int(chip.config["sram_channel_bytes"])
    conf = run_dir / "npkd.conf"
    conf.write_text(daemon_conf(router, routes, rings=rings, sram_channel_bytes=sram))
    (run_dir / APP_EXCEPTIONS).write_text(exceptions_file(sub, folder))
    return system.attach_beside(prog, [f"--sram-channel-bytes={sram}", str(conf)], echo=echo)


HOST_RING_WORDS = 128


def host_rings(chip: Any, layout_rings: dict[str, Any]) -> tuple[int, int]:
    """The two rings between the daemons (i3d's relay to npkd, npkd's frames back to i3d):
    host to host, so no block of the layout declares them; configured here in the first
    free scratch ring numbers and in the ring storage after the layout's rings."""
    from .errors import LinkError
    from .sysmap import SYS

    used = {int(r["ring"]) for r in layout_rings.values()}
    end = max([SYS.ring_store] + [int(r["base"]) + 4 * int(r["size"]) for r in layout_rings.values()])
    # the highest free numbers: a split ring's members past the MEs that serve it (the spp
    # block's rx_to_spp) are left out of the layout's rings but rx may still name them
    free = [n for n in reversed(range(int(chip.config.get("scratch_rings", 16)))) if n not in used][:2]
    if len(free) < 2 or end + 2 * 4 * HOST_RING_WORDS > SYS.scratch_bytes:
        raise LinkError("gpe_ipv4=1: no two free scratch rings (or no room in scratch) for the daemons' rings")
    for k, n in enumerate(free):
        chip.scratch_ring(n, end + k * 4 * HOST_RING_WORDS, HOST_RING_WORDS)
    return free[0], free[1]
