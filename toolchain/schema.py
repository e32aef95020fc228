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
`at(path, message)`; the path is relative to the model that raises it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, GetCoreSchemaHandler, Strict, ValidationError
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from npkit.toolchain.yaml_data import fast_loader

PathT = tuple[Any, ...]
M = TypeVar("M", bound=BaseModel)

MIB = 1 << 20
CONFIG_LIMIT = 16 * MIB  # a YAML config, spec or layout
MAX_ELEMENTS = 1_000_000  # values in a YAML document once its aliases are expanded
MAX_ERRORS = 8  # errors listed in one report
CHUNK = 1 << 20


class InputError(ValueError):
    """Default error class of `read_text`/`load_yaml`/`validate` when the caller gives none."""


# ---- reading text ----------------------------------------------------------------------


def _fail(error: type[Exception], text: str) -> Exception:
    return error(text)


def read_bytes(path: str | Path, *, limit: int, error: type[Exception] = InputError,
               what: str = "file", text: bool = False) -> bytes:  # fmt: skip
    """The bytes of `path`, at most `limit` of them (more is an error, found without
    reading the rest).  With `text`, a NUL byte stops the read at once (binary data)."""
    p = Path(path)
    chunks: list[bytes] = []
    size = 0
    try:
        with open(p, "rb") as f:
            while size <= limit:
                chunk = f.read(min(CHUNK, limit + 1 - size))
                if not chunk:
                    break
                if text and b"\0" in chunk:
                    line = b"".join(chunks).count(b"\n") + chunk.count(b"\n", 0, chunk.index(b"\0")) + 1
                    raise _fail(error, f"{p}:{line}: {what} holds a NUL byte: a binary file, not text")
                chunks.append(chunk)
                size += len(chunk)
    except OSError as e:
        raise _fail(error, f"{p}: cannot read {what}: {e.strerror or e}") from None
    if size > limit:
        raise _fail(error, f"{p}: {what} is larger than {_size(limit)} (the limit for this format)")
    return b"".join(chunks)


