"""Execute a design's runs in parallel into a resumable results store.

The runs go to a `concurrent.futures` executor: a local process pool by default, or a
Dask distributed cluster (`scheduler="tcp://HOST:PORT"`, through
`distributed.Client.get_executor`), so both take the same path: submit every missing
run, store each record as it completes, show progress with an ETA.  Dask workers must
run the same npkit checkout (they import npkit.toolchain.experiment.execute); give
them one thread each (`dask worker ADDR --nthreads 1`): the emulator is CPU-bound
Python and C under the GIL.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import yaml

from npkit.emulator.children import die_with_parent

from .changes import describe, stored_design_changes
from .design import Design, RunSpec, load_design
from .execute import read_ahead_for, run_one, set_read_ahead
from .store import Store, code_hash

RunFn = Callable[[dict[str, Any]], dict[str, Any]]


class ExperimentError(RuntimeError):
    """The experiment cannot run (scheduler unreachable, store unusable)."""


class SchedulerAddressError(ExperimentError):
    """--scheduler is not an address at all (a usage error, not an unreachable cluster)."""


class Progress:
    """A progress line on stderr: runs done, failed, elapsed, ETA.

    The ETA counts the runs in parallel: the work left is each run's expected time (the
    mean of the runs of its design point finished so far, or of all points' means while
    none of its point has finished) summed over the runs left, less what the runs in
    flight have done already (each worker's current run started when it last finished
    one), shared by the workers busy (no more than the runs left).  Design points differ
    in cost (seed 003's 78 B, 4-context point takes three times the mean): the runner
    submits one replicate of every point before the second (`replicate_major`), so the
    estimate knows every point's cost after the first wave.  Without `points` (run id
    -> design point) every run counts as the mean run."""

    def __init__(self, total: int, already: int, enabled: bool = True, workers: int = 1,
                 clock: Callable[[], float] = time.time, points: dict[str, int] | None = None) -> None:  # fmt: skip
        self.total = total
        self.done = already
        self.start_done = already
        self.failed = 0
        self.clock = clock
        self.t0 = clock()
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.workers = max(1, workers)
        self.run_s: list[float] = []  # host time of each run finished here
        self.starts = [self.t0] * min(self.workers, max(0, total - already))  # each worker's current run
        self.points = dict(points or {})  # the runs left, in the order they are submitted -> point
        self.by_point: dict[int, list[float]] = {}  # host time of the runs finished here, by point

    @staticmethod
    def _clock(s: float) -> str:
        s = int(s)
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"

    def eta_s(self) -> float | None:
        """Seconds left, or None before the first run has finished."""
        new = self.done - self.start_done
        left = self.total - self.done
        if not new:
            return None
        now = self.clock()
        busy = min(self.workers, left)
        if not busy:
            return 0.0
        mean = (sum(self.run_s) / len(self.run_s) if self.run_s
                else (now - self.t0) * min(self.workers, new) / new)  # fmt: skip
        costs = self._costs(mean, left)
        done_in_flight = sum(min(now - t, c) for t, c in zip(self.starts, costs, strict=False))
        return max(0.0, (sum(costs) - done_in_flight) / busy)

    def _costs(self, mean: float, left: int) -> list[float]:
        """The expected host time of each run left, in submission order."""
        if not self.points or not self.by_point:
            return [mean] * left
        means = {p: sum(ts) / len(ts) for p, ts in self.by_point.items()}
        other = sum(means.values()) / len(means)
        costs = [means.get(p, other) for p in self.points.values()]
        return costs + [other] * (left - len(costs))

    def line(self) -> str:
        el = self.clock() - self.t0
        eta_s = self.eta_s()
        eta = self._clock(eta_s) if eta_s is not None else "?"
        width = 30
        fill = int(width * self.done / max(1, self.total))
        return (f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} runs"
                f"{f', {self.failed} failed' if self.failed else ''}, {self._clock(el)} elapsed, ETA {eta}")  # fmt: skip

    def update(self, rec: dict[str, Any]) -> None:
        self.done += 1
        self.failed += rec.get("status") != "ok"
        point = self.points.pop(rec.get("run_id", ""), None)
        if rec.get("status") == "ok" and rec.get("host_s"):
            self.run_s.append(float(rec["host_s"]))
            if point is not None:
                self.by_point.setdefault(point, []).append(float(rec["host_s"]))
        if self.starts:  # the worker that started first is the one that finished
            self.starts.remove(min(self.starts))
        if self.total - self.done > len(self.starts):  # it starts a run not yet started
            self.starts.append(self.clock())
        if not self.enabled:
            return
        if self.tty:
            print("\r" + self.line(), end="", file=sys.stderr, flush=True)
        else:
            note = "" if rec.get("status") == "ok" else f" FAILED: {rec.get('error', '')}"
            print(f"{rec['run_id']} {rec.get('host_s', 0):.1f} s{note}  {self.line()}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.tty:
            print(file=sys.stderr)


def _payload(r: RunSpec, code: str) -> dict[str, Any]:
    return {"run_id": r.run_id, "point": r.point, "replicate": r.replicate, "seed": r.seed,
            "levels": r.levels, "config": r.config, "config_hash": r.config_hash, "code_hash": code}  # fmt: skip


def _lost(r: RunSpec, code: str, why: str) -> dict[str, Any]:
    return {**{k: v for k, v in _payload(r, code).items() if k != "config"}, "status": "failed",
            "error": why, "responses": {}, "host_s": 0.0, "started": time.time()}  # fmt: skip


def _worker_init(parent: int, ahead: bool | None) -> None:
    """A local worker: killed when the driver dies (even by SIGKILL), and deaf to the
    terminal's Ctrl-C (the driver alone handles it and ends the workers: a worker
    interrupted inside the XScale's Unicorn callbacks printed a spurious traceback);
    its runs read traffic ahead or not (`read_ahead_for`)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_read_ahead(ahead)


