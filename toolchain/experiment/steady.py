"""Steady state: warm-up detection (MSER-5), confidence intervals, the stopping rule.

A run records each response in fixed windows of emulated time (e.g. the output rate
over every 50 us).  Warm-up is cut with MSER-5 (White, Cobb and Spratt): the series is
averaged in batches of five windows, and the cut is the number of batches d that
minimises the squared standard error of the mean of what remains,

    MSER(d) = sum_{j > d} (Z_j - mean(Z_{d+1..m}))^2 / (m - d)^2,

searched over d = 0 .. m - MIN_KEEP.  A cut beyond the first half of the series means
the run has not reached steady state (still drifting at its end): such a series is
*not settled* -- unless that late cut moves the mean of the second half by less than
the target precision (the series is flat to within the target; MSER only trimmed
noise).  The mean of the kept windows is reported with a confidence interval
from batch means (NBATCH batches of the kept windows, Student t), and a run goes on
until every stopping response is settled and its CI half-width is within the target
relative precision, or until the time cap; runs that stop at the cap unsettled are
flagged, never averaged in silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MSER_BATCH = 5
MIN_KEEP = 5  # batches the cut leaves at least
NBATCH = 10  # batch means for the CI
STOP_RESPONSES = ("throughput_mbps", "latency_mean_us")  # the windowed series


def settings(cls: Any, d: dict[str, Any], section: str) -> Any:
    """A settings dataclass from a design section; unknown keys or types are errors."""
    known = set(cls.__dataclass_fields__)
    bad = set(d) - known
    if bad:
        raise ValueError(f"{section}: unknown keys {sorted(bad)}; allowed: {sorted(known)}")
    for k, v in d.items():
        default = cls.__dataclass_fields__[k].default
        if isinstance(default, float) and (isinstance(v, bool) or not isinstance(v, (int, float))):
            hint = ""
            if isinstance(v, str):
                try:
                    float(v)
                    hint = f" (YAML reads {v!r} as text: write the mantissa with a dot, e.g. 1.0e9)"
                except ValueError:
                    pass
            raise ValueError(f"{section}.{k}: a number{hint}, got {v!r}")
    return cls(**d)


@dataclass(frozen=True)
class SteadySettings:
    window_us: float = 50.0
    min_ms: float = 2.5
    max_ms: float = 10.0
    step_ms: float = 1.0  # how much longer an unsettled run goes on each time
    precision: float = 0.01  # target relative CI half-width
    confidence: float = 0.95
    stop_on: list[str] = field(default_factory=lambda: ["throughput_mbps", "latency_mean_us"])
    drain_us: float = 200.0  # after the run, so in-flight packets are accounted for

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SteadySettings:
        s = settings(cls, d, "steady")
        if not 0 < s.window_us or not 0 < s.min_ms <= s.max_ms or s.step_ms <= 0:
            raise ValueError("steady: need window_us > 0, 0 < min_ms <= max_ms, step_ms > 0")
        if not 0 < s.precision < 1 or not 0.5 < s.confidence < 1:
            raise ValueError("steady: precision in (0, 1), confidence in (0.5, 1)")
        if s.min_ms * 1000 < 2 * MSER_BATCH * MIN_KEEP * s.window_us:
            raise ValueError(f"steady: min_ms {s.min_ms} holds too few {s.window_us} us windows "
                             f"(MSER-5 needs at least {2 * MSER_BATCH * MIN_KEEP})")  # fmt: skip
        if s.drain_us < 0:
            raise ValueError("steady: drain_us >= 0")
        bad = [r for r in s.stop_on if r not in STOP_RESPONSES]
        if bad:
            raise ValueError(f"steady.stop_on: {bad}; windowed responses: {', '.join(STOP_RESPONSES)}")
        return s


def batch_means(xs: list[float], size: int) -> list[float]:
    n = len(xs) // size
    return [sum(xs[i * size : (i + 1) * size]) / size for i in range(n)]


def mser(xs: list[float], batch: int = MSER_BATCH) -> tuple[int, bool]:
    """MSER-`batch` truncation point in *windows* and whether the series settled (the
    cut lies in the first half).  Too short a series (fewer than 2 * MIN_KEEP batches)
    does not settle."""
    z = batch_means(xs, batch)
    m = len(z)
    if m < 2 * MIN_KEEP:
        return 0, False
    # suffix sums give every MSER(d) in one pass
    s1 = [0.0] * (m + 1)
    s2 = [0.0] * (m + 1)
    for j in range(m - 1, -1, -1):
        s1[j] = s1[j + 1] + z[j]
        s2[j] = s2[j + 1] + z[j] * z[j]
    best_d, best = 0, math.inf
    for d in range(0, m - MIN_KEEP + 1):
        n = m - d
        ss = max(0.0, s2[d] - s1[d] * s1[d] / n)
        v = ss / (n * n)
        if d == 0 or v < best * (1 - 1e-12):
            best, best_d = v, d
    return best_d * batch, best_d <= m // 2


def t_quantile(p: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(p, dof))


def mean_ci(xs: list[float], confidence: float = 0.95, nbatch: int = NBATCH) -> tuple[float, float]:
    """Mean and CI half-width from `nbatch` batch means (fewer when the series is short)."""
    if not xs:
        return math.nan, math.inf
    mean = sum(xs) / len(xs)
    b = min(nbatch, len(xs))
    if b < 2:
        return mean, math.inf
    z = batch_means(xs, len(xs) // b)
    zm = sum(z) / len(z)
    var = sum((v - zm) ** 2 for v in z) / (len(z) - 1)
    return mean, t_quantile(0.5 + confidence / 2, len(z) - 1) * math.sqrt(var / len(z))


@dataclass
class SeriesVerdict:
    cut: int  # windows cut as warm-up
    settled: bool
    mean: float
    half: float  # CI half-width
    strict: bool = True  # the MSER cut itself lies in the first half

    @property
    def rel(self) -> float:
        if self.half == 0:
            return 0.0
        return self.half / abs(self.mean) if self.mean else math.inf

    def precise(self, target: float) -> bool:
        return self.settled and self.rel <= target


def judge(xs: list[float], confidence: float, precision: float = 0.0) -> SeriesVerdict:
    """MSER-5 cut, then the mean and its CI over what remains.  A cut in the second
    half still counts as settled when it moves the mean of the second half by less
    than `precision` (relative): the series is then flat to within the target, and
    MSER only trimmed noise."""
    cut, strict = mser(xs)
    mean, half = mean_ci(xs[cut:], confidence)
    settled = strict
    if not strict and precision > 0 and len(xs) >= 2 * MSER_BATCH * MIN_KEEP and math.isfinite(mean):
        tail = xs[len(xs) // 2 :]
        settled = abs(sum(tail) / len(tail) - mean) <= precision * abs(mean)
    return SeriesVerdict(cut, settled, mean, half, strict)
