"""`npk slice`, `npk filter`, `npk finger`: a running SPP's slices, filters and Chord
fingers, through its I3 daemon's control socket (xscale/i3d; docs/spp.md "The GPE and its
I3 daemon").  The daemon listens where the run says: `npk run IMAGE --app
examples/apps/spp --control-socket PATH` of an image linked with the spp_gpe layout."""

from __future__ import annotations

import json
from typing import Any

import click

from npkit.toolchain.system.i3d import ControlSocketError, parse_filter, parse_slice, request

_SOCKET = click.option("--socket", "socket", required=True, type=click.Path(dir_okay=False),
                       help="The I3 daemon's control socket (npk run ... --control-socket PATH).")  # fmt: skip
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _ask(socket: str, command: str) -> list[str]:
    try:
        return request(socket, command)
    except ControlSocketError as e:
        raise click.ClickException(str(e)) from None


def _show(lines: list[str], parse: Any, as_json: bool, one: bool = False) -> None:
    if as_json:
        data = [parse(x) for x in lines]
        click.echo(json.dumps(data[0] if one and data else data, indent=2))
        return
    for line in lines:
        click.echo(line)


# ---- slices -------------------------------------------------------------------------------------------


@click.group("slice")
def slice_cmd() -> None:
    """A running SPP's slices (its I3 daemon's control socket)."""


@slice_cmd.command("show")
@click.argument("slice_name", required=False, metavar="[SLICE]")
@_SOCKET
@_JSON
def slice_show(slice_name: str | None, socket: str, as_json: bool) -> None:
    """Every slice (or SLICE, an id or name): id, name, index, code option, share,
    meta-interfaces (name:index:port:address:udp), filters; an i3 slice's range."""
    _show(_ask(socket, "slice show" + (f" {slice_name}" if slice_name else "")), parse_slice, as_json)


@slice_cmd.command("add")
@click.argument("slice_id", type=int)
@click.argument("name")
@click.argument("code_option", type=click.Choice(["ipv4", "i3"]))
@click.option("--share", type=float, default=None, help="Bandwidth share, 0 < share <= 1.")
@click.option("--index", type=int, default=None, help="Its row (the exception record's slice byte); default: the first free.")
@click.option("--mi", "mis", multiple=True, metavar="NAME:PORT:A.B.C.D:UDP", help="A meta-interface (repeatable).")
@click.option("--node", default=None, help="i3: this router's Chord identifier (0x...).")
@click.option("--pred", default=None, help="i3: its predecessor's; the slice owns (pred, node].")
@_SOCKET
@_JSON
def slice_add(slice_id: int, name: str, code_option: str, share: float | None, index: int | None,
              mis: tuple[str, ...], node: str | None, pred: str | None, socket: str, as_json: bool) -> None:  # fmt: skip
    """Add slice SLICE_ID NAME running CODE_OPTION to the daemon: its meta-interfaces go
    into the meta-interface table in SRAM (the valid word last) and the table's generation
    word is bumped: the spp block copies the table again and demultiplexes the slice from
    its next frame on.  The queue manager's classes are the link's: the slice's index is
    masked into them (docs/spp.md §4.1, §12)."""
    words = ["slice", "add", str(slice_id), name, code_option]
    if share is not None:
        if not 0 < share <= 1:
            raise click.BadParameter("0 < share <= 1", param_hint="--share")
        words += ["share", str(round(share * 1_000_000))]
    if index is not None:
        words += ["index", str(index)]
    for m in mis:
        parts = m.split(":")
        if len(parts) != 4:
            raise click.BadParameter(f"{m}: NAME:PORT:A.B.C.D:UDP", param_hint="--mi")
        words += ["mi", parts[0], parts[1], f"{parts[2]}:{parts[3]}"]
    if (node is None) != (pred is None):
        raise click.UsageError("--node and --pred go together")
    if node is not None:
        words += ["node", node, "pred", str(pred)]
    _show(_ask(socket, " ".join(words)), parse_slice, as_json, one=True)


@slice_cmd.command("del")
@click.argument("slice_name", metavar="SLICE")
@_SOCKET
def slice_del(slice_name: str, socket: str) -> None:
    """Delete SLICE (an id or name; it must have no filters left): its meta-interfaces
    leave the demux first."""
    _ask(socket, f"slice del {slice_name}")
    click.echo("ok")


# ---- filters ------------------------------------------------------------------------------------------


@click.group("filter")
def filter_cmd() -> None:
    """A running SPP's filters: I3 triggers and IPv4 filters in the TCAM (its I3 daemon)."""


@filter_cmd.command("show")
@click.argument("slice_name", required=False, metavar="[SLICE]")
@_SOCKET
@_JSON
def filter_show(slice_name: str | None, socket: str, as_json: bool) -> None:
    """Every filter (or SLICE's): handle, slice, TCAM entry (- the GPE's alone), fields,
    packets the GPE delivered by it."""
    _show(_ask(socket, "filter show" + (f" {slice_name}" if slice_name else "")), parse_filter, as_json)


