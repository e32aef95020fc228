"""The experiment report: HTML or Markdown, figures as PNG files beside it.

    npk experiment report RESULTS_DIR -o report.html    (or report.md)

writes report.html and report_files/*.png (per-run throughput plots under
report_files/runs/).  The document is built once as a list of blocks (headings,
paragraphs, tables, figures) and rendered to either format.  For a design with
`compare: seed003` it puts npkit's effects beside the ones seed 003 published and
explains the differences from what the emulator measured (utilisations, drops and
the busiest block at saturation).
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import plots
from .analysis import analyze, error_sd, load_results, mixed_code, multiplicative_warning
from .design import Design
from .seed003 import SEED003, SEED003_NOTE
from .store import Store


# Heller, "Performance Analysis of a Diversified Router" (seed 003), section 5.3:
# effects on throughput (Mb/s above the average) and % of variation explained
@dataclass
class Doc:
    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def h(self, text: str, level: int = 2) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: list[str]) -> None:
        self.blocks.append(("ul", items))

    def table(self, header: list[str], rows: list[list[Any]]) -> None:
        self.blocks.append(("table", (header, rows)))

    def img(self, rel: str, caption: str) -> None:
        self.blocks.append(("img", (rel, caption)))

    def links(self, items: list[tuple[str, str]]) -> None:
        self.blocks.append(("links", items))


def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{digits}g}" if abs(v) < 10**digits else f"{v:.0f}"
    return str(v)


# ---------------------------------------------------------------------------- rendering


# Tables fit the page: no sideways scrolling (which print cuts off); headers break after
# an underscore, cells wrap, and wide tables (many columns) use a smaller type.
CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;margin:1em 0;font-size:90%;max-width:100%}"
       "table.wide{font-size:75%}table.wider{font-size:65%}"
       ".wide td,.wider td{padding:2px 3px}.wide th,.wider th{overflow-wrap:anywhere;padding:2px 3px}"
       "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;overflow-wrap:break-word}"
       "th{background:#eef;font-weight:600}td.n{text-align:right;white-space:nowrap}"
       "figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}"
       "figcaption{font-size:90%;color:#555}"
       "@media print{body{max-width:none;margin:0;padding:0}table{font-size:70%;page-break-inside:auto}"
       "table.wide,table.wider{font-size:58%}td.n{white-space:normal}tr{page-break-inside:avoid}"
       "figure{page-break-inside:avoid}}")  # fmt: skip
WIDE, WIDER = 8, 12  # columns from which a table is set smaller


def _header_html(text: str) -> str:
    """A header or cell that may break after an underscore (or a space)."""
    return "_<wbr>".join(html.escape(part) for part in text.split("_"))


def _table_class(ncols: int) -> str:
    return ' class="wider"' if ncols >= WIDER else ' class="wide"' if ncols >= WIDE else ""


def render_html(doc: Doc) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(doc.title)}</title>",
           f"<style>{CSS}</style>",
           "</head><body>", f"<h1>{e(doc.title)}</h1>"]  # fmt: skip
    for kind, arg in doc.blocks:
        if kind == "h":
            out.append(f"<h{arg[0]}>{e(arg[1])}</h{arg[0]}>")
        elif kind == "p":
            out.append(f"<p>{e(arg)}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in arg) + "</ul>")
        elif kind == "table":
            header, rows = arg
            out.append(f"<table{_table_class(len(header))}><tr>" + "".join(f"<th>{_header_html(str(h))}</th>"
                                                                        for h in header) + "</tr>")  # fmt: skip
            out += ["<tr>" + "".join(f"<td{_num(c)}>{_header_html(fmt(c))}</td>" for c in r) + "</tr>" for r in rows]
            out.append("</table>")
        elif kind == "img":
            rel, cap = arg
            out.append(f'<figure><img src="{e(rel)}" alt="{e(cap)}"><figcaption>{e(cap)}</figcaption></figure>')
        elif kind == "links":
            out.append("<p>" + " · ".join(f'<a href="{e(href)}">{e(t)}</a>' for t, href in arg) + "</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _num(v: Any) -> str:
    return ' class="n"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""


def _md_cell(v: Any) -> str:
    return fmt(v).replace("|", "\\|").replace("\n", " ")


def render_md(doc: Doc) -> str:
    out = [f"# {doc.title}", ""]
    for kind, arg in doc.blocks:
        if kind == "h":
            out += ["#" * arg[0] + " " + arg[1], ""]
        elif kind == "p":
            out += [arg, ""]
        elif kind == "ul":
            out += [f"- {x}" for x in arg] + [""]
        elif kind == "table":
            header, rows = arg
            out.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
            out.append("|" + "|".join("---" for _ in header) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
            out.append("")
        elif kind == "img":
            rel, cap = arg
            out += [f"![{cap}]({rel})", "", f"*{cap}*", ""]
        elif kind == "links":
            out += [" · ".join(f"[{t}]({href})" for t, href in arg), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------- content


def _design_section(doc: Doc, design: Design, res: dict[str, Any], man: dict[str, Any]) -> None:
    d = res["design"]
    runs = res["runs"]
    doc.p(f"Design {d['name']}: {d['kind']} design, {d['points']} configurations x {d['replications']} "
          f"replications = {d['runs']} runs{' (--quick variant)' if d['quick'] else ''}. "
          f"{runs['ok']} runs finished, {len(runs['failed'])} failed, {len(runs['unsettled'])} did not "
          f"reach steady state, {len(runs['missing'])} not run yet. Code hash {', '.join(runs['code_hashes']) or '-'}.")  # fmt: skip
    if len(runs["code_hashes"]) > 1:
        doc.p(mixed_code(runs["code_hashes"])[0].upper() + mixed_code(runs["code_hashes"])[1:] + ".")
    if d["quick"]:
        st = design.steady
        doc.p(f"Warning: this is the --quick variant: each run measures at most {st.get('max_ms', 10)} ms of "
              "emulated time, and capacity trials are shorter and coarser. A queue that fills slowly (at line "
              "rate with a bottleneck) has not filled yet, so latency percentiles and loss are understated and "
              "effects on them may differ from the full design's: run it before drawing conclusions on them.")  # fmt: skip
    if design.description:
        doc.p(design.description)
    rows = []
    for f in design.factors:
        for j, lv in enumerate(f.levels):
            code = ("-1" if j == 0 else "+1") if len(f.levels) == 2 else str(j)
            sets = "; ".join(f"{t} {'x' if f.scale else '='} {v}" for t, v in lv.settings.items())
            rows.append([f.key if j == 0 else "", f.name if j == 0 else "", code, lv.label, sets])
    doc.table(["factor", "name", "code", "level", "sets"], rows)
    if d.get("resolution"):
        doc.p(f"Fractional design, generators {', '.join(f'{g} = {w}' for g, w in d['generators'].items())}; "
              f"defining relation {' = '.join(d['defining_relation'])}; resolution {d['resolution']}.")  # fmt: skip
        doc.table(["effect", "confounded with"], [[k, " = ".join(v)] for k, v in d["confounding"].items()])
    steady = design.steady
    doc.p("Replications differ only in the traffic seed (" + ", ".join(str(s) for s in d["seeds"]) + "): the "
          "emulator is deterministic, so all variation between replications comes from the workload "
          "(destination addresses, sizes and arrival times the generator draws), none from the "
          "emulator. Replicate i uses the same seed in every configuration.")  # fmt: skip
    doc.p(f"Steady state: each response is recorded in windows of {steady.get('window_us', 50)} us; "
          "warm-up is cut with MSER-5 (the cut that minimises the standard error of the remaining "
          "mean, over batches of five windows); a run continues until the CI of its throughput and "
          f"mean latency is within {100 * float(steady.get('precision', 0.01)):g} % or until "
          f"{steady.get('max_ms', 10)} ms. A run whose cut falls in the second half of its series, "
          "and moves the mean of that half by more than the target precision, is flagged as not "
          "settled and left out of the responses measured from that series (throughput or latency; "
          "the others when either did not settle).")  # fmt: skip
    if design.capacity is not None:
        cap = design.capacity
        doc.p("Capacity is the RFC 2544 throughput: the highest offered rate with zero loss, found by "
              "trials at per-port link rates up to "
              f"{cap.get('max_mbps', 2500)} Mb/s (the emulated ports and wire run at the trial's rate); "
              f"{cap.get('trial_ms', 1)} ms trials, resolution {100 * float(cap.get('resolution', 0.01)):g} %. "
              "A trial fails if a packet is lost to a resource or if the output falls behind the input "
              "over the trial's second half (a backlog that grows).")  # fmt: skip
    if runs["failed"]:
        doc.h("Failed runs", 3)
        doc.table(["run", "error"], [[f["run_id"], f["error"]] for f in runs["failed"]])
    if runs["unsettled"]:
        doc.p("Not settled (excluded from the responses of the series that did not settle; see each "
              "response): " + ", ".join(runs["unsettled"]))


def _response_section(doc: Doc, design: Design, df: Any, name: str, a: dict[str, Any], files: Path,
                      rel: str, options: dict[str, Any]) -> None:  # fmt: skip
    from .analysis import usable

    logged = a.get("transform") == "log10"
    doc.h(f"Response: {name}" + (" (analysed as log10)" if logged else ""))
    if a.get("kind") == "none" or not a.get("n"):
        doc.p(a.get("note") or "no usable runs")
        return
    mean = f"geometric mean {fmt(a.get('geometric_mean'))}" if logged else f"mean {fmt(a['mean'])}"
    doc.p(f"{a['n']} runs; range {fmt(a['range'][0])} .. {fmt(a['range'][1])}; {mean}. " + (a.get("note") or ""))
    warn = multiplicative_warning(a)
    if warn:
        doc.p(warn[0].upper() + warn[1:] + ".")
    if logged:
        doc.p("Every figure below is on log10 of the response: an effect q multiplies the response by 10^q "
              "at the +1 level (or the level it belongs to) and divides it by 10^q at -1, so the +1 level "
              "over the -1 level is 10^(2q); the fitted values and residuals are in log10 units.")  # fmt: skip
    if a.get("censored"):
        doc.p("Capacity censored (at the search bound) in runs " + ", ".join(a["censored"]) + ".")
    rows, _ = usable(df, name)
    if logged:  # the plots draw what was analysed
        rows = rows.assign(**{name: rows[name].astype(float).map(math.log10)})
    label = f"log10({name})" if logged else name
    if a.get("effects") and not a.get("constant"):  # every effect 0 with a CI [0, 0]: nothing to read
        doc.p(f"Effects by {a['method']}; q is half the difference between the mean response at +1 and at -1.")
        has_alias = any(e.get("aliases") for e in a["effects"])
        header = (["effect", "q", "95 % CI"] + (["10^q", "95 % CI of 10^q", "+1 over -1"] if logged else [])
                  + ["% of variation", "significant"] + (["confounded with"] if has_alias else []))  # fmt: skip
        tab = []
        for e in a["effects"]:
            ci = f"[{fmt(e['ci'][0])}, {fmt(e['ci'][1])}]" if e["ci"] else "-"
            ratios = [e["ratio"], _ci(e.get("ratio_ci")), e["ratio_hi_lo"]] if logged else []
            tab.append([e["effect"], e["q"], ci] + ratios + [e["pct"], e["significant"]]
                       + ([" = ".join(e.get("aliases", []))] if has_alias else []))  # fmt: skip
        tab.append(["error", "", ""] + ([""] * 3 if logged else []) + [a["error"].get("pct"), ""]
                   + ([""] if has_alias else []))  # fmt: skip
        doc.table(header, tab)
        if a.get("pct_note"):
            doc.p(a["pct_note"][0].upper() + a["pct_note"][1:] + ".")
        if a.get("not_estimable"):
            doc.p("Not estimable (design cells without usable runs): " + ", ".join(a["not_estimable"]) + ".")
        if a["error"].get("s_e") is not None:
            doc.p(f"s_e = {fmt(a['error']['s_e'])} with {a['error']['dof']} degrees of freedom; q0 = {fmt(a['q0'])}.")
        if a.get("sst", 0) > 0 and not a.get("constant"):
            log_pct = options.get("log_variation", False)
            doc.img(f"{rel}/{plots.effects(a, label, files / f'effects_{name}.png', log_pct).name}",
                    f"Effects on {label} with 95 % CIs, and the allocation of variation"
                    + (" (log scale)" if log_pct else " (each bar labelled; --log-variation draws it on a log scale)"))  # fmt: skip
    if a.get("anova", {}).get("table"):
        doc.p("ANOVA (type II sums of squares" + ("" if a.get("balanced", True) else
              ": each term against the terms that do not contain it") + ")"
              + (f", model: {a['model']}" if a.get("model") else "") + ":")  # fmt: skip
        doc.table(["term", "df", "sum of squares", "% of variation", "F", "p"],
                  [[r["term"], r["df"], r["sum_sq"], r.get("pct", 100 * r["sum_sq"] / a["sst"] if a["sst"] else None),
                    r["F"], r["p"]] for r in a["anova"]["table"]])  # fmt: skip
        if a.get("pct_note") and not a.get("effects"):
            doc.p(a["pct_note"][0].upper() + a["pct_note"][1:] + ".")
        if a["anova"].get("type3") and not a.get("balanced", True):
            doc.p("Type III sums of squares (each term against every other term; with runs missing they differ "
                  "from type II):")  # fmt: skip
            doc.table(["term", "df", "sum of squares", "F", "p"],
                      [[r["term"], r["df"], r["sum_sq"], r["F"], r["p"]] for r in a["anova"]["type3"]])  # fmt: skip
    elif a.get("anova", {}).get("note"):
        doc.p(a["anova"]["note"])
    _level_effects_table(doc, a)
    if a.get("groups"):
        doc.table(["group", "slope", "intercept", "R^2", "non-linearity test", "p", "non-linear"],
                  [[g, s.get("slope"), s.get("intercept"), s.get("r2"), s.get("nonlinear_test"), s.get("nonlinear_p"),
                    s.get("nonlinear")] for g, s in a["groups"].items()])  # fmt: skip
        doc.img(f"{rel}/{plots.sweep(design, rows, a, name, files / f'sweep_{name}.png').name}",
                f"{name} against {design.sweep} with a straight-line fit per group; residuals below "
                "(a pattern there is non-linearity)")  # fmt: skip
    if a.get("sst", 0) > 0 and not a.get("constant"):
        doc.img(f"{rel}/{plots.residuals(a, label, files / f'residuals_{name}.png').name}",
                f"Residual checks for {label}: normal QQ plot and residuals against predicted values "
                "(a spread that grows with the predicted value calls for a log scale)")  # fmt: skip
        if design.kind != "sweep":
            error = error_sd(a)
            ci = (f"95 % CI from the experimental error (s_e {fmt(error[0])}, {error[1]} degrees of freedom)"
                  if error else "no CI: no degrees of freedom for the error")  # fmt: skip
            main = plots.main_effects(design, rows, name, files / f"main_{name}.png", error, label=label)
            empty = ("; some cells have no usable run (" + "; ".join(a["cells_missing"]) + "), so a level's mean "
                     "is over the cells that have runs and mixes in the other factors' effects: read the cell "
                     "means instead" if a.get("cells_missing") else "")  # fmt: skip
            doc.img(f"{rel}/{main.name}", f"Main effects on {label}: mean at each level; {ci}{empty}")
            if len(design.factors) > 1 and not design.two_level:
                inter = plots.interactions(design, rows, name, files / f"interactions_{name}.png", label=label)
                doc.img(f"{rel}/{inter.name}",
                        f"Interactions on {label}: cell means; lines that are not parallel interact")
    _interaction_section(doc, design, rows, name, label, a, files, rel)
    if a.get("excluded"):
        doc.p("Excluded: " + "; ".join(f"{x['run_id']} ({x['reason']})" for x in a["excluded"]))


def _interaction_section(doc: Doc, design: Design, rows: Any, name: str, label: str, a: dict[str, Any],
                         files: Path, rel: str) -> None:  # fmt: skip
    """The significant interactions in words, their plots, and the table of cell means."""
    from .interactions import interaction_sentence

    inter = a.get("interactions") or []
    if a.get("cell_means") is None:
        return
    doc.h(f"Interactions and cell means: {label}", 3)
    doc.p(interaction_sentence(label, inter) or f"No interaction is significant on {label} (at 95 %).")
    plotted = [t["factors"] for t in inter if len(t["factors"]) in (2, 3)]
    if plotted and design.kind != "sweep":
        path = plots.interaction_terms(design, rows, name, plotted, files / f"interaction_terms_{name}.png",
                                       error_sd(a), label=label)  # fmt: skip
        doc.img(f"{rel}/{path.name}", f"Interaction plots on {label} ({', '.join(t['term'] for t in inter)}): "
                "cell means with 95 % CIs; lines that are not parallel interact")  # fmt: skip
    error = error_sd(a)
    src = (f"95 % CI from the experimental error (s_e {fmt(error[0])}, {error[1]} degrees of freedom)" if error
           else "no CI: no degrees of freedom for the error")  # fmt: skip
    doc.p(f"Cell means of {label}, one row per configuration; {src}.")
    doc.table(design.keys + ["runs", "mean", "95 % CI", "sd of the runs"],
              [[c["levels"][k] for k in design.keys] + [c["n"], c["mean"], _ci(c["ci"]), c["sd"]]
               for c in a["cell_means"]])  # fmt: skip


def _ci(ci: list[float] | None) -> str:
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-"


def _level_effects_table(doc: Doc, a: dict[str, Any]) -> None:
    """A multi-level design's effects per level, with their CIs (or why there are none)."""
    if a.get("level_effects"):
        logged = a.get("transform") == "log10"
        err = a.get("error") or {}
        src = (f"the 95 % CIs come from the spread within cells, s_e = {fmt(err['s_e'])} with {err['dof']} "
               "degrees of freedom" if err.get("s_e") is not None else "no CIs")  # fmt: skip
        doc.p("Effects per level: mu is the mean of the cell means, a main effect the mean at a level minus mu, "
              f"an interaction what the cell means over its factors add to mu and the main effects; {src}.")  # fmt: skip
        header = ["term", "level", "effect", "95 % CI"] + (["10^effect", "95 % CI of 10^effect"] if logged else [])
        rows = []
        for e in [a["mu"]] + a["level_effects"]:
            ratios = [e["ratio"], _ci(e.get("ratio_ci"))] if logged else []
            rows.append([e["term"], e["level"], e["effect"], _ci(e["ci"])] + ratios + [e.get("significant", "")])
        doc.table(header + ["significant"], rows)
    if a.get("effects_note"):
        doc.p(a["effects_note"][0].upper() + a["effects_note"][1:] + ".")


