"""Coverage of the router's blocks by the tests (issue 49): with NPK_BLOCK_COVERAGE=FILE,
every chip a test loads a linked image on (npkit.toolchain.system.harness.Harness,
RouterRun: the router's tests) counts its instructions (the core's profile, lock-step),
the counts are read when the chip is closed, and the session writes FILE (an lcov
tracefile: genhtml FILE -o DIR) and ends with a note: each block source's lines and
branch directions covered, and the lines no test reaches.  Under pytest-xdist each
worker writes FILE.<worker>, which the controller merges.  Off (the default), nothing
is patched and the tests run the chip's fast path as users do."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

from npkit.toolchain.debug.profile import (
    FileCoverage,
    collect,
    coverage,
    image_placement,
    lcov_text,
    merge_coverage,
    missed_ranges,
    read_lcov,
)

ENV = "NPK_BLOCK_COVERAGE"
ROOT = Path(__file__).resolve().parents[1]

_acc: dict[str, FileCoverage] = {}
_live: dict[int, list[Any]] = {}  # id(chip) -> placement, while the chip is open


def target() -> str | None:
    return os.environ.get(ENV) or None


def install() -> None:
    """Patch the loaders of Harness and RouterRun and Chip.close (only when asked)."""
    from npkit.emulator import loader
    from npkit.emulator.binding import Chip
    from npkit.toolchain.system import harness, router_run

    original = loader.load_image

    def counting_load(chip: Chip, image: Any, *args: Any, **kw: Any) -> Any:
        out = original(chip, image, *args, **kw)
        chip.profile_enable(True)
        _live[id(chip)] = image_placement(image)
        return out

    harness.load_image = counting_load  # type: ignore[assignment]
    router_run.load_image = counting_load  # type: ignore[assignment]
    close = Chip.close

    def counting_close(self: Chip) -> None:
        placed = _live.pop(id(self), None)
        if placed and getattr(self, "_chip", None) not in (None, self.ffi.NULL):
            merge_coverage(_acc, coverage(collect(self, placed, [ROOT])))
        close(self)

    Chip.close = counting_close  # type: ignore[method-assign]


def finish(worker: str | None) -> None:
    """Session end: a worker writes its fragment; the controller (or a single process)
    merges the fragments into the tracefile."""
    path = target()
    if path is None:
        return
    gc.collect()  # chips nobody closed: their __del__ closes them
    if worker:
        Path(f"{path}.{worker}").write_text(lcov_text(_acc, "router_tests"))
        return
    total: dict[str, FileCoverage] = {}
    merge_coverage(total, _acc)
    for frag in sorted(Path(path).parent.glob(Path(path).name + ".gw*")):
        merge_coverage(total, read_lcov(frag.read_text(), str(frag)))
        frag.unlink()
    Path(path).write_text(lcov_text(total, "router_tests"))
    _acc.clear()
    _acc.update(total)


def note() -> list[str]:
    """The closing note: per block source (microcode/<block>/), lines and branch
    directions covered, then the lines no test reaches."""
    path = target()
    if path is None:
        return []
    blocks = {p: fc for p, fc in _acc.items() if "/microcode/" in p}
    if not blocks:
        return [f"block coverage: no router block ran ({path} written empty)"]
    out = [f"block coverage ({ENV}={path}; genhtml {path} -o DIR):"]
    for p in sorted(blocks):
        fc = blocks[p]
        name = p.split("/microcode/", 1)[1]
        missed = sorted(n for n, c in fc.lines.items() if not c)
        out.append(f"  {name:<28} lines {fc.hit}/{len(fc.lines)}, branch directions "
                   f"{fc.branches_hit}/{len(fc.branches)}"
                   + (f"; no test reaches lines {missed_ranges(missed)}" if missed else ""))  # fmt: skip
    return out
