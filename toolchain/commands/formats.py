"""docs/formats.md, generated from the schemas of every file format npkit reads.

    npk formats --markdown            # print the reference
    npk formats --check docs/formats.md   # exit 1 if the committed file is stale
    python -m npkit.toolchain.commands.formats > docs/formats.md

Each format's schema is a pydantic model next to its reader (see npkit.asm.base.schema);
this module only renders them: one table per model (field, type, range, default,
description), nested models after the model that uses them.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import click
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from npkit.asm.base.reading import MAX_INT_CHARS, read_bytes
from npkit.asm.base.schema import CONFIG_LIMIT, MAX_ELEMENTS, Bounds, Doc, walk_models

DOCS_FILE = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


@dataclass(frozen=True)
class Format:
    title: str
    files: str
    reader: str
    model: Callable[[], type[BaseModel]] | None
    notes: str = ""
    text: Callable[[], str] | None = None  # a format without a pydantic model: its reference


def _chip() -> type[BaseModel]:
    from npkit.emulator.config_schema import ChipConfig

    return ChipConfig


def _router() -> type[BaseModel]:
    from npkit.emulator.traffic.router_schema import RouterConfigFile

    return RouterConfigFile


def _spec() -> type[BaseModel]:
    from npkit.emulator.traffic.spec_schema import TrafficSpecFile

    return TrafficSpecFile


def _layout() -> type[BaseModel]:
    from npkit.toolchain.system.layout_schema import LayoutFile

    return LayoutFile


def _image() -> type[BaseModel]:
    from npkit.asm.image_schema import ImageMeta

    return ImageMeta


def _reasons() -> type[BaseModel]:
    from npkit.emulator.traffic.reasons_schema import ReasonsFile

    return ReasonsFile


def _rings() -> type[BaseModel]:
    from npkit.toolchain.debug.ring_schema import RingFile

    return RingFile


def _run_file() -> type[BaseModel]:
    from npkit.toolchain.debug.run_schema import RunFile

    return RunFile


def _batch() -> type[BaseModel]:
    from npkit.toolchain.debug.batch import BatchFile

    return BatchFile


def _route_notes() -> str:
    from npkit.emulator.traffic.routes import ROUTE_FILE_LIMIT

    return (
        "One route a line: `PREFIX/LEN NEXTHOP_IP PORT` (`198.51.100.0/24 10.0.2.2 2`); `#` starts a "
        "comment, blank lines are skipped.\n\n"
        "| field | type | range | description |\n|---|---|---|---|\n"
        "| PREFIX/LEN | A.B.C.D/LEN | LEN 0..32; no host bits below LEN | destination prefix; each prefix once |\n"
        "| NEXTHOP_IP | A.B.C.D | on the port's subnet (router config) | next router; 0.0.0.0: directly connected |\n"
        "| PORT | integer | a port of the router | output port |\n\n"
        f"The file is UTF-8 text of at most {ROUTE_FILE_LIMIT >> 20} MB without NUL bytes (checked as it is "
        "read: `/dev/zero` is refused at once); an error names `file:line`. In a router config, a route "
        "must not repeat a port's connected subnet, nor be a /32 on an address the router answers "
        "itself (its port addresses, their subnet broadcasts, 255.255.255.255)."
    )


def _settings_table(cls: Any) -> str:
    """A settings dataclass's keys and defaults (steady:, capacity: of a design)."""
    import dataclasses

    rows = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        rows.append(f"`{f.name}` `{_value(default)}`")
    return ", ".join(rows)