def _mean_by(df: Any, cols: list[str], value: str) -> Any:
    return df.groupby(cols)[value].mean()


def _effect(res: dict[str, Any], resp: str, name: str) -> dict[str, Any] | None:
    for e in res["responses"].get(resp, {}).get("effects") or []:
        if e["effect"] == name:
            return e
    return None


def _seed003_section(doc: Doc, design: Design, df: Any, res: dict[str, Any], files: Path, rel: str) -> None:
    doc.h("Beside seed 003")
    doc.p(SEED003_NOTE)
    if "A" in design.keys:
        small, big = (lv.label for lv in design.factor("A").levels)
        doc.p(f"Factor A's levels here: {small} B at the chip (the minimum packet, as in the seed) and {big} B. "
              f"Seed 003 never gives the size of its 'larger' packets: {big} B is this design's choice, and "
              "effects involving A depend on it.")  # fmt: skip
    _quick_changes(doc, design, df, res)
    resps = [r for r in ("throughput_mbps", "capacity_mbps", "latency_p99_us") if r in res["responses"]]
    header = ["effect", "seed 003: q on throughput (Mb/s)", "seed 003: % of variation"]
    for r in resps:
        header += [f"npkit: q on {r}", f"npkit: % ({r})"]
    rows, chart = [], []
    for name in [design.effect_name(e) for e in design.effects()]:
        seed = SEED003.get(name)
        row: list[Any] = [name, seed[0] if seed else "minimal", seed[1] if seed else "minimal"]
        bar: dict[str, Any] = {"effect": name, "seed 003 throughput": seed[1] if seed else 0.0}
        for r in resps:
            e = _effect(res, r, name)
            row += [e["q"] if e else None, e["pct"] if e else None]
            bar[f"npkit {r}"] = e["pct"] if e else None
        rows.append(row)
        chart.append(bar)
    doc.table(header, rows)
    if chart and any(len(c) > 2 for c in chart):
        doc.img(f"{rel}/{plots.comparison(chart, files / 'seed003_comparison.png').name}",
                "% of variation per effect: seed 003's throughput beside npkit's responses")
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return
    doc.h("What the emulator shows", 3)
    doc.ul(_seed003_explanations(design, ok, res))
    cols = [c for c in ("capacity_mbps", "capacity_mpps", "saturation_mbps", "sat_busiest_block", "sat_top_drop",
                        "throughput_pct_offered", "latency_p99_us") if c in ok]  # fmt: skip
    utils = sorted(c for c in ok.columns if c.startswith("sat_util_me_"))
    table = []
    for _point, g in ok.groupby("point"):
        first = g.iloc[0]
        row = [str(first[k]) for k in design.keys]
        for c in cols + utils:
            vals = g[c].tolist()
            row.append(sum(vals) / len(vals) if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
                       else ", ".join(sorted({str(v) for v in vals})))  # fmt: skip
        table.append(row)
    doc.p("Per configuration (mean over replications); sat_ columns are measured in the first capacity "
          "trial, at the highest offered rate, where the router is saturated: the busiest ME block, the "
          "commonest loss reason and every block's ME utilisation.")  # fmt: skip
    doc.table(design.keys + cols + [u.removeprefix("sat_util_me_") + " busy" for u in utils], table)


