"""`npk run`: load an image on the emulated chip, run it, print statistics."""

from __future__ import annotations

import json
from typing import Any

import click

from .binding import Chip, EmulatorError
from .loader import LoadError, load_path


def parse_me_list(text: str | None) -> list[int] | None:
    """'0,2-4' -> [0, 2, 3, 4]; empty -> None (the image's own assignment)."""
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def _summary(chip: Chip, reason: str, loaded: dict[int, str]) -> dict[str, Any]:
    st = chip.stats()
    cycle = st["cycle"]
    mes = []
    for m in st["mes"]:
        if m["me"] not in loaded:
            continue
        info = chip.me_status(m["me"])
        busy = m["executing_cycles"] + m["aborted_cycles"] + m["stalled_cycles"]
        mes.append({**{k: v for k, v in m.items() if k != "ctx"}, "program": loaded[m["me"]],
                    "utilization": busy / cycle if cycle else 0.0, "pc": info["pc"],
                    "reason": info["reason"]})  # fmt: skip
    units = {name: [c for c in chans] for name, chans in st["units"].items() if any(c["commands"] for c in chans)}
    clock = float(chip.config["clock_mhz"])
    return {"config": st["config"], "stop": reason, "cycle": cycle, "time_us": cycle / clock,
            "mes": mes, "units": units, "faults": chip.faults()}  # fmt: skip


def fault_warnings(faults: dict[str, Any], limit: int = 8) -> list[str]:
    """Warning lines for Chip.faults(): the totals by kind, then each distinct
    (kind, ME, PC) among the last faults kept."""
    if not faults["total"]:
        return []
    kinds = ", ".join(f"{k} {n}" for k, n in faults["counts"].items())
    lines = [f"warning: {faults['total']} fault(s) ({kinds})"]
    sites: dict[tuple[str, int, int], dict[str, Any]] = {}
    for f in faults["last"]:
        sites.setdefault((f["kind"], f["me"], f["pc"]), f)
    for (kind, me, pc), f in list(sites.items())[-limit:]:
        who = f"ME {me} ctx {f['ctx']} pc {pc}" if me >= 0 else "API call"
        lines.append(f"warning:   {kind} at {who}: address 0x{f['address']:x} (cycle {f['cycle']})")
    return lines


@click.command("run")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("--config", "config", default="ixp2800", show_default=True, help="Chip config name or YAML path.")
@click.option("--cycles", default=1_000_000, show_default=True, type=int, help="Cycle budget.")
@click.option("--me", "me_list", default=None, help="MEs to load on, e.g. 0,1 or 0-3.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--traffic", "traffic", default=None, type=click.Path(exists=True),
              help="Traffic spec (YAML) or directory of port<N>.pcap to feed through the MSF.")
@click.option("--capture", "capture", default=None, type=click.Path(file_okay=False),
              help="Write transmitted frames (port<N>.pcap) and dispositions.json here.")
@click.option("--duration-ms", "duration_ms", default=1.0, show_default=True, type=float,
              help="With --traffic: emulated time to offer traffic for.")
@click.option("--drain-us", "drain_us", default=20.0, show_default=True, type=float,
              help="With --traffic: extra emulated time after the last arrival, to let packets leave.")
def run_cmd(image: str, config: str, cycles: int, me_list: str | None, as_json: bool, traffic: str | None,
            capture: str | None, duration_ms: float, drain_us: float) -> None:
    """Run IMAGE on the emulated chip and print statistics.

    With --traffic, packets go in through the MSF for --duration-ms of emulated
    time (then --drain-us more without arrivals); the per-port table and the
    conservation totals are printed, and a run that does not balance exits 1."""
    if traffic is not None:
        _run_traffic(image, config, me_list, as_json, traffic, capture, duration_ms, drain_us)
        return
    try:
        chip = Chip(config)
        loaded = load_path(chip, image, parse_me_list(me_list))
        reason = chip.run(cycles)
    except (EmulatorError, LoadError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    out = _summary(chip, reason, loaded)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['config']}: stopped ({reason}) at cycle {out['cycle']} ({out['time_us']:.2f} us)")
    for m in out["mes"]:
        click.echo(f"  ME {m['me']:2d} {m['program']:<16s} {m['status']:<8s} instr {m['instructions']:>10d} "
                   f"util {m['utilization'] * 100:5.1f}%  swaps {m['ctx_swaps']:>8d}  pc {m['pc']}"
                   + (f"  ({m['reason']})" if m["status"] not in ("running", "idle") else ""))  # fmt: skip
    for name, chans in out["units"].items():
        for i, c in enumerate(chans):
            click.echo(f"  {name}[{i}] commands {c['commands']:>8d} bytes {c['bytes']:>10d} "
                       f"util {c['utilization'] * 100:5.1f}% queue max {c['queue_max']} mean {c['queue_mean']:.2f}")  # fmt: skip
    for line in fault_warnings(out["faults"]):
        click.echo(line, err=True)


def _run_traffic(image: str, config: str, me_list: str | None, as_json: bool, traffic: str,
                 capture: str | None, duration_ms: float, drain_us: float) -> None:
    import sys

    from .msf import MsfError, TrafficRun, format_report, load_traffic_source

    duration_ns = int(duration_ms * 1e6)
    try:
        chip = Chip(config)
        loaded = load_path(chip, image, parse_me_list(me_list))
        source = load_traffic_source(traffic, duration_ns=duration_ns)
        run = TrafficRun(chip, source)

        def progress(t_ns: int) -> None:
            if not as_json and sys.stderr.isatty():
                print(f"\r  {t_ns / 1e6:8.3f} ms emulated", end="", file=sys.stderr, flush=True)

        reason = run.run(duration_ns + int(drain_us * 1000), progress=progress)
        if not as_json and sys.stderr.isatty():
            print(file=sys.stderr)
        rep = run.report()
        if capture:
            run.write_captures(capture, rep)
    except (EmulatorError, LoadError, MsfError, ValueError, OSError) as e:
        raise click.ClickException(str(e)) from None
    summary = _summary(chip, reason, loaded)
    rep_out = {k: v for k, v in rep.items() if k != "fates"}
    pkts = rep["totals"]["offered"]
    rep_out["packets_per_host_s"] = round(pkts / rep["host_s"]) if rep["host_s"] else None
    if as_json:
        click.echo(json.dumps({**summary, "traffic": str(traffic), "capture": capture, "msf": rep_out}, indent=2))
    else:
        click.echo(f"{summary['config']}: {len(source)} packets from {traffic}, {rep['time_ns'] / 1e6:.3f} ms emulated "
                   f"({summary['cycle']} cycles) in {rep['host_s']:.2f} s host"
                   + (f", {rep_out['packets_per_host_s']} packets per host second" if pkts else ""))  # fmt: skip
        click.echo(format_report(rep))
        for line in fault_warnings(summary["faults"]):
            click.echo(line, err=True)
        if capture:
            click.echo(f"captures: {capture}/port<N>.pcap, {capture}/dispositions.json")
    if not rep["balanced"]:
        click.echo("error: packet conservation does not balance: " + "; ".join(rep["problems"]), err=True)
        raise SystemExit(1)
