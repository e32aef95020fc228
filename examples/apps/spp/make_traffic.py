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
V4A, V4B, I3A, I3PING, NOWHERE = 33001, 33002, 34001, 34002, 39999
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
SENDERS = {V4A: "198.18.0.0/16", V4B: "198.19.0.0/16", I3A: "198.20.0.0/16", NOWHERE: "198.21.0.0/16",
           I3PING: "198.22.0.0/16"}


def port_fields(port: int, items: list[tuple[int, str]]) -> dict:
    return {"ip_proto": "udp", "dst": f"10.0.{port}.1", "src": {"cycle": [SENDERS[u] for u, _ in items]},
            "dst_port": {"cycle": [u for u, _ in items]},
            "payload": {"cycle": [{"header": h} for _, h in items]}}  # fmt: skip


# The items of DEMO each port's exceptions come from (the GPE's share: spp_to_gpe, no
# trigger, several triggers, no finger, a gpe trigger, complex).  Seed 004 sends most I3
# traffic through the fast path (Figure 11: all of it): the default traffic repeats every
# other item FAST_REPEAT more times in each port's cycle, so that about 4 % of its frames
# (~80,000 a second at 2.5 Gb/s) are exceptions, which the GPE's daemon takes without a
# loss (~190,000 records a second over the gpe link, `npk bench gpe`; docs/spp.md §12)
# while every filter, finger and reason is still hit in every cycle.
EXCEPTED = {0: {6}, 2: {4, 7}, 3: {2, 5}, 4: {2}}
FAST_REPEAT = 4


