"""Input files without their schemas: bounded reads of text, YAML with the line of every
value, and `file:line: field: problem` errors.  npkit.asm.base.schema (the pydantic side:
models, validation) re-exports all of this; a reader that finds its checked result in
npkit's cache (npkit.asm.base.cache.checked) needs only this module, so a warm run
does not import pydantic.

Every file read (`read_bytes`) or looked at (`file_state`) is noted for npkit.asm.base.deps
while a `recording()` is active.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from npkit.asm.base.deps import file_state as file_state  # re-exported: readers name files by it
from npkit.asm.base.deps import note_read
from npkit.asm.base.yaml_data import fast_loader

if TYPE_CHECKING:
    import yaml
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema, PydanticCustomError

PathT = tuple[Any, ...]

MIB = 1 << 20
CONFIG_LIMIT = 16 * MIB  # a YAML config, spec or layout
MAX_ELEMENTS = 1_000_000  # values in a YAML document once its aliases are expanded
# An integer literal in a YAML or JSON input: a 64-bit value in binary with `_` every four
# digits is 81 characters.  Longer is an error with its line (Python itself refuses to
# convert more than 4,300 digits, with a ValueError that names no file).
MAX_INT_CHARS = 100
CHUNK = 1 << 20

# ---- reading text ----------------------------------------------------------------------


class InputError(ValueError):
    """Default error class of `read_text`/`load_yaml`/`validate` when the caller gives none."""


# ---- reading text ----------------------------------------------------------------------


def _fail(error: type[Exception], text: str) -> Exception:
    return error(text)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _is_null(st: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and (st.st_rdev, st.st_dev, st.st_ino) == (null.st_rdev, null.st_dev, null.st_ino)


def open_regular(path: str | Path, *, error: type[Exception] = InputError, what: str = "file",
                 limit: int | None = None) -> BinaryIO:  # fmt: skip
    """`path` opened for reading in binary, when it is a regular file (through symbolic
    links) of at most `limit` bytes, or the null device (an empty input, as in `--batch
    /dev/null`); a FIFO, another device, a directory or a socket is refused before a byte
    is read.  The file is opened without blocking (a FIFO with no writer
    would hold the open forever) and looked at by the descriptor, so what is checked is
    what is read."""
    p = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags)
    except (OSError, ValueError) as e:
        raise _fail(error, f"{p}: cannot read {what}: {getattr(e, 'strerror', None) or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) and not _is_null(st):
            raise _fail(error, f"{p}: {what} is {_kind(st.st_mode)}, not a regular file: refused")
        if limit is not None and st.st_size > limit:
            raise _fail(error, f"{p}: {what} is larger than {_size(limit)} (the limit for this format)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, *, limit: int, error: type[Exception] = InputError,
               what: str = "file", text: bool = False) -> bytes:  # fmt: skip
    """The bytes of `path`, a regular file (`open_regular`), at most `limit` of them (more
    is an error, found without reading the rest: a file can grow while it is read).  With
    `text`, a NUL byte stops the read at once (binary data)."""
    p = Path(path)
    chunks: list[bytes] = []
    size = 0
    with open_regular(p, error=error, what=what, limit=limit) as f:
        try:
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
    data = b"".join(chunks)
    note_read(p, data)
    return data


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


def _size(n: int) -> str:
    return f"{n // MIB} MB" if n >= MIB and n % MIB == 0 else f"{n:,} bytes"


# ---- JSON ---------------------------------------------------------------------------------


class _LongInt(Exception):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _json_int(literal: str) -> int:
    if len(literal) > MAX_INT_CHARS:
        raise _LongInt(literal)
    return int(literal)


def parse_json(text: str, source: str, *, error: type[Exception] = InputError, what: str = "file") -> Any:
    """JSON text as data; bad JSON and an integer past MAX_INT_CHARS are errors with
    their line."""
    try:
        return json.loads(text, parse_int=_json_int)
    except _LongInt as e:
        line = text.count("\n", 0, max(text.find(e.literal), 0)) + 1
        raise _fail(error, f"{source}:{line}: {_long_int(e.literal)}") from None
    except json.JSONDecodeError as e:
        raise _fail(error, f"{source}:{e.lineno}: {what} is not valid JSON ({e.msg}, column {e.colno})") from None
    except RecursionError:
        raise _fail(error, f"{source}: {what} is nested too deeply") from None


def load_json(path: str | Path, *, limit: int = CONFIG_LIMIT, error: type[Exception] = InputError,
              what: str = "file") -> Any:  # fmt: skip
    """Read and parse a JSON file (bounded read, see `read_text`)."""
    return parse_json(read_text(path, limit=limit, error=error, what=what), str(path), error=error, what=what)


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


_INT_TAG = "tag:yaml.org,2002:int"


def _long_int(literal: str) -> str:
    return f"an integer of {len(literal):,} characters is too long (at most {MAX_INT_CHARS})"


class _Walker:
    """Line map, duplicate keys and expanded size of a composed YAML document."""

    def __init__(self, loader: yaml.SafeLoader, source: str, error: type[Exception]) -> None:
        self.loader, self.source, self.error = loader, source, error
        self.lines: dict[PathT, int] = {}
        self.visited: set[int] = set()
        self.sizes: dict[int, int] = {}
        self.active: set[int] = set()

    def key(self, node: yaml.Node, path: PathT) -> Any:
        import yaml

        if isinstance(node, yaml.ScalarNode):
            self.check_scalar(node, path)
            return self.loader.construct_object(node)
        return None  # complex keys: the constructor rejects the unhashable ones

    def check_scalar(self, node: yaml.ScalarNode, path: PathT) -> None:
        """An integer too long to be a value of any format (see MAX_INT_CHARS)."""
        if node.tag == _INT_TAG and len(node.value) > MAX_INT_CHARS:
            where = f"{self.source}:{node.start_mark.line + 1}"
            raise _fail(self.error, f"{where}: {_dotted(path) or '(top level)'}: "
                                    f"{_long_int(node.value)}")  # fmt: skip

    def walk(self, node: yaml.Node, path: PathT, line: int) -> int:
        """Record lines under `node` (first visit only) and return its expanded size."""
        import yaml

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
        if isinstance(node, yaml.ScalarNode):
            self.check_scalar(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                size += self.walk(item, (*path, i), item.start_mark.line + 1)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = self.key(key_node, path)
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
    """Parse YAML text into data and its line map (one document); the same text read
    before comes from the content cache (npkit.asm.base.cache.plain_result), without
    PyYAML."""
    from npkit.asm.base.cache import package_digest, plain_result

    def parse() -> tuple[Any, dict[PathT, int]]:
        located = _parse_located(text, source, error)
        return located.data, located.lines

    data, lines = plain_result("yaml-located", (text, source, package_digest("yaml")), parse)
    return Located(data, source, lines)


def _parse_located(text: str, source: str, error: type[Exception]) -> Located:
    import yaml

    loader = fast_loader(text)
    if loader is not yaml.SafeLoader:
        try:
            return _parse_yaml(text, source, error, loader)
        except Exception:  # noqa: BLE001 - read again below, for the pure-Python parser's message
            pass
    return _parse_yaml(text, source, error, yaml.SafeLoader)


def _parse_yaml(text: str, source: str, error: type[Exception], loader_class: type[yaml.SafeLoader]) -> Located:
    import yaml

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


# ---- bounded fields (the schemas declare them; the checks need no pydantic) ----------------


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
        from pydantic_core import core_schema  # called while pydantic builds a schema: loaded

        return core_schema.no_info_after_validator_function(self, handler(source))


@dataclass(frozen=True)
class Doc:
    """How docs/formats.md shows a field whose Python type says little (a form parsed by
    a validator): its type text and, optionally, its range text."""

    type: str
    range: str = ""


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
    from pydantic_core import PydanticCustomError  # raised inside validation: pydantic is loaded

    p = path if isinstance(path, tuple) else (path,)
    return PydanticCustomError("npk_at", "{message}", {"message": message, "at": p})


# ---- errors --------------------------------------------------------------------------------


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
