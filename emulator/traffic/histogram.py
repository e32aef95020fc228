"""Latency percentiles in bounded memory: an HDR-style histogram of integer nanoseconds.

Values below 2**16 ns (65.536 us) are counted exactly; above, each bucket keeps the
value's 16 most significant bits, so a reported percentile is the lower bound of its
bucket, below the true value by less than 2**-15 of it (0.003 %: under 2 ns at 65 us,
31 ns at 1 ms).  The mean and the maximum are exact.  Memory: one dict entry per
distinct bucket seen (a few thousand in a router run; at most about 850,000).

Percentiles follow `pct` of npkit.toolchain.system.router_run (the rank
min(n - 1, int(q / 100 * n)) of the sorted values), so below 65.536 us they are exactly
what sorting every latency gives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

SIG_BITS = 16
EXACT_BELOW = 1 << SIG_BITS


def bucket(v: int) -> int:
    """The lower bound of v's bucket (v itself below 2**16)."""
    if v < EXACT_BELOW:
        return v
    shift = v.bit_length() - SIG_BITS
    return (v >> shift) << shift


class LatencyHistogram:
    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.total = 0
        self.max: int | None = None

    def add(self, v: int) -> None:
        b = v if v < EXACT_BELOW else bucket(v)
        c = self.counts
        c[b] = c.get(b, 0) + 1
        self.n += 1
        self.total += v
        if self.max is None or v > self.max:
            self.max = v

    def add_many(self, values: Iterable[int]) -> None:
        """add() for each of `values`, in bulk (a drained batch of departures)."""
        vs = list(values)
        if not vs:
            return
        top = max(vs)
        counts = Counter(vs) if top < EXACT_BELOW else Counter(map(bucket, vs))
        c = self.counts
        for b, k in counts.items():
            c[b] = c.get(b, 0) + k
        self.n += len(vs)
        self.total += sum(vs)
        if self.max is None or top > self.max:
            self.max = top

    def percentile(self, q: float) -> int:
        """The value at rank min(n-1, int(q/100*n)) of the sorted values (its bucket's lower
        bound above 2**16 ns); 0 when empty."""
        if not self.n:
            return 0
        rank = min(self.n - 1, int(q / 100 * self.n))
        seen = 0
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen > rank:
                return b
        return max(self.counts)

    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    def summary_us(self) -> dict[str, float]:
        """{"mean", "p50", "p99", "max"} in microseconds, 3 decimals."""
        if not self.n:
            return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
        return {"mean": round(self.total / self.n / 1000.0, 3), "p50": round(self.percentile(50) / 1000.0, 3),
                "p99": round(self.percentile(99) / 1000.0, 3), "max": round((self.max or 0) / 1000.0, 3)}  # fmt: skip

    def copy(self) -> LatencyHistogram:
        h = LatencyHistogram()
        h.counts, h.n, h.total, h.max = dict(self.counts), self.n, self.total, self.max
        return h
