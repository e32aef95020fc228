"""Branches, defer slots, contexts, signals, local CSRs."""

from __future__ import annotations

import pytest

from npkit.emulator.binding import Chip

from .util import assemble, chip_with, ld32, run_prog


def test_branch_taken_and_not_taken() -> None:
    chip = run_prog(["immed[a1, 5]", "alu[--, a1, -, 5]", "beq[eq#]", "immed[a2, 1]", "halt",
                     "eq#: immed[a2, 2]", "alu[--, a1, -, 6]", "bne[ne#]", "immed[a3, 9]",
                     "ne#: immed[a4, 7]", "halt"])  # fmt: skip
    assert [chip.reg(0, r) for r in ("a2", "a3", "a4")] == [2, 0, 7]


def test_signed_and_unsigned_compares() -> None:
    # a1 = -1, b1 = 1: signed a1 < b1 (blt), unsigned a1 > b1 (bhs)
    chip = run_prog([*ld32("a1", 0xFFFFFFFF), "immed[b1, 1]", "immed[a5, 0]",
                     "alu[--, a1, -, b1]", "blt[l1#]", "br[bad#]",
                     "l1#: alu[--, a1, -, b1]", "bhs[l2#]", "br[bad#]",
                     "l2#: alu[--, b1, -, a1]", "bgt[l3#]", "br[bad#]",
                     "l3#: immed[a5, 1]", "halt", "bad#: immed[a5, 0xbad]", "halt"])  # fmt: skip
    assert chip.reg(0, "a5") == 1


def test_defer_slots_execute_before_branch() -> None:
    chip = run_prog(["immed[a1, 0]", "br[t#], defer[2]", "immed[a1, 1]", "immed[a2, 2]",
                     "immed[a3, 3]", "t#: halt"])  # fmt: skip
    assert [chip.reg(0, r) for r in ("a1", "a2", "a3")] == [1, 2, 0]


def test_taken_branch_penalty_costs_cycles() -> None:
    # a taken branch without defer costs branch_taken_penalty extra cycles; with defer[3] none
    c1 = run_prog(["br[t#]", "t#: halt"])
    c2 = run_prog(["br[t#], defer[3]", "nop", "nop", "nop", "t#: halt"])
    pen = c1.config["branch_taken_penalty"]
    assert c1.me_status(0)["cycle"] == 1 + pen
    assert c2.me_status(0)["cycle"] == 4
    assert c1.stats()["mes"][0]["aborted_cycles"] == pen


def test_loop_counts() -> None:
    chip = run_prog(["immed[a1, 10]", "immed[a2, 0]",
                     "loop#: alu[a2, a2, +, 3]", "alu[a1, a1, -, 1]", "bne[loop#]", "halt"], cycles=1000)  # fmt: skip
    assert chip.reg(0, "a2") == 30


def test_br_bset_bclr_and_br_byte() -> None:
    chip = run_prog(["immed[a1, 0x1208]", "immed[b1, 0x34, <<8]",
                     "br_bset[a1, 3, s1#]", "immed[a5, 0xbad]", "halt",
                     "s1#: br_bclr[a1, 2, s2#]", "immed[a5, 0xbad]", "halt",
                     "s2#: br=byte[a1, 1, 0x12, s3#]", "immed[a5, 0xbad]", "halt",
                     "s3#: br!=byte[b1, 1, 0x34, bad#]", "immed[a5, 1]", "halt",
                     "bad#: immed[a5, 0xbad]", "halt"])  # fmt: skip
    assert chip.reg(0, "a5") == 1


def test_jump_and_rtn() -> None:
    chip = run_prog(["immed[a1, 4]", "jump[a1, t#]", "immed[a2, 0xbad]", "halt",
                     "t#: immed[b3, 7]", "rtn[b3]", "halt", "immed[a2, 0x600d]", "halt"])  # fmt: skip
    assert chip.reg(0, "a2") == 0x600D


