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

The run learns of a drop when it attributes the drop counters, HORIZON_NS after the
packet arrived at the latest, so the departures of the last `keep_ns` are kept as they
came (arrays, nothing per frame) and a port's gaps are found only once it has a drop;
from then on each batch's gaps of that port are kept until a later drop settles them or
they are `keep_ns` old.  A port with no drop for longer than that is taken to have left
its overload: a later drop starts its stretch afresh.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np


class _Batch(NamedTuple):
    """A drained batch's departures without the frames' bytes: port, first byte's ns, length."""

    port: Any
    t: Any
    len: Any


class WireIdle:
    """Gaps on each port's wire, from a TrafficRun's batches of departures (`on_tx`)."""

    def __init__(self, rate_bps: int, over: Any, keep_ns: int) -> None:
        """`over`: bytes each frame adds on the wire, by port (preamble, FCS, gap)."""
        self.rate = int(rate_bps)
        self.over = [int(x) for x in over]
        self.keep_ns = keep_ns
        self.recent: deque[tuple[int, _Batch]] = deque()  # (last start ns, a drained batch's departures)
        self.last_end: dict[int, int] = {}  # port with drops -> end of its last frame's gap, ns
        self.pending: dict[int, np.ndarray] = {}  # ... -> its gaps (from, to: ns) not (yet) owed
        self.since: dict[int, int] = {}  # ... -> when its stretch of drops began (ns)
        self.until: dict[int, int] = {}  # ... -> and its last drop so far
        self.idle: dict[int, int] = {}  # ... -> ns idle within such stretches

    def wire_ns(self, port: int, nbytes: int) -> int:
        """How long a frame of `nbytes` (as the pcap holds it) takes on port's wire, gap
        included."""
        return -(-(nbytes + self.over[port]) * 8 * 10**9 // self.rate)

    def departed(self, d: Any) -> None:
        """A batch of departures (port, first byte's ns and length of each, time order):
        kept as it is for keep_ns (numpy only once a port has drops: a run without them
        does not import it)."""
        if not len(d.t):
            return
        now = int(d.t[-1])
        self.recent.append((now, _Batch(d.port, d.t, d.len)))
        while self.recent[0][0] < now - self.keep_ns:
            self.recent.popleft()
        for p in self.since:
            self._take(p, d)
            self._settle(p)
            q = self.pending[p]
            self.pending[p] = q[q[:, 1] >= now - self.keep_ns]

    def _take(self, port: int, d: Any) -> None:
        """port's gaps in batch d: to its pending ones."""
        import numpy as np

        ports = np.frombuffer(d.port, dtype=np.uint8)
        sel = ports == port
        if not sel.any():
            return
        s = np.frombuffer(d.t, dtype=np.uint64)[sel].astype(np.int64)
        e = s + -(-(np.frombuffer(d.len, dtype=np.uint16)[sel].astype(np.int64) + self.over[port]) * 8 * 10**9 // self.rate)
        before = np.concatenate(([self.last_end.get(port, int(s[0]))], e[:-1]))
        self.last_end[port] = int(e[-1])
        gap = s - before > 1  # (a ns of rounding is no gap)
        if gap.any():
            self.pending[port] = np.concatenate((self.pending[port], np.stack((before[gap], s[gap]), axis=1)))

    def owed_from(self, port: int, t: int) -> None:
        """A packet for `port` dropped for want of queue space had wholly arrived at `t`
        (drops are noted in the order their packets arrived): the router had something
        for the wire from then on, at least until the port's last such drop."""
        if port not in self.since:
            import numpy as np

            self.pending[port] = np.zeros((0, 2), dtype=np.int64)
            for _now, d in self.recent:  # the gaps of the last keep_ns
                self._take(port, d)
        if port not in self.since or t - self.until[port] > self.keep_ns:
            self.since[port] = self.until[port] = t
            self.idle.setdefault(port, 0)
        self.until[port] = max(self.until[port], t)
        self._settle(port)

    def _settle(self, port: int) -> None:
        """The pending gaps that begin before the port's last drop: owed, within the stretch."""
        import numpy as np

        s, u = self.since[port], self.until[port]
        q = self.pending[port]
        if not q.size:
            return
        due = q[:, 0] < u
        a, b = q[due, 0], q[due, 1]
        self.idle[port] += int(np.maximum(0, np.minimum(b, u) - np.maximum(a, s)).sum())
        rest = q[~due]
        over = b > u  # a gap across the last drop: its part after it stays pending
        if over.any():
            rest = np.concatenate((np.stack((np.full(int(over.sum()), u), b[over]), axis=1), rest))
        self.pending[port] = rest

    def idle_ns(self, port: int, now: int) -> int:
        """Idle ns owed on port: the gaps within its stretches of drops, and the time from
        the end of its last frame (or the last stretch's first drop, if later) to its last
        drop's packet's end, never past `now`."""
        if port not in self.since:
            return 0
        quiet_from = max(self.last_end.get(port, 0), self.since[port])
        return self.idle[port] + max(0, min(self.until[port], now) - quiet_from)
