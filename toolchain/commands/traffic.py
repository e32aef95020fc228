"""`npk traffic ...`: generate, inspect, predict and compare packet traffic.

A thin Click layer: every command's work is a library call, and every command that
yields data prints it as JSON with --json. Library errors become one-line messages.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from npkit.asm.base.writing import OutputError, make_dir, write_output
from npkit.emulator.traffic.compare import ControlPlaneAnswered, compare_dirs, predict
from npkit.emulator.traffic.dataset import (
    DatasetError,
    load_manifest,
    load_traffic,
    port_pcaps,
    write_dispositions,
)
from npkit.emulator.traffic.oracle import Forward
from npkit.emulator.traffic.packet import ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_VLAN
from npkit.emulator.traffic.pcap import PcapError, PcapWriter, read_pcap
from npkit.emulator.traffic.reasons import ReasonError, load_reasons
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.routes import MAX_RANDOM_ROUTES, RouteError, parse_route_columns
from npkit.emulator.traffic.spec import SpecError, WireModel, load_spec
from npkit.emulator.traffic.spec_forms import MAX_SEED
from npkit.toolchain.commands.outputs import refuse_overwrite_usage

ERRORS = (SpecError, ConfigError, RouteError, PcapError, DatasetError, ReasonError, OutputError, OSError)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except ERRORS as exc:
        raise click.ClickException(str(exc)) from None


def _emit(data: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    click.echo(json.dumps(data, indent=2) if as_json else text(data))


@click.group("traffic")
def traffic() -> None:
    """Packet traffic: generate pcaps, route tables, oracle predictions, comparisons."""


# ---------------------------------------------------------------------------- gen


@traffic.command("gen")
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--out", "outdir", required=True, type=click.Path(path_type=Path),
              help="Directory for port<N>.pcap and manifest.json.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), help="Override the spec's seed.")
@click.option("--count", type=int, help="Override: packets per port.")
@click.option("--duration-ns", type=int, help="Override: generate arrivals before this time.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def gen_cmd(spec: Path, outdir: Path, seed: int | None, count: int | None,
            duration_ns: int | None, as_json: bool) -> None:
    """Generate traffic from SPEC (YAML) into OUT: one pcap per port plus a manifest."""
    from npkit.emulator.traffic.generator import write_traffic

    with _errors():
        loaded = load_spec(spec, {"seed": seed, "count": count, "duration_ns": duration_ns})
        summary = write_traffic(loaded, outdir, progress=_progress("generating"))
    _emit(summary, as_json, _gen_text)


def _progress(label: str) -> Callable[[int, int], None] | None:
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        click.echo(f"\r{label}: {done}/{total} packets", err=True, nl=False)
        if done + 65536 > total:
            click.echo("", err=True)

    return report


def _gen_text(s: dict[str, Any]) -> str:
    lines = [f"{s['packets']} packets -> {s['dir']} (seed {s['seed']}, "
             f"{s['elapsed_s']} s, {s['packets_per_s']} pkt/s)"]
    for p in s["ports"]:
        gap = f", mean gap {p['mean_gap_ns']:.1f} ns" if "mean_gap_ns" in p else ""
        lines.append(f"  port {p['port']}: {p['packets']} packets, {p['bytes']} bytes{gap}")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["kinds"].items()))
    lines.append(f"  kinds: {kinds}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- routes


@traffic.command("routes")
@click.option("--count", type=click.IntRange(0, MAX_RANDOM_ROUTES), required=True,
              help=f"Number of routes (at most {MAX_RANDOM_ROUTES:,}: a route file within its size limit).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=1, show_default=True)
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Router config: next hops are its ARP entries on port subnets.")
@click.option("--ports", type=click.IntRange(1, 256), default=5, show_default=True,
              help="Without --config: next hops 10.0.P.2 on ports 0..N-1.")
@click.option("--lengths", type=click.Choice(["default", "bgp"]), default="default", show_default=True,
              help="Prefix-length mix: default (/8../24) or bgp (a global BGP table's, with /28 and /32: "
                   "--count 1000000 --lengths bgp is a full Internet table).")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--json", "as_json", is_flag=True)
def routes_cmd(count: int, seed: int, config: Path | None, ports: int, lengths: str, out: Path,
               as_json: bool) -> None:
    """Write a random route table of COUNT prefixes (deterministic for SEED)."""
    refuse_overwrite_usage([("-o", out)], [("--config", config)])
    with _errors():
        from npkit.toolchain.system.tables import random_routes_text

        text, nhops = random_routes_text(count, seed, config, ports, lengths)
        write_output(out, text)
        hist = dict(sorted(Counter(parse_route_columns(text).length).items()))
    summary = {"file": str(out), "routes": count, "seed": seed,
               "next_hops": nhops, "lengths": hist}
    _emit(summary, as_json, lambda s: (
        f"{s['routes']} routes -> {s['file']}; lengths: "
        + ", ".join(f"/{k}: {v}" for k, v in s["lengths"].items())))


# ---------------------------------------------------------------------------- show


@traffic.command("show")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Also summarise the oracle's outcomes for these packets.")
@click.option("--json", "as_json", is_flag=True)
def show_cmd(path: Path, config: Path | None, as_json: bool) -> None:
    """Summarise a pcap file or a traffic directory (port<N>.pcap + manifest)."""
    with _errors():
        summary = summarise(path, RouterConfig.load(config) if config else None)
    _emit(summary, as_json, _show_text)


def _classify(frame: bytes) -> str:
    if len(frame) < 14:
        return "runt"
    etype = frame[12] << 8 | frame[13]
    if etype == ETHERTYPE_ARP:
        return "arp"
    if etype == ETHERTYPE_VLAN:
        return "vlan"
    if etype != ETHERTYPE_IPV4 or len(frame) < 34:
        return "other"
    return {17: "udp", 6: "tcp", 1: "icmp"}.get(frame[23], "ipv4-other")


def _port_summary(records: list[Any], wire: WireModel) -> dict[str, Any]:
    sizes = [len(r.data) for r in records]
    out: dict[str, Any] = {"packets": len(records), "bytes": sum(sizes)}
    if not records:
        return out
    first, last = records[0].timestamp_ns, records[-1].timestamp_ns
    wire_bytes = sum(wire.wire_bytes(n) for n in sizes)
    out.update(
        first_ns=first, last_ns=last, min_len=min(sizes), max_len=max(sizes),
        mean_len=round(sum(sizes) / len(sizes), 1), wire_bytes=wire_bytes,
        protocols=dict(Counter(_classify(r.data) for r in records).most_common()),
        sizes=dict(Counter(sizes).most_common(5)),
    )
    if len(records) > 1 and last > first:
        # rate over the span from first to last arrival, counting the last packet's
        # share so that back-to-back traffic reads as exactly the link rate
        out["wire_bps"] = round(wire_bytes * 8 * 1e9 / (last - first + wire.wire_bytes(
            sizes[-1]) * 8))
        out["pps"] = round((len(records) - 1) * 1e9 / (last - first))
    return out


def summarise(path: Path, config: RouterConfig | None = None) -> dict[str, Any]:
    if path.is_file():
        records = read_pcap(path)
        return {"file": str(path), **_port_summary(records, WireModel())}
    manifest = load_manifest(path) or {}
    if not manifest and not port_pcaps(path):
        raise DatasetError(f"{path}: no port<N>.pcap files (not a traffic directory)")
    wires = {p["port"]: WireModel(**p["wire"]) for p in manifest.get("ports", []) if "wire" in p}
    ports = {}
    for port, file in port_pcaps(path).items():
        ports[port] = _port_summary(read_pcap(file), wires.get(port, WireModel()))
    out: dict[str, Any] = {"dir": str(path), "ports": ports,
                           "packets": sum(p["packets"] for p in ports.values())}
    if manifest:
        kinds = manifest.get("kinds", [])
        out["seed"] = manifest.get("seed")
        out["kinds"] = {kinds[k]: n for k, n in
                        sorted(Counter(manifest["packets"]["kind"]).items())}
    if config is not None:
        inputs = load_traffic(path)
        outcomes = predict(config, inputs)
        fwd = Counter(o.port for o in outcomes if isinstance(o, Forward))
        out["oracle"] = {
            "forward": sum(fwd.values()),
            "forward_by_port": dict(sorted(fwd.items())),
            "drop": dict(Counter(o.reason for o in outcomes if o.kind == "drop").most_common()),
            "exception": dict(Counter(o.reason for o in outcomes
                                      if o.kind == "exception").most_common()),
        }
    return out


def _show_text(s: dict[str, Any]) -> str:
    def port_line(name: str, p: dict[str, Any]) -> str:
        if not p["packets"]:
            return f"{name}: empty"
        rate = f", {p['wire_bps'] / 1e9:.3f} Gb/s wire, {p['pps']} pkt/s" if "wire_bps" in p else ""
        protos = ", ".join(f"{k} {v}" for k, v in p["protocols"].items())
        return (f"{name}: {p['packets']} packets, {p['bytes']} bytes, len {p['min_len']}.."
                f"{p['max_len']} (mean {p['mean_len']}), {p['first_ns']}..{p['last_ns']} ns"
                f"{rate}; {protos}")

    if "file" in s:
        return port_line(s["file"], s)
    lines = [f"{s['dir']}: {s['packets']} packets"]
    lines += ["  " + port_line(f"port {k}", v) for k, v in s["ports"].items()]
    if "kinds" in s:
        lines.append("  kinds: " + ", ".join(f"{k} {v}" for k, v in s["kinds"].items()))
    if "oracle" in s:
        o = s["oracle"]
        lines.append(f"  oracle: forward {o['forward']} "
                     f"({', '.join(f'port {k}: {v}' for k, v in o['forward_by_port'].items())})")
        for kind in ("drop", "exception"):
            if o[kind]:
                lines.append(f"  oracle {kind}: "
                             + ", ".join(f"{k} {v}" for k, v in o[kind].items()))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- predict


@traffic.command("predict")
@click.argument("in_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True)
@click.option("-o", "--out", "outdir", type=click.Path(file_okay=False, path_type=Path),
              required=True)
@click.option("--json", "as_json", is_flag=True)
def predict_cmd(in_dir: Path, config: Path, outdir: Path, as_json: bool) -> None:
    """Write what the reference router does with IN_DIR's packets, as an emulator would:
    OUT/port<N>.pcap (forwarded, in arrival order) and OUT/dispositions.json."""
    refuse_overwrite_usage([("-o", outdir)], [("IN_DIR", in_dir), ("--config", config)])
    with _errors():
        cfg = RouterConfig.load(config)
        inputs = load_traffic(in_dir)
        outcomes = predict(cfg, inputs)
        make_dir(outdir)
        writers = {p.index: PcapWriter(outdir / f"port{p.index}.pcap") for p in cfg.ports}
        try:
            for pkt, out in zip(inputs, outcomes, strict=True):
                if isinstance(out, Forward):
                    writers[out.port].write(pkt.time_ns, out.data)
        finally:
            for w in writers.values():
                w.close()
        write_dispositions(
            outdir / "dispositions.json",
            [(p.id, o.reason) for p, o in zip(inputs, outcomes, strict=True) if o.kind == "drop"],
            [(p.id, o.reason) for p, o in zip(inputs, outcomes, strict=True)
             if o.kind == "exception"],
        )
    summary = {
        "dir": str(outdir), "inputs": len(inputs),
        "forward": sum(isinstance(o, Forward) for o in outcomes),
        "drop": sum(o.kind == "drop" for o in outcomes),
        "exception": sum(o.kind == "exception" for o in outcomes),
    }
    _emit(summary, as_json, lambda s: (
        f"{s['inputs']} inputs -> {s['dir']}: forward {s['forward']}, drop {s['drop']}, "
        f"exception {s['exception']}"))


# ---------------------------------------------------------------------------- compare


@traffic.command("compare")
@click.argument("in_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="Router config the emulator ran with.")
@click.option("--max", "max_issues", type=int, default=50, show_default=True,
              help="Issues to list (all with --max -1).")
@click.option("--allow-loss", is_flag=True,
              help="Lost packets (resource drops of packets the oracle forwards or excepts) do not fail.")
@click.option("--json", "as_json", is_flag=True)
def compare_cmd(in_dir: Path, out_dir: Path, config: Path, max_issues: int, allow_loss: bool,
                as_json: bool) -> None:
    """Compare the emulator's OUT_DIR (port<N>.pcap, dispositions.json) against the
    oracle's predictions for IN_DIR (the packets the run offered). Exit status 1 on any
    mismatch, or on a lost packet without --allow-loss (categories:
    npkit.emulator.traffic.compare's docstring). The oracle is the fast path's: captures
    of a run whose control daemon answered exceptions (dispositions.json's control_plane)
    exit 2, `npk run`'s own comparison and verdict judged those."""
    with _errors():
        cfg = RouterConfig.load(config)
        try:
            report = compare_dirs(in_dir, out_dir, cfg, allow_loss)
        except ControlPlaneAnswered as exc:
            _refuse(exc, as_json)
    limit = None if max_issues < 0 else max_issues
    if as_json:
        click.echo(json.dumps(report.to_json(limit), indent=2))
    else:
        click.echo(report.render(len(report.issues) if limit is None else limit))
    if not report.ok:
        sys.exit(1)


def _refuse(exc: ControlPlaneAnswered, as_json: bool) -> NoReturn:
    """Exit 2 (not judged: neither a pass nor a mismatch) for captures a control daemon
    answered; with --json the reason is JSON on stdout, as a CI job reads every result."""
    if as_json:
        click.echo(json.dumps({
            "ok": False, "judged": False, "refused": "control_plane_answered", "reason": str(exc),
            "control_plane": exc.record.to_json() if exc.record is not None else None,
        }, indent=2))  # fmt: skip
    else:
        click.echo(f"Error: {exc}", err=True)
    sys.exit(2)


# ---------------------------------------------------------------------------- reasons


@traffic.command("reasons")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--header", is_flag=True, help="Print the C/microcode header (#define lines).")
@click.option("--json", "as_json", is_flag=True)
def reasons_cmd(file: str | None, header: bool, as_json: bool) -> None:
    """Drop and exception reasons (FILE, default microcode/reasons.yaml), checked against
    the schema, in the oracle's order."""
    with _errors():
        reasons = load_reasons(file)
    if header:
        click.echo(reasons.c_header(), nl=False)
        return
    if as_json:
        click.echo(json.dumps(reasons.to_json(), indent=2))
        return
    for r in reasons.in_order():
        click.echo(f"{r.step:3d}. {r.kind:<9} {r.code:3d} {r.name:<26} {r.rule}")
    for r in reasons.drops.values():
        if not r.predicted:
            click.echo(f"   resource  {r.code:3d} {r.name:<26} {r.rule}")