def _design_notes() -> str:
    from npkit.toolchain.experiment import design as d
    from npkit.toolchain.experiment.capacity import CapacitySettings
    from npkit.toolchain.experiment.execute import RESOURCE_DROPS, RESPONSE_FAMILIES, RESPONSES
    from npkit.toolchain.experiment.steady import SteadySettings

    kinds = " \\| ".join(d.KINDS)
    return (
        "A factorial experiment (`npk experiment design|run`); a relative path is relative to the design "
        "file. The module doc of npkit.toolchain.experiment.design has an annotated example.\n\n"
        "| key | type | range | description |\n|---|---|---|---|\n"
        "| name, title, description | string | | what the design is |\n"
        f"| kind | {kinds} | | full factorial, 2^(k-p) fractional, or a sweep (default full) |\n"
        f"| replications | integer | 1..{d.MAX_REPLICATIONS}; points x replications <= {d.MAX_RUNS:,} | "
        "runs of each design point; replicate i uses traffic seed `seed` + i (default 1) |\n"
        "| seed | integer | | traffic seed of the first replicate (default 1) |\n"
        f"| base | mapping | keys {', '.join(sorted(d.BASE_KEYS))} | what every run starts from; `traffic` "
        "(a traffic spec) is required unless `app` gives it, `routes` is a count of random prefixes, a route "
        "file or null; `app` is an application folder (docs/applications.md): `layout` names one of its "
        "layouts (default its default_layout), its traffic, routes and router config are the defaults and "
        "its layouts' params are `param.NAME` targets |\n"
        f"| factors | mapping KEY -> factor | keys {', '.join(sorted(d.FACTOR_KEYS))}; at least two levels, no two alike | "
        "`set:` target(s) with a list of `levels`, or `levels` as a mapping label -> {target: value}; "
        "`scale: true` multiplies chip.*/traffic.* values (factors that scale one target multiply; two "
        "that set one target are refused) |\n"
        "| generators | mapping FACTOR -> word | distinct base factors | fractional: the factor's level is "
        "the product of these (`ABC`, `-ABC`) |\n"
        "| sweep | factor key | a factor with numeric levels | sweep: the factor on the x axis |\n"
        "| responses | list of names | see below | what is analysed (default "
        f"{', '.join(d.DEFAULT_RESPONSES)}) |\n"
        "| steady | mapping | see below | steady-state run settings |\n"
        "| capacity | mapping or false | see below | RFC 2544 capacity search (false: none) |\n"
        "| compare | string | | `seed003` (the effects seed 003 published) or a results directory, relative to the design, whose effects the report puts beside this one's (it must exist: run that design first) |\n"
        "| reference | mapping | keys source, response, points (1..1000 of {where: {FACTOR: LEVEL}, value: N}), note | a publication's values of one of the design's responses at design points (a factor left out of `where`: any level); the report's closing section puts them beside npkit's mean at every point, with the note |\n"
        "| quick | mapping | | merged over the design by `--quick` |\n\n"
        f"Targets start with {', '.join(d.TARGET_HEADS)}: `layout`, `param.NAME` (a -D layout parameter), "
        f"`block.NAME.{{{','.join(d.BLOCK_FIELDS)}}}` (`block.NAME.define.MACRO`), `chip` or `chip.KEY...`, "
        "`traffic.KEY...` (`traffic.ip_payload`: bytes after the IPv4 header), `routes`.\n\n"
        f"`steady:` keys and defaults: {_settings_table(SteadySettings)}. "
        f"`capacity:` keys and defaults: {_settings_table(CapacitySettings)}.\n\n"
        f"Responses: {', '.join(RESPONSES)}, and the families {', '.join(x + '*' for x in RESPONSE_FAMILIES)} "
        "(per block, unit, drop reason, series). "
        f"An experiment's `lost` counts every drop for want of a resource ({', '.join(RESOURCE_DROPS)}), "
        "whatever the oracle says of the packet, and `loss_pct` is that share of the packets offered: "
        "for capacity a packet the router drops for its own reason after a resource took it is saturation "
        "too.  `npk run` and `npk traffic compare` count as `lost` only the packets the oracle forwards or "
        "sends to the exception path (the others are `dropped_early`), and `npk run`'s `loss_pct` is a "
        "share of those; a capacity trial also counts packets still in flight after its drain as lost.\n\n"
        f"A design file is at most {d.DESIGN_LIMIT >> 20} MB. Numbers must be finite. `npk experiment design` "
        "and `run` check every design point's chip config, traffic spec, layout and parameters before any "
        "run starts; an error reads `design.yaml:line: field: what is wrong` (for a point: "
        "`factors: the run with A=.., B=..: ...`)."
    )


