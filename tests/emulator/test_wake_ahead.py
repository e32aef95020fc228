"""A context woken on an idle ME runs its first local words in the step of its wake (with
no MSF device, at the wake itself; with one, after the step's events), and a turn issues
a plain unit command itself (emulator/src/me.c: npk_me_run_woken, exec_plain_command).
Both must give what lock-step execution gives: run ahead (history off), in lock-step
(history level 1) and with every word on the general path (level 2), the same registers,
cycle and statistics.

A woken context's word that reads its own read transfer registers runs ahead only while
nothing can write them first: a command of its own that pushes, or one of another context
of the ME that pushes past its window into this one (npk_ctx.xin_pending,
npk_me.xin_foreign).  The races below make such a completion come before, between and
after the woken context's reads."""

from __future__ import annotations

import pytest

from npkit.emulator.binding import Chip
from npkit.emulator.msf_device import MsfDevice
from npkit.toolchain.bench.emulator import MEM_LOOP, _chip

from .util import chip_with


def _state(chip: Chip, mes: range, regs: tuple[str, ...]) -> tuple[object, ...]:
    st = chip.stats()
    values = [[chip.reg(me, r, ctx=ctx) for r in regs] for me in mes for ctx in range(8)]
    return values, chip.cycle, st["mes"], st["units"]


def _memory_loop(history: int, device: bool, queue_depth: int, cycles: int = 20_000) -> tuple[object, ...]:
    """The emu.mem_mips program (every context of every ME: an SRAM read and a DRAM read
    with swaps, an add of what came back) -- its contexts woken on idle MEs all the time."""
    chip = _chip(MEM_LOOP, units={"sram": {"queue_depth": queue_depth}, "dram": {"queue_depth": queue_depth}})
    for me in range(chip.num_me):   # something to add up, another for every ME and context
        chip.mem_write("dram", me << 16, bytes((7 * i + me) & 0xFF for i in range(8 << 12)))
    if device:
        MsfDevice(chip)
    chip.history_enable(history)
    chip.run(cycles)
    return _state(chip, range(chip.num_me), ("a1", "a2"))


@pytest.mark.parametrize("queue_depth", [64, 4], ids=["queues", "full-queues"])
@pytest.mark.parametrize("device", [False, True], ids=["no-device", "msf-device"])
def test_the_memory_loop_runs_ahead_as_in_lockstep(device: bool, queue_depth: int) -> None:
    ahead, lockstep, general = (_memory_loop(level, device, queue_depth) for level in (0, 1, 2))
    assert ahead == lockstep == general
    values, _cycle, mes, _units = ahead
    assert all(me["instructions"] > 0 for me in mes) and sum(me["instructions"] for me in mes) > 16 * 200
    assert len({a2 for a1, a2 in values}) > 4   # the contexts added up different values
    if queue_depth == 4:
        assert any(me["stalled_cycles"] > 1_000 for me in mes)   # the full queues stalled issues


# ME 0, context 1 spins `delay` rounds, reads SRAM with a swap and, woken on the idle ME,
# adds its $$0 ten times.  A DRAM read into that register is in flight meanwhile: context
# 0's (`foreign`: it names $$15 and moves four longwords, the last three into context 1's
# window) or context 1's own, issued without waiting before the SRAM read.  Whether each
# add sees the DRAM read's value depends on when it completes.
def _race(delay: int, foreign: bool, history: int, device: bool) -> tuple[object, ...]:
    adds = ["immed[a4, 10]", "add#: alu[a2, a2, +, $$0]", "alu[a4, a4, -, 1]", "bne[add#]", "ctx_arb[kill]"]
    wait = [f"immed[a5, {delay}]", "spin#: alu[a5, a5, -, 1]", "bne[spin#]"]
    if foreign:
        ctx0 = ["dram[read, $$15, a1, 0, 2], sig_done[s2]", "ctx_arb[s2]", "ctx_arb[kill]"]
        ctx1 = [*wait, "sram[read, $0, a3, 0, 1], ctx_swap[s1]", *adds]
    else:
        ctx0 = ["ctx_arb[kill]"]
        ctx1 = ["dram[read, $$0, a1, 0, 1], sig_done[s2]", *wait, "sram[read, $0, a3, 0, 1], ctx_swap[s1]", *adds]
    prog = ["br=ctx[1, c1#]", *ctx0, "c1#: " + ctx1[0], *ctx1[1:]]
    chip = chip_with({0: prog}, ctx_mask=0x3)
    chip.mem_write("dram", 0x100, (7).to_bytes(4, "big") * 4)
    for ctx in range(2):
        chip.set_reg(0, "a1", 0x100, ctx=ctx)
    if device:
        MsfDevice(chip)
    chip.history_enable(history)
    chip.run(2_000)
    return _state(chip, range(1), ("a2", "a4", "a5"))


@pytest.mark.parametrize("device", [False, True], ids=["no-device", "msf-device"])
@pytest.mark.parametrize("foreign", [True, False], ids=["other-contexts-push", "own-push"])
def test_a_woken_context_reads_its_transfer_registers_as_in_lockstep(foreign: bool, device: bool) -> None:
    sums = set()
    for delay in range(1, 60, 3):
        ahead, lockstep, general = (_race(delay, foreign, level, device) for level in (0, 1, 2))
        assert ahead == lockstep == general, f"delay {delay}"
        sums.add(ahead[0][1][0])   # context 1's a2
    # the DRAM read completed before the adds (70), during them, and after them (0)
    assert 70 in sums and 0 in sums and any(0 < s < 70 for s in sums), sorted(sums)
