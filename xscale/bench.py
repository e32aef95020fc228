"""XScale benchmarks (`npk bench xscale`).

xscale.mips               millions of ARM instructions per host second: the Unicorn
                          XScale runs an integer loop (xs_demo spin) in lockstep with
                          the chip (quanta from the chip config, the C budget hook),
                          all 16 MEs asleep on far-off DRAM reads.
xscale.idle_overhead_pct  host-time overhead of an XScale asleep on its interrupt
                          (xs_demo idle) beside a microengine workload (16 MEs x 8
                          contexts in the SRAM/DRAM read loop of `npk bench emu`),
                          advanced in 20 us slices as the traffic loop does, against
                          the same workload without an XScale.  Best of 5 each,
                          interleaved.
Host time is the emulator process's CPU time (time.process_time): the machine is
shared, and CPU time does not count other processes' turns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from npkit.emulator.bench import IDLE_LOOP, MEM_LOOP, _chip
from npkit.toolchain.bench import benchmark

from .system import System

PROGRAM = Path(__file__).resolve().parent / "build" / "arm" / "xs_demo.elf"
SLICE = 28_000          # 20 us of ME cycles at 1.4 GHz, as TrafficRun slices time


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


def _workload_seconds(cycles: int, with_xscale: bool) -> float:
    chip = _chip(MEM_LOOP)
    system = System(chip)
    if with_xscale:
        system.attach_xscale(PROGRAM, ["idle"])
        system.run(SLICE)
    t0 = time.process_time()
    done = 0
    while done < cycles:
        system.run(SLICE)
        done += SLICE
    dt = time.process_time() - t0
    if with_xscale:
        assert system.xscale.state == "waiting", "the idle program should be asleep"
    system.close()
    return dt


@benchmark("xscale")
def bench_xscale(quick: bool) -> dict[str, Any]:
    if not PROGRAM.exists():
        raise RuntimeError(f"{PROGRAM} is missing: run `make`")
    mips = max(_mips(200_000_000 if quick else 1_000_000_000) for _ in range(2))
    cycles = 1_000_000 if quick else 4_000_000
    pairs = [(_workload_seconds(cycles, False), _workload_seconds(cycles, True)) for _ in range(5)]
    without = min(p[0] for p in pairs)
    with_xs = min(p[1] for p in pairs)
    return {
        "xscale.mips": round(mips, 1),
        "xscale.idle_overhead_pct": round((with_xs - without) / without * 100, 2),
    }
