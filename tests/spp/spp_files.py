"""The SPP application's own Python files, loaded by path as npk loads them (the
application folder is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SPP = ROOT / "examples" / "apps" / "spp"


def module(name: str, folder: Path = SPP) -> ModuleType:
    key = f"spp_test_{name}_{abs(hash(str(folder)))}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod
