"""Timing: latency from the config, contention, interleaving, wake-up order,
idle skipping and determinism."""

from __future__ import annotations

from npkit.emulator.binding import Chip, HistEvent

from .util import assemble, chip_with


def _events(chip: Chip, kind: str) -> list[HistEvent]:
    return [e for e in chip.history() if e.kind == kind]


def test_sram_read_completes_after_configured_latency() -> None:
    chip = chip_with({0: ["immed[a1, 0x100]", "sram[read, $0, a1, 0, 1], ctx_swap[s1]", "halt"]})
    chip.history_enable(1)
    chip.run(5000)
    ev = chip.history()
    issue = next(e for e in ev if e.kind == "mem_issue")
    done = next(e for e in ev if e.kind == "mem_done")
    sram = chip.config["units"]["sram"]
    # documented: cmd_overhead (command bus) + occupancy of one longword + read latency
    assert done.cycle - issue.cycle == sram["cmd_overhead"] + sram["cycles_per_unit"] + sram["read_latency"]
    sig = next(e for e in ev if e.kind == "signal")
    assert sig.cycle == done.cycle and sig.a0 == 1


def test_latency_follows_config_override() -> None:
    over = {"units": {"sram": {"read_latency": 500}}}
    chip = chip_with({0: ["sram[read, $0, a1, 0, 1], ctx_swap[s1]", "halt"]}, **over)
    chip.history_enable(1)
    chip.run(5000)
    ev = chip.history()
    issue = next(e for e in ev if e.kind == "mem_issue")
    done = next(e for e in ev if e.kind == "mem_done")
    assert done.cycle - issue.cycle == 500 + chip.config["units"]["sram"]["cmd_overhead"] + 6


READ_LOOP = ["immed[a2, 20]", "loop#: sram[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a2, a2, -, 1]",
             "bne[loop#]", "ctx_arb[kill]"]  # fmt: skip


def test_eight_contexts_interleave_on_sram_reads() -> None:
    chip1 = chip_with({0: READ_LOOP}, ctx_mask=0x01)
    chip1.run(10**6)
    one = chip1.me_status(0)["cycle"] if chip1.me_status(0)["state"] != "running" else chip1.cycle
    chip8 = chip_with({0: READ_LOOP}, ctx_mask=0xFF)
    chip8.history_enable(1)
    assert chip8.run(10**6) == "halted"
    eight = chip8.cycle
    st = chip8.stats()["mes"][0]
    assert [c["instructions"] for c in st["ctx"]] == [1 + 20 * 3 + 1] * 8
    # eight threads doing 8x the work take far less than 8x the time
    assert eight < 2 * one
    # while one context sleeps on its read others run: some context is running
    # between any issue and its completion
    running = [e for e in chip8.history() if e.kind == "state" and e.a0 == 2]
    assert len({e.ctx for e in running}) == 8


def test_no_context_wakes_before_its_signal() -> None:
    chip = chip_with({0: READ_LOOP, 1: READ_LOOP}, ctx_mask=0xFF)
    chip.history_enable(1)
    chip.run(10**6)
    ev = chip.history()
    pending: dict[tuple[int, int], int] = {}
    checked = 0
    for e in ev:
        key = (e.me, e.ctx)
        if e.kind == "mem_issue":
            pending[key] = e.cycle
        elif e.kind == "signal":
            pending.pop(key, None)
        elif e.kind == "state" and e.a0 in (1, 2) and key in pending:
            raise AssertionError(f"ME {e.me} ctx {e.ctx} became ready at {e.cycle} before its signal")
        if e.kind == "state" and e.a0 == 2:
            checked += 1
    assert checked > 100