def demo_cycle(port: int, items: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A port's cycle: DEMO's items once, then the ones that are no exception FAST_REPEAT times more."""
    rest = [it for i, it in enumerate(items) if i not in EXCEPTED.get(port, set())]
    return items + rest * FAST_REPEAT


def demo_spec() -> dict:
    return {"seed": 46, "duration_ns": 1_000_000,
            "defaults": {"size": {"uniform": [96, 200]}, "load": 0.5},
            "ports": {p: {"fields": port_fields(p, demo_cycle(p, items))} for p, items in DEMO.items()}}  # fmt: skip


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


LATENCY_PAYLOAD = 400  # the background's I3 payload in seed 004's latency test


def latency_fields(port: int) -> dict:
    """Seed 004's latency test on a port: I3 background (slice i3a, 400 B payloads) and,
    one frame in ten, ping traffic in a slice of its own (i3ping), both to the next port."""
    nxt = (port + 1) % 5
    bg = {"header": i3_header(0x3A00000000000000 | nxt, payload=LATENCY_PAYLOAD), "tag_at": 18}
    ping = {"header": i3_header(0x7000000000000000 | nxt), "tag_at": 18}
    cyc = [(I3PING, ping)] + [(I3A, bg)] * 9
    return {"ip_proto": "udp", "dst": f"10.0.{port}.1", "src": {"cycle": [SENDERS[u] for u, _ in cyc]},
            "dst_port": {"cycle": [u for u, _ in cyc]}, "payload": {"cycle": [h for _, h in cyc]}}  # fmt: skip


def latency_spec(load: float = 0.5) -> dict:
    return {"seed": 12, "duration_ns": 1_000_000, "defaults": {"size": 73 + LATENCY_PAYLOAD, "load": load},
            "ports": {p: {"fields": latency_fields(p)} for p in range(5)}}  # fmt: skip


def hostile_spec() -> dict:
    """Frames the fast path must refuse or handle as its model does: npkit's special
    packets (bad checksums, options, fragments, runts, wrong MACs ...), frames to no
    meta-interface, inner IPv4 headers of every version/IHL/TTL kind, I3 headers with a
    bad version, the complex flag, hop limits 0..2, triggers in and out of every range,
    frames too short for their option's header.  Every header is at least 14 bytes long,
    so the tag is at byte 56 or later: beyond the bytes the fast path rewrites (0..55),
    where it still names its packet after forwarding."""
    import random

    rnd = random.Random(46)
    v4 = [inner_ipv4(d, ttl=t) for d in ("172.16.1.1", "172.17.0.1", "172.19.0.1", "9.9.9.9", "172.20.0.1")
          for t in (0, 1, 2, 64)]
    v4 += ["4f" + inner_ipv4("172.16.1.1")[2:], "44" + inner_ipv4("172.16.1.1")[2:],
           "65" + inner_ipv4("172.16.1.1")[2:], inner_ipv4("172.16.2.2", proto=6, dport=443)]
    i3 = [i3_header(t, hop=h, flags=f) for t in (0x3000000000000001, 0x3100000000000005, 0x3300000000000000,
                                                  0x5000000000000000, 0xF000000000000000, 0x7000000000000001,
                                                  0x2000000000000000, 0x4000000000000000)
          for h in (0, 1, 2, 9) for f in (0, 1)]
    i3 += ["2" + i3_header(0x3000000000000001)[1:], "0" + i3_header(0x3000000000000001)[1:]]
    junk = [bytes(rnd.getrandbits(8) for _ in range(14)).hex() for _ in range(6)]
    heads = [h[:2 * 14] if len(h) < 28 else h for h in v4 + i3 + junk]
    ports = {}
    for p in range(5):
        udp = [V4A, V4B, I3A, I3PING, NOWHERE]
        ports[p] = {"mix": {"bad_checksum": 0.03, "bad_version": 0.02, "bad_ihl": 0.02, "truncated": 0.02,
                            "non_ipv4": 0.02, "runt": 0.02, "wrong_mac": 0.02, "options": 0.02,
                            "ttl_fragment": 0.02, "broadcast": 0.01, "multicast": 0.01},
                    "fields": {"ip_proto": "udp", "dst": [f"10.0.{p}.1", f"10.0.{(p + 1) % 5}.1"],
                               "src": "198.23.0.0/16", "dst_port": udp,
                               "payload": [{"header": h} for h in heads]}}  # fmt: skip
    ports[4]["size"] = 64  # 18 bytes of slice payload: too short for either option's header
    # (the others from 84 bytes: a forwarded frame keeps its whole tag after a 27-byte header)
    return {"seed": 48, "duration_ns": 1_000_000, "defaults": {"size": {"uniform": [84, 200]}, "load": 0.5},
            "ports": ports}


SPECS = {"traffic.yaml": (demo_spec, "the demo's default: every filter, finger and reason of slices.yaml is hit"),
         "overload.yaml": (overload_spec, "port 3 oversubscribed 2x by slices v4b and i3a (tests/spp: shares)"),
         "fig11.yaml": (fig11_spec, "seed 004 Figure 11's traffic at I3 share 0.5, 0 B payload (the design's base)"),
         "latency.yaml": (latency_spec, "seed 004's latency test at half load (the design's base)"),
         "hostile.yaml": (hostile_spec, "malformed and unusual frames, judged against the model (tests/spp)")}


FIG11_SHARES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
FIG11_PAYLOADS = (0, 40, 80)


def fig11_design() -> dict:
    """examples/experiments/spp_fig11.yaml: seed 004 Figure 11 (see its header)."""
    def shares(levels: tuple[float, ...]) -> dict:
        return {x: {f"traffic.ports.{p}.fields": fig11_fields(p, x) for p in range(5)} for x in levels}

    def payloads(levels: tuple[int, ...]) -> dict:
        return {x: {"traffic.defaults.size": 73 + x} for x in levels}

    return {
        "name": "spp_fig11",
        "title": "Seed 004 Figure 11: IPv4 and I3 slices on one NPE, 5 Gb/s in, I3 share swept",
        "kind": "sweep", "sweep": "S", "replications": 1, "seed": 11,
        "base": {"app": "../apps/spp", "traffic": "../apps/spp/fig11.yaml"},
        "factors": {"S": {"name": "I3 share of the packets", "levels": shares(FIG11_SHARES)},
                    "P": {"name": "I3 payload (B)", "levels": payloads(FIG11_PAYLOADS)}},
        "responses": ["group_mpps_v4a", "group_mpps_i3a", "throughput_mpps", "offered_mpps",
                      "throughput_pct_offered", "loss_pct", "latency_mean_us", "util_me_max"],
        "steady": {"window_us": 20, "min_ms": 1.0, "max_ms": 2.0, "step_ms": 0.5, "precision": 0.02,
                   "drain_us": 100},
        "capacity": False,
        "reference": {
            "source": "seed 004 (Figure 11's labels)", "response": "throughput_pct_offered",
            "points": [{"where": {"S": 0.0, "P": 0}, "value": 81}, {"where": {"P": 40}, "value": 100},
                       {"where": {"P": 80}, "value": 90}],
            "note": ("The paper gives the sum as a % of the input at 0 B only for all-IPv4 traffic (81 %), "
                     "at 40 B for every share (100 %) and at 80 B (90 %, which it calls anomalous). npkit's "
                     "data path is one parse-lookup-format block on four MEs, not the SPP's code: it keeps up "
                     "at 6.72 Mpps, its queue manager and tx (one ME each) the busiest blocks at 0 B; it has no "
                     "mechanism for the paper's 80 B anomaly. docs/spp.md, 'Seed 004's experiments', says more."),
        },
        "quick": {"factors": {"S": {"levels": shares((0.0, 0.5, 1.0))}, "P": {"levels": payloads((0, 80))}},
                  "steady": {"window_us": 5, "min_ms": 0.25, "max_ms": 0.3, "step_ms": 0.05, "drain_us": 50}},
    }  # fmt: skip


def latency_design() -> dict:
    """examples/experiments/spp_latency.yaml: seed 004's NPE latency test."""
    return {
        "name": "spp_latency",
        "title": "Seed 004 NPE latency: ping traffic in its own I3 slice beside I3 background, input rate swept",
        "kind": "sweep", "sweep": "L", "replications": 1, "seed": 12,
        "base": {"app": "../apps/spp", "traffic": "../apps/spp/latency.yaml"},
        "factors": {"L": {"name": "input load (fraction of 5 x 1 Gb/s)", "set": "traffic.defaults.load",
                          "levels": [0.05, 0.2, 0.4, 0.6, 0.8, 1.0]}},
        "responses": ["group_latency_us_i3ping", "group_latency_us_i3a", "latency_mean_us", "latency_p99_us",
                      "offered_mbps", "throughput_mbps", "loss_pct"],
        "steady": {"window_us": 20, "min_ms": 1.0, "max_ms": 2.0, "step_ms": 0.5, "precision": 0.02,
                   "drain_us": 100},
        "capacity": False,
        "reference": {
            "source": "seed 004 (NPE ping delay)", "response": "group_latency_us_i3ping",
            "points": [{"where": {}, "value": 50}],
            "note": ("The paper: the NPE's average ping delay is essentially constant, just under 50 us, whatever "
                     "the input rate. npkit's is constant too, at about 8 us: it is one pass through the emulated "
                     "NPE, wire to wire (of which 7.6 us is a 473-byte frame's serialisation in and out), where a "
                     "ping's delay is a round trip through the hosts as well."),
        },
        "quick": {"factors": {"L": {"levels": [0.2, 1.0]}},
                  "steady": {"window_us": 5, "min_ms": 0.25, "max_ms": 0.3, "step_ms": 0.05, "drain_us": 50}},
    }  # fmt: skip


LATENCY_HEAD = """\
# GENERATED by `python examples/apps/spp/make_traffic.py`: do not edit.
# Seed 004's NPE latency test on the SPP application (docs/spp.md, "Latency"): ping
# traffic in an I3 slice of its own (i3ping: one frame in ten), I3 background with 400 B
# payloads (slice i3a), the input rate swept from 250 Mb/s to 5 Gb/s.  Responses: the
# mean latency of each slice's frames (first bit in to first bit out).  The paper: the
# NPE's average ping delay essentially constant, just under 50 us.
#
#   npk experiment run examples/experiments/spp_latency.yaml -o out/latency [--quick]
"""


DESIGN_HEAD = """\
# GENERATED by `python examples/apps/spp/make_traffic.py`: do not edit.
# Seed 004 Figure 11 on the SPP application (docs/spp.md, "Figure 11"): total input held
# at 5 Gb/s (5 x 1 Gb/s, frames of 73 + P bytes with the FCS), the I3 share of the packets
# swept 0..1 (S), the I3 payload P = 0, 40, 80 B (the IPv4 packets 7 bytes more of payload:
# the same frame length).  Responses: the output packet rate of the IPv4 slice (v4a) and of
# the I3 slice (i3a), their sum (throughput_mpps) against the input (offered_mpps).
# The paper: 81 % of the input at 0 B when all traffic is IPv4, 100 % at 40 B in all
# cases, 90 % at 80 B.
#
#   npk experiment run examples/experiments/spp_fig11.yaml -o out/fig11 [--quick]
#   npk experiment report out/fig11 -o out/fig11/report.html
"""


def main() -> int:
    for name, (fn, what) in SPECS.items():
        head = (f"# GENERATED by `python make_traffic.py` (examples/apps/spp): do not edit.  {what}.\n"
                "# Each port cycles through frames to its meta-interfaces, each with an inner IPv4 or\n"
                "# I3 header (make_traffic.py says which filter, finger or reason each hits).\n")
        (HERE / name).write_text(head + yaml.safe_dump(fn(), sort_keys=False, width=400))
    (HERE / "../../experiments/spp_fig11.yaml").write_text(
        DESIGN_HEAD + yaml.safe_dump(fig11_design(), sort_keys=False, width=400))
    (HERE / "../../experiments/spp_latency.yaml").write_text(
        LATENCY_HEAD + yaml.safe_dump(latency_design(), sort_keys=False, width=400))
    return 0


if __name__ == "__main__":
    sys.exit(main())
