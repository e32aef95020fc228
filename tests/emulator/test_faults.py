"""Faults (issue 10 part 3, part 5 C side): microcode or an image with a bad
address cannot crash or corrupt the emulator; the access is counted as a fault
of the thread with its PC, and `npk run` warns about it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npkit.asm.image import Image, Program, write_image
from npkit.emulator.binding import Chip
from npkit.emulator.loader import LoadError, load_image

from .util import assemble, chip_with, ld32

NPK = Path(sys.executable).parent / "npk"
SCRATCH_WRAP = ["immed[a0, 0xFFFFFFFC]", "scratch[write, $0, a0, 0, 1], ctx_swap[s1]",
                "scratch[read, $1, a0, 0, 1], ctx_swap[s1]", "alu[a1, --, B, $1]", "halt"]  # fmt: skip


def _npk_run(tmp_path: Path, prog: Program, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"{prog.name}.elf"
    write_image(path, Image(programs=[prog]))
    return subprocess.run([str(NPK), "run", str(path), "--cycles", "100000", *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _sites(chip: Chip) -> set[tuple[str, int, int, int, int]]:
    return {(f["kind"], f["me"], f["ctx"], f["pc"], f["address"]) for f in chip.faults()["last"]}


def test_scratch_address_near_2_32_is_a_fault_not_a_crash(tmp_path: Path) -> None:
    # was: segmentation fault (rc 139), the bound check a + 4 <= scratch_bytes wrapped
    res = _npk_run(tmp_path, Program(name="wrap", words=assemble(SCRATCH_WRAP)), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["stop"] == "halted"
    assert out["faults"]["counts"] == {"scratch": 16}  # 8 contexts x (write, read)
    assert {(f["kind"], f["pc"], f["address"]) for f in out["faults"]["last"]} == {
        ("scratch", 1, 0xFFFFFFFC), ("scratch", 2, 0xFFFFFFFC)}  # fmt: skip
    res = _npk_run(tmp_path, Program(name="wrap", words=assemble(SCRATCH_WRAP)))
    assert res.returncode == 0
    assert "warning: 16 fault(s) (scratch 16)" in res.stderr
    assert "scratch at ME 0x00 ctx 0 pc 1: address 0xfffffffc" in res.stderr


def test_faulting_reads_return_zeros_and_writes_change_nothing() -> None:
    chip = chip_with({0: SCRATCH_WRAP})
    before = chip.mem_read("scratch", 0, 16384)
    chip.write32("scratch", 0, 0x5A5A5A5A)
    chip.run(10_000)
    assert chip.reg(0, "a1") == 0
    assert chip.mem_read("scratch", 4, 16380) == before[4:]
    assert _sites(chip) == {("scratch", 0, 0, 1, 0xFFFFFFFC), ("scratch", 0, 0, 2, 0xFFFFFFFC)}


@pytest.mark.parametrize("space", ["dram", "scratch", "sram"])
def test_init_mem_outside_the_memory_is_a_load_error(space: str) -> None:
    # was: dram written before its buffer (exit 0), scratch aborted the process
    chip = Chip("ixp2800")
    for addr in (2**64 - 1, 2**64 - 2, 2**64, -1, 64 << 20 if space == "dram" else 16384 if space == "scratch" else 4 << 30):
        prog = Program(name="t", words=assemble(["halt"]), init_mem=[(space, addr, b"AAAA")])
        with pytest.raises(LoadError, match=f"program 't': .*{space}"):
            load_image(chip, Image(programs=[prog]))
    assert chip.faults()["total"] == 0


def test_npk_run_of_an_image_with_init_mem_at_2_64_fails_cleanly(tmp_path: Path) -> None:
    for space in ("dram", "scratch"):
        prog = Program(name="big", words=assemble(["halt"]), init_mem=[(space, 2**64 - 1, b"AAAA")])
        res = _npk_run(tmp_path, prog)
        assert res.returncode == 1, res.stderr
        # the image's metadata schema refuses the address before anything is loaded
        assert "big.elf: .npk.meta: programs[0].init_mem[0][1]: must be in 0..2^32-1" in res.stderr
        assert "Traceback" not in res.stderr


def test_unconfigured_scratch_ring_is_reported_with_the_pc(tmp_path: Path) -> None:
    prog = ["immed[a0, 12]",  # ring 3, never configured
            "immed[$0, 0x77]", "scratch[put, $0, a0, 0, 1], ctx_swap[s1]",
            "scratch[get, $1, a0, 0, 1], ctx_swap[s2]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.run(10_000)
    assert chip.faults()["counts"] == {"ring_unconfigured": 2}
    assert _sites(chip) == {("ring_unconfigured", 0, 0, 2, 3), ("ring_unconfigured", 0, 0, 3, 3)}
    res = _npk_run(tmp_path, Program(name="ring", words=assemble(prog)))
    assert res.returncode == 0
    assert "ring_unconfigured at ME 0x00 ctx 0 pc 2: address 0x3" in res.stderr


def test_sram_ring_never_configured_and_full_ring_are_faults() -> None:
    d = 0x300  # descriptor: head, tail, count, base, size
    prog = ["immed[a0, 0x300]", "immed[a1, 0x400]", "immed[$0, 1]", "immed[$1, 2]",
            "sram[put, $0, a1, 0, 2], ctx_swap[s1]",   # 0x400: all zeros = never configured
            "sram[put, $0, a0, 0, 2], ctx_swap[s1]",   # size 3: two words fit
            "sram[put, $0, a0, 0, 2], ctx_swap[s1]",   # one fits, one is dropped
            "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    for i, v in enumerate([0, 0, 0, 0x1000, 3]):
        chip.write32("sram", d + 4 * i, v)
    chip.run(20_000)
    assert chip.faults()["counts"] == {"ring_unconfigured": 1, "ring_full": 1}
    assert _sites(chip) == {("ring_unconfigured", 0, 0, 4, 0x400), ("ring_full", 0, 0, 6, 0x300)}
    assert chip.read32("sram", d + 8) == 3  # count


def test_scratch_ring_put_on_a_full_ring_is_a_fault() -> None:
    prog = ["immed[a0, 4]", "immed[a1, 17]",
            "loop#: scratch[put, $0, a0, 0, 8], ctx_swap[s1]", "alu[a1, a1, -, 1]", "bne[loop#]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.scratch_ring(1, 0x800, 128)
    chip.run(100_000)
    assert chip.scratch_ring_count(1) == 128
    assert chip.faults()["counts"] == {"ring_full": 1}


def test_local_memory_beyond_640_words_is_a_fault() -> None:
    # HRM p.40: LM_ADDR reaches 1K longwords, only 640 are populated
    prog = ["immed[a0, 2800]", "local_csr_wr[ACTIVE_LM_ADDR_0, a0]", "immed[a1, 5]", "alu[--, --, B, 0]",
            "alu[--, --, B, 0]", "alu[*l$index0, --, B, a1]", "alu[a2, --, B, *l$index0]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.run(1000)
    assert chip.me_status(0)["state"] == "halt" and chip.reg(0, "a2") == 0
    assert _sites(chip) == {("local_memory", 0, 0, 5, 700), ("local_memory", 0, 0, 6, 700)}


def test_sram_dram_and_transfer_register_faults() -> None:
    prog = ["immed[a0, 0x800000]",  # one past the 8 MB of SRAM channel 0
            *ld32("a1", 64 << 20),  # one past the 64 MB of DRAM
            "sram[read, $0, a0, 0, 1], ctx_swap[s1]",
            "dram[read, $$0, a1, 0, 1], ctx_swap[s2]", "alu[a2, --, B, $$0]",
            "sram[read, $15, a0, 4, 8], ctx_swap[s1]",  # context 7: registers 127..134 wrap
            "halt"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0x80)
    chip.run(10_000)
    assert chip.me_status(0)["state"] == "halt" and chip.reg(0, "a2", ctx=7) == 0
    assert chip.faults()["counts"] == {"sram": 2, "dram": 1, "xfer": 1}
    assert _sites(chip) == {("sram", 0, 7, 3, 0x800000), ("dram", 0, 7, 4, 64 << 20),
                            ("xfer", 0, 7, 6, 127), ("sram", 0, 7, 6, 0x800004)}  # fmt: skip


def test_running_off_the_control_store_is_a_pc_fault() -> None:
    chip = Chip("ixp2800")
    chip.load(0, assemble(["alu[a1, a1, +, 1]"]) * chip.config["ustore_words"])
    chip.enable(0, 1)
    assert chip.run(20_000) == "halted"
    assert chip.me_status(0)["state"] == "bad_pc"
    assert _sites(chip) == {("pc", 0, 0, 8192, 8192)}


def test_a_run_that_halts_while_running_ahead_ends_where_lockstep_ends() -> None:
    # found by the fuzzer: an illegal word met while running ahead stopped the ME at
    # cycle 10, but the run ended at cycle 0 (the last event); lock-step ended at 10
    cycles = []
    for lockstep in (False, True):
        chip = Chip("ixp2800")
        chip.load(0, assemble(["alu[a1, a1, +, 1]"]) * 10 + [0xEDEDEDEDED])  # an illegal jump
        chip.enable(0, 1)
        if lockstep:
            chip.history_enable(1)  # history turns run-ahead off
        assert chip.run(20_000) == "halted" and chip.me_status(0)["state"] == "illegal"
        cycles.append((chip.cycle, chip.me_status(0)["cycle"]))
    assert cycles == [(10, 10), (10, 10)]


def test_router_runs_without_faults() -> None:
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.router_run import RouterRun

    root = Path(__file__).resolve().parents[2]
    traffic = load_traffic_source(str(root / "examples" / "traffic" / "errors.yaml"), duration_ns=100_000)
    rr = RouterRun.link("pipelined", None, traffic)
    rr.run_traffic(100_000)
    assert rr.run.report()["totals"]["offered"] > 0
    assert rr.chip.faults() == {"total": 0, "counts": {}, "last": []}
