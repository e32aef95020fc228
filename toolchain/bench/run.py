"""Benchmarks of a whole run (`npk bench run`): set-up, where the host time of a run goes,
end-to-end speed, and memory against run length (docs/performance.md has the figures).

    run.setup_s.cold / .warm            configuration to the first emulated cycle, in a fresh
                                        process (imports included): an empty cache (npkit's and
                                        Python's bytecode cache), then the same again
    run.host_s_per_emulated_ms.<part>   the demo configuration (10k routes, seed 003 at line
                                        rate, pipelined), from the linked image to the summary:
                                        core (Chip.run and its services), traffic (generating
                                        it, handing it to the MSF), oracle (its verdicts), other
                                        (matching what leaves, the comparison, latency, fates,
                                        the run loop, drain checks, the summary); and total
    router.emulated_ms_per_host_s.<layout>.<size>   end to end in one process with a warm
                                        cache: link, traffic, run, drain, summary (64 B and
                                        IMIX, 5 x 1 Gb/s permutation traffic)
    router.rss_mb.<ms>ms                peak RSS of `npk demo --ms <ms>` (fresh processes)
    router.rss_mb_per_emulated_s        the slope between the two: flat is 0
    router.rss_mb_1s_projected          the longer run's peak plus the slope to 1 s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from npkit.toolchain.bench import benchmark
from npkit.toolchain.system.paths import ROOT

SETUP_SCRIPT = """
import time
t0 = time.perf_counter()
from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.commands.demo import DEMO_ROUTES, SEED003, demo_routes, router_with_routes
from npkit.toolchain.system.router_run import RouterRun
routes = demo_routes(DEMO_ROUTES)
router = router_with_routes(routes)
tr = load_traffic_source(SEED003, 1_000_000, overrides={"router": str(router)})
rr = RouterRun.link("pipelined", {"io": "msf"}, tr, routes, router)
rr.run._push_until(20_000)  # the first packets are with the MSF: the next step is a cycle
print(time.perf_counter() - t0)
"""

# The peak from /proc (VmHWM: this process's own address space), not getrusage's
# ru_maxrss, which after exec keeps the high-water mark of the parent's pages: under a
# `make bench` that had grown to 600 MB, a 70 MB demo reported 617 MB.
RSS_SCRIPT = """
import sys
from click.testing import CliRunner
from npkit.toolchain.cli import main
res = CliRunner().invoke(main, ["demo", "--ms", sys.argv[1], "--json"])
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(res.exit_code, int(hwm.split()[1]) / 1024)
"""


def _python(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    res = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}, cwd=ROOT)  # fmt: skip
    return res.stdout.strip().splitlines()[-1]


def setup_seconds() -> dict[str, float]:
    """Cold (an empty cache) and warm (the same configuration again) set-up, fresh processes."""
    with tempfile.TemporaryDirectory() as cache:
        # Python's bytecode cache too, kept out of the tree, as a machine where it is written
        env = {"NPK_CACHE_DIR": cache, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": f"{cache}/pyc"}
        cold = float(_python(SETUP_SCRIPT, env=env))
        warm = min(float(_python(SETUP_SCRIPT, env=env)) for _ in range(2))
    return {"run.setup_s.cold": round(cold, 3), "run.setup_s.warm": round(warm, 3)}


def time_split(ms: float) -> dict[str, float]:
    """Host seconds per emulated millisecond of the demo configuration, by part."""
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.commands.demo import DEMO_ROUTES, SEED003, demo_routes, router_with_routes
    from npkit.toolchain.system.router_run import RouterRun

    dur = int(ms * 1e6)
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)
    tr = load_traffic_source(SEED003, dur, overrides={"router": str(router)})
    rr = RouterRun.link("pipelined", {"io": "msf"}, tr, routes, router)
    t0 = time.perf_counter()
    rr.run_traffic(dur)
    rr.drain()
    rr.summary()
    total = time.perf_counter() - t0
    emulated = rr.run.now_ns / 1e6
    t = rr.run.times
    parts = {"core": t["core"], "traffic": t["traffic"] - rr.oracle_s, "oracle": rr.oracle_s}
    parts["other"] = total - sum(parts.values())
    out = {f"run.host_s_per_emulated_ms.{k}": round(v / emulated, 4) for k, v in parts.items()}
    out["run.host_s_per_emulated_ms.total"] = round(total / emulated, 4)
    return out


def end_to_end(layout: str, size: int | str, ms: float) -> float:
    """Emulated ms per host second: link (warm cache), traffic, run, drain, summary."""
    from npkit.toolchain.bench.system import permutation_traffic
    from npkit.toolchain.system.router_run import RouterRun

    dur = int(ms * 1e6)
    RouterRun.link(layout, {})  # the image into the cache: the figure is the warm run's
    t0 = time.perf_counter()
    rr = RouterRun.link(layout, {}, permutation_traffic(size, dur))
    rr.run_traffic(dur)
    rr.drain()
    rr.summary()
    return rr.run.now_ns / 1e6 / (time.perf_counter() - t0)


def rss(ms_short: float, ms_long: float) -> dict[str, float]:
    """Peak RSS of two demo runs of different length (fresh processes) and the slope.
    Each length is run once first: the traffic spec's checked result is cached by its
    duration, and a run that validates it imports pydantic (~10 MB) -- set-up, not growth."""
    peaks = {}
    for ms in (ms_short, ms_long):
        _python(RSS_SCRIPT, f"{ms:g}")
        code, peak = _python(RSS_SCRIPT, f"{ms:g}").split()
        if code not in ("0", "1"):
            raise RuntimeError(f"npk demo --ms {ms:g} exited {code}")
        peaks[ms] = float(peak)
    slope = (peaks[ms_long] - peaks[ms_short]) / ((ms_long - ms_short) / 1000)
    return {f"router.rss_mb.{ms_short:g}ms": round(peaks[ms_short], 1), f"router.rss_mb.{ms_long:g}ms": round(peaks[ms_long], 1),
            "router.rss_mb_per_emulated_s": round(slope, 1),
            "router.rss_mb_1s_projected": round(peaks[ms_long] + max(0.0, slope) * (1 - ms_long / 1000), 1)}  # fmt: skip


@benchmark("run")
def bench_run(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out.update(setup_seconds())
    out.update(time_split(2.0 if quick else 10.0))
    for layout in ("pipelined", "parallel"):
        for size in (64, "imix"):
            out[f"router.emulated_ms_per_host_s.{layout}.{size}"] = round(end_to_end(layout, size, 1.0 if quick else 10.0), 2)
    out.update(rss(5, 20) if quick else rss(10, 50))
    return out


if __name__ == "__main__":  # a quick look: python -m npkit.toolchain.bench.run
    print(json.dumps(bench_run(True), indent=2))
