"""`npk link`: a layout's blocks into a system image."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from npkit.asm.base.writing import OutputError
from npkit.asm.image import write_image
from npkit.toolchain.commands.options import check_defines
from npkit.toolchain.system.layout import LinkError, parse_defines
from npkit.toolchain.system.link import link

from .outputs import refuse_overwrite_usage


@click.command("link")
@click.argument("layout", required=False)
@click.option("--app", "app_dir", default=None, type=click.Path(),
              help="application folder: LAYOUT is one of its layouts (default: its default_layout)")
@click.option("-D", "defines", multiple=True, metavar="NAME=VAL", callback=check_defines,
              help="override a layout parameter, or a dotted path (qm.qlimit=64, parse.threads=4)")
@click.option("--routes", type=click.Path(exists=True, dir_okay=False), help="route file")
@click.option("--router-config", type=click.Path(exists=True, dir_okay=False), help="router YAML")
@click.option("--config", "chip_config", default=None,
              help="chip config the image is for  [default: the application's (chip:), ixp2800]")
@click.option("-o", "output", required=True, type=click.Path(dir_okay=False), help="system image (ELF)")
@click.option("--json", "as_json", is_flag=True, help="print the layout graph as JSON")
@click.option("--Werror", "werror", is_flag=True, help="treat the assembler's warnings as errors (exit 1)")
def link_cmd(layout: str | None, app_dir: str | None, defines: tuple[str, ...], routes: str | None,
             router_config: str | None, chip_config: str | None, output: str, as_json: bool, werror: bool) -> None:  # fmt: skip
    """Link the router blocks of LAYOUT (a name in microcode/layouts or a YAML file; with
    --app DIR, a name of the application's layouts).  The assembler's warnings of every
    block go to stderr with their file:line."""
    if layout is None and app_dir is None:
        raise click.UsageError("Missing argument 'LAYOUT' (or --app DIR for the application's default layout).")
    from npkit.toolchain.system.app import load_app

    try:
        app = load_app(app_dir) if app_dir is not None else None
        if app is not None:
            layout = app.layout_file(layout)
    except LinkError as e:
        raise click.ClickException(str(e)) from None
    assert layout is not None
    refuse_overwrite_usage([("-o", output)], [("LAYOUT", layout if Path(layout).is_file() else None),
                                              ("--routes", routes), ("--router-config", router_config)])  # fmt: skip
    warnings: list[str] = []
    try:
        params: dict[str, Any] = parse_defines(defines)
        try:
            image = link(layout, params, routes, router_config, config=chip_config, warnings=warnings,
                         werror=werror, app=app)  # fmt: skip
        finally:
            for w in warnings:
                click.echo(w, err=True)
        write_image(output, image)
    except (LinkError, OutputError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(image.meta["graph"], indent=2))
        return
    for p in image.programs:
        click.echo(f"{p.name:<16} MEs {','.join(map(str, p.mes)):<12} {p.ctx_mode} ctx  {len(p.words)} words")
    ctl = image.meta.get("control")
    if ctl and ctl.get("placement") != "host":
        click.echo(f"{'control plane':<16} {ctl['program']} on the {ctl['placement']}: {ctl.get('native') or ctl['elf']}")
    click.echo(f"wrote {output}")
