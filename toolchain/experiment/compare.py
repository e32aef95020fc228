"""Two result sets side by side: each effect with its CI in both, the difference with
its CI, and the effects that differ flagged.

    npk experiment compare RESULTS_A RESULTS_B [--response R]... [--json]

and in the report of a design with `compare: <results directory>`.  Both sets must have
the same factors (keys and levels).  A two-level design's effects are q (half the
difference between +1 and -1); a multi-level design's are per level (level mean minus
mu).  The difference B - A has the standard deviation sqrt(sd_A^2 + sd_B^2), each sd read
back from its 95 % CI (half-width / t[0.975; dof]); its CI uses the smaller of the two
error degrees of freedom (conservative).  An effect differs when that CI excludes 0;
where either side has no CI (no replications), nothing is flagged and the row says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .analysis import analyze, load_results

ALPHA = 0.05


class CompareError(ValueError):
    """The two result sets cannot be compared (different factors, nothing in common)."""


def _t(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - ALPHA / 2, dof))


def _dof(a: dict[str, Any]) -> int | None:
    err = a.get("error") or {}
    return int(err["dof"]) if err.get("dof") else None


def _effects(a: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {q, ci, pct, significant} of an analysis (two-level or per level)."""
    out = {}
    for e in a.get("effects") or []:
        out[e["effect"]] = {"q": e["q"], "ci": e.get("ci"), "pct": e.get("pct"), "significant": e.get("significant")}
    for e in a.get("level_effects") or []:
        out[f"{e['term']}: {e['level']}"] = {"q": e["effect"], "ci": e.get("ci"), "pct": None,
                                             "significant": e.get("significant")}  # fmt: skip
    return out


def _sd(e: dict[str, Any], dof: int | None) -> float | None:
    if not e.get("ci") or not dof:
        return None
    return (e["ci"][1] - e["ci"][0]) / 2 / _t(dof)


def compare_response(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per effect in both analyses: the two sides, the difference, its CI, differs."""
    ea, eb = _effects(a), _effects(b)
    da, db = _dof(a), _dof(b)
    rows = []
    for name in [n for n in ea if n in eb]:
        x, y = ea[name], eb[name]
        diff = y["q"] - x["q"]
        sa, sb = _sd(x, da), _sd(y, db)
        if sa is None or sb is None or da is None or db is None:
            ci, differs = None, None
        else:
            half = _t(min(da, db)) * math.sqrt(sa**2 + sb**2)
            ci = [diff - half, diff + half]
            differs = bool(ci[0] > 0 or ci[1] < 0)
        rows.append({"effect": name, "a": x, "b": y, "difference": diff, "ci": ci, "differs": differs,
                     "significance_changed": bool(x.get("significant")) != bool(y.get("significant"))})  # fmt: skip
    return rows


def _same_factors(da: Any, db: Any, pa: Path, pb: Path) -> None:
    fa = {f.key: [lv.label for lv in f.levels] for f in da.factors}
    fb = {f.key: [lv.label for lv in f.levels] for f in db.factors}
    if fa != fb:
        raise CompareError(f"cannot compare {pa} with {pb}: the factors differ ({_factors(fa)} against "
                           f"{_factors(fb)})")  # fmt: skip


def _factors(f: dict[str, list[str]]) -> str:
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in f.items())


def label_of(path: Path, other: Path) -> str:
    """A short name for a results directory: its own name, or its path when both share it."""
    return path.name if path.name != other.name else str(path)


def compare(a_dir: str | Path, b_dir: str | Path, responses: list[str] | None = None) -> dict[str, Any]:
    """The comparison of two results directories (see the module docstring)."""
    pa, pb = Path(a_dir), Path(b_dir)
    for p in (pa, pb):
        if not (p / "experiment.json").is_file():
            raise CompareError(f"{p}: not a results directory (no experiment.json)")
    design_a, _, man_a = load_results(pa)
    design_b, _, man_b = load_results(pb)
    _same_factors(design_a, design_b, pa, pb)
    want = responses or [r for r in design_a.responses if r in design_b.responses]
    if not want:
        raise CompareError(f"{pa} and {pb} have no response in common")
    ra, rb = analyze(pa, want), analyze(pb, want)
    out: dict[str, Any] = {"a": {"path": str(pa), "label": label_of(pa, pb), "quick": bool(man_a.get("quick")),
                                 "code_hash": man_a.get("code_hash"), "design": design_a.name},
                           "b": {"path": str(pb), "label": label_of(pb, pa), "quick": bool(man_b.get("quick")),
                                 "code_hash": man_b.get("code_hash"), "design": design_b.name},
                           "responses": {}, "notes": []}  # fmt: skip
    if out["a"]["quick"] != out["b"]["quick"]:
        out["notes"].append("one result set is a --quick run and the other is not: short runs can change the "
                            "effects (latency above all)")  # fmt: skip
    if out["a"]["code_hash"] != out["b"]["code_hash"]:
        out["notes"].append(f"the two sets come from different code ({out['a']['code_hash']} and "
                            f"{out['b']['code_hash']}): a difference may be the change of code")  # fmt: skip
    for r in want:
        a, b = ra["responses"][r], rb["responses"][r]
        out["responses"][r] = {"rows": compare_response(a, b) if a.get("n") and b.get("n") else [],
                               "note": " ".join(x for x in (a.get("note"), b.get("note")) if x)}  # fmt: skip
    return out


def _ci(ci: list[float] | None) -> str:
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "-"


def _pct(v: float | None) -> str:
    return f"{v:.3g}" if v is not None else "-"


def format_compare(c: dict[str, Any]) -> str:
    lines = [f"A = {c['a']['path']} ({c['a']['design']}), B = {c['b']['path']} ({c['b']['design']})"]
    lines += [f"note: {n}" for n in c["notes"]]
    for r, x in c["responses"].items():
        lines += ["", f"== {r}"]
        if x["note"]:
            lines.append(f"   {x['note']}")
        if not x["rows"]:
            lines.append("   nothing to compare")
            continue
        lines.append(f"   {'effect':<18} {'q A':>12} {'95% CI':>22} {'% A':>5} {'q B':>12} {'95% CI':>22} "
                     f"{'% B':>5} {'B - A':>10} {'95% CI':>22}")  # fmt: skip
        for row in x["rows"]:
            a, b = row["a"], row["b"]
            flag = "  DIFFERS" if row["differs"] else ("" if row["differs"] is not None else "  (no CI)")
            lines.append(f"   {row['effect']:<18} {a['q']:>12.4g} {_ci(a['ci']):>22} {_pct(a['pct']):>5} "
                         f"{b['q']:>12.4g} {_ci(b['ci']):>22} {_pct(b['pct']):>5} {row['difference']:>10.4g} "
                         f"{_ci(row['ci']):>22}{flag}")  # fmt: skip
    return "\n".join(lines)