def _quick_changes(doc: Doc, design: Design, df: Any, res: dict[str, Any]) -> None:
    """A --quick run of seed 003: where its conclusions differ from the full run recorded
    with the README (figures.py)."""
    from .figures import REFERENCE, quick_changes

    if not design.quick or not REFERENCE.is_file():
        return
    import json

    ref = json.loads(REFERENCE.read_text())
    changes = quick_changes(ref, res, df, design.keys)
    head = (f"--quick changes conclusions: against the full run recorded in docs/images/{REFERENCE.name} "
            f"(commit {str(ref.get('commit'))[:12]}, code {ref.get('code_hash')}),")  # fmt: skip
    if changes:
        doc.p(head + " these differ (an effect significant in one run and not the other, or a cell mean off by "
              "more than a factor of 2):")  # fmt: skip
        doc.ul(changes)
    else:
        doc.p(head + " no effect changes significance and no cell mean is off by a factor of 2.")


def _cell(ok: Any, value: str, **levels: str) -> float:
    sel = ok
    for k, v in levels.items():
        sel = sel[sel[k].astype(str) == v]
    vals = sel[value].astype(float)
    return float(vals.mean()) if len(vals) else float("nan")


def _seed003_explanations(design: Design, ok: Any, res: dict[str, Any]) -> list[str]:
    """Sentences computed from the table: what differs from seed 003 and why."""
    out = []
    keys = design.keys
    if "throughput_pct_offered" in ok:
        t = ok["throughput_pct_offered"].astype(float)
        short = ok[ok["loss_pct"].astype(float) > 0] if "loss_pct" in ok else ok.iloc[0:0]
        text = (f"Throughput at the offered load: npkit forwards {t.min():.1f} to {t.max():.1f} % of what is "
                "offered, where seed 003's router reached 5 Gb/s in none of its configurations. ")  # fmt: skip
        if len(short):
            cells = sorted({", ".join(f"{k}={r[k]}" for k in keys) for _, r in short.iterrows()})
            lat = short["latency_p99_us"].astype(float).mean() if "latency_p99_us" in short else float("nan")
            text += (f"The configurations that lose packets at line rate ({'; '.join(cells)}) do so after a queue "
                     f"has filled (p99 latency {lat:.0f} us, against {ok['latency_p99_us'].astype(float).min():.0f} us "
                     "at best): they are the whole of the throughput variation, which is why effects on "
                     "throughput are a few Mb/s only. Capacity (the zero-loss rate above 1 Gb/s a port), "
                     "latency and utilisation carry the rest.")  # fmt: skip
        else:
            text += ("No configuration loses packets at line rate, so throughput has no variation worth "
                     "allocating; capacity, latency and utilisation carry the differences.")  # fmt: skip
        out.append(text)
    a = res["responses"].get("capacity_mbps", {})
    effs = {e["effect"]: e for e in a.get("effects") or []}
    fa = design.factor("A") if "A" in keys else None
    if fa and "A" in effs and "capacity_mpps" in ok:
        lo, hi = (_cell(ok, "capacity_mpps", A=lv.label) for lv in fa.levels)
        out.append(f"A (packet size): capacity changes by 2 q_A = {2 * effs['A']['q']:.0f} Mb/s ({fmt(effs['A']['pct'], 3)} % "
                   f"of its variation; seed 003: 75.7 % of throughput). Counted in packets the zero-loss rate "
                   f"goes the other way, from {lo:.2f} Mpkt/s at {fa.levels[0].label} B to {hi:.2f} Mpkt/s at "
                   f"{fa.levels[1].label} B (rx moves a packet in 64-byte RBUF elements): the bits grow faster than "
                   "the packet rate falls, so the seed's reading of A -- header costs dominate small packets -- "
                   "holds for capacity.")  # fmt: skip
    if "B" in keys and "B" in effs:
        fb = design.factor("B")
        busy = (ok.groupby(ok["B"].astype(str))["sat_busiest_block"].agg(lambda v: v.value_counts().index[0])
                if "sat_busiest_block" in ok else {})  # fmt: skip
        qm = {lv.label: _cell(ok, "sat_util_me_qm", B=lv.label) for lv in fb.levels} if "sat_util_me_qm" in ok else {}
        q = effs["B"]["q"]
        if q <= 0:
            verdict = ("removing it does not raise capacity: the full QM is not what limits npkit's router, "
                       "where the seed found its compute-bound QM a bottleneck")  # fmt: skip
        else:
            verdict = f"removing it raises capacity by 2 q_B = {2 * q:.0f} Mb/s, as in the seed"
        out.append(f"B (queue manager): q_B = {q:.0f} Mb/s ({fmt(effs['B']['pct'], 3)} %; seed 003: +148 Mb/s, 7.7 %). "
                   f"The {fb.levels[0].label} QM's ME is {100 * qm.get(fb.levels[0].label, float('nan')):.0f} % busy at "
                   f"saturation (busiest block: {busy.get(fb.levels[0].label, '?')}), the {fb.levels[1].label}'s "
                   f"{100 * qm.get(fb.levels[1].label, float('nan')):.0f} % (busiest block: "
                   f"{busy.get(fb.levels[1].label, '?')}); busy counts the cycles a block spends polling "
                   f"its rings too, so the busiest block need not be the bottleneck. {verdict[0].upper()}{verdict[1:]}.")  # fmt: skip
    if fa and "B" in keys and "AB" in effs:
        fb = design.factor("B")
        cells = ", ".join(f"{la.label} B with {lb.label}: {_cell(ok, 'capacity_mbps', A=la.label, B=lb.label):.0f}"
                          for la in fa.levels for lb in fb.levels)  # fmt: skip
        moves = []
        for la in fa.levels:
            c0, c1 = (_cell(ok, "capacity_mbps", A=la.label, B=lb.label) for lb in fb.levels)
            moves.append(f"{100 * (c1 - c0) / c0:+.1f} % at {la.label} B")
        out.append(f"AB: q_AB = {effs['AB']['q']:.0f} Mb/s ({fmt(effs['AB']['pct'], 3)} %; seed 003: -215 Mb/s, 16.3 %). "
                   f"Mean capacity (Mb/s) {cells}: the {fb.levels[1].label} changes capacity by {' and '.join(moves)}. "
                   "The seed explained its AB by a QM that turns latency-bound at large packets; the "
                   "interaction here is the difference between those two changes.")  # fmt: skip
    if fa and "C" in keys and "C" in effs:
        fc = design.factor("C")
        small = fa.levels[0].label
        caps = [_cell(ok, "capacity_mbps", A=small, C=lv.label) for lv in fc.levels]
        par = [_cell(ok, "sat_util_me_parse", A=small, C=lv.label) for lv in fc.levels] if "sat_util_me_parse" in ok else [float("nan")] * 2
        thr = [_cell(ok, "throughput_pct_offered", A=small, C=lv.label) for lv in fc.levels] if "throughput_pct_offered" in ok else [float("nan")] * 2
        ac = effs.get("AC", {})
        text = (f"C (parse contexts): q_C = {effs['C']['q']:.0f} Mb/s on capacity ({fmt(effs['C']['pct'], 3)} %; "
                "seed 003: negligible, though 'in isolated tests, parse block threading had a huge effect'). ")  # fmt: skip
        worse = 0 if caps[0] < caps[1] else 1
        if abs(caps[0] - caps[1]) > 0.01 * max(caps):
            text += (f"At {small} B the parse block with {fc.levels[worse].label} contexts limits the router: capacity "
                     f"{caps[worse]:.0f} Mb/s against {caps[1 - worse]:.0f} with {fc.levels[1 - worse].label}, "
                     f"{thr[worse]:.1f} % of line rate forwarded against {thr[1 - worse]:.1f} %, while its ME is "
                     f"{100 * par[worse]:.0f} % busy at saturation ({100 * par[1 - worse]:.0f} % with "
                     f"{fc.levels[1 - worse].label}): the rest of the time none of its contexts is ready (all "
                     f"wait for memory or a ring). At {fa.levels[1].label} B the packet rate is lower and the "
                     f"difference goes, hence the AC interaction (q_AC = {fmt(ac.get('q'), 3)} Mb/s).")  # fmt: skip
        else:
            text += (f"At {small} B the two modes give the same capacity within 1 % ({caps[0]:.0f} and "
                     f"{caps[1]:.0f} Mb/s): the parse block is not the bottleneck in either.")  # fmt: skip
        out.append(text)
    if "sat_top_drop" in ok:
        counts = ok["sat_top_drop"].astype(str).value_counts()
        top = ", ".join(f"{k} in {v} runs" for k, v in counts.items() if k)
        out.append(f"Where packets are lost when the router is saturated: {top}. 'no_rx_thread' means the MSF "
                   "found no free receive thread when a packet arrived: rx threads are either busy or held "
                   "up by a full ring after them, so the loss shows at the input whichever stage is the "
                   "bottleneck; the busiest-block column below says which one.")  # fmt: skip
    lat = res["responses"].get("latency_p99_us", {})
    if lat.get("effects"):
        big = max(lat["effects"], key=lambda e: e["pct"] or 0)
        out.append(f"Latency (p99) at the offered load varies most with {big['effect']} "
                   f"({fmt(big['pct'], 3)} % of its variation, q = {fmt(big['q'], 3)} us).")  # fmt: skip
    return out


