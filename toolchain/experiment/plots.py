"""Figures for the report (matplotlib, Agg backend, PNG files).

Each function writes one PNG and returns its path: effects with CIs, allocation of
variation, residual checks (normal QQ, residuals vs predicted), main-effect and
interaction plots, sweeps (response against the swept factor with the linear fit, to
see non-linearity), and throughput over time per run with the warm-up cut.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from .design import Design

DPI = 96
SERIES_COLUMNS = 4  # panels a row of the per-run throughput grid (about 260 px each at DPI)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)
    return path


def _pct_label(v: float) -> str:
    return f"{v:.3g} %" if v >= 0.01 else ("0 %" if v == 0 else f"{v:.1g} %")


def effects(a: dict[str, Any], response: str, path: Path, log_pct: bool = False) -> Path:
    """Effects q with their CIs (left) and the percentage of variation (right), each bar
    labelled with its value (when one effect explains nearly everything the others'
    bars are too short to see); `log_pct` draws the percentages on a log scale."""
    plt = _plt()
    rows = a["effects"]
    names = [e["effect"] for e in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, max(2.5, 0.35 * len(rows) + 1.2)))
    ys = range(len(rows))[::-1]
    err = [[e["q"] - e["ci"][0] for e in rows], [e["ci"][1] - e["q"] for e in rows]] if all(e["ci"] for e in rows) else None
    ax1.barh(list(ys), [e["q"] for e in rows], xerr=err, color=["#3a7" if e["q"] >= 0 else "#c54" for e in rows],
             capsize=3)  # fmt: skip
    ax1.axvline(0, color="k", lw=0.8)
    ax1.set_yticks(list(ys), names)
    ax1.set_xlabel(f"effect q on {response}" + (" (95 % CI)" if err else ""))
    pct = [e["pct"] or 0.0 for e in rows] + [a["error"].get("pct") or 0.0]
    ypos = list(range(len(pct)))[::-1]
    ax2.barh(ypos, pct, color=["#47a"] * len(rows) + ["#999"])
    ax2.set_yticks(ypos, names + ["error"])
    if log_pct:
        tiny = min([v for v in pct if v > 0] or [1.0])
        ax2.set_xscale("log")
        ax2.set_xlim(max(tiny / 3, 1e-6), 300)
        ax2.set_xlabel("% of variation (log scale)")
    else:
        ax2.set_xlim(0, 118)
        ax2.set_xlabel("% of variation")
    for y, v in zip(ypos, pct, strict=True):
        at = v if v > 0 else (ax2.get_xlim()[0] if log_pct else 0)
        ax2.annotate(_pct_label(v), (at, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    return _save(fig, path)


def residuals(a: dict[str, Any], response: str, path: Path) -> Path:
    """Normal QQ plot of the residuals and residuals against predicted values."""
    from scipy import stats

    plt = _plt()
    res = a["residuals"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    if len(res) >= 3 and max(res) - min(res) > 0:
        (osm, osr), (slope, icpt, _r) = stats.probplot(res, dist="norm")
        ax1.plot(osm, osr, "o", ms=4, color="#47a")
        ax1.plot(osm, [slope * x + icpt for x in osm], "k-", lw=0.8)
    else:
        ax1.text(0.5, 0.5, "residuals all zero", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_xlabel("normal quantile")
    ax1.set_ylabel("residual")
    ax1.set_title("normal QQ plot", fontsize=10)
    ax2.plot(a["fitted"], res, "o", ms=4, color="#47a")
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xlabel(f"predicted {response}")
    ax2.set_ylabel("residual")
    ax2.set_title("residuals vs predicted", fontsize=10)
    return _save(fig, path)


def level_means(design: Design, df: Any, response: str,
                error: tuple[float, int] | None) -> dict[str, list[tuple[str, float, float]]]:  # fmt: skip
    """Per factor, (level, mean response, half-width of its 95 % CI) at each level.

    The CI is that of the model's level mean (Jain: the mean plus the level's effect):
    t[0.975; dof] s_e / sqrt(n at the level), with the experimental error (s_e, dof) of
    the whole design; the spread of the runs at a level is not used, since it holds the
    other factors' effects.  No error degrees of freedom: half-width 0 (no CI)."""
    from scipy import stats

    t = float(stats.t.ppf(0.975, error[1])) if error and error[1] > 0 else 0.0
    out: dict[str, list[tuple[str, float, float]]] = {}
    for f in design.factors:
        out[f.key] = []
        for lv in f.levels:
            vals = df[df[f.key].astype(str) == lv.label][response].astype(float)
            n = len(vals)
            half = t * error[0] / math.sqrt(n) if error and t and n else 0.0
            out[f.key].append((lv.label, float(vals.mean()) if n else math.nan, half))
    return out


