"""ALU-class instructions: results and condition codes computed by hand."""

from __future__ import annotations

import binascii

import pytest

from .util import ld32, run_prog

Z, N, C, V = 1, 2, 4, 8


def regs_after(lines: list[str], names: list[str], **kw: object) -> list[int]:
    chip = run_prog([*lines, "halt"], **kw)
    assert chip.me_status(0)["state"] == "halt", chip.me_status(0)
    return [chip.reg(0, n) for n in names]


@pytest.mark.parametrize(
    "a,op,b,result,cc",
    [
        (5, "+", 7, 12, 0),
        (0xFFFFFFFF, "+", 1, 0, Z | C),
        (0x7FFFFFFF, "+", 1, 0x80000000, N | V),
        (5, "-", 7, 0xFFFFFFFE, N),          # borrow: C clear
        (7, "-", 5, 2, C),                   # no borrow: C set (bcs/bhs = a >= b)
        (0x80000000, "-", 1, 0x7FFFFFFF, C | V),
        (5, "B-A", 7, 2, C),
        (0xF0F0, "AND", 0xFF00, 0xF000, 0),
        (0xF0F0, "OR", 0x0F00, 0xFFF0, 0),
        (0xF0F0, "XOR", 0xF0F0, 0, Z),
        (0xF0F0, "~AND", 0xFF00, 0x0F00, 0),
        (0xF0F0, "AND~", 0xFF00, 0x00F0, 0),
        (0x1000, "+8", 0x1FF, 0x10FF, 0),
        (0x1000, "+16", 0x12345, 0x3345, 0),
        (0, "~B", 0, 0xFFFFFFFF, N),
        (3, "B", 0x80000000, 0x80000000, N),
    ],
)
def test_alu_ops_and_cc(a: int, op: str, b: int, result: int, cc: int) -> None:
    prog = [f"immed_w0[a1, 0x{a & 0xFFFF:x}]", f"immed_w1[a1, 0x{a >> 16:x}]",
            f"immed_w0[b1, 0x{b & 0xFFFF:x}]", f"immed_w1[b1, 0x{b >> 16:x}]",
            f"alu[a2, a1, {op}, b1]"]  # fmt: skip
    chip = run_prog([*prog, "halt"])
    assert chip.reg(0, "a2") == result
    assert chip.reg(0, "cc") == cc


def test_carry_chain_64bit_add() -> None:
    # 0x00000001_FFFFFFFF + 0x00000000_00000001 = 0x00000002_00000000
    r = regs_after(["immed[a1, 0xffffffff]", "immed[b1, 1]", "immed[a2, 1]", "immed[b2, 0]",
                    "alu[a3, a1, +, b1]", "alu[a4, a2, +carry, b2]"], ["a3", "a4"])  # fmt: skip
    assert r == [0, 2]


def test_borrow_chain_64bit_sub() -> None:
    # 0x00000002_00000000 - 1 = 0x00000001_FFFFFFFF
    r = regs_after(["immed[a1, 0]", "immed[b1, 1]", "immed[a2, 2]", "immed[b2, 0]",
                    "alu[a3, a1, -, b1]", "alu[a4, a2, -carry, b2]"], ["a3", "a4"])  # fmt: skip
    assert r == [0xFFFFFFFF, 1]


def test_immed_variants() -> None:
    r = regs_after([*ld32("a1", 0x12345678), "immed[a1, 0xab00]", "immed[a2, 0xffff0000]",
                    "immed[a3, 0x55, <<16]", *ld32("a4", 0x11223344), "immed_b2[a4, 0xee]",
                    "immed_w1[a4, 0xbeef]", "immed[a5, 0x1234]", "immed_w0[a5, 0x9999]"],
                   ["a1", "a2", "a3", "a4", "a5"])  # fmt: skip
    assert r == [0xAB00, 0xFFFF0000, 0x550000, 0xBEEF3344, 0x9999]


def test_shifts_and_rotates() -> None:
    r = regs_after([*ld32("b1", 0x80000001), "immed[a1, 0xff]",
                    "alu_shf[a2, --, B, b1, <<4]", "alu_shf[a3, --, B, b1, >>4]",
                    "alu_shf[a4, --, B, b1, <<rot4]", "alu_shf[a5, --, B, b1, >>rot1]",
                    "alu_shf[a6, a1, AND, b1, >>rot1]", "asr[a7, b1, >>4]",
                    "alu_shf[a8, a1, OR, b1, <<8]"],
                   ["a2", "a3", "a4", "a5", "a6", "a7", "a8"])  # fmt: skip
    assert r == [0x00000010, 0x08000000, 0x00000018, 0xC0000000, 0xC0000000 & 0xFF, 0xF8000000, 0x1FF]


