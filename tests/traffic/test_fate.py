"""The one table both judges (`npk traffic compare`, the router run) sort a recorded drop
or exception by: every row, written out."""

from __future__ import annotations

import pytest

from npkit.emulator.traffic.fate import is_resource_drop, judge_disposition
from npkit.emulator.traffic.oracle import Drop, Except, Forward, Outcome
from npkit.emulator.traffic.reasons import load_reasons

FWD = Forward(1, b"\0" * 60)
DROP = Drop("bad_checksum")
EXC = Except("ttl_expired")


@pytest.mark.parametrize(("expected", "kind", "reason", "category"), [
    # resource drops
    (FWD, "drop", "rbuf_full", "lost"),
    (EXC, "drop", "queue_full", "lost"),
    (DROP, "drop", "no_rx_thread", "dropped_early"),
    (DROP, "drop", "exception_ring_full", "dropped_early"),
    # drops and exceptions for reasons the oracle gives
    (FWD, "drop", "bad_checksum", "wrong_outcome"),
    (FWD, "exception", "ttl_expired", "wrong_outcome"),
    (EXC, "drop", "bad_checksum", "wrong_outcome"),
    (EXC, "exception", "ttl_expired", "matched_exception"),
    (EXC, "exception", "no_route", "wrong_reason"),
    (DROP, "drop", "bad_checksum", "matched_drop"),
    (DROP, "drop", "martian_src", "wrong_reason"),
    (DROP, "exception", "ttl_expired", "wrong_outcome"),
    # a harness's own reason (the control plane's model drops what a killed daemon held)
    (Drop("control_killed"), "drop", "control_killed", "matched_drop"),
    (FWD, "drop", "control_killed", "lost"),
])  # fmt: skip
def test_every_row(expected: Outcome, kind: str, reason: str, category: str) -> None:
    assert judge_disposition(expected, kind, reason) == category


def test_resource_drops_are_the_reasons_the_oracle_never_gives() -> None:
    reasons = load_reasons()
    for name, r in reasons.drops.items():
        assert is_resource_drop(name) is (r.step is None), name
    assert is_resource_drop("rbuf_full") and not is_resource_drop("bad_checksum")
