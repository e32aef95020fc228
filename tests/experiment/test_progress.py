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