def _compare_section(doc: Doc, results_dir: str | Path, other: str, responses: list[str], files: Path,
                     rel: str) -> None:  # fmt: skip
    """The design's `compare:` results directory (A) beside this one (B), effect by effect."""
    from .compare import compare

    c = compare(other, results_dir, responses)
    doc.h(f"Beside {c['a']['label']}")
    doc.p(f"A = {c['a']['path']} (design {c['a']['design']}), B = this experiment. The difference B - A has "
          "the standard deviation sqrt(sd_A^2 + sd_B^2) and a 95 % CI on the smaller of the two error degrees "
          "of freedom; an effect differs when that CI excludes 0.")  # fmt: skip
    for n in c["notes"]:
        doc.p(n[0].upper() + n[1:] + ".")
    for r, x in c["responses"].items():
        if not x["rows"]:
            continue
        doc.h(r, 3)
        doc.table(["effect", "q (A)", "95 % CI (A)", "% (A)", "q (B)", "95 % CI (B)", "% (B)", "B - A",
                   "95 % CI of B - A", "differs"],
                  [[row["effect"], row["a"]["q"], _ci(row["a"]["ci"]), row["a"]["pct"], row["b"]["q"],
                    _ci(row["b"]["ci"]), row["b"]["pct"], row["difference"], _ci(row["ci"]),
                    row["differs"] if row["differs"] is not None else "no CI"] for row in x["rows"]])  # fmt: skip
        flagged = [row["effect"] for row in x["rows"] if row["differs"]]
        doc.p(f"Effects on {r} that differ: {', '.join(flagged)}." if flagged else f"No effect on {r} differs.")
        path = plots.compare_effects(x["rows"], ("A", "B"), r, files / f"compare_{r}.png")
        doc.img(f"{rel}/{path.name}", f"Effects on {r}: A (blue) beside B (red) with 95 % CIs")