def main_effects(design: Design, df: Any, response: str, path: Path,
                 error: tuple[float, int] | None = None, label: str | None = None) -> Path:  # fmt: skip
    """Mean response at each level of each factor, with the 95 % CI of level_means
    (`label` names the axis when the column holds a transform of the response)."""
    plt = _plt()
    k = len(design.factors)
    fig, axes = plt.subplots(1, k, figsize=(max(4, 2.6 * k), 3.2), sharey=True, squeeze=False)
    means = level_means(design, df, response, error)
    for ax, f in zip(axes[0], design.factors, strict=True):
        xs = list(range(len(f.levels)))
        ax.errorbar(xs, [m for _, m, _ in means[f.key]], yerr=[h for _, _, h in means[f.key]], fmt="o-",
                    capsize=3, color="#47a")  # fmt: skip
        ax.set_xticks(xs, [lv.label for lv in f.levels], rotation=30 if len(f.levels) > 4 else 0)
        ax.set_title(f"{f.key}: {f.name}", fontsize=9)
    axes[0][0].set_ylabel(label or response)
    return _save(fig, path)


def interactions(design: Design, df: Any, response: str, path: Path, label: str | None = None) -> Path:
    """Cell means of every pair of factors: non-parallel lines are interactions."""
    plt = _plt()
    pairs = list(itertools.combinations(design.factors, 2))[:6]
    fig, axes = plt.subplots(1, len(pairs), figsize=(max(4, 3.2 * len(pairs)), 3.3), squeeze=False)
    for ax, (fa, fb) in zip(axes[0], pairs, strict=True):
        xs = list(range(len(fa.levels)))
        for lb in fb.levels:
            ys = []
            for la in fa.levels:
                sel = df[(df[fa.key].astype(str) == la.label) & (df[fb.key].astype(str) == lb.label)]
                ys.append(float(sel[response].astype(float).mean()) if len(sel) else math.nan)
            ax.plot(xs, ys, "o-", label=f"{fb.key}={lb.label}")
        ax.set_xticks(xs, [lv.label for lv in fa.levels], rotation=30 if len(fa.levels) > 4 else 0)
        ax.set_xlabel(fa.key)
        ax.set_title(f"{fa.key} x {fb.key}", fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(label or response)
    return _save(fig, path)


def sweep(design: Design, df: Any, a: dict[str, Any], response: str, path: Path,
          reference: dict[str, list[tuple[float, float]]] | None = None) -> Path:  # fmt: skip
    """The response against the swept factor per group, with each group's straight-line
    fit (dashed) and its residuals below: curvature there is non-linearity."""
    import numpy as np

    plt = _plt()
    assert design.sweep is not None
    others = [k for k in design.keys if k != design.sweep]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=[2, 1])
    parts = df.groupby([df[k].astype(str) for k in others]) if others else [((), df)]
    for key, g in parts:
        label = ", ".join(f"{k}={v}" for k, v in zip(others, key if isinstance(key, tuple) else (key,), strict=True)) or "all"
        x = g[design.sweep].astype(float).to_numpy()
        y = g[response].astype(float).to_numpy()
        line = ax1.plot(x, y, "o", ms=4, label=label)[0]
        fit = (a.get("groups") or {}).get(label, {})
        if "slope" in fit:
            xs = np.linspace(x.min(), x.max(), 50)
            ax1.plot(xs, fit["slope"] * xs + fit["intercept"], "--", color=line.get_color(), lw=1)
            ax2.plot(x, y - (fit["slope"] * x + fit["intercept"]), "o", ms=4, color=line.get_color())
    for name, pts in (reference or {}).items():
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], "k:", lw=1, label=name)
    ax1.set_ylabel(response)
    ax1.legend(fontsize=8)
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_ylabel("residual of the line")
    ax2.set_xlabel(f"{design.sweep}: {design.factor(design.sweep).name}")
    return _save(fig, path)


