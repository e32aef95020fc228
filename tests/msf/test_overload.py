"""More traffic than a deliberately slow program can take: the MSF drops whole
packets with counted reasons, the per-packet records agree with the port counters,
dispositions.json reads back through the comparator's loader, and the totals balance:
offered = forwarded + dropped + in flight, with in flight bounded by what the RBUF,
the threads and the TBUF can hold.

Which reason: with a large RBUF, elements pile up in the full element list waiting
for a thread -> no_rx_thread; with an RBUF no larger than the thread count, every
element is held by a (slow) thread when the next frame arrives -> rbuf_full.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.dataset import load_dispositions, load_traffic
from npkit.emulator.traffic.generator import write_traffic
from npkit.emulator.traffic.source import load_traffic_source
from npkit.emulator.traffic.spec import load_spec

from .conftest import PASSTHROUGH, passthrough_run


@pytest.mark.parametrize("rbuf_elems,reason", [(128, "no_rx_thread"), (8, "rbuf_full")])
def test_overload_drops_are_counted_and_balance(
    rbuf_elems: int, reason: str, tmp_path: Path
) -> None:
    indir = tmp_path / "in"
    spec = load_spec(PASSTHROUGH / "min64.yaml", overrides={"duration_ns": 200_000})
    write_traffic(spec, indir)
    traffic = load_traffic_source(indir).collect()
    run = passthrough_run(traffic, 220_000, slow=200, rbuf_elems=rbuf_elems)
    out = tmp_path / "out"
    rep = run.write_captures(out)
    assert rep["balanced"], rep["problems"]
    t = rep["totals"]
    dropped = sum(t["dropped"].values())
    assert t["dropped"].get(reason, 0) > 0.3 * t["offered"]
    assert t["forwarded"] > 0
    assert t["offered"] == len(traffic) == t["forwarded"] + dropped + t["in_flight"]
    assert 0 <= t["in_flight"] <= rbuf_elems + 8 + 128
    for row in rep["ports"]:
        st = run.dev.port_stats(row["port"])
        assert row["dropped"].get("rbuf_full", 0) == st["rx_drop_rbuf_full"]
        assert row["dropped"].get("no_rx_thread", 0) == st["rx_drop_no_rx_thread"]
        assert row["received"] == row["offered"] - sum(row["dropped"].values())
    fates = load_dispositions(out, load_traffic(indir))
    assert len(fates) == dropped
    assert {r for v in fates.values() for _, r in v} <= {"rbuf_full", "no_rx_thread"}
    # what was forwarded left in order and unchanged: a subsequence of the input
    for port in range(5):
        sent = iter(traffic.frames[i] for i in range(len(traffic)) if traffic.ports[i] == port)
        assert all(any(f == s for s in sent) for _, f in run.out[port])


def test_cut_through_phy_underruns_are_counted() -> None:
    """With the PHY starting frames after their first 64 bytes (tx_start_bytes), a slow
    program delivers later elements after the wire needed them: those frames are
    aborted (tbuf_underrun), attributed to their input packets, and the totals balance.
    Store and forward (the default) never underruns on the same traffic."""
    traffic = load_traffic_source(PASSTHROUGH / "mixed.yaml", duration_ns=300_000)
    cut = passthrough_run(traffic, 340_000, slow=30, tx_start_bytes=64).report()
    assert cut["balanced"], cut["problems"]
    assert cut["totals"]["dropped"].get("tbuf_underrun", 0) > 10
    t = cut["totals"]
    assert t["offered"] == t["forwarded"] + sum(t["dropped"].values()) + t["in_flight"]
    saf = passthrough_run(traffic, 340_000, slow=30).report()
    assert saf["balanced"] and "tbuf_underrun" not in saf["totals"]["dropped"]
    assert saf["totals"]["forwarded"] > cut["totals"]["forwarded"]
