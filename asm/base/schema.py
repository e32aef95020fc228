"""Input files: read them with bounds, check them against their schema, say where they are wrong.

Every file format npkit reads (chip config, router config, traffic spec, layout, route
file, image metadata, debugger batch file) is declared once, as a pydantic model next to
its reader; this module is what those readers share:

- `read_text` reads a UTF-8 text file with a size limit: a byte-order mark is accepted, a
  NUL byte or a byte that is not UTF-8 is an error naming the file and line, and so is a
  file above the format's limit (`/dev/zero` gives an error, not a machine out of memory);
- `load_yaml` composes the YAML to nodes first, so that every value's path maps to the
  line of its key; duplicate keys, alias bombs and deep nesting are errors;
- `validate` checks data against a model and rewrites pydantic's errors as
  `file:line: field.path: what is wrong`, raised as the format's own error class;
- `irange`, `frange`, `Bounds` and `Doc` declare typed, bounded fields whose bounds the
  error messages quote and docs/formats.md (npkit.toolchain.commands.formats) lists.

A validator that finds a problem at a place other than its own field raises
`at(path, message)`; the path is relative to the model that raises it.  The reading
half (`read_text`, `load_yaml`, `Located`, `file_state`, `error_at`) is
npkit.asm.base.reading, which does not import pydantic; it is re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, Strict, ValidationError

from npkit.asm.base.reading import (  # noqa: F401  (re-exported: the readers' shared names)
    CONFIG_LIMIT,
    MAX_ELEMENTS,
    MIB,
    Bounds,
    Doc,
    InputError,
    Located,
    PathT,
    _fail,
    _parse_yaml,
    at,
    data_path,
    decode_text,
    error_at,
    file_state,
    load_yaml,
    parse_yaml,
    read_bytes,
    read_text,
    strict_int,
)

M = TypeVar("M", bound=BaseModel)

MAX_ERRORS = 8  # errors listed in one report


# ---- bounded fields ------------------------------------------------------------------------


def irange(lo: int | None = None, hi: int | None = None, **kw: Any) -> Any:
    """A strict integer (no bool, float or string) within lo..hi."""
    b = Bounds(lo, hi, **kw)
    return Annotated[int, Strict(), b]


def frange(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False) -> Any:  # fmt: skip
    """A finite number (an integer is accepted) within [lo, hi] (or open ends)."""
    b = Bounds(lo, hi, lo_open, hi_open)
    return Annotated[float, AfterValidator(_finite), b]


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError(f"must be a finite number, got {v}")
    return v


U8 = irange(0, 0xFF)
U16 = irange(0, 0xFFFF)
U32 = irange(0, 0xFFFF_FFFF)
U64 = irange(0, (1 << 64) - 1)
NonNegInt = irange(0)
PosInt = irange(1)


# ---- validation and reporting -------------------------------------------------------------


def validate(model: type[M], data: Any, source: str, *, located: Located | None = None,
             error: type[Exception] = InputError, context: dict[str, Any] | None = None) -> M:  # fmt: skip
    """`model` checked against `data`; errors raise `error` with `file:line: field: problem`."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise _fail(error, format_errors(exc, model, data, source, located)) from None
    except RecursionError:
        raise _fail(error, f"{source}: nested too deeply") from None


def format_errors(exc: ValidationError, model: type[BaseModel], data: Any, source: str,
                  located: Located | None = None) -> str:  # fmt: skip
    out = []
    errors = exc.errors(include_url=False)
    for err in errors[:MAX_ERRORS]:
        loc = tuple(err["loc"]) + tuple((err.get("ctx") or {}).get("at", ()))
        path, shown = data_path(loc, data, keep_last=err["type"] in ("missing", "npk_at"))
        line = located.line(path) if located is not None else None
        where = f"{source}:{line}" if line is not None else source
        origin = located.origin(path) if located is not None else None
        note = f" (set by {origin})" if origin else ""
        out.append(f"{where}: {shown or '(top level)'}: {message(err, model, path)}{note}")
    if len(errors) > MAX_ERRORS:
        out.append(f"{source}: ... and {len(errors) - MAX_ERRORS} more errors")
    return "\n".join(out)


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_MESSAGES = {
    "int_type": "expected an integer", "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number", "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "dict_type": "expected a mapping (key: value ...)",
    "list_type": "expected a list", "tuple_type": "expected a list",
    "model_type": "expected a mapping (key: value ...)", "model_attributes_type": "expected a mapping (key: value ...)",
}  # fmt: skip


def message(err: Any, model: type[BaseModel], path: PathT) -> str:
    kind = err["type"]
    if kind == "npk_at":
        return str(err["ctx"]["message"])
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        allowed = field_names(model_at(model, path[:-1]))
        return "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {_shown(err.get('input'))}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind in ("too_short", "too_long"):
        return f"{err['msg'].replace('List', 'list').replace('Dictionary', 'mapping')}"
    if kind == "literal_error":
        return f"expected {err['ctx']['expected']}, got {_shown(err.get('input'))}"
    return f"{err['msg']}, got {_shown(err.get('input'))}"


def field_names(model: Any) -> list[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or name for name, f in model.model_fields.items()]
    return []


def model_at(model: Any, path: PathT) -> Any:
    """The model class (or type) found by following `path` from `model`'s fields."""
    import typing

    tp: Any = model
    for elem in path:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fld = next((f for n, f in tp.model_fields.items() if (f.alias or n) == elem), None)
            if fld is None:
                return None
            tp = fld.annotation
            continue
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (list, tuple) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return None
    return _strip(tp)


def _strip(tp: Any) -> Any:
    """Annotated[X, ...] -> X; X | None -> X."""
    import types
    import typing

    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def walk_models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """`model` and every model its fields use, each once, in order of first use."""
    import typing

    seen: list[type[BaseModel]] = []

    def visit(tp: Any) -> None:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                return
            seen.append(tp)
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for a in typing.get_args(tp):
            visit(a)

    visit(model)
    yield from seen
