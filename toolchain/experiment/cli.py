"""`npk experiment`: run a design, analyse its results, write the report.

    npk experiment design DESIGN.yaml [--quick] [--json]      what would run (confounding too)
    npk experiment run DESIGN.yaml -o RESULTS_DIR [--quick] [--jobs N] [--scheduler ADDR [--connect-timeout S]]
    npk experiment analyze RESULTS_DIR [--response R]... [--transform log] [--format text|json|csv|latex]
    npk experiment report RESULTS_DIR -o report.html|report.md [--response R]... [--transform log] [--log-variation]
    npk experiment compare RESULTS_A RESULTS_B [--response R]... [--json]
    npk experiment readme-figures RESULTS_DIR     the README's seed 003 figures and plot, from a full run

`run` exits 0 when every run finished, 1 when some failed (each recorded with its
error), 130 when interrupted (run it again: finished runs are kept).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .design import DesignError, load_design
from .store import StoreError


@click.group("experiment")
def experiment() -> None:
    """Factorial experiments on the emulated router."""


@experiment.command("design")
@click.argument("design", type=click.Path(dir_okay=False))
@click.option("--quick", is_flag=True, help="The design's quick variant.")
@click.option("--json", "as_json", is_flag=True)
def design_cmd(design: str, quick: bool, as_json: bool) -> None:
    """Show a design: factors, runs, and for fractional designs the confounding."""
    try:
        d = load_design(design, quick=quick)
    except DesignError as e:
        raise click.ClickException(str(e)) from None
    s = d.summary()
    s["run_ids"] = [{"run_id": r.run_id, "seed": r.seed, **r.levels} for r in d.runs()]
    if as_json:
        click.echo(json.dumps(s, indent=1))
        return
    click.echo(f"{s['name']}: {s['kind']}, {s['points']} points x {s['replications']} = {s['runs']} runs")
    for f in s["factors"]:
        click.echo(f"  {f['key']} {f['name']}: " + ", ".join(lv["label"] for lv in f["levels"]))
    if "resolution" in s:
        click.echo(f"  defining relation {' = '.join(s['defining_relation'])}; resolution {s['resolution']}")
        for e, al in s["confounding"].items():
            click.echo(f"    {e} = {' = '.join(al)}")
    for r in s["run_ids"]:
        click.echo("  " + " ".join(f"{k}={v}" for k, v in r.items()))


@experiment.command("run")
@click.argument("design", type=click.Path(dir_okay=False))
@click.option("-o", "out", required=True, type=click.Path(file_okay=False), help="Results directory.")
@click.option("--quick", is_flag=True, help="The design's quick variant (short runs, for tests).")
@click.option("--jobs", type=click.IntRange(min=1), help="Local worker processes (default: cores).")
@click.option("--scheduler", metavar="ADDR", help="Dask scheduler address (tcp://host:port).")
@click.option("--connect-timeout", type=click.FloatRange(min=0.1), default=15.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the Dask scheduler to answer.")
@click.option("--retry-failed", is_flag=True, help="Run failed runs again.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def run_cmd(design: str, out: str, quick: bool, jobs: int | None, scheduler: str | None,
            connect_timeout: float, retry_failed: bool, as_json: bool) -> None:  # fmt: skip
    """Execute every run of DESIGN not yet in RESULTS_DIR."""
    from .runner import (
        ExperimentError,
        SchedulerAddressError,
        check_scheduler_address,
        run_experiment,
    )

    if jobs and scheduler:
        raise click.UsageError("--jobs is for the local pool; a Dask cluster has its own workers")
    try:
        if scheduler is not None:
            check_scheduler_address(scheduler)
        d = load_design(design, quick=quick)
        s = run_experiment(d, out, scheduler=scheduler, jobs=jobs, retry_failed=retry_failed,
                           connect_timeout_s=connect_timeout)  # fmt: skip
    except SchedulerAddressError as e:
        raise click.UsageError(str(e)) from None
    except (DesignError, ExperimentError, StoreError) as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted: finished runs are kept in {out}; run again to resume", err=True)
        sys.exit(130)
    if as_json:
        click.echo(json.dumps(s, indent=1))
    else:
        click.echo(f"{s['design']}: {s['runs']} runs, {len(s['executed'])} executed, {len(s['skipped'])} "
                   f"already done, {len(s['failed'])} failed, {len(s['unsettled'])} not settled "
                   f"({s['wall_s']} s); results in {s['results']}")  # fmt: skip
        for rid in s["failed"]:
            click.echo(f"  failed: {rid}", err=True)
    if s["failed"]:
        sys.exit(1)


TRANSFORM_HELP = ("log: analyse log10 of each response (effects become factors, 10^q; every value "
                  "must be above 0), for effects that multiply rather than add.")  # fmt: skip


@experiment.command("analyze")
@click.argument("results", type=click.Path(file_okay=False))
@click.option("--response", "responses", multiple=True, help="Analyse these responses (default: the design's).")
@click.option("--transform", type=click.Choice(["none", "log"]), default="none", show_default=True,
              help=TRANSFORM_HELP)
@click.option("--json", "as_json", is_flag=True, help="The whole analysis as JSON (--format json).")
@click.option("--format", "form", type=click.Choice(["text", "json", "csv", "latex"]), default="text",
              show_default=True, help="csv / latex: the effects table only (one row per response and effect).")
def analyze_cmd(results: str, responses: tuple[str, ...], transform: str, as_json: bool, form: str) -> None:
    """Effects, allocation of variation, CIs and ANOVA for a results directory."""
    from .analysis import TransformError, analyze, format_text, to_json
    from .export import to_csv, to_latex

    try:
        res = analyze(results, list(responses) or None, transform)
    except (StoreError, DesignError, TransformError) as e:
        raise click.ClickException(str(e)) from None
    if as_json or form == "json":
        for a in res["responses"].values():  # the per-run vectors stay out of the summary
            a.pop("fitted", None)
            a.pop("residuals", None)
        click.echo(to_json(res))
    elif form in ("csv", "latex"):
        click.echo(to_csv(res) if form == "csv" else to_latex(res), nl=False)
    else:
        click.echo(format_text(res))
    runs = res["runs"]
    if runs["ok"] == 0:
        click.echo(f"error: no run finished ({len(runs['failed'])} failed, {len(runs['missing'])} "
                   "missing): nothing to analyse", err=True)  # fmt: skip
        sys.exit(1)


def _report_path(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """-o names the format by its suffix; anything else is a usage error (exit 2)."""
    from .report import report_format_known

    if not report_format_known(value):
        raise click.BadParameter(f"'{value}': the report is .html or .md")
    return value


@experiment.command("report")
@click.argument("results", type=click.Path(file_okay=False))
@click.option("-o", "out", required=True, type=click.Path(dir_okay=False), callback=_report_path,
              help="report.html or report.md")
@click.option("--no-run-plots", is_flag=True, help="Skip the per-run throughput plots.")
@click.option("--response", "responses", multiple=True, help="Report these responses (default: the design's).")
@click.option("--transform", type=click.Choice(["none", "log"]), default="none", show_default=True,
              help=TRANSFORM_HELP)
@click.option("--log-variation", is_flag=True,
              help="Draw the % of variation on a log scale (small effects beside one that explains nearly all).")
def report_cmd(results: str, out: str, no_run_plots: bool, responses: tuple[str, ...], transform: str,
               log_variation: bool) -> None:  # fmt: skip
    """Write the HTML or Markdown report (figures in OUT's _files directory)."""
    from .report import build

    try:
        path = build(results, out, per_run_plots=not no_run_plots, responses=list(responses) or None,
                     transform=transform, log_variation=log_variation)  # fmt: skip
    except (StoreError, DesignError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {path} (figures in {Path(path).parent / (Path(path).stem + '_files')})")


@experiment.command("compare")
@click.argument("a", type=click.Path(file_okay=False))
@click.argument("b", type=click.Path(file_okay=False))
@click.option("--response", "responses", multiple=True, help="Compare these responses (default: those in both).")
@click.option("--json", "as_json", is_flag=True)
def compare_cmd(a: str, b: str, responses: tuple[str, ...], as_json: bool) -> None:
    """Effects of two results directories side by side, with CIs; differences flagged."""
    from .analysis import to_json
    from .compare import CompareError, compare, format_compare

    try:
        c = compare(a, b, list(responses) or None)
    except (StoreError, DesignError, CompareError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(to_json(c) if as_json else format_compare(c))


@experiment.command("readme-figures")
@click.argument("results", type=click.Path(file_okay=False))
def readme_figures_cmd(results: str) -> None:
    """Remake the README's seed 003 figures, docs/images/experiment_seed003.{json,png}, from a full run."""
    from .figures import IMAGE, README, REFERENCE, FiguresError, write

    try:
        ref = write(results)
    except (StoreError, DesignError, FiguresError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {REFERENCE}, {IMAGE} and the figures in {README} (commit {ref['commit'][:12]}, "
               f"code {ref['code_hash']})")
