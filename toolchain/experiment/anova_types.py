"""Type II and type III sums of squares of a linear model on numeric columns.

Each term is one column (a two-level design's coded effect) named by the set of factors
it involves; term S contains term T when T's factors are a subset of S's.

    type II  SS(T) = RSS(terms not containing T) - RSS(those + T)
    type III SS(T) = RSS(every term but T)      - RSS(every term)

(Both with the intercept.)  With balanced data the columns are orthogonal and the two
agree; with runs missing, type II respects marginality (a main effect is tested with
its own interactions out of the model), type III does not.  F = (SS / 1) / (RSS / dof)
against the full model's residual, p from the F distribution.
"""

from __future__ import annotations

import math
from typing import Any


def _rss(x: Any, y: Any) -> float:
    import numpy as np

    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    r = y - x @ coef
    return float(r @ r)


def _design(y: Any, cols: list[Any], keep: list[int]) -> Any:
    import numpy as np

    return np.column_stack([np.ones(len(y))] + [cols[j] for j in keep])


def sums_of_squares(y: Any, cols: list[Any], factors: list[frozenset[str]],
                    names: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """The ANOVA rows (term, df, sum_sq, F, p; the last row "error") of type II and of
    type III for the columns `cols`, each involving the factors `factors[j]`."""
    from scipy import stats

    n = len(cols)
    full = _rss(_design(y, cols, list(range(n))), y)
    dof = len(y) - n - 1
    mse = full / dof if dof > 0 else math.nan

    def row(name: str, ss: float) -> dict[str, Any]:
        ss = max(ss, 0.0)
        f = ss / mse if mse > 0 else None
        p = float(stats.f.sf(f, 1, dof)) if f is not None else None
        return {"term": name, "df": 1.0, "sum_sq": ss, "F": f, "p": p}

    two, three = [], []
    for j, term in enumerate(factors):
        base = [i for i in range(n) if i != j and not term <= factors[i]]
        two.append(row(names[j], _rss(_design(y, cols, base), y) - _rss(_design(y, cols, base + [j]), y)))
        others = [i for i in range(n) if i != j]
        three.append(row(names[j], _rss(_design(y, cols, others), y) - full))
    err = {"term": "error", "df": float(dof), "sum_sq": full, "F": None, "p": None}
    return two + [err], three + [dict(err)]
