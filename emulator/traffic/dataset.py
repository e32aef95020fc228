"""Reading traffic directories back: inputs, outputs and the emulator's dispositions.

A traffic directory holds DIR/port<N>.pcap, one per port, and (if generated) a
DIR/manifest.json. Packet ids are the rank in (timestamp, port, index-in-file) order,
exactly as the generator assigns them, so a directory of hand-made or captured pcaps
gets meaningful ids too.

The emulator reports what it did not transmit in OUT_DIR/dispositions.json::

    {"drops":      [{"id": 17, "reason": "bad_checksum"},
                    {"port": 0, "index": 4, "reason": 35}],
     "exceptions": [{"id": 3, "reason": "no_route"}]}

Each entry names the input packet either by `id` or by (`port`, `index`), the index
being the packet's position in that port's input pcap (0-based); `reason` is a name or
a numeric code from microcode/reasons.yaml, or for a drop `control_killed` (the control
plane's own: a packet its daemon held, or had forwarded into its send backlog, when it was
killed; npkit.emulator.traffic.control.KILLED). `write_dispositions` writes this file.

A run writes two more keys (`write_dispositions_json`):

    {"offered": 89,
     "control_plane": {"program": "npkd", "placement": "xscale", "exceptions": 47,
                       "events": [{"t_ns": 100000, "event": "killed"},
                                  {"t_ns": 300000, "event": "restarted"}]},
     "drops": [...], "exceptions": [...]}

`offered`: the run offered input packets 0..offered-1 only (a run shorter than its
traffic); absent, every input was offered.  `control_plane`: what answered the run's
exception path, when a control daemon did (a router image linked with `control:
{placement: xscale | gpe}`, npkit.toolchain.system.router_run.RouterRun.write_captures):
the layout's `program`, where it ran (`placement`), `exceptions` (the packets the fast
path sent to the exception path: the microcode's exception counters) and `events` (the
daemon killed, restarted or respawned, at t_ns of emulated time, in order).  Absent (or
null) where exceptions only reach a counter: the `host` stand-in placement, a plain
image, `npk traffic predict`.  Such a daemon answers exceptions with frames of its own
(ICMP, ARP), forwards some packets itself and drops others (control_killed): what
`npk traffic compare`'s fast-path oracle cannot predict (`ControlPlaneRecord.answered`).
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from npkit.asm.base.reading import load_json

from .control import KILLED
from .pcap import PcapRecord, read_pcap
from .reasons import ReasonError, load_reasons

PORT_FILE = re.compile(r"port(\d+)\.pcap$")
DISPOSITIONS = "dispositions.json"
DISPOSITIONS_LIMIT = 1 << 30  # bytes: a record per packet of a long run


class DatasetError(ValueError):
    """A traffic directory that is missing files or disagrees with its manifest."""


@dataclass
class InputPacket:
    id: int
    port: int
    index: int  # position in the port's pcap
    time_ns: int
    data: bytes
    kind: str = ""


def port_pcaps(directory: str | Path) -> dict[int, Path]:
    """{port: path} for every DIR/port<N>.pcap."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"{directory}: not a directory")
    found = {}
    for path in directory.iterdir():
        m = PORT_FILE.fullmatch(path.name)
        if m:
            found[int(m.group(1))] = path
    return dict(sorted(found.items()))


def load_manifest(directory: str | Path) -> dict[str, Any] | None:
    path = Path(directory) / "manifest.json"
    if not path.exists():
        return None
    return load_json(path, error=DatasetError, what="manifest")


def load_traffic(directory: str | Path) -> list[InputPacket]:
    """All input packets of a directory, indexed by packet id."""
    per_port = {p: read_pcap(path) for p, path in port_pcaps(directory).items()}
    if not per_port:
        raise DatasetError(f"{directory}: no port<N>.pcap files")
    streams = [_keyed(port, recs) for port, recs in per_port.items()]
    packets = [
        InputPacket(pid, port, i, t, per_port[port][i].data)
        for pid, (t, port, i) in enumerate(heapq.merge(*streams))
    ]
    manifest = load_manifest(directory)
    if manifest is not None:
        cols = manifest.get("packets", {})
        kinds = manifest.get("kinds", [])
        ports, times = cols.get("port", []), cols.get("time_ns", [])
        if len(ports) != len(packets):
            raise DatasetError(
                f"{directory}: manifest lists {len(ports)} packets, pcaps hold {len(packets)}"
            )
        for pkt, port, t, k in zip(packets, ports, times, cols.get("kind", []), strict=False):
            if pkt.port != port or pkt.time_ns != t:
                raise DatasetError(
                    f"{directory}: packet {pkt.id} is port {pkt.port} at {pkt.time_ns} ns in the "
                    f"pcaps but port {port} at {t} ns in the manifest"
                )
            pkt.kind = kinds[k] if 0 <= k < len(kinds) else str(k)
    return packets


