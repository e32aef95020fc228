"""Checked input files cached by content (npkit.asm.base.cache.checked): a result
read back from the cache equals a fresh validation's, a change to any file it came from
is seen, errors are never cached, and a warm demo imports neither pydantic nor PyYAML
(YAML data files' parsed data is cached by their text: `plain_result`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from npkit.asm.base import cache, schema
from npkit.asm.image import from_bytes, to_bytes
from npkit.emulator.binding import EmulatorError, load_config
from npkit.emulator.msf_device import msf_config
from npkit.emulator.traffic import router_config
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.spec import load_spec
from npkit.toolchain.system.layout import load_layout
from npkit.toolchain.system.link import link
from npkit.toolchain.system.paths import ROOT

TRAFFIC = ROOT / "examples" / "traffic"
SRAM64 = ROOT / "examples" / "chips" / "ixp2800_sram64.yaml"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("NPK_CACHE_DIR", str(d))
    return d


def _entries(d: Path) -> int:
    return len([p for p in (d / "checked").rglob("*") if p.is_file()]) if (d / "checked").exists() else 0


def _fresh(monkeypatch: pytest.MonkeyPatch, load: Any) -> Any:
    """`load()` validated, the cache off."""
    with monkeypatch.context() as m:
        m.setenv("NPK_CACHE_DIR", "off")
        router_config._LOADED.clear()
        return load()


def _cached(monkeypatch: pytest.MonkeyPatch, cache_dir: Path, load: Any) -> Any:
    """`load()` twice in `cache_dir`: the second from the cache (validating again fails)."""
    router_config._LOADED.clear()
    load()
    assert _entries(cache_dir) > 0, "the checked result went into the cache"

    def no_validation(*args: Any, **kw: Any) -> Any:
        raise AssertionError("validated again: the cache was not used")

    with monkeypatch.context() as m:
        m.setattr(schema, "validate", no_validation)
        router_config._LOADED.clear()
        return load()


@pytest.mark.parametrize("config", ["ixp2800", "ixp2400", str(SRAM64)])
def test_chip_config_from_the_cache_equals_a_fresh_validation(config: str, cache_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fresh = _fresh(monkeypatch, lambda: load_config(config))
    assert _cached(monkeypatch, cache_dir, lambda: load_config(config)) == fresh
    over = {"units": {"sram": {"read_latency": 77}}}
    assert _cached(monkeypatch, cache_dir, lambda: load_config(config, **over)) == \
        _fresh(monkeypatch, lambda: load_config(config, **over))  # fmt: skip
    assert load_config(config, **over)["units"]["sram"]["read_latency"] == 77


def test_msf_config_from_the_cache_equals_a_fresh_validation(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Chip:
        config = load_config("ixp2800")

    fresh = _fresh(monkeypatch, lambda: msf_config(Chip(), ports=4))  # type: ignore[arg-type]
    assert _cached(monkeypatch, cache_dir, lambda: msf_config(Chip(), ports=4)) == fresh  # type: ignore[arg-type]
    assert fresh["ports"] == 4


def test_router_config_and_spec_from_the_cache_equal_a_fresh_validation(cache_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def router() -> Any:
        cfg = RouterConfig.load(TRAFFIC / "router.yaml")
        return cfg.to_dict(), list(cfg.static_routes), cfg.route_file, cfg.source

    assert _cached(monkeypatch, cache_dir, router) == _fresh(monkeypatch, router)
    spec_file = TRAFFIC / "seed003_balanced.yaml"
    fresh = _fresh(monkeypatch, lambda: load_spec(spec_file, {"seed": 9}))
    got = _cached(monkeypatch, cache_dir, lambda: load_spec(spec_file, {"seed": 9}))
    assert got.router.to_dict() == fresh.router.to_dict()
    got.router = fresh.router  # RouterConfig compares by identity
    assert got == fresh and got.seed == 9


def test_layout_and_image_meta_from_the_cache_equal_a_fresh_validation(cache_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    params = {"io": "msf", "qm.qlimit": 64}
    for name in ("pipelined", "parallel"):
        fresh = _fresh(monkeypatch, lambda n=name: load_layout(n, params))
        assert _cached(monkeypatch, cache_dir, lambda n=name: load_layout(n, params)) == fresh
    data = to_bytes(_fresh(monkeypatch, lambda: link("pipelined", {"io": "msf"})))
    fresh = _fresh(monkeypatch, lambda: from_bytes(data, "x"))
    assert _cached(monkeypatch, cache_dir, lambda: from_bytes(data, "x")) == fresh


def test_a_changed_base_or_field_is_seen(tmp_path: Path, cache_dir: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text((ROOT / "emulator" / "configs" / "ixp2800.yaml").read_text())
    chip = tmp_path / "chip.yaml"
    chip.write_text("base: base.yaml\nsram_channel_bytes: 16777216\n")
    assert load_config(chip)["sram_channel_bytes"] == 16777216
    first = load_config(chip)
    # the base file changes: a field only it sets
    base.write_text(base.read_text().replace("name: ixp2800", "name: changed"))
    assert load_config(chip)["name"] == "changed" and first["name"] != "changed"
    # the file itself changes
    chip.write_text("base: base.yaml\nsram_channel_bytes: 33554432\n")
    assert load_config(chip)["sram_channel_bytes"] == 33554432
    # and back: the first entry is right again
    chip.write_text("base: base.yaml\nsram_channel_bytes: 16777216\n")
    assert load_config(chip)["sram_channel_bytes"] == 16777216


def test_a_changed_route_file_is_seen(tmp_path: Path, cache_dir: Path) -> None:
    yaml_file = tmp_path / "router.yaml"
    yaml_file.write_text((TRAFFIC / "router.yaml").read_text().replace("routes: routes.txt", "routes: r.txt"))
    routes = tmp_path / "r.txt"
    routes.write_text((TRAFFIC / "routes.txt").read_text())
    n = len(RouterConfig.load(yaml_file).static_routes)
    router_config._LOADED.clear()
    routes.unlink()  # the schema checks that it exists
    with pytest.raises(router_config.ConfigError, match="does not exist"):
        RouterConfig.load(yaml_file)
    routes.write_text((TRAFFIC / "routes.txt").read_text() + "203.0.0.0/16 10.0.1.2 1\n")
    router_config._LOADED.clear()
    assert len(RouterConfig.load(yaml_file).static_routes) == n + 1


def test_errors_are_not_cached(tmp_path: Path, cache_dir: Path) -> None:
    chip = tmp_path / "chip.yaml"
    chip.write_text("base: ixp2800\nsram_channel_bytes: -1\n")
    for _ in range(2):
        with pytest.raises(EmulatorError, match=r"chip\.yaml:2: sram_channel_bytes: must be in"):
            load_config(chip)
    assert _entries(cache_dir) == 0


def test_cache_off_validates_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPK_CACHE_DIR", "off")
    calls = []
    real = schema.validate
    monkeypatch.setattr(schema, "validate", lambda *a, **k: calls.append(1) or real(*a, **k))
    load_config("ixp2800")
    load_config("ixp2800")
    assert len(calls) == 2


def test_plain_args_only() -> None:
    assert cache.plain([1, "a", {"b": (1.5, None, b"x")}, {3: True}])
    assert not cache.plain([Path("x")]) and not cache.plain({1: object()})


WARM_DEMO = """
import sys
from npkit.toolchain.commands.demo import demo_cmd
try:
    demo_cmd.main(["--ms", "0.01", "--json"], standalone_mode=False)
