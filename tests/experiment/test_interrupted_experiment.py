"""An experiment's processes end with it: killed outright (SIGKILL) its pool workers and
their read-ahead children die too; interrupted (Ctrl-C to the terminal's process group)
it exits 130 without a worker's spurious traceback and leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.procs.helpers import children_of, descendants_of, kill_all, wait_for, wait_gone

NPK = str(Path(sys.executable).with_name("npk"))


def _start(tiny_design: Any, tmp_path: Path) -> subprocess.Popen[bytes]:
    # one worker: a pool with a worker a core has no read-ahead children (they would
    # compete with the workers: execute.read_ahead_for), and they are what is watched here
    design = tiny_design(["full", "stub"], replications=4)
    return subprocess.Popen([NPK, "experiment", "run", str(design), "-o", str(tmp_path / "res"), "--jobs", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def _in_a_run(proc: subprocess.Popen[bytes]) -> list[int]:
    """Wait until a worker runs the router (its traffic read-ahead child is alive); the
    driver's descendants then."""
    assert wait_for(lambda: any(children_of(w) for w in children_of(proc.pid)), timeout_s=300, proc=proc), \
        "a worker should be running a run with its read-ahead child"
    return descendants_of(proc.pid)


def test_workers_and_their_children_die_with_a_killed_driver(tiny_design: Any, tmp_path: Path) -> None:
    proc = _start(tiny_design, tmp_path)
    procs: list[int] = []
    try:
        procs = _in_a_run(proc)
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone, as `kill -9 PID` does
        proc.wait(timeout=30)
        left = wait_gone(procs, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all([p for p in procs if p != proc.pid])
    assert left == [], f"orphaned: {left}"


def test_ctrl_c_ends_everything_quietly(tiny_design: Any, tmp_path: Path) -> None:
    proc = _start(tiny_design, tmp_path)
    procs: list[int] = []
    try:
        procs = _in_a_run(proc)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C: the whole group
        _out, err_b = proc.communicate(timeout=120)
        left = wait_gone(procs, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_all(procs)
    err = err_b.decode(errors="replace")
    assert proc.returncode == 130, err
    assert "interrupted: finished runs are kept" in err
    assert "Exception ignored" not in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert left == [], f"left running: {left}"


def worker_state() -> tuple[bool, int]:
    """In a pool worker: is SIGINT ignored, and which signal the kernel sends it when
    the driver dies (prctl PR_GET_PDEATHSIG)."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    sig = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN, sig.value


def test_pool_workers_ignore_ctrl_c_and_die_with_the_driver() -> None:
    """A worker that took the terminal's Ctrl-C could raise KeyboardInterrupt inside the
    XScale's Unicorn hooks ('Exception ignored on calling ctypes callback'): the driver
    alone takes it and ends the workers."""
    from npkit.toolchain.experiment.runner import _local_executor

    pool = _local_executor(1)
    try:
        ignores_sigint, death_signal = pool.submit(worker_state).result(timeout=120)
    finally:
        pool.shutdown()
    assert ignores_sigint
    assert death_signal == signal.SIGKILL
