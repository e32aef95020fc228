"""A local pool with as many workers as cores runs without read-ahead children (each
would be a second busy process beside its worker); fewer workers keep them."""

from __future__ import annotations

from npkit.toolchain.experiment.execute import read_ahead, read_ahead_for
from npkit.toolchain.experiment.runner import _local_executor


def test_read_ahead_only_where_the_cores_leave_room_for_it() -> None:
    assert read_ahead_for(2, cores=2) is False  # 2 workers + 2 readers on 2 cores: off
    assert read_ahead_for(3, cores=4) is False
    assert read_ahead_for(1, cores=2) is None  # one worker and its reader: where safe
    assert read_ahead_for(2, cores=4) is None


def test_the_pool_workers_get_the_choice() -> None:
    import os

    cores = os.cpu_count() or 1
    pool = _local_executor(cores)
    try:
        assert pool.submit(read_ahead).result(timeout=120) is False
    finally:
        pool.shutdown()
    assert read_ahead() is None  # this process (not a pool worker) keeps the default