@filter_cmd.command("add", context_settings={"ignore_unknown_options": True})
@click.argument("slice_name", metavar="SLICE")
@click.argument("fields", nargs=-1, required=True, metavar="FIELD VALUE...")
@_SOCKET
@_JSON
def filter_add(slice_name: str, fields: tuple[str, ...], socket: str, as_json: bool) -> None:
    """Add a filter to SLICE, with the slice file's field names (docs/spp.md §3): i3
    `trigger 0xID[/LEN]`; ipv4 `dst P` `src P` `proto tcp|udp|icmp|N` `dport N` `sport
    N`; both `in MI`, `out MI next_hop A.B.C.D:PORT` or `action gpe|drop`, and `slow`
    (the daemon keeps it, no TCAM filter: its packets take the GPE path).  The TCAM entry
    is written in the safe order (result, key and mask, then valid); an IPv4 filter added
    here comes after (below in priority) the slice file's."""
    _show(_ask(socket, f"filter add {slice_name} " + " ".join(fields)), parse_filter, as_json, one=True)


@filter_cmd.command("del")
@click.argument("handle", type=int)
@_SOCKET
def filter_del(handle: int, socket: str) -> None:
    """Delete filter HANDLE (`filter show` lists them): its TCAM entry invalidated first."""
    _ask(socket, f"filter del {handle}")
    click.echo("ok")


def _target(handle: str | None, slice_name: str | None) -> str:
    if (handle is None) == (slice_name is None):
        raise click.UsageError("give a filter HANDLE or --slice SLICE (every filter of the slice)")
    if handle is not None and not handle.isdigit():
        raise click.BadParameter(f"{handle!r} is not a filter handle (`npk filter show` lists them)", param_hint="HANDLE")
    return handle if handle is not None else f"slice {slice_name}"


@filter_cmd.command("fast")
@click.argument("handle", required=False)
@click.option("--slice", "slice_name", default=None, help="Every filter of this slice (id or name).")
@_SOCKET
def filter_fast(handle: str | None, slice_name: str | None, socket: str) -> None:
    """Put filter HANDLE (or every filter of --slice) into the TCAM: its packets move from
    the GPE path to the fast path."""
    for line in _ask(socket, f"filter fast {_target(handle, slice_name)}"):
        click.echo(line)


@filter_cmd.command("slow")
@click.argument("handle", required=False)
@click.option("--slice", "slice_name", default=None, help="Every filter of this slice (id or name).")
@_SOCKET
def filter_slow(handle: str | None, slice_name: str | None, socket: str) -> None:
    """Take filter HANDLE (or every filter of --slice) out of the TCAM, keep it: its
    packets take the GPE path."""
    for line in _ask(socket, f"filter slow {_target(handle, slice_name)}"):
        click.echo(line)


# ---- fingers ------------------------------------------------------------------------------------------


@click.group("finger")
def finger_cmd() -> None:
    """A running SPP's Chord finger tables (its I3 daemon)."""


@finger_cmd.command("show")
@click.argument("slice_name", metavar="SLICE")
@_SOCKET
def finger_show(slice_name: str, socket: str) -> None:
    """SLICE's range and valid fingers."""
    for line in _ask(socket, f"finger show {slice_name}"):
        click.echo(line)


@finger_cmd.command("set")
@click.argument("slice_name", metavar="SLICE")
@click.argument("k", type=click.IntRange(0, 63))
@click.argument("out", metavar="OUT_MI")
@click.argument("next_hop", metavar="A.B.C.D:PORT")
@click.option("--node", default=None, help="The finger node's identifier (0x...), for the GPE.")
@_SOCKET
def finger_set(slice_name: str, k: int, out: str, next_hop: str, node: str | None, socket: str) -> None:
    """Finger K of SLICE: out of meta-interface OUT_MI to NEXT_HOP (the valid bit last)."""
    _ask(socket, f"finger set {slice_name} {k} {out} {next_hop}" + (f" node {node}" if node else ""))
    click.echo("ok")


@finger_cmd.command("del")
@click.argument("slice_name", metavar="SLICE")
@click.argument("k", type=click.IntRange(0, 63))
@_SOCKET
def finger_del(slice_name: str, k: int, socket: str) -> None:
    """Remove finger K of SLICE (its valid bit cleared first)."""
    _ask(socket, f"finger del {slice_name} {k}")
    click.echo("ok")


@finger_cmd.command("node")
@click.argument("op", type=click.Choice(["add", "del"]))
@click.argument("slice_name", metavar="SLICE")
@click.argument("node_id", metavar="ID")
@click.argument("rest", nargs=-1, metavar="[OUT_MI A.B.C.D:PORT]")
@_SOCKET
def finger_node(op: str, slice_name: str, node_id: str, rest: tuple[str, ...], socket: str) -> None:
    """Chord: another I3 router of SLICE's ring (add ID OUT_MI A.B.C.D:PORT, or del ID);
    the fingers follow (finger k = the successor of node + 2^k among the known nodes), the
    changed ones rewritten."""
    if op == "add" and len(rest) != 2:
        raise click.UsageError("finger node add SLICE ID OUT_MI A.B.C.D:PORT")
    _ask(socket, f"node {op} {slice_name} {node_id} " + " ".join(rest))
    click.echo("ok")
