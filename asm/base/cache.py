"""A content-addressed cache of what a run builds before its first cycle: linked system
images (with their SRAM tables), generated route files, and input files as checked
against their schemas (`checked`: a chip config, router config, traffic spec, layout or
image metadata read again with the same content is not validated again, and a warm run
does not import pydantic).

    key = content_key("image", layout_text, params, router, chip_config, code_digest())
    data = cache_get("image", key)             # None on a miss
    cache_put("image", key, data)

Entries live in $NPK_CACHE_DIR (default $XDG_CACHE_HOME/npkit, else ~/.cache/npkit);
NPK_CACHE_DIR=off turns the cache off.  A key is the sha256 of everything the entry is
built from, including the source of the npkit code and microcode that builds it
(`code_digest`), so a stale entry is never read: a change anywhere makes another key.
Writes go to a temporary file in the same directory, then os.replace: a reader sees a
whole entry or none, and concurrent runs building the same entry are harmless (the last
rename wins; the bytes are the same).  The cache keeps itself under MAX_BYTES by removing
the entries used least recently.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import tempfile
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path, PosixPath, PurePosixPath
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]  # the tree (npkit.toolchain.system.paths.ROOT)

MAX_BYTES = 2 << 30  # 2 GB
# Bytes this process has put since it last trimmed (-1: it has not yet).  A trim stats
# every entry (thousands in a cache in use: ~0.1 s), so a process trims at its first put
# and then only after an eighth of MAX_BYTES more: the cache stays within 1.125x of it.
_put_bytes = [-1]
CODE_DIRS = ("asm", "toolchain", "emulator/traffic", "emulator/pkt", "microcode")
CODE_SUFFIXES = (".py", ".uc", ".h", ".c", ".yaml")


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is off."""
    env = os.environ.get("NPK_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "npkit"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the npkit sources that build images and tables (Python, microcode, the
    packet library): each file's name, size and modification time (a stat, not a read: a
    file touched without a change only costs a rebuild)."""
    h = hashlib.sha256()
    for d in CODE_DIRS:
        found: list[tuple[str, ...]] = []  # paths below ROOT as parts: sorted as pathlib sorts paths
        for top, dirs, files in os.walk(ROOT / d):  # os.walk: a third of rglob's time
            dirs[:] = [n for n in dirs if n != "__pycache__"]
            rel = Path(top).relative_to(ROOT).parts
            found += [(*rel, n) for n in files if os.path.splitext(n)[1] in CODE_SUFFIXES]
        for parts in sorted(found):
            st = ROOT.joinpath(*parts).stat()
            h.update(f"{'/'.join(parts)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def content_key(*parts: Any) -> str:
    """sha256 of the parts (JSON, keys sorted; bytes and paths by content)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes):
            h.update(b"b" + hashlib.sha256(part).digest())
        else:
            h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def _path(kind: str, key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / kind / key[:2] / key


def cache_get(kind: str, key: str) -> bytes | None:
    p = _path(kind, key)
    if p is None:
        return None
    try:
        data = p.read_bytes()
    except OSError:
        return None
    try:
        os.utime(p)  # most recently used
    except OSError:
        pass
    return data


def cache_put(kind: str, key: str, data: bytes) -> None:
    """Store an entry (atomically); a cache that cannot be written is not an error."""
    p = _path(kind, key)
    if p is None:
        return
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=p.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _put_bytes[0] = -1 if _put_bytes[0] < 0 else _put_bytes[0] + len(data)
        if _put_bytes[0] < 0 or _put_bytes[0] > MAX_BYTES // 8:
            _trim(p.parents[2])
            _put_bytes[0] = 0
    except OSError:
        return


def cache_file(kind: str, key: str) -> Path | None:
    """The path of an entry if it exists (for entries used as files, e.g. route files)."""
    p = _path(kind, key)
    return p if p is not None and p.exists() else None


def _trim(root: Path) -> None:
    """Remove the least recently used entries while they take more than MAX_BYTES.  Only
    entries (KIND/xx/KEY) count and go: other trees under the directory, such as the
    builds `npk bench --against` keeps there, are not the cache's to remove."""
    entries = []
    total = 0
    for p in root.glob("*/??/*"):
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".tmp-"):
            st = p.stat()
            entries.append((st.st_mtime, st.st_size, p))
            total += st.st_size
    if total <= MAX_BYTES:
        return
    for _mtime, size, p in sorted(entries):
        p.unlink(missing_ok=True)
        total -= size
        if total <= MAX_BYTES * 3 // 4:
            break