def decode_text(data: bytes, source: str, *, error: type[Exception] = InputError,
                what: str = "file") -> str:  # fmt: skip
    """UTF-8 text (a leading byte-order mark is dropped); a NUL byte or an invalid
    sequence is an error with its line."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise _fail(error, f"{source}:{line}: {what} holds a NUL byte: a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise _fail(error, f"{source}:{line}: {what} is not UTF-8 text "
                           f"(byte 0x{data[e.start]:02x} at column {col})") from None  # fmt: skip
    return text.removeprefix("\ufeff")


def read_text(path: str | Path, *, limit: int = CONFIG_LIMIT, error: type[Exception] = InputError,
              what: str = "file") -> str:  # fmt: skip
    """Read a UTF-8 text file of at most `limit` bytes (see module doc)."""
    data = read_bytes(path, limit=limit, error=error, what=what, text=True)
    return decode_text(data, str(path), error=error, what=what)


def file_state(path: Path) -> str:
    """'file', 'missing' or what else is there (for messages about a named file); never
    raises for a name the system refuses (too long, a NUL byte)."""
    try:
        if path.is_file():
            return "file"
        return "not a regular file" if path.exists() else "missing"
    except (OSError, ValueError) as e:
        return f"unusable ({getattr(e, 'strerror', None) or e})"


def _size(n: int) -> str:
    return f"{n // MIB} MB" if n >= MIB and n % MIB == 0 else f"{n:,} bytes"


# ---- YAML with lines ----------------------------------------------------------------------


@dataclass
class Located:
    """A parsed document and the line of every path in it (1-based; the key's line for a
    mapping value)."""

    data: Any
    source: str
    lines: dict[PathT, int] = field(default_factory=dict)
    unlocated: dict[PathT, str] = field(default_factory=dict)  # paths set from elsewhere -> by what

    def origin(self, path: PathT) -> str | None:
        """What set `path` instead of the file (an override), if anything did."""
        for n in range(1, len(path) + 1):
            note = self.unlocated.get(tuple(path[:n]))
            if note is not None:
                return note
        return None

    def line(self, path: PathT) -> int | None:
        if self.origin(path) is not None:
            return None
        for n in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:n]))
            if line is not None:
                return line
        return None


class _Walker:
    """Line map, duplicate keys and expanded size of a composed YAML document."""

    def __init__(self, loader: yaml.SafeLoader, source: str, error: type[Exception]) -> None:
        self.loader, self.source, self.error = loader, source, error
        self.lines: dict[PathT, int] = {}
        self.visited: set[int] = set()
        self.sizes: dict[int, int] = {}
        self.active: set[int] = set()

    def key(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node)
        return None  # complex keys: the constructor rejects the unhashable ones

    def walk(self, node: yaml.Node, path: PathT, line: int) -> int:
        """Record lines under `node` (first visit only) and return its expanded size."""
        nid = id(node)
        if nid in self.active:
            raise _fail(self.error, f"{self.source}:{node.start_mark.line + 1}: a YAML alias refers to "
                                    "a node that contains it (recursive structure)")  # fmt: skip
        first = nid not in self.visited
        if first:
            self.lines.setdefault(path, line)
        elif nid in self.sizes:
            return self.sizes[nid]
        self.visited.add(nid)
        self.active.add(nid)
        size = 1
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                size += self.walk(item, (*path, i), item.start_mark.line + 1)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = self.key(key_node)
                kline = key_node.start_mark.line + 1
                if key_node.tag != "tag:yaml.org,2002:merge" and isinstance(key_node, yaml.ScalarNode):
                    try:
                        if key in seen:
                            shown = ".".join(map(str, (*path, key)))
                            raise _fail(self.error, f"{self.source}:{kline}: {shown}: duplicate key "
                                                    f"(first on line {seen[key]})")  # fmt: skip
                        seen[key] = kline
                    except TypeError:
                        pass  # unhashable: the constructor says so
                size += self.walk(value_node, (*path, key), kline) + 1
        self.active.discard(nid)
        self.sizes[nid] = size
        if size > MAX_ELEMENTS:
            raise _fail(self.error, f"{self.source}: the document expands to more than {MAX_ELEMENTS:,} "
                                    "values (YAML aliases repeated many times?)")  # fmt: skip
        return size


def parse_yaml(text: str, source: str, *, error: type[Exception] = InputError) -> Located:
    """Parse YAML text into data and its line map (one document)."""
    loader = fast_loader(text)
    if loader is not yaml.SafeLoader:
        try:
            return _parse_yaml(text, source, error, loader)
        except Exception:  # noqa: BLE001 - read again below, for the pure-Python parser's message
            pass
    return _parse_yaml(text, source, error, yaml.SafeLoader)


def _parse_yaml(text: str, source: str, error: type[Exception], loader_class: type[yaml.SafeLoader]) -> Located:
    loader: yaml.SafeLoader | None = None
    try:
        loader = loader_class(text)
        node = loader.get_single_node()
        if node is None:
            return Located(None, source, {(): 1})
        walker = _Walker(loader, source, error)
        walker.walk(node, (), node.start_mark.line + 1)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise _fail(error, f"{where}: YAML syntax: {e.problem or e.context}") from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        raise _fail(error, f"{source}:{line}: character U+{e.character:04X} is not allowed in YAML") from None
    except yaml.YAMLError as e:
        raise _fail(error, f"{source}: YAML: {e}") from None
    except RecursionError:
        raise _fail(error, f"{source}: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    return Located(data, source, walker.lines)


def load_yaml(path: str | Path, *, limit: int = CONFIG_LIMIT, error: type[Exception] = InputError,
              what: str = "file") -> Located:  # fmt: skip
    """Read and parse a YAML file (bounded read, see `read_text`)."""
    return parse_yaml(read_text(path, limit=limit, error=error, what=what), str(path), error=error)


# ---- bounded fields ------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """An inclusive (or open) numeric range; checks values and describes itself."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    multiple_of: int | None = None
    power_of_two: bool = False

    def text(self) -> str:
        def num(v: float) -> str:
            if isinstance(v, int) and abs(v) >= 1 << 16 and v == 1 << (v.bit_length() - 1):
                return f"2^{v.bit_length() - 1}"
            if isinstance(v, int) and abs(v) >= 1 << 16 and v + 1 == 1 << v.bit_length():
                return f"2^{v.bit_length()}-1"
            return str(v) if isinstance(v, int) else f"{v:g}"

        if self.lo_open or self.hi_open or any(isinstance(v, float) for v in (self.lo, self.hi)):
            lo = "-inf" if self.lo is None else num(self.lo)
            hi = "inf" if self.hi is None else num(self.hi)
            out = f"{'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        elif self.hi is None:
            out = f">= {num(self.lo)}" if self.lo is not None else "any"
        else:
            out = f"{num(self.lo) if self.lo is not None else ''}..{num(self.hi)}"
        if self.multiple_of:
            out += f", a multiple of {self.multiple_of}"
        if self.power_of_two:
            out += ", a power of two"
        return out

    def __call__(self, v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"must be a finite number in {self.text()}, got {v}")
        low = self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo)
        high = self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi)
        bad = low or high
        bad = bad or bool(self.multiple_of and v % self.multiple_of)
        bad = bad or (self.power_of_two and (v <= 0 or int(v) & (int(v) - 1) != 0))
        if bad:
            raise ValueError(f"must be in {self.text()}, got {v if isinstance(v, int) else format(v, 'g')}")
        return v

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """In an `Annotated` field, the bounds check runs after the type's own: what
        `AfterValidator(self)` does, without pydantic inspecting the signature of
        `__call__` for every field (a tenth of the schemas' build time)."""
        return core_schema.no_info_after_validator_function(self, handler(source))


