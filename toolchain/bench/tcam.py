"""TCAM figures (`npk bench tcam`; docs/tcam.md), on examples/chips/ixp2850_spp.yaml:

tcam.lookup_cycles / tcam.lookup_ns
    round trip of one lookup (the result slot's read) from one thread: issue to completion
    (its signal), behind its own key write on the channel (tcam.h's tcam_lookup).
tcam.emulated_lookups_per_s
    lookups per emulated second with every context of `MES` MEs looking up in a loop (each
    lookup a 5-longword key write and the read): the channel's occupancy bounds it.
tcam.channel_bound_lookups_per_s
    the bound: clock / (key write occupancy + cycles_per_lookup).
tcam.host_lookups_per_s
    host speed of the model: the loop's lookups per host second (the emulator's cost of a
    lookup over `ENTRIES` valid entries of the 8192, with the MEs' own work).
tcam.api_lookups_per_s
    host speed of npk_tcam_lookup alone (the reference model's and the tests' lookup).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from npkit.asm.assembler import assemble_text
from npkit.emulator.binding import Chip
from npkit.toolchain.bench import benchmark

ROOT = Path(__file__).resolve().parents[2]
SPP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
INCLUDE = ROOT / "microcode" / "include"
ENTRIES = 1000
MES = 4

LOOP = """\
#define NUM_CONTEXTS 8
#include "tcam.h"
.reg slot n
.reg write $k0 $k1 $k2 $k3 $k4
.reg read $r0 $r1 $r2 $r3
.xfer_order $k0 $k1 $k2 $k3 $k4
.xfer_order $r0 $r1 $r2 $r3
    tcam_slot(slot)
    immed[n, 0]
again#:
    alu[$k0, --, b, n]
    immed[$k1, 0]
    immed[$k2, 0]
    immed[$k3, 0]
    immed[$k4, 0]
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    alu[n, n, +, 1]
    alu[n, n, and, 0xFF]
    br[again#]
"""


def _chip(mes: int, ctx_mask: int) -> Chip:
    chip = Chip(SPP)
    for i in range(ENTRIES):  # entry i matches key i (the loop cycles through keys 0..255)
        chip.tcam_write(i, [i], [0xFFFFFFFF], i)
    words = assemble_text(LOOP, path="tcam_loop.uc", include_dirs=[INCLUDE]).program.words
    for me in range(mes):
        chip.load(me, words)
        chip.enable(me, ctx_mask)
    return chip


def _round_trip() -> int:
    chip = _chip(1, 0x01)
    chip.history_enable(1)
    chip.run(2000)
    base = chip.tcam_info()["base"] + 0x110000
    ev = chip.history()
    read = next(e for e in ev if e.kind == "mem_issue" and base <= e.a1 < base + 4096)
    done = next(e.cycle for e in ev if e.kind == "mem_done" and e.a1 == read.a1 and e.cycle > read.cycle)
    return done - read.cycle


@benchmark("tcam")
def bench_tcam(quick: bool) -> dict[str, Any]:
    chip = _chip(MES, 0xFF)
    cfg = chip.config
    clock = float(cfg["clock_mhz"]) * 1e6
    cycles = 200_000 if quick else 1_000_000
    t0 = time.perf_counter()
    chip.run(cycles)
    host = time.perf_counter() - t0
    n = chip.tcam_stats()["lookups"]
    sram, tcam = cfg["units"]["sram"], cfg["tcam"]
    per_lookup = 5 * sram["cycles_per_unit"] + tcam["cycles_per_lookup"]
    rt = _round_trip()
    api = Chip(SPP)
    for i in range(ENTRIES):
        api.tcam_write(i, [i], [0xFFFFFFFF], i)
    k = 2000 if quick else 20000
    t0 = time.perf_counter()
    for i in range(k):
        api.tcam_lookup([i & 0x3FF])
    api_s = time.perf_counter() - t0
    return {
        "tcam.lookup_cycles": rt,
        "tcam.lookup_ns": round(rt * 1e9 / clock, 1),
        "tcam.emulated_lookups_per_s": round(n * clock / cycles),
        "tcam.channel_bound_lookups_per_s": round(clock / per_lookup),
        "tcam.host_lookups_per_s": round(n / host),
        "tcam.api_lookups_per_s": round(k / api_s),
    }
