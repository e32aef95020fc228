"""`npk debug` on a pseudo-terminal, as a person uses it: Ctrl-C during a long `run` stops
the run and gives the prompt back with the chip intact; Tab completes past the first word."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parents[2]
NPK = Path(sys.executable).parent / "npk"
TTL = ROOT / "examples" / "debug" / "ttl.uc"

# every context reads SRAM in a loop, forever: the run ends only by Ctrl-C, and the
# debugger spends much of its time in Python draining the thread history meanwhile
SPIN = """\
.reg addr
.reg read $x
.sig got
spin#:
    immed[addr, 0x100]
    sram[read, $x, addr, 0, 1], ctx_swap[got]
    br[spin#]
"""


def spawn(args: list[str], home: Path, cwd: Path = ROOT) -> pexpect.spawn:
    env = {**os.environ, "TERM": "xterm", "HOME": str(home), "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(str(NPK), ["debug", *args], cwd=str(cwd), env=env, encoding="utf-8",
                          timeout=90, dimensions=(40, 200))  # fmt: skip
    child.logfile_read = (home / "terminal.log").open("w")
    child.expect(r"\(npk\)")
    return child


def command(child: pexpect.spawn, line: str, expect: str) -> re.Match[str]:
    """Type `line`, wait for output matching `expect`, then for the next prompt."""
    child.send(line + "\r")
    child.expect(expect)
    m = child.match
    child.expect(r"\(npk\)")
    return m


def tab(child: pexpect.spawn, text: str, added: str) -> None:
    """Type `text` and Tab, and wait until the completion `added` is drawn after it, as a
    person would (prompt_toolkit draws only the new characters)."""
    child.send(text + "\t")
    child.expect(re.escape(added))


def test_ctrl_c_stops_a_long_run_and_keeps_the_session(tmp_path: Path) -> None:
    src = tmp_path / "spin.uc"
    src.write_text(SPIN)
    child = spawn([str(src)], tmp_path, cwd=tmp_path)
    child.send("run 100000000000\r")
    time.sleep(1.0)  # well into the run
    child.sendintr()
    i = child.expect([r"interrupted at cycle (\d+)", "Aborted!", pexpect.EOF])
    assert i == 0, f"Ctrl-C ended the session: {child.before[-300:]!r}"
    stopped = int(child.match[1])
    assert stopped > 0
    child.expect(r"\(npk\)")
    m = command(child, "threads", r"cycle (\d+)\r\n.*\r\n[* ] 0x00:0 ")
    assert int(m[1]) == stopped  # nothing ran after the stop
    command(child, "regs", r"GPRs \(context-relative\)")
    command(child, "print addr", r"addr = 256 \(0x100\)")
    m = command(child, "run 1000", r"ran 1000 cycles, now at cycle (\d+)")
    assert int(m[1]) == stopped + 1000  # `run` goes on from where Ctrl-C left the chip
    child.send("quit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Aborted!" not in (tmp_path / "terminal.log").read_text()


def test_tab_completes_arguments_on_a_terminal(tmp_path: Path) -> None:
    child = spawn([str(TTL)], tmp_path)
    tab(child, "break got", "_header")  # a label
    command(child, "", r"breakpoint 1 at examples/debug/ttl\.uc:40 <got_header>")
    tab(child, "break tt", "l.uc:")  # a file, completed up to the line number
    command(child, "52", r"breakpoint 2 at examples/debug/ttl\.uc:52 <done>")
    command(child, "run", r"breakpoint 1 \(got_header\) hit")
    tab(child, "print ma", "sk")  # a .reg name inside an expression
    command(child, " + 1", r"mask \+ 1 = 65536")
    child.send("quit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
