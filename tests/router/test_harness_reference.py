"""The streaming harness keeps giving what it gave: for each case of
data/harness_reference.json (first made with the old in-memory harness of commit 33db36a
and matched exactly by the streaming one; re-made when the control plane changed the
router, see data/make_harness_reference.py) the same summary figures (all but host
time), the same capture files byte for byte (port<N>.pcap, dispositions.json) and the
same history hash of the chip over the first 100 us."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.commands.demo import DEMO_ROUTES, demo_routes, router_with_routes
from npkit.toolchain.system.paths import ROOT
from npkit.toolchain.system.router_run import RouterRun

REFERENCE = json.loads((Path(__file__).parent / "data" / "harness_reference.json").read_text())
HOST = ("host_s", "emulated_ms_per_host_s")


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_same_summary_captures_and_history_as_the_old_harness(name: str, tmp_path: Path) -> None:
    case = REFERENCE[name]
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)
    spec, dur = ROOT / case["traffic"], case["duration_ns"]

    def source() -> object:
        return load_traffic_source(spec, dur, overrides={"router": str(router)})

    rr = RouterRun.link(case["layout"], {"io": "msf"}, source(), routes, router)  # type: ignore[arg-type]
    rr.chip.history_enable(1)
    rr.run_traffic(100_000)
    assert rr.chip.history_hash() == case["history_hash_100us"]

    out = tmp_path / "out"
    for capture in (None, out):  # with captures every frame also goes through Python
        rr = RouterRun.link(case["layout"], {"io": "msf"}, source(), routes, router, capture=capture)  # type: ignore[arg-type]
        rr.run_traffic(dur)
        rr.drain()
        s = rr.summary(0.0)
        # (the reference predates the summary's faults: the router has none)
        assert s.pop("faults") == {"total": 0, "counts": {}, "last": []}
        assert {k: v for k, v in s.items() if k not in HOST} == case["summary"]
    rr.run.write_captures(out)
    got = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}
    assert got == case["captures"]
