"""cffi declarations parsed once, not at every start of a process.

cffi reads a library's declarations with pycparser: for the C API's headers that is
about 40 ms each time a process starts.  cffi can instead write a small Python module
that holds the parsed declarations (its "out-of-line ABI mode"); importing it takes
2 ms.  `ffi_for(name, cdef)` writes that module under emulator/build/, named by the
hash of the declarations (a changed header gets a new one), and imports it.  Where it
cannot be written or read, the declarations are parsed as before.

    ffi = ffi_for("npkemu", cdef_text)
    lib = ffi.dlopen("emulator/build/libnpkemu.so")
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_DIR = Path(__file__).resolve().parent / "build"


def _parsed(cdef: str) -> Any:
    from cffi import FFI  # pycparser and all: only when there is something to parse

    ffi = FFI()
    ffi.cdef(cdef)
    return ffi


def _write(module: str, cdef: str, path: Path) -> None:
    """The module for `cdef`, written to a temporary file and renamed (concurrent
    processes write the same bytes; one rename wins)."""
    from cffi.recompiler import make_py_source

    ffi = _parsed(cdef)
    ffi.set_source(module, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{module}.", suffix=".py", dir=path.parent)
    os.close(fd)
    try:
        make_py_source(ffi, module, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def ffi_for(name: str, cdef: str) -> Any:
    """An FFI with `cdef`'s declarations (cffi's FFI or the equivalent object of a
    generated module: the same types, constants, dlopen, new, cast, callback, ...)."""
    module = f"_npk_cffi_{name}_{hashlib.sha256(cdef.encode()).hexdigest()[:16]}"
    path = CACHE_DIR / f"{module}.py"
    try:
        if not path.exists():
            _write(module, cdef, path)
        spec = importlib.util.spec_from_file_location(module, path)
        if spec is None or spec.loader is None:
            return _parsed(cdef)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.ffi
    except (OSError, SyntaxError, AttributeError, ImportError):
        return _parsed(cdef)
