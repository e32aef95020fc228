"""The `npk` command line: a thin Click layer over the library modules.

Each area of the tree owns its subcommands; this module only assembles them,
importing lazily so `npk --help` stays fast and one area's import error does
not hide the others' commands.
"""

from __future__ import annotations

import ast
import atexit
import gc
import importlib
import importlib.util
import signal
import sys
from pathlib import Path

import click
from click.utils import make_default_short_help

# subcommand name -> "module:attribute" of a click.Command
SUBCOMMANDS: dict[str, str] = {
    "bench": "npkit.toolchain.bench:bench_cmd",
    "route": "npkit.toolchain.router.cli:route",
    "flow": "npkit.toolchain.commands.flows:flow",
    "plugin": "npkit.toolchain.commands.flows:plugin",
    "asm": "npkit.toolchain.commands.asm:asm_cmd",
    "disasm": "npkit.toolchain.commands.asm:disasm_cmd",
    "traffic": "npkit.toolchain.commands.traffic:traffic",
    "run": "npkit.toolchain.commands.run:run_cmd",
    "debug": "npkit.toolchain.debug.cli:debug_cmd",
    "trace": "npkit.toolchain.debug.cli:trace_cmd",
    "graph": "npkit.toolchain.graph:graph",
    "why": "npkit.toolchain.debug.cli:why_cmd",
    "link": "npkit.toolchain.commands.link:link_cmd",
    "demo": "npkit.toolchain.commands.demo:demo_cmd",
    "xscale": "npkit.toolchain.commands.xscale:xscale_cmd",
    "formats": "npkit.toolchain.commands.formats:formats_cmd",
    "experiment": "npkit.toolchain.experiment.cli:experiment",
    "slice": "npkit.toolchain.commands.slice:slice_cmd",
    "filter": "npkit.toolchain.commands.slice:filter_cmd",
    "finger": "npkit.toolchain.commands.slice:finger_cmd",
}


def short_help(name: str, limit: int) -> str:
    """A subcommand's line in `npk --help`, from its docstring in the module's source:
    what Click makes of the command's help, without importing the module (importing all
    of them for the list took 0.4 s)."""
    module_name, attr = SUBCOMMANDS[name].split(":")
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return ""
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == attr), None)
    doc = ast.get_docstring(fn) if fn is not None else None
    if not doc:
        return ""
    return make_default_short_help(doc.split("\f", 1)[0], limit).strip()


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, short_help(n, limit)) for n in names])

    def invoke(self, ctx: click.Context) -> object:
        from npkit.toolchain.commands.signals import cleaned_up_on_signals

        with cleaned_up_on_signals():  # SIGTERM and SIGHUP clean up as Ctrl-C does
            return super().invoke(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        if module_name in sys.modules:
            return getattr(sys.modules[module_name], attr)
        # What the command imports (modules, classes, schemas: ~10^5 objects) lives as long
        # as the process.  The collector's passes over it while it is made cost ~10 ms of a
        # demo; imported with the collector off and frozen after, no pass walks it (until
        # something unfreezes the process's objects: run_router does when its run ends, so
        # the exit below freezes again).
        collecting = gc.isenabled()
        gc.disable()
        try:
            module = importlib.import_module(module_name)
        finally:
            gc.freeze()
            if collecting:
                gc.enable()
        return getattr(module, attr)


@click.group(cls=LazyGroup)
@click.version_option(package_name="npkit")
def main() -> None:
    """npkit: assemble, emulate and measure IXP2800 microengine code."""
    # The process ends with the command, so what it built needs no collecting on the way
    # out: frozen at exit, the interpreter's last passes skip it (they walked every object
    # of every import, ~40 ms of each `npk demo`).  atexit and weakref.finalize clean-ups
    # still run, and files are closed where they are written.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    if click.get_current_context().invoked_subcommand == "debug":
        signal.signal(signal.SIGINT, signal.default_int_handler)  # its prompt's Ctrl-C: many, each its own
