"""`npk bench fidelity`: the unloaded round trips it reports are the chip config's timing
model (npk_emu.h npk_unit_cfg: queue at issue + cmd_overhead, occupy the channel for
ceil(bytes / unit_bytes) * cycles_per_unit, signal read/write_latency later)."""

from __future__ import annotations

import math

import pytest

from npkit.emulator.binding import load_config
from npkit.toolchain.bench.fidelity import CHIPS, COMMANDS, latencies

BYTES = {"dram": 8, "hash": 16}  # DRAM moves a quadword; a 48-bit key occupies one 16-byte unit


@pytest.mark.parametrize("config", CHIPS)
def test_round_trips_follow_the_config(config: str) -> None:
    figures = latencies(config)
    units = load_config(config)["units"]
    clock = float(load_config(config)["clock_mhz"])
    for unit, rw, _ in COMMANDS:
        u = units[unit]
        occupancy = math.ceil(BYTES.get(unit, 4) / u["unit_bytes"]) * u["cycles_per_unit"]
        expected = u["cmd_overhead"] + occupancy + u[f"{rw}_latency"]
        assert figures[f"fidelity.{config}.{unit}_{rw}_cycles"] == expected, (unit, rw)
        assert figures[f"fidelity.{config}.{unit}_{rw}_ns"] == round(
            figures[f"fidelity.{config}.{unit}_{rw}_cycles"] * 1000 / clock, 1)
