"""The audit of the packet buffers at the end of a run (npkit.toolchain.system.buffers):
once the router is idle every buffer is on the free list or held at rest -- an rx
context's spare, or one the control daemon's table marks -- and a run that leaks one,
frees one twice or breaks the free list fails, saying so in its JSON."""

from __future__ import annotations

from typing import Any

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.buffers import audit, free_list, rx_spares
from npkit.toolchain.system.paths import ROOT
from npkit.toolchain.system.router_run import RouterRun, free_buffer
from npkit.toolchain.system.sysmap import SYS
from npkit.toolchain.system.verdict import Policy, judge

SPEC = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"
DURATION_NS = 50_000


def take_buffer(chip: Any) -> int:
    """Dequeue the free list's head as rx would, and keep it (a leak)."""
    head, _tail, count = (chip.read32("sram", SYS.freelist_q + 4 * j) for j in range(3))
    chip.write32("sram", SYS.freelist_q, chip.read32("sram", head) if count > 1 else 0)
    if count == 1:
        chip.write32("sram", SYS.freelist_q + 4, 0)
    chip.write32("sram", SYS.freelist_q + 8, count - 1)
    return (head - SYS.desc_base) >> SYS.desc_shift


def drained(leak: bool = False) -> tuple[RouterRun, dict[str, Any], int]:
    rr = RouterRun.link("pipelined", {}, load_traffic_source(SPEC, DURATION_NS))
    rr.run_traffic(DURATION_NS)
    taken = take_buffer(rr.chip) if leak else -1
    rr.drain()
    return rr, rr.summary(), taken


@pytest.fixture(scope="module")
def clean_run() -> tuple[RouterRun, dict[str, Any], int]:
    return drained()


def test_every_buffer_free_or_an_rx_spare_after_a_clean_run(clean_run: tuple[RouterRun, dict[str, Any], int]) -> None:
    rr, s, _ = clean_run
    handles, broken = free_list(rr.chip)
    spares = rx_spares(rr.chip, rr.image)
    assert not broken and spares is not None and len(spares) == 8          # rx: 8 contexts, a spare each
    assert len(set(handles) | set(spares)) == SYS.n_bufs and not set(handles) & set(spares)
    assert s["drain"]["idle"] and s["conservation"]["balanced"], s["conservation"]
    assert s["conservation"]["buffers"] == {"total": SYS.n_bufs, "free": SYS.n_bufs - 8, "rx_spares": 8,
                                            "control_plane": 0, "leaked": 0}  # fmt: skip


def test_a_leaked_buffer_fails_the_run() -> None:
    rr, s, taken = drained(leak=True)
    cons = s["conservation"]
    assert not cons["balanced"] and cons["buffers"]["leaked"] == 1 and cons["buffers"]["free"] == SYS.n_bufs - 9
    assert any("1 buffer leaked" in p and f"[{taken}]" in p for p in cons["problems"]), cons["problems"]
    v = judge(s, Policy())
    assert not v["ok"] and any("buffer leaked" in r for r in v["reasons"]), v


def test_a_double_free_and_a_broken_free_list_are_found() -> None:
    rr, _s, _ = drained()
    spares = rx_spares(rr.chip, rr.image)
    assert spares
    count = rr.chip.read32("sram", SYS.freelist_q + 8)
    free_buffer(rr.chip, spares[0])                     # an rx context's spare given back too
    out, problems = audit(rr.chip, rr.image, None)
    assert out["free"] == count + 1 and any("freed twice" in p and f"[{spares[0]}]" in p for p in problems), problems
    free_buffer(rr.chip, spares[0])                     # ... and once more: twice on the list
    _handles, broken = free_list(rr.chip)
    assert f"buffer {spares[0]} is on the free list twice" == broken
    out, problems = audit(rr.chip, rr.image, None)
    assert problems == [f"buffers: {broken}"] and out["leaked"] is None


def test_the_daemons_table_accounts_for_what_it_holds(clean_run: tuple[RouterRun, dict[str, Any], int]) -> None:
    """A buffer off the free list that the daemon's table marks is accounted for; a
    running daemon that says it holds none while its table marks one is a problem."""
    rr, _s, _ = clean_run
    h = take_buffer(rr.chip)
    out, problems = audit(rr.chip, rr.image, [h])
    assert out["control_plane"] == 1 and out["leaked"] == 0 and not problems
    out, problems = audit(rr.chip, rr.image, [h], claimed=0)
    assert problems == ["buffers: the control daemon's table marks 1 as its own, it holds 0"]
    out, problems = audit(rr.chip, rr.image, None)
    assert out["leaked"] == 1 and problems and f"[{h}]" in problems[0]
    free_buffer(rr.chip, h)
