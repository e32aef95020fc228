"""Significant interactions are named, in words, and the cell means are given with CIs."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from npkit.toolchain.experiment.analysis import analyze_frame, format_text

from .test_analysis import frame, two_level_design


def three_way() -> tuple[object, object]:
    """Every cell 10 (+- 1 between replicates) except A=hi B=hi C=hi at 40: ABC is strong."""
    d = two_level_design("ABC", r=2)
    ys = [[9.0, 11.0] for _ in range(7)] + [[39.0, 41.0]]
    return d, frame(d, ys)


def test_a_strong_three_way_interaction_is_named_with_cell_means() -> None:
    d, df = three_way()
    a = analyze_frame(d, df, "y")
    terms = [t["term"] for t in a["interactions"]]
    assert set(terms) == {"AB", "AC", "BC", "ABC"}  # the one odd cell makes every interaction
    text = format_text({"design": d.summary(), "runs": {"ok": 16, "failed": [], "unsettled": [], "missing": []},
                        "responses": {"y": a}})  # fmt: skip
    assert "interaction" in text and "ABC" in text and "the effect of A x B depends on the level of C" in text
    # cell means: one row per configuration, mean -+ t s_e / sqrt(n)
    cells = {tuple(c["levels"].values()): c for c in a["cell_means"]}
    assert len(cells) == 8
    s_e = math.sqrt(8 * 2 / 8)  # each cell: two runs at -+1 around its mean, dof 8
    half = stats.t.ppf(0.975, 8) * s_e / math.sqrt(2)
    top = cells[("hi", "hi", "hi")]
    assert top["mean"] == pytest.approx(40) and top["ci"] == pytest.approx([40 - half, 40 + half])
    assert cells[("lo", "lo", "lo")]["mean"] == pytest.approx(10)


def test_no_interaction_says_nothing_but_keeps_the_cell_means() -> None:
    d = two_level_design("AB", r=2)
    ys = [[9.0, 11.0], [19.0, 21.0], [29.0, 31.0], [39.0, 41.0]]  # additive: A +10, B +20
    a = analyze_frame(d, frame(d, ys), "y")
    assert a["interactions"] == []
    assert [c["mean"] for c in a["cell_means"]] == pytest.approx([10, 20, 30, 40])
