"""Excepted buffers go back to the free list in debugger runs too (they leaked: 4,096
free before, 2,499 after 3 M cycles of errors.yaml), because the exception path's reader
is a chip service that every run loop shares."""

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
        from npkit.toolchain.image import write_image
        from npkit.toolchain.system.link import link

        path = tmp_path / "router.elf"
        write_image(path, link("pipelined", {"io": "msf"}))
    t = open_target(path, traffic=str(ERRORS))
    assert t.exceptions is not None
    chip = t.chip
    while chip.cycle < 3_000_000:
        chip.run(100_000)  # the debugger's run loop goes through Chip.run in slices like this
    free = chip.read32("sram", SYS.freelist_q + 8)
    assert len(t.exceptions.records) > 100
    # a few buffers stay with the blocks at rest (tx keeps a spare one per context)
    assert free >= SYS.n_bufs - 16, free
