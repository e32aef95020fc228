"""`npk debug`, `npk trace` and `npk why`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from npkit.toolchain.commands.asm import include_option
from npkit.toolchain.commands.options import MAX_CYCLES, image_define_option
from npkit.toolchain.commands.profiling import coverage_option
from npkit.xscale.gdb_address import GDB_ADDRESS, GDB_HELP

from .target import (
    Items,
    Target,
    TargetError,
    TargetUsage,
    open_targets,
    sort_defines,
    split_images,
)


def _warn(line: str) -> None:
    click.echo(line, err=True)

if TYPE_CHECKING:
    from .trace import BufferMap


def _interactive(session: object) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    from .complete import DebugCompleter
    from .session import DebugError, Session

    assert isinstance(session, Session)
    hist = Path.home() / ".npk_debug_history"
    try:
        history = FileHistory(str(hist))
    except OSError:
        history = None
    def toolbar() -> str:
        me, ctx = session.me, session.ctx
        pc = session.pc()
        return f" cycle {session.chip.cycle}   ME {session.nm(me)} ctx {ctx} ({session.chip.ctx_state(me, ctx)})   {session.loc(me, pc)}"

    prompt: PromptSession[str] = PromptSession(history=history, bottom_toolbar=toolbar,
                                               completer=DebugCompleter(session), complete_while_typing=False)  # fmt: skip
    click.echo(f"npk debug: {session.target.label} on ME {session.names(session.target.mes)}; "
               "`help` lists commands, Tab completes, Ctrl-C stops a run, Ctrl-D quits")  # fmt: skip
    session.execute("thread")
    click.echo("\n".join(session.out))
    while True:
        try:
            line = prompt.prompt("(npk) ")
        except EOFError:
            return
        except KeyboardInterrupt:
            continue
        if line.strip() in ("quit", "exit", "q"):
            return
        try:
            with session.sigint_stops():  # Ctrl-C stops the command, the session stays
                text = session.execute(line)
        except DebugError as e:
            click.echo(f"error: {e}", err=True)
            continue
        except KeyboardInterrupt:  # between two checks of a command that does not poll
            click.echo("interrupted", err=True)
            continue
        if text:
            click.echo(text)


def run_batch(session: object, lines: list[str], origin: str, echo: bool = True) -> int:
    """Run commands; the first error prints `origin:N: error: ...` and returns 1."""
    from .session import DebugError, Session

    assert isinstance(session, Session)
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text in ("quit", "exit", "q"):
            break
        if echo:
            click.echo(f"(npk) {text}")
        try:
            out = session.execute(text)
        except DebugError as e:
            click.echo(f"{origin}:{n}: error: {e}", err=True)
            return 1
        except KeyboardInterrupt:
            click.echo(f"{origin}:{n}: interrupted at cycle {session.chip.cycle}", err=True)
            return 130
        if out:
            click.echo(out)
    return 0


def target_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--app, --config, --me, --traffic, -D and -I: how debug, trace and why open their target."""
    for opt in reversed((
        click.option("--app", "app_dir", default=None, type=click.Path(),
                     help="Application folder (docs/applications.md): without an image (or with the name of one of "
                          "its layouts) its layout is linked as npk demo --app links it (-D: its layout parameters); "
                          "its traffic, generated for its router config, is the default --traffic."),
        click.option("--config", default=None, help="Chip config name or YAML path.  [default: the one the images "
                     "were linked for, else ixp2800]"),
        click.option("--me", "me_list", default=None,
                     help="MEs to load a single image on (several: IMAGE@MES each): 0x10, 1:0 (cluster:ME) "
                          "or flat 8; ranges 0x00-0x03."),
        click.option("--traffic", default=None, help="Traffic: a spec (YAML) or a capture directory "
                     "(port<N>.pcap); a layout also takes one .pcap."),
        image_define_option,
        include_option,
    )):  # fmt: skip
        fn = opt(fn)
    return fn


ring_option = click.option("--ring", "ring_specs", multiple=True, metavar="scratch:N:base=A,size=W|FILE.yaml",
                           help="Configure scratch rings for plain images, as npk run --ring (repeatable).")


