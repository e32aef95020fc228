"""Batching (layout parameter batch=N, microcode/include/npk_block.h; seed 001's
forwarding processes took up to 16 packets before yielding): a context takes up to N
messages off its ring, works through them and emits them together, in order.  The
router forwards exactly as the IPv4 model says in both layouts, drops and exceptions
included; batch=1 is the code of before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from npkit.toolchain.system.errors import LinkError
from npkit.toolchain.system.link import link

ROOT = Path(__file__).resolve().parents[2]
NPK = str(Path(sys.executable).with_name("npk"))


def _demo(*args: str) -> dict[str, Any]:
    out = subprocess.run([NPK, "demo", "--ms", "1", "--json", *args], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and rep["verdict"]["ok"], rep["verdict"]
    return rep


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
def test_batch_16_at_line_rate(layout: str) -> None:
    rep = _demo("--layout", layout, "-D", "batch=16")
    assert rep["params"]["batch"] == 16
    t = rep["totals"]
    assert t["forwarded"] == t["predicted_forward"] and t["lost"] == 0
    assert rep["comparison"]["matched_forward"] == t["forwarded"]  # byte for byte, in flow order
    b = rep["batching"]
    assert b["batch"] == 16 and b["batches"] > 0 and 1.0 < b["mean_batch"] <= 16


@pytest.mark.parametrize("layout,batch", [("pipelined", 3), ("parallel", 4)])
def test_batches_with_drops_and_exceptions(layout: str, batch: int) -> None:
    """Every kind of packet (errors.yaml): drops and exceptions leave a batch in order
    with the forwarded packets."""
    rep = _demo("--layout", layout, "-D", f"batch={batch}", "--traffic", str(ROOT / "examples/traffic/errors.yaml"))
    assert rep["comparison"].get("matched_exception", 0) > 0 and rep["totals"]["dropped"]


def test_batch_1_is_the_code_of_before_and_others_differ() -> None:
    def words(params: dict[str, Any]) -> dict[str, list[int]]:
        return {p.name: p.words for p in link("pipelined", params).programs}

    plain = words({})
    assert words({"batch": 1}) == plain
    batched = words({"batch": 8})
    changed = {n for n in plain if plain[n] != batched[n]}
    assert changed == {"parse", "lookup", "hdr_format"}


def test_unequal_shares_of_threads() -> None:
    im = link("pipelined", {"lookup_threads": 4, "batch": 2})
    mode = {p.name: p.ctx_mode for p in im.programs}
    assert mode["lookup"] == 4 and mode["parse"] == 8 and mode["hdr_format"] == 8


def test_bad_batch_is_a_located_error() -> None:
    with pytest.raises(LinkError, match="batch"):
        link("pipelined", {"batch": 0})


def test_the_batching_design_runs_and_records_the_mean_batch(tmp_path: Path) -> None:
    """examples/experiments/batching.yaml's quick variant: every run ok, batch_mean 1 when
    unbatched and above 1 with batch=16 at line rate."""
    from npkit.toolchain.experiment.analysis import load_results
    from npkit.toolchain.experiment.runner import run_experiment

    summary = run_experiment(ROOT / "examples/experiments/batching.yaml", tmp_path / "b", quick=True, jobs=1,
                             progress=False)  # fmt: skip
    assert not summary["failed"], summary
    _, table, _ = load_results(tmp_path / "b")
    by_batch = table.groupby(table["B"].astype(str))["batch_mean"].min()
    assert by_batch["1"] == 1.0 and by_batch["16"] > 1.0