def _series_section(doc: Doc, store: Store, files: Path, rel: str, per_run: bool) -> None:
    recs = [r for r in store.records().values() if r.get("status") == "ok" and r.get("series")]
    if not recs:
        return
    doc.h("Throughput over time")
    doc.img(f"{rel}/{plots.series_grid(recs, files / 'series.png').name}",
            "Output rate per window for every run (up to 48); shaded: warm-up cut by MSER-5; red: not settled")
    if per_run:
        links = []
        for r in recs:
            p = plots.series_one(r, files / "runs" / f"{r['run_id']}.png")
            links.append((r["run_id"], f"{rel}/runs/{p.name}"))
        doc.p("One plot per run:")
        doc.links(links)


def _results_table(doc: Doc, design: Design, df: Any, responses: list[str]) -> None:
    doc.h("Results table")
    doc.p("Every run (results.csv and results.parquet in the results directory hold every column).")
    cols = ["run_id", "seed"] + design.keys + ["status", "settled"] + [r for r in responses if r in df]
    cols = [c for c in cols if c in df]
    doc.table(cols, [[row[c] for c in cols] for _, row in df.iterrows()])


def _reference_section(doc: Doc, design: Design, df: Any) -> None:
    """The closing note: a publication's values (`reference:`) beside npkit's mean at
    every design point, and the design's note on why they differ."""
    from .design import same_level

    ref = design.reference
    if not ref:
        return
    resp = ref["response"]
    doc.h(f"Beside {ref['source']}")
    if resp not in df:
        doc.p(f"No run has {resp}.")
        return
    ok = df[df["status"] == "ok"] if "status" in df else df
    rows = []
    for point in design.points():
        levels = {k: point[k] for k in design.keys}
        sel = ok
        for k, lv in levels.items():
            sel = sel[[same_level(x, lv) for x in sel[k]]]
        npk = float(sel[resp].mean()) if len(sel) else math.nan
        paper = next((p["value"] for p in ref["points"]
                      if all(same_level(levels[k], v) for k, v in p["where"].items())), None)  # fmt: skip
        diff = fmt(npk - paper) if paper is not None and math.isfinite(npk) else "-"
        rows.append([*(levels[k] for k in design.keys), fmt(npk), "-" if paper is None else fmt(paper), diff])
    doc.p(f"{resp} at every design point (npkit: the mean of its runs), and {ref['source']}'s value where it "
          "gives one.")  # fmt: skip
    doc.table([*design.keys, f"npkit {resp}", ref["source"], "npkit - reference"], rows)
    if ref.get("note"):
        doc.p(ref["note"])


