"""emulator/Makefile's PGO switch: `make PGO=0` after a profile-guided build (or the other
way round) builds libnpkemu.so again; the same setting twice builds nothing.

Built in a copy of the tree (the library the other tests load stays as it is)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EMU = ROOT / "emulator"
# what the library's rule reads from outside emulator/ (the ISA header's sources, the
# training module)
OUTSIDE = ["asm/isa/mev2.yaml", "asm/isa/gen_c.py", "toolchain/commands/pgo_train.py"]


def _copy(tmp: Path) -> Path:
    emu = tmp / "emulator"
    shutil.copytree(EMU, emu, ignore=shutil.ignore_patterns("build", "__pycache__", "fuzz-*"))
    for rel in OUTSIDE:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp / rel)  # (mtimes kept)
    # the generated header newer than its sources, so that PY=false never regenerates it:
    # gen_c rewrites the header only when its text changes, so after an edit of mev2.yaml
    # that the header does not show (operand roles) the tree's own header stays older
    os.utime(emu / "src/gen/mev2_isa.h")
    return emu


def _make(emu: Path, pgo: str) -> subprocess.CompletedProcess[str]:
    # PY=false: a profile-guided build stops at its training run, after it has started
    return subprocess.run(["make", "-C", str(emu), "build/libnpkemu.so", f"PGO={pgo}", "PY=false"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_switching_pgo_rebuilds_the_library(tmp_path: Path) -> None:
    emu = _copy(tmp_path)
    plain = _make(emu, "0")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "-shared -o build/libnpkemu.so" in plain.stdout and "pgo_build.sh" not in plain.stdout
    again = _make(emu, "0")
    assert again.returncode == 0 and "-o build/libnpkemu.so" not in again.stdout  # nothing built
    guided = _make(emu, "1")
    assert "./pgo_build.sh build/libnpkemu.so" in guided.stdout  # the switch was seen
    assert guided.returncode != 0 and "the training run failed" in guided.stderr
