"""Interactions of an analysis: which are significant, and the table of cell means.

A significant interaction means a factor's effect depends on the level of another (or,
for a three-factor term, on the combination of two others): its main effect alone then
misleads, and the cell means are what to read.  Two-level designs judge an interaction
by the CI of its effect q; multi-level designs by the ANOVA's F test (p < ALPHA).

Cell means carry a 95 % CI from the experimental error of the whole design (s_e with its
degrees of freedom, pooled over the cells): mean -+ t[0.975; dof] s_e / sqrt(n of the
cell); without error degrees of freedom, no CI.
"""

from __future__ import annotations

import math
from typing import Any

ALPHA = 0.05


def significant_interactions(a: dict[str, Any]) -> list[dict[str, Any]]:
    """[{term, factors, how}] of the significant interactions, strongest first."""
    out = []
    for e in a.get("effects") or []:
        if len(e["effect"]) > 1 and e.get("significant") and not e.get("aliases"):
            out.append({"term": e["effect"], "factors": list(e["effect"]), "pct": e.get("pct"),
                        "how": f"q = {e['q']:.4g}, 95 % CI [{e['ci'][0]:.4g}, {e['ci'][1]:.4g}]"})  # fmt: skip
    if not a.get("effects"):
        for r in (a.get("anova") or {}).get("table") or []:
            if " x " in r["term"] and r.get("p") is not None and r["p"] < ALPHA:
                out.append({"term": r["term"], "factors": r["term"].split(" x "), "pct": r.get("pct"),
                            "how": f"F = {r['F']:.4g}, p = {r['p']:.3g}"})  # fmt: skip
    return sorted(out, key=lambda t: -(t["pct"] or 0.0))


def cell_means(keys: list[str], df: Any, response: str, error: tuple[float, int] | None) -> list[dict[str, Any]]:
    """One row per cell (combination of the factors' levels) with usable runs: its levels,
    n, mean, the 95 % CI of the mean and the runs' own standard deviation."""
    from scipy import stats

    t = float(stats.t.ppf(1 - ALPHA / 2, error[1])) if error and error[1] > 0 else None
    rows = []
    for lv, g in df.groupby([df[k].astype(str) for k in keys], sort=False):
        y = g[response].astype(float)
        n = len(y)
        mean = float(y.mean())
        half = t * error[0] / math.sqrt(n) if t is not None and error else None
        rows.append({"levels": dict(zip(keys, lv if isinstance(lv, tuple) else (lv,), strict=True)), "n": n,
                     "mean": mean, "ci": [mean - half, mean + half] if half is not None else None,
                     "sd": float(y.std(ddof=1)) if n > 1 else None})  # fmt: skip
    return rows


def interaction_sentence(response: str, inter: list[dict[str, Any]]) -> str:
    """What the significant interactions mean, in one paragraph (empty when none)."""
    if not inter:
        return ""
    parts = []
    for t in inter:
        f = t["factors"]
        dep = (f"the effect of {f[0]} depends on the level of {f[1]}" if len(f) == 2
               else f"the effect of {f[0]} x {f[1]} depends on the level of {' and '.join(f[2:])}")  # fmt: skip
        pct = f", {t['pct']:.3g} % of the variation" if t.get("pct") is not None else ""
        parts.append(f"{t['term']} ({t['how']}{pct}): {dep}")
    return (f"Significant interaction{'s' if len(inter) > 1 else ''} on {response}: " + "; ".join(parts)
            + ". A main effect involved in a significant interaction is an average over the other factor's "
            "levels: read the cell means (and the interaction plots) instead.")  # fmt: skip
