"""`npk run`: load images on the emulated chip, run them, print what happened.

    npk run prog.elf [--cycles N] [--me 0-3]                  # a plain image
    npk run ping.elf@0 pong.elf@1 --ring scratch:3:base=0x1000,size=128
    npk run prog.elf --traffic spec.yaml [--capture DIR]      # packets through the MSF
    npk run router.elf --traffic spec.yaml --capture DIR      # a linked router: + oracle

Every image goes through the one loader (npkit.emulator.loader), several on one Claims
record: one that would overwrite what --ring or an earlier image holds (an ME, a ring
configured otherwise, a ring's scratch, initialised memory with other bytes) is refused,
exit 1, before any of it is written (README, "npk run" with several images).  With --traffic the
run drains (unless --no-drain) and is judged by npkit.toolchain.system.verdict: a
router image (`npk link`) against the oracle and its own exception path, a plain image
on conservation and loss.  Exit 1 when the verdict fails.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from npkit.emulator.binding import Chip
from npkit.emulator.loader import MeListError, load_images
from npkit.emulator.run_config import ConfigMismatch
from npkit.emulator.traffic_run import (
    TrafficRun,
    TxBins,
    format_report,
    load_traffic_source,
)
from npkit.toolchain.commands.asm import include_option
from npkit.toolchain.debug.profile import fault_site_lines, placement
from npkit.toolchain.debug.target import (
    TargetUsage,
    is_layout,
    router_beside_others,
    sort_defines,
    split_images,
)
from npkit.toolchain.system.layout import LinkError
from npkit.toolchain.system.router_run import (
    SLICE_NS,
    RouterRun,
    format_summary,
    in_flight_report,
)
from npkit.toolchain.system.verdict import fault_kinds, judge
from npkit.xscale.core import XScaleError
from npkit.xscale.gdb_address import GDB_ADDRESS, GDB_HELP

from .options import (
    MAX_CYCLES,
    RUN_ERRORS,
    control_at_option,
    exit_on_verdict,
    image_define_option,
    ms_option,
    parse_control_at,
    policy_of,
    verdict_options,
)
from .outputs import refuse_overwrite_usage
from .profiling import Extras, Request, coverage_option

# ME states (npk_me_status) that are a fault of the program, not a normal stop (halt, idle)
ME_FAULT_STATES = ("illegal", "bad_pc")


class RingError(click.BadParameter):
    """A --ring that is not a ring (its message names the option or FILE:LINE)."""


def parse_rings(text: str) -> list[dict[str, Any]]:
    """--ring: 'scratch:3:base=0x1000,size=128[,margin=2]', or a YAML file holding
    `rings: [{ring, base, size[, margin]}, ...]` (RingFile), checked against the schema."""
    from npkit.toolchain.debug.ring_schema import is_ring_file, read_ring, read_ring_file

    if is_ring_file(text):
        return read_ring_file(text, RingError)
    return [read_ring(text, f"--ring {text!r}", RingError)]


def _live_state(chip: Chip, me: int, info: dict[str, Any]) -> tuple[str, int | None]:
    """Status and PC of an ME that did not stop: the PC of its running context (None when
    every context sleeps or waits), and "idle" once no context is left (all ran
    ctx_arb[kill]).  A stopped ME keeps the status and PC where it stopped."""
    if info["state"] != "running":
        return info["state"], info["pc"]
    states = {ctx: chip.ctx_state(me, ctx) for ctx in range(8)}
    if all(s == "inactive" for s in states.values()):
        return "idle", None
    running = [ctx for ctx, s in states.items() if s == "running"]
    return "running", chip.reg(me, "pc", running[0]) if running else None


def me_summary(chip: Chip, reason: str, loaded: dict[int, str]) -> dict[str, Any]:
    st = chip.stats()
    cycle = st["cycle"]
    mes = []
    for m in st["mes"]:
        if m["me"] not in loaded:
            continue
        info = chip.me_status(m["me"])
        status, pc = _live_state(chip, m["me"], info)
        busy = m["executing_cycles"] + m["aborted_cycles"] + m["stalled_cycles"]
        mes.append({**{k: v for k, v in m.items() if k != "ctx"}, "program": loaded[m["me"]],  # me_name: 0x10
                    "status": status, "utilization": busy / cycle if cycle else 0.0, "pc": pc,
                    "reason": info["reason"]})  # fmt: skip
    units = {name: list(chans) for name, chans in st["units"].items() if any(c["commands"] for c in chans)}
    clock = float(chip.config["clock_mhz"])
    me_faults = [{k: m[k] for k in ("me", "me_name", "program", "status", "pc", "reason")}
                 for m in mes if m["status"] in ME_FAULT_STATES]  # fmt: skip
    return {"config": st["config"], "stop": reason, "cycle": cycle, "time_us": cycle / clock,
            "mes": mes, "units": units, "faults": chip.faults(), "me_faults": me_faults}  # fmt: skip


def fault_warnings(chip: Chip, faults: dict[str, Any], limit: int = 8) -> list[str]:
    """Warning lines for Chip.faults(): the totals by kind, then each distinct
    (kind, ME, PC) among the last faults kept."""
    if not faults["total"]:
        return []
    named = {**faults, "last": [{**f, "me_name": chip.me_name(f["me"])} if f["me"] >= 0 else f for f in faults["last"]]}
    return [f"warning: {faults['total']} fault(s) ({fault_kinds(faults)})",
            *(f"warning: {line}" for line in fault_site_lines(named, limit))]  # fmt: skip


def me_fault_warnings(me_faults: list[dict[str, Any]]) -> list[str]:
    """Warning lines for the MEs that stopped on a fault of their program (me_summary)."""
    lines = []
    for m in me_faults:
        hint = ""
        if m["status"] == "illegal" and "0x0000000000" in m["reason"]:
            hint = " (an empty control-store word: the program ran past its end or jumped outside it?)"
        lines.append(f"warning: ME {m['me_name']} ({m['program']}) stopped at pc {m['pc']}: {m['reason']}{hint}")
    return lines


def warn_faults(chip: Chip, summary: dict[str, Any]) -> None:
    for line in me_fault_warnings(summary.get("me_faults", [])) + fault_warnings(chip, summary["faults"]):
        click.echo(line, err=True)


def exit_on_me_faults(summary: dict[str, Any]) -> None:
    """Exit 1 when an ME stopped on a fault of its program (a run without a verdict)."""
    if summary.get("me_faults"):
        raise SystemExit(1)


def format_me_summary(out: dict[str, Any]) -> str:
    lines = [f"{out['config']}: stopped ({out['stop']}) at cycle {out['cycle']} ({out['time_us']:.2f} us)"]
    for m in out["mes"]:
        lines.append(f"  ME {m['me_name']} {m['program']:<16s} {m['status']:<8s} instr {m['instructions']:>10d} "
                     f"util {m['utilization'] * 100:5.1f}%  swaps {m['ctx_swaps']:>8d}  pc {'-' if m['pc'] is None else m['pc']}"
                     + (f"  ({m['reason']})" if m["status"] not in ("running", "idle") else ""))  # fmt: skip
    for name, chans in out["units"].items():
        for i, c in enumerate(chans):
            lines.append(f"  {name}[{i}] commands {c['commands']:>8d} bytes {c['bytes']:>10d} "
                         f"util {c['utilization'] * 100:5.1f}% queue max {c['queue_max']} mean {c['queue_mean']:.2f}")  # fmt: skip
    return "\n".join(lines)


def source_defines(images: tuple[str, ...], me_list: str | None, defines: tuple[str, ...]) -> dict[str, str]:
    """-D as npk run reads it: the .uc sources' preprocessor defines (sort_defines, as
    debug, trace and why read it).  A layout is not run as it is: a usage error saying how."""
    try:
        paths = [path for path, _ in split_images(images, me_list)]
        layouts = [path for path in paths if is_layout(path)]
        if layouts:
            raise TargetUsage(f"{layouts[0]}: a layout is linked before it runs (npk link {layouts[0]} "
                              "[-D PARAM=VAL] -o router.elf, or npk demo --layout); npk debug and npk trace "
                              "take it as it is")  # fmt: skip
        return sort_defines(defines, paths)[0]
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None


def chip_for(images: tuple[str, ...], config: str | None, me_list: str | None, include_dirs: tuple[str, ...] = (),
             defines: dict[str, str] | None = None) -> tuple[Chip, list[tuple[str, Any, list[int] | None]]]:  # fmt: skip
    """Read IMAGE[@MES] arguments (an image, or a .uc source assembled in memory with npk
    asm's -I and -D), choose the chip config (the one the images were linked for unless
    --config; npkit.emulator.run_config), and name each image's MEs on it
    (npkit.toolchain.debug.target.read_images, which `npk debug` reads them with)."""
    from npkit.toolchain.debug.target import read_images

    def warn(line: str) -> None:
        click.echo(line, err=True)

    try:
        chosen, notes, named = read_images(split_images(images, me_list), config, include_dirs, defines, warn)
    except (ConfigMismatch, MeListError, TargetUsage) as e:
        raise click.UsageError(str(e)) from None
    for note in notes:
        click.echo(f"note: {note}", err=True)
    return Chip(chosen), named


@click.command("run")
@click.argument("images", nargs=-1, required=True, metavar="IMAGE[@MES]...")
@include_option
@image_define_option
@click.option("--config", "config", default=None,
              help="Chip config name or YAML path.  [default: the one the images were linked for, else ixp2800]")
@click.option("--cycles", default=1_000_000, show_default=True, type=click.IntRange(min=0, max=MAX_CYCLES),
              help="Cycle budget (no traffic).")
@click.option("--me", "me_list", default=None,
              help="MEs to load a single image on (same as IMAGE@MES): hardware numbers 0x10, "
                   "cluster:ME 1:0, or flat indices; ranges 0x00-0x03,0x10.")  # fmt: skip
@click.option("--ring", "ring_specs", multiple=True, metavar="scratch:N:base=A,size=W|FILE.yaml",
              help="Configure scratch rings for plain images (repeatable; or a YAML file of rings).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--traffic", "traffic", default=None, type=click.Path(exists=True),
              help="Traffic spec (YAML) or directory of port<N>.pcap to feed through the MSF.")
@click.option("--app", "app_dir", default=None, type=click.Path(),
              help="Application folder the image was linked from (npk link --app): its traffic is the default "
                   "--traffic (docs/applications.md).")  # fmt: skip
@click.option("--capture", "capture", default=None, type=click.Path(file_okay=False),
              help="Write transmitted frames (port<N>.pcap) and dispositions.json here.")
@ms_option("--duration-ms", "duration_ms", default=1.0, show_default=True,
           help="With --traffic: emulated time to offer traffic for.")
@verdict_options(default_max_loss=0.0)
@click.option("--xscale", "xscale", default=None,
              help="Linux program (ARM ELF) for the XScale core, run in lockstep for the --cycles budget (which "
                   "the MEs set: the run ends early only once the program ended and no ME runs). Exit 1 when the "
                   "program crashed or exited non-zero; one still running or waiting when the budget ran out (a "
                   "daemon) is no failure here, its status line says \"did not finish within N cycles\" and "
                   "--json its state, \"finished\": false, \"stop\": \"budget\" (`npk xscale run` fails it).")
@click.option("--xscale-arg", "xscale_args", multiple=True, help="Argument for the XScale program (repeatable).")
@click.option("--xscale-placement", type=click.Choice(["xscale", "gpe"]), default="xscale", show_default=True,
              help="On the emulated XScale (Unicorn), or its native build as a host process.")
@click.option("--xscale-gdb", "xscale_gdb", type=GDB_ADDRESS, default=None, metavar="unix:PATH|PORT",
              help="The --xscale program, or a router image's control daemon, waits for gdb: " + GDB_HELP)
@click.option("--control-socket", "control_socket", default=None, type=click.Path(dir_okay=False),
              help="Router image: the control daemon listens here (`npk route add ... --socket PATH`; "
                   "the SPP's I3 daemon: `npk filter|slice|finger ... --socket PATH`).")
@control_at_option
@ms_option("--kill-control-at", "kill_at", default=None, metavar="MS",
           help="Router image, fault injection: kill the control daemon at this emulated time (ms).")
@ms_option("--restart-control-at", "restart_at", default=None, metavar="MS",
           help="... and start it again at this time (ms): it recovers its routes, ARP starts afresh.")
@click.option("--contexts", "contexts", is_flag=True,
              help="Print each context's figures: instructions (executing cycles), cycles waiting for a signal, "
                   "ready, idle (the JSON has them always, mes[].contexts).")  # fmt: skip
@click.option("--profile", "profile", is_flag=True,
              help="Count every instruction's executions (and branches taken) and print each program's listing "
                   "with them and its hot instructions (lock-step: slower).")  # fmt: skip
@coverage_option
def run_cmd(images: tuple[str, ...], include_dirs: tuple[str, ...], defines: tuple[str, ...], config: str | None,
            cycles: int, me_list: str | None, ring_specs: tuple[str, ...],
            as_json: bool, traffic: str | None, app_dir: str | None, capture: str | None, duration_ms: float, drain: bool,
            drain_cap_ms: float, max_loss: float | None, min_line_rate: float | None, xscale: str | None,
            xscale_args: tuple[str, ...], xscale_placement: str, xscale_gdb: int | str | None,
            control_socket: str | None, control_at: tuple[str, ...], kill_at: float | None, restart_at: float | None,
            contexts: bool, profile: bool, coverage: str | None) -> None:  # fmt: skip
    """Run IMAGE(s) on the emulated chip and print statistics.

    An IMAGE is an npkit ELF image or a .uc source, assembled in memory as npk asm
    assembles it (-I, -D; an error names file:line:column, exit 1); -D with ELF images
    only is a usage error (it would change nothing).
    IMAGE@MES loads an image on chosen MEs (a.elf@0 b.elf@1); images may share a scratch
    ring only as the same ring, and initialised memory only with the same bytes (else exit
    1, naming both).  With --traffic, packets
    go in through the MSF for --duration-ms of emulated time, then the run drains; the
    per-port table and the conservation totals are printed, and a run that loses or
    corrupts packets, or does not balance, exits 1 (policy: README, "Using npkit in CI")."""
    app_traffic = app_dir is not None and traffic is None
    if app_traffic:
        traffic = _app_traffic(app_dir)  # type: ignore[arg-type]
    # the captures go where the traffic comes from: its pcaps would be overwritten as they are read
    refuse_overwrite_usage([("--capture", capture)], [("--traffic", traffic)])
    source_defs = source_defines(images, me_list, defines)
    try:
        rings = [r for spec in ring_specs for r in parse_rings(spec)]
        chip, targets = chip_for(images, config, me_list, include_dirs, source_defs)
        alone = router_beside_others([(arg, img, m) for arg, (_, img, m) in zip(images, targets, strict=True)],
                                     traffic is not None)  # the arguments as given: IMAGE@MES
        if alone:
            raise click.UsageError(alone)
        per_image = load_images(chip, targets, rings)
        loaded = {me: name for each in per_image for me, name in each.items()}
        read = [img for _, img, _ in targets]
        extras = Extras(chip, placement(read, per_image), Request(profile or None, coverage, contexts, "npk_run"))
        policy = policy_of(max_loss, min_line_rate)
        router = len(read) == 1 and "router" in read[0].meta
        control = _control_options(read[0] if router else None, xscale, xscale_placement, xscale_gdb,
                                   control_socket, kill_at, restart_at, as_json)  # fmt: skip
        timed = parse_control_at(control_at)
        if timed:
            if control is None:
                raise click.UsageError("--control-at needs a router image with a control program (the SPP's spp_gpe)")
            control["timed"] = timed
        _check_xscale_options(xscale, control, xscale_args, xscale_placement, xscale_gdb)
        if traffic is not None and xscale:
            raise click.UsageError("--xscale with --traffic: a router image runs its own control program "
                                   "(the layout's control: section)")  # fmt: skip
        if traffic is None:
            if control is not None:
                _run_router_cycles(chip, read[0], loaded, cycles, as_json, control, extras)
                return
            _run_cycles(chip, loaded, cycles, as_json, xscale, xscale_args, xscale_placement, xscale_gdb, extras)
            return
        duration_ns = int(duration_ms * 1e6)
        cap_ns = int(drain_cap_ms * 1e6)
        if router:
            s = _run_router(chip, read[0], traffic, duration_ns, drain, cap_ns, capture, as_json, control or {},
                            app_traffic)  # fmt: skip
        else:
            s = _run_plain(chip, traffic, duration_ns, drain, cap_ns, capture, as_json)
    except RUN_ERRORS as e:
        raise click.ClickException(str(e)) from None
    except (LinkError, XScaleError) as e:
        raise click.ClickException(f"control program: {e}") from None
    s.update(me_summary(chip, s.pop("stop"), loaded))
    more = extras.finish(s)
    s["traffic"] = str(traffic)
    s["capture"] = capture
    s["verdict"] = judge(s, policy)
    if as_json:
        click.echo(json.dumps(s, indent=2))
    else:
        click.echo(s.pop("text"))
        if more:
            click.echo(more.lstrip("\n"))
        if capture:
            click.echo(f"captures: {Path(capture) / 'port<N>.pcap'}, {Path(capture) / 'dispositions.json'}")
        v = s["verdict"]
        click.echo("verdict: ok" if v["ok"] else "verdict: FAILED\n" + "\n".join(f"  - {r}" for r in v["reasons"]))
    s.pop("text", None)
    warn_faults(chip, s)
    exit_on_verdict(s["verdict"])


def _run_cycles(chip: Chip, loaded: dict[int, str], cycles: int, as_json: bool, xscale: str | None,
                xscale_args: tuple[str, ...], placement: str, gdb: int | str | None, extras: Extras) -> None:  # fmt: skip
    """No traffic: run the cycle budget (with the XScale program beside, if any), print the MEs."""
    if not xscale:
        out = me_summary(chip, chip.run(cycles), loaded)
        more = extras.finish(out)
        click.echo(json.dumps(out, indent=2) if as_json else format_me_summary(out) + more)
        warn_faults(chip, out)
        exit_on_me_faults(out)
        return
    from npkit.toolchain.commands.xscale import add_to_run_summary, report_failed, run_beside

    reason, rep = run_beside(chip, xscale, xscale_args, cycles, placement, gdb, as_json)
    out = me_summary(chip, reason, loaded)
    add_to_run_summary(out, rep, as_json)
    more = extras.finish(out)
    click.echo(json.dumps(out, indent=2) if as_json else format_me_summary(out) + more)
    warn_faults(chip, out)
    if report_failed(rep):
        raise SystemExit(1)
    exit_on_me_faults(out)


def _progress(as_json: bool) -> Any:
    def show(t_ns: int) -> None:
        if not as_json and sys.stderr.isatty() and t_ns % 200_000 < SLICE_NS:
            print(f"\r  {t_ns / 1e6:8.3f} ms emulated", end="", file=sys.stderr, flush=True)

    return show


def _check_xscale_options(xscale: str | None, control: dict[str, Any] | None, args: tuple[str, ...],
                          placement: str, gdb: int | str | None) -> None:  # fmt: skip
    """The --xscale-* options say how to run an XScale program: --xscale's, or (all but
    --xscale-arg) a router image's control daemon.  With neither they would do nothing."""
    if args and not xscale:
        raise click.UsageError("--xscale-arg is an argument of the --xscale PROGRAM; give the program")
    if xscale or control is not None:
        return
    given = [o for o, on in (("--xscale-placement", placement != "xscale"), ("--xscale-gdb", gdb is not None)) if on]
    if given:
        raise click.UsageError(f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} an XScale program: --xscale PROGRAM, or a router "
                               "image with a control program (npk link of a layout with control:)")  # fmt: skip


