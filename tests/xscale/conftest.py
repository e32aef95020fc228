"""Shared fixtures: the XScale builds (made by `make`, rebuilt here when stale) and
the demo's microengine image."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
XS = ROOT / "xscale"
DEMO_ELF = XS / "build" / "arm" / "xs_demo.elf"
DEMO_GPE = XS / "build" / "gpe" / "xs_demo"
DEMO_UC = ROOT / "examples" / "xscale" / "xs_demo.uc"


@pytest.fixture(scope="session")
def xscale_built() -> Path:
    res = subprocess.run(["make", "-s", "-C", str(XS), f"PY={sys.executable}"], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return DEMO_ELF


@pytest.fixture(scope="session")
def me_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("me") / "xs_demo_me.elf"
    res = CliRunner().invoke(main, ["asm", str(DEMO_UC), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out
