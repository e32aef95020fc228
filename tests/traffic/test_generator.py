"""Traffic generation: determinism, wire timing, size and kind mixes, replay, output."""

from __future__ import annotations

import json
import statistics
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.dataset import load_traffic
from npkit.emulator.traffic.frames import TAG, TUNNEL_PORT
from npkit.emulator.traffic.generator import GenPacket, generate, write_traffic
from npkit.emulator.traffic.oracle import Forward, RefRouter
from npkit.emulator.traffic.packet import (
    IPPROTO_UDP,
    UDP,
    IPv4,
    internet_checksum,
    parse_frame,
)
from npkit.emulator.traffic.pcap import write_pcap
from npkit.emulator.traffic.spec import SpecError, TrafficSpec, load_spec, spec_from_dict

from .conftest import EXAMPLES, ROUTER_YAML


def make(**top: Any) -> TrafficSpec:
    data = {"seed": 1, "router": str(ROUTER_YAML), **top}
    return spec_from_dict(data, EXAMPLES)


def by_port(packets: list[GenPacket]) -> dict[int, list[GenPacket]]:
    out: dict[int, list[GenPacket]] = {}
    for p in packets:
        out.setdefault(p.port, []).append(p)
    return out


def gaps(packets: list[GenPacket]) -> list[int]:
    return [b.time_ns - a.time_ns for a, b in zip(packets, packets[1:], strict=False)]


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    spec = dict(count=300, defaults={"size": "imix", "protocol": {"udp": 1, "tcp": 1},
                                     "arrivals": "poisson", "load": 0.7,
                                     "mix": {"miss": 0.1, "bad_checksum": 0.1}})
    a = generate(make(**spec))
    assert a == generate(make(**spec))
    b = generate(make(**{**spec, "seed": 2}))
    assert [p.data for p in a] != [p.data for p in b]


def test_a_port_does_not_change_when_another_does() -> None:
    base = generate(make(count=200, defaults={"size": 64}))
    other = generate(make(count=200, defaults={"size": 64}, ports={3: {"size": 1518}}))
    for port in (0, 1, 2, 4):
        # ids (in the payload, and so the UDP checksum) shift; headers and times do not
        assert [(p.time_ns, p.data[:40]) for p in by_port(base)[port]] == [
            (p.time_ns, p.data[:40]) for p in by_port(other)[port]]


def test_64_byte_line_rate_is_672_ns() -> None:
    """64-byte frame: 60 bytes in the pcap + FCS 4 + preamble 8 + IFG 12 = 84 bytes on
    the wire = 672 ns at 1 Gb/s; 5 ports -> 7,440,476 pkt/s."""
    pkts = generate(make(duration_ns=100_000, defaults={"size": 64}))
    for port, ps in by_port(pkts).items():
        assert all(len(p.data) == 60 for p in ps)
        assert set(gaps(ps)) == {672}, port
        assert len(ps) == 149  # arrivals at 0, 672, ..., 148*672 < 100 us
    assert round(5 * 1e9 / 672) == 7_440_476


def test_seed003_packets_are_78_bytes_720_ns_apart() -> None:
    """Seed 003: 78 B at the chip, 90 B on the wire (12-byte IFG) -> 720 ns at 1 Gb/s,
    6,944,444 pkt/s on 5 x 1 Gb/s. The packet is a valid IPv4/UDP tunnel packet."""
    spec = load_spec(EXAMPLES / "seed003.yaml", {"duration_ns": 72_000})
    pkts = generate(spec)
    router = RefRouter(spec.router)
    for ps in by_port(pkts).values():
        assert set(gaps(ps)) == {720} and len(ps) == 100
    assert int(5 * 1e9 / 720) == 6_944_444
    for p in pkts[:20]:
        assert len(p.data) == 78
        outer = parse_frame(p.data)
        assert outer.ip is not None and outer.udp is not None
        assert outer.udp.dport == TUNNEL_PORT and outer.ip.total_length == 64
        assert internet_checksum(p.data[14:34]) == 0
        inner_off = 14 + 20 + 8
        inner = IPv4.unpack(p.data[inner_off:])
        assert inner.protocol == IPPROTO_UDP and internet_checksum(p.data[inner_off:
                                                                          inner_off + 20]) == 0
        inner_udp = UDP.unpack(p.data[inner_off + 20:])
        assert inner_udp.length == 16 and p.data[-8:-4] == TAG
        assert isinstance(router.process(p.data, p.port), Forward)


