"""A GDB remote-serial-protocol stub on the Unicorn XScale core, listening on a Unix
socket of mode 0600 (only its owner can attach) or on TCP bound to 127.0.0.1 only, where
any local user can (PyPI udbserver 0.3.0 always listens on 0.0.0.0, so npkit has its own).
One client at a time: once gdb attached, other clients are refused.

    npk run me.elf --xscale xs_demo.elf --xscale-gdb unix:/tmp/xs.gdb &
    gdb-multiarch xscale/build/arm/xs_demo.elf -ex "target remote /tmp/xs.gdb"

The program stops at its entry point until gdb continues.  Supported: registers
(r0-r15, cpsr; target description sent), memory read/write, software and
hardware breakpoints (a Unicorn code hook on the address), continue, step,
Ctrl-C, detach, kill.  While gdb holds the core stopped, emulated time stands
still (the chip is not advanced).  Single steps and breakpoints do not change
the program's results; the instruction count while debugging may differ.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path
from typing import Any

from unicorn import UC_HOOK_CODE, UcError
from unicorn import arm_const as A

from .core import XScaleCore, XScaleError
from .gdb_address import UNIX_PREFIX

TARGET_XML = """<?xml version="1.0"?>
<!DOCTYPE target SYSTEM "gdb-target.dtd">
<target version="1.0"><architecture>arm</architecture>
<feature name="org.gnu.gdb.arm.core">
""" + "".join(f'<reg name="r{i}" bitsize="32" type="uint32"/>\n' for i in range(13)) + """<reg name="sp" bitsize="32" type="data_ptr"/>
<reg name="lr" bitsize="32"/>
<reg name="pc" bitsize="32" type="code_ptr"/>
<reg name="cpsr" bitsize="32" regnum="25"/>
</feature></target>
"""  # fmt: skip
REGS = [A.UC_ARM_REG_R0 + i for i in range(13)] + [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_PC]


UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


def _listen_unix(path: Path) -> socket.socket:
    """A Unix socket at `path`, mode 0600 from its creation (umask), for its owner only.
    A stale socket left there (nobody listening) is replaced; anything else is refused."""
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        raise XScaleError(f"gdb socket {path}: a Unix socket path is at most {UNIX_PATH_MAX} bytes")
    if path.is_symlink() or path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise XScaleError(f"gdb socket {path}: exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(str(path)) == 0:
                raise XScaleError(f"gdb socket {path}: another program listens there")
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(str(path))
    except OSError as e:
        server.close()
        raise XScaleError(f"cannot listen for gdb on unix:{path}: {e.strerror}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return server


def _listen_tcp(host: str, port: int) -> socket.socket:
    if not 1 <= port <= 65535:
        raise XScaleError(f"gdb port {port}: a TCP port is 1..65535")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host, port))
    except OSError as e:
        server.close()
        raise XScaleError(f"cannot listen for gdb on {host}:{port}: {e.strerror}") from None
    return server


class GdbStub:
    """`where`: a TCP port on `host`, or "unix:PATH" (npkit.xscale.gdb_address).  One
    client: once gdb is attached the listening socket is closed, so a second client is
    refused (ECONNREFUSED) rather than accepted and never answered."""

    def __init__(self, core: XScaleCore, where: int | str, host: str = "127.0.0.1") -> None:
        self.core = core
        self.port = where
        self.path: Path | None = None
        if isinstance(where, str):
            if not where.startswith(UNIX_PREFIX) or not where[len(UNIX_PREFIX):]:
                raise XScaleError(f"gdb address {where!r}: unix:PATH or a TCP port")
            self.path = Path(where[len(UNIX_PREFIX):])
            self.server: socket.socket | None = _listen_unix(self.path)
            self.where = f"unix:{self.path}"
        else:
            self.server = _listen_tcp(host, where)
            self.where = f"{host}:{where}"
        self.server.listen(1)
        self.conn: socket.socket | None = None
        self.breakpoints: dict[int, int] = {}   # address -> hook handle
        self.skip_once: int | None = None
        self.buf = b""
        self.reported_exit = False

    # ---- connection ----------------------------------------------------------------
    def wait_for_client(self) -> None:
        import sys

        assert self.server is not None
        print(f"xscale: waiting for gdb on {self.where}", file=sys.stderr, flush=True)
        self.conn, _addr = self.server.accept()
        self.server.close()  # one client: a second one is refused, not left unanswered
        self.server = None
        self.core.state = "stopped"

    def close(self) -> None:
        for s in (self.conn, self.server):
            if s is not None:
                s.close()
        self.conn = self.server = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

    def _send(self, payload: str) -> None:
        if self.conn is None:
            return
        data = payload.encode()
        self.conn.sendall(b"$" + data + b"#" + f"{sum(data) & 0xFF:02x}".encode())

    def _packet(self) -> str | None:
        """Next packet (acknowledged); '\\x03' for an interrupt; None when gdb left."""
        assert self.conn is not None
        while True:
            if self.buf[:1] == b"\x03":
                self.buf = self.buf[1:]
                return "\x03"
            start = self.buf.find(b"$")
            end = self.buf.find(b"#", start)
            if start >= 0 and end >= 0 and len(self.buf) >= end + 3:
                body = self.buf[start + 1 : end]
                self.buf = self.buf[end + 3 :]
                self.conn.sendall(b"+")
                return body.decode(errors="replace")
            if start < 0 and b"\x03" not in self.buf:
                self.buf = b""
            chunk = self.conn.recv(4096)
            if not chunk:
                return None
            self.buf += chunk

    # ---- run-loop interface --------------------------------------------------------
    def poll(self, host: Any) -> None:
        """Between quanta: report an exit, honour Ctrl-C, serve a stopped core."""
        core = self.core
        if self.conn is None:
            return
        if core.state in ("exited", "crashed") and not self.reported_exit:
            self.reported_exit = True
            self._send(f"W{(core.exit_code or 0) & 0xFF:02x}")
            return
        if core.state == "running":
            self.conn.setblocking(False)
            try:
                data = self.conn.recv(4096)
                if data == b"":
                    self.close()
                    return
                self.buf += data
            except BlockingIOError:
                pass
            finally:
                if self.conn is not None:
                    self.conn.setblocking(True)
            if b"\x03" in self.buf:
                self.buf = self.buf.replace(b"\x03", b"")
                core.state = "stopped"
                self._send("S02")
        if core.state == "stopped":
            self.serve()

    def stopped(self, host: Any) -> None:
        """The core stopped at a breakpoint: tell gdb and serve it."""
        self._send("S05")
        self.serve()

    def _on_code(self, uc: Any, address: int, size: int, _user: Any) -> None:
        if self.skip_once == address:
            self.skip_once = None
            return
        if address in self.breakpoints and self.core.state == "running":
            self.core.state = "stopped"
            uc.emu_stop()

    # ---- commands ------------------------------------------------------------------------
    def serve(self) -> None:
        """Answer gdb until it continues, steps, detaches or kills."""
        core = self.core
        while self.conn is not None and core.state == "stopped":
            pkt = self._packet()
            if pkt is None:
                self.close()
                core.state = "running"
                return
            reply = self._command(pkt)
            if reply is not None:
                self._send(reply)

    def _command(self, pkt: str) -> str | None:
        core, uc = self.core, self.core.uc
        c = pkt[:1]
        if pkt == "?":
            return "S05"
        if pkt.startswith("qSupported"):
            return "PacketSize=4000;qXfer:features:read+"
        if pkt.startswith("qXfer:features:read:target.xml:"):
            off, ln = (int(x, 16) for x in pkt.rsplit(":", 1)[1].split(","))
            chunk = TARGET_XML[off : off + ln]
            return ("l" if off + ln >= len(TARGET_XML) else "m") + chunk
        if pkt == "qAttached":
            return "1"
        if pkt == "qfThreadInfo":
            return "m1"
        if pkt == "qsThreadInfo":
            return "l"
        if pkt == "qC":
            return "QC1"
        if pkt.startswith("qSymbol"):
            return "OK"
        if c in ("H", "T"):
            return "OK"
        if c == "g":
            vals = [int(uc.reg_read(r)) for r in REGS] + [int(uc.reg_read(A.UC_ARM_REG_CPSR))]
            return struct.pack("<17I", *vals).hex()
        if c == "G":
            vals = struct.unpack("<17I", bytes.fromhex(pkt[1:1 + 136]))
            for r, v in zip(REGS, vals[:16], strict=True):
                uc.reg_write(r, v)
            return "OK"
        if c == "p":
            n = int(pkt[1:], 16)
            rid = REGS[n] if n < 16 else A.UC_ARM_REG_CPSR if n == 25 else None
            return "00000000" if rid is None else struct.pack("<I", int(uc.reg_read(rid))).hex()
        if c == "P":
            n, v = pkt[1:].split("=")
            idx = int(n, 16)
            if idx < 16:
                uc.reg_write(REGS[idx], struct.unpack("<I", bytes.fromhex(v))[0])
            return "OK"
        if c == "m":
            addr, ln = (int(x, 16) for x in pkt[1:].split(","))
            try:
                return bytes(uc.mem_read(addr, ln)).hex()
            except UcError:
                return "E01"
        if c == "M":
            head, data = pkt[1:].split(":", 1)
            addr = int(head.split(",")[0], 16)
            try:
                uc.mem_write(addr, bytes.fromhex(data))
            except UcError:
                return "E01"
            return "OK"
        if c in ("Z", "z") and pkt[1:2] in ("0", "1"):
            addr = int(pkt.split(",")[1], 16)
            if c == "Z" and addr not in self.breakpoints:
                self.breakpoints[addr] = uc.hook_add(UC_HOOK_CODE, self._on_code, None, addr, addr)
            elif c == "z" and addr in self.breakpoints:
                uc.hook_del(self.breakpoints.pop(addr))
            return "OK"
        if c == "c":
            self.skip_once = core.pc
            core.state = "running"
            return None
        if c == "s":
            self.skip_once = core.pc
            try:
                uc.emu_start(core.pc, 1, count=1)
            except UcError as e:
                return f"E{e.errno & 0xFF:02x}"
            core.instructions += 1
            return "S05" if core.state in ("stopped", "running") else f"W{(core.exit_code or 0) & 0xFF:02x}"
        if c == "D":
            self._send("OK")
            self.close()
            core.state = "running"
            return None
        if c == "k" or pkt.startswith("vKill"):
            self._send("OK") if pkt.startswith("vKill") else None
            core.exit(137)
            self.reported_exit = True
            self.close()
            return None
        return ""
