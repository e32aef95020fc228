"""`back N` / `reverse-step` in npk debug (issue 49): the session's calls to the chip are
replayed on the target opened again, up to the point N instructions of the current
thread ago; each state reached is compared with a fresh session brought to the same
point by stepping or running."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.asm.image import write_image
from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import open_target

ROOT = Path(__file__).resolve().parents[2]
TTL = ROOT / "examples" / "debug" / "ttl.uc"
ERRORS = ROOT / "examples" / "traffic" / "errors.yaml"

# two contexts taking turns: ctx 0 counts in a0 and swaps out on a voluntary ctx_arb,
# ctx 1 counts in its own register; every word of ctx 0's loop is one instruction
SWAP_SRC = """.reg n
    br!=ctx[0, other#]
loop#:
    alu[n, n, +, 1]
    alu[n, n, +, 2]
    ctx_arb[voluntary]
    br[loop#]
other#:
    alu[n, n, +, 10]
    ctx_arb[voluntary]
    br[other#]
"""


def state(s: Session) -> tuple[int, str, str]:
    """What must be equal after going back: the cycle, every register of every context of
    the ME (regs shows GPRs, transfer, NN, LM, CSRs and CAM) and where each thread is."""
    regs = "\n".join(s.execute(f"regs {s.nm(s.me)}:{c}") for c in s.target.ctxs(s.me))
    return s.chip.cycle, regs, s.execute("threads")


def ttl() -> Session:
    return Session(open_target(TTL))


def test_reading_the_pseudo_random_csr_takes_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """`regs` read PSEUDO_RANDOM_NUMBER through the API, which drew a number from the ME's
    generator: every `regs` changed the program's next random number."""
    monkeypatch.chdir(ROOT)
    s = ttl()
    first = s.chip.reg(0, "PSEUDO_RANDOM_NUMBER")
    assert s.chip.reg(0, "PSEUDO_RANDOM_NUMBER") == first
    assert s.execute("regs") == s.execute("regs")


def test_back_1_after_step_restores_registers_pc_and_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    s = ttl()
    s.execute("break ttl.uc:43")
    s.execute("run")
    s.execute("step 3")
    before = state(s)
    s.execute("step")
    assert state(s) != before
    out = s.execute("back 1").splitlines()
    assert out[0].startswith("back 1 instruction of ME 0x00 ctx 0: ")
    assert out[1] == "  checked: the history recorded pc 14 as the thread's next instruction, at cycle 254"
    assert out[2].startswith("ME 0x00 ctx 0 pc 14 (running) at examples/debug/ttl.uc:46")
    assert state(s) == before
    fresh = ttl()  # a session that never went past that point
    fresh.execute("break ttl.uc:43")
    fresh.execute("run")
    fresh.execute("step 3")
    assert state(fresh) == before
    # and it goes on from there as the fresh one does
    assert s.execute("step 2") == fresh.execute("step 2")
    assert state(s) == state(fresh)
