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


@pytest.fixture
def swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "swap.uc").write_text(SWAP_SRC)
    return tmp_path / "swap.uc"


def test_back_across_a_context_swap(swap: Path) -> None:
    """Stepping ctx 0 over its ctx_arb waits for the seven other contexts' turns; going
    back three of its instructions crosses that swap and lands where `step 3` was."""
    s = Session(open_target(swap))
    s.execute("step 3")
    at3 = state(s)
    s.execute("step 3")  # ctx_arb, then br[loop#] after the others' turns, then alu
    hist = [ln.split()[1] for ln in s.execute("history 3").splitlines()[1:]]
    assert int(hist[1]) - int(hist[0]) > 8  # the swap: the other contexts ran in between
    out = s.execute("back 3")
    assert out.splitlines()[1] == "  checked: the history recorded pc 3 as the thread's next instruction, at cycle 3"
    assert state(s) == at3
    fresh = Session(open_target(swap))
    fresh.execute("step 3")
    assert state(fresh) == at3
    assert s.execute("step 3") == fresh.execute("step 3")  # and it goes on as it did
    assert state(s) == state(fresh)


def test_back_inside_a_run_stops_before_the_threads_instruction_and_goes_on_exactly(swap: Path) -> None:
    """`run 200` is one call in which ctx 0 executed 12 instructions: back 7 stops it just
    before its 6th (a breakpoint's stop, in the cycle it issues), and running on to cycle
    200 from there gives the chip `run 200` gave."""
    s = Session(open_target(swap))
    s.execute("run 200")
    at200 = state(s)
    issued = s.execute("history 7").splitlines()[1]  # the 6th: the oldest of the last 7
    out = s.execute("back 7").splitlines()
    assert out[0] == ("back 7 instructions of ME 0x00 ctx 0: the target opened again, the session replayed on it "
                      "(0 of its 1 calls to the chip, then part of the next); cycle 74 (was 200), the thread's "
                      "instruction 6 of the session is next")  # fmt: skip
    assert issued.split()[1] == "74" and issued.split()[3] == "1"  # cycle 74, pc 1
    assert out[2].startswith("ME 0x00 ctx 0 pc 1 (running) at swap.uc:4")
    assert s.execute("history 1").splitlines()[1].split()[1:4] == ["70", "pc", "4"]  # its 5th, br[loop#]
    assert s.execute("run 126") == "ran 126 cycles, now at cycle 200"
    assert state(s) == at200
    s.execute("back 1")  # from a state reached by going back, back again
    assert (s.chip.cycle, s.pc()) == (149, 3)


def test_reverse_step_is_back(swap: Path) -> None:
    s = Session(open_target(swap))
    s.execute("step")
    at1 = state(s)
    s.execute("step 2")
    assert s.execute("reverse-step").startswith("back 1 instruction of ME 0x00 ctx 0: ")
    assert s.execute("rs").startswith("back 1 instruction of ME 0x00 ctx 0: ")
    assert state(s) == at1
    s.execute("display n")
    assert s.execute("reverse-step 1").endswith("\n1: n = 0 (0x0)")  # a stop: the displays follow


def test_back_beyond_the_start_is_a_clear_error(swap: Path) -> None:
    s = Session(open_target(swap))
    with pytest.raises(DebugError, match=r"^back 1: ME 0x00 ctx 0 has executed no instruction since the session "
                                         "began: there is nothing to go back over$"):  # fmt: skip
        s.execute("back")
    s.execute("step 2")
    before = state(s)
    with pytest.raises(DebugError, match=r"^back 3: ME 0x00 ctx 0 has executed 2 instructions since the session "
                                         r"began \(back 2 at most\)$"):  # fmt: skip
        s.execute("back 3")
    with pytest.raises(DebugError, match="N must be 1 or more"):
        s.execute("back 0")
    assert state(s) == before  # nothing moved
    s.execute("thread 0:1")  # another thread: its own count
    with pytest.raises(DebugError, match="ME 0x00 ctx 1 has executed no instruction"):
        s.execute("back 1")


def test_back_keeps_the_sets_before_the_point_and_the_breakpoints_set_since(swap: Path) -> None:
    """A `set` made before the point is replayed (it is part of the state there); the
    breakpoints and displays are the user's as they are now, set on the replayed chip."""
    s = Session(open_target(swap))
    s.execute("step 2")
    s.execute("set n = 0x1234")
    s.execute("step")
    s.execute("break other")
    s.execute("watch n")
    assert s.execute("back 1").splitlines()[2].startswith("ME 0x00 ctx 0 pc 2 ")
    assert s.execute("print n") == "n = 4660 (0x1234)"
    assert s.execute("info").splitlines() == ["  1 break other                    swap.uc:9 <other>  hits 0",
                                              "  2 watch n (a0) ME 0x00 ctx 0  hits 0"]  # fmt: skip
    # the watchpoint's value is the one at the point; the breakpoint works on the replayed chip
    assert s.execute("run 1000").startswith("watchpoint 2 (n (a0) ME 0x00 ctx 0): 0x1234 -> 0x1236 at cycle 3\n")
    out = s.execute("run 1000")
    assert out.startswith("breakpoint 1 (other) hit at cycle ") and "ME 0x00 ctx 1 pc 5" in out


