"""Assembled code run on npkit's emulator: the semantics the assembler assumes hold there.

Structured comparisons are unsigned (blo/bhs after alu[--, a, -, b]); the hello example's
two-word immed lands in a GPR (immed_w1 keeps the low half it reads back).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.asm.assembler import assemble, assemble_text
from npkit.asm.errors import Diagnostics
from npkit.emulator.binding import Chip

ROOT = Path(__file__).resolve().parents[2]

COMPARE = """
.reg x y r
.if (x < y)
    immed[r, 1]
.elif (x > y)
    immed[r, 2]
.else
    immed[r, 3]
.endif
.while (x >= 0x10)
    alu_shf[x, --, b, x, >>4]
.endw
    halt
"""


@pytest.mark.parametrize(
    "x,y", [(1, 2), (2, 1), (5, 5), (0, 0xFFFFFFFF), (0xFFFFFFFF, 0), (0x80000000, 1)]
)
def test_structured_compare_runs_unsigned(x: int, y: int) -> None:
    a = assemble_text(COMPARE, diags=Diagnostics())
    reg = {s.name: str(s.value) for s in a.program.symbols if s.kind == "reg"}
    with Chip() as chip:
        chip.load(0, a.program.words, a.program.ctx_mode)
        chip.set_reg(0, reg["x"], x, 0)
        chip.set_reg(0, reg["y"], y, 0)
        chip.enable(0, 1)
        assert chip.run_until_halt(100_000) == "halted"
        assert chip.reg(0, reg["r"], 0) == (1 if x < y else 2 if x > y else 3)
        want_x = x
        while want_x >= 0x10:
            want_x >>= 4
        assert chip.reg(0, reg["x"], 0) == want_x


def test_hello_example_writes_every_context() -> None:
    a = assemble(ROOT / "examples/hello.uc", diags=Diagnostics())
    base = next(s.value for s in a.program.symbols if s.name == "greeting")
    assert isinstance(base, int)
    with Chip() as chip:
        chip.load(0, a.program.words, a.program.ctx_mode)
        chip.enable(0, 0xFF)
        assert chip.run_until_halt(1_000_000) == "halted"
        for ctx in range(8):
            assert chip.read32("scratch", base + 8 * ctx) == 0x48454C4C
            assert chip.read32("scratch", base + 8 * ctx + 4) == ctx


def test_ring_ping_pong_between_two_mes() -> None:
    ping = assemble(ROOT / "examples/ring_ping.uc", diags=Diagnostics())
    pong = assemble(ROOT / "examples/ring_pong.uc", diags=Diagnostics())
    count = next(str(s.value) for s in ping.program.symbols if s.name == "count")
    value = next(str(s.value) for s in pong.program.symbols if s.name == "value")
    with Chip() as chip:
        chip.scratch_ring(0, 0x1000, 128)
        chip.scratch_ring(1, 0x2000, 128)
        chip.load(0, ping.program.words, 8)
        chip.load(1, pong.program.words, 8)
        chip.enable(0, 0xFF)
        chip.enable(1, 0xFF)
        assert chip.run_until_halt(5_000_000) == "halted"
        assert chip.me_status(0)["state"] == chip.me_status(1)["state"] == "halt"
        # ping sends 1, 3, ..., 99; pong answers each plus one; ping ends one past the last answer
        assert chip.reg(1, value, 0) == 99
        assert chip.reg(0, count, 0) == 101


MEMORY = """
.reg y base r1 r2 r3
.reg write $w0 $w1
.xfer_order $w0 $w1
.reg read $r0 $r1
.xfer_order $r0 $r1
.reg $$d0 $$d1
.xfer_order $$d0 $$d1
.sig s sd
    immed[base, 0x40]
    alu[r1, y, +, y]                        ; needs a bank copy
    alu[$w0, --, b, r1]
    immed[$w1, 0x77]
    sram[write, $w0, base, 0, 2], sig_done[s]
    ctx_arb[s]
    sram[read, $r0, base, 0, 2], sig_done[s]
    ctx_arb[s]
    alu[r2, $r0, +, $r1]
    alu[$$d0, --, b, r2]
    alu[$$d1, --, b, 5]
    dram[write, $$d0, base, 0, 1], sig_done[sd]
    ctx_arb[sd]                             ; waits on the even/odd pair
    dram[read, $$d0, base, 0, 1], sig_done[sd]
    ctx_arb[sd]
    alu[r3, $$d0, +, $$d1]
    halt
"""


def test_bank_copy_xfer_order_and_dram_signal_pair_on_the_chip() -> None:
    a = assemble_text(MEMORY, diags=Diagnostics())
    reg = {s.name: str(s.value) for s in a.program.symbols if s.kind == "reg"}
    with Chip() as chip:
        chip.load(0, a.program.words, 8)
        chip.set_reg(0, reg["y"], 21, 0)
        chip.enable(0, 1)
        assert chip.run_until_halt(100_000) == "halted"  # a wrong signal pair would hang here
        assert [chip.reg(0, reg[n], 0) for n in ("r1", "r2", "r3")] == [
            42,
            42 + 0x77,
            42 + 0x77 + 5,
        ]


def test_absolute_register_is_shared_by_all_contexts() -> None:
    src = (".reg @count mine\n br!=ctx[0, work#]\n immed[@count, 0]\nwork#:\n immed[mine, 1]\n"
           " alu[@count, @count, +, mine]\n ctx_arb[voluntary]\n ctx_arb[kill]\n")  # fmt: skip
    a = assemble_text(src, diags=Diagnostics())
    reg = {s.name: str(s.value) for s in a.program.symbols if s.kind == "reg"}
    with Chip() as chip:
        chip.load(0, a.program.words, 8)
        chip.enable(0, 0xFF)
        chip.run(10_000)
        # every context added one to the same register; each context's `mine` is its own
        assert [chip.reg(0, reg["@count"], c) for c in range(8)] == [8] * 8
        assert [chip.reg(0, reg["mine"], c) for c in range(8)] == [1] * 8
