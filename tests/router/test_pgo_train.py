"""The workload the C core's profile-guided build is trained on (emulator/pgo_build.sh)."""

from __future__ import annotations

import pytest

from npkit.toolchain.commands import pgo_train


def test_the_training_runs_the_router_in_both_layouts() -> None:
    """Both layouts forward the demo's packets: the profile covers the router's paths."""
    pipelined, parallel = pgo_train.train_router("pipelined", 0.2), pgo_train.train_router("parallel", 0.2)
    assert pipelined > 1000
    assert parallel == pipelined  # the same traffic, every packet forwarded in both


def test_a_training_that_forwards_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgo_train, "train_router", lambda layout, ms: 0)
    monkeypatch.setattr(pgo_train, "train_loops", lambda: None)
    assert pgo_train.main(["--ms", "0.1"]) == 1
