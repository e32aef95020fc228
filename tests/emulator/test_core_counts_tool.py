"""tools/core_counts.py: the emulator benchmarks' loops on the C core alone.  It must run
what `npk bench emu` runs (the same instruction count as the Python binding's chip for
the same cycles) and give a fingerprint that repeats, and that tells another final state
apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npkit.toolchain.bench.emulator import ALU_LOOP, MEM_LOOP, _chip

TOOL = Path(__file__).resolve().parents[2] / "tools" / "core_counts.py"


def counts(*args: str) -> dict[str, object]:
    res = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


@pytest.mark.parametrize("loop", ["mem", "alu"])
def test_the_tool_runs_the_benchmarks_loop(loop: str) -> None:
    cycles = 30_000
    first, again = counts("--loop", loop, "--cycles", str(cycles)), counts("--loop", loop, "--cycles", str(cycles))
    chip = _chip(MEM_LOOP if loop == "mem" else ALU_LOOP)
    chip.run(cycles)
    instructions = sum(m["instructions"] for m in chip.stats()["mes"])
    assert first["instructions"] == again["instructions"] == instructions and first["cycles"] == cycles
    assert first["fingerprint"] == again["fingerprint"]
    assert counts("--loop", loop, "--cycles", str(cycles + 1))["fingerprint"] != first["fingerprint"]


def test_the_loop_on_fewer_mes() -> None:
    cycles, mes = 20_000, 5
    got = counts("--loop", "mem", "--cycles", str(cycles), "--mes", str(mes))
    chip = _chip(MEM_LOOP, mes=mes)
    chip.run(cycles)
    stats = chip.stats()["mes"]
    assert got["instructions"] == sum(m["instructions"] for m in stats)
    assert all(m["instructions"] == 0 for m in stats[mes:]) and got["instructions"] > 0
    assert got["fingerprint"] != counts("--loop", "mem", "--cycles", str(cycles))["fingerprint"]


def test_a_tree_without_generated_headers_is_refused(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(TOOL), "--src", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 2 and "run `make` in that tree first" in res.stderr