def read_rings(ring_specs: Sequence[str]) -> list[dict[str, Any]]:
    """--ring as npk run reads it."""
    from npkit.toolchain.commands.run import parse_rings

    return [r for spec in ring_specs for r in parse_rings(spec)]


def split_existing(images: Sequence[str], me_list: str | None, hint: str, app_dir: str | None = None) -> Items:
    """IMAGE[@MES] arguments and --me as (path, MES text or None), each file there (or,
    with --app, a name of the application's layouts): what is missing is a usage error
    naming it (npk run says the same of its images)."""
    try:
        items = split_images(images, me_list)
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None
    layouts = _app_layouts(app_dir) if app_dir is not None and len(items) == 1 else set()
    for path, _ in items:
        if not Path(path).is_file() and path not in layouts:
            raise click.BadParameter(f"{path!r}: no such file", param_hint=hint)
    return items


def _app_layouts(app_dir: str) -> set[str]:
    """The names of the layouts of the application in `app_dir` (an error says where)."""
    from npkit.toolchain.system.app import load_app
    from npkit.toolchain.system.layout import LinkError

    try:
        return set(load_app(app_dir).layouts)
    except LinkError as e:
        raise click.ClickException(str(e)) from None


def with_app(app_dir: str | None, items: Items, traffic: str | None,
             defines: Sequence[str]) -> tuple[Items, str | None, tuple[str, ...]]:  # fmt: skip
    """--app DIR: the images, traffic and -D left for them (npkit.toolchain.debug.app_target);
    without --app, as given (no image is then a usage error)."""
    if app_dir is None:
        if not items:
            raise click.UsageError("name an image: IMAGE[@MES]... (or --app DIR for an application's)")
        return items, traffic, tuple(defines)
    import atexit
    import shutil
    import tempfile

    from .app_target import app_target

    workdir = Path(tempfile.mkdtemp(prefix="npk-app-"))
    atexit.register(shutil.rmtree, workdir, True)
    try:
        return app_target(app_dir, items, traffic, defines, workdir)
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None
    except TargetError as e:
        raise click.ClickException(str(e)) from None


def open_images(items: Items, defines: Sequence[str], config: str | None, traffic: str | None,
                include_dirs: Sequence[str], **kw: Any) -> Target:  # fmt: skip
    """The chip with IMAGE[@MES] loaded as `npk run` loads them (open_targets: the same
    loader, the same refusals), -D read as run reads it (sort_defines)."""
    source_defines, params = sort_defines(defines, [path for path, _ in items])
    return open_targets(items, config, traffic=traffic, params=params, include_dirs=include_dirs,
                        defines=source_defines, warn=_warn, **kw)  # fmt: skip


