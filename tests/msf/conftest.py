"""Shared helpers for the MSF tests: assembled programs and traffic runs."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from npkit.asm.assembler import assemble, assemble_text
from npkit.asm.errors import Diagnostics
from npkit.emulator.binding import Chip
from npkit.emulator.traffic.source import Traffic, TrafficSource, load_traffic_source
from npkit.emulator.traffic_run import TrafficRun

ROOT = Path(__file__).resolve().parents[2]
PASSTHROUGH = ROOT / "examples" / "passthrough"


@lru_cache(maxsize=8)
def program(slow: int = 0) -> tuple[tuple[int, ...], int]:
    """The pass-through example assembled (optionally with -D SLOW=n)."""
    defines = {"SLOW": str(slow)} if slow else None
    a = assemble(PASSTHROUGH / "passthrough.uc", defines=defines, diags=Diagnostics())
    return tuple(a.program.words), a.program.ctx_mode


def words_of(text: str) -> list[int]:
    return list(assemble_text(text, diags=Diagnostics()).program.words)


@lru_cache(maxsize=8)
def spec_traffic(name: str, duration_ns: int) -> Traffic:
    return load_traffic_source(PASSTHROUGH / name, duration_ns=duration_ns).collect()


def passthrough_run(traffic: TrafficSource, run_ns: int, slow: int = 0, ahead: bool | None = None,
                    **msf: int) -> TrafficRun:
    """The pass-through program on the MSF; the run keeps its frames (`run.out`)."""
    chip = Chip("ixp2800")
    words, mode = program(slow)
    chip.load(0, list(words), mode)
    chip.enable(0, 0xFF)
    run = TrafficRun(chip, traffic, record=True, ahead=ahead, **msf)
    run.run(run_ns)
    return run
