"""Processes of a test's `npk`: its descendants (from /proc), and waiting for them to go."""

from __future__ import annotations

import os
import time
from pathlib import Path


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(d.name))
    return out


def descendants_of(pid: int) -> list[int]:
    todo, out = [pid], []
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    """The pids still alive after waiting up to timeout_s for them to end."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def wait_for(cond, timeout_s: float = 120.0, proc=None) -> bool:  # noqa: ANN001 - a predicate and a Popen
    """Poll cond() until it holds (True), the time is up or `proc` ended (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def kill_all(pids: list[int]) -> None:
    """Clean-up after a failed test: what is left of its processes."""
    for p in pids:
        try:
            os.kill(p, 9)
        except OSError:
            pass
