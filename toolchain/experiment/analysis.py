"""Analysis of a results table: effects, allocation of variation, CIs, ANOVA.

Two-level designs (2^k and 2^(k-p), r replications) use the sign table (Jain, *The
Art of Computer Systems Performance Analysis*, ch. 17-19): with codes x = -1/+1 and
cell means ybar_i,

    q_0 = mean(ybar_i),  q_E = sum_i x_E,i ybar_i / 2^(k-p)     (x_E = product of codes)
    SS_E = 2^(k-p) r q_E^2,  SSE = sum (y_ij - ybar_i)^2,  SST = sum (y_ij - ybar)^2
    percentage of variation of E = 100 SS_E / SST
    s_e^2 = SSE / (2^(k-p) (r - 1)),  s_q = s_e / sqrt(2^(k-p) r),
    CI(q_E) = q_E -+ t[1 - alpha/2; 2^(k-p)(r - 1)] s_q.

q_E is half the difference between the mean response at E = +1 and at E = -1, the
convention of seed 003 ("464 Mb/s greater throughput than average").  An unbalanced
table (failed or unsettled runs left out) is fitted by least squares on the same coded
columns instead, and says so.  Every design also gets an ANOVA with F tests
(statsmodels); multi-level designs get it on categorical factors (all interactions
when replicated, else main effects and two-factor interactions), sweeps a linear and a
quadratic fit per group of the other factors (an F test of the quadratic term is the
non-linearity test).

Which runs count: finished runs with a value; for steady-state responses (windowed:
throughput, latency, utilisation, loss) only runs whose series settled -- judged per
response where the run records it (`settled_throughput_mbps` for the throughput
responses, `settled_latency_mean_us` for the latency ones), else by the run's overall
`settled` -- the others are listed as excluded with their values, never averaged in,
and the cells they leave empty are named (the effects are then conditional on the
cells that remain).
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from pathlib import Path
from typing import Any

from npkit.asm.base.reading import load_yaml

from .design import DESIGN_LIMIT, Design, DesignError, design_from_dict
from .store import Store

STEADY_PREFIXES = ("throughput", "latency", "util_", "loss", "offered", "lost", "in_flight")
ALPHA = 0.05


def load_results(results_dir: str | Path) -> tuple[Design, Any, dict[str, Any]]:
    """The design as run, the results table (pandas) and the manifest."""
    store = Store(results_dir)
    man = store.manifest()
    path = store.root / "design.yaml"
    located = load_yaml(path, limit=DESIGN_LIMIT, error=DesignError, what="design as run")
    design = design_from_dict(located.data, path, check_files=False, located=located)
    design.quick = bool(man.get("quick"))
    return design, store.table(), man


def steady_response(name: str) -> bool:
    return name.startswith(STEADY_PREFIXES)


# the windowed series a steady-state response is measured from (its settled_<series> flag)
SERIES_OF = {"throughput": "throughput_mbps", "latency": "latency_mean_us"}


def settled_column(df: Any, response: str) -> str:
    """The column that says whether `response` settled in a run: settled_<response>, else
    that of the series it comes from, else the run's overall `settled`."""
    own = f"settled_{response}"
    if own in df.columns:
        return own
    series = next((v for k, v in SERIES_OF.items() if response.startswith(k)), None)
    if series is not None and f"settled_{series}" in df.columns:
        return f"settled_{series}"
    return "settled"


def usable(df: Any, response: str) -> tuple[Any, list[dict[str, Any]]]:
    """Rows that count for `response`, and the excluded runs with the reason (and the
    value of a run left out because it did not settle)."""
    excluded: list[dict[str, Any]] = []
    keep = []
    flag = settled_column(df, response)
    for i, row in df.iterrows():
        why = ""
        if row.get("status") != "ok":
            why = f"failed: {row.get('error', '')}"
        elif response not in df.columns or row[response] is None or _nan(row[response]):
            why = "no value"
        elif steady_response(response) and _is_false(row.get(flag)):
            why = "did not reach steady state"
        if why:
            x: dict[str, Any] = {"run_id": str(row["run_id"]), "reason": why}
            if why.startswith("did not"):
                x["value"] = float(row[response])
                x["point"] = int(row["point"]) if "point" in df.columns else None
            excluded.append(x)
        else:
            keep.append(i)
    return df.loc[keep], excluded


def _is_false(v: Any) -> bool:
    return v is not None and not _nan(v) and not bool(v)


def _nan(v: Any) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def _t(p: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(p, dof))


def codes(design: Design, df: Any) -> dict[str, Any]:
    """-1/+1 code columns of a two-level design's factors for the rows of df."""
    import numpy as np

    return {f.key: np.where(df[f.key].astype(str) == f.levels[1].label, 1.0, -1.0) for f in design.factors}


def effect_column(code: dict[str, Any], effect: tuple[str, ...]) -> Any:
    col = 1.0
    for k in effect:
        col = col * code[k]
    return col


# ---------------------------------------------------------------------------- two levels