def series_one(rec: dict[str, Any], path: Path) -> Path:
    """Throughput over time of one run, the warm-up cut shaded."""
    plt = _plt()
    s = rec["series"]
    w = s["window_us"]
    fig, ax = plt.subplots(figsize=(7, 2.8))
    ts = [(k + 0.5) * w / 1000 for k in range(len(s["throughput_mbps"]))]
    ax.plot(ts, s["throughput_mbps"], lw=0.9, color="#47a")
    ax.axvspan(0, s["cut"] * w / 1000, color="#c54", alpha=0.15, label="warm-up (MSER-5)")
    ax.set_xlabel("emulated time (ms)")
    ax.set_ylabel("output (Mb/s)")
    lv = ", ".join(f"{k}={v}" for k, v in rec["levels"].items())
    ax.set_title(f"{rec['run_id']}  {lv}  seed {rec['seed']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def series_grid(records: list[dict[str, Any]], path: Path, limit: int = 48) -> Path:
    """Small multiples: throughput over time of every run (up to `limit`)."""
    plt = _plt()
    recs = [r for r in records if r.get("status") == "ok" and r.get("series")][:limit]
    n = max(1, len(recs))
    cols = min(SERIES_COLUMNS, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11 / SERIES_COLUMNS * cols, 2.4 * rows), squeeze=False,
                             sharey=True)  # fmt: skip
    for ax, rec in zip(axes.flat, recs, strict=False):
        s = rec["series"]
        w = s["window_us"]
        ax.plot([(k + 0.5) * w / 1000 for k in range(len(s["throughput_mbps"]))], s["throughput_mbps"],
                lw=0.7, color="#47a" if rec["responses"].get("settled") else "#c54")  # fmt: skip
        ax.axvspan(0, s["cut"] * w / 1000, color="#c54", alpha=0.15)
        ax.set_title(rec["run_id"] + " " + ",".join(str(v) for v in rec["levels"].values()), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(recs) :]:
        ax.axis("off")
    fig.supxlabel("emulated time (ms); shaded: warm-up cut; red: not settled", fontsize=9)
    fig.supylabel("output Mb/s", fontsize=9)
    return _save(fig, path)


