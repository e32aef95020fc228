"""Two toolchain contracts the router microcode relies on.

1. `sram[enqueue, --, queue, buffer]`: the emulator takes the queue descriptor from the
   A field and the buffer from the B field, so the encoder keeps the source order for
   this command (`ordered` in mev2.yaml) and the allocator places the operands in those
   banks -- copying through a temporary when pins force the opposite banks.
2. An absolute register (`.reg @x`) never takes the physical register that a pinned
   relative register (`.areg name 15` / `.breg name 15`) occupies in some context.
"""

from __future__ import annotations

from npkit.asm.assembler import assemble_text
from npkit.emulator.binding import Chip

QUEUE, BUFFER = 0x4000_0000, 0x4001_0000


def test_enqueue_operand_order_follows_the_source() -> None:
    src = f"""
.breg q 3
.areg b 3
.sig s
    br!=ctx[0, done#]
    immed[q, {QUEUE:#x}]
    immed[b, {BUFFER:#x}]
    sram[enqueue, --, q, b]
    sram[read, $x, q, 0, 1], ctx_swap[s]
done#:
    halt
.reg read $x
"""
    prog = assemble_text(src).program
    chip = Chip("ixp2800")
    chip.load(0, prog.words, prog.ctx_mode)
    chip.enable(0, 1)
    chip.run(10_000)
    head = chip.read32("sram", QUEUE)
    assert head == BUFFER  # the buffer is now the head of queue QUEUE


def test_absolute_register_never_overlaps_a_pinned_register() -> None:
    src = """
.areg pa 15
.breg pb 15
.reg @s1 @s2 @s3
    alu[pa, --, b, 1]
    alu[pb, --, b, 1]
    alu[@s1, pa, +, pb]
    alu[@s2, pa, +, pb]
    alu[@s3, pa, +, pb]
    alu[@s1, @s1, +, @s2]
    alu[@s1, @s1, +, @s3]
    halt
"""
    prog = assemble_text(src).program
    regs = {s.name: str(s.value) for s in prog.symbols if s.kind == "reg"}
    # pinned relative index 15 in each context: absolute index ctx * 16 + 15
    taken = {f"@{bank}{c * 16 + 15}" for bank in "ab" for c in range(8)}
    overlaps = {name: phys for name, phys in regs.items() if name.startswith("@") and phys in taken}
    assert not overlaps, regs
