"""A router run and `npk traffic compare` judge resource drops alike (one table,
npkit.emulator.traffic.fate): a packet the oracle forwards or sends to the exception path
that a resource drop took is `lost` (a run that allows no loss fails, and says so), one
the oracle drops anyway is `dropped_early` (neither loss nor a mismatch, but reported).

The run overloads the router for real: the parallel layout with one fast-path ME takes
64-byte frames at line rate on five ports, so the MSF drops frames for want of a
receive thread (no_rx_thread), whatever the oracle would do with them; a tenth of the
traffic has a bad checksum (dropped) and a tenth an expiring TTL (excepted).  With the
control plane on the XScale, a burst of exceptions fills its ring (exception_ring_full).
Before the table was shared, the run counted loss only among the packets the oracle
forwards and said nothing of the others; compare called all of them lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from npkit.emulator.traffic.compare import Report, compare, predict
from npkit.emulator.traffic.dataset import load_dispositions, load_outputs, load_traffic
from npkit.emulator.traffic.oracle import Outcome
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

from .test_ci_policy import ROOT, ROUTER, npk

DURATION_NS = 200_000
PARAMS = {"io": "msf", "pool_mes": 1, "control": "host"}
# the policy, written out: the oracle's outcome -> what a resource drop of the packet is
ROWS = [("forward", "lost"), ("exception", "lost"), ("drop", "dropped_early")]


@dataclass
class Overload:
    inp: Path
    out: Path
    summary: dict[str, Any]
    router: dict[int, str]  # packet id -> the router run's category (on_judged)
    report: Report  # npk traffic compare on the run's captures
    predicted: list[Outcome]
    resource: dict[int, str]  # packet id -> its resource drop reason (dispositions.json)


def _traffic(d: Path, base: str, mix: dict[str, float] | None = None) -> Path:
    """An example spec at line rate for DURATION_NS (with `mix` instead of its own)."""
    spec = yaml.safe_load((ROOT / "examples" / "traffic" / base).read_text())
    spec["router"] = str(ROUTER)
    spec["duration_ns"] = DURATION_NS
    spec["defaults"]["load"] = 1.0
    if mix is not None:
        spec["defaults"]["mix"] = mix
    (d / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert npk("traffic", "gen", d / "spec.yaml", "-o", d / "in")[0] == 0
    return d / "in"


def _judged_run(rr: RouterRun, capture: Path | None = None) -> tuple[dict[str, Any], dict[int, str]]:
    """Run `rr` for DURATION_NS and drain it: its summary, and each packet's category as
    the run judged it (on_judged), first judgement kept."""
    judged: dict[int, str] = {}
    rr.on_judged.append(lambda pid, category: judged.setdefault(pid, category))
    try:
        rr.run_traffic(DURATION_NS)
        rr.drain()
        s = rr.summary()
        if capture is not None:
            rr.run.write_captures(capture)
    finally:
        rr.close()
    return s, judged


@pytest.fixture(scope="module")
def overload(tmp_path_factory: pytest.TempPathFactory) -> Overload:
    d = tmp_path_factory.mktemp("resource_drops")
    inp, out = _traffic(d, "min64.yaml", {"bad_checksum": 0.1, "ttl_expiring": 0.1}), d / "out"
    rr = RouterRun.link("parallel", PARAMS, load_traffic_source(inp), None, ROUTER, capture=out)
    s, router = _judged_run(rr, out)
    s["verdict"] = judge(s, Policy())
    inputs = load_traffic(inp)
    predicted = predict(RouterConfig.load(ROUTER), inputs)
    records = load_dispositions(out, inputs)
    report = compare(inputs, predicted, load_outputs(out), records)
    drops = load_reasons().drops
    resource = {pid: r for pid, recs in records.items() for k, r in recs if k == "drop" and drops[r].step is None}
    return Overload(inp, out, s, router, report, predicted, resource)


def _row(o: Overload, predicted: str) -> list[int]:
    """The packets of one row: resource-dropped, the oracle's outcome of this kind."""
    return sorted(pid for pid in o.resource if o.predicted[pid].kind == predicted)


def test_the_overload_takes_packets_of_every_kind(overload: Overload) -> None:
    s = overload.summary
    assert set(overload.resource.values()) == {"no_rx_thread"}, s["totals"]["dropped"]
    assert s["conservation"]["balanced"] and s["in_flight"]["count"] == 0, s["conservation"]
    for predicted, _ in ROWS:
        assert len(_row(overload, predicted)) >= 5, predicted


@pytest.mark.parametrize(("predicted", "category"), ROWS)
def test_the_router_run_judges_a_resource_drop_by_the_oracles_outcome(overload: Overload, predicted: str,
                                                                      category: str) -> None:  # fmt: skip
    ids = _row(overload, predicted)
    assert {overload.router[pid] for pid in ids} == {category}
    t = overload.summary["totals"]
    if category == "lost":
        assert t["lost_by_outcome"][predicted] == len(ids)
    else:
        assert t["dropped_early"] == len(ids)
        assert "dropped_early" not in overload.summary["comparison"]  # not a mismatch


