"""Seed 004's experiments as designs.  Figure 11 (examples/experiments/spp_fig11.yaml) (examples/experiments/spp_fig11.yaml):
its --quick form runs (6 points: I3 share 0, 0.5, 1 at 0 and 80 B of I3 payload), every
run settles with its packets judged, the two slices' output rates follow the I3 share,
and at 80 B the NPE keeps up with the 5 Gb/s input (the paper: 90 %; npkit: all of it).
The NPE latency test (spp_latency.yaml) in its --quick form."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from npkit.toolchain.experiment.analysis import load_results
from npkit.toolchain.experiment.design import DesignError, design_from_dict
from npkit.toolchain.experiment.report import build
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
    # the report closes with the paper's values beside npkit's, point by point
    report = build(str(tmp_path / "fig11"), str(tmp_path / "fig11" / "report.md"), per_run_plots=False).read_text()
    closing = report[report.index("## Beside seed 004"):]
    rows = [line.split(" | ") for line in closing.splitlines() if line.startswith("| 0.0 | 0 |")]
    assert len(rows) == 1 and rows[0][3] == "81", rows  # S = 0, P = 0: the paper's 81 %
    assert "| 0.5 | 0 |" in closing and "anomalous" in closing


def test_a_reference_must_name_a_response_and_factors_of_the_design() -> None:
    data = yaml.safe_load(DESIGN.read_text())
    data["base"] = {**data["base"], "app": str(ROOT / "examples" / "apps" / "spp"),
                    "traffic": str(ROOT / "examples" / "apps" / "spp" / "fig11.yaml")}
    bad = {**data, "reference": {**data["reference"], "response": "capacity_mbps"}}
    with pytest.raises(DesignError, match="reference.response: 'capacity_mbps' is not one of the design's"):
        design_from_dict(bad, check_files=False)
    bad = {**data, "reference": {**data["reference"], "points": [{"where": {"Q": 1}, "value": 3}]}}
    with pytest.raises(DesignError, match=r"reference.points\[0\].where: no factor 'Q'"):
        design_from_dict(bad, check_files=False)


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
