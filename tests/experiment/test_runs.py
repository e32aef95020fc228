"""Runs on the real router: the store resumes after a kill, failed runs are recorded,
and a Dask LocalCluster gives the same results table as the local process pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.experiment.runner import ExperimentError, run_experiment

NPK = str(Path(sys.executable).with_name("npk"))


def records(out: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted((out / "runs").glob("*.json"))}


def test_resume_after_kill_runs_only_the_missing_runs(tiny_design, tmp_path: Path) -> None:
    design = tiny_design(["full", "stub", "bogus"])
    # a point whose runs fail when they run (the design check passes it: the router does
    # not fit an IXP2400's SRAM, found when it is loaded); a bad -D value such as qm=bogus
    # is refused before any run starts
    d = yaml.safe_load(design.read_text())
    d["factors"]["B"] = {"name": "queue manager", "levels": {
        "full": {"param.qm": "full"}, "stub": {"param.qm": "stub"}, "bogus": {"param.qm": "full", "chip": "ixp2400"}}}
    design.write_text(yaml.safe_dump(d, sort_keys=False))
    out = tmp_path / "res"
    proc = subprocess.Popen([NPK, "experiment", "run", str(design), "-o", str(out), "--jobs", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.time() + 300
        while not records(out) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker, mid-experiment
        proc.wait()
    before = records(out)
    assert 1 <= len(before) < 6, "the kill should land between the first and the last run"
    s = run_experiment(design, out, jobs=2, progress=False)
    after = records(out)
    assert sorted(s["executed"]) == sorted(set(after) - set(before))
    assert sorted(s["skipped"]) == sorted(before)
    assert len(after) == 6 and all(after[k] == v for k, v in before.items())  # untouched
    # the failed runs carry their error; the others finished
    recs = {k: json.loads(v) for k, v in after.items()}
    assert {k for k, r in recs.items() if r["status"] == "failed"} == {"p002r0", "p002r1"}
    assert "out of range" in recs["p002r0"]["error"]
    assert all(r["status"] == "ok" and r["responses"]["throughput_mbps"] > 4000
               for k, r in recs.items() if not k.startswith("p002"))  # fmt: skip
    assert sorted(s["failed"]) == ["p002r0", "p002r1"]
    # again: nothing left to run, and the exit code still says that runs failed
    r = CliRunner().invoke(main, ["experiment", "run", str(design), "-o", str(out)])
    assert r.exit_code == 1 and "0 executed, 6 already done, 2 failed" in r.output
    # the table: one row per run with levels, seed, responses, status, error and hashes
    csv = pd.read_csv(out / "results.csv")
    pq = pd.read_parquet(out / "results.parquet")
    assert list(csv["run_id"]) == list(pq["run_id"]) == sorted(after)
    for col in ("B", "seed", "replicate", "throughput_mbps", "latency_p99_us", "util_me_qm", "status",
                "error", "config_hash", "code_hash"):  # fmt: skip
        assert col in csv.columns and col in pq.columns
    assert set(csv["seed"]) == {5, 6}
    assert csv["code_hash"].nunique() == 1 and csv["config_hash"].nunique() == 6
    ok = csv[csv["status"] == "ok"]
    assert (pq[pq["status"] == "ok"]["throughput_mbps"].to_numpy() == ok["throughput_mbps"].to_numpy()).all()


def test_runs_of_one_worker_share_the_image_and_its_route_table(tiny_design, tmp_path: Path) -> None:
    """A generated route table: the replicates on one worker reuse the first run's image,
    and the table it names (which the control plane reads when a run starts) is still there."""
    out = tmp_path / "res"
    s = run_experiment(tiny_design(["full", "stub"], replications=2, routes=500), out, jobs=1, progress=False)
    recs = {k: json.loads(v) for k, v in records(out).items()}
    assert not s["failed"] and len(recs) == 4, {k: r.get("error") for k, r in recs.items()}
    assert all(r["status"] == "ok" and r["responses"]["throughput_mbps"] > 4000 for r in recs.values())
    # every number a run records is a response a design may name (the list design checks
    # `responses:` against is kept beside the code that records them: they must not drift)
    from npkit.toolchain.experiment.execute import RESPONSE_FAMILIES, RESPONSES

    numbers = {k for r in recs.values() for k, v in r["responses"].items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip
    assert numbers and {k for k in numbers if k not in RESPONSES and not k.startswith(RESPONSE_FAMILIES)} == set()


def test_dask_local_cluster_gives_the_local_pool_table(tiny_design, tmp_path: Path) -> None:
    from distributed import LocalCluster

    design = tiny_design(["full", "stub"], replications=1)
    local = run_experiment(design, tmp_path / "local", jobs=2, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:  # fmt: skip
        dask = run_experiment(design, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False)
    assert len(local["executed"]) == len(dask["executed"]) == 2 and not local["failed"] and not dask["failed"]
    a = pd.read_parquet(tmp_path / "local" / "results.parquet").drop(columns=["host_s"])
    b = pd.read_parquet(tmp_path / "dask" / "results.parquet").drop(columns=["host_s"])
    pd.testing.assert_frame_equal(a, b)
    assert a["util_me_qm"].nunique() > 1  # the runs did differ (full vs stub QM)


def test_unreachable_scheduler_is_a_clear_error(tiny_design, tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run_experiment(tiny_design(["full", "stub"]), tmp_path / "o", scheduler="tcp://127.0.0.1:9",
                       connect_timeout_s=1, progress=False)  # fmt: skip
    assert not (tmp_path / "o").exists()  # nothing written: not even the results directory


def test_scheduler_errors_from_the_command_line_leave_nothing_behind(tiny_design, tmp_path: Path) -> None:
    """Port 9 on loopback (discard) has no scheduler: exit 1, one line, no directory; an
    address that is not one (no port, unknown scheme, port 0, tls:// without TLS set up)
    is a usage error (exit 2) or a clear error, never a traceback."""
    design = str(tiny_design(["full", "stub"]))
    cases = {"tcp://127.0.0.1:9": 1, "127.0.0.1": 2, "bogus://127.0.0.1:9": 2, "tcp://127.0.0.1:0": 2, "": 2,
             "tls://127.0.0.1:9": 1}  # fmt: skip
    for n, (addr, code) in enumerate(cases.items()):
        out = tmp_path / f"o{n}"
        proc = subprocess.run([NPK, "experiment", "run", design, "-o", str(out), "--scheduler", addr,
                               "--connect-timeout", "1"], capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == code, (addr, proc.stderr)
        assert "Traceback" not in proc.stderr and "scheduler" in proc.stderr.lower(), (addr, proc.stderr)
        assert not out.exists(), addr
