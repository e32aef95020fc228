"""`--app DIR` on `npk debug`, `npk trace` and `npk why`: the application's image, traffic
and router config as `npk demo --app DIR` takes them.

    items, traffic = app_target("examples/apps/acl", (), None, (), workdir)

Without an IMAGE (or with IMAGE a name of the application's layouts) the application's
layout is linked as `npk demo` links it (its routes, else the demo's random table; -D
sets its layout parameters) and written into `workdir`; an IMAGE given is taken as it
is.  The traffic is the one given, else the application's; a spec that names no
`router:` is generated for the router the image was linked with (AppTraffic), so its
destinations "via port N" are routed as the image routes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .target import Items, TargetError, TargetUsage


class AppTraffic(str):
    """A traffic spec (or capture folder) path, with the router config (YAML) a spec that
    names none of its own is generated for (npkit.toolchain.debug.target.traffic_source)."""

    router: str

    def __new__(cls, path: str, router: str | Path) -> AppTraffic:
        s = super().__new__(cls, path)
        s.router = str(router)
        return s


def app_target(app_dir: str, images: Sequence[tuple[str, str | None]], traffic: str | None,
               defines: Sequence[str], workdir: Path) -> tuple[Items, AppTraffic, tuple[str, ...]]:  # fmt: skip
    """The images to open (IMAGE[@MES] as (path, MES text or None)), the traffic and the -D
    options left for the images (those a linked layout took are used up).  An application
    that cannot be used, or a layout that does not link, is a TargetError saying where."""
    from npkit.toolchain.system.app_run import app_inputs
    from npkit.toolchain.system.layout import LinkError

    named = images[0][0] if len(images) == 1 else None
    try:
        probe = app_inputs(app_dir, traffic=traffic)
        layout_name = named if named is not None and probe.app is not None and named in probe.app.layouts else None
        if images and layout_name is None:
            return list(images), AppTraffic(probe.traffic, _image_router(images[0][0], probe)), tuple(defines)
        if images and images[0][1] is not None:
            raise TargetUsage(f"{images[0][0]}@{images[0][1]}: a layout names its blocks' MEs")
        inputs = app_inputs(app_dir, layout_name, traffic)
        chip = inputs.app.chip if inputs.app is not None and inputs.app.chip is not None else "ixp2800"
        image = inputs.link(_layout_params(defines), chip_config=chip)  # the application's chip (its TCAM, ...)
        router = inputs.router_yaml()
    except LinkError as e:
        raise TargetError(str(e)) from None
    from npkit.asm.image import write_image

    assert inputs.app is not None
    out = workdir / f"{inputs.app.name}-{Path(inputs.layout).stem}.elf"
    write_image(str(out), image)
    return [(str(out), None)], AppTraffic(inputs.traffic, router), ()


def _layout_params(defines: Sequence[str]) -> dict[str, Any]:
    from npkit.toolchain.system.layout import DefineError, parse_defines

    try:
        return parse_defines(defines)
    except DefineError as e:
        raise TargetUsage(f"{e} (a layout parameter of the application's layout)") from None


def _image_router(path: str, inputs: Any) -> Path:
    """The router config an IMAGE given with --app was linked with (the application's
    router with the image's routes), for its traffic."""
    from npkit.asm.image import ImageError, read_image
    from npkit.toolchain.system.tables import router_with_routes

    routes: Any = None
    if Path(path).suffix not in (".uc", ".s", ".yaml", ".yml"):
        try:
            routes = (read_image(path).meta.get("router") or {}).get("routes")
        except (ImageError, OSError):
            routes = None  # the loader says what is wrong with it
    if isinstance(routes, str) and Path(routes).is_file():
        return router_with_routes(Path(routes), inputs.router)
    return Path(inputs.router)
