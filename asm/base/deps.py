"""The files a reader depended on.  `recording()` notes every file read or looked at
(npkit.asm.base.reading's `read_bytes`, `file_state`) while it is active: what a checked
result depends on besides its own input, such as a chip config's `base` or a router
config's route file.  `unchanged(deps)` says whether they are as noted.  A module of its
own because reading and the cache (npkit.asm.base.cache.checked) both use it."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

Deps = dict[str, tuple[str, str]]  # path -> ("bytes", sha256) or ("state", file_state)
_RECORDING: list[Deps] = []  # the active recorders (nested loaders: each notes all)


@contextmanager
def recording() -> Iterator[Deps]:
    """Note the files read (their content) and looked at (their state) in the block."""
    deps: Deps = {}
    _RECORDING.append(deps)
    try:
        yield deps
    finally:
        _RECORDING.remove(deps)


def _note(path: str | Path, kind: str, value: str) -> None:
    for deps in _RECORDING:
        if kind == "bytes" or str(path) not in deps:  # content says more than state
            deps[str(path)] = (kind, value)


def note_read(path: str | Path, data: bytes) -> None:
    """Note a file read whole (its content's digest), while anything records."""
    if _RECORDING:
        _note(path, "bytes", hashlib.sha256(data).hexdigest())


def note(deps: Deps) -> None:
    """Note files another reader depended on (a result taken from the cache inside a block)."""
    for path, (kind, value) in deps.items():
        _note(path, kind, value)


def unchanged(deps: Deps) -> bool:
    """True when every noted file still has the content (or state) noted."""
    for path, (kind, value) in deps.items():
        if kind == "state":
            if file_state(Path(path)) != value:
                return False
            continue
        try:  # without blocking: a file replaced by a FIFO since is changed, not waited on
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return False
                os.set_blocking(f.fileno(), True)
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return False
        if digest != value:
            return False
    return True


def _state(path: Path) -> str:
    try:
        if path.is_file():
            return "file"
        return "not a regular file" if path.exists() else "missing"
    except (OSError, ValueError) as e:
        return f"unusable ({getattr(e, 'strerror', None) or e})"


def file_state(path: Path) -> str:
    """'file', 'missing' or what else is there (for messages about a named file); never
    raises for a name the system refuses (too long, a NUL byte)."""
    state = _state(path)
    if _RECORDING:
        _note(path, "state", state)
    return state
