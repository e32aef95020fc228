"""The README's experiment figures, made from a run and kept with it.

    npk experiment readme-figures RESULTS_DIR     (a full run of examples/experiments/seed003.yaml)

writes docs/images/experiment_seed003.json (the figures, the commit and code hash they
come from, each cell's means and each response's effects) and
docs/images/experiment_seed003.png (seed 003's % of variation beside npkit's), and
rewrites the README's paragraph between the EXPERIMENT-FIGURES markers from the JSON.
tests/experiment/test_figures.py checks the README against the JSON.  A --quick report
of the same design reads the JSON to say where the short runs change a conclusion.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .analysis import analyze, load_results

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "images" / "experiment_seed003.json"
IMAGE = ROOT / "docs" / "images" / "experiment_seed003.png"
README = ROOT / "README.md"
BEGIN, END = "<!-- EXPERIMENT-FIGURES: made by npk experiment readme-figures -->", "<!-- /EXPERIMENT-FIGURES -->"
CHART_RESPONSES = ("throughput_mbps", "capacity_mbps", "latency_p99_us")


class FiguresError(ValueError):
    """The results directory cannot give the README's figures."""


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=30, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def cell_label(row: Any, keys: list[str]) -> str:
    return " ".join(f"{k}={row[k]}" for k in keys)


def reference_of(results_dir: str | Path) -> dict[str, Any]:
    """The figures of a seed 003 results directory (see the module docstring)."""
    design, df, man = load_results(results_dir)
    if design.keys != ["A", "B", "C"] or not design.two_level:
        raise FiguresError(f"{results_dir}: not seed 003's design (factors A, B, C at two levels)")
    ok = df[df["status"] == "ok"]
    if len(ok) != len(man["runs"]):
        raise FiguresError(f"{results_dir}: {len(ok)} of {len(man['runs'])} runs finished: run them all first")
    res = analyze(results_dir)
    effects = {r: {e["effect"]: {k: e[k] for k in ("q", "ci", "pct", "significant")} for e in a.get("effects") or []}
               for r, a in res["responses"].items()}  # fmt: skip
    numeric = [r for r in design.responses if r in ok and ok[r].dtype.kind in "fi"]
    cells = {r: {cell_label(g.iloc[0], design.keys): float(g[r].astype(float).mean()) for _, g in ok.groupby("point")}
             for r in numeric + [c for c in ("throughput_pct_offered",) if c in ok]}  # fmt: skip
    small, big = (lv.label for lv in design.factor("A").levels)
    cap = cells["capacity_mbps"]
    by_a = {a: [v / 1000 for c, v in cap.items() if c.startswith(f"A={a} ")] for a in (small, big)}
    p99 = cells["latency_p99_us"]
    # the configurations that lose packets at line rate (else the one with the highest p99)
    worst = sorted(c for c, v in cells["loss_pct"].items() if v > 0) or [max(p99, key=lambda c: p99[c])]
    lost = ok[ok.apply(lambda r: cell_label(r, design.keys) in worst, axis=1)]["loss_pct"].astype(float)
    fwd = cells["throughput_pct_offered"]
    started = ok["run_id"].map({rid: rec for rid, rec in _records(results_dir).items()})
    ends = [rec["started"] + rec["host_s"] for rec in started]
    return {
        "design": "examples/experiments/seed003.yaml", "commit": _commit(), "code_hash": man.get("code_hash"),
        "quick": bool(man.get("quick")), "runs": len(ok),
        "wall_s": round(max(ends) - min(rec["started"] for rec in started), 1),
        "sizes": [small, big],
        "forwarded_pct": [min(fwd.values()), max(fwd.values())],
        "capacity_pct_A": effects["capacity_mbps"]["A"]["pct"], "q_B": effects["capacity_mbps"]["B"]["q"],
        "capacity_gbps": {a: [min(v), max(v)] for a, v in by_a.items()},
        "worst": {"cells": worst, "p99_us": [min(p99[c] for c in worst), max(p99[c] for c in worst)],
                  "loss_pct": [float(lost.min()), float(lost.max())]},
        "cells": cells, "effects": effects,
    }  # fmt: skip


def _records(results_dir: str | Path) -> dict[str, dict[str, Any]]:
    from .store import Store

    return Store(results_dir).records()


