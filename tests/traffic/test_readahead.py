"""Reading traffic ahead in a child process (npkit.emulator.traffic.readahead): the same
windows as the source read in place, at any sequence of times, errors where they would
have come (the run with and without it: tests/msf/test_determinism.py)."""

from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path

import pytest

from npkit.emulator.traffic.readahead import ReadAhead, read_ahead
from npkit.emulator.traffic.source import TrafficError, TrafficReader, load_traffic_source
from npkit.emulator.traffic.window import Window, concat, window_of

ROOT = Path(__file__).resolve().parents[2]
PASSTHROUGH = ROOT / "examples" / "passthrough"
STEP = 20_000


def source(duration_ns: int = 200_000):  # noqa: ANN201 - a TrafficSource
    return load_traffic_source(PASSTHROUGH / "mixed.yaml", duration_ns=duration_ns)


def fields(w: Window | None) -> tuple | None:
    if w is None:
        return None
    return (w.first, list(w.times), list(w.ports), list(w.lens), [w.frame(i) for i in range(len(w))], w.kinds)


def takes(reader: TrafficReader, untils: list[int]) -> list[tuple | None]:
    out = []
    for u in untils:
        out.append(fields(reader.take(u)))
        out.append(reader.done)
    return out


def test_windows_are_the_sources_own_and_made_in_a_child() -> None:
    untils = [STEP * k for k in range(1, 13)]
    ahead = ReadAhead(source().reader(), STEP)
    got = takes(ahead, untils)
    assert ahead._proc is not None and ahead._proc.pid != os.getpid()
    want = takes(source().reader(), untils)
    assert got == want
    assert sum(len(x[1]) for x in got[::2] if x) > 50  # packets, not empty windows
    assert ahead.done


def test_takes_between_and_past_the_childs_windows() -> None:
    """Off the child's grid: its windows are split and joined, never reordered."""
    untils = [7_000, 7_000, 33_000, 40_000, 41_000, 99_999, 1 << 62]
    got = takes(ReadAhead(source().reader(), STEP), untils)
    assert got == takes(source().reader(), untils)
    assert got[-1] is True  # done after the last take


class Failing(TrafficReader):
    """Two windows, then the error `error`."""

    def __init__(self, error: BaseException) -> None:
        self.n = 0
        self.error = error

    @property
    def done(self) -> bool:
        return False

    def take(self, until_ns: int) -> Window | None:
        self.n += 1
        if self.n > 2:
            raise self.error
        return window_of(self.n - 1, [until_ns - 1], [0], [bytes([self.n]) * 60])


def test_an_error_comes_at_the_take_that_would_have_read_it() -> None:
    r = ReadAhead(Failing(TrafficError("port 3: bad spec")), STEP)
    assert r.take(STEP).frame(0) == b"\x01" * 60
    assert r.take(2 * STEP).frame(0) == b"\x02" * 60
    with pytest.raises(TrafficError, match="port 3: bad spec"):
        r.take(3 * STEP)
    assert r.done and r.take(4 * STEP) is None


class Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("no pickle")
        self.lock = threading.Lock()


def test_an_error_that_cannot_cross_the_pipe_arrives_as_its_text() -> None:
    r = ReadAhead(Failing(Unpicklable()), STEP)
    r.take(2 * STEP)
    with pytest.raises(TrafficError, match="Unpicklable: no pickle"):
        r.take(3 * STEP)


def test_close_ends_the_child() -> None:
    r = ReadAhead(source(2_000_000).reader(), STEP)
    r.take(STEP)
    proc = r._proc
    assert proc.is_alive()  # the source has 100 windows: the child waits on a full pipe
    r.close()
    assert not proc.is_alive()
    assert r.take(2 * STEP) is None


def test_no_fork_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = source().reader()
    with monkeypatch.context() as m:
        m.setattr(threading, "active_count", lambda: 1)  # whatever earlier tests left running
        assert isinstance(read_ahead(plain, STEP), ReadAhead)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert read_ahead(plain, STEP) is plain
    finally:
        stop.set()
        t.join()


def test_slice_and_concat_give_the_window_back() -> None:
    w = window_of(10, [1, 2, 3, 4], [0, 1, 2, 3], [b"a" * 60, b"bb" * 40, b"c" * 64, b"d" * 61])
    parts = [w.slice(0, 1), w.slice(1, 3), w.slice(3, 4)]
    assert [p.first for p in parts] == [10, 11, 13]
    assert fields(concat(parts)) == fields(w)
    assert concat([]) is None
    with pytest.raises(ValueError, match="not consecutive"):
        concat([parts[0], parts[2]])



class Collecting(TrafficReader):
    """The source's windows, collecting garbage first (in the child that reads it); what
    the collector's finalizers raise there is written to `log`."""

    def __init__(self, inner: TrafficReader, log: Path) -> None:
        self.inner = inner
        self.log = log

    @property
    def done(self) -> bool:
        return self.inner.done

    def take(self, until_ns: int) -> Window | None:
        raised: list[str] = []
        hook = sys.unraisablehook
        sys.unraisablehook = lambda u: raised.append(f"{u.exc_type.__name__}: {u.exc_value}")
        try:
            gc.collect()
        finally:
            sys.unraisablehook = hook
        if raised:
            with self.log.open("a") as f:
                f.write("\n".join(raised) + "\n")
        return self.inner.take(until_ns)


def test_a_reader_forked_into_another_readers_child_is_not_stopped_there(tmp_path: Path) -> None:
    """A child is forked with the parent's pending garbage: a reader left in a cycle, its
    own child still running, is collected in the new child too.  There it must not try
    to stop a process that is not its child (multiprocessing: "can only test a child
    process", from the finalizer) -- only its owner stops it."""
    log = tmp_path / "raised.txt"
    gc.disable()  # the collector has not found it yet when the second child is forked
    try:
        first = ReadAhead(source().reader(), STEP)
        first.take(STEP)
        first.loop = first  # type: ignore[attr-defined]  # garbage only the collector finds
        del first
        second = ReadAhead(Collecting(source().reader(), log), STEP)
        got = takes(second, [STEP * k for k in range(1, 6)])
    finally:
        gc.enable()
    gc.collect()  # the owner stops the first child
    assert got == takes(source().reader(), [STEP * k for k in range(1, 6)])
    assert not log.exists(), log.read_text()
