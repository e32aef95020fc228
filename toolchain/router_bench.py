"""Router benchmarks (`npk bench router`, `npk bench router_middle`).

`router`: the whole router (rx ... tx) on the MSF device, 5 x 1 Gb/s offered at line
rate with constant arrivals, destinations spread evenly over five prefixes that leave
by different ports (so no output port is oversubscribed):

    router.<layout>.<size>.pct_line_rate   wire bits out / (5 x 1 Gb/s), x 100, over the
                                           last 80 % of the run (offered: 100 %)
    router.<layout>.<size>.mpps            packets out per second (same window)
    router.<layout>.<size>.lat_mean_us     first wire byte in -> first wire byte out
    router.<layout>.<size>.lat_p99_us
    router.parallel.scaling.<n>.pct_line_rate   78-byte frames, n fast-path MEs
    router.emulated_ms_per_host_s

Phase 1 (no rx/tx microcode yet): the capacity of the middle of the router —
parse -> lookup -> hdr_format -> qm, or the parallel fast path -> qm — fed by the host
stand-in (microcode/host/host_src.uc) faster than line rate and drained by the tx
stand-in.  The steady-state output rate, between 20 % and 80 % of the packets out, is
reported as a percentage of the 5 x 1 Gb/s line rate for the frame size:

    router.middle.<layout>.<size>.pct_line_rate    capacity / line rate x 100
    router.middle.<layout>.<size>.mpps             capacity in Mpkt/s
    router.middle.<layout>.<size>.cycles_per_pkt   ME cycles between packets out
    router.middle.parallel.scaling.<n>.pct_line_rate   pool of n fast-path MEs, 78 B
    router.middle.emulated_ms_per_host_s           emulation speed on this workload

Sizes: 78 is seed 003's frame (78 B at the chip, 90 B on the wire: IFG only); the
others are Ethernet sizes with FCS, preamble and IFG (size + 20 B on the wire).  The
frames are seed 003's UDP-in-tunnel packets, five ports, every one forwarded.
The full-router figures (`router.<layout>.<size>...`) come with rx/tx (phase 2).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from npkit.toolchain.bench import benchmark

ROOT = Path(__file__).resolve().parents[1]
CLOCK_HZ = 1.4e9
PORTS = 5
LINK_BPS = 1_000_000_000


def wire_bytes(size: int | str) -> float:
    if size == 78:
        return 90.0
    if size == "imix":
        return (7 * (64 + 20) + 4 * (594 + 20) + 1518 + 20) / 12
    return float(int(size) + 20)


def line_rate_pps(size: int | str) -> float:
    return PORTS * LINK_BPS / (wire_bytes(size) * 8)


def frames(size: int | str, count: int) -> list[Any]:
    from npkit.emulator.traffic.generator import generate
    from npkit.emulator.traffic.spec import spec_from_dict

    data: dict[str, Any] = {
        "seed": 3, "router": str(ROOT / "examples" / "traffic" / "router.yaml"),
        "count": max(1, count // PORTS + 1),
        "wire": "seed003" if size == 78 else "ethernet",
        "defaults": {"size": size, "protocol": "tunnel" if size == 78 else "udp", "load": 1.0,
                     "arrivals": "constant"},
    }  # fmt: skip
    if data["wire"] == "ethernet":
        data.pop("wire")
    spec = spec_from_dict(data, ROOT / "examples" / "traffic")
    return generate(spec)[:count]


def capacity(layout: str, params: dict[str, Any], size: int | str, count: int) -> dict[str, float]:
    """Offer `count` frames at once; measure the steady-state rate out."""
    from npkit.toolchain.link import HOST_SINK_BASE, Harness

    pkts = frames(size, count)
    h = Harness(layout, params)
    for p in pkts:
        h.inject(p.data, p.port)
    samples: list[tuple[int, int]] = []
    t0 = time.perf_counter()
    while True:
        h.run(10_000)
        out = h.chip.read32("sram", HOST_SINK_BASE)
        samples.append((h.chip.cycle, out))
        if (
            out + len(h.exceptions()) + sum(h.drops().values()) >= len(pkts)
            or h.chip.cycle > 40_000_000
        ):
            break
    host_s = time.perf_counter() - t0
    total = samples[-1][1]
    a = next(s for s in samples if s[1] >= 0.2 * total)
    b = next(s for s in samples if s[1] >= 0.8 * total)
    cpp = max(1.0, (b[0] - a[0]) / max(1, b[1] - a[1]))
    pps = CLOCK_HZ / cpp
    return {
        "cycles_per_pkt": round(cpp, 1),
        "mpps": round(pps / 1e6, 3),
        "pct_line_rate": round(100 * pps / line_rate_pps(size), 1),
        "emulated_ms": h.chip.cycle / CLOCK_HZ * 1e3,
        "host_s": host_s,
    }


@benchmark("router_middle")
def bench_router_middle(quick: bool) -> dict[str, Any]:
    count = 1200 if quick else 4000
    sizes: list[int | str] = [78, 128] if quick else [64, 78, 128, 256, 512, 1024, 1518, "imix"]
    layouts = {"pipelined": {}, "parallel": {"pool_mes": 2}}
    out: dict[str, Any] = {}
    ems = hs = 0.0
    for name, params in layouts.items():
        for size in sizes:
            r = capacity(name, params, size, count)
            for k in ("pct_line_rate", "mpps", "cycles_per_pkt"):
                out[f"router.middle.{name}.{size}.{k}"] = r[k]
            ems += r["emulated_ms"]
            hs += r["host_s"]
    for n in [1, 2] if quick else [1, 2, 3, 4, 6, 8]:
        r = capacity("parallel", {"pool_mes": n}, 78, count)
        out[f"router.middle.parallel.scaling.{n}.pct_line_rate"] = r["pct_line_rate"]
    out["router.middle.emulated_ms_per_host_s"] = round(ems / hs, 2) if hs else 0.0
    return out


# five prefixes of examples/traffic/routes.txt with no longer route inside, one a port
BALANCED = ["130.0.0.0/15", "150.100.0.0/16", "185.0.0.0/22", "64.0.0.0/10", "80.0.0.0/12"]


def full_run(
    layout: str, params: dict[str, Any], size: int | str, duration_ns: int
) -> dict[str, float]:
    import tempfile

    import yaml

    from npkit.emulator.msf import load_traffic_source
    from npkit.toolchain.demo import RouterRun, latency_us, pct

    spec = {
        "seed": 3, "router": str(ROOT / "examples" / "traffic" / "router.yaml"),
        "duration_ns": duration_ns, "wire": "seed003" if size == 78 else "ethernet",
        "defaults": {"size": size, "protocol": "tunnel" if size == 78 else "udp", "load": 1.0,
                     "arrivals": "constant", "destinations": {"prefixes": BALANCED}},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        tr = load_traffic_source(path, duration_ns)
    rr = RouterRun(layout, params, tr)
    t0 = time.perf_counter()
    rr.run.run(duration_ns, progress=lambda _now: rr.service_exceptions())
    host_s = time.perf_counter() - t0
    lo = duration_ns // 5
    bits_out = pkts_out = 0
    for p, frames in rr.run.out.items():
        pre, fcs, ifg = tr.wire.get(p, (8, 4, 12))
        for t, d in frames:
            if lo <= t < duration_ns:
                bits_out += (len(d) + pre + fcs + ifg) * 8
                pkts_out += 1
    bits_in = 0
    for i in range(len(tr)):
        if lo <= tr.times[i] < duration_ns:
            pre, fcs, ifg = tr.wire.get(tr.ports[i], (8, 4, 12))
            bits_in += (tr.lens[i] + pre + fcs + ifg) * 8
    window_s = (duration_ns - lo) / 1e9
    lat = latency_us(rr)
    return {
        # against the line rate itself (the offered load is 100 % of it)
        "pct_line_rate": round(100 * bits_out / (window_s * PORTS * LINK_BPS), 2),
        "pct_offered": round(100 * bits_out / max(1, bits_in), 2),
        "mpps": round(pkts_out / window_s / 1e6, 3),
        "lat_mean_us": round(sum(lat) / len(lat), 3) if lat else 0.0,
        "lat_p99_us": round(pct(lat, 99), 3),
        "emulated_ms": duration_ns / 1e6,
        "host_s": host_s,
    }


@benchmark("router")
def bench_router(quick: bool) -> dict[str, Any]:
    duration = 400_000 if quick else 2_000_000
    sizes: list[int | str] = [78, 1518] if quick else [64, 78, 128, 256, 512, 1024, 1518, "imix"]
    layouts: dict[str, dict[str, Any]] = {"pipelined": {}, "parallel": {"pool_mes": 1}}
    out: dict[str, Any] = {}
    ems = hs = 0.0
    for name, params in layouts.items():
        for size in sizes:
            r = full_run(name, params, size, duration)
            for k in ("pct_line_rate", "mpps", "lat_mean_us", "lat_p99_us"):
                out[f"router.{name}.{size}.{k}"] = r[k]
            ems += r["emulated_ms"]
            hs += r["host_s"]
    for n in [1, 2] if quick else [1, 2, 3, 4, 6, 8]:
        r = full_run("parallel", {"pool_mes": n}, 78, duration)
        out[f"router.parallel.scaling.{n}.pct_line_rate"] = r["pct_line_rate"]
        ems += r["emulated_ms"]
        hs += r["host_s"]
    out["router.emulated_ms_per_host_s"] = round(ems / hs, 2) if hs else 0.0
    return out
