"""Router benchmarks (`npk bench router`, `npk bench router_middle`).

`router`: the whole router (rx ... tx) on the MSF device, 5 x 1 Gb/s offered at line
rate with constant arrivals; input port i sends to one prefix that leaves by its own
output port (a permutation: no output port is offered more than its line rate, so a
perfect router forwards 100 %).  Each run is a warm-up budget plus a 10 ms window
(1 ms with --quick); the window starts where the output rate has settled (warm-up
detected from output-rate bins, see warmup_end_ns) and the layout's own defaults are used
(the parallel layout's pool of fast-path MEs):

    router.<layout>.<size>.pct_line_rate   wire bits out / (5 x 1 Gb/s) x 100 over the window
    router.<layout>.<size>.warmup_us       detected warm-up; .window_ms the window measured
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
    router.variants.<layout>.<variant>.cycles_per_pkt   the same for batch=4, batch=16 and
                                                   lookup=range_cache beside the default

Sizes: 78 is seed 003's frame (78 B at the chip, 90 B on the wire: IFG only); the
others are Ethernet sizes with FCS, preamble and IFG (size + 20 B on the wire).  The
frames are seed 003's UDP-in-tunnel packets, five ports, every one forwarded.
The full-router figures (`router.<layout>.<size>...`) come with rx/tx (phase 2).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from npkit.toolchain.bench import benchmark
from npkit.toolchain.system.paths import ROOT

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
    from npkit.toolchain.system.harness import Harness
    from npkit.toolchain.system.sysmap import HOST_SINK_BASE

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


# the issue-47 variants of the middle against the default: VERA's batching (batch=N) and
# Panama's aggregate route cache (lookup=range_cache), capacity as router_middle measures it
VARIANTS: dict[str, dict[str, Any]] = {"default": {}, "batch4": {"batch": 4}, "batch16": {"batch": 16},
                                       "range_cache": {"lookup": "range_cache"}}  # fmt: skip


@benchmark("router_variants")
def bench_router_variants(quick: bool) -> dict[str, Any]:
    """router.variants.<layout>.<variant>.{cycles_per_pkt,pct_line_rate}: the middle's
    capacity at 78 B (4,000 frames offered at once; the parallel layout on one fast-path
    ME, so that the fast path is the bottleneck), for each variant of VARIANTS."""
    count = 1200 if quick else 4000
    out: dict[str, Any] = {}
    for name, params in {"pipelined": {}, "parallel": {"pool_mes": 1}}.items():
        for variant, extra in VARIANTS.items():
            r = capacity(name, {**params, **extra}, 78, count)
            for k in ("cycles_per_pkt", "pct_line_rate"):
                out[f"router.variants.{name}.{variant}.{k}"] = r[k]
    return out


# five prefixes of examples/traffic/routes.txt with no longer route inside, each leaving
# by a different port: input port i sends only to BALANCED[i], so the traffic is a
# permutation and no output port is offered more than its line rate.
BALANCED = ["130.0.0.0/15", "150.100.0.0/16", "185.0.0.0/22", "64.0.0.0/10", "80.0.0.0/12"]
def bin_ns(size: int | str) -> int:
    """Output-rate bins for warm-up detection: 50 us, or long enough to hold ~200 packets at
    line rate, so that one packet more or less in a bin stays well inside the 2 % band."""
    per_packet_ns = wire_bytes(size) * 8 / (PORTS * LINK_BPS) * 1e9
    return max(50_000, int(200 * per_packet_ns))


def warmup_end_ns(times_ns: Sequence[int], bits: Sequence[int], duration_ns: int, bin_len: int = 50_000) -> int:
    """End of warm-up: the first bin from which the output rate stays in the steady state's
    band (its median bin in the second half of the run, +-2 % or +-3 MAD)."""
    nbins = max(1, duration_ns // bin_len)
    rate = [0] * nbins
    for t, b in zip(times_ns, bits, strict=True):
        if 0 <= t < nbins * bin_len:
            rate[t // bin_len] += b
    tail = sorted(rate[nbins // 2 :]) or [0]
    steady = tail[len(tail) // 2]
    if steady == 0:
        return duration_ns
    # a bin has settled when it is within 2 % of the steady rate, or within the bin-to-bin
    # noise of the steady state itself (3 median absolute deviations: mixed sizes, IMIX)
    mad = sorted(abs(r - steady) for r in tail)[len(tail) // 2]
    band = max(0.02 * steady, 3 * mad)
    last_bad = -1
    for i, r in enumerate(rate):
        if abs(r - steady) > band:
            last_bad = i
        if i >= nbins // 2:
            break
    return (last_bad + 1) * bin_len


class Departures:
    """Departure time and wire bits of every frame out (a departure hook; the benchmark's
    windows are short, so it keeps them: 12 bytes a frame)."""

    def __init__(self, wire: dict[int, tuple[int, int, int]]) -> None:
        self.over = {p: sum(w) for p, w in wire.items()}
        self.times: array[int] = array("Q")
        self.bits: array[int] = array("I")

    def add(self, d: Any) -> None:
        self.times.append(d.t)
        self.bits.append((len(d.data) + self.over.get(d.port, 24)) * 8)


def permutation_traffic(size: int | str, duration_ns: int) -> Any:
    """5 x 1 Gb/s of `size`-byte frames (78: seed 003's tunnel packets), constant arrivals,
    input port i to BALANCED[i]: every output port offered exactly its line rate."""
    import tempfile

    import yaml

    from npkit.emulator.traffic.source import load_traffic_source

    spec = {
        "seed": 3, "router": str(ROOT / "examples" / "traffic" / "router.yaml"),
        "duration_ns": duration_ns, "wire": "seed003" if size == 78 else "ethernet",
        "defaults": {"size": size, "protocol": "tunnel" if size == 78 else "udp", "load": 1.0,
                     "arrivals": "constant"},
        "ports": {i: {"destinations": {"prefixes": [prefix]}} for i, prefix in enumerate(BALANCED)},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        return load_traffic_source(path, duration_ns)


def full_run(layout: str, params: dict[str, Any], size: int | str, window_ns: int, warmup_budget_ns: int,
             max_loss_pct: float | None = 0.0) -> dict[str, Any]:  # fmt: skip
    """Offer 5 x 1 Gb/s for warm-up + window; measure over `window_ns` after the detected warm-up."""
    from npkit.toolchain.system.router_run import RouterRun
    from npkit.toolchain.system.verdict import Policy, judge

    duration_ns = warmup_budget_ns + window_ns
    tr = permutation_traffic(size, duration_ns)
    rr = RouterRun.link(layout, params, tr)
    out = Departures(tr.wire)
    rr.run.on_departure.append(out.add)
    t0 = time.perf_counter()
    rr.run_traffic(duration_ns)
    host_s = time.perf_counter() - t0
    lo = warmup_end_ns(out.times, out.bits, duration_ns, bin_ns(size))
    hi = min(duration_ns, lo + window_ns)
    window_s = max(1e-9, (hi - lo) / 1e9)
    bits_out = sum(b for t, b in zip(out.times, out.bits, strict=True) if lo <= t < hi)
    pkts_out = sum(1 for t in out.times if lo <= t < hi)
    lat = rr.latency.copy()  # before the drain, as measured over the offered traffic
    rr.drain()
    # the figures count only if every packet was right (no loss: the traffic is a permutation)
    verdict = judge(rr.summary(), Policy(max_loss_pct=max_loss_pct))
    return {
        "verdict": verdict,
        # against the line rate itself (the offered load is 100 % of it)
        "pct_line_rate": round(100 * bits_out / (window_s * PORTS * LINK_BPS), 2),
        "mpps": round(pkts_out / window_s / 1e6, 3),
        "lat_mean_us": round(lat.mean() / 1000, 3),
        "lat_p99_us": round(lat.percentile(99) / 1000, 3),
        "warmup_us": round(lo / 1e3, 1),
        "window_ms": round((hi - lo) / 1e6, 3),
        "emulated_ms": duration_ns / 1e6,
        "host_s": host_s,
    }


@benchmark("router")
def bench_router(quick: bool) -> dict[str, Any]:
    window = 1_000_000 if quick else 10_000_000
    warmup_budget = 500_000 if quick else 8_000_000  # IMIX settles only after ~6-7.5 ms
    sizes: list[int | str] = [78, 64] if quick else [64, 78, 128, 256, 512, 1024, 1518, "imix"]
    layouts: dict[str, dict[str, Any]] = {"pipelined": {}, "parallel": {}}  # layout defaults
    out: dict[str, Any] = {}
    ems = hs = 0.0
    reasons: list[str] = []
    for name, params in layouts.items():
        for size in sizes:
            r = full_run(name, params, size, window, warmup_budget)
            for k in ("pct_line_rate", "mpps", "lat_mean_us", "lat_p99_us", "warmup_us", "window_ms"):
                out[f"router.{name}.{size}.{k}"] = r[k]
            reasons += [f"{name} {size} B: {x}" for x in r["verdict"]["reasons"]]
            ems += r["emulated_ms"]
            hs += r["host_s"]
    for n in [1, 2] if quick else [1, 2, 3, 4, 6, 8]:
        # a pool too small for line rate loses packets by design: only correctness counts
        r = full_run("parallel", {"pool_mes": n}, 78, window // 5, warmup_budget, max_loss_pct=None)
        out[f"router.parallel.scaling.{n}.pct_line_rate"] = r["pct_line_rate"]
        reasons += [f"parallel scaling {n} MEs: {x}" for x in r["verdict"]["reasons"]]
        ems += r["emulated_ms"]
        hs += r["host_s"]
    out["router.emulated_ms_per_host_s"] = round(ems / hs, 2) if hs else 0.0
    out["router.verdict"] = {"ok": not reasons, "reasons": reasons}
    return out
