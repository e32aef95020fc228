"""npkd beside i3d on the GPE (`-D gpe_ipv4=1` of the SPP's spp_gpe layout; docs/spp.md
§12): two host processes on one clock loop, i3d relaying the IPv4 slices' records
(spp_to_gpe) to npkd, npkd's SPP mode answering the inner packet (echo reply, Time
Exceeded, Port / Net Unreachable from the slice's address) encapsulated back to the
sender, its frames handed back to i3d for the queue manager, and the run judging each
answer byte for byte (issue 46)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from npkit.emulator.traffic.packet import internet_checksum
from npkit.emulator.traffic.pcap import PcapWriter
from npkit.toolchain.cli import main
from npkit.toolchain.system.i3d import load_substrate
from npkit.toolchain.system.npkd_spp import SppAnswers, encapsulate, exceptions_file

ROOT = Path(__file__).resolve().parents[2]
SPP = ROOT / "examples" / "apps" / "spp"


def inner(dst: str, proto: int = 17, ttl: int = 64, l4: bytes = b"\x03\xe8\x00\x35\x00\x28\x00\x00" + bytes(32)) -> bytes:
    """An inner IPv4 packet of 20 + len(l4) bytes from 10.9.9.9, checksums right."""
    src_b, dst_b = bytes([10, 9, 9, 9]), bytes(int(x) for x in dst.split("."))
    h = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0, ttl, proto, 0, src_b, dst_b))
    h[10:12] = internet_checksum(bytes(h)).to_bytes(2, "big")
    return bytes(h) + l4


def echo_request(seq: int) -> bytes:
    m = bytearray(struct.pack("!BBHHH", 8, 0, 0, 0x4242, seq) + b"ping data " * 3)
    m[2:4] = internet_checksum(bytes(m)).to_bytes(2, "big")
    return bytes(m)


# slice v4a's gpe filter is 172.19.0.0/16: its slow path owns 172.19.0.1
def cases(seq: int) -> dict[str, bytes]:
    return {
        "echo": inner("172.19.0.1", proto=1, l4=echo_request(seq)),   # -> echo reply
        "udp": inner("172.19.0.1"),                                     # -> port unreachable
        "ttl": inner("172.19.5.5", ttl=1),                              # the fast path: spp_ttl_expired
        "route": inner("172.19.9.9"),                                   # -> net unreachable
    }


def outer(payload: bytes, sport: int) -> bytes:
    """To v4a's meta-interface a0 (10.0.0.1:33001, port 0) from 198.18.0.7:sport."""
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0,
                               bytes([198, 18, 0, 7]), bytes([10, 0, 0, 1])))  # fmt: skip
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    udp = struct.pack("!HHHH", sport, 33001, 8 + len(payload), 0)
    return bytes.fromhex("024e50000000") + bytes.fromhex("0a0000000007") + b"\x08\x00" + bytes(ip) + udp + payload


def spec(tmp_path: Path, rounds: int = 6) -> Path:
    """A directory of port0.pcap: each case `rounds` times, 20 us apart."""
    d = tmp_path / "v4gpe"
    d.mkdir()
    with PcapWriter(d / "port0.pcap") as w:
        t = 10_000
        for k in range(rounds):
            for n, payload in enumerate(cases(k).values()):
                w.write(t, outer(payload, 4000 + 4 * k + n))
                t += 20_000
    return d


def demo(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["demo", "--app", str(SPP), "--layout", "spp_gpe", "-D", "gpe_ipv4=1",
                                    "--ms", "1", "--json", *args])  # fmt: skip
    assert res.exit_code == 0, res.output[-3000:]
    return json.loads(res.output)


def test_npkd_answers_the_ipv4_slices_gpe_packets_and_each_answer_is_judged(xscale_built: Path,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    s = demo("--traffic", str(spec(tmp_path)))
    cp = s["control_plane"]
    assert s["verdict"]["ok"], s["verdict"]
    n = cp["npkd"]["counters"]
    assert cp["npkd"]["state"] == "running" and n["exc_unknown"] == 0
    # 6 rounds: an echo reply, a Port and a Net Unreachable each; TTL 1 the fast path drops
    # before the filter's action (spp_ttl_expired: the slow path never sees it)
    for key in ("icmp_echo_reply", "icmp_port_unreachable", "icmp_net_unreachable"):
        assert n[key] == 6, (key, n)
    assert n["icmp_time_exceeded"] == 0 and s["totals"]["offered"] == 24
    answers = cp["npkd_answers"]
    assert answers["sent"] == answers["matched"] == 18 and answers["awaiting_npkd"] == 0
    # i3d relayed each record to npkd and put each of npkd's frames on cp_to_qm
    assert cp["counters"]["relayed"] == 18 and cp["counters"]["relayed_back"] == 18
    sent = 18
    cmp = s["comparison"]
    assert cmp["unexpected_control"] == 0 and cmp["missing_control"] == 0 and cmp["matched_control"] == sent


def test_the_default_demo_with_npkd_beside_i3d(xscale_built: Path) -> None:
    s = demo()
    cp = s["control_plane"]
    assert s["verdict"]["ok"], s["verdict"]
    assert cp["counters"]["exc_other"] == 0 and cp["counters"]["relayed"] > 0
    assert cp["npkd_answers"]["sent"] == cp["npkd_answers"]["matched"] > 0
    assert s["comparison"]["unexpected_control"] == 0


def test_the_answer_is_encapsulated_back_to_the_sender() -> None:
    ans = SppAnswers(load_substrate(SPP), SPP)
    frame = outer(cases(3)["echo"], 4321)
    out = ans.answer(frame, 0)
    assert out is not None
    assert out[0:6] == frame[6:12] and out[6:12] == frame[0:6]              # back to the MAC it came from
    assert out[26:30] == bytes([10, 0, 0, 1]) and out[30:34] == frame[26:30]  # from the meta-interface
    assert out[34:36] == (33001).to_bytes(2, "big") and out[36:38] == (4321).to_bytes(2, "big")
    assert internet_checksum(out[14:34]) == 0 and out[22] == 64 and out[23] == 17
    assert out[42 + 20] == 0 and out[42 + 12 : 42 + 16] == bytes([172, 19, 0, 1])  # echo reply from the address asked
    assert out[42 + 28 :] == frame[42 + 28 :]                                    # its data whole
    ttl = ans.answer(outer(cases(0)["ttl"], 1), 0)
    assert ttl is not None and ttl[42 + 20] == 11 and ttl[42 + 12 : 42 + 16] == bytes([10, 0, 0, 1])
    assert ans.answer(frame, 1) is None                                     # not a meta-interface of port 1
    assert encapsulate(frame, bytes(14) + out[42:], 0x0A000001, 33001) == out


def test_npkds_exceptions_file_names_the_slices_meta_interfaces_and_addresses() -> None:
    text = exceptions_file(load_substrate(SPP), SPP)
    assert "20 spp" in text.splitlines()
    assert "spp_mi 0 a000001 33001" in text and "spp_mi 3 a000301 33002" in text
    assert "spp_local ac130001 32" in text


def test_npkd_beside_i3d_needs_the_gpe_placement(xscale_built: Path) -> None:
    res = CliRunner().invoke(main, ["demo", "--app", str(SPP), "--layout", "spp_gpe", "-D", "gpe_ipv4=1",
                                    "-D", "control=xscale", "--ms", "0.1"])  # fmt: skip
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "gpe_ipv4=1" in res.output and "control=gpe" in res.output