def comparison(rows: list[dict[str, Any]], path: Path) -> Path:
    """Seed 003's % of variation beside npkit's, per effect and response."""
    import numpy as np

    plt = _plt()
    effects_ = [r["effect"] for r in rows]
    cols = [k for k in rows[0] if k != "effect"]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(len(effects_))
    width = 0.8 / len(cols)
    for j, c in enumerate(cols):
        vals = [r[c] or 0.0 for r in rows]
        xs = x + j * width - 0.4 + width / 2
        ax.bar(xs, vals, width, label=c)
        for xv, v in zip(xs, vals, strict=True):  # a bar of 0.03 % is invisible: its value is not
            if v > 0:
                ax.annotate(_pct_label(v).removesuffix(" %"), (xv, v), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6, rotation=90)  # fmt: skip
    ax.set_xticks(x, effects_)
    ax.set_ylim(0, 118)
    ax.set_ylabel("% of variation (bars labelled)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _pair_panel(ax: Any, design: Design, df: Any, response: str, fa: Any, fb: Any,
                error: tuple[float, int] | None) -> None:  # fmt: skip
    """Means of `response` over fa's levels, one line per level of fb, with 95 % CIs."""
    from scipy import stats

    t = float(stats.t.ppf(0.975, error[1])) if error and error[1] > 0 else 0.0
    xs = list(range(len(fa.levels)))
    for j, lb in enumerate(fb.levels):
        ys, hs = [], []
        for la in fa.levels:
            sel = df[(df[fa.key].astype(str) == la.label) & (df[fb.key].astype(str) == lb.label)]
            n = len(sel)
            ys.append(float(sel[response].astype(float).mean()) if n else math.nan)
            hs.append(t * error[0] / math.sqrt(n) if error and t and n else 0.0)
        shift = (j - (len(fb.levels) - 1) / 2) * 0.04  # keep the error bars of the lines apart
        ax.errorbar([x + shift for x in xs], ys, yerr=hs, fmt="o-", capsize=3, label=f"{fb.key}={lb.label}")
    ax.set_xticks(xs, [lv.label for lv in fa.levels])
    ax.set_xlabel(f"{fa.key}: {fa.name}", fontsize=8)
    ax.legend(fontsize=7)


def interaction_terms(design: Design, df: Any, response: str, terms: list[list[str]], path: Path,
                      error: tuple[float, int] | None = None, label: str | None = None) -> Path:  # fmt: skip
    """Interaction plots of the given terms: a two-factor term is one panel (cell means
    over the first factor, a line per level of the second, 95 % CIs from the experimental
    error); a three-factor term is one such panel per level of its third factor (the
    two-factor interaction that changes with it).  Lines that are not parallel interact."""
    plt = _plt()
    panels: list[tuple[str, Any, Any, Any]] = []
    for term in terms:
        fs = [design.factor(k) for k in term]
        if len(fs) == 2:
            panels.append((f"{term[0]} x {term[1]}", df, fs[0], fs[1]))
        elif len(fs) == 3:
            for lv in fs[2].levels:
                sub = df[df[fs[2].key].astype(str) == lv.label]
                panels.append((f"{'x'.join(term)}: {term[0]} x {term[1]} at {fs[2].key}={lv.label}", sub, fs[0], fs[1]))
    panels = panels[:6]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    # each panel on its own scale: a small interaction beside a large one stays visible
    fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 3.3 * rows), squeeze=False)
    for ax, (title, sub, fa, fb) in zip(axes.flat, panels, strict=False):
        _pair_panel(ax, design, sub, response, fa, fb, error)
        ax.set_title(title, fontsize=9)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    for r in range(rows):
        axes[r][0].set_ylabel(label or response)
    return _save(fig, path)


def compare_effects(rows: list[dict[str, Any]], labels: tuple[str, str], response: str, path: Path) -> Path:
    """Each effect of two result sets side by side with its 95 % CI (a cross where one
    differs: the CI of the difference excludes 0)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.45 * len(rows) + 1.2)))
    ys = list(range(len(rows)))[::-1]
    for side, (key, colour, dy) in enumerate((("a", "#47a", 0.15), ("b", "#c54", -0.15))):
        qs = [r[key]["q"] for r in rows]
        err = ([[r[key]["q"] - r[key]["ci"][0] for r in rows], [r[key]["ci"][1] - r[key]["q"] for r in rows]]
               if all(r[key]["ci"] for r in rows) else None)  # fmt: skip
        ax.errorbar(qs, [y + dy for y in ys], xerr=err, fmt="o", color=colour, capsize=3, label=labels[side])
    for y, r in zip(ys, rows, strict=True):
        if r["differs"]:
            ax.annotate("differs", (max(r["a"]["q"], r["b"]["q"]), y), xytext=(6, -3), textcoords="offset points",
                        fontsize=7, color="#a00")  # fmt: skip
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(ys, [r["effect"] for r in rows])
    ax.set_xlabel(f"effect on {response} (95 % CI)")
    ax.legend(fontsize=8)
    return _save(fig, path)
