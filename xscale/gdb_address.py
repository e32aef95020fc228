"""Where the XScale GDB stub listens, as the command line says it:

    unix:PATH   a Unix socket at PATH, mode 0600 (only its owner connects): the default
                to use -- `target remote PATH` in gdb
    PORT        TCP on 127.0.0.1:PORT (any local user can connect)

`GDB_ADDRESS` is the Click type of `--xscale-gdb` / `--gdb`: an int (a TCP port) or the
string "unix:PATH", as npkit.xscale.gdbstub.GdbStub takes it.
"""

from __future__ import annotations

from typing import Any

import click

UNIX_PREFIX = "unix:"
PORTS = click.IntRange(1, 65535)


class GdbAddress(click.ParamType):
    name = "unix:PATH|PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int):
            return int(PORTS.convert(value, param, ctx))
        text = str(value)
        if text.startswith(UNIX_PREFIX):
            if not text[len(UNIX_PREFIX):]:
                self.fail("unix: needs a path (unix:/path/to/socket)", param, ctx)
            return text
        if not text.lstrip("-").isdigit():
            self.fail(f"{text!r}: unix:PATH (a Unix socket) or a TCP port", param, ctx)
        return int(PORTS.convert(text, param, ctx))


GDB_ADDRESS = GdbAddress()
GDB_HELP = ("unix:PATH: a Unix socket only you can open (gdb: target remote PATH); "
            "PORT: TCP on 127.0.0.1:PORT, open to every local user")  # fmt: skip
