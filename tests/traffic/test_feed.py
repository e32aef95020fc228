"""A run's windows and the work on them, the next one read on a thread while the chip
runs (npkit.emulator.traffic.feed): the same windows and results as read in place, errors
at the window that raised them, no thread left when a stretch of running ends (the run
with and without reading ahead: tests/msf/test_determinism.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from npkit.emulator.traffic.feed import WindowFeed
from npkit.emulator.traffic.readahead import ReadAhead
from npkit.emulator.traffic.source import TrafficError, load_traffic_source
from npkit.emulator.traffic.window import Window

ROOT = Path(__file__).resolve().parents[2]
STEP = 20_000


def source(duration_ns: int = 200_000):  # noqa: ANN201 - a TrafficSource
    return load_traffic_source(ROOT / "examples" / "passthrough" / "mixed.yaml", duration_ns=duration_ns)


def feed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "npk-traffic-next-window"]


def summary(w: Window) -> tuple[int, int, bytes]:
    """What the test's work makes of a window: its first id, packets, bytes."""
    return w.first, len(w), bytes(w.data)


def read_all(feed: WindowFeed) -> list[tuple[int, tuple | None, bool]]:
    feed.prepare("summary", summary)
    out = []
    while not feed.done:
        w = feed.next()
        out.append((feed.until, None if w is None else (summary(w), w.prepared["summary"]), feed.done))
    return out


def test_read_ahead_on_a_thread_gives_the_windows_and_work_read_in_place() -> None:
    ahead = WindowFeed(ReadAhead(source().reader(), STEP), STEP)
    in_place = WindowFeed(source().reader(), STEP)
    assert ahead.ahead and not in_place.ahead  # a source read in place is not read on a thread
    got = read_all(ahead)
    assert got == read_all(in_place)
    assert all(made == own for _, pair, _ in got if pair for own, made in [pair])
    assert sum(pair[0][1] for _, pair, _ in got if pair) > 50


def test_the_next_window_is_read_while_the_caller_runs_and_settle_waits_for_it() -> None:
    on_thread = threading.Event()
    release = threading.Event()
    seen: list[int] = []

    def slow(w: Window) -> int:
        seen.append(w.first)
        if threading.current_thread() is not threading.main_thread():
            on_thread.set()
            release.wait(10)
        return w.first

    feed = WindowFeed(ReadAhead(source().reader(), STEP), STEP)
    feed.prepare("first", slow)
    first = feed.next()  # read here; the one after it on a thread from now on
    assert first is not None and first.prepared == {"first": first.first}
    assert on_thread.wait(10), "nothing reads the next window"
    assert feed_threads()  # still at work while the caller goes on
    release.set()
    feed.settle()
    assert not feed_threads()
    second = feed.next()
    assert second is not None and second.prepared == {"first": second.first}
    assert seen[:2] == [first.first, second.first]
    feed.settle()


def test_an_error_is_raised_by_the_next_that_reads_its_window() -> None:
    calls = []

    def fails_third(w: Window) -> None:
        calls.append(w.first)
        if len(calls) == 3:
            raise TrafficError("bad window")

    feed = WindowFeed(ReadAhead(source().reader(), STEP), STEP)
    feed.prepare("x", fails_third)
    feed.next()
    feed.next()  # the third window is read (and fails) on the thread meanwhile
    with pytest.raises(TrafficError, match="bad window"):
        feed.next()
    assert not feed_threads()  # the error ended the thread too


def test_the_rest_starts_with_the_window_read_ahead() -> None:
    feed = WindowFeed(ReadAhead(source().reader(), STEP), STEP)
    first = feed.next()
    rest = list(feed.rest())
    assert not feed_threads() and feed.done
    whole = source().reader().take(1 << 62)
    got = [first, *rest]
    assert [p for w in got if w for p in w.times] == list(whole.times)
    assert b"".join(bytes(w.data) for w in got if w) == bytes(whole.data)


def test_prepare_after_reading_ahead_began_is_refused() -> None:
    feed = WindowFeed(ReadAhead(source().reader(), STEP), STEP)
    feed.next()
    with pytest.raises(RuntimeError):
        feed.prepare("late", summary)
    feed.settle()
