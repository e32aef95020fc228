"""Experiment benchmark (`npk bench experiment`): seed 003's design end to end.

    experiment.runs_per_hour.local        runs of examples/experiments/seed003.yaml per hour,
                                          local process pool (2 workers)
    experiment.runs_per_hour.dask         the same on a 2-worker Dask LocalCluster
    experiment.seed003_minutes.local      wall time of the whole design, minutes
    experiment.seed003_minutes.dask
    experiment.seed003_runs               runs in the design (24; 16 with --quick)

--quick runs the design's quick variant.  Every run executes (fresh results directory).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from npkit.toolchain.bench import benchmark

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "examples" / "experiments" / "seed003.yaml"


@benchmark("experiment", last=True)  # Dask leaves its threads
def bench_experiment(quick: bool) -> dict[str, Any]:
    from distributed import LocalCluster

    from npkit.toolchain.experiment.runner import run_experiment

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="npk-bench-exp-") as tmp:
        local = run_experiment(DESIGN, Path(tmp) / "local", quick=quick, jobs=2, progress=False)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster:  # fmt: skip
            dask = run_experiment(DESIGN, Path(tmp) / "dask", quick=quick, scheduler=cluster.scheduler_address,
                                  progress=False)  # fmt: skip
    for name, s in (("local", local), ("dask", dask)):
        if s["failed"]:
            raise RuntimeError(f"experiment bench ({name}): runs failed: {s['failed']}")
        out[f"experiment.runs_per_hour.{name}"] = round(len(s["executed"]) / s["wall_s"] * 3600, 1)
        out[f"experiment.seed003_minutes.{name}"] = round(s["wall_s"] / 60, 2)
    out["experiment.seed003_runs"] = local["runs"]
    return out
