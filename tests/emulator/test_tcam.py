"""The TCAM (docs/tcam.md): match, mask, priority by position, multi-match counts, invalid
entries, the microcode's lookup through tcam.h, its timing (latency and occupancy on the
channel), its history records, and the chip without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.asm.assembler import assemble_text
from npkit.emulator.binding import Chip, EmulatorError, HistEvent

ROOT = Path(__file__).resolve().parents[2]
SPP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
INCLUDE = ROOT / "microcode" / "include"
FULL = [0xFFFFFFFF] * 9


def _chip(**overrides: object) -> Chip:
    return Chip(SPP, **overrides)


def test_mask_priority_and_multi_match() -> None:
    chip = _chip()
    chip.tcam_write(1, [0x0A010000], [0xFFFF0000], 0x11, valid=False)  # matches, but invalid
    chip.tcam_write(3, [0x0A000000], [0xFF000000], 0x33)  # 10/8
    chip.tcam_write(5, [0x0A010000], [0xFFFF0000], 0x55)  # 10.1/16
    chip.tcam_write(7, [0, 0, 0, 0, 0x1234], [0, 0, 0, 0, 0xFFFF], 0x77)  # only bits past key_bits
    # the lowest matching index wins whatever the mask's length; the count counts all
    assert chip.tcam_lookup([0x0A010203]) == {"hit": True, "count": 3, "index": 3, "result": 0x33}
    assert chip.tcam_lookup([0x0A020304]) == {"hit": True, "count": 2, "index": 3, "result": 0x33}
    assert chip.tcam_lookup([0x0B000000])["count"] == 1  # entry 7 alone: its mask compares nothing of the key
    chip.tcam_invalidate(7)
    assert chip.tcam_lookup([0x0B000000]) == {"hit": False, "count": 0, "index": 0, "result": 0}
    chip.tcam_invalidate(3)
    assert chip.tcam_lookup([0x0A010203]) == {"hit": True, "count": 1, "index": 5, "result": 0x55}
    entry = chip.tcam_read(5)
    assert entry["key"][0] == 0x0A010000 and entry["mask"][0] == 0xFFFF0000 and entry["valid"]
    assert not chip.tcam_read(3)["valid"]
    # the host's lookup is the match alone: no counter moved
    assert chip.tcam_stats() == {"lookups": 0, "hits": 0, "multi_hits": 0}


def test_every_key_word_compares() -> None:
    chip = _chip(tcam={"channel": 2, "window": 0x600000, "entries": 16, "key_bits": 288,
                       "result_bits": 64, "lookup_latency": 10, "cycles_per_lookup": 4})  # fmt: skip
    key = list(range(1, 10))
    chip.tcam_write(2, key, FULL, 1 << 63)
    assert chip.tcam_lookup(key)["result"] == 1 << 63
    for w in range(9):  # one bit off in any of the nine longwords: a miss
        other = list(key)
        other[w] ^= 0x100
        assert not chip.tcam_lookup(other)["hit"]


def test_entries_are_sram_bytes_of_the_window() -> None:
    chip = _chip()
    base = chip.tcam_info()["base"]
    assert base == 0x80600000
    chip.tcam_write(2, [0xC0A80000], [0xFFFF0000], 0xAABBCCDD_11223344)
    assert chip.read32("sram", base + 2 * 128) == 0xC0A80000
    assert chip.read32("sram", base + 2 * 128 + 36) == 0xFFFF0000
    assert chip.read32("sram", base + 2 * 128 + 72) == 0xAABBCCDD
    assert chip.read32("sram", base + 2 * 128 + 80) == 0x80000000
    # written as plain SRAM (as the XScale does through its window): the TCAM sees it
    chip.write32("sram", base + 9 * 128, 0x01020304)
    chip.write32("sram", base + 9 * 128 + 36, 0xFFFFFFFF)
    chip.write32("sram", base + 9 * 128 + 80, 0x80000000)
    assert chip.tcam_lookup([0x01020304])["index"] == 9
    with pytest.raises(EmulatorError):
        chip.tcam_write(8192, [0], [0], 0)


def test_chip_without_tcam() -> None:
    chip = Chip("ixp2800")
    assert chip.tcam_info() is None
    with pytest.raises(EmulatorError, match="no TCAM"):
        chip.tcam_write(0, [1], [1], 1)
    with pytest.raises(EmulatorError, match="no TCAM"):
        chip.tcam_lookup([1])


LOOKUP = """
#define NUM_CONTEXTS 8
#include "tcam.h"
.reg slot k r idx res
.reg write $k0 $k1 $k2 $k3 $k4
.reg read $r0 $r1 $r2 $r3
.xfer_order $k0 $k1 $k2 $k3 $k4
.xfer_order $r0 $r1 $r2 $r3
    tcam_slot(slot)
    immed[k, KEY]
    alu[$k0, --, b, k]
    immed[$k1, 0]
    immed[$k2, 0]
    immed[$k3, 0]
    immed[$k4, 0]
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    alu[r, --, b, $r0]
    alu[idx, --, b, $r1]
    alu[res, --, b, $r3]
    ctx_arb[kill]
