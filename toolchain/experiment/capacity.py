"""Capacity: the RFC 2544 throughput, the highest offered rate with zero loss.

RFC 2544 (section 26.1) offers frames at a rate for a trial, counts what comes out,
and searches for the highest rate at which nothing is lost.  Here the rate is per
port: the emulated ports and wire (the traffic spec's `link_bps`, which the MSF
follows) run at that rate, above 1 Gb/s when the router has headroom.  A trial passes
when no packet is lost to a resource (no receive thread, full RBUF, TBUF underrun,
no buffer, full queue, full exception ring) during the trial and a drain after it,
*and* the output keeps pace with the input over the second half of the trial (within
`keep_pace`): a trial of a millisecond cannot wait for a slowly growing backlog to
overflow the queues as RFC 2544's 60-second trials would, so a backlog that grows is
counted as loss to come.

The search: a first trial at `max_mbps` (passing it means the capacity is at least
that: censored); its output rate u is near the capacity, so the next trial offers u;
from there the bracket widens upwards (or downwards) in steps that double from
`resolution` until a trial fails (passes), then bisection narrows it until it is
narrower than `resolution` relative.  The capacity is the highest rate that passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_TRIALS = 16


@dataclass(frozen=True)
class CapacitySettings:
    min_mbps: float = 100.0  # per port: lowest rate tried
    max_mbps: float = 2500.0  # per port: highest rate tried (SPI-4.2 carries 12.8 Gb/s)
    resolution: float = 0.01  # relative width of the final bracket
    trial_ms: float = 1.0
    drain_us: float = 200.0
    keep_pace: float = 0.005  # output may lag the input by this fraction (second half)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CapacitySettings:
        from .steady import settings

        s = settings(cls, d, "capacity")
        if not 0 < s.min_mbps < s.max_mbps:
            raise ValueError("capacity: need 0 < min_mbps < max_mbps")
        if not 0 < s.resolution < 0.5 or s.trial_ms <= 0 or s.drain_us < 0 or not 0 <= s.keep_pace < 0.5:
            raise ValueError("capacity: resolution in (0, 0.5), trial_ms > 0, drain_us >= 0, "
                             "keep_pace in [0, 0.5)")  # fmt: skip
        return s


@dataclass
class Trial:
    rate_mbps: float  # per port, offered
    passed: bool
    offered_mbps: float  # all ports, wire bits
    out_mbps: float  # all ports, wire bits, second half of the trial
    lost: int
    detail: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"rate_mbps": round(self.rate_mbps, 3), "passed": self.passed,
                "offered_mbps": round(self.offered_mbps, 1), "out_mbps": round(self.out_mbps, 1),
                "lost": self.lost, **self.detail}  # fmt: skip


def search(trial: Callable[[float], Trial], s: CapacitySettings) -> dict[str, Any]:
    """Run trials (per-port rate in Mb/s -> Trial) and return the capacity and the trials."""
    trials: list[Trial] = []

    def run(rate: float) -> Trial:
        t = trial(rate)
        trials.append(t)
        return t

    def result(best: Trial | None, censored: str = "") -> dict[str, Any]:
        return {
            "capacity_per_port_mbps": round(best.rate_mbps, 3) if best else 0.0,
            "capacity_mbps": round(best.offered_mbps, 1) if best else 0.0,
            "capacity_censored": censored,
            "trials": [t.as_dict() for t in trials],
            "saturation": trials[0].as_dict(),
            "best": best.as_dict() if best else None,
        }

    top = run(s.max_mbps)
    if top.passed:
        return result(top, "above")  # at least max_mbps per port
    ratio = top.out_mbps / top.offered_mbps if top.offered_mbps else 0.0
    first = run(max(s.min_mbps, min(s.max_mbps, s.max_mbps * ratio)))
    lo: Trial | None = first if first.passed else None
    hi = top if first.passed else first
    step = s.resolution
    while lo is not None and len(trials) < MAX_TRIALS:  # widen upwards
        rate = lo.rate_mbps * (1 + step)
        if rate >= hi.rate_mbps:
            break
        t = run(rate)
        if not t.passed:
            hi = t
            break
        lo, step = t, step * 2
    while lo is None and len(trials) < MAX_TRIALS:  # widen downwards
        rate = max(s.min_mbps, hi.rate_mbps * (1 - step))
        t = run(rate)
        if t.passed:
            lo = t
        elif rate <= s.min_mbps:
            return result(None, "below")  # loses packets even at min_mbps
        else:
            hi, step = t, step * 2
    while lo is not None and hi.rate_mbps - lo.rate_mbps > s.resolution * lo.rate_mbps and len(trials) < MAX_TRIALS:
        t = run((lo.rate_mbps + hi.rate_mbps) / 2)
        if t.passed:
            lo = t
        else:
            hi = t
    return result(lo)
