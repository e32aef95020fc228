"""Benchmark registry behind `npk bench` and `make bench`.

Each area registers benchmark functions in its own `bench` module and lists
it in BENCH_MODULES.  A benchmark returns a dict of figures keyed
`area.figure`; `npk bench` merges them into one JSON object.  A figure named
`*.verdict` ({"ok": bool, "reasons": [...]}, npkit.toolchain.system.verdict) that is
not ok makes `npk bench` exit 1: figures from a run that lost or corrupted packets
are not to be trusted.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import click

BenchFn = Callable[[bool], dict[str, Any]]

# modules whose import registers benchmarks
BENCH_MODULES: list[str] = ["npkit.asm.bench", "npkit.toolchain.router.bench", "npkit.emulator.traffic.bench", "npkit.emulator.bench", "npkit.toolchain.system.bench", "npkit.toolchain.system.run_bench", "npkit.emulator.msf_bench", "npkit.xscale.bench", "npkit.emulator.fidelity_bench", "npkit.toolchain.experiment.bench"]

_REGISTRY: dict[str, BenchFn] = {}


def benchmark(name: str) -> Callable[[BenchFn], BenchFn]:
    """Register `fn(quick) -> {"area.figure": value}` under `name`."""

    def wrap(fn: BenchFn) -> BenchFn:
        _REGISTRY[name] = fn
        return fn

    return wrap


def registry() -> dict[str, BenchFn]:
    for module in BENCH_MODULES:
        importlib.import_module(module)
    return dict(_REGISTRY)


def run_benchmarks(names: list[str], quick: bool) -> dict[str, Any]:
    available = registry()
    unknown = [n for n in names if n not in available]
    if unknown:
        raise click.UsageError(
            f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(sorted(available))}"
        )
    figures: dict[str, Any] = {}
    for name in names or sorted(available):
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        figures.update(available[name](quick))
    return figures


@click.command("bench")
@click.argument("names", nargs=-1)
@click.option("--quick", is_flag=True, help="Smaller inputs, for a fast look.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object of figures.")
def bench_cmd(names: tuple[str, ...], quick: bool, as_json: bool) -> None:
    """Run benchmarks (all by default) and print their figures."""
    figures = run_benchmarks(list(names), quick)
    if as_json:
        click.echo(json.dumps(figures, indent=2, sort_keys=True))
    else:
        for key in sorted(figures):
            click.echo(f"{key:40s} {figures[key]}")
    failed = {k: v for k, v in figures.items() if k.endswith(".verdict") and not v.get("ok", True)}
    if failed:
        # a benchmark run that lost or corrupted packets is not a figure to trust (CI policy)
        for key, v in failed.items():
            click.echo(f"npk bench: {key}: " + "; ".join(v.get("reasons", [])), err=True)
        raise SystemExit(1)
