"""Seed 004's experiments as designs.  Figure 11 (examples/experiments/spp_fig11.yaml) (examples/experiments/spp_fig11.yaml):
its --quick form runs (6 points: I3 share 0, 0.5, 1 at 0 and 80 B of I3 payload), every
run settles with its packets judged, the two slices' output rates follow the I3 share,
and at 80 B the NPE keeps up with the 5 Gb/s input (the paper: 90 %; npkit: all of it).
The NPE latency test (spp_latency.yaml) in its --quick form."""

from __future__ import annotations

from pathlib import Path

from npkit.toolchain.experiment.analysis import load_results
from npkit.toolchain.experiment.runner import run_experiment
from tests.spp.spp_files import ROOT

DESIGN = ROOT / "examples" / "experiments" / "spp_fig11.yaml"
LATENCY = ROOT / "examples" / "experiments" / "spp_latency.yaml"


def test_figure_11_quick(tmp_path: Path) -> None:
    summary = run_experiment(str(DESIGN), str(tmp_path / "fig11"), quick=True, jobs=1)
    assert summary["failed"] == [] and summary["runs"] == 6, summary
    _, table, _ = load_results(str(tmp_path / "fig11"))
    for _, r in table.iterrows():
        share, v4, i3, total = float(r["S"]), r["group_mpps_v4a"], r["group_mpps_i3a"], r["throughput_mpps"]
        assert abs(v4 + i3 - total) <= 0.01 * total, r                 # every packet out is one of the two slices'
        assert abs(i3 / total - share) <= 0.02, r                       # ... in the share of the input
        assert total <= 1.01 * r["offered_mpps"]
        if int(r["P"]) == 80:
            assert r["throughput_pct_offered"] >= 98, r
        assert r["offered_mpps"] > (6.5 if int(r["P"]) == 0 else 3.5)  # 5 Gb/s of 73 B / 153 B frames


def test_latency_quick(tmp_path: Path) -> None:
    """Seed 004's NPE latency design, --quick (input at 1 and 5 Gb/s): the ping slice's
    mean latency stays flat (within 25 %) while the input grows fivefold."""
    summary = run_experiment(str(LATENCY), str(tmp_path / "lat"), quick=True, jobs=1)
    assert summary["failed"] == [] and summary["runs"] == 2, summary
    _, table, _ = load_results(str(tmp_path / "lat"))
    by_load = {float(r["L"]): r for _, r in table.iterrows()}
    low, high = by_load[0.2]["group_latency_us_i3ping"], by_load[1.0]["group_latency_us_i3ping"]
    assert 0 < low and 0 < high <= 1.25 * low, (low, high)
    assert by_load[1.0]["loss_pct"] == 0