def _keyed(port: int, records: list[PcapRecord]) -> Iterator[tuple[int, int, int]]:
    return ((rec.timestamp_ns, port, i) for i, rec in enumerate(records))


def load_outputs(directory: str | Path) -> dict[int, list[bytes]]:
    """{port: [frame, ...]} from an emulator output directory (timestamps dropped)."""
    return {p: [r.data for r in read_pcap(path)] for p, path in port_pcaps(directory).items()}


# ---------------------------------------------------------------------------- dispositions

Disposition = tuple[str, str]  # (kind "drop" | "exception", reason name)


@dataclass(frozen=True)
class RunDispositions:
    """DIR/dispositions.json, read once (`read_dispositions`): what each of its keys says."""

    data: Any  # the parsed file; None when there is none
    path: Path

    def offered(self) -> int | None:
        """How many input packets (ids 0..N-1) the run offered; None when the file does
        not say (every input was offered)."""
        n = self.data.get("offered") if isinstance(self.data, dict) else None
        return int(n) if isinstance(n, int) and n >= 0 else None

    def control_plane(self) -> ControlPlaneRecord | None:
        return None if self.data is None else parse_control_plane(self.data, str(self.path))

    def records(self, inputs: list[InputPacket]) -> dict[int, list[Disposition]]:
        return {} if self.data is None else parse_dispositions(self.data, inputs, str(self.path))


def read_dispositions(directory: str | Path) -> RunDispositions:
    path = Path(directory) / DISPOSITIONS
    if not path.exists():
        return RunDispositions(None, path)
    return RunDispositions(load_json(path, limit=DISPOSITIONS_LIMIT, error=DatasetError, what="dispositions"), path)


def load_dispositions(
    directory: str | Path, inputs: list[InputPacket]
) -> dict[int, list[Disposition]]:
    """{packet id: [(kind, reason), ...]}; missing file means no records."""
    return read_dispositions(directory).records(inputs)


@dataclass(frozen=True)
class ControlEvent:
    t_ns: int
    event: str  # "killed" | "restarted" | "respawned"


@dataclass(frozen=True)
class ControlPlaneRecord:
    """dispositions.json's `control_plane` (the module docstring): the daemon that
    answered a run's exception path."""

    program: str
    placement: str
    exceptions: int  # packets the fast path sent to the exception path
    events: tuple[ControlEvent, ...] = ()
    source: str = ""  # the file it was read from

    @property
    def answered(self) -> bool:
        """True when the daemon had exceptions to answer: its frames, the packets it
        forwarded or dropped are then in the captures."""
        return self.exceptions > 0

    def describe(self) -> str:
        """'npkd on the xscale (47 exceptions sent to it; killed at 0.1 ms, restarted at 0.3 ms)'."""
        what = [f"{self.exceptions} exception{'s' if self.exceptions != 1 else ''} sent to it"]
        if self.events:
            what.append(", ".join(f"{e.event} at {e.t_ns / 1e6:g} ms" for e in self.events))
        return f"{self.program} on the {self.placement} ({'; '.join(what)})"

    def to_json(self) -> dict[str, Any]:
        return {"program": self.program, "placement": self.placement, "exceptions": self.exceptions,
                "events": [{"t_ns": e.t_ns, "event": e.event} for e in self.events]}  # fmt: skip


def load_control_plane(directory: str | Path) -> ControlPlaneRecord | None:
    """The `control_plane` of DIR/dispositions.json; None when the file or the key is
    absent or null (no daemon answered the run's exceptions)."""
    return read_dispositions(directory).control_plane()