FORMATS = [
    Format("Chip config", "`emulator/configs/*.yaml`, `--config FILE`", "`Chip(config)`, `load_config` "
           "(npkit.emulator.binding)", _chip),
    Format("Router config", "`examples/traffic/router.yaml`, `--router-config FILE`",
           "`RouterConfig.load` (npkit.emulator.traffic.router_config)", _router),
    Format("Traffic spec", "`examples/traffic/*.yaml`, `--traffic FILE`",
           "`load_spec` (npkit.emulator.traffic.spec)", _spec,
           "A port's settings are `defaults` updated by its own entry under `ports:`, key by key. "
           "A spec generates at most 10,000,000 packets a port (count, or duration x rate); a run's "
           "duration replaces the spec's `duration_ns`."),
    Format("Layout", "`microcode/layouts/*.yaml`, `npk link LAYOUT`", "`load_layout` "
           "(npkit.toolchain.system.layout)", _layout,
           "`${name}` in any string is replaced by the parameter (a string that is exactly one `${name}` "
           "takes the parameter's type); `-D name=value` sets a parameter and `-D qm.qlimit=64` any "
           "dotted path. The schema checks the layout after both."),
    Format("Route file", "`examples/traffic/routes.txt`, `--routes FILE`, `routes:` of a router config",
           "`load_routes` (npkit.emulator.traffic.routes)", None, text=_route_notes),
    Format("Experiment design", "`examples/experiments/*.yaml`, `npk experiment design|run DESIGN`",
           "`load_design` (npkit.toolchain.experiment.design)", None, text=_design_notes),
    Format("Image metadata", "the `.npk.meta` section (JSON) of an npkit ELF image", "`read_image` "
           "(npkit.asm.image)", _image,
           "Errors read `IMAGE: .npk.meta: field: problem` (the section is one line of JSON). An image "
           "file is at most 256 MB."),
    Format("Reasons file", "`microcode/reasons.yaml`, `npk traffic reasons [FILE]`",
           "`load_reasons` (npkit.emulator.traffic.reasons)", _reasons,
           "Drop and exception reasons by name; each name becomes a C macro (`DROP_<NAME>`, `EXC_<NAME>`) in "
           "the generated `microcode/include/reasons.h`. A code is used once a table, a step once across both "
           "tables, a name once across both. `npk link` and every command that judges a run refuse a file "
           "the schema refuses, at its line."),
    Format("Ring file", "`examples/ring_pingpong.rings.yaml`, `npk run --ring FILE.yaml`",
           "`read_ring_file` (npkit.toolchain.debug.ring_schema)", _rings,
           "The rings of a run (each image's and --ring's) are checked before they are configured: each ring "
           "number once, inside scratch, no two rings sharing a byte. Across images (and --ring) a ring "
           "number may come twice only as the same ring (base, size and margin: a producer's image and a "
           "consumer's), configured once; a ring may not lie over scratch data another image initialises."),
    Format("Run directory", "`DIR/run.json`, `npk why --run DIR`", "`load_run_spec` (npkit.toolchain.debug.why)",
           _run_file, "A key left out takes the command-line option's value; `-D`, `-I` and `--ring` on the "
           "command line add to `defines`, `include_dirs` and `rings` (a define there wins, an include "
           "directory there is searched first). A ring file named in `rings`, and each include "
           "directory, is relative to DIR."),
    Format("Debugger batch file", "`npk debug --batch FILE`, or stdin", "`read_batch` "
           "(npkit.toolchain.debug.batch)", _batch, "The batch stops at the first error with exit status 1."),
]


# ---- rendering -----------------------------------------------------------------------------


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _meta(tp: Any) -> tuple[Any, list[Any]]:
    """(bare type, Annotated metadata) of a field annotation."""
    meta: list[Any] = []
    while typing.get_origin(tp) is Annotated:
        args = typing.get_args(tp)
        tp, meta = args[0], [*meta, *args[1:]]
    return tp, meta


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def type_text(tp: Any, field_meta: list[Any] | None = None, nested: bool = False) -> str:
    tp, meta = _meta(tp)
    doc = next((m for m in [*meta, *(field_meta or [])] if isinstance(m, Doc)), None)
    if doc is not None:
        return doc.type
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in args if a is not type(None)]
        return " | ".join(parts) + (" | null" if type(None) in args and (len(parts) > 1 or nested) else "")
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(type_text(a, nested=True) for a in args) + "]"
    if origin is dict:
        return f"mapping {type_text(args[0])} -> {type_text(args[1])}"
    if _is_model(tp):
        return f"[{tp.__name__}](#{_anchor(tp)})"
    names = {int: "integer", float: "number", str: "string", bool: "true/false", bytes: "bytes"}
    if tp is Any:
        return "any"
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def range_text(tp: Any, field_meta: list[Any]) -> str:
    tp, meta = _meta(tp)
    meta = [*meta, *field_meta]
    doc = next((m for m in meta if isinstance(m, Doc)), None)
    if doc is not None and doc.range:
        return doc.range
    bounds = next((m for m in meta if isinstance(m, Bounds)), None)
    if bounds is not None:
        return bounds.text()
    lengths = {type(m).__name__: m for m in meta}
    lo = getattr(lengths.get("MinLen"), "min_length", None)
    hi = getattr(lengths.get("MaxLen"), "max_length", None)
    if lo is not None or hi is not None:
        unit = "characters" if tp is str else "items"
        return f"{lo or 0}..{hi} {unit}" if hi is not None else f">= {lo} {unit}"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple:
        inner = [range_text(a, []) for a in args]
        return "; ".join(f"item {i + 1}: {r}" for i, r in enumerate(inner) if r)
    if origin in (typing.Union, types.UnionType, list, dict):
        inner = [range_text(a, []) for a in args if a is not type(None)]
        inner = [r for r in inner if r]
        return "; ".join(dict.fromkeys(inner))
    return ""


