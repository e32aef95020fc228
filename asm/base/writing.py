"""Output files: each written whole or not at all, and a path that cannot be written is one
`cannot write PATH: reason` error (OutputError), never a traceback.

`write_all` writes a set of files together (an image and its listing): each goes to a
temporary beside it, and they are renamed into place once all are written, so a failure
leaves neither the new files nor temporaries behind.  `check_writable` tries a path
before a long computation whose result goes there (a trace after an emulation run).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class OutputError(ValueError):
    """An output file that cannot be written; the message names it and says why."""

    def __init__(self, path: str | Path, reason: OSError | str):
        why = reason if isinstance(reason, str) else (reason.strerror or str(reason))
        super().__init__(f"cannot write {path}: {why}")
        self.path = Path(path)


class SameFileError(OutputError):
    """An output that names an input of the same command, or another of its outputs: the
    write would destroy what is being read, or one output the other."""


Named = tuple[str, str | Path | None]  # (how the command names it: "-o", "SOURCE", ...; the path)


def _same(a: Path, b: Path) -> bool:
    """The same file or directory: one inode when both exist, else the same normalised path."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.abspath(a) == os.path.abspath(b)


def refuse_overwrite(outputs: list[Named], inputs: list[Named]) -> None:
    """Raise SameFileError when an output is one of the inputs (a link, a path spelt
    otherwise, the same directory) or two outputs are one file; None paths are not given."""
    outs = [(name, Path(p)) for name, p in outputs if p is not None]
    ins = [(name, Path(p)) for name, p in inputs if p is not None]
    for i, (name, out) in enumerate(outs):
        for in_name, path in ins:
            if _same(out, path):
                raise SameFileError(out, f"{name} is also the input {in_name}: writing it would destroy it")
        for other, path in outs[:i]:
            if _same(out, path):
                raise SameFileError(out, f"{other} and {name} name the same file")


def _mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask  # like any new file, not mkstemp's 0600


def write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write every file or none (see the module doc); raises OutputError naming the file."""
    temps: list[tuple[str, Path]] = []
    mode = _mode()
    current = files[0][0] if files else Path()
    try:
        for path, data in files:
            current = path
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
        for tmp, path in temps:
            current = path
            os.replace(tmp, path)
    except BaseException as e:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise OutputError(current, e) from None
        raise


def write_output(path: str | Path, data: bytes | str) -> None:
    """Write one file whole (text as UTF-8); raises OutputError."""
    write_all([(Path(path), data.encode() if isinstance(data, str) else data)])


def make_dir(path: str | Path) -> Path:
    """An output directory, made with its parents when missing; OutputError when it cannot
    be (a file is in the way, a parent is a file, no permission)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(p, "a file is there, not a directory") from None
    except OSError as e:
        raise OutputError(p, e) from None
    return p


def check_writable(path: str | Path) -> None:
    """Raise OutputError now if `path` could not be written later: its directory is
    missing or not writable, or the path is a directory.  Nothing is left behind."""
    p = Path(path)
    if p.is_dir():
        raise OutputError(p, os.strerror(errno.EISDIR))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(p.parent))
    except OSError as e:
        raise OutputError(p, e) from None
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)
