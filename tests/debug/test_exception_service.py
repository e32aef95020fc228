"""Excepted buffers go back to the free list in debugger runs too (they leaked: 4,096
free before, 2,499 after 3 M cycles of errors.yaml), because the exception path's reader
-- a chip service, or the control daemon on the XScale that Chip.run co-runs -- runs in
every run loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.toolchain.debug.target import open_target
from npkit.toolchain.system.sysmap import SYS

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "examples" / "traffic" / "errors.yaml"


@pytest.mark.parametrize("target", ["layout", "image"])
def test_debug_run_frees_excepted_buffers(tmp_path: Path, target: str) -> None:
    path = ROOT / "microcode" / "layouts" / "pipelined.yaml"
    if target == "image":
        from npkit.asm.image import write_image
        from npkit.toolchain.system.link import link

        path = tmp_path / "router.elf"
        write_image(path, link("pipelined", {"io": "msf"}))
    t = open_target(path, traffic=str(ERRORS))
    chip = t.chip
    while chip.cycle < 3_000_000:
        chip.run(100_000)  # the debugger's run loop goes through Chip.run in slices like this
    if t.control is not None:  # the daemon takes ~1 us an exception: let it catch up with errors.yaml
        while chip.cycle < 30_000_000 and (chip.scratch_ring_count(11) or t.control.stats()["counters"]["holding"]):
            chip.run(1_000_000)
    free = chip.read32("sram", SYS.freelist_q + 8)
    if target == "layout":  # a layout opened through the harness: the host's stand-in reader
        assert t.exceptions is not None and t.control is None
        assert len(t.exceptions.records) > 100
    else:  # a linked router image: its control daemon on the XScale, co-run by Chip.run
        assert t.control is not None and t.exceptions is None
        st = t.control.stats()
        assert st is not None
        assert sum(v for k, v in st["counters"].items() if k.startswith("exc_")) > 100
        assert st["counters"]["icmp_time_exceeded"] > 0 and st["counters"]["arp_replies_sent"] > 0
    # a few buffers stay with the blocks at rest (tx keeps a spare one per context)
    assert free >= SYS.n_bufs - 16, free
