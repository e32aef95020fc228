"""Set-up once: a configuration is built once and cached by content (linked images with
their SRAM tables, the demo's route table), safely, and a cached image runs the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from npkit.asm.base import cache
from npkit.toolchain.system.link import link
from npkit.toolchain.system.paths import DEFAULT_ROUTER, ROOT


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("NPK_CACHE_DIR", str(d))
    return d


def test_second_link_comes_from_the_cache_with_this_runs_paths(cache_dir: Path, tmp_path: Path) -> None:
    routes = ROOT / "examples" / "traffic" / "routes.txt"
    first = link("pipelined", {"io": "msf"}, routes)
    entries = list((cache_dir / "image").rglob("*"))
    assert [p for p in entries if p.is_file()], "the image went into the cache"
    # the same table under another name: the same entry, this run's path in the meta
    copy = tmp_path / "same-routes.txt"
    copy.write_bytes(routes.read_bytes())
    second = link("pipelined", {"io": "msf"}, copy)
    assert second.meta["router"]["routes"] == str(copy.resolve())
    assert second.meta["router"]["routes_sha256"] == first.meta["router"]["routes_sha256"]
    assert [p.words for p in second.programs] == [p.words for p in first.programs]
    assert [p.init_mem for p in second.programs] == [p.init_mem for p in first.programs]
    assert len([p for p in (cache_dir / "image").rglob("*") if p.is_file()]) == 1
    # another table or other parameters: another entry
    other = tmp_path / "other-routes.txt"
    other.write_text(routes.read_text() + "203.0.0.0/16 10.0.1.2 1\n")
    third = link("pipelined", {"io": "msf"}, other)
    assert third.programs[0].init_mem != first.programs[0].init_mem
    link("pipelined", {"io": "msf", "qm": "stub"}, routes)
    assert len([p for p in (cache_dir / "image").rglob("*") if p.is_file()]) == 3
    assert not [p for p in cache_dir.rglob(".tmp-*")]


def test_cache_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPK_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    image = link("pipelined", {"io": "msf"})
    assert image.programs and cache.cache_get("image", "0" * 64) is None


def test_entries_are_whole_and_keys_follow_content(cache_dir: Path) -> None:
    key = cache.content_key("x", {"b": 1, "a": [1, 2]}, b"bytes")
    assert key == cache.content_key("x", {"a": [1, 2], "b": 1}, b"bytes")
    assert key != cache.content_key("x", {"a": [1, 2], "b": 1}, b"other")
    cache.cache_put("t", key, b"one")
    cache.cache_put("t", key, b"one")  # a second writer of the same entry: harmless
    assert cache.cache_get("t", key) == b"one"
    assert cache.cache_file("t", key) is not None
    assert cache.cache_get("t", "f" * 64) is None
    assert len(cache.code_digest()) == 64


def test_demo_route_table_is_generated_once(cache_dir: Path) -> None:
    from npkit.toolchain.commands.demo import demo_routes
    from npkit.toolchain.system.tables import CONTROL_PLANE_ROUTES, random_routes_text

    a = demo_routes(500)
    b = demo_routes(500)
    assert a == b and a.is_relative_to(cache_dir)
    assert a.read_text() == random_routes_text(500, 1, DEFAULT_ROUTER, extra=CONTROL_PLANE_ROUTES)[0]


def test_tables_that_do_not_fit_the_chip_are_a_link_error(tmp_path: Path) -> None:
    from npkit.toolchain.system.layout import LinkError

    big = tmp_path / "big.txt"
    # three /24s in each of 20,000 /16s: a 512-byte node each, ~10 MB, more than 8 MB channels hold
    lines = [f"{a}.{b}.{c}.0/24 10.0.1.2 1" for a in range(11, 100) for b in range(256) for c in (7, 77, 177)]
    big.write_text("\n".join(lines[:60000]) + "\n")
    with pytest.raises(LinkError, match="MB of SRAM channel 0.*ixp2800_sram64"):
        link("pipelined", {"io": "msf"}, big)


def test_the_cache_trims_its_least_recently_used_entries_and_nothing_else(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a tree kept beside the entries (npk bench --against's builds): big, old, with a symlink
    foreign = cache_dir / "against" / ("f" * 40)
    foreign.mkdir(parents=True)
    (foreign / "big").write_bytes(b"x" * 5000)
    (foreign / "python").symlink_to(foreign / "big")
    os.utime(foreign / "big", (1, 1))
    for i in range(4):  # 1,000 bytes each, the later ones used more recently
        cache.cache_put("image", cache.content_key(i), bytes([i]) * 1000)
        os.utime(cache._path("image", cache.content_key(i)), (10 + i, 10 + i))
    monkeypatch.setattr(cache, "MAX_BYTES", 3000)
    cache.cache_put("image", cache.content_key(9), b"9" * 1000)  # 5,000 bytes: down to 2,250 or less
    kept = [i for i in (0, 1, 2, 3, 9) if cache.cache_get("image", cache.content_key(i)) is not None]
    assert kept == [3, 9]
    assert (foreign / "big").read_bytes() == b"x" * 5000 and (foreign / "python").exists()


def test_a_process_trims_at_its_first_put_and_then_every_eighth_of_the_limit(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trim stats every entry of the cache: not on every put, but often enough that the
    cache stays within 1.125x of its limit."""
    trims: list[int] = []
    real = cache._trim
    monkeypatch.setattr(cache, "_trim", lambda root: (trims.append(len(trims)), real(root)))
    monkeypatch.setattr(cache, "MAX_BYTES", 8000)  # an eighth: 1,000 bytes
    monkeypatch.setattr(cache, "_put_bytes", [-1])  # a process that has not put yet
    puts_trimmed = []
    for i in range(6):  # 400 bytes each
        before = len(trims)
        cache.cache_put("image", cache.content_key("t", i), bytes([i]) * 400)
        puts_trimmed.append(len(trims) > before)
    assert puts_trimmed == [True, False, False, True, False, False]
