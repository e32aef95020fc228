"""The SPP's reference model (docs/spp.md): no base, so it decides every frame
(docs/applications.md, the standalone mode).  The decisions are spp_model.SppModel's,
over the slice file slices.yaml -- the one source the tables are generated from -- and
the image's TCAM rows (tables["spp_filters"], matched with tcam_match).
`slice_of` puts every frame in its slice (its input meta-interface's): the run reports
each slice (`slices` in the JSON, emulator/traffic/groups.py)."""

import importlib.util
import sys
from pathlib import Path

from npkit.emulator.traffic.groups import group
from npkit.emulator.traffic.model import decide, drop, exception, forward

HERE = Path(__file__).resolve().parent


def _module(name):
    """A module of this folder, loaded by path (the application is not a package)."""
    key = f"npk_spp_{name}_{abs(hash(str(HERE)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def setup(tables, router):
    slices = _module("slices")
    sub = slices.load_slices(HERE / "slices.yaml")
    return _module("spp_model").SppModel(sub, tables["spp_filters"])


@decide(setup=setup)
def spp(frame, in_port, ctx):
    o = ctx.state.decide(frame, in_port)
    if o.kind == "forward":
        return forward(o.port, o.data)
    return drop(o.reason) if o.kind == "drop" else exception(o.reason)


def slice_rows(ctx):
    return [{"name": s.name, "id": s.id, "code_option": s.option, "share": s.share}
            for s in ctx.state.sub.slices]


@group(key="slices", info=slice_rows)
def slice_of(frame, in_port, ctx):
    return ctx.state.slice_of(frame, in_port)
