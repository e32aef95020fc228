"""The lookup block alone on the emulator: the LAYOUT.md walk over a 10,000-prefix
random table against the table's reference longest-prefix match, misses to the
exception ring as no_route, both thread counts, with and without the CAM cache."""

from __future__ import annotations

import random
import struct

import pytest

from npkit.emulator.traffic.reasons import load_reasons
from npkit.toolchain.router.stats import probe_addresses, random_table
from npkit.toolchain.system.harness import Harness

from .test_blocks_parse import single_block

NO_ROUTE = load_reasons().exception("no_route").code


@pytest.fixture(scope="module")
def table() -> object:
    t = random_table(10_000, seed=5)
    t.build()
    return t


def load_table(h: Harness, table: object) -> None:
    for start, words in table.image.runs():  # type: ignore[attr-defined]
        h.chip.mem_write("sram", start, struct.pack(f">{len(words)}I", *words))


@pytest.mark.parametrize(("threads", "cache"), [(4, False), (8, False), (8, True)])
def test_lookup_matches_reference(threads: int, cache: bool, table: object) -> None:
    rng = random.Random(7)
    addrs = rng.sample(probe_addresses(table, seed=3, extra_random=400), 700)  # type: ignore[arg-type]
    if cache:
        addrs += addrs[:100]  # repeats: served from the CAM
    h = Harness(single_block("lookup/lookup.uc", threads, {"LOOKUP_CAM_CACHE": cache}))
    load_table(h, table)
    for k, a in enumerate(addrs):
        h.send(0x8000_0000 | k, a)
    h.run(1_500_000)
    got: dict[int, int | None] = {pw & 0xFFFF: nh for pw, nh in h.outputs()}
    for pw, rec in h.exceptions():
        assert rec & 0xFF == NO_ROUTE
        got[pw & 0xFFFF] = None
    assert len(got) == len(addrs)
    misses = 0
    for k, a in enumerate(addrs):
        want = table.lookup_reference(a)  # type: ignore[attr-defined]
        misses += want is None
        assert got[k] == want, f"{a:#010x}: microcode {got[k]}, reference {want}"
    assert 0 < misses < len(addrs)
    # order kept: outputs leave in input order
    ks = [pw & 0xFFFF for pw, _ in h.outputs()]
    assert ks == sorted(ks)
