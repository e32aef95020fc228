"""`npk asm` and `npk disasm`."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from npkit.asm.base.writing import OutputError, write_all, write_output
from npkit.asm.errors import AsmError, Diagnostics, SourceLoc, format_diagnostic
from npkit.asm.preprocess import parse_defines
from npkit.toolchain.commands.outputs import refuse_overwrite_usage


def _internal(exc: BaseException, where: SourceLoc | None) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
    return format_diagnostic(
        "internal error", f"{type(exc).__name__}: {exc}{at}; please report it", where
    )


# -I as every command that assembles a source takes it (npk asm, run, debug, trace, why): an
# include directory that does not exist is a usage error naming it, as a typo would otherwise
# only show as an #include not found (or, worse, one found elsewhere).  -D as npk asm takes it;
# run, debug, trace and why read theirs per target (npkit.toolchain.debug.target.sort_defines)
include_option = click.option(
    "-I", "include_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
    help="Include directory (repeatable; it must exist).",
)  # fmt: skip
define_option = click.option("-D", "defines", multiple=True,
                             help="Define NAME[=VALUE] for the preprocessor; with --layout, set a layout "
                                  "parameter NAME=VALUE (or a dotted path: qm.qlimit=64).")  # fmt: skip


@click.command("asm")
@click.argument("source", type=click.Path(dir_okay=False), required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="ELF image to write (default: SOURCE.elf).",
)
@click.option(
    "--list", "listing", type=click.Path(dir_okay=False), help="Write a listing to this file."
)
@include_option
@define_option
@click.option(
    "--contexts", type=click.Choice(["4", "8"]), default=None, help="4- or 8-context mode."
)
@click.option("--Werror", "werror", is_flag=True, help="Treat warnings as errors.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON summary (words, symbols, warnings)."
)
@click.option("--layout", default=None,
              help="Assemble block --block of this layout (a name in microcode/layouts or a YAML file) as "
                   "`npk link` does: its include paths and defines; -D then sets layout parameters.")  # fmt: skip
@click.option("--block", default=None, help="The block of --layout to assemble (default output: BLOCK.elf).")
@click.option("--app", "app_dir", default=None, type=click.Path(),
              help="Application folder (docs/applications.md): --layout is one of its layouts (default: its "
                   "default_layout), the block is looked up in its folders first, with its reasons.h and tables' "
                   "headers, as `npk link --app` assembles it.")  # fmt: skip
@click.option("--config", "chip_config", default=None,
              help="Chip config (a name or YAML file): its TCAM's defines for tcam.h (TCAM_BASE...) and "
                   "the listing's notes on TCAM accesses (docs/tcam.md).")  # fmt: skip
def asm_cmd(source: str | None, output: str | None, listing: str | None, include_dirs: tuple[str, ...],
            defines: tuple[str, ...], contexts: str | None, werror: bool, as_json: bool, layout: str | None,
            block: str | None, app_dir: str | None, chip_config: str | None) -> None:  # fmt: skip
    """Assemble a microengine source file (SOURCE, or --block of --layout) into an ELF image."""
    tcam_defs, window = _chip_tcam(chip_config)
    if layout is not None or block is not None or app_dir is not None:
        if source is not None or block is None or (layout is None and app_dir is None):
            raise click.UsageError("--layout (or --app) and --block go together, and without SOURCE")
        with _layout_block(layout, block, defines, app_dir) as (src, incs, block_defines, threads):
            _assemble(str(src), output or f"{block}.elf", listing, [*include_dirs, *incs],
                      {**tcam_defs, **block_defines}, contexts or str(threads), werror, as_json, block,
                      window)  # fmt: skip
        return
    if source is None:
        raise click.UsageError("missing SOURCE (or --layout L --block NAME)")
    try:
        parsed = parse_defines(defines)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'-D'") from None
    _assemble(source, output, listing, list(include_dirs), {**tcam_defs, **parsed}, contexts, werror, as_json,
              window=window)  # fmt: skip


def _chip_tcam(chip_config: str | None) -> tuple[dict[str, str], Any]:
    """The defines tcam.h takes from chip config `chip_config` and its TCAM window (none
    without a config or a TCAM); a config that cannot be read exits 1 with its error."""
    if chip_config is None:
        return {}, None
    from npkit.emulator.binding import EmulatorError, load_config
    from npkit.emulator.tcam import tcam_defines, window_of

    try:
        cfg = load_config(chip_config)
    except EmulatorError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    return tcam_defines(cfg), window_of(cfg)


@contextmanager
def _layout_block(layout: str | None, block: str, params: tuple[str, ...],
                  app_dir: str | None = None) -> Iterator[tuple[Path, list[str], dict[str, str], int]]:  # fmt: skip
    """Block `block` of `layout` as `npk link` assembles it (npkit.toolchain.system.link.layout_block);
    `params`: the -D options, as layout parameters; `app_dir`: the application (npk link
    --app).  A bad application, layout, parameter or block exits 1; a -D that is not
    NAME=VALUE is a usage error (exit 2)."""
    from npkit.toolchain.system.layout import DefineError, LinkError
    from npkit.toolchain.system.layout import parse_defines as layout_defines
    from npkit.toolchain.system.link import layout_block

    try:
        overrides = layout_defines(params)
    except DefineError as e:
        raise click.BadParameter(str(e), param_hint="'-D'") from None
    try:
        from npkit.toolchain.system.app import load_app

        app = load_app(app_dir) if app_dir is not None else None
        with layout_block(layout, block, overrides, app=app) as (b, src, incs, defs):
            yield src, incs, defs, b.threads
    except LinkError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


def _assemble(source: str, output: str | None, listing: str | None, include_dirs: list[str],
              defines: dict[str, str], contexts: str | None, werror: bool, as_json: bool,
              name: str | None = None, window: Any = None) -> None:  # fmt: skip
    from npkit.asm.assembler import assemble
    from npkit.asm.image import to_bytes
    from npkit.asm.listing import render_listing

    diags = Diagnostics()
    out_path = Path(output) if output else Path(source).with_suffix(".elf")
    refuse_overwrite_usage([("-o", out_path), ("--list", listing)], [("SOURCE", source)])
    try:
        asm = assemble(source, include_dirs, defines,
                       int(contexts) if contexts else None, diags, name=name)  # fmt: skip
        image_bytes = to_bytes(asm.image)
        list_text = render_listing(asm, window) if listing else None
    except AsmError as e:
        for w in diags.render():
            click.echo(w, err=True)
        click.echo(str(e), err=True)
        sys.exit(1)
    except RecursionError as e:
        click.echo(_internal(e, SourceLoc(source, 1)), err=True)
        sys.exit(1)
    except Exception as e:  # never a traceback: say where we were and that it is our fault
        click.echo(_internal(e, SourceLoc(source, 1)), err=True)
        sys.exit(1)
    for w in diags.render():
        click.echo(w, err=True)
    if werror and diags.warnings:
        click.echo(
            f"error: {len(diags.warnings)} warning(s) treated as errors (--Werror)", err=True
        )
        sys.exit(1)
    try:
        outputs = [(out_path, image_bytes)]
        if listing and list_text is not None:
            outputs.append((Path(listing), list_text.encode()))
        write_all(outputs)
    except OutputError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    if as_json:
        p = asm.program
        click.echo(json.dumps({
            "output": str(out_path), "words": len(p.words), "ctx_mode": p.ctx_mode,
            "symbols": [{"name": s.name, "kind": s.kind, "value": s.value, "scope": s.scope} for s in p.symbols],
            "warnings": [{"message": m, "where": loc.short() if loc else None} for m, loc in diags.warnings],
        }, indent=2))  # fmt: skip
    else:
        click.echo(
            f"{out_path}: {len(asm.program.words)} words, {asm.program.ctx_mode}-context mode",
            err=True,
        )


@click.command("disasm")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--addr", "show_addr", is_flag=True, help="Show addresses and words as comments.")
@click.option("--contexts", type=click.Choice(["4", "8"]), default=None,
              help="Context mode for raw words (hex dump, C array); images carry their own.")  # fmt: skip
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the source here instead of stdout.",
)
@click.option("--program", default=None,
              help="Program of a multi-program (linked) image; one is needed unless --json.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print programs, words and text as JSON.")
@click.option("--config", "chip_config", default=None,
              help="Chip config (a name or YAML file) whose TCAM window the comments name (docs/tcam.md).")
def disasm_cmd(source: str, show_addr: bool, contexts: str | None, output: str | None,
               program: str | None, as_json: bool, chip_config: str | None) -> None:  # fmt: skip
    """Disassemble an ELF image, a hex dump or a C byte array into reassemblable source."""
    from npkit.asm.disasm import disassemble, pick, read_words

    _, window = _chip_tcam(chip_config)

    refuse_overwrite_usage([("-o", output)], [("SOURCE", source)])
    try:
        progs = pick(read_words(source), program, source, every=as_json)
        parts = []
        for p in progs:
            if contexts and p.raw:
                p.ctx_mode = int(contexts)
            parts.append(disassemble(p, show_addr, window))
        text = "\n".join(parts)
        if as_json:
            text = json.dumps({"programs": [
                {"name": p.name, "ctx_mode": p.ctx_mode, "words": [f"{w:010x}" for w in p.words], "text": t}
                for p, t in zip(progs, parts, strict=True)]}, indent=2) + "\n"  # fmt: skip
    except AsmError as e:
        click.echo(str(e), err=True)
        sys.exit(1)
    except Exception as e:
        click.echo(_internal(e, SourceLoc(source, 1)), err=True)
        sys.exit(1)
    if output:
        try:
            write_output(output, text)
        except OutputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    else:
        click.echo(text, nl=False)
