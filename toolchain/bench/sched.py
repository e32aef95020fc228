"""Queue-manager scheduler benchmarks (`npk bench sched`; docs/schedulers.md).

DFQ's claim (Panama, seed 000): the cost of scheduling a packet does not depend on the
number of real-time connections.  The qm alone (microcode/qm/qm_dfq.uc on ME 4, fed and
drained by the host stand-ins) is offered `count` 64-byte frames at once, spread evenly
over N connections (connection = bits 8.. of the message's second longword,
`qm.class_by: msg`), round robin over the five output ports; every connection's quantum
is one frame (rate x T = 64 B), so that every visit of a connection sends one packet
whatever the depth of its queue.  Measured between 20 % and 80 % of the packets out:

    sched.dfq.<N>.cycles_per_pkt   ME cycles between packets out (the qm's capacity)
    sched.dfq.<N>.instr_per_pkt    qm instructions executed per packet
    sched.dfq.<N>.mpps             packets out per second
    sched.dfq.flatness_pct         (max - min) / min of cycles_per_pkt over N, in %
    sched.drr.<classes>.cycles_per_pkt   the same for DRR, 1..8 classes a port
    sched.dfq.inport.cycles_per_pkt      DFQ with a connection per input port (five a
                                         port: the queues' state in local memory)

Line rate through the whole router (issue 47): `npk demo -D qm=V --traffic
examples/traffic/T.yaml` (the demo's route table), pipelined layout, 10 ms (2 ms with
--quick), for V = drr, dfq and the default qm (full), T = min64 (64-byte frames, random
destinations: every port's five classes active) and seed003 (78 bytes, random):

    sched.<V>.<T>.pct_line_rate    wire bits out / (5 x 1 Gb/s) x 100
    sched.<V>.<T>.instr_per_pkt    qm instructions a packet transmitted
    sched.<V>.<T>.verdict_ok       1 when the run's verdict is ok (nothing lost, every
                                   scheduler property the judge checks kept), else 0
"""

from __future__ import annotations

import time
from typing import Any

from npkit.toolchain.bench import benchmark

CLOCK_HZ = 1.4e9
PORTS = 5
QM_ME = 4


def qm_layout(variant: str, qm: dict[str, Any]) -> dict[str, Any]:
    """The qm alone between the host's source and sink stand-ins."""
    return {
        "name": f"qm_{variant}",
        "params": {"io": "host", "control": "host", "qm": variant},
        "rings": {"src_to_qm": {"ring": 3, "size": 1024}, "qm_to_sink": {"ring": 4, "size": 256},
                  "exceptions": {"ring": 11, "size": 512}},
        "exceptions": "exceptions",
        "qm": {"qlimit": 4096, "key_qlimit": 4096, **qm},
        "blocks": {
            "rx": {"variant": "${io}", "variants": {"msf": "rx/rx.uc", "host": "external"}, "mes": [0],
                   "threads": 8, "out": "src_to_qm"},
            "qm": {"variant": "${qm}", "variants": {"drr": "qm/qm_drr.uc", "dfq": "qm/qm_dfq.uc"},
                   "mes": [QM_ME], "threads": 8, "in": "src_to_qm", "out": "qm_to_sink"},
            "tx": {"variant": "${io}", "variants": {"msf": "tx/tx.uc", "host": "external"}, "mes": [5],
                   "threads": 8, "in": "qm_to_sink"},
        },
    }  # fmt: skip


