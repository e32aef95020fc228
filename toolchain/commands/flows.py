"""`npk flow` and `npk plugin`: the flow table and the plugins of a router linked with
`-D classify=flows`, through its running control daemon's socket (docs/flows.md):

    npk run router.elf --control-socket /tmp/npkd.sock &       # or npk demo --control-socket
    npk flow add 198.18.0.1 10.0.1.10 udp 1000 5001 count --socket /tmp/npkd.sock
    npk flow show --socket /tmp/npkd.sock [--json]
    npk flow idle 5000 --socket /tmp/npkd.sock                 # expire entries idle 5 ms
    npk plugin load 2 dscp 10 --socket /tmp/npkd.sock
    npk plugin bind 2 198.18.0.1 10.0.1.10 udp 1000 5001 --socket /tmp/npkd.sock
    npk plugin unload 2 --socket /tmp/npkd.sock

The daemon's answers come back as they are (xscale/npkd/npkd.c flow_cmd, plugin_cmd);
`npkit.toolchain.system.control.control_request` is the library call under them.
"""

from __future__ import annotations

import json
from typing import Any

import click

_SOCKET = click.option("--socket", "socket", required=True, type=click.Path(dir_okay=False),
                       help="The running daemon's control socket (npk run ... --control-socket PATH).")  # fmt: skip
_KEY = "SRC DST PROTO [SPORT DPORT]"


def ask(socket: str, command: str) -> list[str]:
    from npkit.toolchain.system.control import ControlSocketError, control_request

    try:
        return control_request(socket, command)
    except (ControlSocketError, OSError) as e:
        raise click.ClickException(str(e)) from None


def parse_show(lines: list[str]) -> list[dict[str, Any]]:
    """`flow show`'s lines as records."""
    rows = []
    for line in lines:
        w = line.split()
        if len(w) != 11:
            continue
        rows.append({"src": w[0], "dst": w[1], "proto": int(w[2]), "sport": int(w[3]), "dport": int(w[4]),
                     "action": w[5], "arg": int(w[6]), "packets": int(w[8]), "bytes": int(w[10])})  # fmt: skip
    return rows


@click.group("flow")
def flow() -> None:
    """The flow table of a running router (-D classify=flows): add, del, show, idle."""


@flow.command("add")
@click.argument("words", nargs=-1, required=True, metavar=f"{_KEY} count|plugin N")
@_SOCKET
def flow_add(words: tuple[str, ...], socket: str) -> None:
    """Add an exact-match entry: counted, or handed to the plugin in slot N."""
    ask(socket, "flow add " + " ".join(words))
    click.echo("ok")


@flow.command("del")
@click.argument("words", nargs=-1, required=True, metavar=_KEY)
@_SOCKET
def flow_del(words: tuple[str, ...], socket: str) -> None:
    """Delete (expire) an entry: its packets take the route lookup again."""
    ask(socket, "flow del " + " ".join(words))
    click.echo("ok")


@flow.command("idle")
@click.argument("us", type=click.IntRange(0, 60_000_000))
@_SOCKET
def flow_idle(us: int, socket: str) -> None:
    """Expire entries whose packet counter stays still for US microseconds (to twice that);
    0: never (flows.yaml `idle_us` sets it at the daemon's start)."""
    ask(socket, f"flow idle {us}")
    click.echo("ok")


@flow.command("show")
@_SOCKET
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def flow_show(socket: str, as_json: bool) -> None:
    """Every entry with its counters (packets, bytes) as the fast path keeps them."""
    lines = ask(socket, "flow show")
    if as_json:
        click.echo(json.dumps(parse_show(lines), indent=2))
        return
    for line in lines:
        click.echo(line)


@click.group("plugin")
def plugin() -> None:
    """The control daemon's plugins (-D classify=flows): list, load, unload, bind."""


@plugin.command("list")
@_SOCKET
def plugin_list(socket: str) -> None:
    """The plugins the daemon knows, its slots and their counters."""
    for line in ask(socket, "plugin list"):
        click.echo(line)


@plugin.command("load")
@click.argument("slot", type=click.IntRange(1, 15))
@click.argument("name")
@click.argument("args", nargs=-1, type=int)
@_SOCKET
def plugin_load(slot: int, name: str, args: tuple[int, ...], socket: str) -> None:
    """Load plugin NAME into SLOT with up to 4 integer ARGS (replacing what it held)."""
    ask(socket, " ".join(["plugin load", str(slot), name, *map(str, args)]))
    click.echo("ok")


@plugin.command("unload")
@click.argument("slot", type=click.IntRange(1, 15))
@_SOCKET
def plugin_unload(slot: int, socket: str) -> None:
    """Empty SLOT: its flows' packets pass through the daemon unchanged."""
    ask(socket, f"plugin unload {slot}")
    click.echo("ok")


@plugin.command("bind")
@click.argument("slot", type=click.IntRange(1, 15))
@click.argument("words", nargs=-1, required=True, metavar=_KEY)
@_SOCKET
def plugin_bind(slot: int, words: tuple[str, ...], socket: str) -> None:
    """Send FLOW's packets to SLOT's plugin (its entry's action; added if absent)."""
    ask(socket, " ".join(["plugin bind", str(slot), *words]))
    click.echo("ok")
