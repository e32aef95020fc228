"""Output files: written whole or not at all (a temporary beside the file, renamed over
it), and an error that names the file the user asked for."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


class OutputError(OSError):
    """A file npkit could not write; the message is `cannot write FILE: reason`."""


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically: a failed write leaves neither a partial file nor
    the temporary behind, and raises OutputError (a missing directory, no permission, a
    full disk)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