def _hammer(addr_me0: int, addr_me1: int) -> int:
    progs = {}
    for me, addr in ((0, addr_me0), (1, addr_me1)):
        progs[me] = [f"immed_w1[a1, 0x{addr >> 16:x}]", "immed[a2, 30]",
                     "loop#: sram[read, $0, a1, 0, 8], ctx_swap[s1]", "alu[a2, a2, -, 1]",
                     "bne[loop#]", "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with(progs, ctx_mask=0xFF)
    assert chip.run(10**7) == "halted"
    return chip.cycle


def test_one_sram_channel_is_slower_than_two() -> None:
    same = _hammer(0x00000000, 0x00000000)
    split = _hammer(0x00000000, 0x40000000)
    assert same > split * 1.3


def test_queue_statistics_show_contention() -> None:
    chip = chip_with({0: ["loop#: sram[read, $0, a1, 0, 8], ctx_swap[s1]", "br[loop#]"]}, ctx_mask=0xFF)
    chip.run(100_000)
    ch0 = chip.stats()["units"]["sram"][0]
    assert ch0["queue_max"] >= 4
    assert 0.3 < ch0["utilization"] <= 1.0


def test_idle_time_is_skipped() -> None:
    chip = chip_with({0: ["ctx_arb[s1]", "halt"]}, ctx_mask=0xFF)
    assert chip.run(10**12) == "budget"
    assert chip.cycle == 10**12
    assert chip.stats()["mes"][0]["idle_cycles"] >= 10**12 - 100


def test_far_completion_wakes_after_skip() -> None:
    over = {"units": {"dram": {"read_latency": 50_000_000}}}
    chip = chip_with({0: ["dram[read, $$0, a1, 0, 1], ctx_swap[s2]", "immed[a5, 1]", "halt"]}, **over)
    assert chip.run(10**9) == "halted"
    assert chip.reg(0, "a5") == 1 and chip.cycle > 50_000_000


MULTI = {
    0: ["loop#: local_csr_rd[PSEUDO_RANDOM_NUMBER]", "immed[a1, 0]", "alu[a1, a1, AND, 0xff]",
        "alu_shf[a1, --, B, a1, <<2]", "sram[read, $0, a1, 0, 2], ctx_swap[s1]",
        "alu[$1, $0, +, 1]", "scratch[write, $1, a1, 0, 1], ctx_swap[s2]",
        "alu[*n$index++, --, B, a1]", "br[loop#]"],
    1: ["loop#: br_inp_state[NN_EMPTY, loop#]", "alu[a2, --, B, *n$index++]",
        "dram[read, $$0, a2, 0, 1], sig_done[s4]", "ctx_arb[s4, s5]", "alu[a3, a3, +, $$0]", "br[loop#]"],
}  # fmt: skip


def _multi_hash(seed: int) -> tuple[int, int]:
    chip = Chip("ixp2800", seed=seed)
    for me, prog in MULTI.items():
        chip.load(me, assemble(prog))
        chip.enable(me, 0xFF)
    chip.history_enable(1)
    chip.run(200_000)
    return chip.history_hash(), chip.stats()["mes"][1]["instructions"]


def test_identical_runs_give_identical_history() -> None:
    h1, n1 = _multi_hash(7)
    h2, n2 = _multi_hash(7)
    assert (h1, n1) == (h2, n2)
    assert n1 > 1000
    h3, _ = _multi_hash(8)
    assert h3 != h1


def test_full_command_queue_stalls_the_issuing_me() -> None:
    # sig_done writes in a tight loop would queue without bound; the channel holds queue_depth
    prog = ["loop#: sram[write, $0, a1, 0, 8], sig_done[s1]", "br[loop#]"]
    chip = chip_with({0: prog, 1: prog}, ctx_mask=0xFF)
    chip.run(200_000)
    depth = chip.config["units"]["sram"]["queue_depth"]
    st = chip.stats()
    assert st["units"]["sram"][0]["queue_max"] == depth
    assert st["mes"][0]["stalled_cycles"] > 100_000
    assert st["units"]["sram"][0]["utilization"] > 0.95


def _busy(chip: Chip, me: int = 0) -> int:
    m = chip.stats()["mes"][me]
    return m["executing_cycles"] + m["aborted_cycles"] + m["stalled_cycles"] + m["idle_cycles"]


# every context runs 3 words, then swaps out to the next one (a swap costs cycles) and
# branches back (a taken branch aborts the words behind it): the ME is never idle
_SWAPPING = ["loop#: alu[a1, a1, +, 1]", "alu[a2, a2, +, 1]", "ctx_arb[voluntary]", "br[loop#]"]


def test_me_cycle_counters_partition_a_run_that_ends_mid_swap_or_mid_branch() -> None:
    # the swap's cost and the branch's aborted cycles are counted when they begin; a run
    # that ends inside them counts only the cycles it reached (it reported 120 % before)
    for cycles in range(1, 80):
        chip = chip_with({0: _SWAPPING}, ctx_mask=0xFF)
        chip.run(cycles)
        assert chip.cycle == cycles
        assert _busy(chip) == cycles, cycles
        # (a lock-step run counts the same)
        ref = chip_with({0: _SWAPPING}, ctx_mask=0xFF)
        ref.history_enable(1)
        ref.run(cycles)
        assert ref.stats()["mes"][0] == chip.stats()["mes"][0]
    # and a run continued from there counts the rest
    chip = chip_with({0: _SWAPPING}, ctx_mask=0xFF)
    for _ in range(40):
        chip.run(7)
        assert _busy(chip) == chip.cycle


def test_a_halted_run_ends_after_the_halts_cycle() -> None:
    # br at 0, its 3 aborted cycles, the halt at 4: five cycles, all of them busy
    chip = chip_with({0: ["br[x#]", "nop", "nop", "x#: halt"]})
    assert chip.run(100) == "halted"
    m = chip.stats()["mes"][0]
    assert chip.me_status(0)["cycle"] == 4
    assert chip.cycle == 5
    assert (m["executing_cycles"], m["aborted_cycles"]) == (2, 3)
    assert _busy(chip) == chip.cycle
