"""The idle time of an output port's wire a router owes while it drops packets for that
port for want of queue space (npkit.toolchain.system.wire_idle): the gaps between its
frames from the first such drop to the last, not before, not after."""

from __future__ import annotations

from array import array
from types import SimpleNamespace

import pytest

from npkit.toolchain.system.wire_idle import WireIdle

RATE = 1_000_000_000
OVER = [20] * 5  # preamble, FCS, gap
FRAME = 64  # (64 + 20) * 8 = 672 ns on the wire


def departures(times: list[int], port: int = 0) -> SimpleNamespace:
    """A batch of departures as the MSF device drains them (msf_device.Drained)."""
    return SimpleNamespace(port=array("B", [port] * len(times)), t=array("Q", times), len=array("H", [FRAME] * len(times)))


@pytest.mark.parametrize("known_after", [6, 2])
def test_gaps_count_only_between_the_first_and_the_last_drop(known_after: int) -> None:
    """The same whether the drops are known after every frame has left (the run learns of
    drops late) or after only the first two."""
    w = WireIdle(RATE, OVER, keep_ns=100_000)
    # frames end at 672, 1344 | gap 1344-2344 | 2344-3016, 3016-3688 | gap 3688-10000 | 10000-10672 |
    # gap 10672-20000 | 20000-20672
    times = [0, 672, 2_344, 3_016, 10_000, 20_000]
    w.departed(departures(times[:known_after]))
    w.owed_from(0, 2_000)
    w.owed_from(0, 12_000)
    w.departed(departures(times[known_after:]))
    assert w.idle_ns(0, 30_000) == (2_344 - 2_000) + (10_000 - 3_688) + (12_000 - 10_672)


def test_a_wire_gone_quiet_while_drops_go_on_owes_the_time_to_the_last() -> None:
    w = WireIdle(RATE, OVER, keep_ns=100_000)
    w.departed(departures([0, 672]))
    w.owed_from(0, 1_000)
    w.owed_from(0, 9_000)
    assert w.idle_ns(0, 50_000) == 9_000 - 1_344


def test_no_drop_no_debt_and_a_long_pause_between_drops_is_no_debt_either() -> None:
    w = WireIdle(RATE, OVER, keep_ns=5_000)
    w.departed(departures([0, 10_000, 20_000, 30_000]))
    assert w.idle_ns(0, 40_000) == 0
    w.owed_from(0, 500)
    w.owed_from(0, 25_000)  # more than keep_ns after the one before: a stretch of its own
    assert w.idle_ns(0, 40_000) == 0
