"""XScale benchmarks (`npk bench xscale`).

xscale.mips                   millions of ARM instructions per host second: the Unicorn
                              XScale runs an integer loop (xs_demo spin) in lockstep with
                              the chip (quanta from the chip config, the C budget hook),
                              all 16 MEs asleep on far-off DRAM reads.
xscale.idle_overhead_pct      host-time overhead of the control daemon (npkd) asleep on
                              its interrupt during `npk demo` (seed 003's balanced traffic,
                              no exceptions, the demo's 10,000-route table in SRAM: the
                              daemon boots and sleeps): the same linked router run with the
                              daemon and with the host's stand-in reader instead.  Best of 3.
xscale.exceptions_per_s       exceptions the daemon handles per second of emulated time when
                              saturated: 5 x 1 Gb/s of 78-byte TTL-expired packets (each
                              answered by an ICMP Time Exceeded), over 1 ms after 0.5 ms;
xscale.cycles_per_exception   XScale cycles (= instructions) spent per exception there.
router.emulated_ms_per_host_s_1pct_exceptions
                              the whole router at 5 x 1 Gb/s of 78-byte packets with 1 %
                              TTL-expired, the daemon answering them: emulated ms per host s.

`npk bench control` (long runs of the control plane under load):
control.churn.*               10 ms of 5 x 1 Gb/s at 78 B while a route (20.0.0.0/9 inside
                              20.0.0.0/8, another next hop) is added and withdrawn every
                              1 ms (each packet against the table before or after the
                              change): misforwarded, lost, changes applied, verdict.
control.restart.*             8 ms of 5 x 1 Gb/s at 78 B with 1 % TTL-expired packets, the
                              daemon killed at 3 ms and started again at 5 ms: exceptions
                              handled, dropped at the full ring, unaccounted, verdict.
Host time is the emulator process's CPU time (time.process_time): the machine is
shared, and CPU time does not count other processes' turns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from npkit.toolchain.bench import benchmark
from npkit.toolchain.bench.emulator import IDLE_LOOP, _chip
from npkit.xscale.system import System

PROGRAM = Path(__file__).resolve().parents[2] / "xscale" / "build" / "arm" / "xs_demo.elf"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traffic"


def _mips(cycles: int) -> float:
    chip = _chip(IDLE_LOOP, units={"dram": {"read_latency": 10_000_000}})
    system = System(chip)
    xs = system.attach_xscale(PROGRAM, ["spin", "1000000000"])
    system.run(2_000_000)                       # boot
    start, t0 = xs.instructions, time.process_time()
    system.run(cycles)
    dt = time.process_time() - t0
    system.close()
    return (xs.instructions - start) / dt / 1e6


def _traffic(spec: dict[str, Any]) -> Any:
    """Traffic of a spec given as a mapping (router.yaml's router), route changes and
    neighbours included."""
    from npkit.emulator.traffic.generator import generate
    from npkit.emulator.traffic.source import Traffic
    from npkit.emulator.traffic.spec import spec_from_dict

    s = spec_from_dict({"router": "router.yaml", "seed": 7, **spec}, EXAMPLES)
    tr = Traffic(link_bps=s.link_bps, route_changes=list(s.route_changes), neighbours=dict(s.neighbours))
    for port in s.ports:
        tr.wire[port.index] = (port.wire.preamble, port.wire.fcs, port.wire.ifg)
    for p in generate(s):
        tr.add(p.time_ns, p.port, p.data)
    return tr


def line_rate_78(duration_ns: int, ttl_share: float) -> Any:
    """seed 003's 78-byte packets at 5 x 1 Gb/s, input port p to destinations leaving by
    port p, a share of them TTL-expired.  Their Time Exceeded errors all go back out of
    port 0 (198.18.0.0/15's route): port 0's input leaves them room, so that no output is
    offered more than its line rate."""
    ports: dict[int, Any] = {p: {"destinations": {"via_port": p}} for p in range(5)}
    ports[0]["load"] = max(0.05, 1.0 - 6 * ttl_share)
    return _traffic({"duration_ns": duration_ns, "wire": "seed003",
                     "defaults": {"size": 78, "load": 1.0, "protocol": "tunnel", "mix": {"ttl_expiring": ttl_share}},
                     "ports": ports})  # fmt: skip


def churn_traffic(duration_ns: int, period_ns: int) -> Any:
    """5 x 1 Gb/s of 78-byte packets, input port p to destinations leaving by port p,
    while 20.0.0.0/9 (inside port 1's 20.0.0.0/8 via 10.0.1.3) is added via 10.0.1.2 and
    withdrawn every `period_ns` from 400 us (after the daemon's boot): half of port 1's
    20/8 traffic changes next hop each time."""
    changes = []
    t, k = 400_000, 0
    while t < duration_ns:
        changes.append(f"at {t}ns " + ("add 20.0.0.0/9 via 10.0.1.2" if k % 2 == 0 else "del 20.0.0.0/9"))
        t += period_ns
        k += 1
    return _traffic({"duration_ns": duration_ns, "route_changes": changes, "wire": "seed003",
                     "defaults": {"size": 78, "load": 1.0, "protocol": "tunnel"},
                     "ports": {p: {"destinations": {"via_port": p}} for p in range(5)}})  # fmt: skip


def _demo_seconds(image: Any, tr: Any, duration_ns: int, daemon: bool) -> float:
    from npkit.toolchain.system.router_run import RouterRun

    t0 = time.process_time()
    rr = RouterRun(image, tr, control=None if daemon else {"placement": "host"})
    rr.run_traffic(duration_ns)
    dt = time.process_time() - t0
    if daemon:
        st = rr.control.stats() if rr.control is not None else None
        assert st is not None and rr.control is not None and rr.control.system.xscale.state == "waiting"
    rr.close()
    return dt


def _idle_overhead(quick: bool) -> float:
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.commands.demo import DEMO_ROUTES, SEED003
    from npkit.toolchain.system.link import link
    from npkit.toolchain.system.tables import demo_routes, router_with_routes

    duration = 2_000_000 if quick else 10_000_000
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)
    image = link("pipelined", {"io": "msf"}, routes, router)
    tr = load_traffic_source(SEED003, duration, overrides={"router": str(router)})
    _demo_seconds(image, tr, 100_000, True)          # imports, the daemon's first build check
    pairs = [(_demo_seconds(image, tr, duration, False), _demo_seconds(image, tr, duration, True))
             for _ in range(3)]  # fmt: skip
    without = min(p[0] for p in pairs)
    with_daemon = min(p[1] for p in pairs)
    return (with_daemon - without) / without * 100


def _exceptions(quick: bool) -> dict[str, Any]:
    from npkit.toolchain.system.router_run import RouterRun

    warm, window = 500_000, 500_000 if quick else 1_000_000
    tr = line_rate_78(warm + window, 1.0)
    rr = RouterRun.link("pipelined", {}, tr)
    rr.run_traffic(warm)
    st0, i0, t0 = rr.control.stats(), rr.control.host.instructions, rr.run.now_ns
    rr.run.run(window)
    st1, i1, t1 = rr.control.stats(), rr.control.host.instructions, rr.run.now_ns
    handled = st1["counters"]["exc_ttl_expired"] - st0["counters"]["exc_ttl_expired"]
    sent = st1["counters"]["icmp_time_exceeded"] - st0["counters"]["icmp_time_exceeded"]
    rr.close()
    assert handled > 0 and sent == handled
    return {"xscale.exceptions_per_s": round(handled / ((t1 - t0) / 1e9)),
            "xscale.cycles_per_exception": round((i1 - i0) / handled)}  # fmt: skip


def _router_speed(quick: bool) -> tuple[float, dict[str, Any]]:
    from npkit.toolchain.system.link import link
    from npkit.toolchain.system.router_run import RouterRun
    from npkit.toolchain.system.verdict import Policy, judge

    duration = 2_000_000 if quick else 10_000_000
    tr = line_rate_78(duration, 0.01)
    image = link("pipelined", {"io": "msf"})
    t0 = time.process_time()
    rr = RouterRun(image, tr)
    rr.run_traffic(duration)
    host_s = time.process_time() - t0
    rr.drain()
    verdict = judge(rr.summary(host_s), Policy(max_loss_pct=0.0))
    rr.close()
    return duration / 1e6 / host_s, verdict


@benchmark("xscale")
def bench_xscale(quick: bool) -> dict[str, Any]:
    if not PROGRAM.exists():
        raise RuntimeError(f"{PROGRAM} is missing: run `make`")
    mips = max(_mips(200_000_000 if quick else 1_000_000_000) for _ in range(2))
    speed, verdict = _router_speed(quick)
    return {
        "xscale.mips": round(mips, 1),
        "xscale.idle_overhead_pct": round(_idle_overhead(quick), 2),
        **_exceptions(quick),
        "router.emulated_ms_per_host_s_1pct_exceptions": round(speed, 2),
        "xscale.verdict": verdict,
    }


MISFORWARD = ("wrong_port", "wrong_bytes", "wrong_outcome", "unmatched", "duplicates")


@benchmark("control")
def bench_control(quick: bool) -> dict[str, Any]:
    from npkit.toolchain.system.router_run import RouterRun
    from npkit.toolchain.system.verdict import Policy, judge

    out: dict[str, Any] = {}
    duration = 3_000_000 if quick else 10_000_000
    tr = churn_traffic(duration, 500_000 if quick else 1_000_000)
    rr = RouterRun.link("pipelined", {}, tr)
    rr.run_traffic(duration)
    rr.drain()
    s = rr.summary()
    rr.close()
    out["control.churn.misforwarded"] = sum(s["comparison"].get(k, 0) for k in MISFORWARD)
    out["control.churn.lost"] = s["totals"]["lost"]
    out["control.churn.changes"] = s["control_plane"]["route_changes"]
    out["control.churn.packets"] = len(tr)
    out["control.churn.verdict"] = judge(s, Policy(max_loss_pct=0.0))
    kill, restart, duration = (1_000_000, 1_600_000, 2_500_000) if quick else (3_000_000, 5_000_000, 8_000_000)
    tr = line_rate_78(duration, 0.01)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": kill, "restart_at_ns": restart})
    rr.run_traffic(duration)
    rr.drain()
    s = rr.summary()
    rr.close()
    ttl = sum(1 for f in tr.frames if f[22] <= 1)
    handled = s["totals"]["exceptions"].get("ttl_expired", 0)
    full = s["totals"]["dropped"].get("exception_ring_full", 0)
    out["control.restart.exceptions"] = ttl
    out["control.restart.handled"] = handled
    out["control.restart.exception_ring_full"] = full
    out["control.restart.unaccounted"] = ttl - handled - full
    out["control.restart.events"] = [e["event"] for e in s["control_plane"]["restarts"]]
    out["control.restart.verdict"] = judge(s, Policy(max_loss_pct=0.0))
    return out
