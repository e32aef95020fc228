"""The libFuzzer target of the C core (emulator/tests/fuzz/fuzz_core.c): every
input of the checked-in corpus (seeds made from real programs, and the inputs
of past findings) runs clean, and a short fuzzing run finds nothing.
`make fuzz` runs the fuzzer longer (FUZZ_SECONDS, default 30 minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EMU = Path(__file__).resolve().parents[2] / "emulator"
FUZZER = EMU / "build" / "fuzz_core"
CORPUS = EMU / "tests" / "fuzz" / "corpus"
SECONDS = 35


def _make(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(EMU), f"PY={sys.executable}", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def test_corpus_inputs_run_clean() -> None:
    res = _make("fuzz")
    assert res.returncode == 0, res.stderr[-4000:]
    inputs = sorted(CORPUS.iterdir())
    assert any(p.name.startswith("seed-router_") for p in inputs)
    assert any(p.name.startswith("crash-issue10-scratch_wrap") for p in inputs)  # regression inputs
    res = subprocess.run([str(FUZZER), *map(str, inputs)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"Running {len(inputs)} inputs 1 time(s) each" in res.stderr


def test_short_fuzzing_run_finds_nothing(tmp_path: Path) -> None:
    work, artifacts = tmp_path / "work", tmp_path / "artifacts"
    res = _make("fuzz-run", f"FUZZ_SECONDS={SECONDS}", f"FUZZ_WORK={work}", f"FUZZ_ARTIFACTS={artifacts}")
    findings = sorted(p.name for p in artifacts.iterdir()) if artifacts.exists() else []
    assert res.returncode == 0 and not findings, (findings, res.stderr[-4000:])
    assert "DONE" in res.stderr and "stat::number_of_executed_units" in res.stderr
    assert any(work.iterdir())  # it did find new coverage to keep
