"""The scheduler judge (npkit.toolchain.system.sched_judge) on departures made up here:
each property it checks fails when broken -- per-queue order, work conservation, the
weighted max-min share, DFQ's delay bound -- and holds when kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from npkit.emulator.traffic.cpkt import FORWARD
from npkit.toolchain.system.sched import sched_params
from npkit.toolchain.system.sched_judge import SchedJudge, jain, sched_responses, weighted_max_min

RATE = 1_000_000_000
US = 1000


@dataclass
class Window:
    times: list[int] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    lens: list[int] = field(default_factory=list)


def fake_run(traffic_ns: int = 0) -> Any:
    run = SimpleNamespace(dev=SimpleNamespace(cfg={"rate_bps": RATE}), on_push=[], on_departure=[])
    return SimpleNamespace(run=run, over=[24] * 256, traffic_ns=traffic_ns)


class Feed:
    """Packets offered (arrival ns, input port, output port, length) and their departures."""

    def __init__(
        self, variant: str = "drr", qm: dict[str, Any] | None = None, traffic_ns: int = 0
    ) -> None:
        self.rr = fake_run(traffic_ns)
        self.judge = SchedJudge(self.rr, variant, sched_params(qm or {}))
        self.w = Window()
        self.chunk = SimpleNamespace(w=self.w, extra={})

    def offer(self, t: int, in_port: int, out_port: int, length: int) -> int:
        self.w.times.append(t)
        self.w.ports.append(in_port)
        self.w.lens.append(length)
        i = len(self.w.times) - 1
        v = SimpleNamespace(kind=[FORWARD] * (i + 1), port=[out_port] * (i + 1))
        self.chunk.extra["v"] = v
        self.judge._pushed(self.chunk, i, i + 1)
        return i

    def depart(self, i: int, t: int, port: int) -> None:
        data = bytes(self.w.lens[i])
        self.judge._departed(
            SimpleNamespace(port=port, t=t, data=data, pid=i, chunk=self.chunk, i=i)
        )


def wire_ns(length: int) -> int:
    return (length + 24) * 8


def test_weighted_max_min_and_jain() -> None:
    fair = weighted_max_min(900.0, {0: 1000.0, 1: 1000.0, 2: 100.0}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert fair == pytest.approx({0: 400.0, 1: 400.0, 2: 100.0})
    fair = weighted_max_min(900.0, {0: 1000.0, 1: 1000.0}, {0: 2.0, 1: 1.0})
    assert fair == pytest.approx({0: 600.0, 1: 300.0})
    assert jain([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert jain([1.0, 0.0]) == pytest.approx(0.5)


def test_queue_order_kept_and_broken() -> None:
    f = Feed()
    a, b = f.offer(0, 1, 4, 100), f.offer(2 * US, 1, 4, 100)
    f.depart(a, 10 * US, 4)
    f.depart(b, 10 * US + wire_ns(100), 4)
    assert f.judge.summary()["fifo_violations"] == 0
    g = Feed()
    a, b = g.offer(0, 1, 4, 100), g.offer(2 * US, 1, 4, 100)
    g.depart(b, 10 * US, 4)  # the later arrival of the queue (port 4, input 1) first
    g.depart(a, 10 * US + wire_ns(100), 4)
    s = g.judge.summary()
    assert s["fifo_violations"] == 1 and not s["ok"] and "per-queue order" in s["problems"][0]


def test_work_conservation() -> None:
    def idle_run(gap_us: int) -> dict[str, Any]:
        f = Feed()
        first = f.offer(0, 0, 2, 1000)
        later = f.offer(1 * US, 1, 2, 1000)  # ready from ~9 us, transit included ~29 us
        f.depart(first, 10 * US, 2)
        f.depart(later, 10 * US + wire_ns(1000) + gap_us * US, 2)
        return f.judge.summary()

    assert idle_run(0)["ok"]
    s = idle_run(200)  # the wire idles ~200 us while a packet has waited past its transit
    assert not s["ok"] and s["idle_while_backlogged_pct"][2] > 50
    assert any("work conservation: port 2" in p for p in s["problems"])


def overloaded(first_every: int) -> dict[str, Any]:
    """Inputs 0 and 1 each offer 1 Gb/s of 1000-byte frames to port 4 for 2 ms; one frame
    leaves per frame time: input 1's when k % first_every == 0, else input 0's."""
    f = Feed(traffic_ns=2_000_000)
    t_out = 0
    for k in range(250):
        a = f.offer(k * 8 * US, 0, 4, 1000)
        b = f.offer(k * 8 * US, 1, 4, 1000)
        f.depart(b if k % first_every == 0 else a, t_out, 4)
        t_out += wire_ns(1000)
    return f.judge.summary()


def test_shares_on_an_overloaded_port() -> None:
    fair = overloaded(2)  # in turn
    assert fair["ok"] and fair["shares"][0]["jain"] > 0.99
    unfair = overloaded(3)  # input 1 one time in three
    assert not unfair["ok"] and any("share: port 4" in p for p in unfair["problems"])
    assert sched_responses(unfair)["sched_jain"] < 0.95


def test_dfq_delay_bound() -> None:
    qm = {"dfq_t_ns": 10_000, "dfq_rates_mbps": 200}
    ok = Feed("dfq", qm)
    a = ok.offer(0, 0, 3, 500)  # fluid: 500 B at 200 Mb/s = 20 us after its arrival's end
    ok.depart(a, 60 * US, 3)  # bound: ~4 + 20 + 2 x 10 + 20 = 64 us
    s = ok.judge.summary()
    assert s["ok"] and s["delay_bound"]["connections"][0]["violations"] == 0
    late = Feed("dfq", qm)
    a = late.offer(0, 0, 3, 500)
    late.depart(a, 80 * US, 3)
    s = late.judge.summary()
    assert not s["ok"] and s["delay_bound"]["connections"][0]["violations"] == 1
    assert sched_responses(s)["sched_bound_margin_us"] < 0


def test_scheduler_memory_is_a_region_of_the_sram_map() -> None:
    """The DFQ queues and the active rings (npk_sched.h) lie in sram_map.yaml's qm_sched."""
    import yaml

    from npkit.toolchain.system import sched
    from npkit.toolchain.system.paths import MICROCODE

    region = yaml.safe_load((MICROCODE / "lookup" / "sram_map.yaml").read_text())["regions"][
        "qm_sched"
    ]
    lo, hi = region["base"], region["base"] + region["size"]
    dfq_end = sched.DFQ_QX_BASE + sched.DFQ_KEYS * 8 * 32
    rings_end = sched.QR_STORE + 5 * (1 << sched.QR_STORE_SHIFT)
    assert lo == sched.DFQ_QX_BASE and dfq_end <= sched.QR_BASE < sched.QR_STORE and rings_end <= hi
    assert sched.QR_WORDS * 4 <= 1 << sched.QR_STORE_SHIFT and sched.QR_WORDS >= 3 * sched.DFQ_KEYS


def test_dfq_admission_counts_reservations_on_the_wire() -> None:
    """Four 200 Mb/s reservations are 0.8 Gb/s of frame bits, but at 60-byte frames (+24
    bytes of preamble, FCS and gap a frame) they need 1.12 Gb/s of wire: not admitted, so
    the bound is not owed there; the same reservations in 1,500-byte frames (0.81 Gb/s of
    wire) are."""
    for length, admitted in ((60, False), (1500, True)):
        f = Feed("dfq")
        for k in range(4):
            f.depart(f.offer(0, k, 4, length), 100 * US + k * wire_ns(length), 4)
        assert f.judge.reserved_wire_bps(4, 0) == pytest.approx(200e6 * (length + 24) / length)
        rows = f.judge.summary()["delay_bound"]["connections"]
        assert len(rows) == 4 and all(r["admitted"] is admitted for r in rows), rows
