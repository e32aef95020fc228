"""Reading a traffic source in a second process, ahead of the run that consumes it.

Generating packets (and reading captures) is open loop: what a source yields does not
depend on what the chip does.  So a run can have its next windows made on the machine's
second core while the C core runs the current slice:

    reader = read_ahead(source.reader(), step_ns=100_000)
    w = reader.take(100_000)      # made in the child, a window or two ahead
    w = reader.take(200_000)

A process, not a thread: the generator is mostly Python, and a thread holding the GIL
makes the run loop wait for it every time it comes back from C (measured: a busy thread
made `Chip.run` four times slower).  The child is forked, so it starts at once with the
source as it is; it is forked only from a process that runs no other thread (forking one
that does can leave a lock held in the child), else the source is read in place.

The windows are the wrapped reader's, packet for packet: the child calls its `take` at
step_ns, 2 step_ns, ... in order, and a `take` at any other time is answered from those
windows (split at that time, or joined).  An error the source raises reaches the consumer
where it would have without the child: at the `take` that would have read it.  The pipe
between them holds a window or two, so memory stays flat; the child ends when the source
is done, when the reader is closed or collected, or when the consumer's end of the pipe
closes (the run's process ended); it is killed when that process ends, however it ends
(npkit.emulator.children), so a run killed with SIGKILL leaves no child behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import threading
import weakref
from bisect import bisect_left
from collections import deque
from typing import Any

from ..children import die_with_parent
from .source import TrafficError, TrafficReader
from .window import Window, concat


class _Failed:
    """The source raised: the consumer re-raises `error` when it gets this far."""

    def __init__(self, error: BaseException) -> None:
        try:
            pickle.dumps(error)
            self.error = error
        except Exception:  # noqa: BLE001 - what cannot cross the pipe goes as its text
            self.error = TrafficError(f"reading the traffic failed: {type(error).__name__}: {error}")


def _produce(reader: TrafficReader, step_ns: int, out: Any, other_end: Any, parent: int) -> None:
    """The child: the source's windows at step_ns, 2 step_ns, ... until it is done."""
    die_with_parent(parent)  # a parent killed outright takes the child along
    other_end.close()
    until = 0
    try:
        while True:
            until += step_ns
            item = (until, reader.take(until), reader.done)
            out.send(item)
            if item[2]:
                break
    except (BrokenPipeError, EOFError):
        pass  # the consumer has gone
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
        out.send(_Failed(e))
    out.close()


def _stop(proc: Any, conn: Any, owner: int) -> None:
    if os.getpid() != owner:
        return  # a copy of the reader in another reader's forked child: not its process to stop
    conn.close()
    if proc.is_alive():
        proc.kill()
    proc.join()


def read_ahead(reader: TrafficReader, step_ns: int, ahead: bool | None = None) -> TrafficReader:
    """`reader` read ahead in a child process (ahead=True), or `reader` itself (False);
    None: read ahead where a fork is safe (no other thread runs) and possible."""
    if ahead is None:
        ahead = threading.active_count() == 1 and "fork" in mp.get_all_start_methods()
    return ReadAhead(reader, step_ns) if ahead else reader


class ReadAhead(TrafficReader):
    """`reader`, read in a child process in windows of `step_ns`."""

    def __init__(self, reader: TrafficReader, step_ns: int) -> None:
        if step_ns <= 0:
            raise ValueError("step_ns must be positive")
        self._reader = reader
        self._step = step_ns
        self._conn: Any = None
        self._proc: Any = None
        self._stopper: Any = None  # weakref.finalize: ends the child with this reader
        self._pending: deque[tuple[int, Window | None, bool]] = deque()  # from the child, not yet taken
        self._done = reader.done
        self._end = reader.done  # the child's last window is in _pending or taken

    def start(self) -> None:
        """Start the child now (else at the first take): it makes the first windows
        while the consumer sets up."""
        if self._proc is None and not self._end:
            self._start()

    def _start(self) -> None:
        ctx = mp.get_context("fork")
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_produce, args=(self._reader, self._step, w, r, os.getpid()),
                        name="npk-traffic-read-ahead",
                        daemon=True)  # fmt: skip
        p.start()
        w.close()
        self._conn, self._proc = r, p
        self._stopper = weakref.finalize(self, _stop, p, r, os.getpid())

    def close(self) -> None:
        """Stop the child (windows it made that nobody took are dropped)."""
        if self._stopper is not None:
            self._stopper()
        self._end = True

    @property
    def done(self) -> bool:
        return self._done

    def _next(self) -> bool:
        """One more window from the child into _pending (False: there is none)."""
        if self._end:
            return False
        if self._proc is None:
            self._start()
        try:
            item = self._conn.recv()
        except EOFError:
            self._end = self._done = True
            self._proc.join()
            raise TrafficError(f"the process reading the traffic ended (exit code {self._proc.exitcode})") from None
        if isinstance(item, _Failed):
            self._end = self._done = True
            raise item.error
        self._pending.append(item)
        self._end = item[2]
        if self._end:
            self._stopper()
        return True

    def take(self, until_ns: int) -> Window | None:
        parts: list[Window] = []
        while self._pending or self._next():
            u, w, done = self._pending[0]
            if u <= until_ns:
                self._pending.popleft()
                if w is not None:
                    parts.append(w)
                self._done = done
                if u == until_ns:
                    break
                continue
            # the child's window goes past until_ns: take its part before it
            if w is not None:
                cut = bisect_left(w.times, until_ns)
                if cut:
                    parts.append(w.slice(0, cut))
                    self._pending[0] = (u, w.slice(cut, len(w)) if cut < len(w) else None, done)
            break
        return concat(parts)
