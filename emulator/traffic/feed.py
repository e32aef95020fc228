"""A run's windows of traffic, each with the work on it that does not depend on the chip,
the next one read and worked on while the chip runs.

A run takes its source's windows at step_ns, 2 step_ns, ... (`next`).  Work registered
with `prepare(name, fn)` -- the packets' tags, the oracle's verdicts -- is done on every
window as it is read, into window.prepared[name].  When the source is read ahead in a
child process (traffic/readahead.py), the window after the one just taken is read and
worked on by a thread of this process while the caller is in the C core: taking it from
the child waits on a pipe, and the work is C (cffi releases the GIL around both), so the
two cores are busy at once and the run loop does not wait on the thread's Python for long.
A source read in place is read in place: its generator is Python, which would hold the
GIL against the run loop (readahead.py says by how much).

The windows, and what `prepare` made of them, are the same either way: the thread reads
them in the same order, one at a time, and its error is raised by the `next` that would
have read it.  No thread outlives a `next` by more than one window, and `settle` (the end of
a stretch of running) waits for it, so that nothing runs while the process forks or exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from .readahead import ReadAhead
from .source import TrafficReader
from .window import Window


class _Read(threading.Thread):
    """Reads and prepares one window on its own thread; `result` waits for it."""

    def __init__(self, feed: WindowFeed, until_ns: int) -> None:
        super().__init__(name="npk-traffic-next-window", daemon=True)
        self.feed, self.until_ns = feed, until_ns
        self.window: Window | None = None
        self.done = False
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.window, self.done = self.feed._read(self.until_ns)
        except BaseException as e:  # noqa: BLE001 - raised by the `next` that takes it
            self.error = e

    def result(self) -> tuple[Window | None, bool]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.window, self.done


class WindowFeed:
    """`reader`'s windows in steps of step_ns, each with its prepared work; the next one
    read on a thread while the caller runs the chip when `reader` reads ahead in a child."""

    def __init__(self, reader: TrafficReader, step_ns: int) -> None:
        if step_ns <= 0:
            raise ValueError("step_ns must be positive")
        self.reader = reader
        self.step = step_ns
        self.ahead = isinstance(reader, ReadAhead)
        self.work: dict[str, Callable[[Window], Any]] = {}
        self.until = 0  # the last window taken ends here
        self.done = reader.done  # no window left
        self._pending: _Read | None = None  # the next window, on its thread
        if isinstance(reader, ReadAhead):
            reader.start()  # the child makes the first window while the run sets up

    def prepare(self, name: str, fn: Callable[[Window], Any]) -> None:
        """Have fn(window) in window.prepared[name] for every window from now on.  fn must
        not depend on the run (it may run on another thread while the chip runs)."""
        if self._pending is not None:
            raise RuntimeError("prepare() after the feed started reading ahead")
        self.work[name] = fn

    def _read(self, until_ns: int) -> tuple[Window | None, bool]:
        w = self.reader.take(until_ns)
        if w is not None and self.work:
            w.prepared = {name: fn(w) for name, fn in self.work.items()}
        return w, self.reader.done

    def next(self) -> Window | None:
        """The next window (None: no packet arrives in it); `until` is where it ends."""
        self.until += self.step
        pending, self._pending = self._pending, None
        w, self.done = pending.result() if pending is not None else self._read(self.until)
        if self.ahead and not self.done:
            self._pending = _Read(self, self.until + self.step)
        return w

    def settle(self) -> None:
        """Wait for the window being read ahead (it stays the next one)."""
        if self._pending is not None:
            self._pending.join()

    def rest(self) -> Iterator[Window]:
        """What is left of the source, without its work (the window read ahead first, as
        it came); reads nothing ahead from then on."""
        self.ahead = False
        if self._pending is not None:
            w = self.next()
            if w is not None:
                yield w
        while not self.reader.done:
            w = self.reader.take(1 << 63)
            if w is None:
                break
            yield w
        self.done = True