def two_level(design: Design, df: Any, response: str) -> dict[str, Any]:
    import numpy as np

    y = df[response].astype(float).to_numpy()
    code = codes(design, df)
    effects = design.effects()
    names = [design.effect_name(e) for e in effects]
    cells = df.groupby("point")[response].agg(["mean", "count"])
    npoints = len(design.points())
    balanced = len(cells) == npoints and cells["count"].nunique() == 1
    # replications per usable cell: the same number in every cell, else the fewest
    r = int(cells["count"].min()) if len(cells) else 0
    out: dict[str, Any] = {"kind": "two-level", "n": len(y), "balanced": balanced, "replications": r}
    if cells["count"].nunique() > 1:
        out["replications_per_cell"] = {int(p): int(n) for p, n in cells["count"].items()}
    sst = float(((y - y.mean()) ** 2).sum())
    out["mean"] = float(y.mean())
    out["sst"] = sst
    rows = []
    if balanced:
        first = df.drop_duplicates("point").set_index("point").sort_index()
        cc = codes(design, first)
        ybar = cells["mean"].sort_index().to_numpy()
        out["q0"] = float(ybar.mean())
        q = {n: float((effect_column(cc, e) * ybar).sum() / npoints) for n, e in zip(names, effects, strict=True)}
        cell_of = df["point"].map(cells["mean"]).to_numpy()
        sse = float(((y - cell_of) ** 2).sum())
        dof = npoints * (r - 1)
        s_q = math.sqrt(sse / dof) / math.sqrt(npoints * r) if dof > 0 else math.nan
        half = _t(1 - ALPHA / 2, dof) * s_q if dof > 0 else math.nan
        for n in names:
            ss = npoints * r * q[n] ** 2
            rows.append({"effect": n, "q": q[n], "ci": [q[n] - half, q[n] + half] if dof > 0 else None,
                         "ss": ss})  # fmt: skip
        out["error"] = {"ss": sse, "dof": dof, "s_e": math.sqrt(sse / dof) if dof > 0 else None,
                        "s_q": s_q if dof > 0 else None}  # fmt: skip
        out["method"] = "sign table"
    else:
        effects, names, dropped = _estimable(code, effects, names, len(y))
        if not effects:
            return {**out, "kind": "none", "not_estimable": dropped,
                    "note": f"no effect can be estimated (only {len(cells)} usable "
                            f"cell{'s' if len(cells) != 1 else ''}, {len(y)} runs)"}  # fmt: skip
        out.update(_least_squares(design, df, response, code, effects, names, sst))
        rows = out.pop("rows")
        if dropped:
            out["not_estimable"] = dropped
    for row in rows:
        row["pct"] = 100 * row["ss"] / sst if sst > 0 else None
        row["significant"] = bool(row["ci"] and (row["ci"][0] > 0 or row["ci"][1] < 0))
        e = effects[names.index(row["effect"])]
        if design.kind == "fractional":
            row["aliases"] = [("-" if s < 0 else "") + design.effect_name(a) for s, a in design.aliases(e)]
    out["error"]["pct"] = 100 * out["error"]["ss"] / sst if sst > 0 else None
    out["effects"] = rows
    fitted = np.full(len(y), out["q0"])
    for row, e in zip(rows, effects, strict=True):
        fitted = fitted + row["q"] * effect_column(code, e)
    out["fitted"] = fitted.tolist()
    out["residuals"] = (y - fitted).tolist()
    out["anova"] = anova_coded(design, df, response, effects)
    return out


def _estimable(code: dict[str, Any], effects: list[tuple[str, ...]], names: list[str],
               n: int) -> tuple[list[tuple[str, ...]], list[str], list[str]]:  # fmt: skip
    """Effects, lowest order first, whose columns add rank (with missing cells the
    high-order interactions cannot all be estimated); keep one dof for the error."""
    import numpy as np

    cols = [np.ones(n)]
    keep, keep_names, dropped = [], [], []
    for e, name in zip(effects, names, strict=True):
        trial = np.column_stack([*cols, effect_column(code, e) * np.ones(n)])
        if np.linalg.matrix_rank(trial) == trial.shape[1] and trial.shape[1] < n:
            cols.append(trial[:, -1])
            keep.append(e)
            keep_names.append(name)
        else:
            dropped.append(name)
    return keep, keep_names, dropped


def _least_squares(design: Design, df: Any, response: str, code: dict[str, Any],
                   effects: list[tuple[str, ...]], names: list[str], sst: float) -> dict[str, Any]:  # fmt: skip
    """Unbalanced table: OLS on the coded columns; SS of each effect from a type II ANOVA."""
    import numpy as np
    import statsmodels.api as sm

    y = df[response].astype(float).to_numpy()
    x = np.column_stack([np.ones(len(y))] + [effect_column(code, e) * np.ones(len(y)) for e in effects])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sm.OLS(y, x).fit()
    dof = int(fit.df_resid)
    ci = fit.conf_int(ALPHA) if dof > 0 else None
    from .anova_types import sums_of_squares

    type2, _ = sums_of_squares(y, [c for c in x.T[1:]], [frozenset(e) for e in effects], names)
    ss_of = {r["term"]: r["sum_sq"] for r in type2}
    rows = []
    for j, n in enumerate(names, start=1):
        q = float(fit.params[j])
        rows.append({"effect": n, "q": q, "ci": [float(ci[j][0]), float(ci[j][1])] if ci is not None else None,
                     "ss": ss_of.get(n, float("nan"))})  # fmt: skip
    sse = float(fit.ssr)
    return {"q0": float(fit.params[0]), "rows": rows,
            "error": {"ss": sse, "dof": dof, "s_e": math.sqrt(sse / dof) if dof > 0 else None, "s_q": None},
            "method": "least squares (unbalanced: some runs missing or excluded; type II sums of squares, "
                      "which need not add up to the total; type III beside them in the ANOVA)"}  # fmt: skip


