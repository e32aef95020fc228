"""Receive and transmit on every microengine of both chips.

The pass-through example builds its receive freelist entry from ACTIVE_CTX_STS the way
IXP2xxx receive code does (Linux's ixp2400_rx.uc: context and ME from [4:0], the cluster
from [7] into the entry's top ME bit), so it only works where the emulator numbers MEs
as the hardware does: 0x00-0x07 / 0x10-0x17 on the IXP2800, 0x00-0x03 / 0x10-0x13 on the
IXP2400.  With flat numbering the MEs of cluster 1 received nothing ("offered 10 =
forwarded 0, in flight 10").
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from npkit.asm.assembler import assemble
from npkit.asm.errors import Diagnostics
from npkit.emulator.binding import Chip
from npkit.emulator.traffic_run import TrafficRun

from .conftest import PASSTHROUGH, spec_traffic

PER_CLUSTER = {"ixp2800": (8, 3), "ixp2400": (4, 2)}  # MEs per cluster and its log2
RUN_NS = 20_000


@lru_cache(maxsize=2)
def _program(config: str) -> tuple[tuple[int, ...], int]:
    k, log2 = PER_CLUSTER[config]
    defines = {"ME_PER_CLUSTER": str(k), "ME_PER_CLUSTER_LOG2": str(log2)}
    a = assemble(PASSTHROUGH / "passthrough.uc", defines=defines, diags=Diagnostics())
    return tuple(a.program.words), a.program.ctx_mode


@pytest.mark.parametrize("config", sorted(PER_CLUSTER))
def test_passthrough_forwards_on_every_me(config: str) -> None:
    traffic = spec_traffic("min64.yaml", RUN_NS)
    words, mode = _program(config)
    seen = []
    for me in range(Chip(config).num_me):
        chip = Chip(config)
        chip.load(me, list(words), mode)
        chip.enable(me, 0xFF)
        run = TrafficRun(chip, traffic)
        run.run(RUN_NS + 20_000)
        rep = run.report()
        t = rep["totals"]
        assert rep["balanced"], (config, chip.me_name(me), rep["problems"])
        assert (t["offered"], t["forwarded"], t["in_flight"]) == (len(traffic), len(traffic), 0), \
            f"{config} ME {chip.me_name(me)}: {t}"  # fmt: skip
        seen.append(chip.me_number(me))
    assert max(seen) == 0x17 if config == "ixp2800" else max(seen) == 0x13
