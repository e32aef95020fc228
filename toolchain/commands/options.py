"""Options shared by the commands that run the router with traffic (`npk demo`,
`npk run --traffic`): how long, how to end, and what counts as a failure."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from npkit.emulator.binding import EmulatorError
from npkit.emulator.traffic.spec_forms import MAX_DURATION_NS
from npkit.toolchain.system.verdict import Policy

F = TypeVar("F", bound=Callable[..., Any])

# the longest emulated time a run offers traffic or drains: a traffic spec's limit
MAX_MS = MAX_DURATION_NS / 1e6
MAX_CYCLES = 10**15  # a cycle budget: 8 days of a 1.4 GHz chip

# What a run of the chip raises for what the user gave it (an image, a config, traffic, a
# route file, an output path): every area's error is a ValueError (LoadError, PcapError,
# SpecError, LinkError, RouteError, ...), the C core's an EmulatorError, a file the
# system refuses an OSError.  `npk run` and `npk demo` turn them into one line, exit 1.
RUN_ERRORS = (EmulatorError, ValueError, OSError)


class FiniteFloat(click.FloatRange):
    """A float option within a range that refuses NaN and the infinities: every comparison
    with NaN is false, so a FloatRange alone lets `nan` through (and `--max-loss nan` would
    turn the loss check off).  A usage error (exit 2) names the allowed range."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number in the range {self._describe_range()}.", param, ctx)
        return rv


def check_defines(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Callback of a -D NAME=VALUE option: a malformed one is a usage error (exit 2); what
    the names and values mean is checked against the layout later."""
    from npkit.toolchain.system.layout import DefineError, parse_defines

    try:
        parse_defines(value)
    except DefineError as e:
        raise click.BadParameter(str(e)) from None
    return value


# -D of the commands that load images (npk run, debug, trace, why): what it means depends on
# what is loaded, so it is read once the targets are known (npkit.toolchain.debug.target.sort_defines)
image_define_option = click.option(
    "-D", "defines", multiple=True, metavar="NAME[=VALUE]",
    help="For .uc sources: define NAME for the preprocessor, as npk asm -D.  For a layout: set a layout "
         "parameter NAME=VALUE (-D io=host, -D qm.qlimit=64).  With ELF images only: an error.",
)  # fmt: skip


def ms_option(*decls: str, default: float | None, help: str, min_open: bool = False, **kw: Any) -> Callable[[F], F]:
    """An emulated-time option in ms: finite, 0 (or above, with min_open) ..MAX_MS."""
    return click.option(*decls, type=FiniteFloat(min=0, max=MAX_MS, min_open=min_open), default=default,
                        help=help, **kw)  # fmt: skip


def verdict_options(default_max_loss: float | None) -> Callable[[F], F]:
    """--drain/--no-drain, --drain-cap-ms, --max-loss, --min-line-rate."""

    def wrap(fn: F) -> F:
        for opt in reversed([
            click.option("--drain/--no-drain", "drain", default=True, show_default=True,
                         help="After the traffic, run on until nothing is in flight (or the cap)."),
            ms_option("--drain-cap-ms", "drain_cap_ms", default=5.0, show_default=True,
                      help="Longest drain, emulated ms."),
            click.option("--max-loss", "max_loss", type=FiniteFloat(min=0, max=100),
                         default=default_max_loss, show_default=True,
                         help="Fail (exit 1) above this loss, % of what the oracle forwards or excepts "
                              "(lost: taken by a resource drop, rbuf_full, queue_full, ...)."),
            click.option("--min-line-rate", "min_line_rate", type=FiniteFloat(min=0, max=100),
                         default=None, help="Fail (exit 1) below this output rate, % of the ports' line rate."),
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


def parse_control_at(values: tuple[str, ...]) -> list[tuple[int, str]]:
    """`--control-at "MS COMMAND..."` values as (emulated ns, command), in time order."""
    out = []
    for v in values:
        head, _, cmd = v.strip().partition(" ")
        try:
            ms = float(head.removesuffix("ms"))
        except ValueError:
            raise click.BadParameter(f"{v!r}: MS COMMAND (e.g. \"0.5 filter fast 23\")", param_hint="--control-at") from None
        if ms < 0 or not cmd.strip():
            raise click.BadParameter(f"{v!r}: MS COMMAND, MS >= 0", param_hint="--control-at")
        out.append((int(ms * 1e6), cmd.strip()))
    return sorted(out, key=lambda x: x[0])


def control_at_option(fn: Any) -> Any:
    return click.option("--control-at", "control_at", multiple=True, metavar="\"MS COMMAND\"",
                        help="A command the image's I3 daemon (the SPP's spp_gpe layout) makes at emulated time MS, "
                             "as if it came on its control socket: \"0.5 filter fast 23\" (repeatable; "
                             "docs/spp.md §12).")(fn)  # fmt: skip
