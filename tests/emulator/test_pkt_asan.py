"""The packet library's C driver (emulator/tests/c/test_pkt.c) under AddressSanitizer,
UBSan and the leak checker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EMU = Path(__file__).resolve().parents[2] / "emulator"


def test_packet_library_under_sanitizers() -> None:
    subprocess.run(["make", "-s", "-C", str(EMU), f"PY={sys.executable}", "pkt-asan"], check=True,
                   capture_output=True, text=True)  # fmt: skip
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    res = subprocess.run([str(EMU / "build" / "test_pkt_asan")], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert res.stdout.strip() == "OK"
    assert "runtime error" not in res.stderr