@pytest.mark.parametrize(("predicted", "category"), ROWS)
def test_compare_judges_the_same_packets_the_same_way(overload: Overload, predicted: str, category: str) -> None:
    ids = _row(overload, predicted)
    got = {i.id: i.category for i in overload.report.issues if i.id in set(ids)}
    assert got == dict.fromkeys(ids, category)
    assert {pid: overload.router[pid] for pid in ids} == got


def test_the_totals_and_the_verdicts_agree(overload: Overload) -> None:
    s, rep = overload.summary, overload.report
    t, by = s["totals"], s["totals"]["lost_by_outcome"]
    assert t["expected_overload_drops"] == 0  # no output port oversubscribed: every one counts
    assert t["lost"] == by["forward"] + by["exception"] == rep.totals["lost"] > 0
    assert t["dropped_early"] == rep.totals["dropped_early"] > 0
    assert t["predicted_exception"] == rep.totals["predicted_exception"]
    # loss fails both, and nothing else does: dropped_early is no mismatch
    assert rep.mismatches == 0 and not rep.ok
    loss = [r for r in s["verdict"]["reasons"] if r.startswith("loss ")]
    assert s["verdict"]["reasons"] == loss, s["verdict"]
    assert f"{t['lost']} packets lost" in loss[0]
    assert f"{by['forward']} the oracle forwards, {by['exception']} it sends to the exception path" in loss[0]
    assert judge(s, Policy(max_loss_pct=None))["ok"]
    assert compare(load_traffic(overload.inp), overload.predicted, load_outputs(overload.out),
                   load_dispositions(overload.out, load_traffic(overload.inp)), allow_loss=True).ok  # fmt: skip


def test_npk_run_and_npk_traffic_compare_exit_alike(overload: Overload, tmp_path: Path) -> None:
    """The commands: both exit 1 on the loss and say why, both pass when loss is allowed,
    and both show dropped_early in their JSON and their text."""
    elf, out = tmp_path / "router.elf", tmp_path / "out"
    assert npk("link", "parallel", *[a for k, v in PARAMS.items() if k != "io" for a in ("-D", f"{k}={v}")],
               "-o", elf)[0] == 0  # fmt: skip
    run = ("run", elf, "--traffic", overload.inp, "--duration-ms", DURATION_NS / 1e6)
    code, text = npk(*run, "--capture", out, "--json")
    s = json.loads(text)
    t = s["totals"]
    assert code == 1 and t["lost"] == overload.summary["totals"]["lost"], t
    assert t["dropped_early"] == overload.summary["totals"]["dropped_early"] > 0
    assert [r for r in s["verdict"]["reasons"] if r.startswith("loss ")] == s["verdict"]["reasons"]
    cmp_ = ("traffic", "compare", overload.inp, out, "--config", ROUTER)
    code, text = npk(*cmp_, "--json")
    c = json.loads(text)
    assert code == 1 and not c["ok"] and c["mismatches"] == 0
    assert c["totals"]["lost"] == t["lost"] and c["totals"]["dropped_early"] == t["dropped_early"]
    assert any(i["category"] == "dropped_early" for i in c["issues"])
    code, text = npk(*run, "--max-loss", "100")
    assert code == 0 and f"dropped early {t['dropped_early']} it drops too" in text, text
    code, text = npk(*cmp_, "--allow-loss")
    assert code == 0 and f"dropped_early {t['dropped_early']}" in text and text.rstrip().endswith("OK"), text


def test_exceptions_lost_at_a_full_exception_ring_fail_the_run(tmp_path: Path) -> None:
    """With the daemon on the XScale: a burst of exceptions fills its ring, and every
    packet the ring-full counter takes is one the fast path sends to the control plane
    (its ICMP error, its reply, or the packet itself never comes).  The run counted as
    lost only those the control plane would have forwarded."""
    inp = _traffic(tmp_path, "errors.yaml")
    rr = RouterRun.link("parallel", {"io": "msf", "pool_mes": 1}, load_traffic_source(inp), None, ROUTER)
    s, judged = _judged_run(rr)
    t = s["totals"]
    full = t["dropped"].get("exception_ring_full", 0)
    assert full > 0.1 * t["offered"], t
    assert set(t["dropped"]) - {"exception_ring_full"} <= {r for r, d in load_reasons().drops.items() if d.step}
    assert sum(1 for c in judged.values() if c == "lost") == full == t["lost"] == sum(t["lost_by_outcome"].values())
    assert t["dropped_early"] == 0
    assert s["conservation"]["balanced"], s["conservation"]
    verdict = judge(s, Policy())
    assert any(r.startswith(f"loss {t['loss_pct']} %") and f"({full} packets lost" in r for r in verdict["reasons"])