def paragraph(ref: dict[str, Any]) -> str:
    """The README's paragraph, every figure from `ref`."""
    small, big = ref["sizes"]
    c78, c256 = ref["capacity_gbps"][small], ref["capacity_gbps"][big]
    qb = ref["q_B"]
    stub = "is no faster than" if qb <= 0 else "is faster than"
    w = ref["worst"]
    minutes = f"{int(ref['wall_s'] // 60)}:{int(ref['wall_s'] % 60):02d}"
    return (f"npkit forwards {ref['forwarded_pct'][0]:.1f}-{ref['forwarded_pct'][1]:.1f} % of seed 003's line-rate "
            "load in every configuration (the seed's router reached 5 Gb/s in none), so the variation lives "
            f"elsewhere: packet size explains {ref['capacity_pct_A']:.1f} % of the capacity (the zero-loss rate, "
            f"searched above 1 Gb/s a port: {c78[0]:.3f}-{c78[1]:.3f} Gb/s at {small} B, {c256[0]:.3f}-{c256[1]:.3f} "
            f"Gb/s at {big} B, the cell means); the stub QM {stub} the full one (q_B = {qb:.1f} Mb/s; seed 003: "
            f"the stub +148 Mb/s); and {' and '.join(w['cells'])} {'are the configurations' if len(w['cells']) > 1 else 'is the configuration'} "
            f"whose queue fills at line rate (p99 latency {w['p99_us'][0]:.1f}-{w['p99_us'][1]:.1f} us, "
            f"{w['loss_pct'][0]:.2f}-{w['loss_pct'][1]:.2f} % loss), which the seed "
            f"called negligible. Factor A's larger packets are {big} B at the chip: seed 003 never gives their "
            f"size. These figures and the plot below come from one full run ({ref['runs']} runs, {minutes} on a "
            f"shared 2-core machine) at commit {ref['commit'][:12]}, code hash {ref['code_hash']} "
            "(`npk experiment readme-figures RESULTS_DIR` remakes them: "
            "docs/images/experiment_seed003.json holds every cell mean and effect).")  # fmt: skip


def readme_block(ref: dict[str, Any]) -> str:
    import textwrap

    text = textwrap.fill(paragraph(ref), 92, break_long_words=False, break_on_hyphens=False)
    return f"{BEGIN}\n{text}\n{END}"


def rewrite_readme(ref: dict[str, Any], readme: Path = README) -> None:
    """Replace the README's block between the markers with the paragraph of `ref`."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise FiguresError(f"{readme}: no {BEGIN} ... {END} block to rewrite")
    head, rest = text.split(BEGIN, 1)
    readme.write_text(head + readme_block(ref) + rest.split(END, 1)[1])


def chart_rows(ref: dict[str, Any]) -> list[dict[str, Any]]:
    from .seed003 import SEED003

    rows = []
    for name in ("A", "B", "C", "AB", "AC", "BC", "ABC"):
        bar: dict[str, Any] = {"effect": name, "seed 003 throughput": SEED003.get(name, (0.0, 0.0))[1]}
        for r in CHART_RESPONSES:
            bar[f"npkit {r}"] = (ref["effects"].get(r, {}).get(name) or {}).get("pct")
        rows.append(bar)
    return rows


def write(results_dir: str | Path, readme: Path = README, json_path: Path = REFERENCE,
          image: Path = IMAGE) -> dict[str, Any]:  # fmt: skip
    """Write the JSON, the plot and the README paragraph; return the figures."""
    from . import plots
    from .store import code_hash

    ref = reference_of(results_dir)
    if ref["quick"]:
        raise FiguresError(f"{results_dir}: a --quick run: the README's figures come from the full design")
    if ref["code_hash"] != code_hash():
        raise FiguresError(f"{results_dir}: run with code {ref['code_hash']}, this tree is {code_hash()}: the "
                           "figures would not be this commit's; run the design again into a new directory")  # fmt: skip
    json_path.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    plots.comparison(chart_rows(ref), image)
    rewrite_readme(ref, readme)
    return ref


def quick_changes(ref: dict[str, Any], res: dict[str, Any], df: Any, keys: list[str]) -> list[str]:
    """Where a --quick result set's conclusions differ from the full run's `ref`: an effect
    significant in one and not the other, a cell mean off by more than a factor of 2."""
    out = []
    for r, a in res["responses"].items():
        full = ref["effects"].get(r) or {}
        for e in a.get("effects") or []:
            f = full.get(e["effect"])
            if f is not None and bool(f["significant"]) != bool(e["significant"]):
                out.append(f"{r}: {e['effect']} is {'' if e['significant'] else 'not '}significant here "
                           f"(q = {e['q']:.4g}), {'' if f['significant'] else 'not '}in the full run "
                           f"(q = {f['q']:.4g})")  # fmt: skip
        cells = ref["cells"].get(r) or {}
        ok = df[df["status"] == "ok"]
        if r not in ok:
            continue
        for _, g in ok.groupby("point"):
            label = cell_label(g.iloc[0], keys)
            mine, theirs = float(g[r].astype(float).mean()), cells.get(label)
            if theirs is None:
                continue
            lo, hi = sorted((abs(mine), abs(theirs)))
            if hi > 0 and (lo == 0 and hi > 1e-9 or lo > 0 and hi / lo > 2):
                out.append(f"{r} at {label}: {mine:.4g} here, {theirs:.4g} in the full run")
    return out
