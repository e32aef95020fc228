"""Router layouts (microcode/layouts/*.yaml): read, substitute parameters, check.

A layout names parameters, scratch rings and blocks; each block is a microcode source
assembled with the defines the layout gives it (its input and output ring, thread count,
variant switches) and placed on its MEs::

    name: pipelined
    params: {threads: 8, qm: full}          # defaults; -D name=value overrides
    rings:                                   # scratch rings: number, size in longwords
      rx_to_parse: {ring: 0, size: 512}
    exceptions: exceptions                   # the ring carrying exception records
    qm: {quanta: 1, qlimit: 256, tx_window: 40}
    blocks:
      rx:    {variant: "${io}", variants: {msf: rx/rx.uc, host: external}, mes: [0], out: ...}
      parse: {source: parse/parse.uc, mes: [1], threads: "${threads}",
              in: rx_to_parse, out: parse_to_lookup, defines: {X: 1}}
      qm:    {variant: "${qm}", variants: {full: qm/qm.uc, stub: qm/qm_stub.uc}, ...,
            control_in: cp_to_qm}        # the control plane's frames (ring cp_to_qm)
    control: {placement: "${control}", program: npkd}    # npkit.toolchain.system.control

`${name}` in any string is replaced by the parameter; a string that is exactly one
`${name}` takes the parameter's type.  `mes` is a list or {first: F, count: N}.
A define whose value is false is left out; true becomes 1.  A block's `flags` are
switches tested with #ifdef: true/false (1/0, yes/no, on/off; anything else is an
error), defined as 1 only when true.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.asm.base.reading import InputError, Located, error_at, file_state, load_yaml

from .errors import DefineError, LinkError
from .paths import LAYOUTS, MICROCODE
from .sysmap import SYS

if TYPE_CHECKING:
    from .layout_schema import LayoutFile


@dataclass
class Ring:
    name: str
    number: int
    size: int
    base: int = 0
    producers: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)


@dataclass
class Block:
    name: str
    source: str | None  # None = external (rx/tx before phase 2, the XScale, the host)
    mes: list[int]
    threads: int
    ring_in: str | None
    ring_out: str | None
    defines: dict[str, str]
    ring_cp: str | None = None  # the control plane's ring this block serves (`control_in`)


@dataclass
class Layout:
    name: str
    params: dict[str, Any]
    rings: dict[str, Ring]
    blocks: dict[str, Block]
    exceptions: str
    qm: dict[str, Any]
    source: str
    splits: dict[str, list[str]] = field(default_factory=dict)
    control: Any = None  # npkit.toolchain.system.control.ControlSpec, or None

    def graph(self) -> dict[str, Any]:
        """Blocks and ring edges, for `npk graph` and the debugger."""
        edges = []
        for r in self.rings.values():
            for p in r.producers or ["?"]:
                for c in r.consumers or ["?"]:
                    edges.append({"from": p, "to": c, "ring": r.name, "number": r.number})
        return {
            "name": self.name,
            "blocks": {b.name: {"mes": b.mes, "threads": b.threads, "external": b.source is None}
                       for b in self.blocks.values()},
            "edges": edges,
        }  # fmt: skip


_PARAM = re.compile(r"\$\{(\w+)\}")


def _subst(value: Any, params: dict[str, Any], path: tuple[Any, ...], fail: Callable[[tuple[Any, ...], str], Exception]) -> Any:
    """`${name}` replaced in every string under `value`; a string that is exactly one
    `${name}` takes the parameter's type."""
    if isinstance(value, str):
        m = _PARAM.fullmatch(value.strip())
        if m:
            if m[1] not in params:
                raise fail(path, f"unknown parameter ${{{m[1]}}} (parameters: {', '.join(params) or 'none'})")
            return params[m[1]]

        def rep(mm: re.Match[str]) -> str:
            if mm[1] not in params:
                raise fail(path, f"unknown parameter ${{{mm[1]}}} (parameters: {', '.join(params) or 'none'})")
            return str(params[mm[1]])

        return _PARAM.sub(rep, value)
    if isinstance(value, list):
        return [_subst(v, params, (*path, i), fail) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _subst(v, params, (*path, k), fail) for k, v in value.items()}
    return value


