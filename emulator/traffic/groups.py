"""Groups of packets with their own account: an application's model may classify every
input frame into a named group (the SPP's slices, a tenant, a service ...), and a run
reports each group as it reports ports: offered, forwarded, dropped by reason, excepted,
latency percentiles, and whether the group's packets got the model's outcomes.

In the application's model.py::

    from npkit.emulator.traffic.groups import group

    def slice_rows(ctx):                       # the groups, in report order, with their facts
        return [{"name": "v4a", "code_option": "ipv4"}, ...]

    @group(key="slices", info=slice_rows)
    def slice_of(frame, in_port, ctx):         # the group of an input frame, or None
        ...

`key` is the run JSON's key for the list (`slices`); `ctx` is the standalone model's
context (its `setup` state) or None for a rule model.  A frame in no group is in the
run's totals only.  `GroupTally(run, grouper, ctx, reasons)` keeps the account through the
TrafficRun's hooks (on_window, on_departure, on_drop, on_exception, on_forget).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .fate import is_resource_drop
from .histogram import LatencyHistogram

NONE = 255  # a frame in no group
MAX_GROUPS = 255
_KIND = {0: "forward", 1: "drop", 2: "exception"}  # cpkt FORWARD, DROP, EXCEPTION


@dataclass(frozen=True)
class Grouper:
    """An application's classifier (`@group`)."""

    fn: Callable[[bytes, int, Any], str | None]
    key: str
    info: Callable[[Any], list[dict[str, Any]]] | None
    line: int


def group(key: str = "groups", info: Callable[[Any], list[dict[str, Any]]] | None = None) -> Callable[..., Grouper]:
    """Mark `fn(frame, in_port, ctx) -> group name | None` as the model's classifier."""

    def make(fn: Callable[[bytes, int, Any], str | None]) -> Grouper:
        code = getattr(fn, "__code__", None)
        return Grouper(fn, key, info, code.co_firstlineno if code else 0)

    return make


@dataclass
class _Account:
    row: dict[str, Any]
    offered: int = 0
    forwarded: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    excepted: Counter[str] = field(default_factory=Counter)
    mismatches: int = 0
    lost: int = 0  # resource drops (queue_full, rbuf_full ...) of packets the model forwards or excepts
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    bins: Counter[int] = field(default_factory=Counter)  # departures by time bin (bin_ns), when set
    lat_bins: Counter[int] = field(default_factory=Counter)  # ... and the sum of their latencies, ns


