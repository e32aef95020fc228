"""Write the SPP's traffic specs (docs/spp.md): frames to the slices' meta-interfaces
whose UDP payload starts with an inner IPv4 header (ipv4 slices) or an I3 header (i3
slices), then the generator's tag.  `python make_traffic.py` writes traffic.yaml (the
demo's default: every filter, finger and reason of slices.yaml is hit).

The headers are built here (fixed bytes: a spec's `payload: {header: HEX}`) and each
port's `dst_port` and `payload` are `{cycle: [...]}` lists of the same length, so the
k-th frame of a port goes to the k-th meta-interface with the k-th header.
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def checksum(data: bytes) -> int:
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip(a: str) -> int:
    return int(ipaddress.IPv4Address(a))


def inner_ipv4(dst: str, src: str = "10.9.9.9", proto: int = 17, sport: int = 1000, dport: int = 80,
               ttl: int = 64, length: int = 100) -> str:
    """An inner IPv4 header (20 bytes, checksum right) and the first 4 bytes of its UDP/TCP
    header (the ports the filters may match)."""
    h = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, length, 0, 0, ttl, proto, 0, ip(src), ip(dst)))
    h[10:12] = checksum(bytes(h)).to_bytes(2, "big")
    return (bytes(h) + struct.pack("!HH", sport, dport)).hex()


def i3_header(trigger: int, hop: int = 32, flags: int = 0, payload: int = 0) -> str:
    """The 27-byte I3 header of docs/spp.md §6."""
    h = struct.pack("!BBHQIHQB", 0x10 | flags, hop, payload, trigger, ip("10.7.7.7"), 5000,
                    0x0123456789ABCDEF, 0)
    assert len(h) == 27
    return h.hex()


# (meta-interface UDP port, header) per input port: what the default traffic cycles through
V4A, V4B, I3A, NOWHERE = 33001, 33002, 34001, 39999
DEMO: dict[int, list[tuple[int, str]]] = {
    0: [(V4A, inner_ipv4("172.16.1.5", "192.168.1.1", dport=53)),       # filter 0 -> a2
        (V4A, inner_ipv4("172.16.7.7")),                                # filter 1 -> a1
        (V4A, inner_ipv4("172.17.0.9")),                                # filter 2 (in a0) -> a2
        (V4A, inner_ipv4("172.16.9.1", proto=6, dport=443)),            # filter 1 -> a1
        (V4A, inner_ipv4("172.18.1.1")),                                # filter 3: drop
        (V4A, inner_ipv4("172.16.3.3")),                                # filter 1 -> a1
        (V4A, inner_ipv4("172.19.1.1")),                                # filter 4: gpe
        (V4A, inner_ipv4("8.8.8.8")),                                   # no filter
        (V4A, inner_ipv4("172.16.4.4", ttl=1)),                         # TTL expired
        (NOWHERE, inner_ipv4("172.16.4.4"))],                           # no meta-interface
    1: [(V4A, inner_ipv4("172.17.0.9")),                                # filter 2 wants in a0: filter? none -> no filter
        (V4A, inner_ipv4("172.16.0.1")),                                # filter 1 -> a1 (back out port 1)
        (V4B, inner_ipv4("172.20.0.1")),                                # v4b filter 0 -> b3
        (V4B, inner_ipv4("9.9.9.9")),                                   # v4b filter 1 -> b1
        (V4B, inner_ipv4("172.21.5.5", proto=6)),                       # v4b filter 0 -> b3
        (V4B, inner_ipv4("1.2.3.4"))],                                  # v4b filter 1 -> b1
    2: [(I3A, i3_header(0x3000000000000001)),                           # trigger -> c3
        (I3A, i3_header(0x3000000000000002)),                           # trigger -> c4
        (I3A, i3_header(0x3100000000000007)),                           # /8 trigger -> c2
        (I3A, i3_header(0x5000000000000000)),                           # out of range: finger 60 -> c3
        (I3A, i3_header(0x3100000000000005)),                           # two triggers: GPE
        (V4A, inner_ipv4("172.16.2.2")),                                # v4a on port 2 -> a1
        (I3A, i3_header(0x8000000000000000)),                           # finger 62 -> c4
        (I3A, i3_header(0x3300000000000000))],                          # in range, no trigger: GPE
    3: [(I3A, i3_header(0x6000000000000000)),                           # finger 61 -> c3 (.3)
        (I3A, i3_header(0x3000000000000001)),                           # trigger -> c3
        (I3A, i3_header(0x1000000000000000)),                           # finger 63 not set: GPE
        (V4B, inner_ipv4("172.16.8.8")),                                # v4b -> b3
        (I3A, i3_header(0x3000000000000002)),                           # trigger -> c4
        (I3A, i3_header(0x3200000000000001)),                           # gpe trigger
        (I3A, i3_header(0x3000000000000001, hop=1))],                   # hop limit
    4: [(I3A, i3_header(0x3100000000000001)),                           # /8 -> c2
        (I3A, i3_header(0x7000000000000000)),                           # finger 61 -> c3
        (I3A, i3_header(0x3000000000000002, flags=1)),                  # complex: GPE
        (I3A, i3_header(0x3000000000000002))],                          # trigger -> c4
}


def port_fields(port: int, items: list[tuple[int, str]]) -> dict:
    return {"ip_proto": "udp", "dst": f"10.0.{port}.1",
            "dst_port": {"cycle": [u for u, _ in items]},
            "payload": {"cycle": [{"header": h} for _, h in items]}}  # fmt: skip


def demo_spec() -> dict:
    return {"seed": 46, "duration_ns": 1_000_000,
            "defaults": {"size": {"uniform": [96, 200]}, "load": 0.5},
            "ports": {p: {"fields": port_fields(p, items)} for p, items in DEMO.items()}}  # fmt: skip


def main() -> int:
    head = ("# GENERATED by `python make_traffic.py` (examples/apps/spp): do not edit.  The SPP's\n"
            "# default traffic: each port cycles through frames to its meta-interfaces, each with\n"
            "# an inner IPv4 or I3 header (make_traffic.py says which filter, finger or reason each hits).\n")
    (HERE / "traffic.yaml").write_text(head + yaml.safe_dump(demo_spec(), sort_keys=False, width=400))
    return 0


if __name__ == "__main__":
    sys.exit(main())
