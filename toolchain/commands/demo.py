"""`npk demo`: the router on the emulator at 5 x 1 Gb/s, compared with the oracle.

    npk demo [--app DIR] [--layout pipelined] [-D qm.qlimit=64] [--ms 10] [--seed 7] [--config ixp2800]
             [--routes FILE] [--traffic SPEC] [--max-loss PCT] [--min-line-rate PCT] [--json]

Exits 1 when the run fails the policy of npkit.toolchain.system.verdict (any oracle
mismatch, conservation off, packets still in flight, loss above --max-loss (default 0),
output below --min-line-rate); the JSON carries the verdict and its reasons.

--app DIR runs the application in DIR (docs/applications.md): --layout names one of its
layouts, and its router config, routes and traffic are the defaults.  Without --app the
demo is the IPv4 router, the application of microcode/ipv4.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from npkit.emulator.traffic.spec_forms import MAX_SEED
from npkit.emulator.traffic_run import load_traffic_source
from npkit.toolchain.debug.profile import image_placement
from npkit.toolchain.system.app_run import DEMO_ROUTES, SEED003
from npkit.toolchain.system.layout import LinkError, parse_defines
from npkit.toolchain.system.paths import ROOT
from npkit.toolchain.system.router_run import format_summary, run_router
from npkit.toolchain.system.tables import demo_routes, router_with_routes
from npkit.toolchain.system.verdict import judge

from .options import (
    RUN_ERRORS,
    check_defines,
    control_at_option,
    exit_on_verdict,
    ms_option,
    parse_control_at,
    policy_of,
    verdict_options,
)
from .profiling import Extras, Request, coverage_option

if TYPE_CHECKING:
    from npkit.toolchain.system.app import App



@click.command("demo")
@click.option("--app", "app_dir", default=None, type=click.Path(file_okay=True),
              help="application folder (docs/applications.md; default: the IPv4 router)")
@click.option("--layout", default=None, help="layout name or YAML file  [default: the application's, pipelined]")
@click.option("-D", "defines", multiple=True, metavar="NAME=VAL", callback=check_defines,
              help="layout parameter or dotted path: pool_mes=2, qm.qlimit=64, qm.quanta=2, parse.threads=4")
@ms_option("--ms", "ms", default=10.0, min_open=True, show_default=True, help="emulated milliseconds of traffic")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None, help="traffic seed (default: the spec's)")
@click.option("--config", "chip_config", default=None,
              help="chip config: a name (ixp2800, ixp2400) or a YAML file  [default: the application's (chip:), ixp2800]")
@click.option("--routes", type=click.Path(exists=True, dir_okay=False),
              help=f"route file (default: {DEMO_ROUTES:,} random prefixes)")
@click.option("--traffic", type=click.Path(exists=True), default=None,
              help=f"traffic spec or folder of pcaps  [default: the application's, {SEED003.relative_to(ROOT)}]")
@verdict_options(default_max_loss=0.0)
@click.option("--json", "as_json", is_flag=True)
@click.option("--contexts", "contexts", is_flag=True,
              help="Print per-block figures and every context's (instructions, waiting for a signal, ready, idle); "
                   "the JSON has the blocks' always.")  # fmt: skip
@click.option("--profile", "profile", default=None, metavar="BLOCK",
              help="Count BLOCK's instructions and print its listing with them, its hot instructions first "
                   "(lock-step: slower; --ms 1 is plenty).")  # fmt: skip
@control_at_option
@coverage_option
def demo_cmd(app_dir: str | None, layout: str | None, defines: tuple[str, ...], ms: float, seed: int | None, chip_config: str | None,
             routes: str | None, traffic: str | None, drain: bool, drain_cap_ms: float, max_loss: float | None,
             min_line_rate: float | None, as_json: bool, contexts: bool, profile: str | None,
             control_at: tuple[str, ...], coverage: str | None) -> None:  # fmt: skip
    """Build the router, load a route table, run 5 x 1 Gb/s of seed 003's packets."""
    from npkit.toolchain.system.link import chip_config_of

    duration = int(ms * 1e6)
    timed = parse_control_at(control_at)
    app, layout, traffic, routes, router = _application(app_dir, layout, traffic, routes)
    chip_config = chip_config_of(chip_config, app)
    params: dict[str, Any] = parse_defines(defines)  # (checked by the option's callback)
    if "io" in params:
        raise click.UsageError("-D io: the demo offers its traffic to the MSF (io=msf); a router with the host's "
                               "stand-ins for rx and tx (io=host) is for block tests: npk link / npk debug")  # fmt: skip
    if seed is not None and Path(traffic).is_dir():
        raise click.UsageError(f"--seed {seed} with --traffic {traffic}: a directory of pcaps replays its packets "
                               "as they are; --seed goes with a traffic spec (YAML)")  # fmt: skip
    try:
        if routes is None:
            routes = str(demo_routes(DEMO_ROUTES, router=router))
        router_yaml = router_with_routes(Path(routes), router)
        overrides: dict[str, Any] = {"router": str(router_yaml)}
        if seed is not None:
            overrides["seed"] = seed
        tr = load_traffic_source(traffic, duration, overrides=overrides if not Path(traffic).is_dir() else None)
        req = Request(profile, coverage, contexts, "npk_demo")
        started: list[Extras] = []
        s = run_router(layout, {"io": "msf", **params}, tr, duration, int(drain_cap_ms * 1e6),
                       routes=routes, router_config=router_yaml, chip_config=chip_config,
                       progress=not as_json and sys.stderr.isatty(), drain=drain,
                       on_start=lambda rr: started.append(Extras(rr.chip, image_placement(rr.image), req)),
                       app=app, control={"timed": timed} if timed else None)  # fmt: skip
    except RUN_ERRORS as e:
        raise click.ClickException(str(e)) from None
    more = started[0].finish(s)
    s["traffic"] = {"source": traffic, "seed": seed}
    if app is not None:
        s["app"] = {"name": app.name, "folder": str(app.folder)}
    s["verdict"] = judge(s, policy_of(max_loss, min_line_rate))
    click.echo(json.dumps(s, indent=2) if as_json else format_summary(s) + more)
    exit_on_verdict(s["verdict"])


def _application(app_dir: str | None, layout: str | None, traffic: str | None,
                 routes: str | None) -> tuple[App | None, str, str, str | None, Path]:  # fmt: skip
    """The application (None without --app), and the layout, traffic, routes and router
    config to run: the options given, else the application's, else the IPv4 demo's
    (npkit.toolchain.system.app_run)."""
    from npkit.toolchain.system.app_run import app_inputs

    try:
        got = app_inputs(app_dir, layout, traffic, routes)
    except LinkError as e:
        raise click.ClickException(str(e)) from None
    return got.app, got.layout, got.traffic, got.routes, got.router
