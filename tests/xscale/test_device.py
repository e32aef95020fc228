"""The device's CSR side (the same code serves MMIO on the XScale and the gpe link)."""

from __future__ import annotations

from npkit.emulator.binding import Chip
from npkit.xscale.device import INTC_BASE, RING_BASE, SCR_ATOMIC, SRAM_ATOMIC, ChipWindows


def test_scratch_and_sram_atomics_by_alias() -> None:
    chip = Chip("ixp2800")
    w = ChipWindows(chip)
    chip.write32("scratch", 0x80, 0xF0)
    at = lambda op, off: SCR_ATOMIC + (op << 16) + off  # noqa: E731
    w.write(at(1, 0x80), 0x0F)          # set
    assert chip.read32("scratch", 0x80) == 0xFF
    w.write(at(2, 0x80), 0x11)          # clr
    assert chip.read32("scratch", 0x80) == 0xEE
    w.write(at(3, 0x80), 0)             # incr
    w.write(at(4, 0x80), 0)             # decr
    w.write(at(4, 0x80), 0)
    assert chip.read32("scratch", 0x80) == 0xED
    w.write(at(6, 0x80), 0xEE)          # sub wraps
    assert chip.read32("scratch", 0x80) == 0xFFFFFFFF
    assert w.swap(at(7, 0x80), 5) == 0xFFFFFFFF and chip.read32("scratch", 0x80) == 5
    # SRAM channel 2, offset 0x40: the alias carries the channel in bits 24:23
    sram = SRAM_ATOMIC + (5 << 25) + (2 << 23) + 0x40
    w.write(sram, 3)
    w.write(sram, 4)
    assert chip.read32("sram", (2 << 30) | 0x40) == 7 and w.read(sram) == 7


def test_ring_interface_get_put_count_free_and_config() -> None:
    chip = Chip("ixp2800")
    w = ChipWindows(chip)
    w.write(RING_BASE + 0x300 + 8 * 2, 0x400)    # ring 2: base 0x400, 4 words
    w.write(RING_BASE + 0x304 + 8 * 2, 4)
    assert chip.scratch_ring_info(2)["size"] == 4
    for v in (10, 20, 30, 40, 50):               # the fifth is dropped: full
        w.write(RING_BASE + 8, v)
    assert w.read(RING_BASE + 0x100 + 8) == 4 and w.read(RING_BASE + 0x200 + 8) == 0
    assert [w.read(RING_BASE + 8) for _ in range(5)] == [10, 20, 30, 40, 0]   # empty reads 0
    assert w.read(RING_BASE + 0x200 + 8) == 4


def test_interrupt_bits_latch_count_and_clear() -> None:
    from npkit.asm.isa import encode

    chip = Chip("ixp2800")
    w = ChipWindows(chip)
    for me, csr in ((3, "XSCALE_INT_A"), (5, "XSCALE_INT_B")):
        chip.load(me, [encode(f"cap[fast_wr, 0, {csr}]"), encode("halt")])
        chip.enable(me, 0x01)
    chip.xscale_irq_stop(0xFFFFFFFF)
    assert chip.run(10_000) == "irq"                 # stops in the cycle the first bit is raised
    chip.xscale_irq_stop(0)
    chip.run(10_000)
    assert w.read(INTC_BASE + 8) == 2                # count: one per source
    assert w.read(INTC_BASE) == 1 << 3 and w.read(INTC_BASE + 4) == 1 << 5
    w.write(INTC_BASE, 1 << 3)                       # write 1 to clear
    assert w.read(INTC_BASE) == 0 and w.read(INTC_BASE + 4) == 1 << 5 and w.count == 2


def test_interthread_signal_from_the_xscale_wakes_a_thread() -> None:
    from npkit.asm.isa import encode
    from npkit.xscale.device import CAP_BASE, CAP_INTERTHREAD_SIG

    chip = Chip("ixp2800")
    w = ChipWindows(chip)
    chip.load(2, [encode("ctx_arb[s3]"), encode("halt")])
    chip.enable(2, 1 << 4)                            # context 4 only
    chip.run(100)
    assert chip.ctx_state(2, 4) == "sleep"
    w.write(CAP_BASE + CAP_INTERTHREAD_SIG, 3 | (4 << 4) | (2 << 7))
    chip.run(100)
    assert chip.me_status(2)["state"] == "halt"
