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


# the senders of each meta-interface port: a sender (outer source) belongs to one slice's
# overlay, so an outer flow (source, destination) is one slice's and the per-slice queues
# never reorder a flow (the judge checks order by input port, protocol and addresses)
SENDERS = {V4A: "198.18.0.0/16", V4B: "198.19.0.0/16", I3A: "198.20.0.0/16", NOWHERE: "198.21.0.0/16"}


def port_fields(port: int, items: list[tuple[int, str]]) -> dict:
    return {"ip_proto": "udp", "dst": f"10.0.{port}.1", "src": {"cycle": [SENDERS[u] for u, _ in items]},
            "dst_port": {"cycle": [u for u, _ in items]},
            "payload": {"cycle": [{"header": h} for _, h in items]}}  # fmt: skip


def demo_spec() -> dict:
    return {"seed": 46, "duration_ns": 1_000_000,
            "defaults": {"size": {"uniform": [96, 200]}, "load": 0.5},
            "ports": {p: {"fields": port_fields(p, items)} for p, items in DEMO.items()}}  # fmt: skip


def overload_spec() -> dict:
    """Port 3 oversubscribed twice over by two slices: v4b (share 0.2) from port 1 and
    i3a (share 0.4) from port 2, both at line rate with frames of one size: the DRR gives
    them port 3 in the ratio of their quanta (800 : 1600 bytes, 1 : 2)."""
    return {"seed": 47, "duration_ns": 2_000_000,
            "defaults": {"size": 200, "load": 1.0, "enabled": False},
            "ports": {1: {"enabled": True, "fields": port_fields(1, [(V4B, inner_ipv4("172.20.0.1"))])},
                      2: {"enabled": True, "fields": port_fields(2, [(I3A, i3_header(0x3000000000000001))])}}}


def fig11_fields(port: int, share: float) -> dict:
    """Seed 004 Figure 11's frames on a port: a share of I3 (trigger -> the next port) and
    the rest IPv4 (inner destination routed to the next port), interleaved in a cycle of
    ten.  The headers do not depend on the payload size: the frame size does (73 + P
    bytes with the FCS: Ethernet 14, IPv4 20, UDP 8, then the 27-byte I3 header or the
    20-byte inner IPv4 header and 7 bytes more, then P).  The tag (8 bytes) sits inside
    the headers so that 0 B frames have one: in the I3 header's stack id (bytes 18..25),
    at the start of the inner IPv4 header (version 4, IHL 14: the option reads the first
    20 bytes only, and forwards by the destination)."""
    nxt = (port + 1) % 5
    k = round(10 * share)
    i3 = {"header": i3_header(0x3A00000000000000 | nxt), "tag_at": 18}
    v4 = {"header": inner_ipv4(f"172.30.{nxt}.9", length=27)[:40], "tag_at": 0}
    cyc = [(I3A, i3) if (j * k) // 10 != ((j + 1) * k) // 10 else (V4A, v4) for j in range(10)]
    return {"ip_proto": "udp", "dst": f"10.0.{port}.1", "src": {"cycle": [SENDERS[u] for u, _ in cyc]},
            "dst_port": {"cycle": [u for u, _ in cyc]}, "payload": {"cycle": [h for _, h in cyc]}}  # fmt: skip


def fig11_spec(share: float = 0.5, payload: int = 0) -> dict:
    """5 x 1 Gb/s (5 Gb/s in) of Figure 11's frames."""
    return {"seed": 11, "duration_ns": 1_000_000, "defaults": {"size": 73 + payload, "load": 1.0},
            "ports": {p: {"fields": fig11_fields(p, share)} for p in range(5)}}  # fmt: skip


SPECS = {"traffic.yaml": (demo_spec, "the demo's default: every filter, finger and reason of slices.yaml is hit"),
         "overload.yaml": (overload_spec, "port 3 oversubscribed 2x by slices v4b and i3a (tests/spp: shares)"),
         "fig11.yaml": (fig11_spec, "seed 004 Figure 11's traffic at I3 share 0.5, 0 B payload (the design's base)")}


def main() -> int:
    for name, (fn, what) in SPECS.items():
        head = (f"# GENERATED by `python make_traffic.py` (examples/apps/spp): do not edit.  {what}.\n"
                "# Each port cycles through frames to its meta-interfaces, each with an inner IPv4 or\n"
                "# I3 header (make_traffic.py says which filter, finger or reason each hits).\n")
        (HERE / name).write_text(head + yaml.safe_dump(fn(), sort_keys=False, width=400))
    return 0


if __name__ == "__main__":
    sys.exit(main())
