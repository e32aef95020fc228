"""Type II and type III sums of squares of an unbalanced two-level design, checked
against statsmodels' anova_lm on the same data (categorical factors, sum coding)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from npkit.toolchain.experiment.analysis import analyze_frame, format_text

from .test_analysis import frame, two_level_design

TERMS = {"C(fa, Sum)": "A", "C(fb, Sum)": "B", "C(fc, Sum)": "C", "C(fa, Sum):C(fb, Sum)": "AB",
         "C(fa, Sum):C(fc, Sum)": "AC", "C(fb, Sum):C(fc, Sum)": "BC",
         "C(fa, Sum):C(fb, Sum):C(fc, Sum)": "ABC", "Residual": "error"}  # fmt: skip


def unbalanced() -> tuple[object, pd.DataFrame]:
    d = two_level_design("ABC", r=2)
    rng = np.random.default_rng(1)
    ys = [[float(v) for v in 10 + rng.normal(0, 3, 2)] for _ in range(8)]
    ys[7] = [v + 20 for v in ys[7]]  # a strong three-way interaction in the last cell
    return d, frame(d, ys).drop(index=[0, 3, 6])  # three runs missing


def statsmodels_table(df: pd.DataFrame, typ: int) -> dict[str, tuple[float, float | None]]:
    data = df.rename(columns={"A": "fa", "B": "fb", "C": "fc"})
    model = smf.ols("y ~ C(fa, Sum) * C(fb, Sum) * C(fc, Sum)", data).fit()
    tab = anova_lm(model, typ=typ)
    return {TERMS[t]: (float(r["sum_sq"]), None if np.isnan(r["PR(>F)"]) else float(r["PR(>F)"]))
            for t, r in tab.iterrows() if t != "Intercept"}  # fmt: skip


@pytest.mark.parametrize(("key", "typ"), [("table", 2), ("type3", 3)])
def test_unbalanced_sums_of_squares_match_statsmodels(key: str, typ: int) -> None:
    d, df = unbalanced()
    a = analyze_frame(d, df, "y")
    assert not a["balanced"]
    want = statsmodels_table(df, typ)
    got = {r["term"]: r for r in a["anova"][key]}
    assert set(got) == set(want)
    for term, (ss, p) in want.items():
        assert got[term]["sum_sq"] == pytest.approx(ss, rel=1e-9), term
        if p is not None:
            assert got[term]["p"] == pytest.approx(p, rel=1e-6), term


def test_type_ii_and_iii_differ_when_unbalanced_and_the_effects_use_type_ii() -> None:
    d, df = unbalanced()
    a = analyze_frame(d, df, "y")
    two = {r["term"]: r["sum_sq"] for r in a["anova"]["table"]}
    three = {r["term"]: r["sum_sq"] for r in a["anova"]["type3"]}
    assert two["A"] != pytest.approx(three["A"], rel=0.05)  # the case the labels must tell apart
    assert a["anova"]["type"] == "II"
    for e in a["effects"]:
        assert e["ss"] == pytest.approx(two[e["effect"]])
    assert "type II" in a["method"] and "type III" in a["method"]


def test_balanced_types_agree_with_the_sign_table() -> None:
    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    a = analyze_frame(d, frame(d, ys), "y")
    signs = {e["effect"]: e["ss"] for e in a["effects"]}
    for key in ("table", "type3"):
        for r in a["anova"][key][:-1]:
            assert r["sum_sq"] == pytest.approx(signs[r["term"]])
    text = format_text({"design": d.summary(), "runs": {"ok": 12, "failed": [], "unsettled": [], "missing": []},
                        "responses": {"y": a}})  # fmt: skip
    assert "sign table" in text
