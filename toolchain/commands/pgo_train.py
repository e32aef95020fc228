"""The workload the C core's profile-guided build is trained on (emulator/Makefile, PGO=1).

`make` builds libnpkemu.so instrumented (gcc -fprofile-generate), runs this module with
NPKEMU_LIB naming that build, then builds the library again with the profile it wrote
(-fprofile-use).  The compiler then lays out and inlines the run loop, the fast loop and
the unit commands for the paths a router run takes (docs/performance.md, "The build").

The workload is what npkit spends its host time on: the router in both layouts with the
demo's traffic (seed 003 at line rate, the demo's 10,000 routes), and the emulator
benchmarks' loops (ALU, memory, idle, references in flight).  It runs without the XScale
daemon (control: host), whose programs are built after the core.  A profile only steers
the compiler's choices: the library computes the same results with or without it.

    python -m npkit.toolchain.commands.pgo_train [--ms MS]
"""

from __future__ import annotations

import argparse
import sys
import time

ROUTER_MS = 1.0
LOOP_CYCLES = 100_000


def train_router(layout: str, ms: float) -> int:
    """Run `layout` on the demo's traffic for `ms`; the packets forwarded."""
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.commands.demo import DEMO_ROUTES, SEED003, demo_routes, router_with_routes
    from npkit.toolchain.system.router_run import RouterRun

    duration = int(ms * 1e6)
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)
    traffic = load_traffic_source(SEED003, duration, overrides={"router": str(router)})
    rr = RouterRun.link(layout, {"io": "msf", "control": "host"}, traffic, routes, router)
    rr.run_traffic(duration)
    rr.drain()
    return int(rr.summary()["totals"]["forwarded"])


def train_loops() -> None:
    """The emulator benchmarks' loops (npkit.toolchain.bench.emulator), briefly."""
    from npkit.toolchain.bench import emulator as bench

    bench._mips(bench.ALU_LOOP, 20 * LOOP_CYCLES)
    bench._mips(bench.MEM_LOOP, LOOP_CYCLES)
    bench._idle(LOOP_CYCLES * 1000)
    bench._inflight(LOOP_CYCLES)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", type=float, default=ROUTER_MS, help="emulated ms of router traffic per layout")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    forwarded = {layout: train_router(layout, args.ms) for layout in ("pipelined", "parallel")}
    train_loops()
    print(f"pgo training: {forwarded} packets forwarded, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if not all(forwarded.values()):
        print("pgo training: a layout forwarded nothing: the profile would not cover the router", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
