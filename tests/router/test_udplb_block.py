"""The UDP load balancer's block (examples/apps/udplb/udplb/udplb.uc) alone, between the
host's stand-ins, on frames made by hand for the cases its traffic does not make or makes
rarely: a zero UDP checksum (kept), an updated UDP checksum of zero (sent as 0xFFFF),
checksums that wrap, DF set (forwarded), MF set, TTL 2 / 1 / 0, IHL 6, version 6, bad
total lengths, wrong and broadcast MACs, 59- and 60-byte frames, a VIP or a port of a
service alone, the hash's extremes (the first and the last backend), every input port.
Every outcome must be the model's (model.py): forwarded with its bytes on its port, or
counted under its drop reason."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from npkit.emulator.traffic.cpkt import FORWARD
from npkit.emulator.traffic.model import StandaloneModel
from npkit.emulator.traffic.packet import UDP, Ethernet, IPv4, internet_checksum, ip, ipv4_frame
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.system.app import app_reasons, load_app, model_of_app
from npkit.toolchain.system.harness import Harness

ROOT = Path(__file__).resolve().parents[2]
UDPLB = ROOT / "examples" / "apps" / "udplb"
CLIENT_MAC = bytes.fromhex("020000000077")


def _layout(tmp: Path, threads: int) -> Path:
    """The block between a host source (ME 0) and a host sink (ME 5)."""
    path = tmp / "single.yaml"
    path.write_text(yaml.safe_dump({
        "name": "udplb_single",
        "rings": {"in": {"ring": 0, "size": 512}, "out": {"ring": 1, "size": 512},
                  "exceptions": {"ring": 11, "size": 512}},
        "exceptions": "exceptions",
        "blocks": {"src": {"external": True, "mes": [0], "out": "in"},
                   "dut": {"source": "udplb/udplb.uc", "mes": [1], "threads": threads, "in": "in", "out": "out"},
                   "sink": {"external": True, "mes": [5], "in": "out"}},
    }))  # fmt: skip
    return path


def _udp(dst: str, dport: int, *, src: str = "198.18.3.4", sport: int = 4000, ttl: int = 64, port_mac: bytes,
         flags: int = 0, payload: bytes = bytes(range(30)), ident: int = 0x1234) -> bytearray:  # fmt: skip
    hdr = IPv4(ip(src), ip(dst), 17, ttl=ttl, identification=ident, flags=flags)
    udp = UDP(sport, dport).pack(payload, ip(src), ip(dst))
    return bytearray(ipv4_frame(Ethernet(port_mac, CLIENT_MAC, 0x0800), hdr, payload=udp))


def _refresh(f: bytearray) -> bytearray:
    f[24:26] = b"\0\0"
    f[24:26] = internet_checksum(bytes(f[14:34])).to_bytes(2, "big")
    return f


def _cases(model: StandaloneModel) -> list[tuple[bytes, int]]:
    macs = [p.mac for p in RouterConfig.load(UDPLB / "router.yaml").ports]
    out: list[tuple[bytes, int]] = []
    for port in range(5):
        m = macs[port]
        for dst, dport in (("10.100.0.1", 53), ("10.100.0.1", 123), ("10.100.0.2", 53), ("10.100.0.2", 5060),
                           ("10.100.0.2", 123), ("10.100.0.3", 53), ("10.100.0.1", 5060)):  # fmt: skip
            for ttl in (64, 2, 1, 0, 255):
                out.append((bytes(_udp(dst, dport, ttl=ttl, port_mac=m, ident=0xFFFF if ttl == 2 else 0)), port))
        # the hash's extremes: src ^ sport folds to 0 (the first backend) and to 0xFFFF (the last)
        out.append((bytes(_udp("10.100.0.1", 53, src="198.18.0.7", sport=0xC612 ^ 0x0007, port_mac=m)), port))
        out.append((bytes(_udp("10.100.0.1", 53, src="198.18.255.255", sport=0xFFFF ^ 0xC612 ^ 0xFFFF, port_mac=m)), port))
        f = _udp("10.100.0.2", 53, port_mac=m)
        f[40:42] = b"\0\0"  # no UDP checksum: stays none
        out.append((bytes(f), port))
        f = _udp("10.100.0.1", 53, port_mac=m, flags=0b010)  # DF: a whole datagram
        out.append((bytes(_refresh(f)), port))
        f = _udp("10.100.0.1", 53, port_mac=m, flags=0b001)  # MF
        out.append((bytes(_refresh(f)), port))
        f = _udp("10.100.0.1", 53, port_mac=m)
        f[14] = 0x46  # IHL 6
        out.append((bytes(_refresh(f)), port))
        f = _udp("10.100.0.1", 53, port_mac=m)
        f[14] = 0x65  # version 6
        out.append((bytes(_refresh(f)), port))
        for total in (19, len(f) - 13, len(f) - 14):
            f = _udp("10.100.0.1", 53, port_mac=m)
            f[16:18] = total.to_bytes(2, "big")
            out.append((bytes(_refresh(f)), port))
        f = _udp("10.100.0.1", 53, port_mac=m)
        f[24] ^= 1  # a header checksum that does not verify
        out.append((bytes(f), port))
        for dst_mac in (b"\xff" * 6, macs[(port + 1) % 5]):
            f = _udp("10.100.0.1", 53, port_mac=m)
            f[0:6] = dst_mac
            out.append((bytes(f), port))
        short = _udp("10.100.0.1", 53, port_mac=m, payload=b"")
        out.append((bytes(short[:59]), port))  # a runt
        out.append((bytes(short.ljust(60, b"\0")), port))  # 60 bytes: forwarded, padding kept
        arp = bytearray(_udp("10.100.0.1", 53, port_mac=m))
        arp[12:14] = b"\x08\x06"
        out.append((bytes(arp), port))
        tcp = _udp("10.100.0.1", 53, port_mac=m)
        tcp[23] = 6
        out.append((bytes(_refresh(tcp)), port))
    # the UDP checksum whose update computes as zero, sent as 0xFFFF (RFC 768)
    base = _udp("10.100.0.1", 53, port_mac=macs[0])
    for x in range(1, 0x10000):
        base[40:42] = x.to_bytes(2, "big")
        if model.decide(bytes(base), 0).frame[40:42] == b"\xff\xff":
            out.append((bytes(base), 0))
    return out


@pytest.mark.parametrize("threads", [4, 8])
def test_the_block_does_what_the_model_says(tmp_path: Path, threads: int) -> None:
    app = load_app(UDPLB)
    model = model_of_app(app)
    assert isinstance(model, StandaloneModel)
    reasons = app_reasons(app)
    cases = _cases(model)
    want = [model.decide(f, p) for f, p in cases]
    kinds = Counter(v.reason or "forward" for v in want)
    assert kinds["forward"] > 80 and len(kinds) == 9, kinds  # forwarded, and every drop reason
    # exactly one of the 65,535 checksums updates to 0xFFFF: the one computed as zero
    assert sum(v.kind == FORWARD and v.frame[40:42] == b"\xff\xff" for v in want) == 1
    h = Harness(_layout(tmp_path, threads), app=app)
    sent: dict[int, int] = {}
    for k, (frame, port) in enumerate(cases):
        sent[h.inject(frame, port) & 0xFFFF] = k
    h.run(3_000_000)
    got = h.outputs()
    for pw, oport in got:
        k = sent[pw & 0xFFFF]
        v = want[k]
        assert v.kind == FORWARD, (k, v, cases[k])
        assert oport == v.port and h.frame(pw, len(cases[k][0])) == v.frame, k
    assert len(got) == kinds["forward"]
    drops = {c: n for c, n in h.drops().items()}
    assert drops == {reasons.drop(r).code: n for r, n in kinds.items() if r != "forward"}

