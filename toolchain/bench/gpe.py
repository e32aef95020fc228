"""The SPP's GPE: the I3 daemon (xscale/i3d) on the gpe placement, against the fast path.

Figures (emulated time; I3 packets of slice i3a for one trigger, on port 2 of the SPP with
the spp_gpe layout, examples/chips/ixp2850_spp.yaml):

- `gpe.records_per_s`: exception records the daemon handles a second when offered more
  than it can take (60 % load of 96-160 B packets, every one an exception it forwards):
  its throughput over the gpe link (`gpe_link_latency_ns`, 1 µs a device access).
- `gpe.delay_p50_us`, `gpe.delay_p99_us`: the GPE path's latency on the wire (arrival to
  departure) at 5 % load, the trigger known to the daemon only (`slow`).
- `gpe.npe_latency_p50_us`, `gpe.npe_latency_p99_us`: the same packets with the
  trigger's filter in the TCAM: the fast path's (the packets that arrived before the
  daemon's first turn, when it installs the filter, left out).
- `gpe.delay_verdict`, `gpe.npe_verdict`: the light-load runs' verdicts (every packet
  forwarded to the trigger's receiver, byte for byte).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from npkit.toolchain.bench import benchmark

TRIGGER = "0x3300000000000009"
FILTER = f"filter add i3a trigger {TRIGGER} out c3 next_hop 10.0.3.2:40009"


def _spec(folder: Path, load: float, ms: float) -> Path:
    from npkit.toolchain.system.paths import ROOT

    p = folder / f"i3_{load}.yaml"
    p.write_text(f"""seed: 7
duration_ns: {int(ms * 1e6)}
router: {ROOT / "examples" / "traffic" / "router.yaml"}
defaults: {{size: {{uniform: [96, 160]}}, enabled: false}}
ports:
  2:
    enabled: true
    load: {load}
    fields: {{ip_proto: udp, dst: 10.0.2.1, dst_port: 34001,
             payload: {{header: "10200000{TRIGGER[2:]}0a07070713880123456789abcdef00"}}}}
""")
    return p


def _run(image: Any, spec: Path, ms: float, slow: bool) -> dict[str, Any]:
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.paths import ROOT
    from npkit.toolchain.system.router_run import RouterRun
    from npkit.toolchain.system.verdict import Policy, judge

    chip = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
    rr = RouterRun(image, load_traffic_source(spec, int(ms * 1e6)), chip,
                   control={"timed": [(0, FILTER + (" slow" if slow else ""))]})  # fmt: skip
    try:
        rr.run_traffic(int(ms * 1e6))
        rr.drain()
        s = rr.summary()
        s["verdict"] = judge(s, Policy(max_loss_pct=None))
        # the fast path's packets alone (those before the daemon's first turn took the GPE's)
        s["fast_ns"] = sorted(t for pid, t in rr.cp.left_at.items() if pid not in rr.cp.gpe_forwarded)
        return s
    finally:
        rr.close()


@benchmark("gpe")
def bench_gpe(quick: bool) -> dict[str, Any]:
    from npkit.toolchain.system.app import load_app
    from npkit.toolchain.system.link import link
    from npkit.toolchain.system.paths import ROOT

    app = load_app(ROOT / "examples" / "apps" / "spp")
    image = link(app.layout_file("spp_gpe"), {"io": "msf"}, None, None,
                 config=str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml"), app=app)  # fmt: skip
    ms = 1.0 if quick else 4.0
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="npk-bench-gpe-") as tmp:
        folder = Path(tmp)
        hot = _run(image, _spec(folder, 0.6, ms), ms, slow=True)
        c = hot["control_plane"]["counters"]
        out["gpe.records_per_s"] = round(c["exceptions"] / (hot["emulated_ms"] / 1000))
        light = _spec(folder, 0.05, ms)
        gpe = _run(image, light, ms, slow=True)
        lat = gpe["control_plane"]["gpe_latency_ns"]
        out["gpe.delay_p50_us"] = lat["p50"] / 1000
        out["gpe.delay_p99_us"] = lat["p99"] / 1000
        out["gpe.delay_verdict"] = gpe["verdict"]
        npe = _run(image, light, ms, slow=False)
        fast = npe["fast_ns"] or [0]
        out["gpe.npe_latency_p50_us"] = fast[len(fast) // 2] / 1000
        out["gpe.npe_latency_p99_us"] = fast[min(len(fast) - 1, len(fast) * 99 // 100)] / 1000
        out["gpe.npe_verdict"] = npe["verdict"]
    return out
