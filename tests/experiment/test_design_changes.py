"""A results folder made with one version of a design: the same design resumes, a
changed one is refused (naming what changed) unless --force."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.design import load_design
from npkit.toolchain.experiment.runner import ExperimentError, manifest_for, run_experiment
from npkit.toolchain.experiment.store import Store, code_hash


def fake_run(run: dict[str, Any]) -> dict[str, Any]:
    """A run's record without running the router (a module function: the pool pickles it)."""
    return {**{k: run[k] for k in ("run_id", "point", "replicate", "seed", "levels", "config_hash")},
            "code_hash": run["code_hash"], "status": "ok", "error": "", "host_s": 0.0,
            "responses": {"throughput_mbps": 1000.0 + run["seed"], "latency_mean_us": 1.0}}  # fmt: skip


def _stored(design: Path, out: Path, quick: bool = False) -> None:
    """`out` as run_experiment leaves it after running `design` (records made up: no run
    executes, so no worker pool starts)."""
    d = load_design(design, quick=quick)
    store = Store(out)
    store.init(manifest_for(d, code_hash()), yaml.safe_dump(d.raw, sort_keys=False))
    for r in d.runs():
        store.save(fake_run({"run_id": r.run_id, "point": r.point, "replicate": r.replicate, "seed": r.seed,
                             "levels": r.levels, "config_hash": r.config_hash, "code_hash": code_hash()}))  # fmt: skip


def _records(out: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted((out / "runs").glob("*.json"))}


def _edit(path: Path, change: Any) -> None:
    d = yaml.safe_load(path.read_text())
    change(d)
    path.write_text(yaml.safe_dump(d, sort_keys=False))


def test_same_design_resumes(tiny_design: Any, tmp_path: Path) -> None:
    design = tiny_design(["full", "stub"])
    out = tmp_path / "res"
    _stored(design, out)
    again = run_experiment(design, out, jobs=1, progress=False, run_fn=fake_run)
    assert again["executed"] == [] and len(again["skipped"]) == 4


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d["steady"].update(max_ms=0.5), "steady.max_ms: 0.25 -> 0.5"),
    (lambda d: d["factors"]["B"].update(name="QM"), "factors.B.name: queue manager -> QM"),
    (lambda d: d.update(replications=3), "replications: 2 -> 3"),
])  # fmt: skip
def test_changed_design_is_refused_and_names_the_change(tiny_design: Any, tmp_path: Path, change: Any,
                                                        named: str) -> None:  # fmt: skip
    design = tiny_design(["full", "stub"])
    out = tmp_path / "res"
    _stored(design, out)
    before = _records(out)
    stored = (out / "design.yaml").read_bytes()
    _edit(design, change)
    with pytest.raises(ExperimentError, match="another version of this design") as e:
        run_experiment(design, out, jobs=1, progress=False, run_fn=fake_run)
    assert named in str(e.value) and "--force" in str(e.value)
    assert _records(out) == before and (out / "design.yaml").read_bytes() == stored  # untouched
    # from the command line: exit 1, one line, nothing run
    r = CliRunner().invoke(main, ["experiment", "run", str(design), "-o", str(out)])
    assert r.exit_code == 1 and named in r.output and "Traceback" not in r.output
    assert _records(out) == before


def test_force_runs_the_changed_design_there(tiny_design: Any, tmp_path: Path) -> None:
    design = tiny_design(["full", "stub"])
    out = tmp_path / "res"
    _stored(design, out)
    _edit(design, lambda d: d["steady"].update(max_ms=0.5))
    s = run_experiment(design, out, jobs=1, progress=False, run_fn=fake_run, force=True)
    assert len(s["executed"]) == 4  # every run's configuration changed
    assert "max_ms: 0.5" in (out / "design.yaml").read_text()
    # and from then on that design resumes
    again = run_experiment(design, out, jobs=1, progress=False, run_fn=fake_run)
    assert again["executed"] == [] and len(again["skipped"]) == 4


def test_quick_variant_into_the_full_designs_folder_is_refused(tiny_design: Any, tmp_path: Path) -> None:
    design = tiny_design(["full", "stub"])
    _edit(design, lambda d: d.update(quick={"steady": {"max_ms": 0.3, "min_ms": 0.3}}))
    out = tmp_path / "res"
    _stored(design, out)
    with pytest.raises(ExperimentError, match=r"steady.max_ms: 0.25 -> 0.3"):
        run_experiment(design, out, quick=True, jobs=1, progress=False, run_fn=fake_run)
    assert json.loads((out / "experiment.json").read_text())["quick"] is False
