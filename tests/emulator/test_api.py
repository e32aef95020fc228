"""Debugger API: breakpoints, watchpoints, stepping, registers, stats, history."""

from __future__ import annotations

import pytest

from npkit.emulator.binding import Chip, EmulatorError, load_config

from .util import chip_with

LOOP = ["immed[a1, 0]", "loop#: alu[a1, a1, +, 1]", "immed[a2, 0x100]", "alu[--, a1, -, 10]", "bne[loop#]", "halt"]


def test_breakpoint_stops_before_instruction_and_resumes() -> None:
    chip = chip_with({0: LOOP})
    bp = chip.add_breakpoint(2, me=0)
    assert chip.run(10_000) == "breakpoint"
    stop = chip.last_stop()
    assert (stop["me"], stop["ctx"], stop["pc"]) == (0, 0, 2)
    assert chip.reg(0, "a1") == 1 and chip.reg(0, "pc") == 2
    assert chip.run(10_000) == "breakpoint"
    assert chip.reg(0, "a1") == 2
    chip.del_breakpoint(bp)
    assert chip.run(10_000) == "halted"
    assert chip.reg(0, "a1") == 10


def test_breakpoint_filters_by_context() -> None:
    chip = chip_with({0: ["nop", "nop", "ctx_arb[kill]"]}, ctx_mask=0xFF)
    chip.add_breakpoint(1, me=0, ctx=5)
    assert chip.run(10_000) == "breakpoint"
    assert chip.last_stop()["ctx"] == 5


def test_register_watchpoint() -> None:
    chip = chip_with({0: LOOP})
    chip.add_watchpoint("a2", me=0)
    assert chip.run(10_000) == "watchpoint"
    assert chip.reg(0, "a2") == 0x100 and chip.reg(0, "a1") == 1


def test_register_watchpoint_fires_on_a_change_and_names_the_writer() -> None:
    """LOOP writes a2 = 0x100 in every iteration: one change (pc 2, the writing immed),
    then rewrites of the same value that stop nothing."""
    chip = chip_with({0: LOOP})
    chip.add_watchpoint("a2", me=0)
    assert chip.run(10_000) == "watchpoint"
    stop = chip.last_stop()
    assert (stop["me"], stop["ctx"], stop["pc"]) == (0, 0, 2)
    assert chip.run(10_000) == "halted"
    assert chip.reg(0, "a1") == 10


def test_memory_watchpoint() -> None:
    chip = chip_with({0: ["immed[a1, 0x40]", "immed[$0, 5]", "sram[write, $0, a1, 0, 1], sig_done[s1]",
                          "ctx_arb[s1]", "halt"]})  # fmt: skip
    wp = chip.add_watchpoint("sram:0x40")
    assert chip.run(10_000) == "watchpoint"
    assert chip.read32("sram", 0x40) == 5
    chip.del_watchpoint(wp)
    assert chip.run(10_000) == "halted"


def test_step_executes_one_instruction_of_the_context() -> None:
    prog = ["immed[a1, 1]", "ctx_arb[voluntary]", "immed[a1, 2]", "ctx_arb[voluntary]", "halt"]
    chip = chip_with({0: prog}, ctx_mask=0x3)
    chip.step(0, 1)
    assert chip.reg(0, "pc", ctx=1) == 1 and chip.reg(0, "a1", ctx=1) == 1
    assert chip.reg(0, "pc", ctx=0) == 2  # ctx 0 ran until it yielded
    chip.step(0, 1)
    assert chip.reg(0, "pc", ctx=1) == 2 and chip.reg(0, "a1", ctx=1) == 1
    with pytest.raises(EmulatorError):
        chip.step(0, 5)


def test_register_names_and_errors() -> None:
    chip = Chip("ixp2800")
    chip.set_reg(0, "b3", 0x33, ctx=2)
    assert chip.reg(0, "@b35") == 0x33
    chip.set_reg(0, "$$4.out", 9, ctx=1)
    assert chip.reg(0, "@$$20.out") == 9
    chip.set_reg(0, "n$2", 7, ctx=7)
    assert chip.reg(0, "@n$114") == 7
    chip.set_reg(0, "pc", 12, ctx=3)
    assert chip.reg(0, "pc", ctx=3) == 12
    chip.set_reg(0, "T_INDEX", 0x20)
    assert chip.reg(0, "T_INDEX") == 0x20
    for bad in ("a16", "x1", "@a200", "lm9999"):
        with pytest.raises(EmulatorError):
            chip.reg(0, bad)
    with pytest.raises(EmulatorError):
        chip.mem_read("sram", 0x7FFFFFF0, 64)
    with pytest.raises(EmulatorError):
        Chip("nonexistent")


def test_stats_account_for_cycles() -> None:
    chip = chip_with({0: ["loop#: sram[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a1, a1, +, 4]", "br[loop#]"]},
                     ctx_mask=0xFF)  # fmt: skip
    chip.run(50_000)
    st = chip.stats()
    me = st["mes"][0]
    total = me["executing_cycles"] + me["aborted_cycles"] + me["stalled_cycles"] + me["idle_cycles"]
    assert abs(total - st["cycle"]) <= 8
    assert me["instructions"] == sum(c["instructions"] for c in me["ctx"])
    assert me["ctx_swaps"] > 100
    sram = st["units"]["sram"][0]
    assert sram["commands"] > 100 and sram["bytes"] == 4 * sram["commands"]
    assert st["units"]["dram"][0]["commands"] == 0


def test_history_events_and_drain() -> None:
    chip = chip_with({0: ["sram[read, $0, a1, 0, 1], ctx_swap[s1]", "halt"]})
    chip.history_enable(2)
    chip.run(1000)
    kinds = [e.kind for e in chip.history()]
    assert kinds[:2] == ["instr", "mem_issue"]
    assert {"state", "mem_done", "signal", "halt"} <= set(kinds)
    assert chip.history() == []


def test_ixp2400_config() -> None:
    cfg = load_config("ixp2400")
    assert cfg["num_me"] == 8 and cfg["ustore_words"] == 4096
    chip = Chip("ixp2400")
    with pytest.raises(EmulatorError):
        chip.enable(8, 1)
    with pytest.raises(EmulatorError):
        chip.load(0, [0] * 4097)
    assert len(chip.stats()["units"]["sram"]) == 2


def test_illegal_instruction_stops_me_with_reason() -> None:
    chip = Chip("ixp2800")
    chip.load(0, [0xF000000000 | 0x0300, 0xBF00000000])  # nop, then a word no class matches
    chip.enable(0, 1)
    assert chip.run(1000) == "halted"
    st = chip.me_status(0)
    assert st["state"] == "illegal" and st["pc"] == 1 and "illegal" in st["reason"]


def test_pc_outside_control_store() -> None:
    chip = chip_with({0: ["br[5000]"]}, config="ixp2400")
    chip.run(100)
    st = chip.me_status(0)
    assert st["state"] in ("bad_pc", "illegal")


def test_run_until_condition() -> None:
    chip = chip_with({0: LOOP})
    assert chip.run_until(lambda c: c.reg(0, "a1") >= 5, chunk=3) == "condition"
    assert 5 <= chip.reg(0, "a1") < 10
    assert chip.run_until(lambda c: False, max_cycles=10_000) == "halted"
