"""The middle of the router (parse -> lookup -> hdr_format -> qm) in both layouts,
both thread counts, full and stub queue manager, fed like rx will feed it and drained
like tx will drain it: every packet forwarded byte for byte as the oracle says, or
excepted / dropped with the oracle's reason; (input port, output port) flows in
arrival order; every buffer accounted for."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.oracle import Drop, Except, Forward, RefRouter
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.system.harness import Harness
from npkit.toolchain.system.sysmap import SYS

from .test_blocks_parse import traffic

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traffic"
REASONS = load_reasons()


def check_against_oracle(
    h: Harness, pkts: list[Any], by_index: dict[int, Any], ref: RefRouter
) -> None:
    outs, excs = h.outputs(), h.exceptions()
    handled: set[int] = set()
    flows: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    for pw, w1 in outs:
        i = pw & 0xFFFF
        p = by_index[i]
        o = ref.process(p.data, p.port)
        port, length = w1 & 0xFF, w1 >> 16
        assert isinstance(o, Forward), (p.kind, o)
        assert port == o.port and h.frame(pw, len(p.data)) == o.data, p.kind
        assert length in (0, len(p.data))  # the full qm passes the length to tx
        assert i not in handled
        handled.add(i)
        flows[(p.port, port)].append(p.id)
    for ids in flows.values():
        assert ids == sorted(ids), "a flow left out of order"
    for pw, rec in excs:
        i = pw & 0xFFFF
        p = by_index[i]
        o = ref.process(p.data, p.port)
        assert isinstance(o, Except) and rec & 0xFF == REASONS.exception(o.reason).code, (p.kind, o)
        assert (rec >> 16) & 0xFF == p.port
        assert i not in handled
        handled.add(i)
    drops: collections.Counter[int] = collections.Counter()
    for i, p in by_index.items():
        if i not in handled:
            o = ref.process(p.data, p.port)
            assert isinstance(o, Drop), (p.kind, o)
            drops[REASONS.drop(o.reason).code] += 1
    assert h.drops() == dict(drops)
    assert sum(isinstance(ref.process(p.data, p.port), Forward) for p in pkts) > len(pkts) // 10
    # exception counters agree with the records
    assert sum(h.exception_counts().values()) == len(excs)
    # the buffers still held: forwarded (tx frees them in phase 2) and excepted (the XScale)
    assert h.free_count() == SYS.n_bufs - len(outs) - len(excs)


@pytest.mark.parametrize(("layout", "params"), [
    ("pipelined", {"threads": 8, "qm": "full"}),
    ("pipelined", {"threads": 4, "qm": "full"}),
    ("pipelined", {"threads": 8, "qm": "stub", "parse_threads": 4}),
    ("pipelined", {"threads": 8, "qm": "full", "lookup_cache": True}),
    ("parallel", {"pool_mes": 1, "threads": 8, "qm": "stub"}),
    ("parallel", {"pool_mes": 1, "threads": 4, "qm": "full"}),
])  # fmt: skip
def test_middle_blocks_against_oracle(layout: str, params: dict[str, Any]) -> None:
    ref = RefRouter(RouterConfig.load(EXAMPLES / "router.yaml"))
    h = Harness(layout, params)
    pkts = traffic(80, seed=21)
    by_index = {h.inject(p.data, p.port) & 0xFFFF: p for p in pkts}
    h.run(1_000_000)
    check_against_oracle(h, pkts, by_index, ref)


@pytest.mark.parametrize("pool", [2, 3])
def test_parallel_pool_keeps_flow_order(pool: int) -> None:
    """Several fast-path MEs: rx (here its stand-in) steers input port p to the pool
    ME p mod pool (a split ring, README §3.4), so every flow stays on one ME, in order."""
    ref = RefRouter(RouterConfig.load(EXAMPLES / "router.yaml"))
    h = Harness("parallel", {"pool_mes": pool})
    pkts = traffic(60, seed=5)
    by_index = {h.inject(p.data, p.port) & 0xFFFF: p for p in pkts}
    h.run(1_000_000)
    check_against_oracle(h, pkts, by_index, ref)
    # every pool ME did part of the work
    busy = [m["instructions"] for m in h.chip.stats()["mes"][1 : 1 + pool]]
    assert all(b > 1000 for b in busy), busy
