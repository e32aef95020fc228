"""Options shared by the commands that run the router with traffic (`npk demo`,
`npk run --traffic`): how long, how to end, and what counts as a failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from npkit.toolchain.system.verdict import Policy

F = TypeVar("F", bound=Callable[..., Any])


def verdict_options(default_max_loss: float | None) -> Callable[[F], F]:
    """--drain/--no-drain, --drain-cap-ms, --max-loss, --min-line-rate."""

    def wrap(fn: F) -> F:
        for opt in reversed([
            click.option("--drain/--no-drain", "drain", default=True, show_default=True,
                         help="After the traffic, run on until nothing is in flight (or the cap)."),
            click.option("--drain-cap-ms", "drain_cap_ms", type=click.FloatRange(min=0), default=5.0,
                         show_default=True, help="Longest drain, emulated ms."),
            click.option("--max-loss", "max_loss", type=click.FloatRange(min=0, max=100),
                         default=default_max_loss, show_default=True,
                         help="Fail (exit 1) above this loss, %% of what the oracle forwards."),
            click.option("--min-line-rate", "min_line_rate", type=click.FloatRange(min=0, max=100),
                         default=None, help="Fail (exit 1) below this output rate, %% of the ports' line rate."),
        ]):  # fmt: skip
            fn = opt(fn)
        return fn

    return wrap


def policy_of(max_loss: float | None, min_line_rate: float | None) -> Policy:
    return Policy(max_loss_pct=max_loss, min_line_rate_pct=min_line_rate)


def exit_on_verdict(verdict: dict[str, Any]) -> None:
    """Exit 1 with the reasons on stderr when the run failed its policy."""
    if not verdict["ok"]:
        click.echo("npk: the run failed: " + "; ".join(verdict["reasons"]), err=True)
        raise SystemExit(1)
