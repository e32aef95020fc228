"""Emulator benchmarks (`npk bench emu`).

emu.alu_mips            16 MEs x 8 contexts in an ALU-bound loop: millions of
                        ME instructions per host second.
emu.mem_mips            the same threads doing SRAM and DRAM reads with
                        ctx_swap: ME instructions per host second.  (Before the C core
                        issue, 12 of the 16 MEs read DRAM past its 64 MB: every DRAM read
                        of theirs was a fault; the addresses are now inside.)
emu.idle_gcycles_per_s  every context asleep on a far-off completion (DRAM
                        latency set to 10^7 cycles): billions of chip cycles
                        simulated per host second.
emu.inflight_mrefs_per_s  thousands of memory references in flight (every ME issues
                        SRAM reads without waiting; 2,000-cycle latency, no queue
                        limit, no channel occupancy): millions of references issued
                        and completed per host second -- the event queue's figure.
emu.inflight_refs       how many were in flight on average in that run.
"""

from __future__ import annotations

import time
from typing import Any

from npkit.asm.isa import encode
from npkit.emulator.binding import Chip
from npkit.toolchain.bench import benchmark


def _words(lines: list[str]) -> list[int]:
    labels = {"loop#": 0}
    body = [t.split(":", 1)[1].strip() if t.startswith("loop#:") else t for t in lines]
    return [encode(t, resolve=lambda n: labels.get(n)) for t in body]


ALU_LOOP = ["loop#: alu[a1, a1, +, 1]", "alu[a2, a1, XOR, 3]", "alu_shf[a3, a2, OR, 1, <<3]",
            "alu[b4, a3, AND, b1]", "br[loop#], defer[1]", "alu[a5, --, B, b4]"]  # fmt: skip
# a1: SRAM address (channel bits 31:30); a1 + b1: the DRAM address (b1 takes the channel
# bits off: DRAM is one flat 64 MB space)
MEM_LOOP = ["loop#: sram[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a1, a1, +, 4]",
            "dram[read, $$0, a1, b1, 1], ctx_swap[s2]", "alu[a2, a2, +, $$0]",
            "br[loop#]"]  # fmt: skip
IDLE_LOOP = ["loop#: dram[read, $$0, a1, b1, 1], ctx_swap[s2]", "br[loop#]"]
INFLIGHT_LOOP = ["loop#: sram[read, $0, a1, 0, 1], sig_done[s1]", "br[loop#], defer[1]", "alu[a1, a1, +, 4]"]
INFLIGHT_LATENCY = 2000


def _loop_regs(me: int, ctx: int) -> tuple[int, int]:
    """a1 and b1 of context `ctx` of ME `me` in the loops: each ME over its own SRAM
    channel and DRAM region (tools/core_counts.py hands them to its C driver too)."""
    return ((me % 4) << 30) | (ctx << 12), ((me << 16) - ((me % 4) << 30)) & 0xFFFFFFFF


def _chip(lines: list[str], mes: int | None = None, **overrides: Any) -> Chip:
    """Every context of every ME (of the first `mes`) running `lines`."""
    chip = Chip("ixp2800", **overrides)
    words = _words(lines)
    for me in range(chip.num_me):
        chip.load(me, words)
        if mes is None or me < mes:
            chip.enable(me, 0xFF)
        for ctx in range(8):
            a1, b1 = _loop_regs(me, ctx)
            chip.set_reg(me, "a1", a1, ctx=ctx)
            chip.set_reg(me, "b1", b1, ctx=ctx)
    return chip


def _mips(lines: list[str], cycles: int) -> float:
    chip = _chip(lines)
    t0 = time.perf_counter()
    chip.run(cycles)
    dt = time.perf_counter() - t0
    n = sum(m["instructions"] for m in chip.stats()["mes"])
    return n / dt / 1e6


def _idle(cycles: int) -> float:
    chip = _chip(IDLE_LOOP, units={"dram": {"read_latency": 10_000_000}})
    t0 = time.perf_counter()
    chip.run(cycles)
    dt = time.perf_counter() - t0
    return chip.cycle / dt / 1e9


def _inflight(cycles: int) -> tuple[float, float]:
    """(million references per host second, references in flight on average)."""
    chip = _chip(INFLIGHT_LOOP, units={"sram": {"queue_depth": 0, "cycles_per_unit": 0,
                                                "read_latency": INFLIGHT_LATENCY}})  # fmt: skip
    chip.run(INFLIGHT_LATENCY)  # fill the pipe
    before = sum(c["commands"] for c in chip.stats()["units"]["sram"])
    t0 = time.perf_counter()
    chip.run(cycles)
    dt = time.perf_counter() - t0
    refs = sum(c["commands"] for c in chip.stats()["units"]["sram"]) - before
    return refs / dt / 1e6, refs / cycles * INFLIGHT_LATENCY


@benchmark("emu")
def bench_emu(quick: bool) -> dict[str, Any]:
    scale = 1 if quick else 5
    refs_per_s, in_flight = max((_inflight(200_000 * scale) for _ in range(2)), key=lambda r: r[0])
    return {
        "emu.alu_mips": round(max(_mips(ALU_LOOP, 1_000_000 * scale) for _ in range(2)), 1),
        "emu.mem_mips": round(max(_mips(MEM_LOOP, 1_000_000 * scale) for _ in range(2)), 2),
        "emu.idle_gcycles_per_s": round(_idle(10_000_000_000 * scale), 1),
        "emu.inflight_mrefs_per_s": round(refs_per_s, 1),
        "emu.inflight_refs": round(in_flight),
    }