"""


def _program(key: int) -> tuple[list[int], dict[str, str]]:
    asm = assemble_text(LOOKUP, path="lookup.uc", include_dirs=[INCLUDE], defines={"KEY": hex(key)})
    regs = {s.name: str(s.value) for s in asm.program.symbols if s.kind == "reg" and not s.scope}
    return asm.program.words, regs


def _loaded(key: int, me: int = 0, ctx_mask: int = 1, **overrides: object) -> tuple[Chip, dict[str, str]]:
    chip = _chip(**overrides)
    chip.tcam_write(3, [0x0A000000], [0xFF000000], 0x33)
    chip.tcam_write(5, [0x0A010000], [0xFFFF0000], 0x55)
    words, regs = _program(key)
    chip.load(me, words)
    chip.enable(me, ctx_mask)
    return chip, regs


@pytest.mark.parametrize("me,ctx", [(0, 0), (9, 5)])
def test_microcode_lookup(me: int, ctx: int) -> None:
    chip, regs = _loaded(0x0A010203, me=me, ctx_mask=1 << ctx)
    chip.history_enable(1)
    assert chip.run(20000) == "halted"
    assert chip.reg(me, regs["r"], ctx) == 0x80000002  # hit, two matches
    assert chip.reg(me, regs["idx"], ctx) == 3
    assert chip.reg(me, regs["res"], ctx) == 0x33
    slot = me * 8 + ctx
    assert chip.reg(me, regs["slot"], ctx) == slot
    base = chip.tcam_info()["base"]
    # the answer is left in the thread's result slot, the counters in the counter block
    assert [chip.read32("sram", base + 0x110000 + 16 * slot + 4 * i) for i in range(4)] == [0x80000002, 3, 0, 0x33]
    assert chip.tcam_stats() == {"lookups": 1, "hits": 1, "multi_hits": 1}
    assert chip.read32("sram", base + 0x120000) == 1
    ev = chip.history()
    look = [e for e in ev if e.kind == "tcam"]
    assert len(look) == 1 and look[0].a0 == (1 << 31 | 2 << 16 | slot) and look[0].a1 == 3
    data = {e.a0: e.a1 for e in ev if e.kind == "tcam_data"}
    assert data[0] == 0x0A010203 and data[10] == 0x33 and 5 not in data  # 144 bits: key longwords 0..4


def test_microcode_miss() -> None:
    chip, regs = _loaded(0x0B000001)
    assert chip.run(20000) == "halted"
    assert chip.reg(0, regs["r"]) == 0
    assert chip.reg(0, regs["res"]) == 0
    assert chip.tcam_stats() == {"lookups": 1, "hits": 0, "multi_hits": 0}


def _lookup_events(chip: Chip, ev: list[HistEvent]) -> list[tuple[int, int]]:
    """(issue cycle, completion cycle) of each lookup (SRAM reads of the result slots)."""
    base = chip.tcam_info()["base"] + 0x110000
    issues = [e for e in ev if e.kind == "mem_issue" and e.unit == 0 and e.a0 & 0xFF == 0 and base <= e.a1 < base + 4096]
    dones = [e for e in ev if e.kind == "mem_done" and e.unit == 0 and e.a0 == 0 and base <= e.a1 < base + 4096]
    assert len(issues) == len(dones)
    by_ctx: dict[tuple[int, int], list[int]] = {}
    for e in dones:
        by_ctx.setdefault((e.me, e.ctx), []).append(e.cycle)
    return [(i.cycle, by_ctx[(i.me, i.ctx)].pop(0)) for i in issues]


def test_lookup_latency_is_read_latency_plus_lookup_latency() -> None:
    chip, _ = _loaded(0x0A010203)
    chip.history_enable(1)
    chip.run(20000)
    ev = chip.history()
    [(issue, done)] = _lookup_events(chip, ev)
    key_addr = chip.tcam_info()["base"] + 0x100000
    [write] = [e.cycle for e in ev if e.kind == "mem_issue" and e.a1 == key_addr]
    sram, tcam = chip.config["units"]["sram"], chip.config["tcam"]
    # the key write (5 longwords) is served first on the channel, the lookup right after it
    # for cycles_per_lookup; it signals read_latency + lookup_latency later
    key_served = write + sram["cmd_overhead"] + 5 * sram["cycles_per_unit"]
    assert issue + sram["cmd_overhead"] < key_served
    assert done == key_served + tcam["cycles_per_lookup"] + sram["read_latency"] + tcam["lookup_latency"]


def test_occupancy_limits_lookups_per_second() -> None:
    slow = {"channel": 2, "window": 0x600000, "entries": 64, "key_bits": 144, "result_bits": 64,
            "lookup_latency": 56, "cycles_per_lookup": 400}  # fmt: skip
    chip, _ = _loaded(0x0A010203, ctx_mask=0xFF, tcam=slow)
    chip.history_enable(1)
    assert chip.run(200000) == "halted"
    dones = sorted(d for _, d in _lookup_events(chip, chip.history()))
    assert len(dones) == 8
    gaps = [b - a for a, b in zip(dones, dones[1:], strict=False)]
    # eight threads' lookups queue on the channel: one per cycles_per_lookup (each behind
    # the next thread's key write, 5 longwords)
    assert min(gaps) >= 400
    assert chip.tcam_stats()["lookups"] == 8
    busy = chip.stats()["units"]["sram"][2]["busy_cycles"]
    assert busy >= 8 * 400


def test_ixp2800_default_unchanged() -> None:
    chip = Chip("ixp2800")
    assert chip.config.get("tcam") is None
    # the same SRAM address is a plain read there
    chip.write32("sram", 0x80710000, 0x12345678)
    assert chip.read32("sram", 0x80710000) == 0x12345678


def test_writes_through_the_backing_store_are_seen() -> None:
    """The XScale's device window (xscale/device.py) and the gpe placement map the SRAM's
    backing store: an entry written there, with no call into the core, is in the TCAM."""
    from npkit.emulator.tcam import entry_bytes

    chip = _chip()
    ptr, size, _, _ = chip.backing("sram")
    base = chip.tcam_info()
    off = base["channel"] * chip.config["sram_channel_bytes"] + base["window"] + 7 * 128
    buf = chip.ffi.buffer(chip.ffi.cast("uint8_t *", ptr), size)
    buf[off:off + 128] = entry_bytes([0xC0A80101], [0xFFFFFFFF], 0x77)
    assert chip.tcam_lookup([0xC0A80101]) == {"hit": True, "count": 1, "index": 7, "result": 0x77}
    buf[off + 80:off + 84] = b"\0\0\0\0"  # the control word cleared: invalid
    assert not chip.tcam_lookup([0xC0A80101])["hit"]


def test_result_bits_32_keeps_the_high_half() -> None:
    chip = _chip(tcam={"channel": 2, "window": 0x600000, "entries": 16, "key_bits": 72,
                       "result_bits": 32, "lookup_latency": 10, "cycles_per_lookup": 4})  # fmt: skip
    chip.tcam_write(1, [5, 6, 7], FULL, 0x11223344_55667788)
    assert chip.tcam_lookup([5, 6, 7])["result"] == 0x11223344_00000000
    # 72-bit keys: the third longword's low 24 bits are not compared
    assert chip.tcam_lookup([5, 6, 0x00FFFFFF])["hit"] and not chip.tcam_lookup([5, 6, 0x01000007])["hit"]


LOOKUP9 = """
#define NUM_CONTEXTS 8
#include "tcam.h"
.reg slot r idx
.reg write $k0 $k1 $k2 $k3 $k4 $k5 $k6 $k7 $k8
.reg read $r0 $r1 $r2 $r3
.xfer_order $k0 $k1 $k2 $k3 $k4 $k5 $k6 $k7
.xfer_order $r0 $r1 $r2 $r3
    tcam_slot(slot)
    immed[$k0, 1]
    immed[$k1, 2]
    immed[$k2, 3]
    immed[$k3, 4]
    immed[$k4, 5]
    immed[$k5, 6]
    immed[$k6, 7]
    immed[$k7, 8]
    immed[$k8, KEY8]
    tcam_lookup9($r0, $k0, $k8, slot)
    alu[r, --, b, $r0]
    alu[idx, --, b, $r1]
    ctx_arb[kill]
"""


@pytest.mark.parametrize("key8,hit", [(9, True), (10, False)])
def test_microcode_288_bit_key(key8: int, hit: bool) -> None:
    chip = _chip(tcam={"channel": 2, "window": 0x600000, "entries": 64, "key_bits": 288,
                       "result_bits": 64, "lookup_latency": 56, "cycles_per_lookup": 14})  # fmt: skip
    chip.tcam_write(40, list(range(1, 10)), FULL, 0x40)
    asm = assemble_text(LOOKUP9, path="l9.uc", include_dirs=[INCLUDE], defines={"KEY8": str(key8)})
    regs = {s.name: str(s.value) for s in asm.program.symbols if s.kind == "reg" and not s.scope}
    chip.load(0, asm.program.words)
    chip.enable(0, 1)
    assert chip.run(20000) == "halted"
    assert chip.reg(0, regs["r"]) == (0x80000001 if hit else 0)
    assert chip.reg(0, regs["idx"]) == (40 if hit else 0)