def test_indirect_shift_uses_previous_alu_result() -> None:
    # the shift amount of <<indirect / >>indirect is the low 5 bits of the previous ALU result
    r = regs_after(["immed[b1, 1]", "immed[a1, 5]", "alu[--, --, B, a1]",
                    "alu_shf[a2, --, B, b1, <<indirect]",
                    "immed[b2, 0x100]", "immed[a3, 3]", "alu[--, --, B, a3]",
                    "alu_shf[a4, --, B, b2, >>indirect]"], ["a2", "a4"])  # fmt: skip
    assert r == [1 << 5, 0x100 >> 3]


def test_dbl_shf() -> None:
    r = regs_after(["immed[a1, 0x1234]", "immed[b1, 0x5678, <<16]",
                    "dbl_shf[a2, a1, b1, >>8]", "immed[a3, 16]", "alu[--, --, B, a3]",
                    "dbl_shf[a4, a1, b1, >>indirect]"], ["a2", "a4"])  # fmt: skip
    assert r == [0x34567800, 0x12345678]


def test_byte_align_be_hrm_example() -> None:
    # HRM p.44 Example 10 / Table 7, BYTE_INDEX = 2: results 0x02030405, 0x06070809, 0x0A0B0C0D
    prog = ["immed[a0, 0x0203]", "immed_w1[a0, 0x0001]", "immed[a1, 0x0607]", "immed_w1[a1, 0x0405]",
            "immed[a2, 0x0a0b]", "immed_w1[a2, 0x0809]", "immed[a3, 0x0e0f]", "immed_w1[a3, 0x0c0d]",
            "local_csr_wr[BYTE_INDEX, 2]", "nop", "nop", "nop",
            "byte_align_be[--, a0]", "byte_align_be[b4, a1]", "byte_align_be[b5, a2]",
            "byte_align_be[b6, a3]"]  # fmt: skip
    assert regs_after(prog, ["b4", "b5", "b6"]) == [0x02030405, 0x06070809, 0x0A0B0C0D]


def test_byte_align_le_hrm_example() -> None:
    # HRM p.45 Example 11 / Table 8, BYTE_INDEX = 2: registers 0x03020100, 0x07060504, ...
    prog = ["immed[a0, 0x0100]", "immed_w1[a0, 0x0302]", "immed[a1, 0x0504]", "immed_w1[a1, 0x0706]",
            "immed[a2, 0x0908]", "immed_w1[a2, 0x0b0a]",
            "local_csr_wr[BYTE_INDEX, 2]", "nop", "nop", "nop",
            "byte_align_le[--, a0]", "byte_align_le[b4, a1]", "byte_align_le[b5, a2]"]  # fmt: skip
    assert regs_after(prog, ["b4", "b5"]) == [0x05040302, 0x09080706]


def test_ld_field() -> None:
    r = regs_after([*ld32("a1", 0x11223344), "immed[b1, 0xaabb]",
                    "ld_field[a1, 0011, b1]",
                    *ld32("a2", 0x11223344), "ld_field_w_clr[a2, 0100, b1, <<8]",
                    "immed[a3, 0]", "ld_field_w_clr[a3, 0001, b1], load_cc"],
                   ["a1", "a2", "a3", "cc"])  # fmt: skip
    assert r == [0x1122AABB, 0x00AA0000, 0xBB, 0]


def test_mul_step_32x32() -> None:
    a, b = 0x89ABCDEF, 0x12345678
    prog = [f"immed_w0[a1, 0x{a & 0xFFFF:x}]", f"immed_w1[a1, 0x{a >> 16:x}]",
            f"immed_w0[b1, 0x{b & 0xFFFF:x}]", f"immed_w1[b1, 0x{b >> 16:x}]",
            "mul_step[a1, b1], 32x32_step1", "mul_step[a1, b1], 32x32_step2",
            "mul_step[a1, b1], 32x32_step3", "mul_step[a1, b1], 32x32_step4",
            "mul_step[a2, --], 32x32_last", "mul_step[a3, --], 32x32_last2"]  # fmt: skip
    p = a * b
    assert regs_after(prog, ["a2", "a3"]) == [p & 0xFFFFFFFF, p >> 32]