@click.command("debug")
@click.argument("images", nargs=-1, required=False, metavar="IMAGE[@MES]...")
@target_options
@click.option("--batch", "batch", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Run the commands in FILE and exit (stdin is read the same way when it is not a terminal).")  # fmt: skip
@click.option("--xscale-gdb", "xscale_gdb", type=GDB_ADDRESS, default=None, metavar="unix:PATH|PORT",
              help="A router image's control daemon waits for gdb: " + GDB_HELP)
@ring_option
@click.option("--source-dir", "source_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Directory to find the image's source files in (repeatable; searched first). An image "
                   "names its sources as given to npk asm, relative to the directory it was assembled in.")  # fmt: skip
@coverage_option
def debug_cmd(images: tuple[str, ...], app_dir: str | None, config: str | None, me_list: str | None,
              traffic: str | None, defines: tuple[str, ...], include_dirs: tuple[str, ...], batch: str | None,
              xscale_gdb: int | str | None, ring_specs: tuple[str, ...], source_dirs: tuple[str, ...],
              coverage: str | None) -> None:  # fmt: skip
    """Debug IMAGE(s) (npkit ELF images, .uc sources, or one layout YAML) interactively or from a script.

    IMAGE@MES loads an image on chosen MEs, as npk run does (a.uc@0 b.elf@1), through
    the same loader and with the same refusals; breakpoints by FILE:LINE or label apply
    to every ME whose program has that line or label (`break LOC me ME` narrows them)."""
    from .session import DebugError, Session

    rings = read_rings(ring_specs)
    items = split_existing(images, me_list, "'IMAGE[@MES]...'", app_dir)
    items, traffic, defines = with_app(app_dir, items, traffic, defines)
    try:
        target = open_images(items, defines, config, traffic, include_dirs, xscale_gdb=xscale_gdb, rings=rings)
        target.add_source_dirs([Path(d) for d in source_dirs])
        session = Session(target)
        extras = _coverage_of(target, coverage, [Path(d) for d in source_dirs])
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None
    except (TargetError, DebugError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    from .batch import BATCH_LIMIT, BatchError, parse_batch, read_batch

    try:
        if batch is not None:
            lines, origin = read_batch(batch), batch
        elif not sys.stdin.isatty():
            lines, origin = parse_batch(sys.stdin.buffer.read(BATCH_LIMIT + 1), "<stdin>"), "<stdin>"
        else:
            lines, origin = None, ""
    except BatchError as e:
        raise click.ClickException(str(e)) from None
    if lines is not None:
        rc = run_batch(session, lines, origin)
        _write_coverage(extras)
        sys.exit(rc)
    try:
        _interactive(session)
    finally:
        _write_coverage(extras)


def _coverage_of(target: Any, coverage: str | None, search: list[Path]) -> Any:
    """--coverage FILE: the profile counts from the session's start (None: not asked)."""
    if coverage is None:
        return None
    from npkit.toolchain.commands.profiling import Extras, Request
    from npkit.toolchain.debug.profile import placement

    placed = placement([pt.image for pt in target.parts], [pt.loaded for pt in target.parts])
    return Extras(target.chip, placed, Request(None, coverage, False, "npk_debug"), search)


def _write_coverage(extras: Any) -> None:
    """The session ends: the tracefile of what it executed."""
    if extras is not None:
        click.echo(extras.finish({}).lstrip("\n"))


def _buffer_map(ctx: click.Context, param: click.Parameter, value: str | None) -> BufferMap | None:
    from .trace import BufferMap, TraceError

    try:
        return BufferMap.parse(value) if value is not None else None
    except TraceError as e:
        raise click.BadParameter(str(e)) from None


@click.command("trace")
@click.argument("images", nargs=-1, required=False, metavar="IMAGE[@MES]...")
@target_options
@click.option("--cycles", default=100_000, show_default=True, type=click.IntRange(0, MAX_CYCLES), help="Cycles to run.")
@click.option("--from", "t_from", default=0, type=click.IntRange(0, MAX_CYCLES), help="First cycle written to the trace.")
@click.option("--to", "t_to", default=None, type=click.IntRange(0, MAX_CYCLES),
              help="Last cycle written (default: the end of the run).")
@click.option("--packets", "buffers", default=None, callback=_buffer_map,
              help="DRAM packet buffers as BASE:SIZE[:COUNT] (e.g. 0x100000:2048) to follow packets by buffer.")  # fmt: skip
@ring_option
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Trace JSON to write.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def trace_cmd(images: tuple[str, ...], app_dir: str | None, config: str | None, me_list: str | None,
              traffic: str | None, defines: tuple[str, ...], include_dirs: tuple[str, ...], cycles: int, t_from: int,
              t_to: int | None, buffers: BufferMap | None, ring_specs: tuple[str, ...], output: str,
              as_json: bool) -> None:  # fmt: skip
    """Run IMAGE(s) (npkit ELF images, .uc sources, or one layout YAML) and write a
    Perfetto/Chrome trace (open it at ui.perfetto.dev).

    IMAGE@MES loads an image on chosen MEs, as npk run and npk debug do (a.uc@0 b.elf@1),
    through the same loader and with the same refusals; every loaded ME is a process of
    the trace."""
    from npkit.toolchain.commands.outputs import refuse_overwrite_usage

    from .trace import BufferMap, TraceError, check_window, record_trace

    items = split_existing(images, me_list, "'IMAGE[@MES]...'", app_dir)
    refuse_overwrite_usage([("-o", output)], [*(("IMAGE", path) for path, _ in items), ("--traffic", traffic)])
    items, traffic, defines = with_app(app_dir, items, traffic, defines)
    rings = read_rings(ring_specs)
    try:
        check_window(cycles, t_from, t_to)
    except TraceError as e:
        raise click.UsageError(str(e)) from None
    try:
        target = open_images(items, defines, config, traffic, include_dirs, rings=rings)
        if buffers is not None:  # the user's --packets against this chip's DRAM: a usage error
            try:
                buffers.check(int(target.chip.config["dram_bytes"]))
            except TraceError as e:
                raise TargetUsage(str(e)) from None
        # the packet buffers the user gave, else the first that an image declares
        bmap = buffers or next(filter(None, (BufferMap.from_image(pt.image) for pt in target.parts)), None)
        if sys.stderr.isatty():
            with click.progressbar(length=cycles, label="tracing", file=sys.stderr) as bar:
                done = [0]

                def tick(now: int) -> None:
                    bar.update(now - done[0])
                    done[0] = now

                summary = record_trace(target, cycles, t_from, t_to, Path(output), bmap, tick)
        else:
            summary = record_trace(target, cycles, t_from, t_to, Path(output), bmap)
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None
    except (TargetError, TraceError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(f"{output}: {summary['events']} events, cycles {summary['from']}..{summary['to']} "
                   f"({summary['tracks']} thread tracks, {summary['flows']} memory flows, "
                   f"{summary['packets']} packets)", err=True)  # fmt: skip


def _buffer_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from .run_schema import parse_buffer

    try:
        if value is not None:
            parse_buffer(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


@click.command("why")
@click.argument("packet_id")
@click.option("--run", "run_dir", default=None, type=click.Path(file_okay=False),
              help="Directory of a run (holds run.json naming the image and buffers); default: the options below.")  # fmt: skip
@click.option("--image", "images", multiple=True, metavar="IMAGE[@MES]",
              help="Image, .uc source or layout to run; repeat it for several images, each IMAGE@MES as npk run "
                   "takes them.")  # fmt: skip
@target_options
@click.option("--cycles", default=1_000_000, show_default=True, type=click.IntRange(0, MAX_CYCLES))
@click.option("--buffer", "buffer", default=None, callback=_buffer_text,
              help="Packet buffers as BASE:SIZE (PACKET_ID = buffer index), or ADDR:LEN for one range.")  # fmt: skip
@ring_option
@click.option("--json", "as_json", is_flag=True)
def why_cmd(packet_id: str, run_dir: str | None, images: tuple[str, ...], app_dir: str | None, config: str | None,
            me_list: str | None, traffic: str | None, defines: tuple[str, ...], include_dirs: tuple[str, ...], cycles: int, buffer: str | None,
            ring_specs: tuple[str, ...], as_json: bool) -> None:  # fmt: skip
    """Replay a run and tell which threads touched packet PACKET_ID and which bytes each changed.

    PACKET_ID is a packet buffer index (5), or pkt:N for the frame the traffic generator
    tagged with packet id N (followed from its receive to the next receive into its buffer).
    Several images (--image a.uc@0 --image b.elf@1) load as npk run and npk debug load them."""
    from .why import WhyError, explain, load_run_spec

    if run_dir is not None and images:
        raise click.UsageError("--run DIR names the images (run.json); leave out --image")
    items = split_existing(images, me_list, "'--image'", app_dir) if images else None
    if app_dir is not None:
        if run_dir is not None:
            raise click.UsageError("--run DIR names the images and traffic (run.json); leave out --app")
        items, traffic, defines = with_app(app_dir, items or [], traffic, defines)
    rings = read_rings(ring_specs)
    try:
        spec = load_run_spec(run_dir, items, config, me_list, traffic, cycles, buffer)
        source_defines, params = sort_defines(defines, [path for path, _ in spec.images])
        spec.params = params or spec.params
        spec.defines = {**(spec.defines or {}), **source_defines}
        spec.include_dirs = (*include_dirs, *spec.include_dirs)  # -I searched before run.json's
        spec.rings = [*(spec.rings or ()), *rings]  # run.json's and --ring: configured alike
        report = explain(spec, packet_id)
    except TargetUsage as e:
        raise click.UsageError(str(e)) from None
    except (TargetError, WhyError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from .why import render

        click.echo(render(report))
