"""Figures about a built table: reads per lookup, and random tables to measure with."""

from __future__ import annotations

import random
from collections.abc import Iterable

from npkit.emulator.traffic.routes import BGP_LENGTHS  # share of each prefix length (mostly /24)

from .layout import LpmLayout
from .lpm import LpmTable, SramImage, mask
from .walk import CountingReader, walk


def random_prefixes(
    count: int, seed: int, weights: dict[int, float] | None = None
) -> list[tuple[int, int]]:
    """`count` distinct random (prefix, length), deterministic for `seed`."""
    weights = weights or BGP_LENGTHS
    rng = random.Random(f"npkit-lpm:{seed}")
    lengths, cum = list(weights), list(weights.values())
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int]] = []
    while len(out) < count:
        n = rng.choices(lengths, cum)[0]
        key = (rng.getrandbits(32) & mask(n), n)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def random_table(count: int, seed: int, nexthops: int = 64,
                 layout: LpmLayout | None = None) -> LpmTable:
    rng = random.Random(f"npkit-lpm-nh:{seed}")
    table = LpmTable(layout)
    for p, n in random_prefixes(count, seed):
        table.add(p, n, rng.randrange(1, nexthops + 1))
    return table


def probe_addresses(table: LpmTable, seed: int, extra_random: int = 10_000) -> list[int]:
    """One random address inside every route, plus uniformly random addresses."""
    rng = random.Random(f"npkit-lpm-probe:{seed}")
    addrs = [p | (rng.getrandbits(32 - n) if n < 32 else 0) for p, n, _ in table.routes()]
    return addrs + [rng.getrandbits(32) for _ in range(extra_random)]


def read_figures(image: SramImage, addrs: Iterable[int],
                 layout: LpmLayout | None = None) -> dict[str, float]:
    """max/mean dependent reads and longwords per lookup over `addrs`."""
    total = longwords = count = worst = 0
    for addr in addrs:
        reader = CountingReader(image.read)
        _, reads = walk(reader, addr, layout)
        total += reads
        longwords += sum(reader.sizes)
        worst = max(worst, reads)
        count += 1
    return {
        "lookups": count,
        "max_reads": worst,
        "mean_reads": total / count if count else 0.0,
        "mean_longwords": longwords / count if count else 0.0,
    }