def test_offered_load_and_poisson_mean() -> None:
    pkts = generate(make(count=4000, defaults={"size": 1518, "arrivals": "poisson",
                                               "load": 0.5}))
    ps = by_port(pkts)[0]
    mean_gap = statistics.fmean(gaps(ps))
    expected = (1518 + 20) * 8 / 0.5  # ns per packet at 0.5 Gb/s
    assert abs(mean_gap - expected) / expected < 0.05
    assert min(gaps(ps)) >= (1518 + 20) * 8  # never closer than the wire allows


def test_bursts_are_back_to_back_then_idle() -> None:
    ps = by_port(generate(make(count=64, defaults={"size": 64, "load": 0.25,
                                                   "arrivals": {"burst": 8}})))[0]
    g = gaps(ps)
    assert all(g[i] == 672 for i in range(len(g)) if (i + 1) % 8)  # inside a burst
    assert all(g[i] == 4 * 8 * 672 - 7 * 672 for i in range(7, len(g), 8))  # 25% average


def test_on_off_periods() -> None:
    ps = by_port(generate(make(duration_ns=40_000, defaults={
        "size": 64, "arrivals": {"on_off": {"on_ns": 6720, "off_ns": 3280}}})))[0]
    starts = [p.time_ns for p in ps]
    assert starts[:10] == [i * 672 for i in range(10)]
    assert starts[10] == 10_000  # next ON period
    assert all((t % 10_000) < 6720 for t in starts)


def test_imix_proportions() -> None:
    pkts = generate(make(count=6000, defaults={"size": "imix"}))
    sizes = Counter(len(p.data) + 4 for p in pkts)
    total = sum(sizes.values())
    for size, share in ((64, 7 / 12), (594, 4 / 12), (1518, 1 / 12)):
        assert abs(sizes[size] / total - share) < 0.02


def test_size_forms_and_protocol_mix() -> None:
    pkts = generate(make(count=2000, defaults={"size": {"uniform": [100, 200]},
                                               "protocol": {"udp": 3, "tcp": 1}}))
    lens = [len(p.data) + 4 for p in pkts]
    assert min(lens) >= 100 and max(lens) <= 200 and len(set(lens)) > 90
    protos = Counter("udp" if parse_frame(p.data).udp else "tcp" for p in pkts)
    assert abs(protos["udp"] / len(pkts) - 0.75) < 0.03
    listed = generate(make(count=300, defaults={"size": [64, 128]}))
    assert {len(p.data) for p in listed} == {60, 124}


EXPECTED = {
    "normal": ("forward", ""), "miss": ("exception", "no_route"),
    "ttl_expiring": ("exception", "ttl_expired"), "options": ("exception", "ip_options"),
    "bad_checksum": ("drop", "bad_checksum"), "bad_version": ("drop", "bad_version"),
    "bad_ihl": ("drop", "bad_ihl"), "truncated": ("drop", "ip_truncated"),
    "for_router": ("exception", "local_delivery"), "arp": ("exception", "arp"),
    "non_ipv4": ("drop", "non_ipv4_ethertype"), "broadcast": ("exception", "broadcast"),
    "multicast": ("exception", "multicast"), "martian_src": ("drop", "martian_src"),
    "martian_dst": ("drop", "martian_dst"), "runt": ("drop", "short_frame"),
    "wrong_mac": ("drop", "dst_mac_mismatch"), "arp_miss": ("exception", "arp_miss"),
}  # fmt: skip


def test_every_kind_gets_its_intended_outcome() -> None:
    mix = {k: 0.05 for k in EXPECTED if k != "normal"}
    spec = make(count=600, defaults={"size": {"uniform": [64, 300]}, "mix": mix,
                                     "protocol": {"udp": 1, "tcp": 1}})
    router = RefRouter(spec.router)
    seen = Counter()
    for p in generate(spec):
        out = router.process(p.data, p.port)
        assert (out.kind, out.reason) == EXPECTED[p.kind], p
        seen[p.kind] += 1
    assert set(seen) == set(EXPECTED)


def test_every_checksum_verifies() -> None:
    """IP header and UDP/TCP checksums (over the pseudo-header) of generated frames,
    including options and tunnel packets."""
    spec = make(count=300, defaults={"size": {"uniform": [78, 400]},
                                     "protocol": {"udp": 1, "tcp": 1, "tunnel": 1},
                                     "mix": {"options": 0.2, "ttl_expiring": 0.1}})
    for p in generate(spec):
        parsed = parse_frame(p.data)
        assert parsed.ip is not None and parsed.l4_offset is not None
        hdr = parsed.ip
        assert hdr.total_length == len(p.data) - 14
        assert internet_checksum(p.data[14 : parsed.l4_offset]) == 0
        seg = p.data[parsed.l4_offset :]
        pseudo = struct.pack("!IIBBH", hdr.src, hdr.dst, 0, hdr.protocol, len(seg))
        assert internet_checksum(pseudo + seg) == 0, p


