"""The parse block alone on the emulator, against the oracle (RFC 1812 steps 1-18).

A host stand-in feeds (packet word, length) messages for frames of every kind the
oracle distinguishes; parse must except or drop exactly what the oracle excepts or
drops at steps 1-18, and hand everything else to the lookup ring with the destination
address and the TTL / source-on-subnet flags that steps 20 and 21 need."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.generator import generate
from npkit.emulator.traffic.oracle import Drop, Except, RefRouter
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.spec import load_spec
from npkit.toolchain.system.harness import Harness
from npkit.toolchain.system.sysmap import SYS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traffic"
REASONS = load_reasons()


def single_block(
    source: str, threads: int, defines: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A layout of one block between a host source (ME 0) and a host sink (ME 5)."""
    return {
        "name": "single",
        "rings": {"in": {"ring": 0, "size": 512}, "out": {"ring": 1, "size": 512},
                  "exceptions": {"ring": 11, "size": 512}},
        "exceptions": "exceptions",
        "blocks": {
            "src": {"external": True, "mes": [0], "out": "in"},
            "dut": {"source": source, "mes": [1], "threads": threads, "in": "in", "out": "out",
                    "defines": defines or {}},
            "sink": {"external": True, "mes": [5], "in": "out"},
        },
    }  # fmt: skip


def traffic(count: int, seed: int = 11) -> list[Any]:
    return generate(load_spec(EXAMPLES / "errors.yaml", {"count": count, "seed": seed}))


@pytest.fixture(scope="module")
def ref() -> RefRouter:
    return RefRouter(RouterConfig.load(EXAMPLES / "router.yaml"))


@pytest.mark.parametrize("threads", [4, 8])
def test_parse_classifies_like_the_oracle(threads: int, ref: RefRouter) -> None:
    cfg = ref.config
    h = Harness(single_block("parse/parse.uc", threads))
    pkts = traffic(60)
    by_index = {h.inject(p.data, p.port) & 0xFFFF: p for p in pkts}
    h.run(400_000)
    outs, excs = h.outputs(), h.exceptions()
    handled: set[int] = set()
    expected_drops: collections.Counter[int] = collections.Counter()
    late = {"no_route", "ttl_expired", "redirect", "arp_miss"}
    for pw, dst in outs:
        p = by_index[pw & 0xFFFF]
        handled.add(pw & 0xFFFF)
        o = ref.process(p.data, p.port)
        # forwarded by parse: the oracle forwards it or decides at a step after 18
        assert not isinstance(o, Drop), (p.kind, o)
        assert not isinstance(o, Except) or o.reason in late, (p.kind, o)
        assert dst == int.from_bytes(p.data[30:34], "big")
        assert (pw >> 28) & 7 == p.port
        ttl_le1 = p.data[22] <= 1
        src = int.from_bytes(p.data[26:30], "big")
        assert bool(pw >> SYS.pw_ttl_le1_bit & 1) == ttl_le1, p.kind
        assert bool(pw >> SYS.pw_src_on_in_subnet_bit & 1) == cfg.ports[p.port].on_subnet(src), (
            p.kind
        )
    for pw, rec in excs:
        p = by_index[pw & 0xFFFF]
        handled.add(pw & 0xFFFF)
        o = ref.process(p.data, p.port)
        assert isinstance(o, Except) and REASONS.exception(o.reason).code == rec & 0xFF, (p.kind, o)
        assert rec >> 24 == SYS.exc_record and (rec >> 16) & 0xFF == p.port
    for i, p in by_index.items():
        if i not in handled:
            o = ref.process(p.data, p.port)
            assert isinstance(o, Drop), (p.kind, o)
            expected_drops[REASONS.drop(o.reason).code] += 1
    assert h.drops() == dict(expected_drops)
    # every step-1..18 reason of the oracle occurred in this traffic
    seen = {ref.process(p.data, p.port) for p in pkts}
    reasons = {o.reason for o in seen if not hasattr(o, "port")}
    assert {"short_frame", "dst_mac_mismatch", "arp", "non_ipv4_ethertype", "bad_version", "bad_ihl",
            "ip_truncated", "bad_checksum", "ip_options", "martian_dst", "broadcast", "multicast",
            "local_delivery", "martian_src"} <= reasons  # fmt: skip
    # dropped buffers went back to the free list
    assert h.free_count() == SYS.n_bufs - len(outs) - len(excs)


def test_parse_edge_rules(ref: RefRouter) -> None:
    """Rules the random mix rarely hits: oversize, bad total length, obsolete broadcast,
    link-layer broadcast to a unicast IP, local delivery to another port's address,
    broadcast to a subnet, options with a bad checksum, TTL 1 / 0 flags."""
    from npkit.emulator.traffic.packet import Ethernet, IPv4, ip, ipv4_frame

    cfg = ref.config
    port = cfg.ports[1]

    def frame(dst: str, src: str = "30.0.0.1", ttl: int = 64, mac: bytes | None = None,
              options: bytes = b"", size: int = 0, total: int | None = None) -> bytes:  # fmt: skip
        eth = Ethernet(mac or port.mac, bytes.fromhex("020000000099"), 0x0800)
        hdr = IPv4(ip(src), ip(dst), 17, ttl=ttl, options=options, total_length=total)
        f = ipv4_frame(eth, hdr, payload=b"x" * 30)
        return f + bytes(max(0, size - len(f)))

    cases = [
        frame("1.2.3.4", size=1515),  # oversize
        frame("10.0.2.0"),  # obsolete broadcast (another port's subnet, host 0)
        frame("1.2.3.4", mac=b"\xff" * 6),  # link broadcast, unicast IP
        frame("10.0.3.1"),  # local delivery to port 3's address
        frame("10.0.3.255"),  # directed broadcast
        frame("255.255.255.255", src="0.0.0.0"),  # limited broadcast from 0.0.0.0
        frame("1.2.3.4", ttl=1),
        frame("1.2.3.4", ttl=0, src="10.0.1.77"),
        frame("1.2.3.4", options=b"\x01\x01\x01\x00"),  # options, good checksum
        frame("10.0.1.1", mac=b"\x01\x00\x5e\x00\x00\x01"),  # group MAC to the router
        frame("1.2.3.4", total=19),  # total length < IHL * 4
    ]
    h = Harness(single_block("parse/parse.uc", 8))
    pws = [h.inject(f, 1) for f in cases]
    h.run(200_000)
    outs = {pw & 0xFFFF: (pw, w1) for pw, w1 in h.outputs()}
    excs = {pw & 0xFFFF: rec & 0xFF for pw, rec in h.exceptions()}
    drops: collections.Counter[int] = collections.Counter()
    for f, pw in zip(cases, pws, strict=True):
        o = ref.process(f, 1)
        i = pw & 0xFFFF
        if isinstance(o, Except) and o.reason not in (
            "no_route",
            "ttl_expired",
            "redirect",
            "arp_miss",
        ):
            assert excs.get(i) == REASONS.exception(o.reason).code, o
        elif isinstance(o, Drop):
            assert i not in outs and i not in excs, o
            drops[REASONS.drop(o.reason).code] += 1
        else:
            assert i in outs, o
            ttl = f[22]
            assert bool(outs[i][0] >> SYS.pw_ttl_le1_bit & 1) == (ttl <= 1)
    assert h.drops() == dict(drops)
    reasons = {getattr(ref.process(f, 1), "reason", "") for f in cases}
    assert {"oversize_frame", "obsolete_broadcast", "link_broadcast_unicast_ip", "local_delivery",
            "broadcast", "bad_total_length", "ip_options"} <= reasons, reasons  # fmt: skip
