"""`npk route`: build the lookup's SRAM image, look addresses up, show table figures."""

from __future__ import annotations

import json
from typing import Any

import click

from .loader import RouteFileError, RouterTables, build_from_files, ip, ip_str
from .stats import probe_addresses, read_figures
from .walk import CountingReader, walk

_CONFIG = click.option(
    "--config", "config", type=click.Path(exists=True, dir_okay=False),
    help="Router YAML (ports, arp), e.g. examples/traffic/router.yaml.",
)


def _load(routes: str, config: str | None) -> RouterTables:
    try:
        return build_from_files(routes, config)
    except (RouteFileError, MemoryError) as exc:
        raise click.ClickException(str(exc)) from None


@click.group("route")
def route() -> None:
    """Longest-prefix-match tables in SRAM (layout: microcode/lookup/LAYOUT.md)."""


@route.command("build")
@click.argument("routes", type=click.Path(exists=True, dir_okay=False))
@_CONFIG
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="SRAM image file to write.")
@click.option("--json", "as_json", is_flag=True,
              help="Write the image as JSON runs instead of the binary format.")
def build_cmd(routes: str, config: str | None, output: str, as_json: bool) -> None:
    """Build the SRAM image (trie + next-hop table) for ROUTES."""
    from npkit.asm.base.writing import OutputError, write_output
    from npkit.toolchain.commands.outputs import refuse_overwrite_usage

    from . import sramfile

    refuse_overwrite_usage([("-o", output)], [("ROUTES", routes), ("--config", config)])
    tables = _load(routes, config)
    stats = tables.table.stats()
    if as_json:
        meta = {"routes": stats["routes"], "nexthops": len(tables.nexthops)}
        data = sramfile.to_json(tables.image, meta).encode()
    else:
        data = sramfile.to_bytes(tables.image)
    try:
        write_output(output, data)
    except OutputError as e:
        raise click.ClickException(str(e)) from None
    click.echo(
        f"{output}: {stats['routes']} routes, {len(tables.nexthops)} next hops, "
        f"{stats['nodes']} nodes, {stats['trie_bytes']} trie bytes, "
        f"{len(tables.image)} longwords",
        err=True,
    )


@route.command("cache")
@click.argument("routes", type=click.Path(exists=True, dir_okay=False))
@_CONFIG
@click.option("--bits", "bits", type=click.IntRange(1, 8), default=7, show_default=True,
              help="K index bits: 2^K sets (the layouts' rings leave room for K <= 7).")
@click.option("--choice", type=click.Choice(["greedy", "top"]), default="greedy", show_default=True,
              help="The index bits: the paper's greedy choice or the K top bits.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cache_cmd(routes: str, config: str | None, bits: int, choice: str, as_json: bool) -> None:
    """Panama's aggregate route cache for ROUTES (layout parameter lookup=range_cache):
    the index bits, merged ranges, and on fresh sample destinations (one random address
    a route) the hit rate and the lookup's dependent memory references with and without it."""
    from .range_cache import build, evaluate, image_runs, sample_destinations

    tables = _load(routes, config)
    runs = image_runs(tables.image)
    pairs = [(p, n) for p, n, _ in tables.table.routes()]
    cache = build(runs, pairs, bits, choice)
    out = {**cache.meta(), **evaluate(cache, runs, sample_destinations(pairs, seed=2))}
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['sets']} sets on address bits {out['index_bits']} ({choice}); {out['ranges_total']} merged "
               f"ranges over the partitions (at most {out['ranges_max']} in one)")  # fmt: skip
    click.echo(f"hit rate {100 * out['hit_rate']:.1f} % of {out['destinations']} sample destinations; SRAM reads "
               f"a lookup {out['trie_sram_reads']} (trie) -> {out['cached_sram_reads']} + 1 scratch read (cache)")  # fmt: skip


