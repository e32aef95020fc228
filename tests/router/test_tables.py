"""Next-hop entries, the SRAM map, image files, the route/config loader and `npk route`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.router import layout as L
from npkit.toolchain.router import nexthop as N
from npkit.toolchain.router import sramfile
from npkit.toolchain.router.cli import route
from npkit.toolchain.router.loader import (
    RouteFileError,
    build_from_files,
    parse_routes,
)
from npkit.toolchain.router.lpm import SramImage
from npkit.toolchain.router.walk import walk

LAYOUT = L.default_layout()


def ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def test_nexthop_words_are_the_ethernet_header_in_wire_order() -> None:
    entry = N.NextHop(3, bytes.fromhex("0200aabbccdd"), bytes.fromhex("024e50000003"))
    assert entry.encode() == (0x0003_0000, 0x0200AABB, 0xCCDD024E, 0x5000_0003)
    assert N.NextHop.decode(list(entry.encode())) == entry
    frame_start = b"".join(w.to_bytes(4, "big") for w in entry.encode()[1:])
    assert frame_start == entry.dst_mac + entry.src_mac
    # the worked example of LAYOUT.md §5
    example = N.NextHop(1, bytes.fromhex("02000a000103"), bytes.fromhex("024e50000001"))
    assert example.encode()[1:] == (0x02000A00, 0x0103024E, 0x50000001)


def test_nexthop_flags_and_arp_miss_next_hop() -> None:
    entry = N.NextHop(2, src_mac=bytes(6), flags=N.ARP_MISS, next_hop=ip("10.0.2.77"))
    words = entry.encode()
    assert words[0] == (N.ARP_MISS << 24) | (2 << 16) and words[1] == ip("10.0.2.77")
    assert N.NextHop.decode(list(words)) == entry
    assert entry.is_exception and entry.flag_names() == ["arp_miss"]
    assert not N.NextHop(1, flags=N.DIRECT).is_exception
    with pytest.raises(ValueError):
        N.NextHop.decode([0x0000_0001, 0, 0, 0])  # reserved bits
    with pytest.raises(ValueError):
        N.NextHop(1, next_hop=5)  # next hop only in ARP_MISS entries
    with pytest.raises(ValueError):
        N.NextHop(256)


def test_nexthop_table_dedups_and_reserves_index_0() -> None:
    table = N.NextHopTable(capacity=3)
    a = table.intern(N.NextHop(1, b"\x02" * 6))
    assert a == 1 and table.intern(N.NextHop(1, b"\x02" * 6)) == 1
    assert table.intern(N.NextHop(2)) == 2
    with pytest.raises(ValueError):
        table.intern(N.NextHop(3))
    writes = dict(table.writes(0x100))
    assert writes[0x100] == N.NO_ROUTE << 24 and writes[0x110] == 1 << 16


def test_sram_map_regions_are_disjoint_and_lpm_fits() -> None:
    regions = L.load_sram_map()
    spans = sorted((r.base, r.end, r.name) for r in regions.values())
    for (_, end, name), (base, _, other) in zip(spans, spans[1:], strict=False):
        assert end <= base, (name, other)
    assert regions["lpm_root"].size == 4 * L.ROOT_ENTRIES
    assert {"queue_descriptors", "buffer_descriptors", "rings", "statistics"} <= set(regions)
    assert LAYOUT.nh_capacity == regions["lpm_nexthop"].size // 16


def test_sram_map_overlap_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "map.yaml"
    bad.write_text("regions:\n  a: {base: 0, size: 32}\n  b: {base: 16, size: 16}\n")
    with pytest.raises(ValueError, match="overlap"):
        L.load_sram_map(bad)


@pytest.mark.parametrize("binary", [True, False])
def test_image_file_round_trip(binary: bool) -> None:
    image = SramImage({0: 1, 4: 2, 8: 0xFFFF_FFFF, 0x1000: 7})
    data = sramfile.to_bytes(image) if binary else sramfile.to_json(image).encode()
    assert image.runs() == [(0, [1, 2, 0xFFFF_FFFF]), (0x1000, [7])]
    back = sramfile.from_bytes(data) if binary else sramfile.from_json(data.decode())
    assert back.words == image.words
    if binary:
        assert data[:8] == b"NPKSRAM1" and data[8:12] == b"\x00\x00\x00\x02"
        with pytest.raises(ValueError):
            sramfile.from_bytes(data + b"x")


ROUTES = """\
# test routes
1.0.0.0/8        10.0.0.2   0
1.2.3.0/24       10.0.1.2   1   # nested
1.2.3.200/32     10.0.1.3   1
44.0.0.0/8       10.0.1.77  1   # no ARP entry
10.0.0.8/29      10.0.1.2   1   # inside port 0's subnet: beats the adjacency of .10
"""

CONFIG = """\
ports:
  - {address: 10.0.0.1/24, mac: "02:4e:50:00:00:00"}
  - {address: 10.0.1.1/24, mac: "02:4e:50:00:00:01"}
