"""The debugger following a packet across threads (issue 49): a breakpoint's condition
is evaluated on the ME the breakpoint is on (its program's names), `if packet == N`
stops where traffic packet N is handled, `display` shows expressions at every stop,
`history` lists a thread's last instructions and `back` goes back in time."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.asm.assembler import assemble
from npkit.asm.image import write_image
from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import open_target, open_targets

ROOT = Path(__file__).resolve().parents[2]
TTL = ROOT / "examples" / "debug" / "ttl.uc"

A_SRC = ".reg x\n    immed[x, 1]\ndone#:\n    alu[x, x, +, 1]\nspin#:\n    br[spin#]\n"
B_SRC = ".reg y\n    immed[y, 5]\n    alu[y, y, +, 2]\ndone#:\n    alu[y, y, +, 3]\nspin#:\n    br[spin#]\n"


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    """a.uc on ME 0x00 (the current thread's), b.elf on ME 0x10: each with .reg names of its own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.uc").write_text(A_SRC)
    (tmp_path / "b.uc").write_text(B_SRC)
    write_image(tmp_path / "b.elf", assemble("b.uc").image)
    return Session(open_targets([("a.uc", "0"), ("b.elf", "0x10")]))


def test_a_condition_names_registers_of_the_me_the_breakpoint_is_on(two: Session) -> None:
    s = two
    assert (s.me, s.ctx) == (0, 0)
    out = s.execute("break done me 0x10 if y == 7")  # `y` is b's, not the current thread's
    assert out == "breakpoint 1 at b.uc:5 <done>, address 2 on ME 0x10 if y == 7"
    out = s.execute("run 1000")
    assert out.startswith("breakpoint 1 (done me 0x10) hit at cycle ")
    assert "ME 0x10 ctx 0 pc 2" in out
    assert s.execute("print y") == "y = 7 (0x7)"
    # on both MEs, a name one of them lacks is an error naming that ME
    msg = str(pytest.raises(DebugError, s.execute, "break done if y == 7").value)
    assert "unknown name 'y'" in msg and "on ME 0x00 (a)" in msg


def test_why_takes_a_traffic_spec_without_count_or_duration_as_npk_run_does(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    monkeypatch.chdir(ROOT)
    spec = tmp_path / "open.yaml"
    spec.write_text(f"seed: 1\nrouter: {ROOT / 'examples/traffic/router.yaml'}\n"
                    "defaults:\n  size: 64\n  protocol: udp\n  load: 1.0\n  arrivals: constant\n")
    r = CliRunner().invoke(main, ["why", "pkt:2", "--image", "examples/passthrough/passthrough.uc", "--traffic",
                                  str(spec), "--buffer", "0x100000:256", "--cycles", "3000"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.output.startswith("traffic packet 2 in buffer 2: dram 0x100200..0x1002ff")
    assert "rbuf_rd (receive into DRAM)" in r.output and "tbuf_wr (transmit from DRAM)" in r.output


PIPELINED = ROOT / "microcode" / "layouts" / "pipelined.yaml"


def router(traffic: str) -> Session:
    return Session(open_target(PIPELINED, traffic=str(ROOT / "examples" / "traffic" / traffic)))


def test_rings_name_the_layouts_rings_with_who_puts_and_gets() -> None:
    out = router("min64.yaml").execute("rings").splitlines()
    assert out[0].startswith("scratch ring  0: base 0x1000 size  256 words") and out[0].endswith("rx_to_parse (rx -> parse)")
    assert any(ln.endswith("cp_to_qm (control -> qm)") for ln in out)
    assert any(" exceptions (" in ln and ln.endswith("-> xscale)") for ln in out)


def test_stats_gives_drops_and_exceptions_by_reason() -> None:
    s = router("errors.yaml")
    s.execute("run 40000")
    out = s.execute("stats")
    assert "  router drops by reason: 2 (link_broadcast_unicast_ip 2)" in out
    assert "  router exceptions by reason: 3 (ip_options 2, arp 1)" in out


def test_stats_says_when_a_counter_update_is_in_flight() -> None:
    """rx counts a packet with scratch[incr] then its bytes with scratch[add]: at cycle 1313
    the add has landed and the incr not (checked cycle by cycle against the counters)."""
    s = router("min64.yaml")
    s.execute("run 1313")
    out = s.execute("stats")
    assert "  router port 0: rx 0 pkts 60 B  tx 0 pkts 0 B" in out
    assert "  (1 counter update issued and not landed yet" in out


TTL = ROOT / "examples" / "debug" / "ttl.uc"


def test_display_shows_its_expressions_at_every_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    s = Session(open_target(TTL))
    assert s.execute("display sum") == "1: sum = 0 (0x0)"
    assert s.execute("display one + 1") == "2: one + 1 = 1 (0x1)"
    s.execute("break ttl.uc:42")
    out = s.execute("run")
    assert out.startswith("breakpoint 1 (ttl.uc:42) hit at cycle 247")
    assert out.endswith("1: sum = 40165 (0x9ce5)\n2: one + 1 = 257 (0x101)")
    assert s.execute("next").endswith("1: sum = 40421 (0x9de5)\n2: one + 1 = 257 (0x101)")
    assert s.execute("undisplay 2") == "undisplayed 2"
    assert s.execute("step").endswith("alu[b1, b1, AND, a2]\n1: sum = 40421 (0x9de5)")
    assert "2:" not in s.execute("display")
    assert s.execute("print sum") == "sum = 40421 (0x9de5)"  # not a stop: no displays after it
    with pytest.raises(DebugError, match="no display '7'"):
        s.execute("undisplay 7")
    with pytest.raises(DebugError, match="unknown name 'nosuch'"):
        s.execute("display nosuch + 1")
    assert s.execute("d") == "deleted 1"  # gdb's `d` is still delete


def test_history_lists_a_threads_last_instructions_with_their_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    s = Session(open_target(TTL))
    s.execute("break ttl.uc:43")
    s.execute("run")
    out = s.execute("history 3").splitlines()
    assert out[0] == ("ME 0x00 ctx 0: the last 3 instructions it executed, oldest first "
                      "(11 kept, at most 1024; cycle 251 now)")  # fmt: skip
    # csum_add's words, one a cycle, up to the breakpoint at cycle 251 (pc 11 not run yet)
    assert [ln.split()[1:4] for ln in out[1:]] == [["248", "pc", "8"], ["249", "pc", "9"], ["250", "pc", "10"]]
    assert out[3].split("  ", 1)[1].endswith("ttl.uc:30 in csum_add() called at examples/debug/ttl.uc:42")
    other = s.execute("history 0x00:1").splitlines()  # context 1 ran two words and was killed
    assert [ln.split()[3] for ln in other[1:]] == ["0", "20"] and "ctx_arb[kill]" in other[2]
    with pytest.raises(DebugError, match="N must be 1 or more"):
        s.execute("history 0")


def test_break_if_packet_follows_one_traffic_packet_through_the_blocks() -> None:
    """npk_emit's first line is in parse, lookup and hdr_format: `if packet == 3` stops
    in each block as it hands on traffic packet 3, whichever thread has it."""
    s = router("min64.yaml")
    out = s.execute("break npk_block.h:406 if packet == 3")
    assert "in 3 places if packet == 3:" in out
    stops = []
    for _ in range(3):
        out = s.execute("run 20000")
        assert out.startswith("breakpoint 1 (npk_block.h:406) hit at cycle "), out
        stops.append(out.splitlines()[1].split(" pc ")[0])
        assert s.execute("print packet") == "packet = 3 (0x3)"
        assert "traffic   packet id 3 (NPK1 tag in the payload)" in s.execute("packet")
    assert stops == ["ME 0x01 ctx 0", "ME 0x02 ctx 7", "ME 0x03 ctx 4"]
    assert s.execute("run 5000").startswith("ran 5000 cycles")  # packet 3 has left the blocks
    assert s.execute("info").splitlines()[0].endswith("if packet == 3  hits 3")