def test_mul_step_24x8_and_16x16() -> None:
    prog = ["immed_w0[a1, 0x5678]", "immed_w1[a1, 0x1234]", "immed[b1, 0x3ff]",
            "mul_step[a1, b1], 24x8_step1", "mul_step[a2, --], 24x8_last",
            "mul_step[a1, b1], 16x16_step1", "mul_step[a1, b1], 16x16_step2",
            "mul_step[a3, --], 16x16_last"]  # fmt: skip
    assert regs_after(prog, ["a2", "a3"]) == [0x345678 * 0xFF, 0x5678 * 0x3FF]


def test_pop_count_and_find_bset() -> None:
    prog = ["immed_w0[b1, 0xf0f1]", "immed_w1[b1, 0x8000]",
            "pop_count1[b1]", "pop_count2[b1]", "pop_count3[a2, b1]",
            "immed[b2, 0x0100]", "find_bset[a3, b2]",
            "immed[a4, 0xfe00]", "immed[b3, 0x0300]", "find_bset_with_mask[a5, a4, b3]"]  # fmt: skip
    assert regs_after(prog, ["a2", "a3", "a5"]) == [10, 8, 9]


def test_crc_32_le_matches_zlib() -> None:
    # "abcd" little-endian packed in one longword; remainder starts at all ones
    prog = ["immed[a1, 0xffffffff]", "local_csr_wr[CRC_REMAINDER, a1]", "nop", "nop", "nop",
            "immed_w0[a2, 0x6261]", "immed_w1[a2, 0x6463]",
            "crc_le[crc_32, a3, a2]", "nop", "local_csr_rd[CRC_REMAINDER]", "immed[a4, 0]"]  # fmt: skip
    a3, a4 = regs_after(prog, ["a3", "a4"])
    assert a3 == 0x64636261  # the data passes through to the destination
    assert a4 ^ 0xFFFFFFFF == binascii.crc32(b"abcd")


def test_crc_ccitt_be_matches_xmodem() -> None:
    prog = ["immed_w0[a2, 0x3334]", "immed_w1[a2, 0x3132]",
            "crc_be[crc_ccitt, a3, a2]", "nop", "local_csr_rd[CRC_REMAINDER]", "immed[a4, 0]"]  # fmt: skip
    (a4,) = regs_after(prog, ["a4"])
    assert a4 & 0xFFFF == binascii.crc_hqx(b"1234", 0)


def test_cam_lookup_result_format() -> None:
    # HRM p.176: state in bits 11:8, hit in bit 7, entry in bits 6:3; a miss gives the LRU entry
    prog = ["immed[a1, 0x1111]", "immed[a2, 0x2222]", "immed[a3, 0x3333]",
            "cam_clear",
            "cam_write[0, a1, 5]", "cam_write[1, a2, 9]",
            "cam_lookup[b1, a2]",       # hit entry 1, state 9
            "cam_lookup[b2, a3]",       # miss: LRU entry is 2 (0 and 1 were written)
            "cam_lookup[b3, a1]",       # hit entry 0, state 5
            "cam_read_tag[b4, 1]",
            "cam_write_state[1, 3]", "cam_lookup[b5, a2]"]  # fmt: skip
    r = regs_after(prog, ["b1", "b2", "b3", "b4", "b5"])
    assert r == [(9 << 8) | 0x80 | (1 << 3), 2 << 3, (5 << 8) | 0x80, 0x2222, (3 << 8) | 0x80 | (1 << 3)]


def test_cam_lru_replacement_order() -> None:
    prog = ["cam_clear"] + [f"immed[a1, {i + 1}]" if False else f"cam_write[{i}, a1, 0]" for i in range(16)]
    prog += ["cam_lookup[b1, a2]"]  # a2 = 0 not in CAM -> LRU = entry 0
    prog += ["immed[a1, 0x77]", "cam_write[0, a1, 1]", "cam_lookup[b2, a2]"]  # entry 0 now MRU -> LRU 1
    r = regs_after(["immed[a2, 0x999]", *prog], ["b1", "b2"])
    assert r == [0, 1 << 3]


def test_cam_lookup_loads_lm_addr() -> None:
    prog = ["cam_clear", "immed[a1, 0x42]", "cam_write[3, a1, 2]",
            "cam_lookup[b1, a1], lm_addr0[0]", "nop",
            "local_csr_rd[ACTIVE_LM_ADDR_0]", "immed[b2, 0]"]  # fmt: skip
    b1, b2 = regs_after(prog, ["b1", "b2"])
    assert b1 == (2 << 8) | 0x80 | (3 << 3)
    assert b2 == b1 & 0xFFC
