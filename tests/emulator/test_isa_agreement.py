"""The emulator executes every mnemonic of mev2.yaml (none stops as an illegal
instruction), and illegal memory commands stop it exactly where the disassembler
rejects them: both read the same description (the C core through the generated header)."""

from __future__ import annotations

import random

from npkit.asm.isa import DecodeError, decode, encode, isa
from npkit.emulator.binding import Chip

HALT = encode("halt")

# one instance of every mnemonic (targets are 1: the halt after it)
EXAMPLES = {
    "alu": "alu[a2, a1, +, b1]", "alu_shf": "alu_shf[a2, a1, OR, b1, <<3]", "dbl_shf": "dbl_shf[a2, a1, b1, >>4]",
    "asr": "asr[a2, b1, >>2]", "byte_align_be": "byte_align_be[a2, a1]", "byte_align_le": "byte_align_le[a2, a1]",
    "ld_field": "ld_field[a2, 0011, b1]", "ld_field_w_clr": "ld_field_w_clr[a2, 0101, b1, <<8]",
    "immed": "immed[a2, 0x1234]", "immed_b0": "immed_b0[a2, 0x12]", "immed_b1": "immed_b1[a2, 0x12]",
    "immed_b2": "immed_b2[a2, 0x12]", "immed_b3": "immed_b3[a2, 0x12]", "immed_w0": "immed_w0[a2, 0x1234]",
    "immed_w1": "immed_w1[a2, 0x1234]", "nop": "nop", "pop_count1": "pop_count1[b1]",
    "pop_count2": "pop_count2[b1]", "pop_count3": "pop_count3[a2, b1]", "find_bset": "find_bset[a2, b1]",
    "find_bset_with_mask": "find_bset_with_mask[a2, a1, b1]", "cam_clear": "cam_clear",
    "cam_lookup": "cam_lookup[a2, a1]", "cam_read_tag": "cam_read_tag[a2, b1]",
    "cam_read_state": "cam_read_state[a2, b1]", "cam_write": "cam_write[b1, a1, 3]",
    "cam_write_state": "cam_write_state[b1, 3]", "crc_be": "crc_be[crc_32, a2, a1]",
    "crc_le": "crc_le[crc_ccitt, a2, a1], bytes_0_2",
    "br": "br[1]", "beq": "beq[1]", "bne": "bne[1]", "bmi": "bmi[1]", "bpl": "bpl[1]", "bcs": "bcs[1]",
    "bhs": "bhs[1]", "bcc": "bcc[1]", "blo": "blo[1]", "bvs": "bvs[1]", "bvc": "bvc[1]", "bge": "bge[1]",
    "blt": "blt[1]", "ble": "ble[1]", "bgt": "bgt[1]", "br=ctx": "br=ctx[0, 1]", "br!=ctx": "br!=ctx[0, 1]",
    "br_signal": "br_signal[s3, 1]", "br_!signal": "br_!signal[s3, 1]",
    "br_inp_state": "br_inp_state[NN_EMPTY, 1]", "br_!inp_state": "br_!inp_state[SCR_RING2_STATUS, 1]",
    "br_bset": "br_bset[a1, 0, 1]", "br_bclr": "br_bclr[a1, 3, 1]", "br=byte": "br=byte[b1, 0, 1, 1]",
    "br!=byte": "br!=byte[b1, 1, 0x22, 1]", "jump": "jump[a1, 1]", "rtn": "rtn[a1]",
    "ctx_arb": "ctx_arb[voluntary]", "halt": "halt", "local_csr_rd": "local_csr_rd[ALU_OUT]",
    "local_csr_wr": "local_csr_wr[T_INDEX, a1]", "mul_step": "mul_step[a1, b1], 32x32_step1",
    "sram": "sram[read, $1, a1, b1, 2], ctx_swap[s1]", "scratch": "scratch[test_and_add, $2, a1, 0], ctx_swap[s2]",
    "dram": "dram[write, $$0, a1, b1, 1], ctx_swap[s4]", "msf": "msf[read, $3, a1, 0, 1], ctx_swap[s5]",
    "pci": "pci[write, $0, a1, 0, 1], sig_done[s6]", "cap": "cap[read, $0, a1, b1, 1], ctx_swap[s7]",
    "hash_48": "hash_48[$2, 1], ctx_swap[s8]", "hash_64": "hash_64[$2, 2], ctx_swap[s8]",
    "hash_128": "hash_128[$0, 3], ctx_swap[s8]",
}  # fmt: skip


def test_every_mnemonic_executes() -> None:
    assert set(EXAMPLES) == set(isa().mnemonics), "an example for every mnemonic of mev2.yaml"
    chip = Chip("ixp2800")
    for mn, text in EXAMPLES.items():
        word = encode(text)
        assert isa().classify(word).name == isa().mnemonics[mn].cls
        chip.reset()
        chip.load(0, [word, HALT])
        chip.set_reg(0, "a1", 1)
        chip.set_reg(0, "b1", 1)
        chip.enable(0, 1)
        chip.run(2000)
        st = chip.me_status(0)
        assert st["state"] == "halt" and st["pc"] == (0 if mn == "halt" else 1), (mn, text, st)


def test_memory_words_are_illegal_exactly_where_the_disassembler_says() -> None:
    rng = random.Random(5)
    d = isa()
    chip = Chip("ixp2800")
    seen = {"legal": 0, "illegal": 0}
    for unit in d.units.values():
        cls = d.classes[unit.cls]
        for _ in range(60):
            w = (rng.getrandbits(40) & ~cls.mask) | cls.value
            w = cls.put(cls.put(cls.put(w, "a_src", 1), "b_src", 0x21), "indirect_ref", 0)
            try:
                decode(w)
                legal = True
            except DecodeError:
                legal = False
            chip.reset()
            chip.load(0, [w, HALT])
            chip.enable(0, 1)
            chip.run(3000)
            st = chip.me_status(0)
            assert (st["state"] == "illegal") == (not legal), (hex(w), legal, st)
            seen["legal" if legal else "illegal"] += 1
    assert seen["legal"] > 50 and seen["illegal"] > 50
