"""MSER-5 on synthetic series with a known warm-up, batch-means CIs, capacity search."""

from __future__ import annotations

import random

import pytest

from npkit.toolchain.experiment.capacity import CapacitySettings, Trial, search
from npkit.toolchain.experiment.steady import SteadySettings, judge, mean_ci, mser


def noise(n: int, seed: int, sd: float = 1.0) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(0.0, sd) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_mser5_cuts_a_step_warmup(seed: int) -> None:
    # 100 windows at a transient level, then 400 in steady state
    xs = [150 + e for e in noise(100, seed)] + [100 + e for e in noise(400, seed + 100)]
    cut, settled = mser(xs)
    assert settled
    assert 100 <= cut <= 150  # all of the transient, and little of the steady state


@pytest.mark.parametrize("seed", range(5))
def test_mser5_cuts_an_exponential_warmup(seed: int) -> None:
    # a transient 50 * exp(-k / 20): below one noise sd after k = 20 ln 50 = 78 windows
    xs = [100 + 50 * 2.718281828 ** (-k / 20) + e for k, e in enumerate(noise(600, seed))]
    cut, settled = mser(xs)
    assert settled
    assert 40 <= cut <= 130
    v = judge(xs, 0.95)
    assert v.mean == pytest.approx(100, abs=0.5)  # the transient is gone from the mean


def test_stationary_series_settles_without_much_cut() -> None:
    cuts = [mser([10 + e for e in noise(400, s)])[0] for s in range(10)]
    assert all(c <= 200 for c in cuts)
    assert sorted(cuts)[5] <= 60  # the median cut is small


def test_drifting_series_does_not_settle() -> None:
    # still rising at the end of the run: the best cut lies in the second half
    xs = [k * 0.1 + e for k, e in enumerate(noise(300, 1, 0.5))]
    _cut, settled = mser(xs)
    assert not settled
    assert not judge(xs, 0.95).precise(0.5)
    assert mser([1.0] * 20) == (0, False)  # too short to judge


def test_batch_means_ci_covers_the_mean() -> None:
    hits = 0
    for s in range(200):
        m, half = mean_ci([5 + e for e in noise(200, s)], 0.95)
        hits += abs(m - 5) <= half
    assert 180 <= hits <= 200  # ~95 % coverage
    m, half = mean_ci([2.0] * 50)
    assert m == 2.0 and half == 0.0


def test_steady_settings_are_checked() -> None:
    assert SteadySettings.from_dict({}).window_us == 50
    for bad in ({"window_us": 0}, {"min_ms": 3, "max_ms": 2}, {"precision": 2},
                {"min_ms": 0.1, "max_ms": 1}, {"stop_on": ["capacity_mbps"]}, {"bogus": 1},
                {"window_us": "fast"}):
        with pytest.raises(ValueError):
            SteadySettings.from_dict(bad)


def router(capacity: float, saturation: float) -> object:
    """A synthetic router: loses nothing up to `capacity` per port, delivers
    `saturation` (all ports) when overloaded."""
    tried: list[float] = []

    def trial(rate: float) -> Trial:
        tried.append(rate)
        ok = rate <= capacity
        offered = 5 * rate
        return Trial(rate, ok, offered, offered if ok else saturation, 0 if ok else 1, {})

    trial.tried = tried  # type: ignore[attr-defined]
    return trial


def test_capacity_search_finds_the_zero_loss_rate() -> None:
    s = CapacitySettings(resolution=0.01)
    t = router(1234.0, 6000.0)
    res = search(t, s)  # type: ignore[arg-type]
    cap = res["capacity_per_port_mbps"]
    assert cap <= 1234.0 and cap >= 1234.0 / 1.01
    assert res["capacity_mbps"] == pytest.approx(5 * cap, abs=0.1)
    assert res["capacity_censored"] == ""
    assert res["trials"][0]["rate_mbps"] == s.max_mbps  # RFC 2544: start at the top
    assert len(res["trials"]) <= 10
    # a saturation estimate below the capacity (overload collapse) still converges
    res2 = search(router(1500.0, 5000.0), s)  # type: ignore[arg-type]
    assert 1500 / 1.01 <= res2["capacity_per_port_mbps"] <= 1500


def test_capacity_search_censoring() -> None:
    s = CapacitySettings(min_mbps=100, max_mbps=2000)
    above = search(router(5000.0, 1.0), s)  # type: ignore[arg-type]
    assert above["capacity_censored"] == "above" and above["capacity_per_port_mbps"] == 2000
    below = search(router(50.0, 100.0), s)  # type: ignore[arg-type]
    assert below["capacity_censored"] == "below" and below["capacity_mbps"] == 0.0
    with pytest.raises(ValueError):
        CapacitySettings.from_dict({"min_mbps": 10, "max_mbps": 5})


def test_a_late_cut_on_a_flat_series_is_settled_within_the_precision() -> None:
    # flat to 0.1 %, with a tiny bump late in the run: MSER may cut past the middle,
    # but the mean moves by far less than a 1 % target
    xs = [100 + 0.05 * e for e in noise(200, 3)] + [100.1 + 0.05 * e for e in noise(60, 4)] + [100 + 0.05 * e for e in noise(140, 5)]
    v = judge(xs, 0.95, precision=0.01)
    assert not v.strict and v.cut > len(xs) // 2  # MSER alone would call it unsettled
    assert v.settled
    # a ramp that ends late is not forgiven: its second half is far from the kept mean
    ramp = [min(30.0, 5 + k * 0.1) + 0.01 * e for k, e in enumerate(noise(300, 6))]
    r = judge(ramp, 0.95, precision=0.01)
    assert not r.strict and not r.settled