def anova_coded(design: Design, df: Any, response: str, effects: list[tuple[str, ...]]) -> dict[str, Any]:
    """ANOVA of a two-level design on its coded effect columns, with F tests (they need
    error degrees of freedom).  Type II: an effect's sum of squares is what it adds to the
    model of every other term that does not contain it (its interactions left out, so a
    main effect is not judged with its own interactions fitted); type III: what it adds to
    all the other terms.  Balanced, both equal the sign table's SS_E; with runs missing
    they differ, and "table" is type II ("type3" beside it)."""
    import numpy as np

    from .anova_types import sums_of_squares

    code = codes(design, df)
    y = df[response].astype(float).to_numpy()
    cols = [effect_column(code, e) * np.ones(len(y)) for e in effects]
    if len(y) - len(effects) - 1 <= 0:
        return {"table": [], "note": "no degrees of freedom left for the error (no replications): no F tests"}
    names = [design.effect_name(e) for e in effects]
    two, three = sums_of_squares(y, cols, [frozenset(e) for e in effects], names)
    return {"table": two, "type3": three, "type": "II", "note": ""}


def _anova_rows(tab: Any, names: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for term, r in tab.iterrows():
        rows.append({"term": "error" if term == "Residual" else names.get(str(term), str(term)),
                     "df": float(r["df"]), "sum_sq": float(r["sum_sq"]),
                     "F": None if _nan(r.get("F")) else float(r["F"]),
                     "p": None if _nan(r.get("PR(>F)")) else float(r["PR(>F)"])})  # fmt: skip
    return rows


# ---------------------------------------------------------------------------- multi-level


def _term_name(term: str, keys: list[str]) -> str:
    # C(f0) -> first factor's key; C(f0):C(f1) -> "A x B"
    return " x ".join(keys[int(p.removeprefix("C(f").removesuffix(")"))] for p in term.split(":"))


def multi_level(design: Design, df: Any, response: str) -> dict[str, Any]:
    import numpy as np
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    y = df[response].astype(float).to_numpy()
    data = pd.DataFrame({f"f{j}": df[k].astype(str).to_numpy() for j, k in enumerate(design.keys)})
    data["y"] = y
    sst = float(((y - y.mean()) ** 2).sum())
    # factors with one level left among the usable runs have no effect to estimate
    varied = [j for j, k in enumerate(design.keys) if df[k].astype(str).nunique() > 1]
    factors = [design.factors[j] for j in varied]
    terms = [f"C(f{j})" for j in varied]
    cells = df.groupby("point").size()
    nparams_full = int(np.prod([len(f.levels) for f in factors]))
    # every cell has a run and some have more: the model with all interactions has error dof
    every_cell = len(cells) == nparams_full
    out: dict[str, Any] = {"kind": "multi-level", "n": len(y), "mean": float(y.mean()), "sst": sst,
                           "balanced": bool(every_cell and cells.nunique() == 1)}  # fmt: skip
    two = " + ".join(terms) + "".join(f" + {a}:{b}" for i, a in enumerate(terms) for b in terms[i + 1 :])
    candidates = [("y ~ " + " * ".join(terms), "all interactions")] if every_cell and len(y) > nparams_full else []
    if len(factors) > 1:
        candidates.append(("y ~ " + two, "main effects and two-factor interactions (higher ones pooled into the error)"))
    candidates.append(("y ~ " + " + ".join(terms), "main effects (interactions pooled into the error)"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the richest model that the cells with runs can fit (full rank) with error dof left:
        # an empty cell leaves some interaction columns inestimable, and type II sums of
        # squares of a rank-deficient model come out as NaN
        inestimable = False
        for chosen in candidates:
            model = smf.ols(chosen[0], data).fit()
            full_rank = np.linalg.matrix_rank(model.model.exog) == model.model.exog.shape[1]
            inestimable = inestimable or not full_rank
            if full_rank and model.df_resid > 0:
                break
        out["model"] = chosen[1] + ("; an empty cell leaves the interactions inestimable" if inestimable else "")
        if not full_rank:
            out["anova"] = {"table": [], "note": "the cells with runs confound the factors' main effects: no F tests"}
        elif model.df_resid > 0 and sst > 0:
            tab = anova_lm(model, typ=2)
            rows = _anova_rows(tab, {})
            for r in rows:
                r["term"] = "error" if r["term"] == "error" else _term_name(r["term"], design.keys)
                r["pct"] = 100 * r["sum_sq"] / sst
            out["anova"] = {"table": rows, "note": ""}
        else:
            out["anova"] = {"table": [], "note": "no degrees of freedom for the error (or no variation): no F tests"}
    out["fitted"] = [float(v) for v in model.fittedvalues]
    out["residuals"] = [float(v) for v in model.resid]
    out["level_means"] = {f.key: {lv.label: _mean(df, f.key, lv.label, response) for lv in f.levels}
                          for f in design.factors}  # fmt: skip
    out.update(level_effects(design, df, response))
    return out


def _cell_index(design: Design, df: Any) -> Any:
    """Each row's cell as a flat index into the grid of all the factors' levels (-1 when a
    label is not one of its factor's)."""
    import numpy as np

    sizes = [len(f.levels) for f in design.factors]
    flat = np.zeros(len(df), dtype=int)
    for f, n in zip(design.factors, sizes, strict=True):
        where = {lv.label: i for i, lv in enumerate(f.levels)}
        code = np.array([where.get(v, -1) for v in df[f.key].astype(str)], dtype=int)
        flat = np.where((flat < 0) | (code < 0), -1, flat * n + code)
    return flat


def _project(grid: Any, term: tuple[int, ...], weights: Any = None) -> Any:
    """The effect of `term` (axes) on the grid of cell means: averaged over the other axes,
    centred along its own.  With `weights` (1/n per cell), the same linear map squared:
    the sum over cells of w_c^2 / n_c, the variance factor of each component."""
    import numpy as np

    x = grid if weights is None else weights
    for j, n in enumerate(grid.shape):
        if weights is None:
            x = x - x.mean(axis=j, keepdims=True) if j in term else x.mean(axis=j, keepdims=True)
        else:
            w = (np.eye(n) - 1.0 / n) ** 2 if j in term else np.full((1, n), 1.0 / n**2)
            x = np.moveaxis(np.tensordot(w, x, axes=([1], [j])), 0, j)
    return x


def level_effects(design: Design, df: Any, response: str) -> dict[str, Any]:
    """Effects of a full factorial with factors of any number of levels (Jain, ch. 22-23),
    on the cell means: mu = their mean; a main effect = the mean at a level minus mu; an
    interaction = the cell mean over its factors minus mu and the lower-order effects it
    contains.  The error is the spread within cells: s_e^2 = SSE / (N - cells).  Each
    component is a linear combination sum_c w_c ybar_c of the cell means, so its standard
    deviation is s_e sqrt(sum_c w_c^2 / n_c) -- with r runs in every cell of a design of
    N runs, s_e sqrt(prod_(j in term) (n_j - 1) / N), Jain's s_alpha = s_e sqrt((a-1)/(abr))
    -- and its CI effect -+ t[1 - alpha/2; N - cells] s.  Needs a run in every cell."""
    import numpy as np

    sizes = tuple(len(f.levels) for f in design.factors)
    ncells = int(np.prod(sizes))
    flat = _cell_index(design, df)
    y = df[response].astype(float).to_numpy()
    keep = flat >= 0
    count = np.bincount(flat[keep], minlength=ncells).astype(float)
    if (count == 0).any():
        return {"effects_note": f"no effects per level: {int((count == 0).sum())} of the {ncells} cells have "
                                "no usable run (see the ANOVA)"}  # fmt: skip
    mean = np.bincount(flat[keep], weights=y[keep], minlength=ncells) / count
    sse = float(((y[keep] - mean[flat[keep]]) ** 2).sum())
    dof = int(keep.sum()) - ncells
    s_e = math.sqrt(sse / dof) if dof > 0 else None
    half_t = _t(1 - ALPHA / 2, dof) if dof > 0 else math.nan
    grid, inv_n = mean.reshape(sizes), (1.0 / count).reshape(sizes)

    def component(value: float, var: float, label: str, term: str) -> dict[str, Any]:
        sd = s_e * math.sqrt(var) if s_e is not None else None
        ci = [value - half_t * sd, value + half_t * sd] if sd is not None else None
        return {"term": term, "level": label, "effect": value, "sd": sd, "ci": ci,
                "significant": bool(ci and (ci[0] > 0 or ci[1] < 0))}  # fmt: skip

    mu = component(float(grid.mean()), float(_project(grid, (), inv_n).sum()), "mu", "mu")
    del mu["significant"]  # the grand mean is not an effect to test against 0
    rows = []
    for order in range(1, len(sizes) + 1):
        for term in itertools.combinations(range(len(sizes)), order):
            eff, var = _project(grid, term), _project(grid, term, inv_n)
            for idx in itertools.product(*(range(sizes[j]) for j in term)):
                at = tuple(idx[term.index(j)] if j in term else 0 for j in range(len(sizes)))
                label = " ".join(f"{design.factors[j].key}={design.factors[j].levels[at[j]].label}" for j in term)
                name = " x ".join(design.factors[j].key for j in term)
                rows.append(component(float(eff[at]), float(var[at]), label, name))
    out: dict[str, Any] = {"mu": mu, "level_effects": rows,
                           "error": {"ss": sse, "dof": dof, "s_e": s_e}}  # fmt: skip
    if dof <= 0:
        out["effects_note"] = "no CIs: one run per cell leaves no degrees of freedom for the error (replicate the design)"
    return out


def _mean(df: Any, key: str, label: str, response: str) -> float | None:
    sel = df[df[key].astype(str) == label][response].astype(float)
    return float(sel.mean()) if len(sel) else None


# ---------------------------------------------------------------------------- sweeps


def sweep(design: Design, df: Any, response: str) -> dict[str, Any]:
    """Per combination of the other factors: linear fit, R^2, quadratic-term F test."""
    import numpy as np

    assert design.sweep is not None
    others = [k for k in design.keys if k != design.sweep]
    groups: dict[str, Any] = {}
    parts = df.groupby([df[k].astype(str) for k in others]) if others else [((), df)]
    for key, g in parts:
        label = ", ".join(f"{k}={v}" for k, v in zip(others, key if isinstance(key, tuple) else (key,), strict=True)) or "all"
        x = g[design.sweep].astype(float).to_numpy()
        y = g[response].astype(float).to_numpy()
        res: dict[str, Any] = {"n": len(y)}
        if len(set(x)) >= 2:
            slope, icpt = np.polyfit(x, y, 1)
            pred = slope * x + icpt
            ss = float(((y - y.mean()) ** 2).sum())
            res.update({"slope": float(slope), "intercept": float(icpt),
                        "r2": 1 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else None,
                        "max_abs_residual": float(np.abs(y - pred).max())})  # fmt: skip
        res.update(_nonlinearity(x, y))
        groups[label] = res
    out = multi_level(design, df, response)
    out["kind"] = "sweep"
    out["sweep"] = design.sweep
    out["groups"] = groups
    return out


def _nonlinearity(x: Any, y: Any) -> dict[str, Any]:
    """F test of the straight line against a richer model: with replicates at the x
    values, lack of fit (the line against one mean per x, any shape); without, the
    quadratic term."""
    import pandas as pd
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    d = pd.DataFrame({"x": x, "y": y})
    nx = d["x"].nunique()
    if nx < 3 or len(d) < 4:
        return {}
    replicated = len(d) > nx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lin = smf.ols("y ~ x", d).fit()
        rich = smf.ols("y ~ C(x)" if replicated else "y ~ x + I(x ** 2)", d).fit()
        if rich.df_resid <= 0 or lin.ssr <= 0:
            return {}
        if rich.ssr <= 1e-12 * lin.ssr:  # the richer model fits exactly: nothing but curvature
            p = 0.0
        else:
            p = anova_lm(lin, rich)["Pr(>F)"].iloc[1]
    if _nan(p):
        return {}
    return {"nonlinear_test": "lack of fit" if replicated else "quadratic term",
            "nonlinear_p": float(p), "nonlinear": bool(p < ALPHA)}  # fmt: skip


def error_sd(a: dict[str, Any]) -> tuple[float, int] | None:
    """The experimental error of an analysis, (s_e, degrees of freedom): that of the
    effects' model, else the error row of its ANOVA; None without error dof."""
    err = a.get("error") or {}
    if err.get("s_e") is not None and err.get("dof"):
        return float(err["s_e"]), int(err["dof"])
    for r in (a.get("anova") or {}).get("table") or []:
        if r["term"] == "error" and r["df"] > 0:
            return math.sqrt(r["sum_sq"] / r["df"]), int(round(r["df"]))
    return None


# ---------------------------------------------------------------------------- entry


def _cell_label(design: Design, point: dict[str, str]) -> str:
    return " ".join(f"{k}={point[k]}" for k in design.keys)


TRANSFORMS = ("none", "log")
# ymax/ymin above which the response spans more than an order of magnitude: a log scale is
# then worth a look (Jain: a log transform helps when the ratio is large, and hardly
# changes anything when it is small, where the log is nearly linear)
RATIO_LIMIT = 10.0
SPREAD_MIN_CELLS = 6  # cells (or runs) needed before the spread against the level is judged
SPREAD_GROWTH = 2.0  # how much wider the upper half's spread must be than the lower half's


class TransformError(ValueError):
    """The transform asked for cannot be applied to a response's values."""


def analyze_frame(design: Design, df: Any, response: str, transform: str = "none") -> dict[str, Any]:
    """The analysis of one response; with transform "log", of log10(response) (effects
    multiply the response: 10^q), refused when a usable value is not positive."""
    import numpy as np

    if transform not in TRANSFORMS:
        raise TransformError(f"transform {transform!r}: one of {', '.join(TRANSFORMS)}")
    rows, excluded = usable(df, response)
    if rows.empty:
        return {"kind": "none", "n": 0, "excluded": excluded, "note": "no usable runs", "transform": transform}
    plain = _analyze_rows(design, rows, response, excluded)
    check = multiplicative_check(rows[response].astype(float).to_numpy(), plain, rows["point"].to_numpy())
    if transform == "none":
        out = plain
    else:
        y = rows[response].astype(float)
        bad = rows[y <= 0]
        if len(bad):
            ids = ", ".join(bad["run_id"].astype(str).tolist()[:5]) + (", ..." if len(bad) > 5 else "")
            raise TransformError(f"{response}: --transform log needs every value above 0; {len(bad)} usable "
                                 f"run{'s are' if len(bad) != 1 else ' is'} not (smallest {float(y.min()):g}: "
                                 f"{ids}); leave the response out (--response names the others)")  # fmt: skip
        logged = rows.copy()
        logged[response] = np.log10(y.to_numpy())
        out = _analyze_rows(design, logged, response, excluded)
        if out.get("kind") != "none":
            _as_ratios(out)
            out["log_range"] = out["range"]
            out["range"] = [float(y.min()), float(y.max())]
            out["geometric_mean"] = 10 ** out["mean"]
    out["transform"] = "log10" if transform == "log" else "none"
    if check is not None:
        out["multiplicative"] = check
    return out


def multiplicative_check(y: Any, a: dict[str, Any], cells: Any) -> dict[str, Any] | None:
    """Whether the effects look multiplicative rather than additive, on the original scale
    (Jain: then analyse log y).  Two signs: the response spans a large ratio (ymax/ymin >
    RATIO_LIMIT), or its spread grows with its level.  The spread is judged per cell when
    every cell holds two runs or more (the standard deviation of the runs against their
    mean), else per run (|residual| against the predicted value); it grows when Spearman's
    rank correlation is positive at level ALPHA and the mean spread of the upper half (by
    level) is at least SPREAD_GROWTH times that of the lower half.  None when there is
    nothing to judge."""
    import numpy as np
    import pandas as pd

    if a.get("kind") == "none" or a.get("constant") or not len(y):
        return None
    y = np.asarray(y, dtype=float)
    lo, hi = float(y.min()), float(y.max())
    out: dict[str, Any] = {"ratio": hi / lo if lo > 0 else None, "ratio_limit": RATIO_LIMIT, "reasons": []}
    if lo > 0 and hi / lo > RATIO_LIMIT:
        out["reasons"].append(f"the response spans a ratio ymax/ymin = {hi / lo:.3g} (above {RATIO_LIMIT:g})")
    g = pd.DataFrame({"y": y, "cell": np.asarray(cells)}).groupby("cell")["y"]
    if len(g) >= SPREAD_MIN_CELLS and g.size().min() >= 2:
        level, spread = g.mean().to_numpy(), g.std(ddof=1).to_numpy()
        how = "the standard deviation within a cell against the cell mean"
    else:
        level = np.asarray(a.get("fitted") or [], dtype=float)
        spread = np.abs(np.asarray(a.get("residuals") or [], dtype=float))
        how = "|residual| against the predicted value"
    judged = _spread_growth(level, spread, 1e-9 * max(abs(lo), abs(hi)))
    if judged is not None:
        out["spread"] = {"measure": how, **judged}
        if judged["grows"]:
            out["reasons"].append(f"the spread grows with the level ({how}: Spearman rho {judged['spearman_rho']:.2f}, "
                                  f"p {judged['p']:.2g}; mean spread {judged['lower_half']:.3g} in the lower half, "
                                  f"{judged['upper_half']:.3g} in the upper)")  # fmt: skip
    out["suggested"] = bool(out["reasons"]) and lo > 0
    if out["reasons"] and lo <= 0:
        out["reasons"].append(f"but a log scale needs values above 0 (the smallest is {lo:g})")
    return out


def _spread_growth(level: Any, spread: Any, tiny: float) -> dict[str, Any] | None:
    import numpy as np
    from scipy import stats

    if len(level) < SPREAD_MIN_CELLS or (spread > tiny).sum() < SPREAD_MIN_CELLS // 2 or np.ptp(level) <= tiny:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho, p = stats.spearmanr(level, spread, alternative="greater")
    if _nan(rho):
        return None
    order = np.argsort(level, kind="stable")
    half = len(order) // 2
    lower, upper = float(spread[order[:half]].mean()), float(spread[order[len(order) - half :]].mean())
    grows = bool(rho > 0 and p < ALPHA and upper >= SPREAD_GROWTH * lower)
    return {"spearman_rho": float(rho), "p": float(p), "lower_half": lower, "upper_half": upper, "grows": grows}


def _as_ratios(out: dict[str, Any]) -> None:
    """Effects on log10(y) read as factors: 10^q multiplies the response at a +1 level (or a
    level of a multi-level factor) and divides it at -1; the +1 level over the -1 level is
    10^(2q); 10^q0 is the geometric mean of the cell means."""

    def ratio(v: float | None) -> float | None:
        return None if v is None else float(10**v)

    for e in out.get("effects") or []:
        e["ratio"] = ratio(e["q"])
        e["ratio_hi_lo"] = ratio(2 * e["q"])
        e["ratio_ci"] = [ratio(e["ci"][0]), ratio(e["ci"][1])] if e.get("ci") else None
    if out.get("q0") is not None:
        out["q0_ratio"] = ratio(out["q0"])
    for e in ([out["mu"]] if out.get("mu") else []) + (out.get("level_effects") or []):
        e["ratio"] = ratio(e["effect"])
        e["ratio_ci"] = [ratio(e["ci"][0]), ratio(e["ci"][1])] if e.get("ci") else None


def _analyze_rows(design: Design, rows: Any, response: str, excluded: list[dict[str, Any]]) -> dict[str, Any]:
    points = design.points()
    used = set(int(p) for p in rows["point"].unique())
    missing = [_cell_label(design, pt) for p, pt in enumerate(points) if p not in used]
    for x in excluded:
        if x.get("point") is not None and 0 <= x["point"] < len(points):
            x["cell"] = _cell_label(design, points[x["point"]])
    if len(used) < 2:
        return {"kind": "none", "n": len(rows), "excluded": excluded, "cells_missing": missing,
                "note": f"no effect can be estimated (only {len(used)} usable cell, {len(rows)} runs)"}  # fmt: skip
    if design.kind == "sweep":
        out = sweep(design, rows, response)
    elif design.two_level:
        out = two_level(design, rows, response)
    else:
        out = multi_level(design, rows, response)
    out["excluded"] = excluded
    if missing:
        out["cells_missing"] = missing
    y = rows[response].astype(float)
    spread = float(y.max() - y.min())
    out["range"] = [float(y.min()), float(y.max())]
    if constant(y):
        out["note"] = f"no variation to allocate: every run gave the same value ({float(y.iloc[0]):.6g})"
        _no_percentages(out)
        out["constant"] = True
    else:
        out.setdefault("note", "")
        _percent_total(out)
    out["spread"] = spread
    _interactions(design, rows, response, out)
    if response.startswith("capacity") and "capacity_censored" in rows:
        cens = rows[rows["capacity_censored"].astype(str).isin(["above", "below"])]
        if len(cens):
            out["censored"] = cens["run_id"].astype(str).tolist()
    return out


def _interactions(design: Design, rows: Any, response: str, out: dict[str, Any]) -> None:
    """The significant interactions and the table of cell means (interactions.py)."""
    from .interactions import cell_means, significant_interactions

    if design.kind == "sweep" or out.get("constant"):
        return
    out["interactions"] = significant_interactions(out)
    out["cell_means"] = cell_means(design.keys, rows, response, error_sd(out))


def constant(y: Any) -> bool:
    """Every value the same, up to rounding: relative to the values, whatever their unit
    (a spread of 1e-7 is real variation in a response of 1e-6)."""
    top = float(y.abs().max())
    return float(y.max() - y.min()) <= 1e-12 * top


def _no_percentages(out: dict[str, Any]) -> None:
    """Nothing to allocate: a percentage of a total made of rounding errors means nothing."""
    for row in out.get("effects") or []:
        row["pct"] = None
    if out.get("error"):
        out["error"]["pct"] = None
    for row in (out.get("anova") or {}).get("table") or []:
        row["pct"] = None


def _percent_total(out: dict[str, Any]) -> None:
    """What the rows of the allocation of variation add up to; said when not 100 % (with
    unequal cell counts the sums of squares of the terms are not orthogonal)."""
    if out.get("effects"):
        pcts = [e["pct"] for e in out["effects"]] + [(out.get("error") or {}).get("pct")]
    else:
        pcts = [r.get("pct") for r in (out.get("anova") or {}).get("table") or []]
    if not pcts or any(v is None for v in pcts):
        return
    total = float(sum(pcts))
    out["pct_total"] = total
    if abs(total - 100) > 0.05:
        out["pct_note"] = (f"the percentages of variation add up to {total:.1f} %, not 100 %: the cells hold "
                           "unequal numbers of usable runs, so the terms' sums of squares (type II) overlap "
                           "or leave some variation unallocated")  # fmt: skip


def analyze(results_dir: str | Path, responses: list[str] | None = None, transform: str = "none") -> dict[str, Any]:
    design, df, man = load_results(results_dir)
    want = responses or design.responses
    ok = df[df["status"] == "ok"] if "status" in df else df
    summary = {
        "total": len(man["runs"]), "stored": len(df), "ok": len(ok),
        "failed": [{"run_id": r["run_id"], "error": r["error"]} for _, r in df[df["status"] != "ok"].iterrows()] if len(df) else [],
        "unsettled": ok[ok["settled"] == False]["run_id"].tolist() if "settled" in ok else [],  # noqa: E712
        "missing": [r for r in man["runs"] if r not in set(df["run_id"])] if len(df) else list(man["runs"]),
        "code_hashes": sorted(set(df["code_hash"])) if len(df) else [],
    }  # fmt: skip
    result = {"design": design.summary(), "runs": summary, "responses": {}}
    for r in want:
        if r not in df.columns:
            result["responses"][r] = {"kind": "none", "n": 0, "note": f"no response {r!r} in the table"}
            continue
        result["responses"][r] = analyze_frame(design, df, r, transform)
    result["transform"] = "log10" if transform == "log" else "none"
    return result


def mixed_code(hashes: list[str]) -> str:
    """The warning for a table whose runs come from more than one version of the code
    (an experiment resumed after the emulator, microcode or run code changed)."""
    return (f"warning: the runs come from {len(hashes)} versions of the code ({', '.join(hashes)}): "
            "the effects mix the change of code with the factors; run the design again into a new "
            "results directory")  # fmt: skip


def to_json(result: dict[str, Any]) -> str:
    from .store import _clean

    return json.dumps(_clean(result), indent=1, allow_nan=False)


def format_text(result: dict[str, Any]) -> str:
    """The analysis for people: per response, effects or ANOVA terms with % of variation."""
    d = result["design"]
    runs = result["runs"]
    lines = [f"{d['name']}: {d['kind']} design, {d['points']} points x {d['replications']} replications "
             f"= {d['runs']} runs; {runs['ok']} ok, {len(runs['failed'])} failed, "
             f"{len(runs['unsettled'])} not settled, {len(runs['missing'])} missing"]  # fmt: skip
    if len(runs.get("code_hashes") or []) > 1:
        lines.append(mixed_code(runs["code_hashes"]))
    if d.get("resolution"):
        lines.append(f"resolution {d['resolution']}; defining relation {' = '.join(d['defining_relation'])}")
    for name, a in result["responses"].items():
        logged = a.get("transform") == "log10"
        lines += ["", f"== {'log10 of ' if logged else ''}{name} ({a.get('kind')}, {a.get('n', 0)} runs)"]
        if a.get("note"):
            lines.append(f"   {a['note']}")
        lines += _multiplicative_lines(a)
        if a.get("effects") and not a.get("constant"):  # a constant response: the note says it all
            lines.append(f"   mean q0 = {a['q0']:.4g}{_ratio_text(a.get('q0_ratio'), ' (10^q0 = ', ')')}; "
                         f"{a.get('method', '')}")  # fmt: skip
            if logged:
                lines.append("   an effect multiplies the response by 10^q at +1 and divides it by 10^q at -1 "
                             "(+1 over -1: 10^(2q))")  # fmt: skip
            lines.append(f"   {'effect':<10} {'q':>11} {'95% CI':>25} {'% var':>7}"
                         + (f" {'10^q':>9} {'95% CI of 10^q':>21}" if logged else ""))  # fmt: skip
            for e in a["effects"]:
                ci = f"[{e['ci'][0]:.4g}, {e['ci'][1]:.4g}]" if e["ci"] else "-"
                pct = f"{e['pct']:.1f}" if e["pct"] is not None else "-"
                alias = f"  = {' = '.join(e['aliases'])}" if e.get("aliases") else ""
                factor = f" {e['ratio']:>9.4g} {_ci_text(e.get('ratio_ci')):>21}" if logged else ""
                lines.append(f"   {e['effect']:<10} {e['q']:>11.4g} {ci:>25} {pct:>7}{factor}"
                             f"{' *' if e['significant'] else ''}{alias}")  # fmt: skip
            if a.get("not_estimable"):
                lines.append(f"   not estimable (cells missing): {', '.join(a['not_estimable'])}")
            err = a["error"]
            if err.get("pct") is not None:
                lines.append(f"   {'error':<10} {'':>11} {'':>25} {err['pct']:>7.1f}")
            if a.get("pct_note"):
                lines.append(f"   {a['pct_note']}")
        elif a.get("anova", {}).get("table"):
            lines.append(f"   model: {a.get('model', '')}")
            for r in a["anova"]["table"]:
                p = f"p={r['p']:.3g}" if r["p"] is not None else ""
                pct = f"{r['pct']:>6.1f} %" if r.get("pct") is not None else f"{'-':>6}  "
                lines.append(f"   {r['term']:<24} SS {r['sum_sq']:>12.4g} {pct}  {p}")
            if a.get("pct_note"):
                lines.append(f"   {a['pct_note']}")
        lines += _level_effect_lines(a)
        lines += _interaction_lines(name, a)
        for g, s in (a.get("groups") or {}).items():
            if "slope" in s:
                nl = " NON-LINEAR" if s.get("nonlinear") else ""
                r2 = f"{s['r2']:.3f}" if s.get("r2") is not None else "-"
                lines.append(f"   {g}: slope {s['slope']:.4g} per unit, R^2 {r2}{nl}")
        if a.get("censored"):
            lines.append(f"   censored at the search limit (lower bounds; effects involving them are "
                         f"understated): {', '.join(a['censored'])}")  # fmt: skip
        lines += _excluded_lines(a)
    return "\n".join(lines)


def _interaction_lines(name: str, a: dict[str, Any]) -> list[str]:
    """The significant interactions in words, and the cell means with their CIs."""
    from .interactions import interaction_sentence

    out = []
    said = interaction_sentence(name, a.get("interactions") or [])
    if said:
        out.append(f"   {said}")
    if a.get("interactions") and a.get("cell_means"):
        out.append("   cell means (95 % CI from the experimental error):")
        for c in a["cell_means"]:
            lv = " ".join(f"{k}={v}" for k, v in c["levels"].items())
            out.append(f"   {lv:<32} n={c['n']:<3} {c['mean']:>11.4g} {_ci_text(c['ci']):>25}")
    return out


def _ratio_text(v: float | None, before: str = "", after: str = "") -> str:
    return "" if v is None else f"{before}{v:.4g}{after}"


def _ci_text(ci: list[float] | None) -> str:
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "-"


def multiplicative_warning(a: dict[str, Any]) -> str | None:
    """The sentence that says the effects look multiplicative, with the figures; None when
    they do not (or when the analysis is already on the log scale)."""
    check = a.get("multiplicative") or {}
    if not check.get("reasons") or a.get("transform") == "log10":
        return None
    advice = ("; consider --transform log (effects as ratios)" if check.get("suggested")
              else "")  # fmt: skip
    return "warning: the effects may be multiplicative, not additive: " + "; ".join(check["reasons"]) + advice


def _multiplicative_lines(a: dict[str, Any]) -> list[str]:
    warn = multiplicative_warning(a)
    out = [f"   {warn}"] if warn else []
    if a.get("transform") == "log10" and a.get("range"):
        out.append(f"   analysed on log10 of the response (range {a['range'][0]:.4g} .. {a['range'][1]:.4g}, "
                   f"geometric mean {a.get('geometric_mean', float('nan')):.4g})")  # fmt: skip
    return out


def _level_effect_lines(a: dict[str, Any]) -> list[str]:
    """Multi-level effects per level with their CIs (or why there are none)."""
    out = []
    if a.get("level_effects"):
        logged = a.get("transform") == "log10"
        err = a.get("error") or {}
        src = (f"95% CI from s_e = {err['s_e']:.4g} ({err['dof']} dof)" if err.get("s_e") is not None
               else "no CI")  # fmt: skip
        out.append(f"   effects (level mean minus mu; interactions: what the cell means add to the main "
                   f"effects); {src}")  # fmt: skip
        if logged:
            out.append("   on log10: a level multiplies the geometric mean 10^mu by 10^effect")
        out.append(f"   {'term':<10} {'level':<22} {'effect':>11} {'95% CI':>25}"
                   + (f" {'10^effect':>9} {'95% CI of 10^effect':>21}" if logged else ""))  # fmt: skip
        for e in [a["mu"]] + a["level_effects"]:
            factor = f" {e['ratio']:>9.4g} {_ci_text(e.get('ratio_ci')):>21}" if logged else ""
            out.append(f"   {e['term']:<10} {e['level']:<22} {e['effect']:>11.4g} {_ci_text(e['ci']):>25}"
                       f"{factor}{' *' if e.get('significant') else ''}")  # fmt: skip
    if a.get("effects_note"):
        out.append(f"   {a['effects_note']}")
    return out


def _excluded_lines(a: dict[str, Any]) -> list[str]:
    """Excluded runs; those that did not settle with their cell and value; empty cells."""
    out = []
    excluded = a.get("excluded") or []
    unsettled = [x for x in excluded if "value" in x]
    others = [x["run_id"] for x in excluded if "value" not in x]
    if others:
        out.append(f"   excluded: {', '.join(others)}")
    if unsettled:
        out.append("   not settled (left out): " + ", ".join(
            f"{x['run_id']} [{x.get('cell', '?')}] {x['value']:.4g}" for x in unsettled))  # fmt: skip
    if a.get("cells_missing"):
        cond = "" if a.get("kind") == "none" else (" -- the effects are estimated from the other cells "
                                                   "only (conditional on their levels)")  # fmt: skip
        out.append(f"   cells with no usable run: {'; '.join(a['cells_missing'])}{cond}")
    return out
