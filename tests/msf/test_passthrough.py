"""The pass-through example forwards 5 x 1 Gb/s at line rate with zero loss.

Checked for 64-byte Ethernet frames (84 bytes on the wire, 7.44 Mpkt/s in all) and
seed 003's 78-byte packets (90 bytes on the wire, 6.94 Mpkt/s) over 1 ms of emulated
time: every packet is transmitted on its own port, output pcaps equal the inputs
byte for byte and in order, and departures are spaced by exactly the wire time
(never less; a frame leaves later only when its forwarding took longer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npkit.emulator.traffic.pcap import read_pcap

from .conftest import passthrough_run, spec_traffic

CASES = {
    # spec, wire bytes per packet, packets per port in 1 ms
    "min64": ("min64.yaml", 84, 1489),
    "seed003": ("seed003.yaml", 90, 1389),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_line_rate_zero_loss_byte_identical(case: str, tmp_path: Path) -> None:
    spec, wire, per_port = CASES[case]
    traffic = spec_traffic(spec, 1_000_000)
    assert len(traffic) == 5 * per_port
    run = passthrough_run(traffic, 1_000_000 + 20_000)
    rep = run.write_captures(tmp_path)
    assert rep["balanced"], rep["problems"]
    t = rep["totals"]
    assert (t["offered"], t["forwarded"], t["dropped"], t["in_flight"]) == (
        len(traffic),
        len(traffic),
        {},
        0,
    )
    wire_ns = wire * 8  # 1 Gb/s: 8 ns per byte
    for port in range(5):
        sent = [traffic.frames[i] for i in range(len(traffic)) if traffic.ports[i] == port]
        arrivals = [traffic.times[i] for i in range(len(traffic)) if traffic.ports[i] == port]
        got = read_pcap(tmp_path / f"port{port}.pcap")
        assert [r.data for r in got] == sent, f"port {port}: output differs from input"
        times = [r.timestamp_ns for r in got]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert min(gaps) == wire_ns, f"port {port}: frames closer than the wire allows"
        exact = sum(g == wire_ns for g in gaps)
        assert exact >= 0.99 * len(gaps), (
            f"port {port}: only {exact}/{len(gaps)} gaps equal the wire time"
        )
        assert all(d > a for d, a in zip(times, arrivals, strict=True))  # leaves after it arrived
        latency = [d - a for d, a in zip(times, arrivals, strict=True)]
        assert max(latency) < 5_000, f"port {port}: a packet took {max(latency)} ns"
    disp = json.loads((tmp_path / "dispositions.json").read_text())
    assert disp == {"offered": len(traffic), "drops": [], "exceptions": []}


def test_large_frames_cross_many_elements(tmp_path: Path) -> None:
    """64..1518-byte frames (1..24 RBUF elements each), Poisson at 90 % load."""
    traffic = spec_traffic("mixed.yaml", 400_000)
    run = passthrough_run(traffic, 400_000 + 30_000)
    rep = run.write_captures(tmp_path)
    assert (
        rep["balanced"]
        and rep["totals"]["forwarded"] == len(traffic)
        and not rep["totals"]["dropped"]
    )
    assert max(traffic.lens) > 1400
    for port in range(5):
        sent = [traffic.frames[i] for i in range(len(traffic)) if traffic.ports[i] == port]
        assert [r.data for r in read_pcap(tmp_path / f"port{port}.pcap")] == sent