def test_payload_carries_the_packet_id() -> None:
    for p in generate(make(count=50, defaults={"size": 128, "protocol": "tcp"})):
        off = parse_frame(p.data).payload_offset
        assert p.data[off : off + 4] == TAG
        assert int.from_bytes(p.data[off + 4 : off + 8], "big") == p.id


def test_replay_original_timing_padding_and_rate(tmp_path: Path) -> None:
    src = tmp_path / "in.pcap"
    write_pcap(src, [(5_000, b"\x02" * 42), (5_100, b"\x03" * 100), (9_000, b"\x04" * 60)])
    spec = make(count=10, ports={2: {"source": {"pcap": str(src)}, "enabled": True}},
                defaults={"enabled": False})
    pkts = generate(spec)
    assert [len(p.data) for p in pkts] == [60, 100, 60]  # runt padded as a NIC would
    # 5_000 -> 0; the second frame must wait for the first's 84 wire bytes (672 ns)
    assert [p.time_ns for p in pkts] == [0, 672, 4000]
    assert {p.port for p in pkts} == {2} and {p.kind for p in pkts} == {"replay"}
    paced = generate(make(count=10, ports={2: {"source": {"pcap": str(src), "timing": "rate",
                                                          "loop": 2}, "load": 0.5, "enabled": True}},
                          defaults={"enabled": False}))
    assert len(paced) == 6
    assert [b.time_ns - a.time_ns for a, b in zip(paced, paced[1:], strict=False)][:2] == [
        84 * 16, 124 * 16]


def test_write_traffic_and_read_back(tmp_path: Path) -> None:
    spec = make(count=100, defaults={"size": "imix", "mix": {"miss": 0.1}})
    summary = write_traffic(spec, tmp_path)
    assert summary["packets"] == 500
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json", *(f"port{i}.pcap" for i in range(5))]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 1 and manifest["spec"]["count"] == 100
    assert len(manifest["packets"]["time_ns"]) == 500
    back = load_traffic(tmp_path)
    gen = generate(spec)
    assert [(p.id, p.port, p.time_ns, p.data, p.kind) for p in back] == [
        (p.id, p.port, p.time_ns, p.data, p.kind) for p in gen]


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"count": 1, "defaults": {"size": 63}}, "too small"),
        ({"count": 1, "defaults": {"size": 1519}}, "exceeds"),
        ({"count": 1, "defaults": {"size": 73, "protocol": "tunnel"}}, "too small"),
        ({"count": 1, "defaults": {"rate_bps": "2G"}}, "exceeds the link"),
        ({"count": 1, "defaults": {"mix": {"miss": 0.7, "arp": 0.7}}}, "sum to"),
        ({"count": 1, "defaults": {"mix": {"nonsense": 0.1}}}, "unknown kind"),
        ({"count": 1, "defaults": {"arrivals": "sometimes"}}, "constant, poisson"),
        ({"count": 1, "ports": {9: {}}}, "not a port"),
        ({}, "count"),
        ({"count": 1, "colour": "red"}, "unknown key"),
    ],
)
def test_bad_specs_say_what_is_wrong(top: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        make(**top)


def test_misses_impossible_with_a_default_route(tmp_path: Path) -> None:
    routes = tmp_path / "routes.txt"
    routes.write_text("0.0.0.0/0 10.0.0.2 0\n")
    router = tmp_path / "router.yaml"
    text = ROUTER_YAML.read_text().replace("routes: routes.txt", f"routes: {routes}")
    router.write_text(text)
    spec = spec_from_dict({"router": str(router), "count": 5,
                           "defaults": {"mix": {"miss": 1.0}}}, tmp_path)
    with pytest.raises(SpecError, match="default"):
        generate(spec)


def test_via_port_sends_each_input_to_one_output() -> None:
    # a permutation: input port i only to destinations the router sends out of (i + 1) % 5
    spec = make(count=100, ports={i: {"destinations": {"via_port": (i + 1) % 5}} for i in range(5)})
    router = RefRouter(spec.router)
    outs = Counter()
    for p in generate(spec):
        outcome = router.process(p.data, p.port)
        assert isinstance(outcome, Forward)
        outs[(p.port, outcome.port)] += 1
    assert outs == Counter({(i, (i + 1) % 5): 100 for i in range(5)})


def test_via_port_must_be_a_port_number() -> None:
    with pytest.raises(SpecError, match="via_port"):
        make(count=1, defaults={"destinations": {"via_port": "x"}})