def test_br_ctx_and_context_relative_registers() -> None:
    # every context writes its own a1; context 3 also sets @a100
    prog = ["br=ctx[3, three#]", "immed[a1, 0x11]", "ctx_arb[kill]",
            "three#: immed[a1, 0x33]", "immed[@a100, 0x99]", "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0xFF)
    chip.run(500)
    assert [chip.reg(0, "a1", ctx=c) for c in range(8)] == [0x11, 0x11, 0x11, 0x33, 0x11, 0x11, 0x11, 0x11]
    assert chip.reg(0, "@a100") == 0x99
    assert chip.reg(0, "@a49") == 0x33  # ctx 3, a1 -> absolute 3*16+1
    assert chip.run(100) == "halted"


def test_four_context_mode_register_windows() -> None:
    prog = ["br=ctx[2, two#]", "immed[a20, 0x11]", "ctx_arb[kill]", "two#: immed[a20, 0x22]", "ctx_arb[kill]"]
    chip = chip_with({0: prog}, ctx_mask=0xFF, ctx_mode=4)
    chip.run(500)
    assert chip.reg(0, "@a20") == 0x11   # ctx 0: 0*32+20
    assert chip.reg(0, "@a52") == 0x22   # ctx 2: 1*32+20
    assert chip.ctx_state(0, 1) == "inactive"  # odd contexts do not exist in 4-ctx mode


def test_voluntary_swap_round_robin() -> None:
    # each context appends its number to a shared absolute register, then yields
    prog = ["local_csr_rd[ACTIVE_CTX_STS]", "immed[a1, 0]", "alu[a1, a1, AND, 7]",
            "alu[b3, --, B, @a90]", "alu_shf[b3, a1, OR, b3, <<4]", "alu[@a90, --, B, b3]",
            "ctx_arb[voluntary]",
            "alu[b3, --, B, @a90]", "alu_shf[b3, a1, OR, b3, <<4]", "alu[@a90, --, B, b3]",
            "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0x0F)
    chip.run(2000)
    assert chip.reg(0, "@a90") == 0x01230123


def test_local_csr_rd_returns_through_next_immed() -> None:
    # the Linux rx code: local_csr_rd[ACTIVE_CTX_STS] then immed[temp, 0]
    prog = ["local_csr_rd[ACTIVE_CTX_STS]", "immed[a1, 0]", "alu[a2, a1, AND, 7]", "ctx_arb[kill]"]
    chip = chip_with({5: prog}, ctx_mask=0x40)
    chip.run(200)
    assert chip.reg(5, "a2", ctx=6) == 6
    assert (chip.reg(5, "a1", ctx=6) >> 3) & 0x1F == 5  # ME number


def test_local_csr_write_to_use_delay() -> None:
    # T_INDEX written, then read through *$index before/after the write-to-use delay
    prog = ["local_csr_wr[T_INDEX, 8]", "alu[a1, --, B, *$index]", "nop", "nop", "alu[a2, --, B, *$index]",
            "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.set_reg(0, "@$0", 0x1000)
    chip.set_reg(0, "@$2", 0x2000)
    chip.run(100)
    assert chip.reg(0, "a1") == 0x1000  # old T_INDEX (0) still in effect
    assert chip.reg(0, "a2") == 0x2000


def test_same_me_signal_wakes_sleeping_context() -> None:
    # ctx 0 waits on s3; ctx 1 signals ctx 0 s3 through SAME_ME_SIGNAL ([6:3] sig, [2:0] ctx)
    prog = ["br=ctx[1, one#]", "ctx_arb[s3]", "immed[a1, 0x77]", "halt",
            "one#: immed[a2, 0x18]", "local_csr_wr[SAME_ME_SIGNAL, a2]", "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0x3)
    chip.run(500)
    assert chip.reg(0, "a1", ctx=0) == 0x77
    assert chip.me_status(0)["state"] == "halt"


def test_br_signal_consumes_signal() -> None:
    prog = ["br_signal[s2, got#]", "immed[a1, 1]", "halt",
            "got#: br_signal[s2, bad#]", "immed[a1, 2]", "halt", "bad#: immed[a1, 3]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.set_signal(0, 2, ctx=0)
    chip.run(200)
    assert chip.reg(0, "a1") == 2


def test_ctx_arb_all_vs_any() -> None:
    prog = ["ctx_arb[s1, s2]", "immed[a1, 1]", "ctx_arb[s3, s4], any", "immed[a2, 1]", "halt"]
    chip = chip_with({0: prog})
    chip.set_signal(0, 1, ctx=0)
    chip.run(100)
    assert chip.reg(0, "a1") == 0 and chip.ctx_state(0, 0) == "sleep"
    chip.set_signal(0, 2, ctx=0)
    chip.run(100)
    assert chip.reg(0, "a1") == 1 and chip.ctx_state(0, 0) == "sleep"
    chip.set_signal(0, 4, ctx=0)
    chip.run(100)
    assert chip.reg(0, "a2") == 1


def test_ctx_arb_br_token() -> None:
    prog = ["ctx_arb[voluntary], br[t#]", "immed[a1, 0xbad]", "halt", "t#: immed[a1, 1]", "halt"]
    chip = run_prog(prog)
    assert chip.reg(0, "a1") == 1


def test_halt_stops_me_and_clears_ctx_enables() -> None:
    chip = chip_with({0: ["nop", "halt"]}, ctx_mask=0xFF)
    assert chip.run(1000) == "halted"
    st = chip.me_status(0)
    assert st["state"] == "halt" and st["pc"] == 1
    assert chip.reg(0, "CTX_ENABLES") & 0xFF00 == 0


def test_local_memory_indexing() -> None:
    prog = ["local_csr_wr[ACTIVE_LM_ADDR_0, 0x40]", "nop", "nop", "nop",
            "immed[*l$index0, 0x10]", "immed[*l$index0[3], 0x13]", "immed[a1, 0x20]",
            "alu[*l$index0++, --, B, a1]", "alu[*l$index0++, --, B, 0x21]",
            "alu[a2, --, B, *l$index0]", "local_csr_rd[ACTIVE_LM_ADDR_0]", "immed[a3, 0]",
            "alu[a4, --, B, *l$index0--]", "alu[a5, --, B, *l$index0]", "halt"]  # fmt: skip
    chip = run_prog(prog)
    assert chip.reg(0, "lm16") == 0x20 and chip.reg(0, "lm17") == 0x21 and chip.reg(0, "lm19") == 0x13
    assert chip.reg(0, "a2") == 0  # lm18 untouched
    assert chip.reg(0, "a3") == 0x48
    assert chip.reg(0, "a5") == 0x21


def test_transfer_register_halves_are_separate() -> None:
    chip = run_prog(["immed[$1, 0x55]", "alu[a1, --, B, $1]", "halt"])
    assert chip.reg(0, "$1.out") == 0x55
    assert chip.reg(0, "$1") == 0 and chip.reg(0, "a1") == 0


def test_pseudo_random_and_timestamp() -> None:
    prog = ["local_csr_rd[PSEUDO_RANDOM_NUMBER]", "immed[a1, 0]", "local_csr_rd[PSEUDO_RANDOM_NUMBER]",
            "immed[a2, 0]", "local_csr_rd[TIMESTAMP_LOW]", "immed[a3, 0]",
            "immed[a4, 200]", "w#: alu[a4, a4, -, 1]", "bne[w#]",
            "local_csr_rd[TIMESTAMP_LOW]", "immed[a5, 0]", "halt"]  # fmt: skip
    c1, c2 = run_prog(prog, cycles=5000), run_prog(prog, cycles=5000)
    assert c1.reg(0, "a1") != c1.reg(0, "a2")
    assert (c1.reg(0, "a1"), c1.reg(0, "a2")) == (c2.reg(0, "a1"), c2.reg(0, "a2"))
    c3 = run_prog(prog, cycles=5000, seed=99)
    assert c3.reg(0, "a1") != c1.reg(0, "a1")
    elapsed = c1.reg(0, "a5") - c1.reg(0, "a3")
    assert 200 * 2 // 16 <= elapsed <= 200 * 6 // 16


def test_global_lm_addr_shared_by_contexts() -> None:
    # CTX_ENABLES[16] = LM_ADDR_0_GLOBAL: every context uses one LM_ADDR_0 (HRM p.173)
    prog = ["br!=ctx[0, other#]", "local_csr_rd[CTX_ENABLES]", "immed[a1, 0]",
            "alu_shf[a1, a1, OR, 1, <<16]", "local_csr_wr[CTX_ENABLES, a1]",
            "immed[a2, 0x100]", "local_csr_wr[ACTIVE_LM_ADDR_0, a2]", "nop", "nop", "nop", "ctx_arb[kill]",
            "other#: ctx_arb[voluntary]", "ctx_arb[voluntary]", "alu[*l$index0++, --, B, 1]",
            "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0x7)
    chip.run(2000)
    assert chip.reg(0, "lm64") == 1 and chip.reg(0, "lm65") == 1  # ctx 1 and 2 advanced one pointer
    assert chip.reg(0, "ACTIVE_LM_ADDR_0", ctx=1) == 0x108


# Each context works on its own 16 longwords of local memory through both index
# registers (context 7's point past the 640 populated longwords: faults), reading and
# writing them with offsets, read-after-write, two local-memory sources in one word,
# and context swaps in between.
LM_MIX = ["local_csr_rd[ACTIVE_CTX_STS]", "immed[a0, 0]", "alu[a0, a0, AND, 7]",
          "alu_shf[a1, --, B, a0, <<6]", "br!=ctx[7, set#]", "immed[a1, 2800]",
          "set#: local_csr_wr[ACTIVE_LM_ADDR_0, a1]", "alu[a2, a1, +, 32]",
          "local_csr_wr[ACTIVE_LM_ADDR_1, a2]", "immed[a4, 6]", "nop", "nop",
          "immed[*l$index0, 5]",
          "loop#: alu[*l$index0[1], a0, +, *l$index0]",
          "alu[*l$index1[2], *l$index0[1], +, *l$index0]",
          "alu[a3, *l$index1[2], XOR, *l$index0[1]]",
          "alu_shf[*l$index0, a3, OR, *l$index1[2], <<1]",
          "br_bset[*l$index0, 0, odd#]", "alu[b1, b1, +, 1]",
          "odd#: immed[*l$index1[3], 0x77]", "alu[b2, b2, +, *l$index1[3]]",
          "alu[*l$index1[4], *l$index1[4], +, a0]", "ctx_arb[voluntary]", "alu[a4, a4, -, 1]", "bne[loop#]",
          "alu[b3, --, B, *l$index0]", "alu[b4, --, B, *l$index1[2]]", "halt"]  # fmt: skip


def _lm_mix_run(history: int) -> tuple[object, ...]:
    chip = chip_with({0: LM_MIX}, ctx_mask=0xFF)
    chip.history_enable(history)  # 2 runs every word on the general path, one at a time
    assert chip.run(100_000) == "halted"
    regs = [[chip.reg(0, r, ctx=c) for r in ("a0", "a3", "b1", "b2", "b3", "b4")] for c in range(8)]
    lm = [chip.reg(0, f"lm{i}") for i in range(640)]
    return regs, lm, chip.faults()["counts"], chip.cycle, chip.stats()["mes"][0]["instructions"]


def test_local_memory_operands_fast_path_matches_general_path() -> None:
    fast, general = _lm_mix_run(0), _lm_mix_run(2)
    assert fast == general
    regs, lm, faults, _, _ = fast
    # context 2 by hand: lm[32] = 5, then six rounds of the loop
    x, b1 = 5, 0
    for _ in range(6):
        s1 = 2 + x
        s2 = s1 + x
        x = (s2 ^ s1) | (s2 << 1)
        b1 += (x & 1) == 0
    assert lm[32] == x and lm[32 + 8 + 3] == 0x77 and regs[2][2:4] == [b1, 6 * 0x77]
    assert lm[32 + 8 + 4] == 6 * 2  # written just before each swap
    assert faults.get("local_memory", 0) > 0  # context 7's addresses


# Contexts pass a token round with SAME_ME_SIGNAL, move LM_ADDR_0 and T_INDEX, and (with a
# 20-cycle write-to-use delay) queue nine writes in a row, one more than the queue holds:
# the ninth, a signal to the next ME, then takes effect at once, at its exact cycle.
CSR_MIX = ["local_csr_rd[ACTIVE_CTX_STS]", "immed[a0, 0]", "alu[a0, a0, AND, 7]",
           "immed[a5, 0x88]",                            # SAME_ME_SIGNAL: the next context, s1
           "br!=ctx[0, loop#]", "local_csr_wr[SAME_ME_SIGNAL, a5]",
           "loop#: ctx_arb[s1]", "alu_shf[a1, --, B, a0, <<6]", "local_csr_wr[ACTIVE_LM_ADDR_0, a1]",
           "alu[b1, b1, +, 1]", "local_csr_wr[T_INDEX, a1]",
           *[f"local_csr_wr[CSR_CTX_POINTER, {i}]" for i in range(8)],
           "local_csr_wr[NEXT_NEIGHBOR_SIGNAL, 0x10]",  # ME 1, context 0, s2
           "local_csr_rd[CSR_CTX_POINTER]", "immed[a3, 0]", "alu[b2, b2, +, a3]",
           "alu[*l$index0, b1, +, a0]", "local_csr_wr[SAME_ME_SIGNAL, a5]",
           "alu[--, b1, -, 5]", "bne[loop#]", "local_csr_wr[SAME_ME_SIGNAL, a5]", "halt"]  # fmt: skip
WAIT_S2 = ["loop#: br_signal[s2, got#]", "alu[a1, a1, +, 1]", "br[loop#]", "got#: halt"]


def _csr_mix_run(history: int) -> tuple[object, ...]:
    chip = chip_with({0: CSR_MIX, 1: WAIT_S2}, ctx_mask=0xFF, csr_write_to_use=20)
    chip.history_enable(history)  # 1 and 2: lock-step, one word at a time
    chip.run(20_000)
    regs = [[chip.reg(0, r, ctx=c) for r in ("b1", "b2")] for c in range(8)]
    me = chip.stats()["mes"][0]
    return (regs, [chip.reg(0, f"lm{16 * c}") for c in range(8)], chip.reg(1, "a1"), chip.cycle,
            me["instructions"], me["ctx"])  # fmt: skip


def test_local_csr_writes_run_ahead_as_in_lockstep() -> None:
    ahead, lockstep, general = _csr_mix_run(0), _csr_mix_run(1), _csr_mix_run(2)
    assert ahead == lockstep == general
    regs, lm, polls, _, _, _ = ahead
    # context 1 holds the token first, so it is the first to count to 5, and its halt stops the ME
    b1 = [4, 5, 4, 4, 4, 4, 4, 4]
    assert [r[0] for r in regs] == b1
    assert lm == [b1[c] + c for c in range(8)]
    assert polls > 0  # ME 1 polled until the signal came


def _receiver_and_sender(receiver: int, contexts: list[str], sender: list[str], history: int, cycles: int,
                         **cfg: object) -> Chip:
    """ME `receiver` (0 or 1) runs `contexts` in its contexts 0 and 1, the other of the
    two `sender` in its context 0; history at level `history`, for `cycles`."""
    chip = chip_with({receiver: contexts}, ctx_mask=0x3, **cfg)
    chip.load(1 - receiver, assemble(sender, 8), 8)
    chip.enable(1 - receiver, 0x1)
    chip.history_enable(history)
    chip.run(cycles)
    return chip


# ME 0's context 1 sleeps on s1 or s2.  Context 0 signals it s1 through SAME_ME_SIGNAL
# (20 cycles write-to-use) and then runs local words, so ME 0 runs ahead of ME 1; ME 1
# sends s2 through the CAP, `delay` loop rounds in.  Whichever comes first wakes context
# 1: run ahead or in lock-step, the order (and so every statistic) must be the same.
def _signal_race_run(delay: int, history: int) -> tuple[object, ...]:
    me0 = ["br=ctx[1, c1#]", "ctx_arb[voluntary]",      # context 1 goes to sleep first
           "immed[a5, 0x9]", "local_csr_wr[SAME_ME_SIGNAL, a5]",   # context 1, s1
           "immed[a4, 40]", "spin#: alu[a4, a4, -, 1]", "bne[spin#]", "ctx_arb[kill]",
           "c1#: ctx_arb[s1, s2], any", "local_csr_rd[TIMESTAMP_LOW]", "immed[a1, 0]", "halt"]  # fmt: skip
    me1 = [f"immed[a4, {delay}]", "wait#: alu[a4, a4, -, 1]", "bne[wait#]",
           "immed[$0, 0x12]", "cap[write, $0, INTERTHREAD_SIG, 1], ctx_swap[s1]", "halt"]  # ME 0 ctx 1, s2
    chip = _receiver_and_sender(0, me0, me1, history, 5_000, csr_write_to_use=20)
    me = chip.stats()["mes"][0]
    return chip.reg(0, "a1", ctx=1), chip.cycle, me["ctx"], me["instructions"]


def test_a_signal_from_another_me_and_a_same_me_signal_keep_their_order() -> None:
    for delay in range(1, 40, 2):
        assert _signal_race_run(delay, 0) == _signal_race_run(delay, 1), f"ME 1 waits {delay} rounds"


# ME 0's context 0 runs local words and ctx_arb[voluntary] in turn, so ME 0 runs ahead of
# ME 1; context 1 sleeps on s2, which ME 1 sends through the CAP `delay` loop rounds in.
# Which context a swap picks depends on whether s2 has come: run ahead or in lock-step,
# the same, with the CAP's own latencies and with a CAP of one cycle (no lookahead left).
SWAPPER = ["br=ctx[1, c1#]", "immed[a4, 12]",
           "spin#: alu[@a100, @a100, +, 1]", "alu[a4, a4, -, 1]", "ctx_arb[voluntary]", "bne[spin#]", "ctx_arb[kill]",
           "c1#: ctx_arb[s2]", "alu[a2, --, B, @a100]", "ctx_arb[voluntary]", "ctx_arb[kill]"]  # fmt: skip


def _swap_race_run(delay: int, history: int, neighbour: bool = False, fill: bool = False,
                   **cfg: object) -> tuple[object, ...]:
    """ME `swapper` counts in context 0; the other ME signals its context 1, s2, through
    the CAP (ME 1 to ME 0) or as its previous neighbour (ME 0 to ME 1); `fill`: after eight
    CSR writes, so that with a long write-to-use delay its queue is full and the signal
    comes at once."""
    wait = [f"immed[a4, {delay}]", "wait#: alu[a4, a4, -, 1]", "bne[wait#]"]
    if neighbour:
        queue = [f"local_csr_wr[CSR_CTX_POINTER, {i}]" for i in range(8)] if fill else []
        swapper, sender = 1, wait + queue + ["local_csr_wr[NEXT_NEIGHBOR_SIGNAL, 0x11]", "nop", "nop", "nop", "halt"]
    else:
        swapper, sender = 0, wait + ["immed[$0, 0x12]", "cap[write, $0, INTERTHREAD_SIG, 1], ctx_swap[s1]", "halt"]
    chip = _receiver_and_sender(swapper, SWAPPER, sender, history, 3_000, **cfg)
    me = chip.stats()["mes"][swapper]
    return chip.reg(swapper, "a2", ctx=1), chip.cycle, me["ctx"], me["ctx_swaps"]


@pytest.mark.parametrize(("neighbour", "fill", "cfg"), [(False, False, {}), (True, False, {}),
                         (True, True, {"csr_write_to_use": 20}),
                         (False, False, {"units": {"cap": {"cmd_overhead": 0, "write_latency": 1, "read_latency": 1}}})],
                         ids=["cap", "next-neighbour", "next-neighbour-at-once", "one-cycle-cap"])  # fmt: skip
def test_a_swap_run_ahead_sees_another_mes_signal_as_in_lockstep(neighbour: bool, fill: bool,
                                                                 cfg: dict[str, object]) -> None:
    seen = set()
    for delay in range(1, 30):
        ahead = _swap_race_run(delay, 0, neighbour, fill, **cfg)
        lockstep = _swap_race_run(delay, 1, neighbour, fill, **cfg)
        general = _swap_race_run(delay, 2, neighbour, fill, **cfg)   # every word on the general path
        assert ahead == lockstep == general, f"ME 1 waits {delay} rounds"
        seen.add(ahead[0])
    assert len(seen) > 2  # context 1 woke at different points of context 0's count


# A neighbour's signal that was queued before the swapper's turn began takes effect at
# its own cycle, which may come before the turn's start + the cross-ME lookahead (here a
# write-to-use delay of 7 and no swap cost, so a turn holds two swaps): the swaps must
# not run ahead of it.
def _queued_signal_run(delay: int, history: int) -> tuple[object, ...]:
    swapper = ["br=ctx[1, c1#]", "immed[a4, 40]",
               "spin#: alu[@a100, @a100, +, 1]", "alu[a5, a5, +, 1]", "alu[a5, a5, +, 1]", "alu[a5, a5, +, 1]",
               "alu[a4, a4, -, 1]", "ctx_arb[voluntary]", "bne[spin#]", "ctx_arb[kill]",
               "c1#: ctx_arb[s2]", "alu[a2, --, B, @a100]", "ctx_arb[voluntary]", "ctx_arb[kill]"]  # fmt: skip
    sender = [f"immed[a4, {delay}]", "wait#: alu[a4, a4, -, 1]", "bne[wait#]",
              "local_csr_wr[NEXT_NEIGHBOR_SIGNAL, 0x11]", "halt"]  # ME 1, context 1, s2
    chip = _receiver_and_sender(1, swapper, sender, history, 3_000, csr_write_to_use=7, ctx_swap_cost=0)
    me = chip.stats()["mes"][1]
    return chip.reg(1, "a2", ctx=1), chip.cycle, me["ctx"], me["ctx_swaps"]


def test_a_swap_run_ahead_stops_at_a_neighbours_queued_signal() -> None:
    seen = set()
    for delay in range(1, 25):
        ahead, general = _queued_signal_run(delay, 0), _queued_signal_run(delay, 2)
        assert ahead == general, f"ME 0 waits {delay} rounds"
        seen.add(ahead[0])
    assert len(seen) > 2


# Swaps and signal tests in the fast loop (a ctx_arb without defer slots, F_CTX_ARB;
# br_signal, F_BR_SIG) against the general path.  Four contexts of ME 0 count, yield, and
# pass a token round: SAME_ME_SIGNAL to the next context, then wait for their own, either
# with ctx_arb[s1] to a br[] target or polling br_signal[s1] between yields (the signal
# is there already or comes later).  ME 1's scratch reads keep events coming, so that
# the run-ahead stops at many points.  Run ahead, in lock-step, and every word on the
# general path (history of every instruction): the same registers, cycle and statistics,
# context by context.
TOKEN_WAIT = {"ctx_arb": ["ctx_arb[s1], br[on#]", "halt"],
              "br_signal": ["poll#: br_signal[s1, on#]", "ctx_arb[voluntary]", "br[poll#]"]}


def _token_ring(wait: str) -> list[str]:
    return ["immed[a4, 30]",
            "loop#: alu[a1, a1, +, 1]", "ctx_arb[voluntary]", "alu[b2, b2, +, a1]",
            "local_csr_wr[SAME_ME_SIGNAL, a5]", *TOKEN_WAIT[wait],
            "on#: alu[b3, b3, +, a4]", "alu[a4, a4, -, 1]", "bne[loop#]", "ctx_arb[kill]"]  # fmt: skip


def _token_ring_run(history: int, busy: bool, wait: str) -> tuple[object, ...]:
    me1 = ["loop#: scratch[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a1, a1, +, 4]", "br[loop#]"]
    ring = _token_ring(wait)
    chip = chip_with({0: ring, 1: me1} if busy else {0: ring}, ctx_mask=0xF, csr_write_to_use=3)
    for ctx in range(4):
        chip.set_reg(0, "a5", 1 << 3 | (ctx + 1) % 4, ctx=ctx)   # s1 to the next context
    chip.history_enable(history)
    chip.run(4_000)
    regs = [[chip.reg(0, r, ctx=ctx) for r in ("a1", "b2", "b3", "a4")] for ctx in range(4)]
    me = chip.stats()["mes"][0]
    return regs, chip.cycle, me["instructions"], me["ctx_swaps"], me["idle_cycles"], me["ctx"]


@pytest.mark.parametrize("wait", sorted(TOKEN_WAIT))
@pytest.mark.parametrize("busy", [True, False], ids=["other-events", "alone"])
def test_swaps_in_the_fast_loop_match_the_general_path(busy: bool, wait: str) -> None:
    ahead, lockstep, general = (_token_ring_run(level, busy, wait) for level in (0, 1, 2))
    assert ahead == lockstep == general
    regs, cycle, swaps, idle = ahead[0], ahead[1], ahead[3], ahead[4]
    assert all(r[0] == 30 and r[3] == 0 for r in regs)   # every context went round 30 times
    assert swaps >= 4 * 30   # at least a yield a round
    assert 0 <= idle < cycle   # (the last kill left the ME idle from the cycle after it)


# ME 0 reads a longword into $0 (SRAM) or $$0 (DRAM) without waiting and adds that
# register up in a loop of fast words while the read is in flight, then waits for it.
# The loop's other words run past every event (ME 1, when busy, makes one every few
# cycles with its scratch reads); the words that read the transfer register must not
# pass its completion -- also when the read itself is the only event there is, issued by
# the first word of ME 0's turn.  Run ahead or in lock-step: the same sum, time and
# statistics.
def _xfer_race_run(spins: int, dram: bool, history: int, busy: bool = True) -> tuple[object, ...]:
    read = "dram[read, $$0, a1, 0, 1], sig_done[s1]" if dram else "sram[read, $0, a1, 0, 1], sig_done[s1]"
    me0 = ["immed[a1, 0x100]", read, f"immed[a4, {spins}]",
           "spin#: alu[a2, a2, +, " + ("$$0" if dram else "$0") + "]", "alu[b3, b3, +, a4]",
           "alu[a4, a4, -, 1]", "bne[spin#]", "ctx_arb[s1]", "halt"]  # fmt: skip
    me1 = ["loop#: scratch[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a1, a1, +, 4]", "br[loop#]"]
    chip = chip_with({0: me0, 1: me1} if busy else {0: me0}, ctx_mask=0x1)
    chip.mem_write("dram" if dram else "sram", 0x100, (7).to_bytes(4, "big"))
    chip.history_enable(history)
    chip.run(3_000)
    me = chip.stats()["mes"][0]
    return chip.reg(0, "a2"), chip.reg(0, "b3"), chip.cycle, me["instructions"], me["ctx"], chip.stats()["mes"][1]


@pytest.mark.parametrize("busy", [True, False], ids=["other-events", "only-event"])
@pytest.mark.parametrize("dram", [False, True], ids=["sram", "dram"])
def test_fast_words_run_past_events_but_not_past_their_transfer_registers_completion(dram: bool, busy: bool) -> None:
    sums = set()
    for spins in range(5, 120, 7):
        ahead, lockstep = _xfer_race_run(spins, dram, 0, busy), _xfer_race_run(spins, dram, 1, busy)
        assert ahead == lockstep, f"{spins} rounds"
        assert ahead[1] == spins * (spins + 1) // 2
        sums.add(ahead[0])
    # the read completed after the loop (0) and during it (7 x the rounds after it)
    assert 0 in sums and any(0 < s < 7 * 113 and s % 7 == 0 for s in sums) and len(sums) > 5
