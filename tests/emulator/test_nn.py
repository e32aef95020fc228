"""Inter-ME communication: next-neighbour ring and scratch rings."""

from __future__ import annotations

from npkit.emulator.binding import Chip

from .util import assemble, chip_with

PRODUCER = ["immed[a1, 1]", "immed[b2, 0]",
            "loop#: br_inp_state[NN_FULL, loop#]", "alu[*n$index++, --, B, a1]",
            "alu[b2, b2, +, a1]", "alu[a1, a1, +, 1]", "alu[--, a1, -, 201]", "bne[loop#]",
            "alu[n$5, --, B, b2]", "halt"]  # fmt: skip
CONSUMER = ["immed[a1, 200]", "immed[b2, 0]",
            "loop#: br_inp_state[NN_EMPTY, loop#]", "alu[b2, b2, +, *n$index++]",
            "alu[a1, a1, -, 1]", "bne[loop#]", "halt"]  # fmt: skip


def test_nn_ring_producer_consumer() -> None:
    chip = chip_with({0: PRODUCER, 1: CONSUMER})
    assert chip.run(10**6) == "halted"
    assert chip.reg(1, "b2") == sum(range(1, 201))
    assert chip.reg(1, "n$5") == sum(range(1, 201))      # n$ writes land in the next ME
    assert chip.reg(0, "n$5") == 0
    assert chip.reg(1, "NN_PUT") == chip.reg(1, "NN_GET") == 200 % 128


def test_nn_full_blocks_producer() -> None:
    chip = chip_with({0: PRODUCER})  # nobody consumes on ME 1
    chip.run(10**5)
    assert chip.me_status(0)["state"] == "running"
    assert chip.reg(1, "NN_PUT") == chip.config["nn_full_threshold"]


def test_last_me_has_no_next_neighbour() -> None:
    last = 15
    chip = chip_with({last: ["alu[n$0, --, B, 7]", "alu[*n$index++, --, B, 9]", "halt"]})
    assert chip.run(1000) == "halted"
    assert all(chip.reg(m, "@n$0") == 0 for m in range(16))


def test_scratch_ring_between_two_mes() -> None:
    put = ["immed[a1, 20]", "immed[a2, 1]",
           "loop#: br_inp_state[SCR_RING5_STATUS, loop#]", "alu[$0, --, B, a2]",
           "scratch[put, $0, a1, 0, 1], ctx_swap[s1]", "alu[a2, a2, +, 1]", "alu[--, a2, -, 51]",
           "bne[loop#]", "halt"]  # fmt: skip
    get = ["immed[a1, 20]", "immed[a3, 50]", "immed[b2, 0]",
           "loop#: scratch[get, $0, a1, 0, 1], ctx_swap[s1]", "alu[--, --, B, $0]", "beq[loop#]",
           "alu[b2, b2, +, $0]", "alu[a3, a3, -, 1]", "bne[loop#]", "halt"]  # fmt: skip
    chip = chip_with({2: put, 7: get})
    chip.scratch_ring(5, 0x400, 128, full_margin=4)
    assert chip.run(10**6) == "halted"
    assert chip.reg(7, "b2") == sum(range(1, 51))


def test_run_ahead_matches_lockstep() -> None:
    # history on forces lock-step execution; results must not depend on it
    progs = {0: PRODUCER, 1: CONSUMER,
             2: ["immed[a1, 0]", "loop#: alu[a1, a1, +, 3]", "sram[write, $0, a1, 0, 1], sig_done[s1]",
                 "alu[$0, --, B, a1]", "local_csr_rd[TIMESTAMP_LOW]", "immed[b1, 0]",
                 "ctx_arb[s1]", "alu[--, a1, -, 90]", "bne[loop#]", "halt"]}  # fmt: skip
    results = []
    for hist in (0, 1):
        chip = Chip("ixp2800")
        for me, p in progs.items():
            chip.load(me, assemble(p))
            chip.enable(me, 0xFF if me == 2 else 1)
        chip.history_enable(hist)
        chip.run(10**6)
        results.append(([chip.reg(1, "b2"), chip.cycle] + [chip.reg(2, "b1", ctx=c) for c in range(8)],
                        chip.mem_read("sram", 0, 512), [m["instructions"] for m in chip.stats()["mes"]]))
    assert results[0] == results[1]


def test_nn_mode_writes_own_registers() -> None:
    # CTX_ENABLES[20] (NN_MODE) = 1: n$ destinations stay in this ME (HRM p.172)
    prog = ["local_csr_rd[CTX_ENABLES]", "immed[a1, 0]", "alu_shf[a1, a1, OR, 1, <<20]",
            "local_csr_wr[CTX_ENABLES, a1]", "nop", "nop", "nop",
            "alu[n$3, --, B, 0x44]", "alu[*n$index++, --, B, 0x55]", "nop",
            "br_inp_state[NN_EMPTY, bad#]", "alu[a2, --, B, *n$index++]", "halt",
            "bad#: immed[a2, 0xbad]", "halt"]  # fmt: skip
    chip = chip_with({3: prog})
    chip.run(1000)
    assert chip.reg(3, "n$3") == 0x44 and chip.reg(4, "n$3") == 0
    assert chip.reg(3, "a2") == 0x55
