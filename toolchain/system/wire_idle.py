"""How long each output port's wire stood idle once the router began dropping packets for
it: the measure of the queue_full drops a router could have avoided (RouterRun's
`expected_overload_drops`, README "Using npkit in CI").

A port's wire is busy from the first byte of a frame's preamble to the end of its gap
(preamble, FCS and gap: the traffic's wire overhead, as the MSF counts them).  The
stretches between are gaps.  Once a packet for the port has been dropped for want of
queue space, the router had something to send: every gap from that packet's arrival on
(and, if the wire went quiet for good while later ones were still dropped, the time up
to the last of those) is idle time the router owes.  Gaps before the first drop are not:
the first packets' crossing of the router, a port that was not yet oversubscribed.

Gaps are kept for the last `keep_ns` only (a lightly loaded port has one per frame):
until a port's first drop is known, which the run learns when it attributes drop
counters (HORIZON_NS after the packet arrived at the latest), then only their sum.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np


class WireIdle:
    """Gaps on each port's wire, from a TrafficRun's batches of departures (`on_tx`)."""

    def __init__(self, rate_bps: int, over: Any, keep_ns: int) -> None:
        """`over`: bytes each frame adds on the wire, by port (preamble, FCS, gap)."""
        self.rate = int(rate_bps)
        self.over = over
        self.keep_ns = keep_ns
        self.last_end: dict[int, int] = {}  # port -> end of its last frame's gap, ns
        self.gaps: dict[int, deque[tuple[int, int]]] = {}  # port -> (from, to) ns, recent ones
        self.since: dict[int, int] = {}  # port -> ns from which its idle time is owed
        self.idle: dict[int, int] = {}  # port -> ns idle since then

    def wire_ns(self, port: int, nbytes: int) -> int:
        """How long a frame of `nbytes` (as the pcap holds it) takes on port's wire, gap
        included."""
        return -(-(nbytes + self.over[port]) * 8 * 10**9 // self.rate)

    def departed(self, d: Any) -> None:
        """A batch of departures (port, first byte's ns and length of each, time order)."""
        ports = np.frombuffer(d.port, dtype=np.uint8)
        t = np.frombuffer(d.t, dtype=np.uint64).astype(np.int64)
        ln = np.frombuffer(d.len, dtype=np.uint16).astype(np.int64)
        for p in map(int, np.unique(ports)):
            sel = ports == p
            starts = t[sel]
            ends = starts + -(-(ln[sel] + int(self.over[p])) * 8 * 10**9 // self.rate)
            before = np.concatenate(([self.last_end.get(p, 0)], ends[:-1]))
            self.last_end[p] = int(ends[-1])
            gap = starts - before > 1  # (a ns of rounding is no gap)
            self._add(p, zip(before[gap].tolist(), starts[gap].tolist(), strict=True), int(starts[-1]))

    def _add(self, port: int, gaps: Any, now: int) -> None:
        if port in self.since:
            s = self.since[port]
            self.idle[port] += sum(max(0, b - max(a, s)) for a, b in gaps)
            return
        q = self.gaps.setdefault(port, deque())
        q.extend(gaps)
        while q and q[0][1] < now - self.keep_ns:
            q.popleft()

    def owed_from(self, port: int, t: int) -> None:
        """The router had a packet for `port` from `t` on (one dropped for want of queue
        space arrived then): its idle time counts from the earliest such t."""
        if port in self.since:  # (drops are noted in the order their packets arrived)
            return
        q = self.gaps.pop(port, deque())
        self.since[port] = t
        self.idle[port] = sum(max(0, b - max(a, t)) for a, b in q)

    def idle_ns(self, port: int, until: int, now: int) -> int:
        """Idle ns owed on port: the gaps since its first drop, and the time from the end
        of its last frame (or the first drop, if later) to `until` (the last drop's
        packet's end), never past `now`."""
        if port not in self.since:
            return 0
        quiet_from = max(self.last_end.get(port, 0), self.since[port])
        return self.idle[port] + max(0, min(until, now) - quiet_from)
