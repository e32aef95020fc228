"""The packet library (emulator/pkt) gives exactly what the Python reference gives: the
same random draws, frames, oracle verdicts, route parses, longest-prefix matches and
SRAM tables.  (Its sanitizer run is tests/emulator/test_pkt_asan.py.)"""

from __future__ import annotations

import random
from array import array
from collections import Counter

import pytest

from npkit.emulator.pktlib import lib, mt_from_random, mt_to_random, port_load
from npkit.emulator.traffic.cpkt import c_router, oracle_window
from npkit.emulator.traffic.generator import iter_packets
from npkit.emulator.traffic.oracle import RefRouter
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.routes import (
    Route,
    RouteColumns,
    RouteError,
    RouteIndex,
    RouteTable,
    format_routes,
    mask,
    parse_route_columns,
    parse_routes,
)
from npkit.emulator.traffic.spec import MIX_KINDS, spec_from_dict
from npkit.emulator.traffic.window import window_of
from npkit.toolchain.router.loader import Port, RouteLine, RouterInfo, build_tables, sram_runs
from npkit.toolchain.router.stats import random_prefixes

from .conftest import EXAMPLES, ROUTER_YAML


def test_mt_draws_like_random_random() -> None:
    ffi, c = lib()
    for seed in ("npkit-traffic:3:0:content", 7):
        py = random.Random(seed)
        g = ffi.new("npk_mt *")
        mt_from_random(py, g)
        for _ in range(3000):
            n = py.randrange(1, 5000)  # both draw the bound from Python, then each draws
            mt_from_random(py, g)
            assert c.npk_mt_below(g, n) == py.randrange(n)
            assert c.npk_mt_bits(g, 17) == py.getrandbits(17)
            assert c.npk_mt_random(g) == py.random()
            assert c.npk_mt_u32(g) == py.getrandbits(32)
        back = random.Random()
        mt_to_random(g, back)
        assert back.random() == py.random()


def _spec(protocols: object, mix: dict[str, float], size: object, seed: int) -> object:
    return spec_from_dict({"seed": seed, "router": str(ROUTER_YAML), "count": 400,
                           "defaults": {"size": size, "protocol": protocols, "load": 0.8, "mix": mix}},
                          EXAMPLES)  # fmt: skip


EVERY_KIND = {k: 0.03 for k in MIX_KINDS}


@pytest.mark.parametrize(("protocols", "mix", "size"), [
    ("tunnel", {}, 78),
    ({"udp": 0.4, "tcp": 0.4, "tunnel": 0.2}, {"ttl_expiring": 0.1, "options": 0.1, "runt": 0.1}, {"uniform": [82, 1518]}),
    ({"udp": 0.5, "tcp": 0.5}, EVERY_KIND, "imix"),
    ("tcp", {"runt": 0.3}, 64),
])  # fmt: skip
def test_c_frames_equal_the_python_builder(protocols: object, mix: dict[str, float], size: object) -> None:
    spec = _spec(protocols, mix, size, seed=len(str(protocols)) + len(mix))
    py = list(iter_packets(spec, use_c=False))  # type: ignore[arg-type]
    c = list(iter_packets(spec, use_c=True))  # type: ignore[arg-type]
    assert len(py) == len(c) > 1000
    assert [(p.id, p.port, p.time_ns, p.kind, p.data) for p in py] == [(p.id, p.port, p.time_ns, p.kind, p.data) for p in c]


def test_c_oracle_equals_refrouter_on_every_rule_and_damaged_frames() -> None:
    cfg = RouterConfig.load(ROUTER_YAML)
    ref = RefRouter(cfg)
    spec = _spec({"udp": 0.5, "tcp": 0.3, "tunnel": 0.2}, EVERY_KIND, {"uniform": [82, 300]}, seed=11)
    frames = [(p.port, p.data) for p in iter_packets(spec)]  # type: ignore[arg-type]
    rng = random.Random(5)
    for port, data in list(frames):  # damaged copies: flipped bytes, cut or grown
        d = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            d[rng.randrange(min(len(d), 40))] ^= 1 << rng.randrange(8)
        frames.append((port, bytes(d)))
        frames.append((rng.randrange(5), bytes(d[: rng.randrange(70)]) + bytes(rng.randrange(2) * 1500)))
    w = window_of(0, [0] * len(frames), [p for p, _ in frames], [d for _, d in frames])
    v = oracle_window(c_router(cfg), w.data, w.off, w.lens, w.ports)
    for i, (port, data) in enumerate(frames):
        assert v.outcome(i, w.off[i], w.lens[i]) == ref.process(data, port), (i, data.hex())
    with pytest.raises(ValueError, match="in_port 7"):
        oracle_window(c_router(cfg), w.data[: w.lens[0]], w.off[:1], w.lens[:1], array("B", [7]))


def _random_routes(n: int, seed: int) -> list[Route]:
    rng = random.Random(seed)
    pf = random_prefixes(n, seed)
    pf += [(p & mask(max(0, k - 3)), max(0, k - 3)) for p, k in pf[: n // 5]]  # covering routes: nesting
    return [Route(p, k, rng.getrandbits(32), rng.randrange(5)) for p, k in dict.fromkeys(pf)]


def test_interval_index_equals_the_reference_table() -> None:
    routes = _random_routes(5000, 3)
    table, index = RouteTable(routes), RouteIndex(RouteColumns.of(routes))
    rng = random.Random(4)
    probes = [r.prefix | (rng.getrandbits(32) & ~mask(r.length) & 0xFFFFFFFF) for r in routes]
    probes += [rng.getrandbits(32) for _ in range(20000)] + [0, 0xFFFFFFFF]
    assert all(table.lookup(a) == index.route(a) for a in probes)
    with pytest.raises(RouteError, match="duplicate route for"):
        RouteIndex(RouteColumns.of([*routes, routes[7]]))


def test_c_route_parser_equals_the_python_parser() -> None:
    routes = _random_routes(3000, 5)
    text = format_routes(routes, "header")
    assert parse_route_columns(text) == parse_routes(text) == routes
    assert list(parse_route_columns(text.replace("\n", "\r\n"))) == routes
    for bad in ("1.2.3.4/8 10.0.0.2 0", "1.2.0.0/16 10.0.0.2", "1.2.0.0/16 10.0.0.2 x", "1.0.0.0/8 1.1.1.1 0\n1.0.0.0/8 1.1.1.2 1",
                "01.2.0.0/16 10.0.0.2 0", "1.2.0.0/40 10.0.0.2 0", "1.2.0.0/16 10.0.0.2 +1"):  # fmt: skip
        with pytest.raises(RouteError) as py_err:
            parse_routes(bad, "t")
        with pytest.raises(RouteError) as c_err:
            parse_route_columns(bad, "t")
        assert str(c_err.value) == str(py_err.value)


def test_c_sram_tables_equal_the_python_build() -> None:
    cfg = RouterConfig.load(ROUTER_YAML)
    info = RouterInfo([Port(p.index, p.address, p.prefix_len, p.mac) for p in cfg.ports], dict(cfg.arp))
    hops = cfg.next_hops()
    rng = random.Random(8)
    routes = [Route(r.prefix, r.length, *hops[rng.randrange(len(hops))]) if rng.random() < 0.9
              else Route(r.prefix, r.length, 0x0A000063, 0) for r in _random_routes(4000, 9)
              if not any(p.on_subnet(r.prefix) or (r.length < p.prefix_len and (p.network & mask(r.length)) == r.prefix)
                         for p in cfg.ports)]  # fmt: skip
    for config in (info, None):
        want = [(a, b"".join(w.to_bytes(4, "big") for w in words))
                for a, words in build_tables([RouteLine(r.prefix, r.length, r.next_hop, r.port) for r in routes], config).image.runs()]  # fmt: skip
        assert sram_runs(RouteColumns.of(routes), config) == want


def test_port_load_is_the_sum_frame_by_frame() -> None:
    rng = random.Random(4)
    n = 2000
    ports = bytes(rng.choice([0, 1, 4, 200]) for _ in range(n))
    lens = array("H", (rng.randrange(60, 1519) for _ in range(n)))
    kind = bytes(rng.randrange(3) for _ in range(n))
    over = array("I", (rng.randrange(0, 40) for _ in range(256)))
    for k, want in ((None, 0), (kind, 0), (kind, 2)):
        bits: Counter[int] = Counter()
        pkts: Counter[int] = Counter()
        for i in range(n):
            if k is None or k[i] == want:
                bits[ports[i]] += 8 * (lens[i] + over[ports[i]])
                pkts[ports[i]] += 1
        assert port_load(ports, lens, over, k, want) == {p: (bits[p], pkts[p]) for p in pkts}
    assert port_load(b"", array("H"), over) == {}