class GroupTally:
    """The per-group account of a TrafficRun (see the module doc)."""

    def __init__(self, run: Any, grouper: Grouper, ctx: Any, reasons: Any = None) -> None:
        self.run, self.grouper, self.ctx, self.reasons = run, grouper, ctx, reasons
        rows = list(grouper.info(ctx)) if grouper.info is not None else []
        self.accounts: list[_Account] = [_Account(dict(r)) for r in rows[:MAX_GROUPS]]
        self.index = {a.row["name"]: k for k, a in enumerate(self.accounts)}
        self.bin_ns = 0  # > 0: each group's departures are also counted by time bin (experiments' windows)
        run.on_window.append(self._window)
        run.on_departure.append(self._departed)
        run.on_drop.append(self._dropped)
        run.on_exception.append(self._excepted)
        run.on_forget.append(self._forget)

    def _gid(self, name: str | None) -> int:
        if name is None:
            return NONE
        k = self.index.get(name)
        if k is None:
            if len(self.accounts) >= MAX_GROUPS:
                return NONE
            k = self.index[name] = len(self.accounts)
            self.accounts.append(_Account({"name": name}))
        return k

    def _window(self, c: Any) -> None:
        w = c.w
        fn, ctx, data = self.grouper.fn, self.ctx, w.data
        gids = bytearray(len(w))
        for i in range(len(w)):
            o = w.off[i]
            g = gids[i] = self._gid(fn(bytes(data[o : o + w.lens[i]]), w.ports[i], ctx))
            if g != NONE:
                self.accounts[g].offered += 1
        c.extra["group"] = gids
        c.extra["group_why"] = {}

    def _of(self, pid: int) -> tuple[Any, int, int]:
        c = self.run.chunk_of(pid)
        if c is None or "group" not in c.extra:
            return None, -1, NONE
        i = pid - c.first
        return c, i, c.extra["group"][i]

    def _departed(self, dep: Any) -> None:
        c, i = dep.chunk, dep.i
        if c is None or i < 0 or "group" not in c.extra:
            return
        g = c.extra["group"][i]
        if g != NONE:
            a = self.accounts[g]
            a.forwarded += 1
            lat = max(0, dep.t - c.w.times[i])
            a.latency.add(lat)
            if self.bin_ns:
                a.bins[dep.t // self.bin_ns] += 1
                a.lat_bins[dep.t // self.bin_ns] += lat

    def _dropped(self, pid: int, reason: str) -> None:
        c, i, g = self._of(pid)
        if c is not None:
            c.extra["group_why"][i] = reason
        if g != NONE:
            self.accounts[g].dropped[reason] += 1

    def _excepted(self, pid: int, reason: str) -> None:
        c, i, g = self._of(pid)
        if c is not None:
            c.extra["group_why"][i] = reason
        if g != NONE:
            self.accounts[g].excepted[reason] += 1

    def wrong(self, pid: int) -> None:
        """Packet `pid` left with the wrong port or bytes (the run's judge found it): a
        mismatch of its group."""
        _, _, g = self._of(pid)
        if g != NONE:
            self.accounts[g].mismatches += 1

    def _forget(self, c: Any) -> None:
        """A window is let go (every packet has a fate): count what the model did not expect."""
        v, gids = c.verdicts, c.extra.get("group")
        if v is None or gids is None:
            return
        why = c.extra["group_why"]
        for i, g in enumerate(gids):
            if g == NONE:
                continue
            want = _KIND.get(v.kind[i])
            fate = c.fate[i]
            got = "forward" if fate & 1 else "drop" if fate & 2 else "exception" if fate & 4 else None
            if got is None or want is None:  # want None: PYTHON, the control plane's judge has it
                continue
            if got == "drop" and want != "drop" and is_resource_drop(why.get(i, ""), self.reasons):
                self.accounts[g].lost += 1
            elif got != want or (got != "forward" and why.get(i) != v.names[v.reason[i]]):
                self.accounts[g].mismatches += 1

    def rates_mpps(self, lo_bin: int, hi_bin: int) -> dict[str, float]:
        """Each group's departures a second (millions) over time bins lo_bin..hi_bin-1."""
        seconds = max(1, hi_bin - lo_bin) * self.bin_ns / 1e9
        return {a.row["name"]: sum(a.bins[k] for k in range(lo_bin, hi_bin)) / seconds / 1e6 for a in self.accounts}

    def latency_means_us(self, lo_bin: int, hi_bin: int) -> dict[str, float]:
        """Each group's mean latency (us) of the departures in time bins lo_bin..hi_bin-1 (NaN: none)."""
        out = {}
        for a in self.accounts:
            n = sum(a.bins[k] for k in range(lo_bin, hi_bin))
            out[a.row["name"]] = sum(a.lat_bins[k] for k in range(lo_bin, hi_bin)) / n / 1000 if n else float("nan")
        return out

    def report(self) -> list[dict[str, Any]]:
        """The groups' rows for the run's JSON (`key`), in the order of `info`, then of first sight."""
        for c in list(self.run.chunks):  # windows still held at the end: judge what has a fate
            self._forget(c)
        out = []
        for a in self.accounts:
            lat = a.latency
            in_flight = a.offered - a.forwarded - sum(a.dropped.values()) - sum(a.excepted.values())
            out.append({**a.row, "offered": a.offered, "forwarded": a.forwarded, "dropped": dict(a.dropped),
                        "excepted": dict(a.excepted), "in_flight": in_flight,
                        "latency_us": lat.summary_us() if lat.counts else None,
                        "lost": a.lost, "mismatches": a.mismatches, "verdict": "ok" if a.mismatches == 0 else "fail"})  # fmt: skip
        return out
