"""Traffic as a run consumes it: input packets in arrival order, from a spec or captures,
read in windows of arrival time so that a run of any length holds only the packets it
has not finished with.

    src = load_traffic_source("examples/traffic/min64.yaml", duration_ns=1_000_000)
    reader = src.reader()              # a fresh pass over the packets (one per run)
    w = reader.take(100_000)           # npkit.emulator.traffic.window.Window: arrivals < 100 us
    tr = src.collect()                 # everything in memory (small runs, tools, tests)

A source is a description (`SpecTraffic`: a spec, generated as it is read; `CaptureTraffic`:
a directory of port<N>.pcap; `Traffic`: packets already in memory); `reader()` starts a
pass over it, so one source can feed several runs.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dataset import load_manifest, port_pcaps
from .frames import TAG
from .pcap import PcapError, PcapReader
from .window import Window, window_of

__all__ = ["TAG", "CaptureTraffic", "SpecTraffic", "Traffic", "TrafficError", "TrafficReader", "TrafficSource",
           "Window", "load_traffic_source"]  # fmt: skip


class TrafficError(ValueError):
    """A traffic source that cannot be read; the message says why."""


class TrafficReader:
    """One pass over a source: `take(t)` gives the packets arriving before t not taken yet."""

    def take(self, until_ns: int) -> Window | None:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """No packet left."""
        raise NotImplementedError


class TrafficSource:
    """Where a run's packets come from, the wire model of their ports, and the control
    plane's part of a spec (npkit.emulator.traffic.spec): timed route changes
    (RouteChange, in time order) and the neighbours that answer ARP (IPv4 -> MAC)."""

    wire: dict[int, tuple[int, int, int]]  # port: (preamble, fcs, ifg)
    link_bps: int | None
    source: str
    route_changes: list[Any]
    neighbours: dict[int, bytes]

    def reader(self) -> TrafficReader:
        raise NotImplementedError

    def port_set(self) -> set[int]:
        """The input ports the packets come in on."""
        raise NotImplementedError

    def collect(self) -> Traffic:
        """Every packet in memory."""
        tr = Traffic(wire=dict(self.wire), link_bps=self.link_bps, source=self.source,
                     route_changes=list(self.route_changes), neighbours=dict(self.neighbours))  # fmt: skip
        r = self.reader()
        while not r.done:
            w = r.take(1 << 63)
            if w is None:
                break
            for i in range(len(w)):
                tr.add(w.times[i], w.ports[i], w.frame(i))
        return tr


@dataclass
class Traffic(TrafficSource):
    """Input packets in memory, in id order (= arrival order), columnar."""

    times: array[int] = field(default_factory=lambda: array("Q"))
    ports: array[int] = field(default_factory=lambda: array("B"))
    lens: array[int] = field(default_factory=lambda: array("H"))
    frames: list[bytes] = field(default_factory=list)
    wire: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # port: (preamble, fcs, ifg)
    link_bps: int | None = None
    source: str = ""
    route_changes: list[Any] = field(default_factory=list)
    neighbours: dict[int, bytes] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.frames)

    def add(self, time_ns: int, port: int, data: bytes) -> None:
        self.times.append(time_ns)
        self.ports.append(port)
        self.lens.append(len(data))
        self.frames.append(data)

    def reader(self) -> TrafficReader:
        return _MemoryReader(self)

    def port_set(self) -> set[int]:
        return set(self.ports)

    def collect(self) -> Traffic:
        return self


class _MemoryReader(TrafficReader):
    def __init__(self, tr: Traffic) -> None:
        self.tr = tr
        self.pos = 0

    @property
    def done(self) -> bool:
        return self.pos >= len(self.tr)

    def take(self, until_ns: int) -> Window | None:
        tr, lo = self.tr, self.pos
        hi = lo
        n = len(tr)
        while hi < n and tr.times[hi] < until_ns:
            hi += 1
        if hi == lo:
            return None
        self.pos = hi
        return window_of(lo, list(tr.times[lo:hi]), list(tr.ports[lo:hi]), tr.frames[lo:hi])


class SpecTraffic(TrafficSource):
    """A traffic spec, generated as it is read (npkit.emulator.traffic.generator.SpecReader)."""

    def __init__(self, spec: Any, source: str = "") -> None:
        self.spec = spec
        self.source = source
        self.link_bps = int(spec.link_bps)
        self.wire = {p.index: (p.wire.preamble, p.wire.fcs, p.wire.ifg) for p in spec.ports}
        self.route_changes = list(spec.route_changes)
        self.neighbours = dict(spec.neighbours)

    def reader(self) -> TrafficReader:
        from .generator import SpecReader

        return _SpecReader(SpecReader(self.spec))

    def port_set(self) -> set[int]:
        return {p.index for p in self.spec.ports if p.enabled}


class _SpecReader(TrafficReader):
    def __init__(self, r: Any) -> None:
        self.r = r

    @property
    def done(self) -> bool:
        return bool(self.r.done)

    def take(self, until_ns: int) -> Window | None:
        from .spec import SpecError

        try:
            return self.r.take(until_ns)
        except SpecError as e:
            raise TrafficError(str(e)) from None


class CaptureTraffic(TrafficSource):
    """A directory of port<N>.pcap (+ manifest.json for the wire model), read as it goes;
    ids are the rank in (timestamp, port, index) order (npkit.emulator.traffic.dataset)."""

    def __init__(self, path: Path, duration_ns: int | None) -> None:
        self.path = path
        self.source = str(path)
        self.duration_ns = duration_ns
        self.pcaps = port_pcaps(path)
        if not self.pcaps:
            raise TrafficError(f"{path}: no port<N>.pcap files")
        self.wire = {}
        self.link_bps = None
        self.route_changes, self.neighbours = [], {}
        man = load_manifest(path)
        self.manifest = man
        if man:
            self.link_bps = int(man.get("link_bps") or 0) or None
            self._control_part(man.get("spec") or {})
            for p in man.get("ports", []):
                w = p.get("wire", {})
                self.wire[int(p["port"])] = (int(w.get("preamble", 8)), int(w.get("fcs", 4)), int(w.get("ifg", 12)))

    def _control_part(self, spec: dict[str, Any]) -> None:
        """Route changes and neighbours of the spec the captures were generated from."""
        from .spec_forms import parse_neighbours, parse_route_changes

        try:
            self.route_changes = sorted(parse_route_changes(spec.get("route_changes")), key=lambda c: c.at_ns)
            self.neighbours = parse_neighbours(spec.get("neighbours"))
        except ValueError as e:
            raise TrafficError(f"{self.path}: manifest spec: {e}") from None

    def reader(self) -> TrafficReader:
        return _CaptureReader(self)

    def port_set(self) -> set[int]:
        return set(self.pcaps)


class _CaptureReader(TrafficReader):
    def __init__(self, src: CaptureTraffic) -> None:
        self.src = src
        self.readers = {p: PcapReader(path) for p, path in src.pcaps.items()}
        cols = (src.manifest or {}).get("packets") or {}
        self.check_ports, self.check_times = cols.get("port"), cols.get("time_ns")
        self.merged: Iterator[tuple[int, int, int, bytes]] = heapq.merge(
            *(self._keyed(p, r) for p, r in self.readers.items()))  # fmt: skip
        self.next_id = 0
        self.read = 0  # records read from the pcaps
        self.head = self._next()

    @staticmethod
    def _keyed(port: int, reader: PcapReader) -> Iterator[tuple[int, int, int, bytes]]:
        return ((rec.timestamp_ns, port, i, rec.data) for i, rec in enumerate(reader))

    def _next(self) -> tuple[int, int, int, bytes] | None:
        try:
            item = next(self.merged, None)
        except PcapError as e:
            raise TrafficError(str(e)) from None
        end = self.src.duration_ns
        if item is not None:
            self.read += 1
        elif self.check_ports is not None and self.read != len(self.check_ports):
            raise TrafficError(f"{self.src.path}: manifest lists {len(self.check_ports)} packets, pcaps hold "
                               f"{self.read}")  # fmt: skip
        if item is None or (end is not None and item[0] >= end):
            for r in self.readers.values():
                r.close()
            return None
        return item

    @property
    def done(self) -> bool:
        return self.head is None

    def take(self, until_ns: int) -> Window | None:
        times: list[int] = []
        ports: list[int] = []
        frames: list[bytes] = []
        while self.head is not None and self.head[0] < until_ns:
            t, port, _, data = self.head
            pid = self.next_id + len(times)
            if self.check_ports is not None and self.check_times is not None:
                self._check(pid, port, t)
            times.append(t)
            ports.append(port)
            frames.append(data)
            self.head = self._next()
        if not times:
            return None
        w = window_of(self.next_id, times, ports, frames)
        self.next_id += len(times)
        return w

    def _check(self, pid: int, port: int, t: int) -> None:
        ports, times = self.check_ports, self.check_times
        assert ports is not None and times is not None
        if pid >= len(ports):
            raise TrafficError(f"{self.src.path}: the pcaps hold more packets than the manifest lists ({len(ports)})")
        if ports[pid] != port or times[pid] != t:
            raise TrafficError(f"{self.src.path}: packet {pid} is port {port} at {t} ns in the pcaps but port "
                               f"{ports[pid]} at {times[pid]} ns in the manifest")  # fmt: skip


def load_traffic_source(path: str | Path, duration_ns: int | None = None,
                        overrides: dict[str, Any] | None = None) -> TrafficSource:
    """A traffic spec (YAML, generated as the run reads it) or a directory of port<N>.pcap
    (+ manifest.json for the wire model).  `duration_ns` keeps the packets that arrive
    before it; for a spec it replaces the spec's own duration_ns.  `overrides` replace
    top-level keys of a spec (seed, router, link_bps, ...)."""
    path = Path(path)
    if path.is_dir():
        from .spec_forms import MAX_DURATION_NS

        if duration_ns is not None and not 0 <= duration_ns <= MAX_DURATION_NS:  # a spec's own bound
            raise TrafficError(f"{path}: duration_ns must be in 0..{MAX_DURATION_NS} ns (60 s), got {duration_ns}")
        try:
            return CaptureTraffic(path, duration_ns)
        except (OSError, ValueError) as e:
            raise TrafficError(str(e)) from None
    from .pcap import looks_like_pcap
    from .spec import SpecError, load_spec

    if looks_like_pcap(path):
        raise TrafficError(f"{path}: a pcap file, not a traffic spec; give the directory that holds it as "
                           "port<N>.pcap (N the input port), or a traffic spec (YAML)")  # fmt: skip
    try:
        extra = {} if duration_ns is None else {"duration_ns": duration_ns}
        spec = load_spec(path, overrides={**(overrides or {}), **extra})
    except (SpecError, OSError) as e:
        raise TrafficError(str(e)) from None
    return SpecTraffic(spec, str(path))