def parse_control_plane(data: Any, source: str = "<dispositions>") -> ControlPlaneRecord | None:
    cp = data.get("control_plane") if isinstance(data, dict) else None
    if cp is None:
        return None
    where = f"{source}: control_plane"
    if not isinstance(cp, dict):
        raise DatasetError(f"{where}: expected an object with program, placement, exceptions, events")
    program, placement, exceptions = cp.get("program"), cp.get("placement"), cp.get("exceptions")
    if not isinstance(program, str) or not isinstance(placement, str):
        raise DatasetError(f"{where}: 'program' and 'placement' must be strings")
    if not isinstance(exceptions, int) or isinstance(exceptions, bool) or exceptions < 0:
        raise DatasetError(f"{where}: 'exceptions' must be a count (an integer >= 0)")
    events = []
    for n, ev in enumerate(cp.get("events") or []):
        if not (isinstance(ev, dict) and isinstance(ev.get("t_ns"), int) and isinstance(ev.get("event"), str)):
            raise DatasetError(f"{where}.events[{n}]: needs 't_ns' (an integer) and 'event' (a string)")
        events.append(ControlEvent(ev["t_ns"], ev["event"]))
    return ControlPlaneRecord(program, placement, exceptions, tuple(events), source)


def parse_dispositions(
    data: Any, inputs: list[InputPacket], source: str = "<dispositions>"
) -> dict[int, list[Disposition]]:
    reasons = load_reasons()
    by_port_index = {(p.port, p.index): p.id for p in inputs}
    out: dict[int, list[Disposition]] = {}
    if not isinstance(data, dict):
        raise DatasetError(f"{source}: expected an object with 'drops' and 'exceptions'")
    for key, kind in (("drops", "drop"), ("exceptions", "exception")):
        for n, entry in enumerate(data.get(key) or []):
            where = f"{source}: {key}[{n}]"
            if not isinstance(entry, dict) or "reason" not in entry:
                raise DatasetError(f"{where}: needs 'reason' and 'id' or 'port'+'index'")
            if "id" in entry:
                pid = int(entry["id"])
                if not 0 <= pid < len(inputs):
                    raise DatasetError(f"{where}: no input packet with id {pid}")
            else:
                try:
                    pid = by_port_index[(int(entry["port"]), int(entry["index"]))]
                except (KeyError, ValueError, TypeError):
                    raise DatasetError(f"{where}: no input packet at that port/index") from None
            out.setdefault(pid, []).append((kind, _reason_name(reasons, kind, entry["reason"], where)))
    return out


def _reason_name(reasons: Any, kind: str, reason: Any, where: str) -> str:
    """A reason's name: one of reasons.yaml (by name or code), or the control plane's
    drop reason (KILLED), which the microcode never counts."""
    if kind == "drop" and reason == KILLED:
        return KILLED
    try:
        return str(reasons.get(kind, reason).name)
    except ReasonError as exc:
        raise DatasetError(f"{where}: {exc}") from None


def write_dispositions_json(out: IO[str], offered: int, drops: Iterable[tuple[int, str]],
                            exceptions: Iterable[tuple[int, str]],
                            control_plane: dict[str, Any] | None = None) -> None:  # fmt: skip
    """dispositions.json as the emulator writes it, from (id, reason) pairs in id order,
    streamed: the text is json.dumps({"offered", "control_plane", "drops", "exceptions"},
    indent=1) + "\n", "control_plane" left out when None (ControlPlaneRecord.to_json)."""
    head: dict[str, Any] = {"offered": offered}
    if control_plane is not None:
        head["control_plane"] = control_plane
    out.write(json.dumps(head, indent=1)[:-2] + ",\n")  # (less its closing "\n}")
    for key, items, last in (("drops", drops, False), ("exceptions", exceptions, True)):
        out.write(f' "{key}": [')
        first = True
        for pid, reason in items:
            out.write(("\n" if first else ",\n") + f'  {{\n   "id": {pid},\n   "reason": {json.dumps(reason)}\n  }}')
            first = False
        out.write("]" if first else "\n ]")
        out.write("\n" if last else ",\n")
    out.write("}\n")


def write_dispositions(
    path: str | Path,
    drops: Iterable[tuple[int, str | int]] = (),
    exceptions: Iterable[tuple[int, str | int]] = (),
) -> None:
    """Write OUT_DIR/dispositions.json from (packet id, reason) pairs."""
    data = {
        "drops": [{"id": i, "reason": r} for i, r in drops],
        "exceptions": [{"id": i, "reason": r} for i, r in exceptions],
    }
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
