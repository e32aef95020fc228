"""A traffic run is a function of the image, the config and the traffic: the same
seed gives the same capture files, bytes and nanosecond timestamps; another seed
gives other traffic."""

from __future__ import annotations

import threading
from pathlib import Path

from npkit.emulator.traffic.generator import write_traffic
from npkit.emulator.traffic.source import load_traffic_source
from npkit.emulator.traffic.spec import load_spec

from .conftest import PASSTHROUGH, passthrough_run


def _capture(tmp: Path, seed: int, ahead: bool | None = None) -> dict[str, bytes]:
    spec = load_spec(PASSTHROUGH / "mixed.yaml", overrides={"seed": seed, "duration_ns": 150_000})
    write_traffic(spec, tmp / "in")
    run = passthrough_run(load_traffic_source(tmp / "in"), 180_000, ahead=ahead)
    if ahead is not None:
        assert run.feed.ahead == ahead  # (the next window on a thread only when read in a child)
    assert not [t for t in threading.enumerate() if t.name == "npk-traffic-next-window"]  # run() waited for it
    rep = run.write_captures(tmp / "out")
    assert rep["balanced"] and rep["totals"]["forwarded"] == rep["totals"]["offered"] > 50
    return {p.name: p.read_bytes() for p in sorted((tmp / "out").iterdir())}


def test_same_seed_same_captures(tmp_path: Path) -> None:
    a = _capture(tmp_path / "a", 5)
    b = _capture(tmp_path / "b", 5)
    c = _capture(tmp_path / "c", 6)
    assert a == b
    assert a["port0.pcap"] != c["port0.pcap"]


def test_reading_ahead_in_a_child_changes_nothing(tmp_path: Path) -> None:
    """The captures (bytes and timestamps) and dispositions of a run that reads its traffic
    in a child process (traffic/readahead.py), the next window taken from it on a thread
    (traffic/feed.py), are those of a run that reads it in place."""
    assert _capture(tmp_path / "a", 7, ahead=True) == _capture(tmp_path / "b", 7, ahead=False)