def test_the_code_is_the_one_read_when_the_session_began(swap: Path) -> None:
    """An edit of the source during the session does not reach the replay: the images
    read when the target was opened are loaded again."""
    s = Session(open_target(swap))
    s.execute("step 2")
    swap.write_text(SWAP_SRC.replace("+, 2]", "+, 5]"))
    s.execute("step")
    s.execute("back 1")
    s.execute("step")
    assert s.execute("print n") == "n = 3 (0x3)"


def linked_router(tmp_path: Path, control: str) -> Path:
    from npkit.toolchain.system.link import link

    path = tmp_path / f"router_{control}.elf"
    write_image(path, link("pipelined", {"io": "msf", "control": control}))
    return path


def test_back_with_router_traffic_and_the_control_plane_on_the_xscale(tmp_path: Path) -> None:
    """The linked router with errors.yaml through the MSF device and npkd on the emulated
    XScale: going back into the run between two breakpoint hits and running on reaches the
    second hit with the same chip, the same MSF and router counters and the same XScale."""
    s = Session(open_target(linked_router(tmp_path, "xscale"), traffic=str(ERRORS)))
    assert s.target.control is not None and s.target.control.placement == "xscale"
    s.execute("break npk_block.h:406 if packet == 3")
    assert s.execute("run 20000").startswith("breakpoint 1 (npk_block.h:406) hit at cycle ")
    hit = s.execute("run 20000")
    assert hit.startswith("breakpoint 1 (npk_block.h:406) hit at cycle ")
    at_hit = (state(s), s.execute("stats"), s.execute("packet"))
    assert "XScale [xscale] " in at_hit[0][2]
    out = s.execute("back 5").splitlines()
    assert "then part of the next" in out[0] and out[1].startswith("  checked: the history recorded pc ")
    assert s.execute("run 20000") == hit  # the same thread reaches the same word at the same cycle
    assert (state(s), s.execute("stats"), s.execute("packet")) == at_hit


def test_back_refuses_a_control_plane_running_as_a_native_process(tmp_path: Path) -> None:
    t = open_target(linked_router(tmp_path, "gpe"))
    try:
        s = Session(t)
        s.execute("step")
        with pytest.raises(DebugError, match=r"^back: the control plane runs as a native process \(placement gpe\)"):
            s.execute("back")
        assert s.execute("step").startswith("ME ")  # the session goes on
    finally:
        t.close()


def test_breakpoint_stops_leave_the_xscale_where_a_straight_run_does(tmp_path: Path) -> None:
    """A breakpoint that stops the chip inside the cycles an XScale quantum owes it used to
    drop the rest of them (xscale/system.py: the debt was paid in full before the chip ran
    it): after eleven stops the daemon had run 60004 instructions where a straight run to
    the same cycle gave 20002."""
    elf = linked_router(tmp_path, "xscale")
    straight = Session(open_target(elf, traffic=str(ERRORS)))
    straight.execute("run 12000")
    stopped = Session(open_target(elf, traffic=str(ERRORS)))
    stopped.execute("break npk_block.h:406")
    stops = 0
    while stopped.chip.cycle < 12000:
        stops += stopped.execute(f"run {12000 - stopped.chip.cycle}").startswith("breakpoint 1 ")
    assert stops == 11
    for s in (straight, stopped):
        s.execute("thread 0x00:0")
    assert stopped.execute("threads") == straight.execute("threads")
    assert straight.execute("threads").splitlines()[-1].startswith("  XScale [xscale] ")  # compared just above
    assert stopped.execute("stats") == straight.execute("stats")


def test_a_point_inside_the_step_of_another_thread_is_refused(swap: Path) -> None:
    """`step 0x00:1` waits for ctx 0's four words before ctx 1 runs: one call to the chip
    (npk_step of ctx 1) in which ctx 0's count goes from 0 to 4."""
    s = Session(open_target(swap))
    s.execute("step 0x00:1")
    s.execute("thread 0x00:0")
    assert s.execute("history 4").splitlines()[0].startswith("ME 0x00 ctx 0: the last 4 instructions")
    before = state(s)
    with pytest.raises(DebugError, match=r"^back: that instruction ran while the session stepped ME 0x00 ctx 1; "):
        s.execute("back 1")
    assert state(s) == before
    assert s.execute("back 4").splitlines()[2].startswith("ME 0x00 ctx 0 pc 0 ")  # the start: before that step


def test_back_into_the_cycles_a_step_waited_for_a_sleeping_thread() -> None:
    """`step` of a parse thread asleep on its memory reads runs the chip a cycle at a time
    until it wakes (one log entry for the lot); another context of the ME runs meanwhile,
    and going back a few of its instructions lands inside those cycles."""
    s = Session(open_target(ROOT / "microcode" / "layouts" / "pipelined.yaml",
                            traffic=str(ROOT / "examples" / "traffic" / "min64.yaml")))  # fmt: skip
    s.execute("run 3000")
    s.execute("step 40 0x01:0")
    end = state(s)
    s.execute("thread 0x01:5")
    whole, _ = s.log.locate(1, 5, 3)
    assert s.log.actions[whole].kind == "run" and s.log.actions[whole].repeat > 100  # the wait, one entry
    out = s.execute("back 3").splitlines()
    assert "then part of the next" in out[0] and out[1].startswith("  checked: the history recorded pc ")
    s.execute(f"run {end[0] - s.chip.cycle}")
    s.execute("thread 0x01:0")
    assert state(s) == end
