"""The MSF device under AddressSanitizer, UBSan and the leak checker: a C driver
(tests/msf/c/test_msf_dev.c) runs the pass-through program and its slow variant
through the device (line rate, overload with a small RBUF, cut-through underruns),
checks the accounting and frees everything."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .conftest import ROOT, program

EMU = ROOT / "emulator"
DRIVER = Path(__file__).resolve().parent / "c" / "test_msf_dev.c"
FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-D_POSIX_C_SOURCE=200809L"]  # fmt: skip


def _array(name: str, words: tuple[int, ...]) -> str:
    return f"static const uint64_t {name}[] = {{{', '.join(f'0x{w:010x}ull' for w in words)}}};\n"


def test_msf_device_under_sanitizers(tmp_path: Path) -> None:
    cc = shutil.which("cc")
    assert cc, "a C compiler (build-essential) is needed"
    (tmp_path / "pt_words.h").write_text(
        "#include <stdint.h>\n"
        + _array("PT", program()[0])
        + _array("PT_SLOW", program(slow=30)[0])
    )
    sources = sorted(str(p) for p in (EMU / "src").glob("*.c")) + sorted(
        str(p) for p in (EMU / "src" / "units").glob("*.c")
    )
    exe = tmp_path / "test_msf_dev"
    subprocess.run([cc, *FLAGS, f"-I{EMU / 'include'}", f"-I{EMU / 'src'}", f"-I{EMU / 'src' / 'gen'}", f"-I{EMU / 'tests' / 'c'}", f"-I{tmp_path}", "-o", str(exe),
                    *sources, str(DRIVER)], check=True, capture_output=True, text=True, timeout=300)  # fmt: skip
    env = dict(
        os.environ,
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
        UBSAN_OPTIONS="print_stacktrace=1",
    )
    res = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.strip() == "OK"
