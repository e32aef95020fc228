"""End to end: xs_demo.c on the XScale with xs_demo.uc on ME 0 (issue 11 'must show')."""

from __future__ import annotations

from pathlib import Path

from npkit.emulator.binding import Chip
from npkit.emulator.loader import load_path
from npkit.xscale.system import System


def _run(elf: Path, image: Path, placement: str = "xscale", history: bool = False) -> tuple[Chip, object, str]:
    chip = Chip("ixp2800")
    if history:
        chip.history_enable(1)
    load_path(chip, str(image))
    system = System(chip)
    xs = system.attach_xscale(elf, placement=placement)
    reason = system.run_until_exit(50_000_000, slice_cycles=20_000)
    system.run(200_000)            # let the ME take the answer and halt
    system.close()
    return chip, xs, reason


def test_every_step_of_the_demo(xscale_built: Path, me_image: Path) -> None:
    chip, xs, reason = _run(xscale_built, me_image)
    assert reason == "exited" and xs.exit_code == 0, xs.stderr
    lines = xs.stdout.decode().splitlines()
    # 1. write(2) reaches the host
    assert lines[0] == "hello from the XScale"
    # 2. malloc'd buffer filled with i*i
    assert lines[1] == f"malloc 1000 words sum {sum(i * i for i in range(1000))}"
    assert lines[2] == "waiting for the microengine"
    # 4. the interrupt raised by cap[fast_wr, 0, XSCALE_INT_A] on ME 0 woke it
    assert lines[3] == "interrupt count 1 raw_a 00000001"
    # 3. scratch and SRAM words the ME wrote, read through the mapped windows (ntohl)
    assert lines[4] == "scratch 5c7a7c11 sram 5a3b0001 request 41"
    assert chip.read32("scratch", 0x40) == 0x5C7A7C11 and chip.read32("sram", 0x1000) == 0x5A3B0001
    # SRAM atomics through the alias window: 5 + 7, then swap in 100
    assert lines[5] == "atomic total 12 now 100"
    assert chip.read32("sram", 0x100C) == 100
    # 5. the answer went on scratch ring 5; the ME thread got it and stored it
    assert lines[6] == "answer 83 sent"
    assert chip.read32("sram", 0x1008) == 83
    assert chip.me_status(0)["state"] == "halt"
    assert chip.scratch_ring_info(5)["size"] == 64 and chip.scratch_ring_count(5) == 0
    st = xs.status()
    assert st["interrupts"] == 1 and st["wait_cycles"] > 0 and st["function"]
    done = float(lines[7].removeprefix("done at "))       # emulated time: tens of microseconds
    assert 20e-6 < done < 200e-6
    states = [(state, what) for _cycle, state, what in xs.timeline]
    assert states == [("running", ""), ("waiting", "read fd 3 (interrupt)"), ("running", ""), ("exited", "")]
    cycles = [c for c, _s, _w in xs.timeline]
    assert cycles == sorted(cycles) and cycles[2] - cycles[1] == st["wait_cycles"]


def test_same_run_same_history_and_instruction_count(xscale_built: Path, me_image: Path) -> None:
    runs = [_run(xscale_built, me_image, history=True) for _ in range(2)]
    (c1, x1, _), (c2, x2, _) = runs
    assert c1.history_hash() == c2.history_hash()
    assert x1.instructions == x2.instructions > 10_000
    assert x1.stdout == x2.stdout and c1.cycle == c2.cycle


def test_gpe_placement_gives_the_same_results(xscale_built: Path, me_image: Path) -> None:
    c1, x1, r1 = _run(xscale_built, me_image, "xscale")
    c2, x2, r2 = _run(xscale_built, me_image, "gpe")
    assert r1 == r2 == "exited" and x1.exit_code == x2.exit_code == 0, x2.stderr
    out1, out2 = x1.stdout.decode().splitlines(), x2.stdout.decode().splitlines()
    # identical apart from timing (the last line prints the clock)
    assert out1[:-1] == out2[:-1] and len(out1) == len(out2) == 8
    for addr in (0x1000, 0x1004, 0x1008, 0x100C):
        assert c1.read32("sram", addr) == c2.read32("sram", addr)
    assert c2.read32("sram", 0x1008) == 83 and x2.status()["requests"] > 5


def test_slicing_of_system_run_does_not_change_the_run(xscale_built: Path, me_image: Path) -> None:
    results = []
    for slices in ([1_000_000], [20_000], [7, 1_000, 333, 28_000]):
        chip = Chip("ixp2800")
        chip.history_enable(1)
        load_path(chip, str(me_image))
        system = System(chip)
        xs = system.attach_xscale(xscale_built)
        k = 0
        while system.cycle < 200_000:
            before = system.cycle
            system.run(slices[k % len(slices)])
            assert system.cycle == before + slices[k % len(slices)]     # exact, whatever the quanta
            k += 1
        system.close()
        results.append((xs.stdout, xs.instructions, chip.history_hash(), list(xs.timeline)))
    assert results[0] == results[1] == results[2]
    assert b"answer 83 sent" in results[0][0]


def test_chip_run_co_runs_the_attached_xscale(xscale_built: Path, me_image: Path) -> None:
    """Every loop that advances the chip (traffic runs, drains, the debugger, trace, why)
    calls Chip.run: with an XScale attached that is System.run, so the control processor
    runs along, with the same result as System.run and whatever the slicing."""
    results = []
    for slices in ([200_000], [20_000], [13, 4_999, 28_000]):
        chip = Chip("ixp2800")
        chip.history_enable(1)
        load_path(chip, str(me_image))
        system = System(chip)
        xs = system.attach_xscale(xscale_built)
        assert chip.driver == system.run
        k = 0
        while system.cycle < 200_000:
            before = system.cycle
            chip.run(min(slices[k % len(slices)], 200_000 - system.cycle))
            # the chip itself stops counting once its ME halted (the halt at cycle 56,370 is
            # the last cycle it counts); the System's clock goes on
            assert system.cycle > before and chip.cycle == min(system.cycle, 56_371)
            k += 1
        system.close()
        assert chip.driver is None
        results.append((xs.stdout, xs.instructions, chip.history_hash()))
    assert results[0] == results[1] == results[2]
    assert b"answer 83 sent" in results[0][0]
