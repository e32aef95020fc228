"""How long each output port's wire stood idle while the router was dropping packets for
it: the measure of the queue_full drops a router could have avoided (RouterRun's
`expected_overload_drops`, README "Using npkit in CI").

A port's wire is busy from the first byte of a frame's preamble to the end of its gap
(preamble, FCS and gap: the traffic's wire overhead, as the MSF counts them).  The
stretches between are gaps.  From the first packet dropped for the port for want of
queue space to the last one (by when each had wholly arrived), the router had something
to send: the gaps within that stretch (and, if the wire went quiet for good while
packets were still dropped, the time up to the last of those) are idle time the router
owes.  Gaps before the first drop are not (the first packets' crossing of the router, a
port not yet oversubscribed), nor are those after the last (the overload over, nothing
to send).

Gaps after the last drop known are kept for `keep_ns` (a lightly loaded port has one
per frame): the run learns of a drop when it attributes the drop counters, HORIZON_NS
after the packet arrived at the latest.  A port with no drop for longer than that is
taken to have left its overload: a later drop starts its stretch afresh.
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
        self.pending: dict[int, deque[tuple[int, int]]] = {}  # port -> (from, to) ns: gaps not (yet) owed
        self.since: dict[int, int] = {}  # port -> when the stretch of drops began (ns)
        self.until: dict[int, int] = {}  # port -> ... and its last drop so far
        self.idle: dict[int, int] = {}  # port -> ns idle within such stretches

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
        q = self.pending.setdefault(port, deque())
        q.extend(gaps)
        self._settle(port)
        while q and q[0][1] < now - self.keep_ns:
            q.popleft()

    def owed_from(self, port: int, t: int) -> None:
        """A packet for `port` dropped for want of queue space had wholly arrived at `t`
        (drops are noted in the order their packets arrived): the router had something
        for the wire from then on, at least until the port's last such drop."""
        if port not in self.since or t - self.until[port] > self.keep_ns:
            self.since[port] = self.until[port] = t
            self.idle.setdefault(port, 0)
        self.until[port] = max(self.until[port], t)
        self._settle(port)

    def _settle(self, port: int) -> None:
        """The pending gaps that begin before the port's last drop: owed, within the stretch."""
        if port not in self.since:
            return
        s, u = self.since[port], self.until[port]
        q = self.pending.get(port)
        while q and q[0][0] < u:
            a, b = q.popleft()
            self.idle[port] += max(0, min(b, u) - max(a, s))
            if b > u:
                q.appendleft((u, b))
                break

    def idle_ns(self, port: int, until: int, now: int) -> int:
        """Idle ns owed on port: the gaps within its stretches of drops, and the time from
        the end of its last frame (or the last stretch's first drop, if later) to `until`
        (the last drop's packet's end), never past `now`."""
        if port not in self.since:
            return 0
        quiet_from = max(self.last_end.get(port, 0), self.since[port])
        return self.idle[port] + max(0, min(until, now) - quiet_from)
