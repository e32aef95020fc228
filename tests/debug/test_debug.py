"""npk debug: batch scripts over examples/debug/ttl.uc (breakpoints by FILE:LINE and label,
stepping, registers by .reg name, signals, thread states, the decoded packet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.debug.expr import ExprError, evaluate
from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import open_target

pytestmark = pytest.mark.usefixtures("at_root")

ROOT = Path(__file__).resolve().parents[2]
TTL = ROOT / "examples" / "debug" / "ttl.uc"


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def batch(tmp_path: Path, script: str, target: Path = TTL) -> tuple[int, str, str]:
    """Run from the top of the tree, as the docs do, so paths print as examples/debug/ttl.uc."""
    f = tmp_path / "script.npkdbg"
    f.write_text(script)
    r = CliRunner().invoke(main, ["debug", str(target), "--batch", str(f)])
    return r.exit_code, r.stdout, r.stderr


def section(out: str, cmd: str) -> str:
    """Output of the command echoed as `(npk) cmd` up to the next prompt."""
    part = out.split(f"(npk) {cmd}\n", 1)[1]
    return part.split("(npk) ", 1)[0]


def test_break_by_line_and_label_then_registers_and_packet(tmp_path: Path) -> None:
    code, out, err = batch(tmp_path, """
        break ttl.uc:40
        break done
        threads
        run
        print one
        signals
        packet buf
        run
        print sum
        print lw5
        threads
        packet
    """)
    assert code == 0, err
    assert "breakpoint 1 at examples/debug/ttl.uc:40 <got_header>, address 5 on ME 0x00" in out
    assert "breakpoint 2 at examples/debug/ttl.uc:52 <done>, address 19" in out
    first = section(out, "threads")
    assert "* 0x00:0   running     0  examples/debug/ttl.uc:34" in first
    assert first.count("ready") == 7
    hit = section(out, "run")
    assert "breakpoint 1 (ttl.uc:40) hit" in hit and "ME 0x00 ctx 0 pc 5 (running)" in hit
    assert "one = 256 (0x100)" in out
    sig = section(out, "signals")
    assert "names: hdr_sig=s2, wr_sig=s4" in sig
    assert "ctx 1 inactive" in sig  # the other contexts ran ctx_arb[kill] meanwhile
    pk = section(out, "packet buf")
    assert "ipv4      10.0.0.1 -> 192.168.1.7  ttl 64  proto 17" in pk and "checksum 0x9ce5 (ok)" in pk
    assert "traffic   packet id 7" in pk
    assert "sum = 40421 (0x9de5)" in out  # RFC 1624: 0x9ce5 + 0x0100
    assert "lw5 = 16145 (0x3f11)" in out
    after = out.rsplit("(npk) packet\n", 1)[1]
    assert "packet at dram 0x0 = buf (by convention)" in after
    assert "ttl 63" in after and "checksum 0x9de5 (ok)" in after


def test_step_next_and_macro_depth(tmp_path: Path) -> None:
    t = open_target(TTL)
    s = Session(t)
    s.execute("break got_header")
    s.execute("run")
    assert s.pc() == 5
    s.execute("step")
    assert s.pc() == 6
    out = s.execute("next")  # over csum_add(): its four words are one line at depth 0
    assert s.pc() == 11 and "ttl.uc:43" in out
    s.execute("break ttl.uc:28")  # a macro body line: breaks in the expansion
    out = s.execute("list ttl.uc:42")
    assert "csum_add(sum, one)" in out
    out = s.execute("step 2 0:0")
    assert s.pc() == 13
    assert s.reg_value("lw6") == 0x0A00  # $$h6 << 16 >> 16: the low half of longword 6
    regs = s.execute("regs")
    assert "sum              b1     0x00009de5" in regs
    assert "$$h5             $$5    0x00004011 = 16401  (read half)" in regs
    assert s.reg_value("$$o1") == 0  # the write half: not written yet
    assert "CAM (entry: tag/state)" in regs and "ACTIVE_LM_ADDR_0=" in regs
    w = s.execute("where")
    assert "ttl.uc:45" in w


def test_conditional_breakpoint_and_watchpoint(tmp_path: Path) -> None:
    s = Session(open_target(TTL))
    s.execute("break done if sum == 1")  # never true: the run ends by halting
    s.execute("watch dram 16 16")
    out = s.execute("run")
    assert "watchpoint 2 (dram 0x10 len 16) written" in out
    assert "dram 0x14: 00004011 -> 00003f11" in out and "dram 0x18: 9ce50a00 -> 9de50a00" in out
    assert "written by ME 0x00 ctx 0" in out
    out = s.execute("run")
    assert "all MEs halted" in out
    assert "hits 0" in s.execute("info")
    s.execute("delete")
    assert s.execute("info") == "no breakpoints or watchpoints"


def test_register_watchpoint_stops_at_the_writer() -> None:
    s = Session(open_target(TTL))
    s.execute("watch sum")
    out = s.execute("run")
    assert "watchpoint 1 (sum (b1) ME 0x00 ctx 0): 0x0 -> 0x9ce5" in out
    assert "written by ME 0x00 ctx 0 pc 6 at examples/debug/ttl.uc:41" in out


def test_batch_error_has_line_number_and_exit_code(tmp_path: Path) -> None:
    code, out, err = batch(tmp_path, "break ttl.uc:40\n\nbreak nowhere_label\nrun\n")
    assert code == 1
    assert "script.npkdbg:3: error: 'nowhere_label' is not FILE:LINE, a label or an address" in err
    assert "(npk) run" not in out


def test_unknown_register_in_condition_is_an_error() -> None:
    s = Session(open_target(TTL))
    with pytest.raises(DebugError, match="unknown name 'nosuch'"):
        s.execute("break done if nosuch == 1")


def test_stdin_batch_and_help(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["debug", str(TTL)], input="help\ncycle\nstats\nrings\nqueues\n")
    assert r.exit_code == 0, r.stderr
    assert "packet [EXPR]" in r.stdout and "cycle 0 (0.0 ns at 1400 MHz)" in r.stdout
    assert "no scratch ring is configured" in r.stdout


def test_expressions() -> None:
    vals = {"a3": 5, "$x": 2, "pw": 0x8000_0012}
    assert evaluate("a3 == 5", vals.__getitem__) == 1
    assert evaluate("a3 != 5 || $x == 2", vals.__getitem__) == 1
    assert evaluate("!(a3 == 5) && 1", vals.__getitem__) == 0
    assert evaluate("((pw & 0xffff) << 11) + 2", vals.__getitem__) == (0x12 << 11) + 2
    with pytest.raises(ExprError):
        evaluate("a3 ==", vals.__getitem__)


def test_scratch_ring_info_reports_configuration() -> None:
    t = open_target(TTL)
    t.chip.scratch_ring(3, 0x1000, 128, 4)
    assert t.chip.scratch_ring_info(3) == {"base": 0x1000, "size": 128, "full_margin": 4, "count": 0}
    assert t.chip.scratch_ring_info(2)["size"] == 0
    out = Session(t).execute("rings")
    assert "scratch ring  3: base 0x1000 size  128 words  count    0" in out


def _line_of(path: Path, text: str) -> int:
    return next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def test_router_layout_break_in_parse_and_decode_the_packet(tmp_path: Path) -> None:
    """The pipelined router linked from its layout, traffic injected through the receive
    stand-in; break where parse starts on a packet and decode it from the packet word."""
    parse_uc = ROOT / "microcode" / "parse" / "parse.uc"
    line = _line_of(parse_uc, "parse_body(")
    f = tmp_path / "r.npkdbg"
    f.write_text(f"break parse.uc:{line}\nrun 200000\nprint pw & 0xffff\npacket\nthreads\nwhere\n"
                 "delete\nrun 20000\nqueues\nrings\n")
    r = CliRunner().invoke(main, ["debug", "microcode/layouts/pipelined.yaml", "--traffic",
                                  "examples/traffic/min64.yaml", "--batch", str(f)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "breakpoint 1 (parse.uc:" in out and "hit at cycle" in out
    hit = section(out, "run 200000")
    assert "ME 0x01 ctx " in hit and "in parse_body() called at microcode/parse/parse.uc:" in hit
    pk = section(out, "packet")
    assert "packet at dram 0x" in pk and "(by convention)" in pk
    assert "ipv4      " in pk and "(ok)" in pk and "traffic   packet id" in pk
    th = section(out, "threads")
    assert "microcode/parse/parse.h" in th and "sleep" in th
    q = section(out, "queues")  # qm's port queues, found from its enqueues
    assert "queue 0x40000000: count" in q
    assert "scratch ring  0: base 0x" in section(out, "rings")


def test_image_with_msf_traffic_watch_the_receive_buffer(tmp_path: Path) -> None:
    """The pass-through example fed by the MSF: a DRAM watchpoint on context 0's buffer
    stops when dram[rbuf_rd] lands the first packet, which then decodes."""
    f = tmp_path / "p.npkdbg"
    f.write_text("watch dram 0x100000 64\nrun\npacket dbuf\nstats\n")
    r = CliRunner().invoke(main, ["debug", "examples/passthrough/passthrough.uc", "--traffic",
                                  "examples/traffic/min64.yaml", "--batch", str(f)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "watchpoint 1 (dram 0x100000 len 64) written" in out and "written by ME 0x00 ctx 0" in out
    pk = section(out, "packet dbuf")
    assert "packet at dram 0x100000 = dbuf, 60 bytes" in pk and "ipv4" in pk and "traffic   packet id 0" in pk
    assert "msf port 0: rx offered" in section(out, "stats")


def test_interactive_session_on_prompt_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The prompt_toolkit front end: commands typed at the prompt, errors reported without
    leaving, history written, `quit` ends."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from npkit.toolchain.debug.cli import _interactive

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    s = Session(open_target(TTL))
    with create_pipe_input() as inp:
        inp.send_text("break got_header\rbreak nowhere\rrun\rprint one\rquit\r")
        with create_app_session(input=inp, output=DummyOutput()):
            _interactive(s)
    out, err = capsys.readouterr()
    assert "npk debug:" in out and "breakpoint 1 at examples/debug/ttl.uc:40 <got_header>" in out
    assert "error: 'nowhere' is not FILE:LINE" in err
    assert "breakpoint 1 (got_header) hit at cycle 245" in out and "one = 256 (0x100)" in out
    assert "print one" in (tmp_path / ".npk_debug_history").read_text()


def test_why_from_a_run_directory(tmp_path: Path) -> None:
    import json

    (tmp_path / "run.json").write_text(json.dumps({"image": str(TTL), "cycles": 5000, "buffer": "0:64"}))
    r = CliRunner().invoke(main, ["why", "0", "--run", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "byte +22 (ip ttl): 40 -> 3f" in r.stdout and "ttl 63" in r.stdout


def test_step_of_a_thread_that_never_wakes_is_bounded(tmp_path: Path) -> None:
    src = tmp_path / "sleep.uc"
    src.write_text(".sig never\n    br!=ctx[0, idle#]\n    ctx_arb[never]\n    halt\nidle#:\n    ctx_arb[kill]\n")
    s = Session(open_target(src))
    s.execute("step 2")
    assert s.chip.ctx_state(0, 0) == "sleep"
    with pytest.raises(DebugError, match=r"still asleep after 200000 cycles \(waiting on never\(s1\)\)"):
        s.execute("step")


def test_threads_named_by_hardware_number_cluster_or_flat_index(tmp_path: Path) -> None:
    # ttl.uc loaded on ME 0x10 (flat 8): every way of naming it selects the same thread
    code, out, err = batch(tmp_path, "thread 0x10:2\nthread 8:3\nthread 1:0:4\nsignals 1:0\n", TTL)
    assert code == 1 and "ME 0x10 has nothing loaded (loaded: 0x00)" in err  # loaded on ME 0 by default
    target = open_target(TTL, mes=[8])
    s = Session(target)
    for spec, ctx in (("0x10:2", 2), ("8:3", 3), ("1:0:4", 4)):
        shown = s.execute(f"thread {spec}")
        assert (s.me, s.ctx) == (8, ctx) and shown.startswith(f"ME 0x10 ctx {ctx} ")
    assert s.execute("signals 1:0").startswith("ME 0x10 signals")
    with pytest.raises(DebugError, match="0x00-0x07, 0x10-0x17"):
        s.execute("thread 0x08:0")


def test_sources_found_from_another_directory_with_source_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # assembled at the top of the tree, the image names examples/debug/ttl.uc; debugged
    # from elsewhere the source is not found: the stop says so (not the instruction twice),
    # `list` says how to point at it, and --source-dir does
    elf = tmp_path / "ttl.elf"
    r = CliRunner().invoke(main, ["asm", "examples/debug/ttl.uc", "-o", str(elf)])
    assert r.exit_code == 0, r.output
    script = tmp_path / "s.npkdbg"
    script.write_text("break ttl.uc:40\nrun\nlist\n")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["debug", str(elf), "--batch", str(script)])
    assert r.exit_code == 1
    assert "     40  (source not found: npk debug --source-dir DIR)" in r.stdout
    assert "source file examples/debug/ttl.uc not found" in r.stderr and "--source-dir" in r.stderr
    r = CliRunner().invoke(main, ["debug", str(elf), "--source-dir", str(ROOT), "--batch", str(script)])
    assert r.exit_code == 0, r.stderr
    assert "     40  alu[lw5, $$h5, -, one]              // TTL - 1" in r.stdout
    assert "=>   40      alu[lw5, $$h5, -, one]" in section(r.stdout, "list")


def test_ring_option_configures_scratch_rings_for_a_plain_image(tmp_path: Path) -> None:
    # ring_ping.uc puts to scratch ring 0 and gets from ring 1: as npk run --ring does, the
    # debugger configures them (without, every put and get faults), and refuses a bad one
    script = tmp_path / "s.npkdbg"
    script.write_text("run 3000\nrings\n")
    r = CliRunner().invoke(main, ["debug", "examples/ring_ping.uc", "--ring", "examples/ring_pingpong.rings.yaml",
                                  "--batch", str(script)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "scratch ring  0: base 0x1000 size  128 words  count    1" in r.stdout
    assert "scratch ring  1: base 0x1200 size  128 words  count    0" in r.stdout
    assert "faulted" not in r.stdout
    r = CliRunner().invoke(main, ["debug", "examples/ring_ping.uc", "--ring", "scratch:0:base=0x1000",
                                  "--batch", str(script)])  # fmt: skip
    assert r.exit_code == 2 and "give base= and size=" in r.stderr
    r = CliRunner().invoke(main, ["debug", "microcode/layouts/pipelined.yaml", "--ring",
                                  "scratch:0:base=0x1000,size=128", "--batch", str(script)])  # fmt: skip
    assert r.exit_code == 2 and "a layout configures its own rings" in r.stderr