REPORT_SUFFIXES = (".html", ".htm", ".md", ".markdown")


def report_format_known(out: str | Path) -> bool:
    """Whether `out`'s suffix names a report format (HTML or Markdown)."""
    return Path(out).suffix.lower() in REPORT_SUFFIXES


def build(results_dir: str | Path, out: str | Path, per_run_plots: bool = True,
          responses: list[str] | None = None, transform: str = "none", log_variation: bool = False) -> Path:  # fmt: skip
    """Write the report (HTML or Markdown by the suffix of `out`) and its figures: every
    response of the design, or those named; with transform "log", on log10 of each;
    `log_variation` draws the allocation of variation on a log scale."""
    out = Path(out)
    if not report_format_known(out):
        raise ValueError(f"{out}: the report is .html or .md")
    design, df, man = load_results(results_dir)
    res = analyze(results_dir, responses, transform)
    files = out.parent / f"{out.stem}_files"
    files.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(files, out.parent)
    doc = Doc(design.title or f"Experiment {design.name}")
    _design_section(doc, design, res, man)
    if design.compare == "seed003" and design.two_level:
        if transform == "log":
            doc.p("The comparison with seed 003 is in Mb/s on the original scale: write the report without "
                  "--transform to see it.")  # fmt: skip
        else:
            _seed003_section(doc, design, df, res, files, rel)
    elif design.compare:
        _compare_section(doc, results_dir, design.compare, list(res["responses"]), files, rel)
    for name, a in res["responses"].items():
        _response_section(doc, design, df, name, a, files, rel, {"log_variation": log_variation})
    _series_section(doc, Store(results_dir), files, rel, per_run_plots)
    _results_table(doc, design, df, list(res["responses"]))
    _reference_section(doc, design, df)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_md(doc) if out.suffix.lower() in (".md", ".markdown") else render_html(doc))
    return out
