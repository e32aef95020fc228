"""`npk demo`: the router on the emulator at 5 x 1 Gb/s, compared with the oracle.

    npk demo [--layout pipelined] [-D qm.qlimit=64] [--ms 10] [--seed 7] [--config ixp2800]
             [--routes FILE] [--traffic SPEC] [--max-loss PCT] [--min-line-rate PCT] [--json]

Exits 1 when the run fails the policy of npkit.toolchain.system.verdict (any oracle
mismatch, conservation off, packets still in flight, loss above --max-loss (default 0),
output below --min-line-rate); the JSON carries the verdict and its reasons.
"""

from __future__ import annotations

import atexit
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from npkit.emulator.binding import EmulatorError
from npkit.emulator.loader import LoadError
from npkit.emulator.traffic_run import MsfError, TrafficError, load_traffic_source
from npkit.toolchain.system.layout import LinkError, parse_defines
from npkit.toolchain.system.paths import DEFAULT_ROUTER, ROOT
from npkit.toolchain.system.router_run import RouterImageError, format_summary, run_router
from npkit.toolchain.system.verdict import judge

from .options import exit_on_verdict, policy_of, verdict_options

SEED003 = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"  # a permutation: no output oversubscribed
DEMO_ROUTES = 10_000


@click.command("demo")
@click.option("--layout", default="pipelined", show_default=True, help="layout name or YAML file")
@click.option("-D", "defines", multiple=True, metavar="NAME=VAL",
              help="layout parameter or dotted path: pool_mes=2, qm.qlimit=64, qm.quanta=2, parse.threads=4")
@click.option("--ms", "ms", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              help="emulated milliseconds of traffic")
@click.option("--seed", type=int, default=None, help="traffic seed (default: the spec's)")
@click.option("--config", "chip_config", default="ixp2800", show_default=True,
              help="chip config: a name (ixp2800, ixp2400) or a YAML file")
@click.option("--routes", type=click.Path(exists=True, dir_okay=False),
              help=f"route file (default: {DEMO_ROUTES:,} random prefixes)")
@click.option("--traffic", type=click.Path(exists=True), default=str(SEED003), show_default=True)
@verdict_options(default_max_loss=0.0)
@click.option("--json", "as_json", is_flag=True)
def demo_cmd(layout: str, defines: tuple[str, ...], ms: float, seed: int | None, chip_config: str,
             routes: str | None, traffic: str, drain: bool, drain_cap_ms: float, max_loss: float | None,
             min_line_rate: float | None, as_json: bool) -> None:  # fmt: skip
    """Build the router, load a route table, run 5 x 1 Gb/s of seed 003's packets."""
    duration = int(ms * 1e6)
    try:
        params: dict[str, Any] = parse_defines(defines)
        if routes is None:
            routes = str(demo_routes(DEMO_ROUTES))
        router_yaml = router_with_routes(Path(routes))
        overrides: dict[str, Any] = {"router": str(router_yaml)}
        if seed is not None:
            overrides["seed"] = seed
        tr = load_traffic_source(traffic, duration, overrides=overrides if not Path(traffic).is_dir() else None)
        s = run_router(layout, {"io": "msf", **params}, tr, duration, int(drain_cap_ms * 1e6),
                       routes=routes, router_config=router_yaml, chip_config=chip_config,
                       progress=not as_json and sys.stderr.isatty(), drain=drain)  # fmt: skip
    except (LinkError, LoadError, EmulatorError, MsfError, TrafficError, RouterImageError, OSError) as e:
        raise click.ClickException(str(e)) from None
    s["traffic"] = {"source": traffic, "seed": seed}
    s["verdict"] = judge(s, policy_of(max_loss, min_line_rate))
    click.echo(json.dumps(s, indent=2) if as_json else format_summary(s))
    exit_on_verdict(s["verdict"])


def make_routes(path: str, count: int) -> None:
    """A random BGP-like table for the example router (what `npk traffic routes` writes)."""
    Path(path).write_bytes(demo_routes(count).read_bytes())


def demo_routes(count: int, seed: int = 1) -> Path:
    """The demo's random table (`npk traffic routes --count COUNT --seed SEED --config
    examples/traffic/router.yaml`), generated once and kept in the cache (a temporary
    file when the cache is off)."""
    from npkit.emulator.traffic.cli import random_routes_text
    from npkit.toolchain.system.cache import cache_file, cache_put, code_digest, content_key

    key = content_key("routes/1", count, seed, str(DEFAULT_ROUTER), DEFAULT_ROUTER.read_bytes(), code_digest())
    hit = cache_file("routes", key)
    if hit is not None:
        return hit
    text = random_routes_text(count, seed, DEFAULT_ROUTER)[0].encode()
    cache_put("routes", key, text)
    return cache_file("routes", key) or _temp_file(text, ".txt")


def router_with_routes(routes: Path) -> Path:
    """The example router with `routes` as its table: the microcode, the oracle and the
    generator's destinations then all see the same table.  Kept in the cache by content
    (a temporary file when the cache is off)."""
    import yaml

    from npkit.toolchain.system.cache import cache_file, cache_put, content_key

    router = yaml.safe_load(DEFAULT_ROUTER.read_text())
    router["routes"] = str(routes.resolve())
    text = yaml.safe_dump(router).encode()
    key = content_key("router/1", text)
    hit = cache_file("router", key)
    if hit is None:
        cache_put("router", key, text)
        hit = cache_file("router", key)
    return hit or _temp_file(text, ".yaml")


def _temp_file(data: bytes, suffix: str) -> Path:
    f = tempfile.NamedTemporaryFile(prefix="npk-demo-", suffix=suffix, delete=False)  # noqa: SIM115
    with f:
        f.write(data)
    atexit.register(Path(f.name).unlink, missing_ok=True)
    return Path(f.name)
