"""cffi declarations from a generated module (npkit.emulator.cffi_cache): the same
types and constants as parsing the headers, a new module when they change, and the
parse itself when the module cannot be written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cffi import FFI

from npkit.emulator import cffi_cache
from npkit.emulator.binding import _cdef_text, cdef_block
from npkit.emulator.pktlib import HEADER as PKT_HEADER


def _struct_types(cdef: str) -> list[str]:
    """The structures the declarations define (with a body: opaque ones have no size)."""
    return sorted(set(re.findall(r"typedef\s+struct\s+\w*\s*\{[^}]*\}\s*(\w+)\s*;", cdef)))


@pytest.mark.parametrize("name, cdef", [("npkemu", _cdef_text()), ("npkpkt", cdef_block(PKT_HEADER))])
def test_generated_module_has_the_parsed_types_and_constants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             name: str, cdef: str) -> None:  # fmt: skip
    monkeypatch.setattr(cffi_cache, "CACHE_DIR", tmp_path)
    cached, parsed = cffi_cache.ffi_for(name, cdef), cffi_cache._parsed(cdef)
    assert not isinstance(cached, FFI)  # the generated module's object, not a parse
    assert list(tmp_path.glob(f"_npk_cffi_{name}_*.py"))
    types = _struct_types(cdef)
    assert len(types) > 3
    for t in types:
        assert cached.sizeof(t) == parsed.sizeof(t), t
        assert cached.typeof(t).fields is not None
        assert [f for f, _ in cached.typeof(t).fields] == [f for f, _ in parsed.typeof(t).fields], t
    c, p = cached.dlopen(None), parsed.dlopen(None)
    names = sorted(n for n in dir(p) if n.startswith("NPK_"))
    assert sorted(n for n in dir(c) if n.startswith("NPK_")) == names
    assert all(getattr(c, n) == getattr(p, n) for n in names)
    if name == "npkemu":
        assert len(names) > 50  # the C API's constants


def test_changed_declarations_get_a_module_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cffi_cache, "CACHE_DIR", tmp_path)
    a = cffi_cache.ffi_for("t", "typedef struct { int x; } npk_a;")
    b = cffi_cache.ffi_for("t", "typedef struct { int x; long y; } npk_a;")
    assert len(list(tmp_path.glob("_npk_cffi_t_*.py"))) == 2
    assert a.sizeof("npk_a") == 4 and b.sizeof("npk_a") > 4


def test_unwritable_cache_parses_the_declarations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(cffi_cache, "CACHE_DIR", blocker / "build")  # a directory under a file
    ffi = cffi_cache.ffi_for("t", "typedef struct { short x; } npk_b;")
    assert isinstance(ffi, FFI) and ffi.sizeof("npk_b") == 2
