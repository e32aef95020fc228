"""Route tables for router runs: the random BGP-shaped table `npk demo` and the
experiments use, and a copy of the example router config that names a given table, so
that the microcode's lookup, the oracle and the traffic generator see the same routes."""

from __future__ import annotations

from pathlib import Path

import yaml

from .paths import DEFAULT_ROUTER


def make_routes(path: str | Path, count: int) -> None:
    """A random BGP-like table for the example router (what `npk traffic routes
    --count COUNT --seed 1 --config examples/traffic/router.yaml` writes)."""
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.routes import format_routes, random_routes

    routes = random_routes(count, 1, RouterConfig.load(DEFAULT_ROUTER).next_hops())
    header = f"random route table: {count} routes, seed 1\nnpk traffic routes --count {count} --seed 1 --config {DEFAULT_ROUTER}"
    Path(path).write_text(format_routes(routes, header))


def router_with_routes(directory: Path, routes: Path) -> Path:
    """directory/router.yaml: the example router with `routes` as its table."""
    router = yaml.safe_load(DEFAULT_ROUTER.read_text())
    router["routes"] = str(Path(routes).resolve())
    path = directory / "router.yaml"
    path.write_text(yaml.safe_dump(router))
    return path