def coerce(text: str) -> Any:
    """A -D value as YAML reads it (4, 0x10, true, [1, 2]); anything else stays text.
    An integer too long for any value (reading.MAX_INT_CHARS) is an InputError."""
    from npkit.asm.base.reading import parse_yaml

    try:
        v = parse_yaml(text, "-D").data
    except InputError as e:
        if "is too long" in str(e):
            raise
        return text
    return v if isinstance(v, (int, float, bool, list)) else text


def parse_defines(defines: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """-D NAME=VALUE options, one parser for every command that takes them.  NAME is a
    layout parameter (`threads`), or a dotted path into the layout (`qm.qlimit`,
    `qm.quanta`, `parse.threads`, `lookup.flags.LOOKUP_CAM_CACHE`; a path that starts
    with a block name is under `blocks`)."""
    out: dict[str, Any] = {}
    for d in defines:
        k, sep, v = d.partition("=")
        if not sep or not k.strip():
            raise DefineError(f"-D {d}: expected NAME=VALUE")
        try:
            out[k.strip()] = coerce(v.strip())
        except InputError as e:  # `-D:1: (top level): an integer ...`: say which -D
            raise DefineError(f"-D {k.strip()}: {str(e).rpartition(': ')[2]}") from None
    return out


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any], source: str) -> dict[str, Any]:
    """The layout with -D overrides applied: plain names set parameters, dotted names set
    the value at that path (which must exist, but for a block's new `defines`)."""
    raw = copy.deepcopy(raw)
    if not isinstance(raw.get("params"), dict):
        raw["params"] = {}
    params = raw["params"]
    for key, value in overrides.items():
        if "." not in key:
            if key not in params:
                raise LinkError(f"{source}: -D {key}: the layout has no such parameter (has: {', '.join(params)}; "
                                "dotted names reach the rest, e.g. qm.qlimit, parse.threads)")  # fmt: skip
            params[key] = value
            continue
        path = key.split(".")
        if path[0] not in raw and path[0] in (raw.get("blocks") or {}):
            path = ["blocks", *path]
        node: Any = raw
        for i, part in enumerate(path[:-1]):
            if isinstance(node, dict) and part == "defines" and part not in node:
                node[part] = {}
            if not isinstance(node, dict) or not isinstance(node.get(part), dict):
                raise LinkError(f"{source}: -D {key}: the layout has no mapping {'.'.join(path[: i + 1])}")
            node = node[part]
        if path[-1] not in node and path[-2] != "defines":
            raise LinkError(f"{source}: -D {key}: {'.'.join(path[:-1])} has no key {path[-1]!r} "
                            f"(has: {', '.join(map(str, node))})")  # fmt: skip
        node[path[-1]] = value
    return raw


def _read(path: str | Path | dict[str, Any]) -> tuple[dict[str, Any], str, Located | None]:
    """The layout's mapping, where it came from, and its line numbers (None for a mapping
    given directly).  `path`: a layout name ("pipelined"), a file, or a mapping (tests)."""
    if isinstance(path, dict):
        return path, "<layout>", None
    p = Path(path)
    if file_state(p) != "file" and file_state(LAYOUTS / f"{path}.yaml") == "file":
        p = LAYOUTS / f"{path}.yaml"
    if file_state(p) == "missing" or file_state(p).startswith("unusable"):
        raise LinkError(
            f"layout {path}: no such file (layouts: {', '.join(sorted(x.stem for x in LAYOUTS.glob('*.yaml')))})"
        )
    located = load_yaml(p, error=LinkError, what="layout")
    if not isinstance(located.data, dict):
        raise LinkError(f"{p}: a layout is a mapping (params, rings, exceptions, qm, blocks)")
    return located.data, str(p), located


def _substituted(raw: dict[str, Any], overrides: dict[str, Any], source: str, located: Located | None,
                 fail: Callable[[tuple[Any, ...], str], Exception]) -> dict[str, Any]:  # fmt: skip
    """The layout with -D overrides applied and its parameters substituted (a parameter
    may refer to those given before it); overrides are noted as the source of their values."""
    if not isinstance(raw.get("params", {}), (dict, type(None))):
        raise fail(("params",), "expected a mapping of parameter -> value")
    raw = _apply_overrides(raw, overrides, source)
    if located is not None:
        for key in overrides:
            path = tuple(key.split(".")) if "." in key else ("params", key)
            if path[0] not in raw and path[0] in (raw.get("blocks") or {}):
                path = ("blocks", *path)
            located.unlocated[path] = f"-D {key}={overrides[key]!r}"
    params = dict(raw.get("params") or {})
    for k in list(params):
        params[k] = _subst(params[k], params, ("params", k), fail)
    return {**_subst({k: v for k, v in raw.items() if k != "params"}, params, (), fail), "params": params}