@route.command("lookup")
@click.argument("routes", type=click.Path(exists=True, dir_okay=False))
@click.argument("addrs", nargs=-1, required=True)
@_CONFIG
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def lookup_cmd(routes: str, addrs: tuple[str, ...], config: str | None, as_json: bool) -> None:
    """Walk the SRAM trie for each ADDR: next hop, port, SRAM reads."""
    tables = _load(routes, config)
    results: list[dict[str, Any]] = []
    for text in addrs:
        try:
            addr = ip(text)
        except RouteFileError as exc:
            raise click.BadParameter(str(exc), param_hint="ADDR") from None
        reader = CountingReader(tables.image.read)
        index, reads = walk(reader, addr, tables.table.layout)
        match = tables.table.match_reference(addr)
        results.append({
            "addr": ip_str(addr),
            "route": f"{ip_str(match[0])}/{match[1]}" if match else None,
            **tables.describe(index),
            "sram_reads": reads,
            "read_longwords": reader.sizes,
        })
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for r in results:
        flags = ",".join(r["flags"]) or "-"
        click.echo(
            f"{r['addr']:15s} route {r['route'] or '-':18s} nh#{r['index']:<5d} "
            f"via {r['next_hop']:15s} port {r['port']} mac {r['dst_mac']} flags {flags} "
            f"reads {r['sram_reads']}"
        )


_SOCKET = click.option("--socket", "socket", required=True, type=click.Path(dir_okay=False),
                       help="The running daemon's control socket (npk run ... --control-socket PATH).")


def _ask(socket: str, command: str) -> list[str]:
    from npkit.toolchain.system.control import ControlSocketError, control_request

    try:
        return control_request(socket, command)
    except ControlSocketError as e:
        raise click.ClickException(str(e)) from None


@route.command("add")
@click.argument("route_words", nargs=-1, required=True, metavar="PREFIX/LEN via NEXTHOP [port P] | PREFIX/LEN dev P")
@_SOCKET
def add_cmd(route_words: tuple[str, ...], socket: str) -> None:
    """Add (or replace) a route in a running router's control daemon."""
    _ask(socket, "add " + " ".join(route_words))
    click.echo("ok")


@route.command("del")
@click.argument("prefix")
@_SOCKET
def del_cmd(prefix: str, socket: str) -> None:
    """Withdraw a route from a running router's control daemon."""
    _ask(socket, f"del {prefix}")
    click.echo("ok")


@route.command("show")
@click.argument("address", required=False)
@_SOCKET
def show_cmd(address: str | None, socket: str) -> None:
    """The daemon's routes, or the one ADDRESS matches (and what the fast path answers)."""
    for line in _ask(socket, "show" + (f" {address}" if address else "")):
        click.echo(line)


@route.command("restart")
@_SOCKET
def restart_cmd(socket: str) -> None:
    """Restart the daemon: it persists its table, exits, and is started again (routes
    kept, ARP learnt again)."""
    _ask(socket, "restart")
    click.echo("ok: restarting")


@route.command("stats")
@click.argument("routes", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option("--socket", "socket", default=None, type=click.Path(dir_okay=False),
              help="Instead of a route file: the running daemon's statistics through its control socket.")
@_CONFIG
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def stats_cmd(routes: str | None, socket: str | None, config: str | None, as_json: bool) -> None:
    """Nodes, bytes and SRAM reads per lookup of ROUTES (over one address per route + 10k
    random); with --socket the running control daemon's statistics (per exception reason,
    ICMP sent, suppressed by the rate limit, ARP replies and requests, held, dropped)."""
    if socket is not None:
        if routes is not None:
            raise click.UsageError("give ROUTES or --socket, not both")
        pairs = [line.split(" ", 1) for line in _ask(socket, "stats")]
        data = {k: int(v) if v.isdigit() else v for k, v in pairs}
        if as_json:
            click.echo(json.dumps(data, indent=2))
        else:
            for k, v in data.items():
                click.echo(f"{k:28s} {v}")
        return
    if routes is None:
        raise click.UsageError("give a route file ROUTES (or --socket PATH of a running daemon)")
    tables = _load(routes, config)
    figures: dict[str, Any] = dict(tables.table.stats())
    figures["nexthops"] = len(tables.nexthops)
    figures["nexthop_bytes"] = 16 * len(tables.nexthops)
    figures.update(read_figures(tables.image, probe_addresses(tables.table, seed=0),
                                tables.table.layout))
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        click.echo(f"{key:24s} {value:.3f}" if isinstance(value, float) else f"{key:24s} {value}")
