"""The read-ahead child lives no longer than the run that reads it: a run's feed closed
ends it at once (experiment runs left them until the collector found the run), and the
kernel kills it with the process that forked it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from npkit.emulator.traffic.feed import WindowFeed
from npkit.emulator.traffic.readahead import ReadAhead
from npkit.emulator.traffic.source import load_traffic_source

from ..procs.helpers import kill_all, wait_gone

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "examples" / "passthrough" / "mixed.yaml"


def test_closing_the_feed_ends_the_child_now() -> None:
    reader = ReadAhead(load_traffic_source(MIXED, duration_ns=50_000_000).reader(), 20_000)
    feed = WindowFeed(reader, 20_000)
    feed.next()  # a long source: the child has many windows left to make
    child = reader._proc.pid
    assert wait_gone([child], 0.2) == [child]  # alive, blocked on the full pipe
    feed.close()
    assert wait_gone([child], 10) == []
    assert not reader._proc.is_alive()


CHILD_AND_SIBLING = """
import os, sys, time
from npkit.emulator.traffic.readahead import ReadAhead
from npkit.emulator.traffic.source import load_traffic_source
reader = ReadAhead(load_traffic_source(sys.argv[1], duration_ns=50_000_000).reader(), 20_000)
reader.start()
sibling = os.fork()  # holds the pipe's read end, as a later read-ahead child of a worker does
if sibling == 0:
    time.sleep(120)
    os._exit(0)
print(reader._proc.pid, sibling, flush=True)
sys.stdin.read()  # until killed
"""


def test_the_child_dies_with_a_parent_killed_outright() -> None:
    """Killed with SIGKILL, the parent cannot stop its child; the child's pipe does not
    tell it either while another process holds the read end (a worker's other children
    inherit it): it was left blocked for ever."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD_AND_SIBLING, str(MIXED)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        proc.kill()
        proc.wait(timeout=30)
        left = wait_gone(pids[:1], 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(pids)
    assert left == []
