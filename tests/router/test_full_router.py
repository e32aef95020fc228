"""The whole router (rx, parse, lookup, hdr_format, qm, tx) on the emulator with the
MSF device: 1 ms of seed 003's 5 x 1 Gb/s workload (78-byte frames at line rate),
and a mix of every kind of packet the oracle distinguishes, compared packet by packet
with the oracle; every packet accounted for."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.router_run import run_router

ROOT = Path(__file__).resolve().parents[2]
MISMATCHES = ("wrong_outcome", "wrong_port", "wrong_bytes", "reordered", "wrong_reason", "unmatched",
              "duplicates", "untagged", "unmatched_exception", "unexpected_control", "missing_control")  # fmt: skip


@pytest.mark.parametrize("params", [{"qm": "full"}, {"qm": "stub", "threads": 4}])
def test_seed003_line_rate_one_ms(params: dict[str, object]) -> None:
    duration = 1_000_000
    tr = load_traffic_source(ROOT / "examples" / "passthrough" / "seed003.yaml", duration)
    n = len(tr.collect())
    assert n > 6900
    s = run_router("pipelined", params, tr, duration)
    cmp_ = s["comparison"]
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = s["totals"]
    # every packet the oracle forwards left, byte for byte; nothing dropped or excepted
    assert t["forwarded"] == t["predicted_forward"] == n, t
    assert cmp_["matched_forward"] == n
    assert t["dropped"] == {} and t["exceptions"] == {}
    assert s["conservation"]["balanced"] and t["in_flight"] == 0, s["conservation"]


def test_parallel_layout_line_rate_in_order() -> None:
    duration = 500_000
    tr = load_traffic_source(ROOT / "examples" / "passthrough" / "seed003.yaml", duration)
    s = run_router("parallel", {"pool_mes": 2}, tr, duration)
    cmp_ = s["comparison"]
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    assert s["totals"]["forwarded"] == len(tr.collect()) and s["conservation"]["balanced"]


def test_every_rule_through_the_whole_router() -> None:
    tr = load_traffic_source(ROOT / "examples" / "traffic" / "errors.yaml", 1_000_000)
    s = run_router("pipelined", {}, tr, 1_000_000)
    cmp_ = s["comparison"]
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = s["totals"]
    assert t["forwarded"] == t["predicted_forward"]
    # every exception the control plane handled: those it consumed and those it sent on
    cp = s["control_plane"]
    assert cmp_["matched_exception"] == sum(t["exceptions"].values()) + cp["packets_forwarded_by_it"] > 0
    assert cmp_["matched_control"] > 0 and not cmp_["missing_control"] and not cmp_["unexpected_control"]
    # microcode drop counters agree with the oracle's drops of the packets left over
    assert s["conservation"]["unattributed_drops"] == {}
    assert s["conservation"]["balanced"] and t["in_flight"] == 0, s["conservation"]
    kinds = set(t["dropped"]) | set(cp["exceptions_handled"])
    assert {
        "bad_checksum",
        "martian_src",
        "arp",
        "ip_options",
        "no_route",
        "ttl_expired",
    } <= kinds, kinds


def test_tx_in_4_context_mode(tmp_path: Path) -> None:
    """tx.uc's 4-context build (contexts 0, 2, 4; context 6 polls the MSF): every frame
    leaves byte for byte and in order, or is dropped with its reason counted."""
    text = (ROOT / "microcode" / "layouts" / "pipelined.yaml").read_text()
    tx_line = "threads: 8, in: qm_to_tx}"
    assert text.count(tx_line) == 1
    layout = tmp_path / "tx4.yaml"
    layout.write_text(text.replace(tx_line, "threads: 4, in: qm_to_tx}"))
    duration = 1_000_000
    tr = load_traffic_source(ROOT / "examples" / "passthrough" / "seed003.yaml", duration)
    n = len(tr.collect())
    s = run_router(str(layout), {"qm": "full"}, tr, duration)
    cmp_ = s["comparison"]
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = s["totals"]
    assert set(t["dropped"]) <= {"queue_full"} and t["exceptions"] == {}, t
    assert cmp_["matched_forward"] == t["forwarded"] == n - sum(t["dropped"].values()) > 0.9 * n
    assert s["conservation"]["balanced"] and t["in_flight"] == 0, s["conservation"]


def test_parallel_layout_nine_pool_mes() -> None:
    """Nine pool MEs, the most the layout has input rings for (they did not fit in
    scratch in ring-number order): every packet forwarded in order, or dropped with a
    counted reason -- at 78-byte line rate rx, steering frames over nine rings, is at
    the edge of its cycle budget (microcode/README.md §3.4)."""
    duration = 1_000_000
    tr = load_traffic_source(ROOT / "examples" / "passthrough" / "seed003.yaml", duration)
    s = run_router("parallel", {"pool_mes": 9}, tr, duration)
    cmp_ = s["comparison"]
    assert not any(cmp_.get(k) for k in MISMATCHES), cmp_
    t = s["totals"]
    assert set(t["dropped"]) <= {"no_rx_thread"}, t["dropped"]
    assert t["forwarded"] + sum(t["dropped"].values()) == len(tr.collect()) and s["conservation"]["balanced"]
    assert t["forwarded"] > 0.99 * len(tr.collect())
