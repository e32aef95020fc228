"""The effects table as CSV and LaTeX (`npk experiment analyze --format csv|latex`)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main

from .test_compare import results


def test_csv_has_one_row_per_effect_with_its_ci(tmp_path: Path) -> None:
    out = results(tmp_path, "base", q_a=10, q_b=5)
    r = CliRunner().invoke(main, ["experiment", "analyze", str(out), "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = {x["term"]: x for x in csv.DictReader(io.StringIO(r.output))}
    assert set(rows) == {"A", "B", "AB"}
    assert float(rows["A"]["effect"]) == pytest.approx(10) and float(rows["B"]["effect"]) == pytest.approx(5)
    assert float(rows["A"]["ci_low"]) < 10 < float(rows["A"]["ci_high"])
    assert rows["A"]["significant"] == "True" and rows["AB"]["significant"] == "False"
    assert all(x["response"] == "throughput_mbps" for x in rows.values())
    assert float(rows["A"]["p"]) < 1e-3


def test_latex_is_a_tabular_with_escaped_names(tmp_path: Path) -> None:
    out = results(tmp_path, "base", q_a=10, q_b=5)
    r = CliRunner().invoke(main, ["experiment", "analyze", str(out), "--format", "latex"])
    assert r.exit_code == 0, r.output
    text = r.output
    assert "\\begin{tabular}{lrrrr}" in text and "\\end{tabular}" in text
    assert "throughput\\_mbps" in text and "throughput_mbps" not in text  # _ escaped
    body = [ln for ln in text.splitlines() if ln.startswith(("A &", "B &", "AB &"))]
    assert len(body) == 3 and body[0].startswith("A & 10$^*$ & [")
    assert all(ln.count("&") == 4 and ln.endswith("\\\\") for ln in body)
