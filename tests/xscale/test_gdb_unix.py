"""The XScale GDB stub on a Unix socket (mode 0600, what gdb's `target remote PATH`
opens), and one client only: a second one is refused, not accepted and left unanswered."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.xscale.core import XScaleCore, XScaleError
from npkit.xscale.gdbstub import GdbStub

from .conftest import ROOT

DEMO_C = ROOT / "examples" / "xscale" / "xs_demo.c"


def _attached(stub: GdbStub, family: int, address: object) -> socket.socket:
    """Connect a first client while the stub waits for it (as gdb does)."""
    t = threading.Thread(target=stub.wait_for_client)
    t.start()
    first = socket.socket(family, socket.SOCK_STREAM)
    first.connect(address)
    t.join(timeout=30)
    assert not t.is_alive() and stub.conn is not None
    return first


def test_unix_socket_is_its_owners_only_and_takes_one_client(xscale_built: Path, tmp_path: Path) -> None:
    path = tmp_path / "xs.gdb"
    stub = GdbStub(XScaleCore(xscale_built, []), f"unix:{path}")
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        first = _attached(stub, socket.AF_UNIX, str(path))
        with first, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as second:
            with pytest.raises(ConnectionRefusedError):
                second.connect(str(path))
    finally:
        stub.close()
    assert not path.exists()  # nothing left behind


def test_tcp_second_client_is_refused(xscale_built: Path) -> None:
    stub = GdbStub(XScaleCore(xscale_built, []), _free_port())
    try:
        port = stub.server.getsockname()[1]  # type: ignore[union-attr]
        first = _attached(stub, socket.AF_INET, ("127.0.0.1", port))
        with first, socket.socket() as second:
            with pytest.raises(ConnectionRefusedError):
                second.connect(("127.0.0.1", port))
    finally:
        stub.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bad_unix_addresses_are_clear_errors(xscale_built: Path, tmp_path: Path) -> None:
    core = XScaleCore(xscale_built, [])
    plain = tmp_path / "notes.txt"
    plain.write_text("mine")
    with pytest.raises(XScaleError, match="exists and is not a socket"):
        GdbStub(core, f"unix:{plain}")
    assert plain.read_text() == "mine"  # not replaced
    with pytest.raises(XScaleError, match="at most 107 bytes"):
        GdbStub(core, "unix:/" + "d" * 200)
    with pytest.raises(XScaleError, match="cannot listen for gdb on unix:.*No such file or directory"):
        GdbStub(core, f"unix:{tmp_path / 'no' / 'xs.gdb'}")
    stale = tmp_path / "stale.gdb"  # a socket nobody listens on any more: replaced
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    GdbStub(core, f"unix:{stale}").close()
    r = CliRunner().invoke(main, ["xscale", "run", str(xscale_built), "--gdb", "unix:"])
    assert r.exit_code == 2 and "unix: needs a path" in r.output, r.output
    r = CliRunner().invoke(main, ["xscale", "run", str(xscale_built), "--gdb", "localhost"])
    assert r.exit_code == 2 and "unix:PATH (a Unix socket) or a TCP port" in r.output, r.output
    r = CliRunner().invoke(main, ["xscale", "run", str(xscale_built), "--gdb", f"unix:{plain}"])
    assert r.exit_code == 1 and "exists and is not a socket" in r.output, r.output


def test_gdb_attaches_through_the_unix_socket(xscale_built: Path, me_image: Path, tmp_path: Path) -> None:
    line = next(i for i, t in enumerate(DEMO_C.read_text().splitlines(), 1) if "answer = request * 2 + 1" in t)
    path = tmp_path / "xs.gdb"
    npk = str(Path(sys.executable).parent / "npk")
    emu = subprocess.Popen([npk, "run", str(me_image), "--xscale", str(xscale_built), "--xscale-gdb", f"unix:{path}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert emu.stderr is not None
        assert f"waiting for gdb on unix:{path}" in emu.stderr.readline()  # listening now
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        gdb = subprocess.run(["gdb-multiarch", "-batch", "-nx", str(xscale_built),
                              "-ex", f"target remote {path}", "-ex", f"break xs_demo.c:{line}",
                              "-ex", "continue", "-ex", "print request", "-ex", "continue"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        out, _err = emu.communicate(timeout=60)
    finally:
        if emu.poll() is None:
            emu.kill()
            emu.communicate()
    assert f"xs_demo.c:{line}" in gdb.stdout, gdb.stdout + gdb.stderr
    assert "$1 = 41" in gdb.stdout
    assert "answer 83 sent" in out and emu.returncode == 0
    assert not path.exists()