@dataclass(frozen=True)
class Doc:
    """How docs/formats.md shows a field whose Python type says little (a form parsed by
    a validator): its type text and, optionally, its range text."""

    type: str
    range: str = ""


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


def strict_int(v: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (not a bool, float or string) within lo..hi, for parsers of polymorphic
    forms; ValueError says what was expected."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{what}: expected an integer, got {v!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{what}: must be in {Bounds(lo, hi).text()}, got {v}")
    return v


def at(path: PathT | str | int, message: str) -> PydanticCustomError:
    """An error to raise from a validator about `path` (relative to the validated model)."""
    p = path if isinstance(path, tuple) else (path,)
    return PydanticCustomError("npk_at", "{message}", {"message": message, "at": p})


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


def error_at(error: type[Exception], source: str, path: PathT, message: str,
             located: Located | None = None) -> Exception:  # fmt: skip
    """An error about `path` outside validation (a file the schema names cannot be read,
    say), in the same `file:line: field: problem` form."""
    data = located.data if located is not None else None
    _, shown = data_path(path, data, keep_last=True) if data is not None else (path, _dotted(path))
    line = located.line(path) if located is not None else None
    where = f"{source}:{line}" if line is not None else source
    origin = located.origin(path) if located is not None else None
    note = f" (set by {origin})" if origin else ""
    return _fail(error, f"{where}: {shown or '(top level)'}: {message}{note}")


def _dotted(path: PathT) -> str:
    out = ""
    for e in path:
        out += f"[{e}]" if isinstance(e, int) else (f".{e}" if out else str(e))
    return out


def data_path(loc: PathT, data: Any, keep_last: bool = False) -> tuple[PathT, str]:
    """The part of a pydantic location that names places in `data` (validator and union
    tags dropped), and its text (`ports[1].mac`, `units.sram.channels`)."""
    path: list[Any] = []
    shown = ""
    node = data
    for n, elem in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(node, dict) and _has_key(node, elem):
            node = node[elem]
            shown += f".{elem}" if shown else str(elem)
        elif isinstance(node, list) and isinstance(elem, int) and 0 <= elem < len(node):
            node = node[elem]
            shown += f"[{elem}]"
        elif last and keep_last or node is None and keep_last or isinstance(node, dict) and isinstance(elem, str) and _is_field(elem):
            node = None
            shown += f".{elem}" if shown else str(elem)
        else:
            continue
        path.append(elem)
    return tuple(path), shown


def _has_key(d: dict[Any, Any], key: Any) -> bool:
    try:
        return key in d
    except TypeError:
        return False


def _is_field(elem: str) -> bool:
    """A plain field name (not a validator tag such as `function-after[...]`, `int`, `list[int]`)."""
    return elem.isidentifier() and elem not in ("int", "float", "str", "bool", "list", "dict", "none")


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

