"""`npk experiment compare A B` and `compare: <results directory>` in a design: the
effects of two result sets side by side, with CIs, the ones that differ flagged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from scipy import stats

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.design import DesignError, load_design
from npkit.toolchain.experiment.runner import manifest_for
from npkit.toolchain.experiment.store import Store

from .conftest import TRAFFIC


def design_file(tmp: Path, name: str, compare: str | None = None) -> Path:
    d = {"name": name, "replications": 2, "seed": 1, "base": {"layout": "pipelined", "traffic": str(TRAFFIC)},
         "factors": {"A": {"set": "param.qm", "levels": ["full", "stub"]},
                     "B": {"set": "param.parse_threads", "levels": [4, 8]}},
         "responses": ["throughput_mbps"], "capacity": False}  # fmt: skip
    if compare is not None:
        d["compare"] = compare
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def results(tmp: Path, name: str, q_a: float, q_b: float, noise: float = 1.0) -> Path:
    """A results directory whose throughput is 100 + q_a x_A + q_b x_B -+ noise (the two
    replicates of a cell), without running anything."""
    design = load_design(design_file(tmp, name))
    out = tmp / name
    store = Store(out)
    store.init(manifest_for(design, "c0de"), yaml.safe_dump(design.raw))
    for r in design.runs():
        x = {k: (1.0 if r.levels[k] == f.levels[1].label else -1.0) for k, f in zip("AB", design.factors, strict=True)}
        y = 100 + q_a * x["A"] + q_b * x["B"] + (noise if r.replicate else -noise)
        store.save({"run_id": r.run_id, "point": r.point, "replicate": r.replicate, "seed": r.seed,
                    "levels": r.levels, "config_hash": r.config_hash, "code_hash": "c0de", "status": "ok",
                    "error": "", "responses": {"throughput_mbps": y, "settled": True}, "host_s": 1.0})  # fmt: skip
    store.write_table()
    return out


def test_compare_two_result_sets_flags_the_effect_that_differs(tmp_path: Path) -> None:
    a = results(tmp_path, "base", q_a=10, q_b=5)
    b = results(tmp_path, "changed", q_a=10, q_b=-5)
    r = CliRunner().invoke(main, ["experiment", "compare", str(a), str(b), "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["effect"]: x for x in json.loads(r.output)["responses"]["throughput_mbps"]["rows"]}
    assert rows["A"]["a"]["q"] == pytest.approx(10) and rows["A"]["b"]["q"] == pytest.approx(10)
    assert rows["B"]["difference"] == pytest.approx(-10)
    assert rows["B"]["differs"] is True and rows["A"]["differs"] is False and rows["AB"]["differs"] is False
    # runs -+1 around each cell mean: s_e^2 = 8 / 4 dof = 2 in both, s_q = s_e / sqrt(8); the
    # difference's CI is t[0.975; 4] sqrt(2) s_q wide each side
    half = stats.t.ppf(0.975, 4) * math.sqrt(2) * math.sqrt(2) / math.sqrt(8)
    assert rows["B"]["ci"] == pytest.approx([-10 - half, -10 + half])
    text = CliRunner().invoke(main, ["experiment", "compare", str(a), str(b)]).output
    line = next(x for x in text.splitlines() if x.strip().startswith("B "))
    assert "DIFFERS" in line and "DIFFERS" not in next(x for x in text.splitlines() if x.strip().startswith("A "))


def test_compare_refuses_other_factors_and_missing_directories(tmp_path: Path) -> None:
    a = results(tmp_path, "base", q_a=10, q_b=5)
    r = CliRunner().invoke(main, ["experiment", "compare", str(a), str(tmp_path / "nowhere")])
    assert r.exit_code == 1 and "nowhere: not a results directory" in r.output and "Traceback" not in r.output
    other = results(tmp_path, "other", 1, 1)
    man = json.loads((other / "experiment.json").read_text())
    text = (other / "design.yaml").read_text().replace("- 8", "- 16")
    (other / "design.yaml").write_text(text)
    (other / "experiment.json").write_text(json.dumps(man))
    r = CliRunner().invoke(main, ["experiment", "compare", str(a), str(other)])
    assert r.exit_code == 1 and "the factors differ" in r.output


def test_a_design_naming_a_missing_results_directory_is_refused_with_its_line(tmp_path: Path) -> None:
    path = design_file(tmp_path, "d", compare="no-such-results")
    with pytest.raises(DesignError) as e:
        load_design(path)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("compare:"))
    assert f"{path}:{line}: compare: results directory {tmp_path / 'no-such-results'} does not exist" in str(e.value)
    r = CliRunner().invoke(main, ["experiment", "design", str(path)])
    assert r.exit_code == 1 and "does not exist" in r.output


def test_the_report_of_a_design_with_compare_dir_puts_the_effects_side_by_side(tmp_path: Path) -> None:
    results(tmp_path, "base", q_a=10, q_b=5)
    design = load_design(design_file(tmp_path, "changed", compare="base"))  # relative to the design
    assert design.compare == str(tmp_path / "base")
    b = tmp_path / "changed"
    results(tmp_path, "changed", q_a=10, q_b=-5)
    (b / "design.yaml").write_text(yaml.safe_dump(design.raw))  # the design as run names the baseline
    html = tmp_path / "rep" / "report.html"
    r = CliRunner().invoke(main, ["experiment", "report", str(b), "-o", str(html), "--no-run-plots"])
    assert r.exit_code == 0, r.output
    text = html.read_text()
    assert "Beside base" in text and "95 % CI of B - A" in text
    assert "Effects on throughput_mbps that differ: B." in text
    assert (tmp_path / "rep" / "report_files" / "compare_throughput_mbps.png").is_file()