def _source_of(src: str | None, sources: list[Path] | None) -> str | None:
    """A block's source as the linker reads it (`MICROCODE / source`): relative to
    microcode/ when the library has it first, else the absolute path found in `sources`."""
    if src is None or sources is None:
        return src
    for d in sources:
        if file_state(d / src) == "file":
            return src if d == MICROCODE else str((d / src).resolve())
    return src


def _layout(model: LayoutFile, params: dict[str, Any], source: str, sources: list[Path] | None = None) -> Layout:
    """The checked layout as the linker uses it: rings with their bases and users, blocks,
    the control plane."""
    from .control import ControlSpec

    producers, consumers = model.ring_users()
    bases = model.ring_bases()
    rings: dict[str, Ring] = {}
    splits: dict[str, list[str]] = {}
    for name, spec in model.rings.items():
        members = model.members(name)
        if spec.split is not None:
            splits[name] = [m for m, _ in members]
        for m, num in members:
            rings[m] = Ring(m, num, spec.size, bases[m], producers[m], consumers[m])
    blocks: dict[str, Block] = {}
    for name, b in model.blocks.items():
        defines = {str(k): "1" if v is True else str(v) for k, v in (b.defines or {}).items()
                   if v is not False and v is not None}  # fmt: skip
        defines.update((str(k), "1") for k, on in (b.flags or {}).items() if on)
        blocks[name] = Block(name, _source_of(b.source_file(), sources), list(b.mes), b.threads, b.in_, b.out, defines, b.control_in)
    qm = {k: getattr(model.qm, k) for k in model.qm.model_fields_set}  # what the layout sets
    lay = Layout(model.name or Path(source).stem, params, rings, blocks, model.exceptions, qm, source)
    lay.splits = splits
    section = model.control_section()
    if section is not None:
        lay.control = ControlSpec(section.placement, section.program, list(section.args), model.control_ring(),
                                  dict(section.options))  # fmt: skip
    return lay


def load_layout(
    path: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None, sources: list[Path] | None = None
) -> Layout:
    """Read and check a layout.  `path` may be a layout name ("pipelined"), a file, or
    an already-parsed mapping (tests).  `sources`: the folders block sources are looked
    up in, in order (an application's, npkit.toolchain.system.app; default: microcode/).  The layout, with its parameters substituted and
    -D overrides applied, is checked against layout_schema.LayoutFile; raises LinkError
    `file:line: field: problem`."""
    raw, source, located = _read(path)
    if not isinstance(raw, dict):
        raise LinkError(f"{source}: a layout is a mapping (params, rings, exceptions, qm, blocks)")

    def fail(where: tuple[Any, ...], message: str) -> Exception:
        return error_at(LinkError, source, where, message, located)

    from npkit.asm.base.cache import checked

    from .control import ControlSpec, option_names

    data = _substituted(raw, overrides or {}, source, located, fail)
    where: Any = str(MICROCODE) if sources is None else [str(d) for d in sources]
    from .i3d import option_names as i3d_option_names

    # what validation sees
    args = [source, where, SYS.ring_store, SYS.scratch_bytes, option_names(), i3d_option_names(), data]
    return checked("layout/1", args, lambda: _checked_layout(data, source, located, sources),
                   classes=(Layout, Ring, Block, ControlSpec))  # fmt: skip


def _checked_layout(data: dict[str, Any], source: str, located: Located | None,
                    sources: list[Path] | None = None) -> Layout:  # fmt: skip
    """load_layout without the cache, after the parameters are substituted."""
    # the schema (and pydantic) only when the cache has no result for this layout
    from npkit.asm.base.schema import validate

    from .control import option_names
    from .i3d import option_names as i3d_option_names
    from .layout_schema import LayoutFile

    model = validate(LayoutFile, data, source, located=located, error=LinkError,
                     context={"microcode": MICROCODE, "sources": sources, "ring_store": SYS.ring_store, "scratch_bytes": SYS.scratch_bytes,
                              "control_options": option_names(),
                              "control_options_by_program": {"i3d": i3d_option_names()}})  # fmt: skip
    return _layout(model, data["params"], source, sources)