def default_text(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(its defaults)"
        return "`" + _value(value) + "`"
    if field.default is PydanticUndefined:
        return "**required**"
    if field.default is None:
        return "—"
    if field.default == "":
        return '`""`'
    return "`" + _value(field.default) + "`"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{}" if not v else "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, int) and v >= 1 << 20 and v % 1000 == 0:
        return f"{v:_}".replace("_", ",")
    return str(v)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def model_table(model: type[BaseModel]) -> list[str]:
    out = [f"### {model.__name__}", ""]
    if model.__doc__:
        out += [" ".join(model.__doc__.split()), ""]
    out += ["| field | type | range | default | description |", "|---|---|---|---|---|"]
    for name, f in model.model_fields.items():
        key = f.alias or name
        out.append(f"| `{key}` | {_cell(type_text(f.annotation, f.metadata))} | {_cell(range_text(f.annotation, f.metadata))} "
                   f"| {_cell(default_text(f))} | {_cell(f.description or '')} |")  # fmt: skip
    if model.model_config.get("extra") == "forbid":
        out += ["", "Other keys are errors."]
    return [*out, ""]


def markdown() -> str:
    out = [
        "# File formats",
        "",
        "<!-- Generated by `npk formats --markdown` (npkit.toolchain.commands.formats) from the schemas; do not edit. -->",
        "",
        "Every file npkit reads is checked against a schema declared once, next to its reader "
        "(pydantic models; npkit.asm.base.schema holds what they share). A problem is reported as "
        "`file:line: field: what is wrong`, where the line is that of the offending key, and as the "
        "reader's own error class; never a traceback.",
        "",
        "Every input (source, YAML, JSON, route file, pcap, image, batch file) must be a regular file: "
        "a FIFO, a device (`/dev/zero`; `/dev/null` reads as an empty file), a directory or a socket is "
        "refused before a byte is read, and "
        "each format has a size limit, checked before the file is read to its end.",
        "",
        "What every YAML file shares: UTF-8 text (a byte-order mark is accepted; a NUL byte or an "
        f"invalid byte is an error with its line), at most {CONFIG_LIMIT >> 20} MB, one document; "
        "duplicate keys are errors, and so is a document whose aliases expand to more than "
        f"{MAX_ELEMENTS:,} values. Integers are integers: `true`, `1.5` or `\"8\"` where an integer "
        "is expected are errors, and so is `maybe` where true/false is. An integer written with more "
        f"than {MAX_INT_CHARS} characters is an error with its line (in YAML and JSON inputs alike).",
        "",
        "Contents: " + ", ".join(f"[{f.title}](#{f.title.lower().replace(' ', '-')})" for f in FORMATS),
        "",
    ]
    for fmt in FORMATS:
        out += [f"## {fmt.title}", "", f"Files: {fmt.files}. Reader: {fmt.reader}.", ""]
        if fmt.model is None:
            assert fmt.text is not None
            out += [fmt.text(), ""]
            continue
        root = fmt.model()
        out += [f"Schema: `{root.__module__}.{root.__name__}`.", ""]
        module_doc = sys.modules[root.__module__].__doc__ or ""
        first = module_doc.strip().split("\n\n")[1] if "\n\n" in module_doc.strip() else ""
        if first:
            out += [" ".join(first.split()), ""]
        if fmt.notes:
            out += [fmt.notes, ""]
        for model in walk_models(root):
            out += model_table(model)
    return "\n".join(out).rstrip() + "\n"


@click.command("formats")
@click.option("--markdown", "as_markdown", is_flag=True, default=True, help="Print docs/formats.md (the default).")
@click.option("--check", "check", type=click.Path(dir_okay=False), default=None,
              help="Exit 1 if FILE differs from what the schemas generate.")
def formats_cmd(as_markdown: bool, check: str | None) -> None:
    """The reference of every input file format, generated from the schemas."""
    text = markdown()
    if check is not None:
        data = read_bytes(check, limit=CONFIG_LIMIT, error=click.ClickException, what="formats reference")
        # as text mode reads it (any line ending); bytes that are not UTF-8 differ like any other
        current = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        if current != text:
            raise click.ClickException(f"{check} is stale: regenerate it with `npk formats --markdown > {check}`")
        click.echo(f"{check} is current")
        return
    click.echo(text, nl=False)


if __name__ == "__main__":
    formats_cmd()