def _control_options(image: Any, xscale: str | None, placement: str, gdb: int | str | None, socket: str | None,
                     kill_at: float | None, restart_at: float | None, as_json: bool) -> dict[str, Any] | None:  # fmt: skip
    """How to start a router image's control daemon (None: the image has none, or the
    run gives an --xscale program of its own)."""
    ctl = (image.meta.get("control") or {}) if image is not None else {}
    if not ctl or xscale or ctl.get("placement") == "host":
        if socket or kill_at is not None or restart_at is not None:
            raise click.UsageError("--control-socket / --kill-control-at / --restart-control-at need a router image "
                                   "with a control program (npk link of a layout with control:)")  # fmt: skip
        return None
    if (restart_at is None) != (kill_at is None) or (kill_at is not None and restart_at is not None and restart_at <= kill_at):
        raise click.UsageError("--kill-control-at MS and --restart-control-at MS go together, the restart after the kill")
    from npkit.toolchain.commands.xscale import _echo_live

    out: dict[str, Any] = {"gdb_port": gdb, "socket": socket, "echo": None if as_json else _echo_live,
                           "kill_at_ns": None if kill_at is None else int(kill_at * 1e6),
                           "restart_at_ns": None if restart_at is None else int(restart_at * 1e6)}  # fmt: skip
    if placement != "xscale" or ctl.get("placement") == "gpe":
        out["placement"] = placement if placement != "xscale" else ctl["placement"]
    if gdb is not None and not as_json:
        where = gdb if isinstance(gdb, str) else f"127.0.0.1:{gdb}"
        click.echo(f"xscale: the control daemon waits for gdb on {where}", err=True)
    return out


