"""libnpkemu.so exports its API and nothing else: every function npk_emu.h and npk_msf.h
declare, and none of the core's own (internal.h hides them, so that calls between the
core's files are direct, not through the library's PLT)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from npkit.emulator.binding import LIBRARY, _cdef_text


def _exported_functions() -> set[str]:
    if not shutil.which("nm"):
        pytest.fail("nm (GNU Binutils, which `make` installs) is not on PATH")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIBRARY)], check=True, capture_output=True, text=True
    ).stdout
    return {
        f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] == "T"
    }


def test_the_library_exports_exactly_the_declared_api() -> None:
    declared = set(re.findall(r"\b(npk_\w+)\s*\(", _cdef_text()))
    exported = _exported_functions()
    assert "npk_run" in declared and "npk_set_msf" in declared  # (the headers were read)
    assert declared - exported == set(), "declared by the API, missing from the library"
    assert exported - declared == set(), "exported by the library, not part of the API"
    # the core's own functions, hot and cold, are not there
    assert {"npk_ctx_signal", "npk_me_advance", "npk_sram_read", "npk_fault_at"}.isdisjoint(
        exported
    )
