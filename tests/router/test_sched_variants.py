"""The queue-manager variants qm=drr and qm=dfq (docs/schedulers.md) through the whole
router on the MSF, judged by the IPv4 model and the scheduler's properties
(npkit.toolchain.system.sched_judge): each variant in both layouts at 5 x 1 Gb/s with
verdict ok; DRR's weighted max-min shares on an overloaded port; DFQ's delay bound for
the connections that keep to their reservation while another overloads the port; and a
queue manager that does not share fairly (the default round robin, which is FIFO per
port) failing the same judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.router_run import run_router
from npkit.toolchain.system.sched import sched_params
from npkit.toolchain.system.sched_judge import SchedJudge
from npkit.toolchain.system.verdict import Policy, judge

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "examples" / "traffic"


def run(layout: str, params: dict[str, Any], spec: str, ms: float, **kw: Any) -> dict[str, Any]:
    duration = int(ms * 1e6)
    s = run_router(layout, params, load_traffic_source(TRAFFIC / spec, duration), duration, **kw)
    s["verdict"] = judge(s, Policy())
    return s


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
@pytest.mark.parametrize("qm", ["drr", "dfq"])
def test_variant_at_line_rate_verdict_ok(layout: str, qm: str) -> None:
    s = run(layout, {"qm": qm}, "seed003_balanced.yaml", 1.0)
    assert s["verdict"] == {"ok": True, "reasons": []}, s["verdict"]
    sch = s["scheduler"]
    assert sch["variant"] == qm and sch["ok"] and sch["fifo_violations"] == 0
    t = s["totals"]
    assert t["forwarded"] == t["predicted_forward"] > 6900 and t["dropped"] == {}


@pytest.mark.parametrize("quanta, ratio", [(1514, 1.0), ([3028, 1514], 2.0)])
def test_drr_shares_an_overloaded_port_by_bytes(quanta: object, ratio: float) -> None:
    s = run("pipelined", {"qm": "drr", "qm.drr_quanta": quanta}, "sched_overload.yaml", 3.0)
    assert s["verdict"]["ok"], s["verdict"]
    (row,) = s["scheduler"]["shares"]
    # port 4: input 2 asks 0.2 Gb/s and gets it; inputs 0 (1518 B) and 1 (128 B) split
    # the rest in the ratio of their quanta (class c: quanta[c mod 2]), in bytes,
    # although their frames differ twelvefold
    assert row["port"] == 4 and row["keys"] == 3 and row["jain"] > 0.99
    served = row["served_mbps"]
    assert abs(served[0] - ratio * served[1]) < 0.03 * served[0], served
    assert s["totals"]["dropped"].get("queue_full", 0) > 0


def test_dfq_delay_bound_holds_under_overload() -> None:
    s = run("pipelined", {"qm": "dfq", "qm.dfq_t_ns": 10_000}, "dfq_overload.yaml", 3.0)
    assert s["verdict"]["ok"], s["verdict"]
    bound = {
        c["connection"]: c for c in s["scheduler"]["delay_bound"]["connections"] if c["port"] == 4
    }
    assert set(bound) == {0, 1, 2, 3}
    for conn in (0, 1, 2):  # keep to their 200 Mb/s: every packet within fluid + 2 T + transit
        assert (
            bound[conn]["admitted"]
            and bound[conn]["violations"] == 0
            and bound[conn]["worst_margin_us"] > 0
        )
    # the overloading connection takes what the others leave, and loses the excess
    assert s["totals"]["dropped"].get("queue_full", 0) > 0


def test_a_queue_manager_that_is_not_fair_fails_the_share_judge() -> None:
    judged: list[SchedJudge] = []

    def attach(
        rr: Any,
    ) -> None:  # the DRR judge on the default qm (packet round robin, FIFO a port)
        rr.sched = SchedJudge(rr, "drr", sched_params({}))
        judged.append(rr.sched)

    s = run("pipelined", {"qm": "full"}, "sched_overload.yaml", 3.0, on_start=attach)
    assert judged and not s["scheduler"]["ok"]
    assert not s["verdict"]["ok"]
    assert any("scheduler: share: port 4" in r for r in s["verdict"]["reasons"]), s["verdict"][
        "reasons"
    ]


def test_drr_carries_the_control_planes_frames() -> None:
    """Every rule of the oracle (examples/traffic/errors.yaml): the daemon's ICMP and ARP
    frames and the packets it sends on come back through the qm's control ring."""
    s = run("pipelined", {"qm": "drr"}, "errors.yaml", 1.0)
    assert s["verdict"]["ok"], s["verdict"]
    cmp_ = s["comparison"]
    assert (
        cmp_["matched_control"] > 0
        and not cmp_["missing_control"]
        and not cmp_["unexpected_control"]
    )
    assert s["scheduler"]["control_plane_frames"] > 0 and s["scheduler"]["ok"]


def test_paced_dfq_holds_each_connection_to_its_reservation() -> None:
    """qm.dfq_paced: Panama's fixed cycles of T -- a connection gets at most its quantum a
    cycle, so the one that overloads port 4 is held to its 200 Mb/s (the link idles
    meanwhile: not work conserving, and its excess is dropped by design, hence no loss
    limit), while the others keep their bound."""
    duration = 3_000_000
    params = {"qm": "dfq", "qm.dfq_paced": True, "qm.dfq_t_ns": 100_000}  # 4 x (2,500 B + a frame) fit T
    s = run_router(
        "pipelined", params, load_traffic_source(TRAFFIC / "dfq_overload.yaml", duration), duration
    )
    verdict = judge(s, Policy(max_loss_pct=None))
    assert verdict["ok"], verdict
    sch = s["scheduler"]
    assert sch["paced"] and sch["idle_while_backlogged_pct"][4] > 10  # idles by design
    (row,) = sch["shares"]
    assert 190 < row["served_mbps"][3] < 210, row  # the 1 Gb/s connection, held to 200 Mb/s
    bound = {c["connection"]: c for c in sch["delay_bound"]["connections"] if c["port"] == 4}
    assert all(bound[c]["admitted"] and bound[c]["violations"] == 0 for c in (0, 1, 2, 3)), bound
