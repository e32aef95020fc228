"""Traffic as a run consumes it: input packets in arrival order, from a spec or captures.

    tr = load_traffic_source("examples/traffic/min64.yaml", duration_ns=1_000_000)
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dataset import load_manifest, load_traffic, port_pcaps
from .generator import TAG

__all__ = ["TAG", "Traffic", "TrafficError", "load_traffic_source"]


class TrafficError(ValueError):
    """A traffic source that cannot be read; the message says why."""


@dataclass
class Traffic:
    """Input packets in id order (= arrival order), columnar."""

    times: array[int] = field(default_factory=lambda: array("Q"))
    ports: array[int] = field(default_factory=lambda: array("B"))
    lens: array[int] = field(default_factory=lambda: array("H"))
    frames: list[bytes] = field(default_factory=list)
    wire: dict[int, tuple[int, int, int]] = field(
        default_factory=dict
    )  # port: (preamble, fcs, ifg)
    link_bps: int | None = None
    source: str = ""

    def __len__(self) -> int:
        return len(self.frames)

    def add(self, time_ns: int, port: int, data: bytes) -> None:
        self.times.append(time_ns)
        self.ports.append(port)
        self.lens.append(len(data))
        self.frames.append(data)


def load_traffic_source(path: str | Path, duration_ns: int | None = None,
                        overrides: dict[str, Any] | None = None,
                        progress: Callable[[int], None] | None = None) -> Traffic:
    """A traffic spec (YAML, generated in memory) or a directory of port<N>.pcap
    (+ manifest.json for the wire model).  `duration_ns` keeps the packets that
    arrive before it; for a spec it replaces the spec's own duration_ns (so a run's
    duration caps what a spec generates).  `overrides` replace top-level keys of a spec
    (seed, router, link_bps, ...).  `progress(n)` hears of every 65,536 packets."""
    path = Path(path)
    tr = Traffic(source=str(path))
    if path.is_dir():
        if not port_pcaps(path):
            raise TrafficError(f"{path}: no port<N>.pcap files")
        for pkt in load_traffic(path):
            if duration_ns is not None and pkt.time_ns >= duration_ns:
                continue
            tr.add(pkt.time_ns, pkt.port, pkt.data)
        man = load_manifest(path)
        if man:
            tr.link_bps = int(man.get("link_bps") or 0) or None
            for p in man.get("ports", []):
                w = p.get("wire", {})
                tr.wire[int(p["port"])] = (
                    int(w.get("preamble", 8)),
                    int(w.get("fcs", 4)),
                    int(w.get("ifg", 12)),
                )
        return tr
    from .generator import iter_packets
    from .spec import SpecError, load_spec

    try:
        extra = {} if duration_ns is None else {"duration_ns": duration_ns}
        spec = load_spec(path, overrides={**(overrides or {}), **extra})
    except (SpecError, OSError) as e:
        raise TrafficError(str(e)) from None
    tr.link_bps = int(spec.link_bps)
    for port in spec.ports:
        tr.wire[port.index] = (port.wire.preamble, port.wire.fcs, port.wire.ifg)
    for pkt in iter_packets(spec):
        if duration_ns is not None and pkt.time_ns >= duration_ns:
            continue
        tr.add(pkt.time_ns, pkt.port, pkt.data)
        if progress is not None and len(tr.frames) % 65536 == 0:
            progress(len(tr.frames))
    return tr


