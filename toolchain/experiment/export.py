"""The effects of an analysis as a table: rows for pandas, CSV and LaTeX (beside JSON).

One row per response and effect: a two-level design's effects q with their 95 % CI, %
of variation and significance; a multi-level design's effects per level (term, level);
the ANOVA's terms when a response has neither.

    npk experiment analyze RESULTS_DIR --format csv|latex|json|text
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

COLUMNS = ["response", "term", "level", "effect", "ci_low", "ci_high", "pct_variation", "significant", "p"]


def effect_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of every response of `analyze`'s result (COLUMNS, None where a value has no meaning)."""
    out = []
    for name, a in result["responses"].items():
        anova = {r["term"]: r for r in (a.get("anova") or {}).get("table") or []}
        for e in a.get("effects") or []:
            ci = e.get("ci") or [None, None]
            out.append({"response": name, "term": e["effect"], "level": None, "effect": e["q"], "ci_low": ci[0],
                        "ci_high": ci[1], "pct_variation": e.get("pct"), "significant": e.get("significant"),
                        "p": anova.get(e["effect"], {}).get("p")})  # fmt: skip
        for e in a.get("level_effects") or []:
            ci = e.get("ci") or [None, None]
            out.append({"response": name, "term": e["term"], "level": e["level"], "effect": e["effect"],
                        "ci_low": ci[0], "ci_high": ci[1], "pct_variation": anova.get(e["term"], {}).get("pct"),
                        "significant": e.get("significant"), "p": anova.get(e["term"], {}).get("p")})  # fmt: skip
        if not a.get("effects") and not a.get("level_effects"):
            for term, r in anova.items():
                if term != "error":
                    out.append({"response": name, "term": term, "level": None, "effect": None, "ci_low": None,
                                "ci_high": None, "pct_variation": r.get("pct"),
                                "significant": r["p"] is not None and r["p"] < 0.05, "p": r["p"]})  # fmt: skip
    return out


def to_csv(result: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in effect_rows(result):
        w.writerow({k: "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
                    for k, v in row.items()})  # fmt: skip
    return buf.getvalue()


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}  # fmt: skip


def _tex(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "--"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "".join(LATEX_SPECIAL.get(c, c) for c in str(v))


def to_latex(result: dict[str, Any]) -> str:
    """A booktabs tabular per response (\\usepackage{booktabs})."""
    rows = effect_rows(result)
    title = _tex(result["design"]["name"])
    out = [f"% effects of {title}: q (or the effect per level) with its 95 % CI and % of variation"]
    for name in result["responses"]:
        mine = [r for r in rows if r["response"] == name]
        if not mine:
            continue
        levels = any(r["level"] is not None for r in mine)
        head = ["term"] + (["level"] if levels else []) + ["effect", "95 \\% CI", "\\% of variation", "p"]
        out += [f"% {_tex(name)}", "\\begin{tabular}{l" + ("l" if levels else "") + "rrrr}", "\\toprule",
                " & ".join(head) + " \\\\", "\\midrule"]  # fmt: skip
        for r in mine:
            ci = f"[{_tex(r['ci_low'])}, {_tex(r['ci_high'])}]" if r["ci_low"] is not None else "--"
            star = "$^*$" if r["significant"] else ""
            cells = [_tex(r["term"])] + ([_tex(r["level"])] if levels else []) + [_tex(r["effect"]) + star, ci,
                     _tex(r["pct_variation"]), _tex(r["p"])]  # fmt: skip
            out.append(" & ".join(cells) + " \\\\")
        out += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(out)
