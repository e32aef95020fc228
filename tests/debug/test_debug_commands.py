"""npk debug commands under a person's hands: watchpoints that name the writing
instruction and stop only on a change, clear errors for bad input (with the column),
`set` for registers and memory, and Tab completion through the completer API."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from npkit.toolchain.debug.complete import DebugCompleter
from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import open_target

ROOT = Path(__file__).resolve().parents[2]
TTL = ROOT / "examples" / "debug" / "ttl.uc"

# context 0 writes 7 to SRAM 0x100 twice, then 8
SAME_TWICE = """\
.reg addr v
.reg write $x
.sig s
    br!=ctx[0, idle#]
    immed[addr, 0x100]
    immed[v, 7]
    alu[$x, --, b, v]
    sram[write, $x, addr, 0, 1], ctx_swap[s]
    sram[write, $x, addr, 0, 1], ctx_swap[s]
    immed[v, 8]
    alu[$x, --, b, v]
    sram[write, $x, addr, 0, 1], ctx_swap[s]
    halt
idle#:
    ctx_arb[kill]
"""


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture
def s() -> Session:
    return Session(open_target(TTL))


def err(s: Session, line: str) -> str:
    with pytest.raises(DebugError) as e:
        s.execute(line)
    return str(e.value)


# ---------------------------------------------------------------- watchpoints
def test_register_watch_names_the_writing_instruction_and_skips_same_value_writes(s: Session) -> None:
    s.execute("watch sum")
    out = s.execute("run")
    assert "watchpoint 1 (sum (b1) ME 0x00 ctx 0): 0x0 -> 0x9ce5 at cycle 247" in out
    assert "written by ME 0x00 ctx 0 pc 6 at examples/debug/ttl.uc:41\n" in out  # alu_shf[sum, ...]
    assert "alu_shf[sum, --, b, $$h6, >>16]" in out
    assert "goes on at pc 7" in out
    out = s.execute("run")
    assert "0x9ce5 -> 0x9de5" in out
    assert "written by ME 0x00 ctx 0 pc 7 at examples/debug/ttl.uc:27 in csum_add() called at examples/debug/ttl.uc:42" in out
    # `and mask` and `+ carry` (pc 9, 10) write 0x9de5 again: no change, no stop
    out = s.execute("run")
    assert "all MEs halted" in out and "0x9de5 -> 0x9de5" not in out
    assert "hits 2" in s.execute("info")


def test_memory_watch_skips_a_write_of_the_same_bytes(tmp_path: Path) -> None:
    src = tmp_path / "twice.uc"
    src.write_text(SAME_TWICE)
    s = Session(open_target(src))
    s.execute("watch sram 0x100")
    out = s.execute("run")
    assert "sram 0x100: 00000000 -> 00000007" in out and "written by ME 0x00 ctx 0" in out
    out = s.execute("run")  # the second write of 7 changes nothing
    assert "sram 0x100: 00000007 -> 00000008" in out
    assert "all MEs halted" in s.execute("run")


def test_transfer_register_watch_names_the_memory_read(s: Session) -> None:
    s.execute("watch $$h5")
    out = s.execute("run")
    assert "($$h5 ($$5.in) ME 0x00 ctx 0): 0x0 -> 0x4011" in out
    assert "written by the dram unit: a read of ME 0x00 ctx 0 completed (command issued at cycle 4)" in out


# ---------------------------------------------------------------- errors
def test_a_line_without_code_is_an_error_naming_the_nearest_lines(s: Session) -> None:
    assert err(s, "break ttl.uc:0") == ("examples/debug/ttl.uc:0: lines start at 1; "
                                        "the nearest line with code: 27 (in macro csum_add)")  # fmt: skip
    assert err(s, "break ttl.uc:39") == ("examples/debug/ttl.uc:39: it has no code; "
                                         "the nearest lines with code: 38 and 40")  # fmt: skip
    assert "the nearest line with code: 54" in err(s, "break ttl.uc:9999")
    assert "33: it has no code; the nearest lines with code: 30 (in macro csum_add) and 34" in err(s, "break ttl.uc:33")
    assert "breakpoint 1 at examples/debug/ttl.uc:27" in s.execute("break ttl.uc:42")  # a macro call: its first word
    assert s.execute("info").count("break ") == 1
    assert "has lines 1..54, not 0" in err(s, "list ttl.uc:0")


def test_addresses_out_of_range_are_errors(s: Session) -> None:
    # `packet 1 << 100000` decoded address 0; now the expression's shift is refused
    assert err(s, "packet 1 << 100000") == "shift count 100000 in '1 << 100000' is outside 0..64"
    assert err(s, "packet 1 << 64") == ("column 8: dram address a 65-bit number is out of range; "
                                        "dram is 0x0..0x3ffffff")  # fmt: skip
    assert "dram address -0x4 is out of range" in err(s, "packet -4")
    assert "a frame of 64 bytes at dram 0x3ffffff + 0 is out of range" in err(s, "packet 0x3ffffff")
    assert "column 12: dram address 0x4000000 (+4 bytes) is out of range" in err(s, "watch dram 0x4000000")
    assert "sram is 4 channels of 0x800000 bytes at 0x0, 0x40000000, 0x80000000, 0xc0000000" in err(
        s, "mem sram 0x100000000 8")
    assert "column 10: LEN must be 1..65536, got 0" in err(s, "mem dram 0 0")
    assert "sram address" in err(s, "queues 0xfffffffffff")


def test_trailing_words_and_parse_errors_give_the_column(s: Session) -> None:
    assert err(s, "watch a0 +") == "column 10: unexpected '+' (usage: watch REG | sram|dram|scratch ADDR [LEN] | tcam[N])"
    assert err(s, "watch dram 0 4 junk").startswith("column 16: unexpected 'junk'")
    assert err(s, "print a0 +") == "column 11: cannot parse expression 'a0 +': it ends too early"
    assert err(s, "print 1 2") == "column 9: cannot parse expression '1 2': invalid syntax"
    assert err(s, "break done if sum ==") .startswith("column 21: cannot parse expression 'sum =='")
    assert err(s, "break ttl.uc:40 foo").startswith("column 17: unexpected 'foo'")
    assert err(s, "run 10 20") == "column 8: unexpected '20' (usage: run [CYCLES])"
    assert err(s, "run -1") == "column 5: CYCLES must be 1 or more, got -1"
    assert err(s, "threads now").startswith("column 9: unexpected 'now'")
    assert err(s, "delete x").startswith("column 8: 'x' is not a breakpoint or watchpoint number")
    assert "cannot be watched" in err(s, "watch pc")
    assert s.execute("info") == "no breakpoints or watchpoints"  # nothing was half set


# ---------------------------------------------------------------- breakpoint hits
def test_a_breakpoint_hit_while_stepping_counts_in_info() -> None:
    """Every context of hello.uc passes line 23: a hit announced by `step` (another
    context reaching it) counts like one of `run`; a condition that fails stops neither."""
    s = Session(open_target(ROOT / "examples" / "hello.uc"))
    s.execute("break hello.uc:23")
    for _ in range(3):
        s.execute("run")
    assert s.execute("info").endswith("hits 3")
    out = s.execute("step 20")
    assert "breakpoint 1 (hello.uc:23) hit at cycle 44" in out
    assert s.execute("info").endswith("hits 4")
    s.execute("delete 1")
    s.execute("break hello.uc:23 if ctx == 99")
    out = s.execute("step 20")
    assert "hit at" not in out and s.execute("info").endswith("hits 0")


def test_print_shows_one_number_in_decimal_and_hex(s: Session) -> None:
    """Expressions are exact integers: the decimal and hex of `print` are the same value."""
    assert s.execute("print 1 << 64") == "1 << 64 = 18446744073709551616 (0x10000000000000000)"
    assert s.execute("print 0xffffffff + 1") == "0xffffffff + 1 = 4294967296 (0x100000000)"
    assert s.execute("print -1") == "-1 = -1 (-0x1, 0xffffffff in 32 bits)"
    assert s.execute("print -(1 << 40)") == "-(1 << 40) = -1099511627776 (-0x10000000000)"


def test_packet_length_and_queue_address_errors(s: Session) -> None:
    assert err(s, "packet buf len 0") == "column 16: LEN must be 1..65536, got 0"
    assert err(s, "packet buf len 67108864") == "column 16: LEN must be 1..65536, got 67108864"
    out = s.execute("packet buf len 65536")  # the rest is one `mem` command that `mem` takes
    assert "... 65472 more bytes (mem dram 0x40 65472)" in out
    assert "dram 0x40, 65472 bytes:" in s.execute("mem dram 0x40 65472")
    assert err(s, "queues 0x5") == ("column 8: queue descriptor address 0x5 is not a multiple of 4 "
                                    "(descriptors are longwords: 0x4?)")  # fmt: skip
    assert s.execute("queues 0x4") == "queue 0x00000004: count 0 head 0x0 tail 0x0"


# ---------------------------------------------------------------- set
def test_set_registers_and_memory(s: Session) -> None:
    s.execute("break got_header")
    s.execute("run")
    assert s.execute("set one = 0x200") == "one (a1) = 512 (0x200), was 256 (0x100)  ME 0x00 ctx 0"
    assert s.execute("set a0 = 5").startswith("a0 = 5 (0x5), was 0")
    assert s.reg_value("buf") == 5
    s.execute("set buf = 0")
    assert s.execute("set $$o3 = 0x10").startswith("$$o3 ($$3.out) = 16 (0x10)")
    assert s.chip.reg(0, "$$3.out") == 0x10
    assert s.execute("set $$h5 = 0x4012").startswith("$$h5 ($$5.in) = 16402")  # the read half
    assert s.execute("set sram[0x100] = 0xdeadbeef") == "sram[0x100] = 0xdeadbeef (4 bytes, was 0x00000000)"
    assert s.chip.read32("sram", 0x100) == 0xDEADBEEF
    s.execute("set sram[0x101, 1] = 0x00")
    assert s.chip.read32("sram", 0x100) == 0xDE00BEEF
    s.execute("set dram[0x40, 8] = 0x0102030405060708")
    assert s.chip.mem_read("dram", 0x40, 8) == bytes(range(1, 9))
    s.execute("set scratch[0x3ffe, 2] = 0xabcd")
    assert s.chip.mem_read("scratch", 0x3FFE, 2) == b"\xab\xcd"
    s.execute("run")  # lw5 = $$h5 - one, with both changed
    assert s.reg_value("lw5") == 0x4012 - 0x200


def test_set_pc_to_a_label_moves_the_thread(s: Session) -> None:
    out = s.execute("set pc = done")
    assert "pc = 19 (0x13), was 0" in out and "ME 0x00 ctx 0 pc 19 (running) at examples/debug/ttl.uc:52 <done>" in out
    assert "halt" in s.execute("run")


def test_set_errors(s: Session) -> None:
    assert err(s, "set got_header = 1") == "'got_header' is a label, a constant of the image (read-only)"
    assert err(s, "set hdr_sig = 1").startswith("'hdr_sig' is a signal")
    assert err(s, "set state = 1").startswith("'state' is read-only")
    assert err(s, "set wait = 0").startswith("'wait' is read-only")
    assert err(s, "set pc = 99") == "pc 99 is past the end of program ttl (21 words)"
    assert err(s, "set nosuch = 1").startswith("column 5: unknown register 'nosuch'")
    assert err(s, "set a99 = 1") == "column 5: relative register a99 out of range in 8-context mode (0..15 a context; @ names an absolute one)"
    assert err(s, "set a0 = 0x100000000") == "column 10: 0x100000000 does not fit in 32 bits"
    assert err(s, "set sram[0x100, 2] = 0x10000").endswith("0x10000 does not fit in 16 bits")
    assert "the width is 1, 2, 4 or 8 bytes, not 3" in err(s, "set dram[0, 3] = 1")
    assert "scratch address 0x4000 (+4 bytes) is out of range" in err(s, "set scratch[0x4000] = 1")
    assert "memory is sram[ADDR], dram[ADDR] or scratch[ADDR]" in err(s, "set foo[3] = 1")
    assert err(s, "set a0 =").startswith("column 9: the value is missing after '='")
    assert err(s, "set a0 = 1 +").startswith("column 13: cannot parse expression '1 +'")
    assert s.reg_value("a0") == 0
    out = s.execute("set cc = 0xff")
    assert "the register keeps 0xf, not 0xff" in out


@pytest.mark.parametrize(("line", "message"), [
    ("set $$40 = 0x1234", "column 5: relative register $$40 out of range in 8-context mode (0..15 a context"),
    ("set $16 = 1", "column 5: relative register $16 out of range in 8-context mode (0..15 a context"),
    ("set n$16 = 1", "column 5: relative register n$16 out of range in 8-context mode"),
    ("set b16 = 1", "column 5: relative register b16 out of range in 8-context mode"),
    ("print a16", "relative register a16 out of range in 8-context mode"),
    ("print $$16.out + 1", "relative register $$16.out out of range in 8-context mode"),
    ("set lm640 = 1", "column 5: local memory word lm640 out of range (0..639)"),
    ("set cam16 = 7", "column 5: CAM entry cam16 out of range (0..15)"),
    ("print cam16", "CAM entry cam16 out of range (0..15)"),
    ("watch lm640", "local memory word lm640 out of range (0..639)"),
])  # fmt: skip
def test_register_numbers_past_the_range_are_refused(s: Session, line: str, message: str) -> None:
    assert err(s, line).startswith(message)


def test_relative_and_absolute_registers_in_range(s: Session, tmp_path: Path) -> None:
    assert s.execute("set $$15 = 0x1234").startswith("$$15 = 4660")
    assert s.execute("set @$$40 = 3").startswith("@$$40 = 3")
    assert s.execute("set lm639 = 2").startswith("lm639 = 2") and s.execute("print cam15") == "cam15 = 0 (0x0)"
    four = tmp_path / "four.uc"  # 4-context mode: 32 relative registers a context
    four.write_text(".num_contexts 4\n    alu[a0, --, b, 1]\n    halt\n")
    s4 = Session(open_target(four))
    assert s4.execute("set $$31 = 5").startswith("$$31 = 5") and s4.chip.reg(0, "@$$31") == 5
    assert err(s4, "set $$32 = 5").startswith("column 5: relative register $$32 out of range in 4-context mode (0..31")


def test_set_does_not_count_as_a_change_for_a_watchpoint(s: Session) -> None:
    s.execute("watch sum")
    s.execute("set sum = 0x9ce5")  # what line 41 will write: no change when it does
    out = s.execute("run")
    assert "0x9ce5 -> 0x9de5" in out and "pc 7" in out


# ---------------------------------------------------------------- completion
def complete(s: Session, text: str) -> list[str]:
    comp = DebugCompleter(s)
    return [c.text for c in comp.get_completions(Document(text), CompleteEvent(completion_requested=True))]


def test_completion_in_every_position(s: Session) -> None:
    assert complete(s, "br") == ["break"]
    assert complete(s, "break got") == ["got_header"]
    assert complete(s, "break tt") == ["ttl.uc:"]
    assert complete(s, "break examples/deb") == ["examples/debug/ttl.uc:"]
    assert complete(s, "break ttl.uc:4") == [f"ttl.uc:{n}" for n in range(40, 50)]  # lines with code
    assert complete(s, "break ttl.uc:2") == ["ttl.uc:27", "ttl.uc:28", "ttl.uc:29"]
    assert complete(s, "break done i") == ["if"]
    assert complete(s, "break done if (s") == ["sum"]
    assert complete(s, "list do") == ["done"]
    assert complete(s, "watch s") == ["sram", "scratch", "sum"]
    assert complete(s, "watch dram pkt") == ["pktbuf"]
    assert complete(s, "print $$h") == [f"$$h{i}" for i in range(8)]
    assert complete(s, "p lw") == ["lw5", "lw6"]  # an alias
    assert complete(s, "packet buf p") == ["pktbuf", "pad"]
    assert complete(s, "set s") == ["sum", "signals", "sram[", "scratch["]
    assert complete(s, "set sum ") == ["="]
    assert complete(s, "set pc = go") == ["got_header"]
    assert complete(s, "set sram[pk") == ["pktbuf"]
    assert complete(s, "set ACTIVE_LM_ADDR_1") == ["ACTIVE_LM_ADDR_1", "ACTIVE_LM_ADDR_1_BYTE_INDEX"]
    assert complete(s, "mem d") == ["dram"]
    assert complete(s, "thread 0x00:") == [f"0x00:{c}" for c in range(8)]
    assert complete(s, "step 2 0x00:7") == ["0x00:7"]
    assert complete(s, "help wa") == ["watch"]
    assert complete(s, "run ") == [] and complete(s, "nosuch a") == []
    s.execute("break done")
    s.execute("watch sum")
    comp = DebugCompleter(s)
    got = {c.text: c.display_meta_text for c in comp.get_completions(Document("delete "), CompleteEvent())}
    assert got == {"1": "break done", "2": "watch sum (b1) ME 0x00 ctx 0"}


def test_completion_follows_the_current_thread_program() -> None:
    """A layout: the .reg names offered are those of the program on the current thread's ME."""
    s = Session(open_target(ROOT / "microcode" / "layouts" / "pipelined.yaml"))
    s.execute("thread 1:0")
    names = complete(s, "print p")
    assert "pw" in names
    assert all(n in s.target.smap(1).labels or s.target.smap(1).reg_candidates(n) or n in s.target.smap(1).signals
               or n in s.target.smap(1).mems for n in names)  # fmt: skip


# ---------------------------------------------------------------- faults
def test_faults_are_reported_after_the_command_that_ran_into_them() -> None:
    # ring_ping.uc alone: its scratch rings are not configured, so every put and get is a
    # ring_unconfigured fault; npk run warns about them, and so does the debugger now
    s = Session(open_target(ROOT / "examples" / "ring_ping.uc"))
    out = s.execute("run 100")
    assert "warning: the chip faulted 1 time (it goes on after a fault; total 1: ring_unconfigured 1)" in out
    assert "  ring_unconfigured by ME 0x00 ctx 0 pc 6 at examples/ring_ping.uc:18, address 0x0, cycle 44" in out
    out = s.execute("run 2000")
    faults = s.chip.faults()
    assert f"total {faults['total']}: ring_unconfigured {faults['total']}" in out
    assert "  last: ring_unconfigured by ME 0x00 ctx 0 pc 7 at examples/ring_ping.uc:20" in out
    assert "faulted" not in s.execute("print count") and "faulted" not in s.execute("threads")


def test_a_run_without_faults_warns_of_none(s: Session) -> None:
    assert "warning" not in s.execute("run")
