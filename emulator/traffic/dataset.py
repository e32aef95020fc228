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
a numeric code from microcode/reasons.yaml. `write_dispositions` writes this file.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .pcap import PcapRecord, read_pcap
from .reasons import ReasonError, load_reasons

PORT_FILE = re.compile(r"port(\d+)\.pcap$")
DISPOSITIONS = "dispositions.json"


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
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: {exc}") from None


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


def offered_count(directory: str | Path) -> int | None:
    """How many input packets (ids 0..N-1) the run offered, as its dispositions.json
    records it; None when it does not say (every input was offered)."""
    path = Path(directory) / DISPOSITIONS
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    n = data.get("offered") if isinstance(data, dict) else None
    return int(n) if isinstance(n, int) and n >= 0 else None


def load_dispositions(
    directory: str | Path, inputs: list[InputPacket]
) -> dict[int, list[Disposition]]:
    """{packet id: [(kind, reason), ...]}; missing file means no records."""
    path = Path(directory) / DISPOSITIONS
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: {exc}") from None
    return parse_dispositions(data, inputs, str(path))


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
            try:
                reason = reasons.get(kind, entry["reason"]).name  # type: ignore[arg-type]
            except ReasonError as exc:
                raise DatasetError(f"{where}: {exc}") from None
            out.setdefault(pid, []).append((kind, reason))
    return out


def write_dispositions_json(out: IO[str], offered: int, drops: Iterable[tuple[int, str]],
                            exceptions: Iterable[tuple[int, str]]) -> None:  # fmt: skip
    """dispositions.json as the emulator writes it, from (id, reason) pairs in id order,
    streamed: the text is json.dumps({"offered", "drops", "exceptions"}, indent=1) + "\n"."""
    out.write(f'{{\n "offered": {json.dumps(offered)},\n')
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
