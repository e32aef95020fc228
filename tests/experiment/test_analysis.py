"""Effects, allocation of variation, CIs and ANOVA against textbook answers that the
tests compute independently (marginal means, cell means, Jain's published figures)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from npkit.toolchain.experiment.analysis import analyze_frame, format_text
from npkit.toolchain.experiment.design import Design, design_from_dict

TRAFFIC = str(Path(__file__).resolve().parents[2] / "examples" / "traffic" / "seed003_balanced.yaml")


def two_level_design(keys: str, generators: dict[str, str] | None = None, r: int = 1) -> Design:
    data = {"name": "t", "kind": "fractional" if generators else "full", "replications": r,
            "base": {"traffic": TRAFFIC},
            "factors": {k: {"set": f"param.p{k}", "levels": ["lo", "hi"]} for k in keys}}
    if generators:
        data["generators"] = generators
    return design_from_dict(data, check_files=False)


def frame(design: Design, ys: list[list[float]]) -> pd.DataFrame:
    """Rows in the design's point order; ys[point] holds that point's replicates."""
    rows = []
    for p, point in enumerate(design.points()):
        for rep, y in enumerate(ys[p]):
            rows.append({"run_id": f"p{p}r{rep}", "point": p, "status": "ok", "y": y, **point})
    return pd.DataFrame(rows)


def by_effect(a: dict) -> dict[str, dict]:
    return {e["effect"]: e for e in a["effects"]}


def marginal_q(df: pd.DataFrame, cols: list[str]) -> float:
    """Half the difference between the mean where the product of codes is +1 and -1."""
    sign = np.ones(len(df))
    for c in cols:
        sign = sign * np.where(df[c] == "hi", 1, -1)
    return (df["y"][sign > 0].mean() - df["y"][sign < 0].mean()) / 2


def test_jain_2x2_with_replications() -> None:
    # Jain, Example 18.1: memory-cache 2^2 with three replications
    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    df = frame(d, ys)
    a = analyze_frame(d, df, "y")
    e = by_effect(a)
    # Jain's published values
    assert a["q0"] == pytest.approx(41)
    assert e["A"]["q"] == pytest.approx(21.5) and e["B"]["q"] == pytest.approx(9.5)
    assert e["AB"]["q"] == pytest.approx(5)
    # independently: marginal means, and the sums of squares from their definitions
    y = df["y"].to_numpy(dtype=float)
    grand = y.mean()
    sst = ((y - grand) ** 2).sum()
    cell = df.groupby("point")["y"].transform("mean").to_numpy()
    sse = ((y - cell) ** 2).sum()
    assert sst == pytest.approx(7032) and sse == pytest.approx(102)
    for name, cols in (("A", ["A"]), ("B", ["B"]), ("AB", ["A", "B"])):
        q = marginal_q(df, cols)
        assert e[name]["q"] == pytest.approx(q)
        sign = np.prod([np.where(df[c] == "hi", 1, -1) for c in cols], axis=0)
        ss = sum(((df["y"][sign == s].mean() - grand) ** 2) * (sign == s).sum() for s in (-1, 1))
        assert e[name]["ss"] == pytest.approx(ss)
        assert e[name]["pct"] == pytest.approx(100 * ss / sst)
    assert a["error"]["pct"] == pytest.approx(100 * sse / sst)
    assert sum(x["pct"] for x in a["effects"]) + a["error"]["pct"] == pytest.approx(100)
    # CI: s_e^2 = SSE / (2^2 (r-1)), s_q = s_e / sqrt(2^2 r), t with 8 dof
    half = stats.t.ppf(0.975, 8) * math.sqrt(sse / 8) / math.sqrt(12)
    assert e["A"]["ci"] == pytest.approx([21.5 - half, 21.5 + half])
    assert all(x["significant"] for x in a["effects"])
    # statsmodels' ANOVA agrees with the sign table and tests every effect
    anova = {r["term"]: r for r in a["anova"]["table"]}
    assert anova["A"]["sum_sq"] == pytest.approx(e["A"]["ss"])
    assert anova["error"]["sum_sq"] == pytest.approx(sse)
    assert anova["A"]["F"] == pytest.approx(e["A"]["ss"] / (sse / 8))
    assert anova["A"]["p"] < 1e-6


def test_jain_2x3_allocation_of_variation() -> None:
    # Jain's 2^3 example (memory, cache, processors): y from q0=40, qA=10, qB=5, qC=20,
    # qAB=5, qAC=2, qBC=3, qABC=1 -- 14, 22, 10, 34, 46, 58, 50, 86 in standard order
    d = two_level_design("ABC")
    ys = [[14], [22], [10], [34], [46], [58], [50], [86]]
    df = frame(d, ys)
    a = analyze_frame(d, df, "y")
    e = by_effect(a)
    sst = ((df["y"] - df["y"].mean()) ** 2).sum()
    assert sst == pytest.approx(4512)
    want = {"A": 10, "B": 5, "C": 20, "AB": 5, "AC": 2, "BC": 3, "ABC": 1}
    for name, q in want.items():
        assert e[name]["q"] == pytest.approx(q)
        assert e[name]["q"] == pytest.approx(marginal_q(df, list(name)))
        assert e[name]["pct"] == pytest.approx(100 * 8 * q * q / sst)
    assert e["C"]["pct"] == pytest.approx(70.92, abs=0.01)  # Jain: C explains 70.9 %
    assert a["error"]["dof"] == 0 and e["A"]["ci"] is None  # no replications: no CIs
    assert "no F tests" in a["anova"]["note"]


def test_fractional_generator_and_confounding() -> None:
    # 2^(4-1) with D = ABC: I = ABCD, resolution IV, A = BCD, AB = CD
    d = two_level_design("ABCD", {"D": "ABC"})
    s = d.summary()
    assert s["defining_relation"] == ["I", "ABCD"] and s["resolution"] == 4
    assert s["confounding"]["A"] == ["BCD"] and s["confounding"]["AB"] == ["CD"]
    assert len(d.points()) == 8 and len(d.effects()) == 7
    for point in d.points():
        code = {k: 1 if v == "hi" else -1 for k, v in point.items()}
        assert code["D"] == code["A"] * code["B"] * code["C"]
    # a model with AB = 1.5 and CD = 0.5: the design estimates their sum, as confounded
    ys = []
    for point in d.points():
        x = {k: 1 if v == "hi" else -1 for k, v in point.items()}
        ys.append([7 + 3 * x["A"] + 2 * x["D"] + 1.5 * x["A"] * x["B"] + 0.5 * x["C"] * x["D"]])
    e = by_effect(analyze_frame(d, frame(d, ys), "y"))
    assert e["A"]["q"] == pytest.approx(3) and e["D"]["q"] == pytest.approx(2)
    assert e["AB"]["q"] == pytest.approx(2.0) and e["AB"]["aliases"] == ["CD"]
    # 2^(7-4), D=AB E=AC F=BC G=ABC: resolution III, 15 words, A = BD = CE = ...
    d7 = two_level_design("ABCDEFG", {"D": "AB", "E": "AC", "F": "BC", "G": "ABC"})
    assert d7.resolution() == 3 and len(d7.defining_relation()) == 15
    al = [a for _, a in d7.aliases(("A",))]
    assert ("B", "D") in al and ("C", "E") in al and len(al) == 15
    assert len(d7.points()) == 8 and len(d7.effects()) == 7
    # a sign on the generator flips the column: D = -ABC
    dm = two_level_design("ABCD", {"D": "-ABC"})
    assert dm.summary()["defining_relation"] == ["I", "-ABCD"]
    for point in dm.points():
        code = {k: 1 if v == "hi" else -1 for k, v in point.items()}
        assert code["D"] == -code["A"] * code["B"] * code["C"]


def test_unbalanced_table_uses_least_squares() -> None:
    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    df = frame(d, ys).drop(index=[1])  # one replicate of the first cell missing
    a = analyze_frame(d, df, "y")
    assert not a["balanced"] and a["method"].startswith("least squares")
    x = np.column_stack([np.ones(len(df))] + [np.prod([np.where(df[c] == "hi", 1.0, -1.0) for c in cols], axis=0)
                                               for cols in (["A"], ["B"], ["A", "B"])])
    coef = np.linalg.lstsq(x, df["y"].to_numpy(dtype=float), rcond=None)[0]
    e = by_effect(a)
    assert [e[n]["q"] for n in ("A", "B", "AB")] == pytest.approx(list(coef[1:]))


def test_multi_level_anova_and_level_means() -> None:
    data = {"name": "m", "replications": 2, "base": {"traffic": TRAFFIC},
            "factors": {"S": {"set": "chip.units.sram.read_latency", "scale": True, "levels": [1, 1.5, 2]},
                        "L": {"set": "layout", "levels": ["pipelined", "parallel"]}}}
    d = design_from_dict(data, check_files=False)
    assert len(d.points()) == 6 and not d.two_level
    eff_s = {"1": 0.0, "1.5": 4.0, "2": 10.0}
    eff_l = {"pipelined": 0.0, "parallel": 3.0}
    noise = itertools.cycle([0.5, -0.5, 0.25, -0.25])
    ys = [[100 + eff_s[p["S"]] + eff_l[p["L"]] + next(noise) for _ in range(2)] for p in d.points()]
    df = frame(d, ys)
    a = analyze_frame(d, df, "y")
    assert a["model"] == "all interactions"
    terms = {r["term"]: r for r in a["anova"]["table"]}
    grand = df["y"].mean()
    ss_s = sum(len(g) * (g.mean() - grand) ** 2 for _, g in df.groupby("S")["y"])
    assert terms["S"]["sum_sq"] == pytest.approx(ss_s)
    assert terms["S"]["df"] == 2 and terms["S"]["p"] < 1e-4
    assert terms["S"]["pct"] > terms["L"]["pct"] > terms["S x L"]["pct"]
    assert a["level_means"]["S"]["2"] == pytest.approx(df[df["S"] == "2"]["y"].mean())


def test_sweep_detects_non_linearity() -> None:
    data = {"name": "s", "kind": "sweep", "sweep": "P", "replications": 2, "base": {"traffic": TRAFFIC},
            "factors": {"P": {"set": "traffic.ip_payload", "levels": [0, 200, 400, 800, 1200, 1480]},
                        "Q": {"set": "param.qm", "levels": ["full", "stub"]}}}
    d = design_from_dict(data, check_files=False)
    ys = []
    for p in d.points():
        x = float(p["P"])
        y = 2 * x + 5 if p["Q"] == "full" else min(1000.0, 3 * x)  # the stub saturates
        ys.append([y - 1, y + 1])
    a = analyze_frame(d, frame(d, ys), "y")
    g = a["groups"]
    assert g["Q=full"]["slope"] == pytest.approx(2) and g["Q=full"]["r2"] == pytest.approx(1, abs=1e-4)
    assert g["Q=full"]["nonlinear_test"] == "lack of fit" and g["Q=full"]["nonlinear"] is False
    assert g["Q=stub"]["nonlinear"] is True and g["Q=stub"]["nonlinear_p"] < 1e-6
    # unreplicated: the quadratic term
    d1 = design_from_dict({**data, "replications": 1}, check_files=False)
    ys1 = [[float(p["P"]) ** 2 / 100 + (3 if p["Q"] == "stub" else 0)] for p in d1.points()]
    g1 = analyze_frame(d1, frame(d1, ys1), "y")["groups"]
    assert g1["Q=full"]["nonlinear_test"] == "quadratic term" and g1["Q=full"]["nonlinear"] is True


def test_no_variation_is_said() -> None:
    d = two_level_design("AB", r=2)
    a = analyze_frame(d, frame(d, [[5, 5]] * 4), "y")
    assert "no variation" in a["note"]
    assert all(e["pct"] is None for e in a["effects"])


def test_unsettled_and_failed_runs_are_excluded() -> None:
    d = two_level_design("AB", r=2)
    df = frame(d, [[1, 2], [3, 4], [5, 6], [7, 8]])
    df["settled"] = True
    df.loc[0, "settled"] = False
    df.loc[1, "status"] = "failed"
    df.loc[1, "error"] = "boom"
    a = analyze_frame(d, df.rename(columns={"y": "throughput_mbps"}), "throughput_mbps")
    ex = {x["run_id"]: x["reason"] for x in a["excluded"]}
    assert ex == {"p0r0": "did not reach steady state", "p0r1": "failed: boom"}
    assert a["n"] == 6
    # capacity is not a windowed response: an unsettled steady part does not exclude it
    df["capacity_mbps"] = df["y"]
    b = analyze_frame(d, df, "capacity_mbps")
    assert [x["run_id"] for x in b["excluded"]] == ["p0r1"]


# ---- qa_ana 6, 13, 14: empty designs, censoring and settling in the text ----------------


def _qa_frame(d: Design, ys: list[list[float]], **cols: list[list[object]]) -> pd.DataFrame:
    df = frame(d, ys)
    for name, per_point in cols.items():
        df[name] = [v for p in range(len(ys)) for v in per_point[p]]
    return df


def test_one_usable_cell_gives_a_note_not_a_traceback() -> None:
    d = two_level_design("AC", r=2)
    df = frame(d, [[10, 11], [20, 21], [30, 31], [40, 41]])
    df.loc[df["point"] != 0, "status"] = "failed"  # three cells failed (size -5 say)
    a = analyze_frame(d, df, "y")  # raised patsy.PatsyError "y ~" before
    assert a["kind"] == "none" and a["note"].startswith("no effect can be estimated (only 1 usable cell")
    assert len(a["cells_missing"]) == 3
    text = format_text({"design": d.summary(), "runs": {"ok": 2, "failed": [1] * 6, "unsettled": [],
                                                        "missing": []}, "responses": {"y": a}})  # fmt: skip
    assert "no effect can be estimated" in text


def test_settling_is_judged_per_response_and_unsettled_cells_are_shown() -> None:
    """The A=lo C=lo cell did not settle in latency but did in throughput: it was left out
    of both, with replications 0 reported."""
    d = two_level_design("AC", r=2)
    ys = [[16.5, 16.3], [4.4, 4.5], [5.1, 5.2], [5.0, 5.1]]
    df = _qa_frame(d, ys, settled=[[False, False]] + [[True, True]] * 3,
                   settled_throughput_mbps=[[True, True]] * 4,
                   settled_latency_mean_us=[[False, False]] + [[True, True]] * 3)  # fmt: skip
    df["throughput_mbps"] = df["y"]
    df["latency_mean_us"] = df["y"]
    thr = analyze_frame(d, df, "throughput_mbps")
    assert thr["n"] == 8 and thr["balanced"] and thr["replications"] == 2 and not thr["excluded"]
    assert sum(e["pct"] for e in thr["effects"]) + thr["error"]["pct"] == pytest.approx(100)
    lat = analyze_frame(d, df, "latency_mean_us")
    assert lat["n"] == 6 and lat["replications"] == 2 and lat["cells_missing"] == ["A=lo C=lo"]
    assert [(x["run_id"], x["value"], x["cell"]) for x in lat["excluded"]] == [
        ("p0r0", 16.5, "A=lo C=lo"), ("p0r1", 16.3, "A=lo C=lo")]
    text = format_text({"design": d.summary(), "runs": {"ok": 8, "failed": [], "unsettled": ["p0r0", "p0r1"],
                                                        "missing": []},
                        "responses": {"latency_mean_us": lat}})  # fmt: skip
    assert "not settled (left out): p0r0 [A=lo C=lo] 16.5, p0r1 [A=lo C=lo] 16.3" in text
    assert "cells with no usable run: A=lo C=lo -- the effects are estimated from the other cells" in text


def test_censored_capacities_are_named_in_the_text() -> None:
    d = two_level_design("AC", r=1)
    df = _qa_frame(d, [[5000], [7504], [5200], [7504]],
                   capacity_censored=[[""], ["above"], [""], ["above"]])  # fmt: skip
    df["capacity_mbps"] = df["y"]
    a = analyze_frame(d, df, "capacity_mbps")
    assert a["censored"] == ["p1r0", "p3r0"]
    text = format_text({"design": d.summary(), "runs": {"ok": 4, "failed": [], "unsettled": [], "missing": []},
                        "responses": {"capacity_mbps": a}})  # fmt: skip
    assert "censored at the search limit (lower bounds; effects involving them are understated): p1r0, p3r0" in text


def test_level_mean_cis_use_the_experimental_error() -> None:
    # Jain 18.1 again: A's effect (21.5) dwarfs the others; the CI of the mean at a level of
    # B must come from the error within cells (s_e, 2^2 (r-1) = 8 dof), not from the spread
    # of the six runs at that level, which holds A's effect.
    from npkit.toolchain.experiment.analysis import error_sd
    from npkit.toolchain.experiment.plots import level_means

    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    df = frame(d, ys)
    a = analyze_frame(d, df, "y")
    cell = df.groupby("point")["y"].transform("mean")
    s_e = math.sqrt(((df["y"] - cell) ** 2).sum() / 8)
    assert error_sd(a) == (pytest.approx(s_e), 8)
    means = level_means(d, df, "y", error_sd(a))
    half = stats.t.ppf(0.975, 8) * s_e / math.sqrt(6)
    for key in "AB":
        for label, m, h in means[key]:
            assert m == pytest.approx(df["y"][df[key] == label].mean())
            assert h == pytest.approx(half)
    # B's two level means differ by 2 q_B = 19, far outside the CIs; the spread of the runs
    # at a level of B would have given CIs wider than that difference
    (_, m_lo, h_lo), (_, m_hi, h_hi) = means["B"]
    assert m_hi - m_lo == pytest.approx(19) and h_lo + h_hi < 19
    naive = stats.t.ppf(0.975, 5) * df["y"][df["B"] == "lo"].std() / math.sqrt(6)
    assert naive > 19
    # multi-level: the ANOVA's error row (3 x 2 levels, 2 replications: 6 dof)
    m = design_from_dict({"name": "m", "replications": 2, "base": {"traffic": TRAFFIC},
                          "factors": {"A": {"set": "param.a", "levels": ["x", "y", "z"]},
                                      "B": {"set": "param.b", "levels": ["lo", "hi"]}}}, check_files=False)  # fmt: skip
    rows = [{"run_id": f"p{p}r{r}", "point": p, "status": "ok", "y": 10 * p + 3 * r + (p % 2), **pt}
            for p, pt in enumerate(m.points()) for r in range(2)]  # fmt: skip
    mdf = pd.DataFrame(rows)
    ma = analyze_frame(m, mdf, "y")
    mcell = mdf.groupby("point")["y"].transform("mean")
    ms_e = math.sqrt(((mdf["y"] - mcell) ** 2).sum() / 6)
    assert error_sd(ma) == (pytest.approx(ms_e), 6)
    mm = level_means(m, mdf, "y", error_sd(ma))
    assert [h for _, _, h in mm["A"]] == pytest.approx([stats.t.ppf(0.975, 6) * ms_e / 2] * 3)
    assert [h for _, _, h in mm["B"]] == pytest.approx([stats.t.ppf(0.975, 6) * ms_e / math.sqrt(6)] * 2)
    # no replications: no error dof, no CI
    assert error_sd(analyze_frame(d, frame(d, [[y[0]] for y in ys]), "y")) is None


def test_variation_in_small_units_is_allocated() -> None:
    # Jain 18.1 in seconds rather than milliseconds-sized numbers: the same allocation
    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    df = frame(d, [[v * 1e-9 for v in cell] for cell in ys])
    a = analyze_frame(d, df, "y")
    assert a["note"] == "" and not a.get("constant")
    y = df["y"].to_numpy()
    sst = ((y - y.mean()) ** 2).sum()
    for name, cols in (("A", ["A"]), ("B", ["B"]), ("AB", ["A", "B"])):
        q = marginal_q(df, cols)
        assert by_effect(a)[name]["pct"] == pytest.approx(100 * 12 * q * q / sst)
    assert by_effect(a)["A"]["pct"] == pytest.approx(100 * 12 * 21.5**2 / 7032)


def test_values_equal_up_to_rounding_get_no_percentages() -> None:
    # 0.1 summed in floating point: a total of squares of ~1e-30 is rounding, not variation
    d = two_level_design("AB", r=3)
    ys = [[0.1, 0.1, 0.1], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1 + 1e-16]]
    a = analyze_frame(d, frame(d, ys), "y")
    assert a["note"].startswith("no variation to allocate") and a["constant"]
    assert all(e["pct"] is None for e in a["effects"]) and a["error"]["pct"] is None
    assert "pct_total" not in a


def _rss(x: np.ndarray, y: np.ndarray) -> float:
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return float(((y - x @ coef) ** 2).sum())


def test_unbalanced_percentages_say_what_they_add_up_to() -> None:
    # two-level, one run missing: each effect's SS is type II, what its column adds to the
    # terms that do not contain it (the columns are no longer orthogonal)
    d = two_level_design("AB", r=3)
    ys = [[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]]
    df = frame(d, ys).drop(index=[1])
    a = analyze_frame(d, df, "y")
    y = df["y"].to_numpy(dtype=float)
    cols = {n: np.prod([np.where(df[c] == "hi", 1.0, -1.0) for c in n], axis=0) for n in ("A", "B", "AB")}
    full = np.column_stack([np.ones(len(y)), *cols.values()])
    rss = _rss(full, y)
    sst = ((y - y.mean()) ** 2).sum()
    one = np.ones(len(y))
    base = {"A": [cols["B"]], "B": [cols["A"]], "AB": [cols["A"], cols["B"]]}
    pct = {n: 100 * (_rss(np.column_stack([one, *base[n]]), y) - _rss(np.column_stack([one, *base[n], cols[n]]), y))
           / sst for n in cols}  # fmt: skip
    for n, want in pct.items():
        assert by_effect(a)[n]["pct"] == pytest.approx(want)
    total = sum(pct.values()) + 100 * rss / sst
    assert abs(total - 100) > 0.05  # the case: the rows do not add up
    assert a["pct_total"] == pytest.approx(total)
    text = format_text({"design": d.summary(), "runs": {"ok": 11, "failed": [], "unsettled": [], "missing": []},
                        "responses": {"y": a}})  # fmt: skip
    assert f"the percentages of variation add up to {total:.1f} %, not 100 %" in text
    # balanced: they add up, and nothing is said
    b = analyze_frame(d, frame(d, ys), "y")
    assert b["pct_total"] == pytest.approx(100) and "pct_note" not in b


def test_unbalanced_multi_level_keeps_the_full_model_and_says_the_total() -> None:
    m = design_from_dict({"name": "m", "replications": 2, "base": {"traffic": TRAFFIC},
                          "factors": {"A": {"set": "param.a", "levels": ["x", "y", "z"]},
                                      "B": {"set": "param.b", "levels": ["lo", "hi"]}}}, check_files=False)  # fmt: skip
    vals = [[10, 12], [20, 25], [13, 11], [31, 30], [17, 22], [40, 36]]
    rows = [{"run_id": f"p{p}r{r}", "point": p, "status": "ok", "y": vals[p][r], **pt}
            for p, pt in enumerate(m.points()) for r in range(2)]  # fmt: skip
    df = pd.DataFrame(rows).drop(index=[3])  # one run of the second cell missing
    a = analyze_frame(m, df, "y")
    assert a["model"] == "all interactions" and not a["balanced"]
    y = df["y"].to_numpy(dtype=float)
    da = np.column_stack([(df["A"] == lv).to_numpy(float) for lv in ("y", "z")])
    db = (df["B"] == "hi").to_numpy(float)[:, None]
    dab = np.column_stack([da[:, j] * db[:, 0] for j in range(2)])
    one = np.ones((len(y), 1))
    r_a, r_b = _rss(np.hstack([one, da]), y), _rss(np.hstack([one, db]), y)
    r_ab, r_full = _rss(np.hstack([one, da, db]), y), _rss(np.hstack([one, da, db, dab]), y)
    sst = ((y - y.mean()) ** 2).sum()
    want = {"A": r_b - r_ab, "B": r_a - r_ab, "A x B": r_ab - r_full, "error": r_full}  # type II
    got = {r["term"]: r for r in a["anova"]["table"]}
    for term, ss in want.items():
        assert got[term]["pct"] == pytest.approx(100 * ss / sst)
    total = 100 * sum(want.values()) / sst
    assert abs(total - 100) > 0.05 and a["pct_total"] == pytest.approx(total)
    assert f"add up to {total:.1f} %" in a["pct_note"]
