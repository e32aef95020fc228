"""The hdr_format block alone: steps 20-23 of the oracle.  Messages carry what parse
and lookup would have produced (packet word with the TTL / source flags, next-hop
index from the linked table); forwarded frames must equal the oracle's bytes, the
rest must be excepted with the oracle's reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.oracle import Except, Forward, RefRouter
from npkit.emulator.traffic.packet import Ethernet, IPv4, ip, ipv4_frame
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.router.loader import build_from_files
from npkit.toolchain.system.harness import Harness
from npkit.toolchain.system.sysmap import SYS

from .test_blocks_parse import single_block

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traffic"
REASONS = load_reasons()


@pytest.mark.parametrize("threads", [4, 8])
def test_hdr_format_rewrites_like_the_oracle(threads: int) -> None:
    cfg = RouterConfig.load(EXAMPLES / "router.yaml")
    ref = RefRouter(cfg)
    tables = build_from_files(EXAMPLES / "routes.txt", EXAMPLES / "router.yaml")
    h = Harness(single_block("hdr_format/hdr_format.uc", threads))
    cases = []
    # forwarded through gateways and to on-link hosts, TTLs incl. 2 and 255, checksums
    # that wrap, expired TTLs, redirects, unresolved next hops
    for dst, src, ttl, port, tos in [
        ("1.9.9.9", "30.0.0.1", 64, 1, 0), ("1.2.3.200", "30.0.0.1", 2, 0, 0),
        ("1.2.3.129", "30.0.0.7", 255, 2, 0xFF), ("10.0.3.10", "30.0.0.1", 9, 0, 0),
        ("20.40.1.1", "10.0.2.5", 33, 2, 0),  # out of the receiving port: redirect
        ("20.40.1.1", "30.1.2.3", 33, 2, 0),  # same port, source off-subnet: forward
        ("1.2.3.4", "30.0.0.1", 1, 1, 0), ("1.2.3.4", "30.0.0.1", 0, 1, 0),
        ("10.0.4.99", "30.0.0.1", 64, 0, 0),  # connected, no ARP entry: arp_miss
        ("150.100.3.4", "40.0.0.9", 128, 3, 0x10),
    ]:  # fmt: skip
        for ident in (0, 0xFFFF, 0x1234):
            eth = Ethernet(cfg.ports[port].mac, bytes.fromhex("020000000077"), 0x0800)
            hdr = IPv4(ip(src), ip(dst), 6, ttl=ttl, tos=tos, identification=ident)
            cases.append((ipv4_frame(eth, hdr, payload=bytes(range(40))), port))
    pws = {}
    for frame, port in cases:
        dst = int.from_bytes(frame[30:34], "big")
        src = int.from_bytes(frame[26:30], "big")
        nh = tables.table.lookup_reference(dst) or 0
        pw = h.packet(frame, port)
        if frame[22] <= 1:
            pw |= 1 << SYS.pw_ttl_le1_bit
        if cfg.ports[port].on_subnet(src):
            pw |= 1 << SYS.pw_src_on_in_subnet_bit
        h.send(pw, nh)
        pws[pw & 0xFFFF] = (frame, port)
    h.run(400_000)
    outcomes = [ref.process(f, p) for f, p in cases]
    assert {"ttl_expired", "redirect", "arp_miss"} <= {getattr(o, "reason", "") for o in outcomes}
    assert sum(isinstance(o, Forward) for o in outcomes) >= 15
    seen = set()
    for pw, port in h.outputs():
        frame, in_port = pws[pw & 0xFFFF]
        o = ref.process(frame, in_port)
        assert isinstance(o, Forward), o
        assert port == o.port
        assert h.frame(pw, len(frame)) == o.data
        seen.add(pw & 0xFFFF)
    for pw, rec in h.exceptions():
        frame, in_port = pws[pw & 0xFFFF]
        o = ref.process(frame, in_port)
        assert isinstance(o, Except) and rec & 0xFF == REASONS.exception(o.reason).code, o
        seen.add(pw & 0xFFFF)
    assert seen == set(pws)