except SystemExit:
    pass
print("pydantic" in sys.modules, "yaml" in sys.modules, file=sys.stderr)
"""


def test_a_warm_demo_imports_neither_pydantic_nor_yaml(tmp_path: Path) -> None:
    env = {"NPK_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    seen = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", WARM_DEMO], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=300, check=True)  # fmt: skip
        assert '"verdict"' in out.stdout
        seen.append(out.stderr.strip().splitlines()[-1])
    assert seen == ["True True", "False False"]


def test_yaml_data_from_the_cache_is_what_the_parser_gives(cache_dir: Path) -> None:
    """load_data: the second read of a text comes from the cache, equal to a parse; data
    that is not plain (a timestamp) is parsed every time; another text is another entry."""
    import yaml

    from npkit.asm.base import yaml_data

    text = "a: [1, 2.5, {b: null}]\nc: !!binary aGk=\nd: yes\n"
    first = yaml_data.load_data(text)
    kept = lambda: [p for p in (cache_dir / "yaml").rglob("*") if p.is_file()]  # noqa: E731
    assert kept(), "not kept"
    again = yaml_data.load_data(text)
    assert again == first == yaml.safe_load(text) and again is not first
    stamp = "t: 2001-12-14\n"
    assert yaml_data.load_data(stamp) == yaml.safe_load(stamp)
    assert len(kept()) == 1  # the timestamp's data was not kept
    assert yaml_data.load_data("a: 2\n") == {"a": 2}


def test_a_result_is_kept_for_the_working_directory_it_was_built_in(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative paths name other files from another directory, and a result may hold
    paths resolved against it: the same arguments from elsewhere build again."""
    built: list[str] = []

    def build() -> str:
        built.append(str(Path.cwd()))
        return str(Path("spec.yaml").resolve())

    for name in ("a", "b", "a"):
        (tmp_path / name).mkdir(exist_ok=True)
        monkeypatch.chdir(tmp_path / name)
        assert cache.checked("test", ("spec.yaml",), build) == str(tmp_path / name / "spec.yaml")
    assert built == [str(tmp_path / "a"), str(tmp_path / "b")]  # the third: a's, from the cache