def qm_cost(variant: str, qm: dict[str, Any], keys: int, count: int) -> dict[str, float]:
    """Offer `count` frames over `keys` connections (classes) at once; the qm's cost a packet."""
    from npkit.toolchain.system.harness import Harness
    from npkit.toolchain.system.sysmap import HOST_SINK_BASE

    h = Harness(qm_layout(variant, qm))
    frame = bytes(64)
    for n in range(count):
        key, port = n % keys, (n // keys + n) % PORTS
        pw = h.packet(frame, n % PORTS)
        h.send(pw, port | key << 8)
    samples: list[tuple[int, int, int]] = []
    t0 = time.perf_counter()
    while True:
        h.run(5_000)
        out = h.chip.read32("sram", HOST_SINK_BASE)
        samples.append((h.chip.cycle, out, _instructions(h.chip)))
        if out + sum(h.drops().values()) >= count or h.chip.cycle > 60_000_000:
            break
    total = samples[-1][1]
    a = next(s for s in samples if s[1] >= 0.2 * total)
    b = next(s for s in samples if s[1] >= 0.8 * total)
    pkts = max(1, b[1] - a[1])
    cpp = (b[0] - a[0]) / pkts
    return {"cycles_per_pkt": round(cpp, 1), "instr_per_pkt": round((b[2] - a[2]) / pkts, 1),
            "mpps": round(CLOCK_HZ / cpp / 1e6, 3), "out": total, "dropped": sum(h.drops().values()),
            "host_s": time.perf_counter() - t0}  # fmt: skip


def _instructions(chip: Any) -> int:
    st = chip.ffi.new("npk_me_stats *")
    chip.lib.npk_stats_me(chip._chip, QM_ME, st)
    return int(st.instructions)


def dfq_flat(connections: list[int], count: int) -> dict[str, Any]:
    """sched.dfq.<N>.* for each N, and the spread of the cost over N."""
    out: dict[str, Any] = {}
    qm = {
        "class_by": "msg",
        "dfq_t_ns": 512,
        "dfq_rates_mbps": 1000,
    }  # quantum 64 B: a frame a visit
    costs = []
    for n in connections:
        r = qm_cost("dfq", qm, n, count)
        for k in ("cycles_per_pkt", "instr_per_pkt", "mpps"):
            out[f"sched.dfq.{n}.{k}"] = r[k]
        costs.append(r["cycles_per_pkt"])
    out["sched.dfq.flatness_pct"] = round(100 * (max(costs) - min(costs)) / min(costs), 1)
    return out


def line_rate(variant: str, traffic: str, duration_ns: int) -> dict[str, float]:
    """One `npk demo -D qm=variant --traffic examples/traffic/<traffic>.yaml` run."""
    from pathlib import Path

    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.app_run import DEMO_ROUTES
    from npkit.toolchain.system.router_run import run_router
    from npkit.toolchain.system.tables import demo_routes, router_with_routes
    from npkit.toolchain.system.verdict import Policy, judge

    spec = Path(__file__).resolve().parents[2] / "examples" / "traffic" / f"{traffic}.yaml"
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)
    tr = load_traffic_source(spec, duration_ns, overrides={"router": str(router)})
    runs: list[Any] = []
    s = run_router("pipelined", {"io": "msf", "qm": variant}, tr, duration_ns, routes=routes,
                   router_config=router, on_start=runs.append)  # fmt: skip
    rr = runs[0]
    me = next(p.mes[0] for p in rr.image.programs if p.name == "qm")
    st = rr.chip.ffi.new("npk_me_stats *")
    rr.chip.lib.npk_stats_me(rr.chip._chip, me, st)
    sent = max(1, int(s["totals"]["transmitted"]))
    return {"pct_line_rate": float(s["throughput"]["pct_line_rate"]),
            "instr_per_pkt": round(int(st.instructions) / sent, 1),
            "verdict_ok": float(judge(s, Policy())["ok"])}  # fmt: skip


@benchmark("sched")
def bench_sched(quick: bool) -> dict[str, Any]:
    count = 1500 if quick else 4000
    out = dfq_flat([10, 100, 1000, 10000] if not quick else [10, 1000, 10000], count)
    for classes in [1, 8] if quick else [1, 2, 4, 8]:
        r = qm_cost(
            "drr", {"classes": classes, "class_by": "msg", "drr_quanta": 64}, classes * PORTS, count
        )
        out[f"sched.drr.{classes}.cycles_per_pkt"] = r["cycles_per_pkt"]
    r = qm_cost("dfq", {"dfq_t_ns": 512, "dfq_rates_mbps": 1000}, PORTS, count)
    out["sched.dfq.inport.cycles_per_pkt"] = r["cycles_per_pkt"]
    for traffic in ("min64", "seed003"):
        for variant in ("full", "drr", "dfq"):
            for k, v in line_rate(variant, traffic, 2_000_000 if quick else 10_000_000).items():
                out[f"sched.{variant}.{traffic}.{k}"] = v
    return out
