"""A results directory damaged by hand or by a disk: every command that reads it names
the file and what is wrong with it, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.design import load_design
from npkit.toolchain.experiment.runner import manifest_for
from npkit.toolchain.experiment.store import Store, StoreError


def _store(tiny_design: Any, tmp_path: Path) -> tuple[Store, list[str]]:
    """A store of the tiny design with a record for each run (made up: no run executes)."""
    design = load_design(tiny_design(["full", "stub"]))
    store = Store(tmp_path / "res")
    store.init(manifest_for(design, "code"), (tmp_path / "tiny.yaml").read_text())
    for r in design.runs():
        store.save({"run_id": r.run_id, "point": 0, "replicate": r.replicate, "seed": r.seed, "levels": r.levels,
                    "status": "ok", "config_hash": r.config_hash,
                    "responses": {"throughput_mbps": 1.0, "latency_mean_us": 2.0}})  # fmt: skip
    return store, [r.run_id for r in design.runs()]


def _fails(args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 1 and message in r.output, r.output


@pytest.mark.parametrize(("damage", "message"), [
    (lambda s, ids: (s.runs_dir / f"{ids[1]}.json").write_text('{"run_id": "p0'),
     "run record is not valid JSON (Unterminated string"),
    (lambda s, ids: (s.runs_dir / f"{ids[0]}.json").write_bytes(b"\x8f\xa0 not text"),
     "run record is not UTF-8 text"),
    (lambda s, ids: (s.runs_dir / f"{ids[0]}.json").write_text('{"run_id": "x"}'),
     "run record has no point, replicate, seed, levels, status, config_hash"),
    (lambda s, ids: (s.root / "experiment.json").write_text("[1, 2]"), "experiment manifest is not a JSON object"),
])  # fmt: skip
def test_a_damaged_store_is_a_located_error(tiny_design: Any, tmp_path: Path, damage: Any, message: str) -> None:
    store, ids = _store(tiny_design, tmp_path)
    damage(store, ids)
    with pytest.raises(StoreError, match="res/"):
        store.table()
    _fails(["experiment", "analyze", str(store.root)], message)
    _fails(["experiment", "report", str(store.root), "-o", str(tmp_path / "r.md"), "--no-run-plots"], message)


def test_a_damaged_record_stops_a_resumed_run_and_says_how_to_go_on(tiny_design: Any, tmp_path: Path) -> None:
    store, ids = _store(tiny_design, tmp_path)
    (store.runs_dir / f"{ids[0]}.json").write_text("{")
    _fails(["experiment", "run", str(tmp_path / "tiny.yaml"), "-o", str(store.root)],
           f"{ids[0]}.json:1: run record is not valid JSON")  # fmt: skip
    _fails(["experiment", "run", str(tmp_path / "tiny.yaml"), "-o", str(store.root)], "delete it to run that run again")


def test_a_store_without_runs_has_the_table_columns(tiny_design: Any, tmp_path: Path) -> None:
    store, ids = _store(tiny_design, tmp_path)
    for rid in ids:
        (store.runs_dir / f"{rid}.json").unlink()
    df = store.table()
    assert len(df) == 0 and {"run_id", "status", "B", "config_hash"} <= set(df.columns)
    r = CliRunner().invoke(main, ["experiment", "report", str(store.root), "-o", str(tmp_path / "r.md"),
                                  "--no-run-plots"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "0 runs finished" in (tmp_path / "r.md").read_text()


def test_runs_of_two_code_versions_are_flagged(tiny_design: Any, tmp_path: Path) -> None:
    # an experiment resumed after the code changed: its runs keep the code hash they ran with
    store, ids = _store(tiny_design, tmp_path)
    for rid, code in zip(ids, ["aaaa", "bbbb", "aaaa", "bbbb"], strict=True):
        rec = store.records()[rid]
        store.save({**rec, "code_hash": code})
    r = CliRunner().invoke(main, ["experiment", "analyze", str(store.root)])
    assert r.exit_code == 0, r.output
    assert "warning: the runs come from 2 versions of the code (aaaa, bbbb)" in r.output
    r = CliRunner().invoke(main, ["experiment", "report", str(store.root), "-o", str(tmp_path / "r.md"),
                                  "--no-run-plots"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "Warning: the runs come from 2 versions of the code" in (tmp_path / "r.md").read_text()
    # one version: nothing said
    for rid in ids:
        store.save({**store.records()[rid], "code_hash": "aaaa"})
    assert "versions of the code" not in CliRunner().invoke(main, ["experiment", "analyze", str(store.root)]).output
