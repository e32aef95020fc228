"""tools/sweep_control_restart.py: its kill-time grid, resumable keys, and the npk it runs
(on PATH, else beside the Python running it: the venv's, without .venv/bin on PATH)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "sweep_control_restart.py"


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sweep_control_restart", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kill_times_span_first_to_last() -> None:
    t = tool()
    assert t.kill_times(0.1, 1.6, 16)[0] == 0.1 and t.kill_times(0.1, 1.6, 16)[-1] == 1.6
    assert t.kill_times(0.5, 0.9, 1) == [0.5]
    assert t.run_key("a.yaml", "pipelined", 0.1, 0.15) == "a.yaml|pipelined|0.100|0.150"


def test_npk_beside_the_python_when_not_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    found = tool().npk_command()
    assert Path(found).parent == Path(sys.executable).parent and Path(found).name == "npk"


def test_no_npk_at_all_is_a_reason_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    t = tool()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(t.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(SystemExit, match="no npk on PATH"):
        t.npk_command()
