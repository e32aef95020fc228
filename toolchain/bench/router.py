"""LPM benchmarks: `npk bench route`.

Figures:
  route.build_10k_s      seconds to build() a 10,000-prefix BGP-shaped random table
  route.sram_bytes_10k   trie bytes in SRAM for it (root array + nodes)
  route.sram_bytes_100k  the same for 100,000 prefixes (skipped with --quick)
  route.max_reads        most dependent SRAM reads any probed lookup needed
  route.mean_reads       mean reads over one random address inside every route
  route.mean_reads_uniform  mean reads over 20,000 uniformly random addresses
  route.update_us        mean microseconds per incremental add/withdraw (host side)
"""

from __future__ import annotations

import random
import time
from typing import Any

from npkit.toolchain.bench import benchmark
from npkit.toolchain.router.lpm import Add, Withdraw
from npkit.toolchain.router.stats import (
    probe_addresses,
    random_prefixes,
    random_table,
    read_figures,
)


@benchmark("route")
def bench_route(quick: bool) -> dict[str, Any]:
    table = random_table(10_000, seed=1)
    start = time.perf_counter()
    image = table.build()
    build_s = time.perf_counter() - start
    figures: dict[str, Any] = {
        "route.build_10k_s": round(build_s, 4),
        "route.sram_bytes_10k": table.stats()["trie_bytes"],
    }
    routed = read_figures(image, probe_addresses(table, seed=1, extra_random=0))
    uniform = read_figures(image, probe_addresses(table, seed=1, extra_random=20_000)[len(table):])
    figures["route.max_reads"] = max(routed["max_reads"], uniform["max_reads"])
    figures["route.mean_reads"] = round(routed["mean_reads"], 4)
    figures["route.mean_reads_uniform"] = round(uniform["mean_reads"], 4)
    rng = random.Random(7)
    updates = 200 if quick else 2_000
    fresh = random_prefixes(10_000 + updates, seed=1)[10_000:]
    start = time.perf_counter()
    for p, n in fresh:
        table.apply(Add(p, n, rng.randrange(1, 65)))
    for p, n in fresh:
        table.apply(Withdraw(p, n))
    figures["route.update_us"] = round((time.perf_counter() - start) / (2 * updates) * 1e6, 1)
    if not quick:
        big = random_table(100_000, seed=2)
        start = time.perf_counter()
        big.build()
        figures["route.build_100k_s"] = round(time.perf_counter() - start, 3)
        figures["route.sram_bytes_100k"] = big.stats()["trie_bytes"]
    return figures
