"""gdb-multiarch on the emulated XScale, the native unit tests under sanitizers,
the command line, and an asleep XScale leaving the chip's idle skip intact."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from npkit.emulator.binding import Chip
from npkit.toolchain.cli import main
from npkit.xscale.system import System

from .conftest import ROOT, XS

DEMO_C = ROOT / "examples" / "xscale" / "xs_demo.c"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gdb_stops_at_a_c_line_and_prints_a_local(xscale_built: Path, me_image: Path) -> None:
    line = next(i for i, t in enumerate(DEMO_C.read_text().splitlines(), 1) if "answer = request * 2 + 1" in t)
    port = _free_port()
    npk = str(Path(sys.executable).parent / "npk")
    emu = subprocess.Popen([npk, "run", str(me_image), "--xscale", str(xscale_built), "--xscale-gdb", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert emu.stderr is not None
        assert "waiting for gdb on 127.0.0.1" in emu.stderr.readline()     # listening now
        gdb = subprocess.run(["gdb-multiarch", "-batch", "-nx", str(xscale_built),
                              "-ex", f"target remote 127.0.0.1:{port}", "-ex", f"break xs_demo.c:{line}",
                              "-ex", "continue", "-ex", "print request", "-ex", "info symbol $pc",
                              "-ex", "continue"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        out, _err = emu.communicate(timeout=60)
    finally:
        if emu.poll() is None:
            emu.kill()
    assert f"xs_demo.c:{line}" in gdb.stdout, gdb.stdout + gdb.stderr
    assert "$1 = 41" in gdb.stdout
    assert "in section .text" in gdb.stdout
    assert "answer 83 sent" in out and emu.returncode == 0       # the program went on after gdb continued


def test_stub_listens_on_loopback_only(xscale_built: Path) -> None:
    from npkit.xscale.core import XScaleCore
    from npkit.xscale.gdbstub import GdbStub

    stub = GdbStub(XScaleCore(xscale_built, []), _free_port())
    try:
        assert stub.server.getsockname()[0] == "127.0.0.1"
    finally:
        stub.close()


def test_native_library_under_asan_ubsan(xscale_built: Path) -> None:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    res = subprocess.run([str(XS / "build" / "test_xscale_asan")], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "OK"


def test_npk_run_with_xscale_json(xscale_built: Path, me_image: Path) -> None:
    res = CliRunner().invoke(main, ["run", str(me_image), "--xscale", str(xscale_built), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    xs = out["xscale"]
    assert xs["status"]["state"] == "exited" and xs["status"]["exit_code"] == 0
    assert "answer 83 sent" in xs["stdout"] and xs["status"]["interrupts"] == 1
    assert out["mes"][0]["status"] == "halt"


def test_npk_run_reports_a_failing_program(xscale_built: Path, me_image: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["run", str(me_image), "--xscale", str(tmp_path / "nope.elf")])
    assert res.exit_code == 1 and "does not exist" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["xscale", "run", str(me_image)])        # an ME image is no ARM program
    assert res.exit_code == 1 and "a microengine image" in res.output and "npk run" in res.output
    elf = bytearray(me_image.read_bytes())                                 # any other machine: named
    elf[elf.find(b".npk.meta")] = ord("X")
    other = tmp_path / "other.elf"
    other.write_bytes(bytes(elf))
    res = CliRunner().invoke(main, ["xscale", "run", str(other)])
    assert res.exit_code == 1 and "machine 0 is not ARM" in res.output


def test_npk_xscale_build_and_run(tmp_path: Path) -> None:
    src = tmp_path / "exit7.c"
    src.write_text('#include <stdio.h>\nint main(void) { printf("seven\\n"); return 7; }\n')
    out = tmp_path / "exit7.elf"
    res = CliRunner().invoke(main, ["xscale", "build", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["xscale", "run", str(out), "--json"])
    assert res.exit_code == 1                                  # the program's exit code 7 is a failure
    rep = json.loads(res.output)
    assert rep["stdout"] == "seven\n" and rep["status"]["exit_code"] == 7
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undefined_name; }\n")
    res = CliRunner().invoke(main, ["xscale", "build", str(bad), "-o", str(tmp_path / "bad.elf")])
    assert res.exit_code == 1 and "undefined_name" in res.output


def test_sleeping_xscale_costs_no_instructions_and_keeps_the_idle_skip(xscale_built: Path) -> None:
    chip = Chip("ixp2800")                 # no ME runs: nothing will ever interrupt
    system = System(chip)
    xs = system.attach_xscale(xscale_built, ["idle"])
    system.run(2_000_000)
    booted = xs.instructions
    assert xs.state == "waiting" and "interrupt" in xs.status()["waiting_on"]
    system.run(10_000_000_000)             # 7 s of emulated time
    assert xs.instructions == booted       # asleep: not one more instruction
    assert system.cycle == 10_002_000_000
    assert xs.status()["wait_cycles"] >= 10_000_000_000
    system.close()


def test_gdb_ports_outside_tcp_and_outputs_over_sources_are_refused(xscale_built: Path, tmp_path: Path) -> None:
    import pytest

    from npkit.xscale.core import XScaleCore, XScaleError
    from npkit.xscale.gdbstub import GdbStub

    for port in (-1, 0, 70000):  # bind() raised OverflowError: a traceback of `npk xscale run --gdb 70000`
        with pytest.raises(XScaleError, match="a TCP port is 1..65535"):
            GdbStub(XScaleCore(xscale_built, []), port)
    r = CliRunner().invoke(main, ["xscale", "run", str(xscale_built), "--gdb", "70000"])
    assert r.exit_code == 2 and "70000 is not in the range 1<=x<=65535" in r.output, r.output
    src = tmp_path / "ok.c"
    src.write_text("int main(void) { return 0; }\n")
    r = CliRunner().invoke(main, ["xscale", "build", str(src), "-o", str(src)])
    assert r.exit_code == 2 and "-o is also the input SOURCES" in r.output and src.read_text().startswith("int main")
    r = CliRunner().invoke(main, ["xscale", "build", str(src), "-o", str(tmp_path / "no" / "ok.elf")])
    assert r.exit_code == 1 and "No such file or directory" in r.output and not (tmp_path / "no").exists()
