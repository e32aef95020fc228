"""Large frames at line rate through the whole router (microcode/README.md §4.5, §4.6, §6),
and the smallest in the parallel layout (the qm keeps up with its pool MEs).

Each input port sends back to back (5 x 1 Gb/s, constant arrivals) to a prefix that leaves
by its own output port (router_bench's permutation: no output port is offered more than its
line rate).  The offer is exactly line rate, so any moment an output wire idles once the
router has settled is lost for good: the next frame was not whole in the PHY FIFO (which is
store and forward) when the wire became free.  Before tx filled the TBUF in batches, a
1,518-byte frame took ~8,000 cycles to reach the TBUF and the wires idled ~0.3 % (1518 B) and
~0.6 % (IMIX) of the time; the bound here is 0.05 %.  Every frame must also leave byte for
byte as the oracle says, in flow order (TBUF element batches across the TBUF's wrap)."""

from __future__ import annotations

import pytest

from npkit.emulator.traffic_run import Departure
from npkit.toolchain.bench.system import permutation_traffic
from npkit.toolchain.system.router_run import RouterRun

MISMATCHES = ("wrong_outcome", "wrong_port", "wrong_bytes", "reordered", "wrong_reason", "unmatched",
              "duplicates", "unmatched_exception")  # fmt: skip
DURATION_NS = 3_000_000
SETTLED_NS = 1_000_000  # 1518 B settles in ~0.5 ms, IMIX at once here (router_bench: warm-up)


class WireIdle:
    """Idle time of the output wires between frames that started after `settled_ns` (a
    departure hook): gap to the next frame's first byte less the frame's wire time."""

    def __init__(self, wire: dict[int, tuple[int, int, int]], settled_ns: int) -> None:
        self.over = {p: sum(w) for p, w in wire.items()}
        self.settled = settled_ns
        self.last: dict[int, tuple[int, int]] = {}  # port: (first byte ns, wire bytes) of its last frame
        self.idle_ns = 0

    def add(self, d: Departure) -> None:
        prev = self.last.get(d.port)
        if prev is not None and prev[0] >= self.settled:
            self.idle_ns += d.t - prev[0] - prev[1] * 8  # 1 Gb/s: 8 ns a byte
        self.last[d.port] = (d.t, len(d.data) + self.over.get(d.port, 24))


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
@pytest.mark.parametrize("size", [1518, "imix"])
def test_output_wires_do_not_idle(layout: str, size: int | str) -> None:
    tr = permutation_traffic(size, DURATION_NS)
    rr = RouterRun.link(layout, {}, tr)
    idle = WireIdle(tr.wire, SETTLED_NS)
    rr.run.on_departure.append(idle.add)
    rr.run_traffic(DURATION_NS)
    idle_ns = idle.idle_ns
    assert sorted(idle.last) == [0, 1, 2, 3, 4]
    span_ns = 5 * (DURATION_NS - SETTLED_NS)
    assert idle_ns < 0.0005 * span_ns, f"output wires idle {idle_ns} ns of {span_ns} ns"
    rr.drain()
    cmp_ = rr.compare()
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    rep = rr.run.report()
    t = rep["totals"]
    assert t["dropped"] == {} and t["exceptions"] == {} and t["in_flight"] == 0, t
    assert rr.run.all_pushed and t["forwarded"] == rr.run.read and rep["balanced"], rep["problems"]


class LatencyAfter:
    """Latency (ns, first byte in to first byte out) of the frames that arrived after
    `settled_ns` (a departure hook)."""

    def __init__(self, settled_ns: int) -> None:
        self.settled = settled_ns
        self.ns: list[int] = []

    def add(self, d: Departure) -> None:
        if d.chunk is not None and d.i >= 0 and d.chunk.w.times[d.i] >= self.settled:
            self.ns.append(d.t - d.chunk.w.times[d.i])


def test_parallel_layout_keeps_no_backlog_at_64_bytes() -> None:
    # The pool MEs hand the qm their packets in bursts: with one message a turn of its
    # enqueue context, a backlog grew on fast_to_qm for ~0.4 ms and then stood at ~16 us
    # (every later frame 21 us late); two a turn after a message (qm.uc) keep up.
    dur = 600_000
    tr = permutation_traffic(64, dur)
    rr = RouterRun.link("parallel", {}, tr)
    early, late = LatencyAfter(0), LatencyAfter(400_000)
    rr.run.on_departure += [early.add, late.add]
    rr.run_traffic(dur)
    assert len(late.ns) > 5 * 250  # five ports, a 64 B frame every 672 ns
    late.ns.sort()
    p99 = late.ns[int(0.99 * len(late.ns))]
    assert p99 < 8_000, f"p99 {p99} ns after 0.4 ms: a backlog"
    assert max(late.ns) < max(early.ns[: len(early.ns) // 4]) + 2_000  # no growth after the start
    rr.drain()
    cmp_ = rr.compare()
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = rr.run.report()["totals"]
    assert t["dropped"] == {} and t["in_flight"] == 0, t


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
def test_1518_byte_frames_leave_within_20_us(layout: str) -> None:
    # Five ports' 1,518-byte frames end at the same moment and cross the SPI-4 bus one
    # after the other (0.95 us each), so the last of them leaves >= 12.2 us (its own
    # wire time) + 4 x 0.95 us after its first byte came in; the rest is the router's.
    # The output wires run at exactly line rate, so a port's latency is the largest
    # any of its frames has had so far.  Before tx's poller credited the last frame of
    # a burst at once, tx passed its tokens past contexts filling frames, filled six
    # elements a batch at 8 instructions an element, and the qm's schedulers skipped
    # empty scans, p99 was 22.3 (pipelined) and 22.6 us (parallel) here.
    dur = 1_500_000
    tr = permutation_traffic(1518, dur)
    rr = RouterRun.link(layout, {}, tr)
    late = LatencyAfter(300_000)
    rr.run.on_departure.append(late.add)
    rr.run_traffic(dur)
    assert len(late.ns) > 5 * 90  # five ports, a frame every 12.3 us
    late.ns.sort()
    p99 = late.ns[int(0.99 * len(late.ns))]
    assert p99 < 20_000, f"1518 B p99 {p99} ns"
    rr.drain()
    cmp_ = rr.compare()
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = rr.run.report()["totals"]
    assert t["dropped"] == {} and t["in_flight"] == 0, t