def _run_router_cycles(chip: Chip, image: Any, loaded: dict[int, str], cycles: int, as_json: bool,
                       control: dict[str, Any], extras: Extras) -> None:  # fmt: skip
    """A router image without traffic: the microengines and its control daemon, `cycles` cycles."""
    from npkit.toolchain.system.i3d_run import control_plane

    cp = control_plane(chip, image, **control)
    try:
        out = me_summary(chip, chip.run(cycles), loaded)
        out["control_plane"] = cp.summary()
    finally:
        cp.close()
    more = extras.finish(out)
    click.echo(json.dumps(out, indent=2) if as_json else format_me_summary(out) + "\n" + _control_line(out) + more)
    warn_faults(chip, out)
    exit_on_me_faults(out)


def _control_line(s: dict[str, Any]) -> str:
    x = s["control_plane"]["xscale"]
    return (f"control plane: {s['control_plane'].get('program', 'npkd')} [{x['placement']}] {s['control_plane'].get('process', x['state'])}, {x['instructions']} instructions, "
            f"{x['interrupts']} interrupts, starts {x['starts']}")


def _app_traffic(app_dir: str) -> str:
    """The default traffic of the application in `app_dir` (npkit.toolchain.system.app)."""
    from npkit.toolchain.system.app import load_app

    try:
        own = load_app(app_dir).file("traffic")
    except LinkError as e:
        raise click.ClickException(str(e)) from None
    if own is None:
        raise click.UsageError(f"--app {app_dir}: the application names no traffic; give --traffic")
    return str(own)


