"""How `npk` ends on SIGINT, SIGTERM and SIGHUP: as on Ctrl-C, cleaned up.

The first of these signals raises `Interrupted` (a KeyboardInterrupt, so every place that
cleans up after Ctrl-C -- `finally` blocks, context managers, the experiment's
"interrupted: finished runs are kept" -- does the same for the others): temporary
directories (the control daemon's /tmp/npkd-*), its process or socket, the traffic's
read-ahead child all go.  `npk` then exits 128 + the signal's number (130, 143, 129).
A second signal while that clean-up runs exits at once, with the same status.

A signal that arrives while C code runs is handled by Python at the next bytecode, which
can be the first line of a callback from C (a Unicorn hook of the XScale, an MSF
callback of the chip): an exception raised there is printed and swallowed ("Exception
ignored on calling ctypes callback"), and the run goes on.  So there the exception is held
back: at a Unicorn hook's first line it is handed to Unicorn as the hook's guard hands
one (kept on the Uc object, the emulation stopped, emu_start raises it); in a chip callback for a few milliseconds (a
SIGALRM timer) until the code is back in plain Python.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RETRY_S = 0.005  # how long a signal taken inside a callback from C waits before it is raised
# code run as a callback from C: unicorn's package, and the MSF device's callback wrapper
_UNICORN_DIR = "unicorn"
_BINDING = str(Path(__file__).resolve().parents[2] / "emulator" / "binding.py")


class Interrupted(KeyboardInterrupt):
    """npk was sent `signum`; it ends with exit status `status`."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def status(self) -> int:
        return 128 + self.signum


def _at_unicorn_hook_entry(frame: FrameType | None) -> bool:
    """`frame` is Unicorn's hook wrapper before its `try`: an exception raised there
    leaves the callback (its `try` records one raised a line later and re-raises it
    from emu_start)."""
    return (frame is not None and f"{os.sep}{_UNICORN_DIR}{os.sep}" in frame.f_code.co_filename
            and frame.f_code.co_name == "wrapper" and frame.f_lineno == frame.f_code.co_firstlineno)  # fmt: skip


def _in_cffi_callback(frame: FrameType | None) -> bool:
    """`frame` runs inside a callback of the chip's C core (the MSF device's `inner`,
    which keeps an Exception for the next run() but lets a KeyboardInterrupt escape)."""
    while frame is not None:
        if frame.f_code.co_filename == _BINDING and frame.f_code.co_name == "inner":
            return True
        frame = frame.f_back
    return False


def in_callback_from_c(frame: FrameType | None) -> bool:
    """Whether an exception raised at `frame` would be swallowed by a callback from C."""
    return _at_unicorn_hook_entry(frame) or _in_cffi_callback(frame)


class _Handler:
    """The handler's state: the first signal taken (raised or waiting to be)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.raised = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.first is not None:  # the second: no more clean-up
            os.write(2, f"\nnpk: {signal.Signals(signum).name} again: exiting at once\n".encode())
            os._exit(128 + signum)
        self.first = signum
        self._raise_when_safe(frame)

    def on_alarm(self, _signum: int, frame: FrameType | None) -> None:
        if self.first is not None and not self.raised:
            self._raise_when_safe(frame)

    def _raise_when_safe(self, frame: FrameType | None) -> None:
        assert self.first is not None
        if _at_unicorn_hook_entry(frame) and self._stop_unicorn(frame):
            return
        if in_callback_from_c(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)  # (most of the time is spent out of them)
            return
        self.raised = True
        raise Interrupted(self.first)

    def _stop_unicorn(self, frame: FrameType | None) -> bool:
        """What the hook's guard does with an exception: keep it on the Uc object and stop
        the emulation; emu_start raises it when it returns."""
        assert self.first is not None and frame is not None
        uc = frame.f_locals.get("uc")
        if uc is None or not hasattr(uc, "_hook_exception"):
            return False  # another Unicorn binding: try again a little later
        self.raised = True
        if uc._hook_exception is None:
            uc._hook_exception = Interrupted(self.first)
        uc.emu_stop()
        return True


@contextmanager
def cleaned_up_on_signals() -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP raise Interrupted; a second one exits at once.
    An Interrupted that reaches here exits 128 + its signal number."""
    handler = _Handler()
    old = {s: signal.signal(s, handler.on_signal) for s in SIGNALS}
    old_alarm = signal.signal(signal.SIGALRM, handler.on_alarm)
    try:
        yield
    except Interrupted as e:
        print(f"\nnpk: {e}", file=sys.stderr)
        sys.exit(e.status)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        for s, h in old.items():
            signal.signal(s, h)
