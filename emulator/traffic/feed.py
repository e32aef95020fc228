"""A run's windows of traffic, each with the work on it that does not depend on the chip,
the next one read and worked on while the chip runs.

A run takes its source's windows at step_ns, 2 step_ns, ... (`next`).  Work registered
with `prepare(name, fn)` -- the packets' tags, the oracle's verdicts -- is done on every
window as it is read, into window.prepared[name].  When the source is read ahead in a
child process (traffic/readahead.py), the window after the one just taken is read and
worked on by a thread of this process while the caller is in the C core: taking it from
the child waits on a pipe, and the work is C (cffi releases the GIL around both), so the
two cores are busy at once and the run loop does not wait on the thread's Python for
long.  One thread serves a stretch of running (starting one costs about 0.3 ms here).  A
source read in place is read in place: its generator is Python, which would hold the GIL
against the run loop (readahead.py says by how much).

The windows, and what `prepare` made of them, are the same either way: the thread reads
them in the same order, one at a time, and its error is raised by the `next` that would
have read it.  `settle` (the end of a stretch of running) waits for the window being read
and ends the thread, so that nothing runs while the process forks or exits.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .readahead import ReadAhead
from .source import TrafficReader
from .window import Window

_Answer = tuple[Window | None, bool, BaseException | None]  # window, source done, error


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
        # the thread that reads the next window (one thread for a stretch of running:
        # starting one costs about 0.3 ms), what it was asked, what it answered
        self._worker: threading.Thread | None = None
        self._asks: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[_Answer] = queue.SimpleQueue()
        self._asked = False
        self._answer: _Answer | None = None  # taken from the thread by settle()
        if isinstance(reader, ReadAhead):
            reader.start()  # the child makes the first window while the run sets up

    def prepare(self, name: str, fn: Callable[[Window], Any]) -> None:
        """Have fn(window) in window.prepared[name] for every window from now on.  fn must
        not depend on the run (it may run on another thread while the chip runs)."""
        if self._asked or self._answer is not None:
            raise RuntimeError("prepare() after the feed started reading ahead")
        self.work[name] = fn

    def _read(self, until_ns: int) -> tuple[Window | None, bool]:
        w = self.reader.take(until_ns)
        if w is not None and self.work:
            w.prepared = {name: fn(w) for name, fn in self.work.items()}
        return w, self.reader.done

    def _serve(self) -> None:
        while (until := self._asks.get()) is not None:
            try:
                self._answers.put((*self._read(until), None))
            except BaseException as e:  # noqa: BLE001 - raised by the `next` that takes it
                self._answers.put((None, False, e))

    def _ask(self, until_ns: int) -> None:
        if self._worker is None:
            # kept only once started: a Ctrl-C or SIGTERM between the two left settle()
            # joining a thread never started (RuntimeError instead of a clean exit 130/143)
            worker = threading.Thread(target=self._serve, name="npk-traffic-next-window", daemon=True)
            worker.start()
            self._worker = worker
        self._asks.put(until_ns)
        self._asked = True

    def _take(self) -> tuple[Window | None, bool]:
        answer, self._answer = self._answer, None
        if answer is None:
            answer = self._answers.get()
        self._asked = False
        w, done, error = answer
        if error is not None:
            raise error
        return w, done

    def next(self) -> Window | None:
        """The next window (None: no packet arrives in it); `until` is where it ends."""
        self.until += self.step
        try:
            w, self.done = self._take() if self._asked else self._read(self.until)
        except BaseException:
            self.settle()
            raise
        if self.done:
            self.settle()  # (nothing left to read: the thread ends)
        elif self.ahead:
            self._ask(self.until + self.step)
        return w

    def settle(self) -> None:
        """Wait for the window being read ahead (it stays the next one) and end the thread."""
        if self._asked and self._answer is None:
            self._answer = self._answers.get()
        if self._worker is not None:
            self._asks.put(None)
            self._worker.join()
            self._worker = None

    def close(self) -> None:
        """End the thread and the reader's child process (what they read is dropped)."""
        self.settle()
        if isinstance(self.reader, ReadAhead):
            self.reader.close()

    def rest(self) -> Iterator[Window]:
        """What is left of the source, without its work (the window read ahead first, as
        it came); reads nothing ahead from then on."""
        self.ahead = False
        if self._asked:
            w = self.next()
            if w is not None:
                yield w
        self.settle()
        while not self.reader.done:
            w = self.reader.take(1 << 63)
            if w is None:
                break
            yield w
        self.done = True