def _run_router(chip: Chip, image: Any, traffic: str, duration_ns: int, drain: bool, cap_ns: int,
                capture: str | None, as_json: bool, control: dict[str, Any], app_traffic: bool = False) -> dict[str, Any]:  # fmt: skip
    """A linked router image: its control plane started, every output against the oracle.
    `app_traffic`: the traffic is the application's own spec, generated for the router
    config the image was linked with (as `npk demo --app` does)."""
    router = image.meta.get("router_config") if app_traffic and not Path(traffic).is_dir() else None
    tr = load_traffic_source(traffic, duration_ns, overrides={"router": router} if router else None)
    rr = RouterRun(image, tr, chip=chip, capture=capture, control=control)
    t0 = time.perf_counter()
    rr.run_traffic(duration_ns, progress=_progress(as_json))
    stop = "budget"
    if drain:
        rr.drain(cap_ns, progress=_progress(as_json))
    if not as_json and sys.stderr.isatty():
        print(file=sys.stderr)
    s = rr.summary(time.perf_counter() - t0)
    if capture:
        rr.write_captures(capture)
    s["text"] = format_summary(s)
    if rr.control is not None:
        rr.control.close()
    s["stop"] = stop
    return s


def _run_plain(chip: Chip, traffic: str, duration_ns: int, drain: bool, cap_ns: int,
               capture: str | None, as_json: bool) -> dict[str, Any]:  # fmt: skip
    """A plain image with packets through the MSF: conservation and loss, no oracle."""
    source = load_traffic_source(traffic, duration_ns)
    run = TrafficRun(chip, source, capture=capture)
    tx = TxBins(max(1, duration_ns), source.wire)  # bin 0: what left before duration_ns
    run.on_departure.append(tx.add)
    stop = run.run(duration_ns, progress=_progress(as_json))
    drained = {"enabled": False}
    if drain:
        drained = _drain_plain(run, cap_ns, _progress(as_json))
    if not as_json and sys.stderr.isatty():
        print(file=sys.stderr)
    rep = run.report()
    if capture:
        run.write_captures(capture, rep)
    tot = rep["totals"]
    offered = max(1, tot["offered"])
    seconds = max(1e-12, duration_ns / 1e9)
    tx_bits = tx.bits[0] if duration_ns else 0
    line_bits = run.dev.cfg["rate_bps"] * run.dev.ports * seconds
    st = run.dev.stats()
    census = {"rings": {}, "queues": {}, "in_blocks": 0, "buffers_in_use": 0,
              "msf": {"rx_pending": sum(run.dev.port_stats(p)["rx_pending"] for p in range(run.dev.ports)),
                      "rbuf_held": st["rbuf_held"], "tbuf_valid": st["tbuf_valid"]}}  # fmt: skip
    lost = tot["offered"] - tot["forwarded"] - sum(tot["exceptions"].values())
    return {
        "stop": stop,
        "msf": {k: v for k, v in rep.items() if k != "fates"},
        "totals": {**tot, "lost": lost, "loss_pct": round(100 * lost / offered, 3)},
        "throughput": {"tx_mbps": round(tx_bits / seconds / 1e6, 1),
                       "pct_line_rate": round(100 * tx_bits / line_bits, 3) if line_bits else 0.0},
        "conservation": {"balanced": rep["balanced"], "problems": rep["problems"], "in_flight": tot["in_flight"]},
        "in_flight": in_flight_report(tot["in_flight"], census, drained),
        "drain": drained,
        "text": f"{run.read} packets from {traffic}, {rep['time_ns'] / 1e6:.3f} ms emulated "
                f"in {rep['host_s']:.2f} s host\n" + format_report(rep),
    }  # fmt: skip


def _drain_plain(run: TrafficRun, cap_ns: int, progress: Any) -> dict[str, Any]:
    """Run on until the MSF holds nothing and no frame left for two slices, or the cap."""
    start = run.now_ns
    quiet = 0
    while run.now_ns - start < cap_ns:
        before = run.transmitted
        run.run(SLICE_NS, progress=progress)
        st = run.dev.stats()
        pending = sum(run.dev.port_stats(p)["rx_pending"] for p in range(run.dev.ports))
        idle = not (pending or st["rbuf_held"] or st["tbuf_valid"])
        moved = run.transmitted != before
        quiet = quiet + 1 if idle and not moved else 0
        if quiet >= 2:
            break
    return {"enabled": True, "ns": run.now_ns - start, "idle": quiet >= 2, "cap_ns": cap_ns}
