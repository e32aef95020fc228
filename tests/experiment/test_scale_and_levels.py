"""Multi-level effects with their CIs, the check for multiplicative effects and the log
transform: every expected figure is computed here from its definition (Jain's formulas
for the full factorial with replications, marginal means on log10 y) or by statsmodels'
least squares as an independent oracle."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
import yaml
from click.testing import CliRunner
from scipy import stats

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.analysis import TransformError, analyze_frame, format_text, to_json
from npkit.toolchain.experiment.design import Design, design_from_dict
from npkit.toolchain.experiment.report import build
from npkit.toolchain.experiment.store import Store

TRAFFIC = str(Path(__file__).resolve().parents[2] / "examples" / "traffic" / "seed003_balanced.yaml")


def design(levels: dict[str, list[str]], r: int) -> Design:
    data = {"name": "m", "replications": r, "base": {"traffic": TRAFFIC},
            "factors": {k: {"set": f"param.p{k}", "levels": v} for k, v in levels.items()}}  # fmt: skip
    return design_from_dict(data, check_files=False)


def frame(d: Design, ys: list[list[float]]) -> pd.DataFrame:
    rows = [{"run_id": f"p{p}r{j}", "point": p, "status": "ok", "y": y, **pt}
            for p, pt in enumerate(d.points()) for j, y in enumerate(ys[p])]  # fmt: skip
    return pd.DataFrame(rows)


def components(a: dict) -> dict[str, dict]:
    return {e["level"]: e for e in [a["mu"], *a["level_effects"]]}


def summary(d: Design, a: dict, n: int) -> dict:
    return {"design": d.summary(), "runs": {"ok": n, "failed": [], "unsettled": [], "missing": []},
            "responses": {"y": a}}  # fmt: skip


# a 3 x 2 full factorial, three replications: A in {x, y, z}, B in {lo, hi}
A3B2 = {"A": ["x", "y", "z"], "B": ["lo", "hi"]}
VALUES = {("x", "lo"): [10, 12, 11], ("y", "lo"): [20, 25, 21], ("z", "lo"): [13, 11, 15],
          ("x", "hi"): [31, 30, 34], ("y", "hi"): [17, 22, 19], ("z", "hi"): [40, 36, 41]}  # fmt: skip


def a3b2(r: int = 3) -> tuple[Design, pd.DataFrame]:
    d = design(A3B2, r)
    return d, frame(d, [VALUES[(p["A"], p["B"])][:r] for p in d.points()])


def test_two_factor_effects_and_cis_follow_jain() -> None:
    d, df = a3b2()
    res = analyze_frame(d, df, "y")
    got = components(res)
    a, b, r = 3, 2, 3
    n = a * b * r
    y = df["y"].to_numpy(float)
    mu = y.mean()
    alpha = {lv: df[df["A"] == lv]["y"].mean() - mu for lv in A3B2["A"]}
    beta = {lv: df[df["B"] == lv]["y"].mean() - mu for lv in A3B2["B"]}
    cell = df.groupby(["A", "B"])["y"].mean()
    gamma = {(i, j): cell[(i, j)] - mu - alpha[i] - beta[j] for i in A3B2["A"] for j in A3B2["B"]}
    sse = ((y - df.groupby(["A", "B"])["y"].transform("mean").to_numpy()) ** 2).sum()
    dof = a * b * (r - 1)
    s_e = math.sqrt(sse / dof)
    t = stats.t.ppf(0.975, dof)
    sd = {"mu": s_e / math.sqrt(n), "A": s_e * math.sqrt((a - 1) / n), "B": s_e * math.sqrt((b - 1) / n),
          "A x B": s_e * math.sqrt((a - 1) * (b - 1) / n)}  # fmt: skip
    assert res["error"]["dof"] == dof and res["error"]["s_e"] == pytest.approx(s_e)
    want = {"mu": ("mu", mu)}
    want.update({f"A={i}": ("A", v) for i, v in alpha.items()})
    want.update({f"B={j}": ("B", v) for j, v in beta.items()})
    want.update({f"A={i} B={j}": ("A x B", v) for (i, j), v in gamma.items()})
    assert set(got) == set(want)
    for label, (term, value) in want.items():
        e = got[label]
        assert e["term"] == term
        assert e["effect"] == pytest.approx(value)
        assert e["sd"] == pytest.approx(sd[term])
        assert e["ci"] == pytest.approx([value - t * sd[term], value + t * sd[term]])
        if term != "mu":
            assert e["significant"] == (abs(value) > t * sd[term])
    # the effects of a term add up to zero over each of its factors
    assert sum(alpha.values()) == pytest.approx(0) and got["A=x B=lo"]["effect"] == pytest.approx(-got["A=x B=hi"]["effect"])
    # text and JSON carry them
    text = format_text(summary(d, res, n))
    assert f"95% CI from s_e = {s_e:.4g} ({dof} dof)" in text
    line = next(x for x in text.splitlines() if x.split()[:2] == ["A", "A=z"])
    lo, hi = got["A=z"]["ci"]
    assert f"[{lo:.4g}, {hi:.4g}]" in line and line.endswith("*") == got["A=z"]["significant"]
    js = json.loads(to_json(summary(d, res, n)))["responses"]["y"]
    assert len(js["level_effects"]) == 3 + 2 + 6 and js["mu"]["ci"] == pytest.approx(got["mu"]["ci"])


def test_three_factors_and_unequal_cells_match_least_squares() -> None:
    """Unequal runs per cell (and a three-factor interaction): the effects are those of the
    cell means, and their standard deviations those of least squares with sum-to-zero
    coding, which statsmodels computes on its own."""
    d = design({"A": ["x", "y", "z"], "B": ["lo", "hi"], "D": ["p", "q"]}, 2)  # C is patsy's
    rng = np.random.default_rng(7)
    ys = [list(20 + 3 * j + rng.normal(0, 1, 2 + (j % 3 == 0))) for j in range(len(d.points()))]
    df = frame(d, ys)
    res = analyze_frame(d, df, "y")
    got = components(res)
    fit = smf.ols("y ~ C(A, Sum) * C(B, Sum) * C(D, Sum)", df).fit()
    assert res["error"]["dof"] == int(fit.df_resid) and res["error"]["s_e"] == pytest.approx(math.sqrt(fit.scale))
    # sum coding: coefficients are the effects of every level but the last (levels sorted by name)
    names = {"A": sorted(["x", "y", "z"])[:-1], "B": sorted(["lo", "hi"])[:-1], "D": sorted(["p", "q"])[:-1]}
    assert got["mu"]["effect"] == pytest.approx(fit.params["Intercept"])
    assert got["mu"]["sd"] == pytest.approx(fit.bse["Intercept"])
    for order in (1, 2, 3):
        for term in itertools.combinations("ABD", order):
            for levels in itertools.product(*(names[f] for f in term)):
                coef = ":".join(f"C({f}, Sum)[S.{lv}]" for f, lv in zip(term, levels, strict=True))
                e = got[" ".join(f"{f}={lv}" for f, lv in zip(term, levels, strict=True))]
                assert e["effect"] == pytest.approx(fit.params[coef]), coef
                assert e["sd"] == pytest.approx(fit.bse[coef]), coef
                half = stats.t.ppf(0.975, fit.df_resid) * fit.bse[coef]
                assert e["ci"] == pytest.approx([fit.params[coef] - half, fit.params[coef] + half])


def test_multi_level_without_replications_or_with_an_empty_cell_has_no_cis() -> None:
    d, df = a3b2(r=1)
    res = analyze_frame(d, df, "y")
    got = components(res)
    assert got["A=y"]["effect"] == pytest.approx(df[df["A"] == "y"]["y"].mean() - df["y"].mean())
    assert all(e["ci"] is None and e["sd"] is None and not e.get("significant") for e in got.values())
    assert res["error"]["dof"] == 0 and "no degrees of freedom" in res["effects_note"]
    assert "no degrees of freedom for the error" in format_text(summary(d, res, 6))
    d3, df3 = a3b2()
    res = analyze_frame(d3, df3[~((df3["A"] == "z") & (df3["B"] == "hi"))], "y")
    assert "level_effects" not in res and "1 of the 6 cells have no usable run" in res["effects_note"]


def test_additive_response_raises_no_warning() -> None:
    d, df = a3b2()
    res = analyze_frame(d, df, "y")
    check = res["multiplicative"]
    assert check["ratio"] == pytest.approx(41 / 10) and check["reasons"] == [] and not check["suggested"]
    assert "multiplicative" not in format_text(summary(d, res, 18))
    assert res["transform"] == "none"


def two_level(keys: str, r: int) -> Design:
    data = {"name": "t", "replications": r, "base": {"traffic": TRAFFIC},
            "factors": {k: {"set": f"param.p{k}", "levels": ["lo", "hi"]} for k in keys}}  # fmt: skip
    return design_from_dict(data, check_files=False)


def multiplicative_frame() -> tuple[Design, pd.DataFrame]:
    """y = 2 * 6^xA * 3^xB * (1 +- 5 %): the factors multiply the response."""
    d = two_level("AB", 3)
    ys = []
    for p in d.points():
        x = {k: 1 if v == "hi" else -1 for k, v in p.items()}
        base = 2 * 6 ** x["A"] * 3 ** x["B"]
        ys.append([base * f for f in (0.95, 1.0, 1.05)])
    return d, frame(d, ys)


def test_a_wide_ratio_is_reported_with_its_figures() -> None:
    d, df = multiplicative_frame()
    res = analyze_frame(d, df, "y")
    ratio = df["y"].max() / df["y"].min()
    check = res["multiplicative"]
    assert check["ratio"] == pytest.approx(ratio) and check["suggested"]
    assert any(f"ymax/ymin = {ratio:.3g}" in why for why in check["reasons"])
    text = format_text(summary(d, res, 12))
    assert "warning: the effects may be multiplicative" in text and "--transform log" in text
    assert f"{ratio:.3g}" in text


def test_a_spread_that_grows_with_the_level_is_reported() -> None:
    """Cell means 20 .. 55 (ymax/ymin about 3.4, under the limit); the spread within a cell
    doubles from one cell to the next."""
    d = two_level("ABC", 2)
    means = [20, 25, 30, 35, 40, 45, 50, 55]
    half = [0.1 * 2**j for j in range(8)]
    df = frame(d, [[m - h, m + h] for m, h in zip(means, half, strict=True)])
    res = analyze_frame(d, df, "y")
    check = res["multiplicative"]
    sds = [math.sqrt(2) * h for h in half]
    rho, p = stats.spearmanr(means, sds, alternative="greater")
    assert check["ratio"] < 10 and check["suggested"]
    assert check["spread"]["spearman_rho"] == pytest.approx(rho) and check["spread"]["p"] == pytest.approx(p)
    assert check["spread"]["lower_half"] == pytest.approx(np.mean(sds[:4]))
    assert check["spread"]["upper_half"] == pytest.approx(np.mean(sds[4:]))
    assert len(check["reasons"]) == 1 and "the spread grows with the level" in check["reasons"][0]
    # the same means with an even spread: nothing to say
    even = analyze_frame(d, frame(d, [[m - 1, m + 1] for m in means]), "y")
    assert not even["multiplicative"]["reasons"]


def test_log_transform_gives_effects_as_ratios() -> None:
    d, df = multiplicative_frame()
    res = analyze_frame(d, df, "y", transform="log")
    assert res["transform"] == "log10"
    logged = df.assign(y=np.log10(df["y"]))
    effects = {e["effect"]: e for e in res["effects"]}
    cell = logged.groupby("point")["y"].transform("mean")
    s_e = math.sqrt(((logged["y"] - cell) ** 2).sum() / 8)
    half = stats.t.ppf(0.975, 8) * s_e / math.sqrt(12)
    for name, cols in (("A", ["A"]), ("B", ["B"]), ("AB", ["A", "B"])):
        sign = np.prod([np.where(logged[c] == "hi", 1, -1) for c in cols], axis=0)
        q = (logged["y"][sign > 0].mean() - logged["y"][sign < 0].mean()) / 2
        e = effects[name]
        assert e["q"] == pytest.approx(q)
        assert e["ratio"] == pytest.approx(10**q) and e["ratio_hi_lo"] == pytest.approx(10 ** (2 * q))
        assert e["ratio_ci"] == pytest.approx([10 ** (q - half), 10 ** (q + half)])
    # the model's factors come back: 6 and 3 at +1, nothing for AB
    assert effects["A"]["ratio"] == pytest.approx(6) and effects["B"]["ratio"] == pytest.approx(3)
    assert effects["AB"]["ratio"] == pytest.approx(1) and not effects["AB"]["significant"]
    assert res["q0_ratio"] == pytest.approx(10 ** logged["y"].mean())
    assert res["range"] == pytest.approx([df["y"].min(), df["y"].max()])  # in the response's own units
    text = format_text(summary(d, res, 12))
    assert "== log10 of y" in text and "10^q" in text and "warning" not in text
    # a multi-level design: each level's factor and its CI
    m, mdf = a3b2()
    ml = components(analyze_frame(m, mdf, "y", transform="log"))
    lv = mdf.assign(y=np.log10(mdf["y"]))
    alpha = lv[lv["A"] == "z"]["y"].mean() - lv["y"].mean()
    assert ml["A=z"]["ratio"] == pytest.approx(10**alpha)
    assert ml["A=z"]["ratio_ci"] == pytest.approx([10**v for v in ml["A=z"]["ci"]])


def test_log_transform_refuses_values_that_are_not_positive() -> None:
    d, df = multiplicative_frame()
    df.loc[4, "y"] = 0.0
    df.loc[7, "y"] = -1.5
    with pytest.raises(TransformError, match=r"y: --transform log needs every value above 0; 2 usable runs are "
                                             r"not \(smallest -1.5: p1r1, p2r1\)"):  # fmt: skip
        analyze_frame(d, df, "y", transform="log")
    res = analyze_frame(d, df, "y")  # untransformed: analysed, and no log scale suggested
    assert not res["multiplicative"]["suggested"]


# ---- through the command line, on a results directory -----------------------------------


def results(tmp_path: Path, values: list[list[float]], second: list[list[float]] | None = None) -> Path:
    """A results store of a 2^2 design with 3 replications whose runs gave `values`
    (capacity_mbps) and `second` (capacity_mpps)."""
    data = {"name": "t", "replications": 3, "base": {"traffic": TRAFFIC, "routes": None},
            "factors": {"A": {"set": "param.qm", "levels": ["full", "stub"]},
                        "B": {"set": "param.parse_threads", "levels": [4, 8]}},
            "responses": ["capacity_mbps", "capacity_mpps"]}  # fmt: skip
    d = design_from_dict(data, check_files=False)
    store = Store(tmp_path / "res")
    runs = d.runs()
    store.init({"name": "t", "runs": [r.run_id for r in runs], "factors": d.keys}, yaml.safe_dump(data))
    for r in runs:
        resp = {"capacity_mbps": values[r.point][r.replicate],
                "capacity_mpps": (second or values)[r.point][r.replicate]}  # fmt: skip
        store.save({"run_id": r.run_id, "point": r.point, "replicate": r.replicate, "seed": r.seed,
                    "levels": r.levels, "status": "ok", "responses": resp, "config_hash": r.config_hash})  # fmt: skip
    return store.root


WIDE = [[9.5, 10, 10.5], [57, 60, 63], [28.5, 30, 31.5], [171, 180, 189]]  # x6 for A, x3 for B


def test_cli_transform_option_text_json_and_report(tmp_path: Path) -> None:
    root = results(tmp_path, WIDE, [[v - 20 for v in cell] for cell in WIDE])
    plain = CliRunner().invoke(main, ["experiment", "analyze", str(root), "--response", "capacity_mbps"])
    assert plain.exit_code == 0 and "warning: the effects may be multiplicative" in plain.output
    r = CliRunner().invoke(main, ["experiment", "analyze", str(root), "--transform", "log", "--json",
                                  "--response", "capacity_mbps"])  # fmt: skip
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    cap = res["responses"]["capacity_mbps"]
    assert res["transform"] == cap["transform"] == "log10"
    assert cap["multiplicative"]["ratio"] == pytest.approx(189 / 9.5) and cap["multiplicative"]["suggested"]
    assert {e["effect"]: round(e["ratio_hi_lo"], 6) for e in cap["effects"]} == {"A": 6, "B": 3, "AB": 1}
    # capacity_mpps holds values below 0: refused, exit 1, one line naming it, no traceback
    bad = CliRunner().invoke(main, ["experiment", "analyze", str(root), "--transform", "log"])
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    assert "capacity_mpps: --transform log needs every value above 0" in bad.output
    usage = CliRunner().invoke(main, ["experiment", "analyze", str(root), "--transform", "sqrt"])
    assert usage.exit_code == 2
    # the report: on log10, the ratios in the table, the warning on the original scale
    md = tmp_path / "log.md"
    assert CliRunner().invoke(main, ["experiment", "report", str(root), "-o", str(md), "--transform", "log",
                                     "--response", "capacity_mbps"]).exit_code == 0  # fmt: skip
    text = md.read_text()
    assert "## Response: capacity_mbps (analysed as log10)" in text and "| 10^q |" in text
    assert "capacity_mpps" not in text.split("## Results table")[0]
    plain_md = tmp_path / "plain.md"
    build(root, plain_md, per_run_plots=False)
    assert "Warning: the effects may be multiplicative, not additive: the response spans a ratio ymax/ymin = 19.9" in (
        plain_md.read_text())  # fmt: skip
    bad = CliRunner().invoke(main, ["experiment", "report", str(root), "-o", str(md), "--transform", "log"])
    assert bad.exit_code == 1 and "capacity_mpps" in bad.output and "Traceback" not in bad.output


def _rss(x: np.ndarray, y: np.ndarray) -> float:
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    return float(((y - x @ coef) ** 2).sum())


def test_an_empty_cell_gives_an_anova_without_nan() -> None:
    """One cell of a 3 x 2 design left no usable run (it did not settle): the interaction
    cannot be estimated, and a model that keeps it is rank-deficient (its type II sums of
    squares came out NaN: 'L SS nan  nan %').  The main-effects model is used, and says why."""
    d, df = a3b2(r=2)
    df = df[~((df["A"] == "z") & (df["B"] == "hi"))].reset_index(drop=True)
    res = analyze_frame(d, df, "y")
    assert res["model"].startswith("main effects") and "inestimable" in res["model"]
    rows = {r["term"]: r for r in res["anova"]["table"]}
    assert set(rows) == {"A", "B", "error"}
    assert all(math.isfinite(r["sum_sq"]) and math.isfinite(r["pct"]) for r in rows.values())
    y = df["y"].to_numpy(float)
    one = np.ones((len(y), 1))
    da = np.column_stack([(df["A"] == lv).to_numpy(float) for lv in ("y", "z")])
    db = (df["B"] == "hi").to_numpy(float)[:, None]
    both = _rss(np.hstack([one, da, db]), y)
    assert rows["B"]["sum_sq"] == pytest.approx(_rss(np.hstack([one, da]), y) - both)
    assert rows["A"]["sum_sq"] == pytest.approx(_rss(np.hstack([one, db]), y) - both)
    assert rows["error"]["sum_sq"] == pytest.approx(both) and rows["error"]["df"] == len(y) - 4
    assert "nan" not in format_text(summary(d, res, len(y)))


def test_main_effect_plot_says_when_a_cell_is_empty(tmp_path: Path) -> None:
    """With a cell missing, a level's raw mean holds other factors' effects (seen walking a
    3 x 2 design whose S=2 pipelined runs did not settle: 'parallel' looked 3 us slower
    though the layout explained 0.2 % of the variation): the caption says so."""
    values = [[10, 11, 12], [60, 61, 59], [30, 31, 29], [180, 178, 181]]
    root = results(tmp_path, values)
    store = Store(root)
    for rec in store.records().values():
        if rec["point"] == 3:
            store.save({**rec, "status": "failed", "error": "boom", "responses": {}})
    md = tmp_path / "r.md"
    build(root, md, per_run_plots=False, responses=["capacity_mbps"])
    caption = next(x for x in md.read_text().splitlines() if x.startswith("*Main effects on capacity_mbps"))
    assert "some cells have no usable run (A=stub B=8)" in caption and "mixes in the other factors" in caption
    full = tmp_path / "full"
    full.mkdir()
    build(results(full, values), md, per_run_plots=False, responses=["capacity_mbps"])
    assert "no usable run" not in md.read_text()


def test_a_constant_response_prints_no_table_of_zero_effects(tmp_path: Path) -> None:
    """loss_pct was 0 in every run of seed 003 --quick: the text printed seven effects of 0
    with CIs [0, 0] under 'no variation to allocate'."""
    d = two_level("AB", 2)
    res = analyze_frame(d, frame(d, [[0.0, 0.0]] * 4), "y")
    text = format_text(summary(d, res, 8))
    assert "no variation to allocate" in text and "[0, 0]" not in text and "95% CI" not in text
    root = results(tmp_path, [[5.0] * 3] * 4)
    md = tmp_path / "r.md"
    build(root, md, per_run_plots=False, responses=["capacity_mbps"])
    assert "no variation to allocate" in md.read_text() and "| effect | q |" not in md.read_text()
