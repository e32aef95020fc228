"""qm=drr and qm=dfq keep 64-byte line rate with random destinations (issue 47;
docs/schedulers.md, Cost): examples/traffic/min64.yaml (5 x 1 Gb/s of 64-byte frames,
every output port's five classes or connections active) through the whole router, with
verdict ok -- nothing lost, and every scheduler property the judge checks kept -- and
as much of the line carried as the default qm carries (98.99 %: the random destinations'
own queueing).  One layout each (both are run by `npk bench sched`'s figures in the doc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.commands.demo import DEMO_ROUTES, demo_routes, router_with_routes
from npkit.toolchain.system.router_run import run_router
from npkit.toolchain.system.verdict import Policy, judge

TRAFFIC = Path(__file__).resolve().parents[2] / "examples" / "traffic" / "min64.yaml"


@pytest.mark.parametrize("qm, layout", [("drr", "pipelined"), ("dfq", "parallel")])
def test_min64_at_line_rate(qm: str, layout: str) -> None:
    duration = 10_000_000  # as `npk demo --traffic examples/traffic/min64.yaml` (10 ms)
    routes = demo_routes(DEMO_ROUTES)  # the demo's table and router, as `npk demo`
    router = router_with_routes(routes)
    tr = load_traffic_source(TRAFFIC, duration, overrides={"router": str(router)})
    s = run_router(layout, {"io": "msf", "qm": qm}, tr, duration, routes=routes, router_config=router)
    verdict = judge(s, Policy())
    assert verdict == {"ok": True, "reasons": []}, verdict
    t = s["totals"]
    # (the random destinations overflow a port's 256 packets now and then: the drops the
    # offered load forces, as with the default qm; nothing else)
    assert t["lost"] == 0 and t["predicted_forward"] > 70_000, t
    assert t["forwarded"] + t["expected_overload_drops"] == t["predicted_forward"], t
    assert s["throughput"]["pct_line_rate"] > 98.5, s["throughput"]
    sch = s["scheduler"]
    assert sch["variant"] == qm and sch["ok"] and sch["fifo_violations"] == 0, sch
    assert max(sch["idle_while_backlogged_pct"].values()) < 0.5, sch
    if qm == "dfq":
        # five 200 Mb/s reservations in 64-byte frames oversubscribe the wire: not admitted
        rows = sch["delay_bound"]["connections"]
        assert rows and not any(r["admitted"] for r in rows), rows
