"""Benchmark registry behind `npk bench` and `make bench`.

Each area registers benchmark functions in its own module of this package
(toolchain/bench/<area>.py) and lists it in BENCH_MODULES.  A benchmark returns a dict of figures keyed
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

from npkit.toolchain.commands.options import ms_option

BenchFn = Callable[[bool], dict[str, Any]]

# modules whose import registers benchmarks
BENCH_MODULES: list[str] = ["npkit.toolchain.bench.asm", "npkit.toolchain.bench.router", "npkit.toolchain.bench.traffic", "npkit.toolchain.bench.emulator", "npkit.toolchain.bench.system", "npkit.toolchain.bench.run", "npkit.toolchain.bench.msf", "npkit.toolchain.bench.xscale", "npkit.toolchain.bench.fidelity", "npkit.toolchain.bench.experiment", "npkit.toolchain.bench.tcam", "npkit.toolchain.bench.sched", "npkit.toolchain.bench.gpe"]

_REGISTRY: dict[str, BenchFn] = {}
_LAST: set[str] = set()


def benchmark(name: str, last: bool = False) -> Callable[[BenchFn], BenchFn]:
    """Register `fn(quick) -> {"area.figure": value}` under `name`; `last`: run it after
    the others (it leaves threads behind, and a process with other threads reads traffic
    in place instead of in a second process: emulator/traffic/readahead.py)."""

    def wrap(fn: BenchFn) -> BenchFn:
        _REGISTRY[name] = fn
        if last:
            _LAST.add(name)
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
    for name in names or sorted(available, key=lambda n: (n in _LAST, n)):
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        figures.update(available[name](quick))
    return figures


def compare_figures(ref: str | None, other_npk: str | None, ms: float | None, pairs: int | None,
                    quick: bool) -> dict[str, Any]:  # fmt: skip
    """`compare.*`: this tree's `npk demo` and `npk bench emu` against another build's,
    side by side."""
    from npkit.toolchain.system import against

    ms = ms if ms is not None else (1.0 if quick else 10.0)
    pairs = pairs if pairs is not None else (1 if quick else 3)
    try:
        if other_npk:
            return against.compare(other_npk, other_npk, ms, pairs, quick=quick)
        assert ref is not None
        if not against.is_built(ref):
            print(f"bench: building {ref} (once; kept for later comparisons) ...", file=sys.stderr, flush=True)
        npk = against.build_ref(ref)
        print(f"bench: {ref} against this tree, {pairs} pair(s) of `npk demo --ms {ms:g}` a layout "
              "and of `npk bench emu` ...", file=sys.stderr, flush=True)  # fmt: skip
        return against.compare(npk, against.label_of(ref), ms, pairs, quick=quick)
    except against.AgainstError as e:
        raise click.ClickException(str(e)) from e


@click.command("bench")
@click.argument("names", nargs=-1)
@click.option("--quick", is_flag=True, help="Smaller inputs, for a fast look.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object of figures.")
@click.option("--against", "ref", metavar="REF",
              help="Also time `npk demo` (both layouts) and `npk bench emu` against commit REF, built "
                   "once in a copy of its tree, in alternating pairs: compare.* figures.  Alone, runs "
                   "only that.")
@click.option("--against-npk", "other_npk", metavar="PATH", type=click.Path(exists=True, dir_okay=False),
              help="As --against, with an npk already built.")
@ms_option("--against-ms", "ms", default=None, min_open=True, help="Emulated ms a demo (10; --quick 1).")
@click.option("--pairs", type=click.IntRange(min=1), help="Timed pairs after the warm-up (3; --quick 1).")
def bench_cmd(names: tuple[str, ...], quick: bool, as_json: bool, ref: str | None, other_npk: str | None,
              ms: float | None, pairs: int | None) -> None:  # fmt: skip
    """Run benchmarks (all by default) and print their figures."""
    if ref and other_npk:
        raise click.UsageError("--against and --against-npk name the same thing: give one")
    comparing = bool(ref or other_npk)
    figures = run_benchmarks(list(names), quick) if names or not comparing else {}
    if comparing:
        figures.update(compare_figures(ref, other_npk, ms, pairs, quick))
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