def _local_executor(jobs: int) -> Executor:
    import multiprocessing

    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(), read_ahead_for(jobs)))  # fmt: skip


def _end_workers(executor: Executor) -> None:
    """Kill a local pool's workers now (their runs are abandoned): an interrupted driver
    does not wait minutes for the runs in hand to finish."""
    for proc in list((getattr(executor, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.kill()


def check_scheduler_address(address: str) -> None:
    """Refuse an address that names no scheduler (no scheme Dask knows, no port) before
    anything is connected to or written."""
    try:
        from distributed.comm import parse_address
        from distributed.comm.addressing import parse_host_port
        from distributed.comm.registry import get_backend
    except ImportError as e:  # pragma: no cover - a pinned dependency
        raise ExperimentError(f"--scheduler needs dask.distributed: {e}") from None
    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
        _host, port = parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise SchedulerAddressError(f"--scheduler {address!r}: not a Dask scheduler address "
                                    f"(tcp://HOST:PORT): {e}") from None  # fmt: skip
    if not 0 < int(port) < 65536:
        raise SchedulerAddressError(f"--scheduler {address!r}: port {port} is out of range (1-65535)")


def _dask_executor(address: str, timeout_s: float) -> tuple[Executor, Any]:
    check_scheduler_address(address)
    from distributed import Client

    try:
        client = Client(address, timeout=f"{timeout_s}s")
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        # TypeError: a tls:// address without a TLS configuration
        raise ExperimentError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    return client.get_executor(pure=False), client


def _workers(client: Any) -> int:
    """Worker threads of a Dask cluster (1 when it does not say)."""
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # noqa: BLE001 - only the ETA depends on it
        return 1


def replicate_major(runs: list[RunSpec]) -> list[RunSpec]:
    """Runs in the order they are submitted: every design point's first replicate, then
    every point's second, ...: the ETA knows each point's cost after the first wave, and
    an interrupted campaign has every point at least once.  (Each run has its own seed:
    the order changes no result.)"""
    return sorted(runs, key=lambda r: (r.replicate, r.point))


def manifest_for(design: Design, code: str) -> dict[str, Any]:
    return {"name": design.name, "title": design.title, "kind": design.kind, "quick": design.quick,
            "factors": design.keys, "runs": [r.run_id for r in design.runs()],
            "config_hashes": {r.run_id: r.config_hash for r in design.runs()},
            "responses": design.responses, "code_hash": code,
            "design_source": str(design.source or "")}  # fmt: skip


def run_experiment(design: Design | str | Path, out: str | Path, *, quick: bool = False,
                   scheduler: str | None = None, jobs: int | None = None,
                   retry_failed: bool = False, progress: bool = True,
                   run_fn: RunFn = run_one, connect_timeout_s: float = 15.0,
                   force: bool = False) -> dict[str, Any]:  # fmt: skip
    """Run every missing run of `design` into the store at `out`; returns a summary
    (runs executed, skipped as already done, failed, not settled).  A store made with
    another design is refused (ExperimentError naming the changes) unless `force`."""
    if not isinstance(design, Design):
        design = load_design(design, quick=quick)
    store = Store(out)
    code = code_hash()
    runs = design.runs()
    changed = stored_design_changes(store.root, design, {r.run_id: r.config_hash for r in runs})
    if changed and not force:
        raise ExperimentError(f"{out} holds the results of another version of this design: {describe(changed)}. "
                              "Use a new results folder, or --force to run the changed design there "
                              "(the stored runs whose configuration changed are run again and replaced)")  # fmt: skip
    design_text = yaml.safe_dump(design.raw, sort_keys=False)
    # the cluster first: an address that does not answer leaves no results directory behind
    executor, client = _dask_executor(scheduler, connect_timeout_s) if scheduler else (None, None)
    try:
        store.init(manifest_for(design, code), design_text)
    except OSError as e:
        if client is not None:
            client.close()
        raise ExperimentError(f"{out}: cannot write the results store: {e}") from None
    done = store.done({r.run_id: r.config_hash for r in runs}, retry_failed)
    todo = replicate_major([r for r in runs if r.run_id not in done])
    n = jobs or min(len(todo), os.cpu_count() or 1)
    bar = Progress(len(runs), len(runs) - len(todo), progress, workers=_workers(client) if client else n,
                   points={r.run_id: r.point for r in todo})  # fmt: skip
    t0 = time.time()
    executed: list[str] = []
    try:
        if executor is not None:
            _drain(executor, todo, code, store, bar, executed, run_fn, restart=None)
        elif todo:
            _drain(_local_executor(n), todo, code, store, bar, executed, run_fn,
                   restart=lambda: _local_executor(n))  # fmt: skip
    finally:
        bar.close()
        if client is not None:
            client.close()
        store.write_table()
    recs = store.records()
    mine = [recs[r.run_id] for r in runs if r.run_id in recs]
    return {
        "design": design.name, "results": str(store.root), "runs": len(runs),
        "executed": executed, "skipped": sorted(done),
        "failed": sorted(r["run_id"] for r in mine if r.get("status") != "ok"),
        "unsettled": sorted(r["run_id"] for r in mine
                            if r.get("status") == "ok" and not r["responses"].get("settled", True)),
        "missing": sorted(r.run_id for r in runs if r.run_id not in recs),
        "wall_s": round(time.time() - t0, 2),
    }  # fmt: skip


def _shutdown(executor: Executor, wait: bool) -> None:
    try:
        executor.shutdown(wait=wait, cancel_futures=True)
    except TypeError:  # distributed's ClientExecutor has no cancel_futures
        executor.shutdown(wait=wait)


def _drain(executor: Executor, todo: list[RunSpec], code: str, store: Store, bar: Progress,
           executed: list[str], run_fn: RunFn, restart: Callable[[], Executor] | None) -> None:  # fmt: skip
    """Submit, collect and store; a local pool whose worker died is rebuilt and the
    unfinished runs resubmitted (a run that kills two workers is recorded as failed)."""
    attempts: dict[str, int] = {}
    pending = list(todo)
    while pending:
        futures: dict[Future[dict[str, Any]], RunSpec] = {
            executor.submit(run_fn, _payload(r, code)): r for r in pending
        }
        pending = []
        broken = False
        try:
            for fut in as_completed(futures):
                r = futures[fut]
                try:
                    rec = fut.result()
                except BrokenProcessPool:
                    broken = True
                    attempts[r.run_id] = attempts.get(r.run_id, 0) + 1
                    if attempts[r.run_id] < 2 and restart is not None:
                        pending.append(r)
                        continue
                    rec = _lost(r, code, "the worker process died during the run")
                except Exception as e:  # a Dask task that errored or lost its worker
                    rec = _lost(r, code, f"{type(e).__name__}: {e}")
                store.save(rec)
                executed.append(r.run_id)
                bar.update(rec)
        except KeyboardInterrupt:
            for f in futures:
                f.cancel()
            _end_workers(executor)
            _shutdown(executor, wait=False)
            raise
        _shutdown(executor, wait=True)
        if broken and pending and restart is not None:
            executor = restart()
        elif pending:
            for r in pending:
                rec = _lost(r, code, "the worker process died")
                store.save(rec)
                executed.append(r.run_id)
                bar.update(rec)
            pending = []
