"""`npk`'s command list: `npk --help` reads each subcommand's line from its source
instead of importing it, and shows what Click would."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import SUBCOMMANDS, main, short_help


def _command(name: str) -> click.Command:
    module_name, attr = SUBCOMMANDS[name].split(":")
    return getattr(importlib.import_module(module_name), attr)


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
@pytest.mark.parametrize("limit", [20, 45, 64])
def test_a_subcommands_line_is_clicks_short_help(name: str, limit: int) -> None:
    assert short_help(name, limit) == _command(name).get_short_help_str(limit)
    assert short_help(name, limit)  # every subcommand says what it is for


def test_npk_help_lists_what_click_would() -> None:
    fast = CliRunner().invoke(main, ["--help"], terminal_width=100)
    assert fast.exit_code == 0
    # Click's own listing, which imports every subcommand
    ctx = click.Context(main, info_name="npk", terminal_width=100)
    formatter = ctx.make_formatter()
    click.Group.format_commands(main, ctx, formatter)
    assert formatter.getvalue() in fast.output
    assert all(name in fast.output for name in SUBCOMMANDS)


def test_npk_help_imports_no_subcommand() -> None:
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from npkit.toolchain.cli import SUBCOMMANDS, main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
        "print(sorted({t.split(':')[0] for t in SUBCOMMANDS.values()} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
