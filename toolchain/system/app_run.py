"""What a command runs for `--app DIR`: the application, its layout, traffic, routes and
router config, as `npk demo` takes them (the options given win over the manifest, the
manifest over the IPv4 demo's defaults).

    inputs = app_inputs("examples/apps/acl")          # AppInputs
    image = inputs.link({"threads": 4})                # linked as npk demo links it
    inputs.traffic, inputs.router_yaml                  # the spec and the router it is generated for

`npk demo`, `npk debug`, `npk trace`, `npk why` and experiment designs (`app:`) use it, so
an application runs the same under each of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .paths import DEFAULT_ROUTER, ROOT

SEED003 = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"  # a permutation: no output oversubscribed
DEMO_ROUTES = 10_000  # the demo's random table when the application names no routes

if TYPE_CHECKING:
    from .app import App


@dataclass(frozen=True)
class AppInputs:
    """An application (None: the IPv4 demo without --app) and what a run of it takes."""

    app: App | None
    layout: str  # a layout file (or, without an application, a name in microcode/layouts)
    traffic: str  # a traffic spec (YAML) or a folder of pcaps
    routes: str | None  # a route file; None: the demo's random table
    router: Path  # the router config (ports, addresses, ARP) without routes

    def routes_file(self) -> str:
        """The route file: the one given, else the demo's random table for this router."""
        from .tables import demo_routes

        return self.routes if self.routes is not None else str(demo_routes(DEMO_ROUTES, router=self.router))

    def router_yaml(self) -> Path:
        """The router config with its routes: what the image is linked with and the traffic
        is generated for (destinations routed via a port)."""
        from .tables import router_with_routes

        return router_with_routes(Path(self.routes_file()), self.router)

    def link(self, params: dict[str, Any] | None = None, chip_config: str = "ixp2800") -> Any:
        """The image `npk demo` runs (io=msf unless `params` say otherwise): LinkError when it
        does not link."""
        from .link import link

        return link(self.layout, {"io": "msf", **(params or {})}, self.routes_file(), self.router_yaml(),
                    config=chip_config, app=self.app)  # fmt: skip


def app_inputs(app_dir: str | Path | None, layout: str | None = None, traffic: str | None = None,
               routes: str | None = None) -> AppInputs:
    """The application in `app_dir` (None: the IPv4 demo) and the layout, traffic, routes
    and router config to run: those given, else the application's, else the IPv4 demo's.
    An application that cannot be used is an AppError (a LinkError) saying where."""
    if app_dir is None:
        return AppInputs(None, layout or "pipelined", traffic or str(SEED003), routes, DEFAULT_ROUTER)
    from .app import load_app

    app = load_app(app_dir)
    layout = app.layout_file(layout)
    if traffic is None:
        own = app.file("traffic")
        traffic = str(own) if own is not None else str(SEED003)
    if routes is None and app.file("routes") is not None:
        routes = str(app.file("routes"))
    return AppInputs(app, layout, traffic, routes, app.file("router") or DEFAULT_ROUTER)
