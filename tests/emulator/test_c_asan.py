"""Runs the C test driver built with AddressSanitizer/UBSan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from npkit.asm.isa import encode

from .test_nn import CONSUMER, PRODUCER
from .util import assemble

EMU = Path(__file__).resolve().parents[2] / "emulator"
DRIVER = EMU / "build" / "test_core_asan"
SOURCE = EMU / "tests" / "c" / "test_core.c"
# microcode of test_faults in test_core.c (issue 10: a scratch address near 2^32 crashed the host)
SCRATCH_WRAP = ["immed[a0, 0xFFFFFFFC]", "scratch[write, $0, a0, 0, 1], ctx_swap[s1]",
                "scratch[read, $0, a0, 0, 1], ctx_swap[s1]", "halt"]  # fmt: skip
SCRATCH_WRAP_LOOP = ["immed[a0, 0xFFFFFFFC]", "immed[a1, 40]", "loop#: scratch[write, $0, a0, 0, 1], ctx_swap[s1]",
                     "alu[a1, a1, -, 1]", "bne[loop#]", "halt"]  # fmt: skip


def _build() -> None:
    subprocess.run(["make", "-s", "-C", str(EMU), f"PY={sys.executable}", "asan"], check=True,
                   capture_output=True, text=True)  # fmt: skip


def test_c_driver_under_sanitizers() -> None:
    _build()
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    res = subprocess.run([str(DRIVER)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.strip() == "OK"
    assert "runtime error" not in res.stderr


def test_driver_programs_match_the_encoder() -> None:
    # the word tables in test_core.c were produced by the encoder; keep them in sync
    text = SOURCE.read_text()
    assert ", ".join(f"0x{w:010x}ull" for w in assemble(PRODUCER)) in text
    assert ", ".join(f"0x{w:010x}ull" for w in assemble(CONSUMER)) in text
    assert ", ".join(f"0x{w:010x}ull" for w in assemble(SCRATCH_WRAP)) in text
    assert ", ".join(f"0x{w:010x}ull" for w in assemble(SCRATCH_WRAP_LOOP)) in text
    assert f"0x{encode('halt'):010x}ull" in text