arp:
  10.0.0.2: "02:00:0a:00:00:02"
  10.0.0.10: "02:00:0a:00:00:0a"
  10.0.0.20: "02:00:0a:00:00:14"
  10.0.1.2: "02:00:0a:00:01:02"
  10.0.1.3: "02:00:0a:00:01:03"
routes: ignored.txt
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    routes, config = tmp_path / "routes.txt", tmp_path / "router.yaml"
    routes.write_text(ROUTES)
    config.write_text(CONFIG)
    return routes, config


def test_route_parser_reads_routes_and_rejects_errors() -> None:
    assert [(r.length, r.port) for r in parse_routes(ROUTES)] == [
        (int(line.split()[0].split("/")[1]), int(line.split()[2]))
        for line in ROUTES.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    for bad in ("1.2.3.4/24 10.0.0.1 0", "1.0.0.0/33 1.1.1.1 0", "1.0.0.0/8 1.1.1.1",
                "1.0.0.0/8 1.1.1.1 x", "1.0.0.0/8 1.1.1.1 0\n1.0.0.0/8 1.1.1.2 1"):
        with pytest.raises(RouteFileError):
            parse_routes(bad, "<t>")


def test_loader_fills_next_hops_from_config(files: tuple[Path, Path]) -> None:
    tables = build_from_files(*files)
    image = tables.image

    def resolve(text: str) -> N.NextHop:
        index, reads = walk(image.read, ip(text), LAYOUT)
        assert reads <= 3
        assert index == tables.table.lookup_reference(ip(text))
        words = image.read(LAYOUT.nh_addr(index or 0), 4)
        return N.NextHop.decode(words)

    port0, port1 = bytes.fromhex("024e50000000"), bytes.fromhex("024e50000001")
    assert resolve("1.9.9.9") == N.NextHop(0, bytes.fromhex("02000a000002"), port0)
    assert resolve("1.2.3.4") == N.NextHop(1, bytes.fromhex("02000a000102"), port1)
    assert resolve("1.2.3.200") == N.NextHop(1, bytes.fromhex("02000a000103"), port1)
    assert resolve("44.1.2.3") == N.NextHop(1, src_mac=port1, flags=N.ARP_MISS,
                                            next_hop=ip("10.0.1.77"))
    assert resolve("9.9.9.9") == N.NO_ROUTE_ENTRY
    # connected subnet: unknown hosts are ARP misses, ARP-known hosts forwarded directly
    assert resolve("10.0.0.99").flags == N.DIRECT | N.ARP_MISS
    assert resolve("10.0.0.20") == N.NextHop(0, bytes.fromhex("02000a000014"), port0, N.DIRECT)
    # the static /29 is more specific than the subnet: no adjacency route for 10.0.0.10
    assert resolve("10.0.0.10").port == 1
    assert resolve("10.0.0.1").flags == N.LOCAL and resolve("10.0.1.1").flags == N.LOCAL
    assert resolve("10.0.1.255").flags == N.BROADCAST
    assert resolve("255.255.255.255").flags == N.BROADCAST


def test_loader_errors(tmp_path: Path, files: tuple[Path, Path]) -> None:
    routes, config = files
    bad = tmp_path / "bad.txt"
    bad.write_text("1.0.0.0/8 10.0.0.2 7\n")
    with pytest.raises(RouteFileError, match=r"bad.txt:1: route .*: port 7 does not exist"):
        build_from_files(bad, config)
    dup = tmp_path / "dup.txt"
    dup.write_text("10.0.0.0/24 10.0.0.2 0\n")  # repeats a connected subnet
    with pytest.raises(RouteFileError, match="dup.txt:1: route .*: repeats the connected subnet of port 0"):
        build_from_files(dup, config)
    dup.write_text("1.0.0.0/8 10.0.0.2 0\n1.0.0.0/8 10.0.1.2 1\n")  # without a config: no ports, still one route a prefix
    with pytest.raises(RouteFileError, match="dup.txt:2: duplicate route for 1.0.0.0/8"):
        build_from_files(dup)


def test_cli_build_lookup_stats(tmp_path: Path, files: tuple[Path, Path]) -> None:
    routes, config = files
    runner = CliRunner()
    out = tmp_path / "sram.bin"
    res = runner.invoke(route, ["build", str(routes), "--config", str(config), "-o", str(out)])
    assert res.exit_code == 0, res.output
    image = sramfile.load(out)
    assert walk(image.read, ip("1.2.3.200"), LAYOUT)[0] is not None
    res = runner.invoke(route, ["build", str(routes), "--config", str(config),
                                "-o", str(tmp_path / "s.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert sramfile.load(tmp_path / "s.json").words == image.words

    res = runner.invoke(route, ["lookup", str(routes), "1.2.3.200", "1.2.4.1", "9.9.9.9",
                                "--config", str(config), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert [(r["route"], r["port"], r["sram_reads"]) for r in got] == [
        ("1.2.3.200/32", 1, 3), ("1.0.0.0/8", 0, 2), (None, 0, 1)]
    assert got[0]["dst_mac"] == "02:00:0a:00:01:03" and got[2]["flags"] == ["no_route"]
    res = runner.invoke(route, ["lookup", str(routes), "1.2.3.200"])
    assert res.exit_code == 0 and "reads 3" in res.output and "arp_miss" in res.output
    res = runner.invoke(route, ["lookup", str(routes), "1.2.3"])
    assert res.exit_code != 0

    res = runner.invoke(route, ["stats", str(routes), "--config", str(config), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.output)
    assert stats["max_reads"] == 3 and stats["routes"] == len(tables_routes(routes, config))


def tables_routes(routes: Path, config: Path) -> list[tuple[int, int, int]]:
    return build_from_files(routes, config).table.routes()


def test_incremental_route_with_new_next_hop_writes_the_entry_first(
    files: tuple[Path, Path],
) -> None:
    """Every prefix of the write sequence leads each probe to a complete next-hop entry,
    old or new: the entry is written before the trie entry that points at it."""
    from npkit.toolchain.router.loader import RouteLine

    tables = build_from_files(*files)
    probe = [ip("1.2.3.4"), ip("1.2.3.200"), ip("1.2.9.9"), ip("1.9.9.9"), ip("10.0.0.99")]

    def answer(read: SramImage) -> list[N.NextHop]:
        out = []
        for a in probe:
            index, _ = walk(read.read, a, LAYOUT)
            out.append(N.NextHop.decode(read.read(LAYOUT.nh_addr(index or 0), 4)))
        return out

    before = tables.image.copy()
    old = answer(before)
    new_hop = N.NextHop(0, bytes.fromhex("02000a0000ee"), bytes.fromhex("024e50000000"))
    tables.config.arp[ip("10.0.0.238")] = new_hop.dst_mac
    writes = tables.add_route(RouteLine(ip("1.2.0.0"), 16, ip("10.0.0.238"), 0))
    new = answer(tables.image)
    assert new[2] == new_hop and new[0] == old[0] and new[3] == old[3]
    assert writes[0][0] == LAYOUT.nh_addr(len(tables.nexthops) - 1)  # entry first
    state = before.copy()
    for addr, value in writes:
        state.write(addr, value)
        for o, n, got in zip(old, new, answer(state), strict=True):
            assert got in (o, n)
    assert state.words == tables.image.words
    # withdrawing it restores the old answers
    tables.image.apply(tables.withdraw_route(ip("1.2.0.0"), 16))
    assert answer(tables.image) == old
    with pytest.raises(RouteFileError):
        tables.add_route(RouteLine(ip("7.0.0.0"), 8, 0, 9))
