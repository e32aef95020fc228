"""The progress line's ETA counts the runs that go on in parallel (a fake clock: no
wall-clock in the test)."""

from __future__ import annotations

import pytest

from npkit.toolchain.experiment.runner import Progress


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_first_eta_of_two_workers_is_the_time_left_not_twice_it() -> None:
    # 24 runs of 10 s on 2 workers: 2 finish at t = 10, 2 more at t = 20, ... 120 s in all
    clock = Clock()
    bar = Progress(24, 0, enabled=False, workers=2, clock=clock)
    assert bar.eta_s() is None
    clock.t += 10
    bar.update({"run_id": "a", "status": "ok", "host_s": 10.0})
    # the other worker's run is as far on: 23 runs left, one of them done, 2 at a time
    assert bar.eta_s() == pytest.approx(110)
    bar.update({"run_id": "b", "status": "ok", "host_s": 10.0})
    assert bar.eta_s() == pytest.approx(110)
    clock.t += 5  # half-way through runs 3 and 4
    assert bar.eta_s() == pytest.approx(105)
    assert "ETA 1:45" in bar.line()


def test_eta_of_one_worker_and_of_the_last_runs() -> None:
    clock = Clock()
    bar = Progress(3, 0, enabled=False, workers=4, clock=clock)  # more workers than runs
    clock.t += 6
    bar.update({"run_id": "a", "status": "ok", "host_s": 6.0})
    assert bar.eta_s() == pytest.approx(0)  # the other two started with it and are as far on
    one = Progress(4, 1, enabled=False, workers=1, clock=clock)
    clock.t += 8
    one.update({"run_id": "b", "status": "ok", "host_s": 8.0})
    assert one.eta_s() == pytest.approx(16)  # two runs of 8 s, one after the other
    clock.t += 2
    failed = {"run_id": "c", "status": "failed", "host_s": 0.5}  # a failure's time is no run time
    one.update(failed)
    assert one.eta_s() == pytest.approx(8)


def _simulate(order: list[tuple[str, int]], cost: dict[int, float], workers: int) -> list[tuple[float, float]]:
    """A pool of `workers` taking runs (run id, design point) in `order`, each taking its
    point's `cost`: at every completion, (the ETA shown, the true time left)."""
    clock = Clock()
    bar = Progress(len(order), 0, enabled=False, workers=workers, clock=clock, points=dict(order))
    start = clock.t
    running = [(start + cost[p], rid, p) for rid, p in order[:workers]]
    queue = list(order[workers:])
    finishes: list[float] = []
    while running:  # the true schedule first
        running.sort()
        t, rid, p = running.pop(0)
        finishes.append(t)
        if queue:
            nrid, np_ = queue.pop(0)
            running.append((t + cost[np_], nrid, np_))
    end = max(finishes)
    seen: list[tuple[float, float]] = []
    running = [(start + cost[p], rid, p) for rid, p in order[:workers]]
    queue = list(order[workers:])
    while running:
        running.sort()
        t, rid, p = running.pop(0)
        clock.t = t
        bar.update({"run_id": rid, "status": "ok", "host_s": cost[p]})
        if queue:
            nrid, np_ = queue.pop(0)
            running.append((t + cost[np_], nrid, np_))
        eta = bar.eta_s()
        assert eta is not None
        seen.append((eta, end - t))
    return seen


def test_eta_weights_each_run_by_its_design_points_cost() -> None:
    """Seed 003's shape: 8 points, one three times the mean, 3 replicates, 2 workers.  Run
    point by point, the first ETA is the slow point's time for every run; one replicate of
    every point first (the runner's order), the ETA is exact once each point has run."""
    from npkit.toolchain.experiment.design import RunSpec
    from npkit.toolchain.experiment.runner import replicate_major

    cost = {0: 60.0, 1: 30.0, 2: 25.0, 3: 20.0, 4: 15.0, 5: 12.0, 6: 15.0, 7: 15.0}
    runs = [RunSpec(f"p{p}r{r}", p, r, 1, {}, {}, "") for p in range(8) for r in range(3)]
    point_major = [(r.run_id, r.point) for r in runs]
    ordered = [(r.run_id, r.point) for r in replicate_major(runs)]
    assert [p for _rid, p in ordered[:8]] == list(range(8))  # every point once before any twice
    by_point = _simulate(point_major, cost, workers=2)
    by_wave = _simulate(ordered, cost, workers=2)
    first_ratio = [eta / left for eta, left in (by_point[0], by_wave[0])]
    assert first_ratio[0] > 2.5 and first_ratio[1] < 1.3  # the "about 3x too high", and now
    for eta, left in by_wave[8:-1]:  # every point known: within a run of the truth
        assert abs(eta - left) <= max(cost.values()) / 2 + 1e-9