# ---- checked input files ----------------------------------------------------------------

T = TypeVar("T")
_PLAIN = (str, int, float, bool, bytes, type(None))


def plain(value: Any) -> bool:
    """True for data whose repr tells apart any two values a schema could tell apart (and
    is the same for equal ones): str/int/float/bool/bytes/None in lists, tuples and dicts."""
    if type(value) in _PLAIN:
        return True
    if type(value) in (list, tuple):
        return all(plain(v) for v in value)
    if type(value) is dict:
        return all(plain(k) and plain(v) for k, v in value.items())
    return False


@cache
def package_digest(name: str) -> str:
    """sha256 over an installed package's own files (path, size, modification time),
    found without importing it: another version, or libyaml's extension built or not, is
    another digest."""
    import importlib.util

    h = hashlib.sha256(name.encode())
    spec = importlib.util.find_spec(name)
    where = Path(spec.origin).parent if spec is not None and spec.origin else None
    for p in sorted(where.iterdir()) if where is not None else ():
        if p.is_file():
            st = p.stat()
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@lru_cache(maxsize=1)
def checked_digest() -> str:
    """What a checked input file's result depends on besides the input: `code_digest`,
    the emulator's own modules (the chip config's schema, its loader), PyYAML, and the
    pydantic and pydantic_core installed (none of them imported)."""
    h = hashlib.sha256(f"{code_digest()}\n".encode())
    for p in sorted((ROOT / "emulator").glob("*.py")):
        st = p.stat()
        h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    for name in ("yaml", "pydantic", "pydantic_core"):
        h.update(package_digest(name).encode())
    return h.hexdigest()


class _Unpickler(pickle.Unpickler):
    """Builds only plain data and the classes it is told of: an entry cannot make
    anything else (pickle's "restricting globals")."""

    def __init__(self, data: bytes, allowed: dict[tuple[str, str], Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        found = self.allowed.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache entry")
        return found


PLAIN_LIMIT = 1 << 20  # plain_result: inputs longer than this are not kept


def plain_result(kind: str, parts: tuple[str, ...], build: Callable[[], T]) -> T:
    """`build()`, or its result from before for the same `parts` (the whole input: a
    text and what reads it) when that result was plain data (`plain`: no class is built
    back from an entry).  Errors are raised, never stored."""
    key = (content_key(kind, *parts) if cache_dir() is not None and sum(map(len, parts)) <= PLAIN_LIMIT
           else None)  # fmt: skip
    if key is not None:
        data = cache_get(kind, key)
        if data is not None:
            try:
                return _Unpickler(data, {}).load()  # type: ignore[no-any-return]
            except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
                pass
    result = build()
    if key is not None and plain(result):
        cache_put(kind, key, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return result


def checked(kind: str, args: Any, build: Callable[[], T], classes: tuple[type, ...] = ()) -> T:
    """`build()` (a reader that checks its input against a schema), or the result it gave
    before for the same `args`, code and pydantic while the files it read (or looked at)
    are unchanged (npkit.asm.base.deps.recording).  `args` is what the result is a
    function of besides those files (a path, overrides, parsed data; its repr is in the
    key); when it is not `plain` the result is built every time.  The result is stored with pickle and read back with
    `classes` (and Path) the only classes allowed.  Errors are raised, never stored."""
    from npkit.asm.base.deps import note, recording, unchanged

    # the working directory too: relative paths in `args` and among the files noted name
    # other files from elsewhere, and a result may hold paths resolved against it
    key = (content_key(kind, repr(args), os.getcwd(), checked_digest())
           if plain(args) and cache_dir() is not None else None)  # fmt: skip
    if key is not None:
        data = cache_get("checked", key)
        if data is not None:
            allowed = {(c.__module__, c.__qualname__): c for c in (*classes, PosixPath, PurePosixPath)}
            try:
                deps, result = _Unpickler(data, allowed).load()
            except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
                deps = None
            if deps is not None and unchanged(deps):
                note(deps)  # an enclosing reader depends on them too
                return result  # type: ignore[no-any-return]
    with recording() as deps:
        result = build()
    if key is not None:
        try:
            entry = pickle.dumps((deps, result), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return result
        cache_put("checked", key, entry)
    return result
