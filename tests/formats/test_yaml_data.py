"""YAML by libyaml (npkit.asm.base.yaml_data): the same data and line maps as the
pure-Python parser, and never a crash on text libyaml cannot take."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from npkit.asm.base.schema import InputError, _parse_yaml, parse_yaml
from npkit.asm.base.yaml_data import MAX_FAST_DEPTH, fast_loader, load_data

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for d in ("examples", "emulator/configs", "toolchain/system", "microcode") for p in (ROOT / d).rglob("*.yaml"))


def test_there_are_shipped_files_to_compare() -> None:
    assert len(SHIPPED) > 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_reader_gives_the_pure_parsers_data_and_lines(path: Path) -> None:
    text = path.read_text()
    pure = _parse_yaml(text, str(path), InputError, yaml.SafeLoader)
    fast = _parse_yaml(text, str(path), InputError, fast_loader(text))
    assert fast.data == pure.data
    assert fast.lines == pure.lines
    assert load_data(text) == yaml.safe_load(text)


def test_libyaml_reads_ordinary_files_when_pyyaml_has_it() -> None:
    text = (ROOT / "emulator/configs/ixp2800.yaml").read_text()
    assert fast_loader(text) is getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.mark.parametrize("text", ["[" * 100_000, "- " * 100_000 + "x", "{a: " * 60_000])
def test_deep_nesting_goes_to_the_pure_parser_and_fails_cleanly(text: str) -> None:
    assert fast_loader(text) is yaml.SafeLoader  # libyaml's composer would overflow the C stack
    with pytest.raises(InputError, match="deep: "):
        parse_yaml(text, "deep")


def test_a_document_at_the_fast_limit_still_goes_to_libyaml() -> None:
    text = "[" * MAX_FAST_DEPTH + "]" * MAX_FAST_DEPTH
    assert fast_loader(text) is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert fast_loader(text + "[]") is yaml.SafeLoader
    nested = "[" * 200 + "1" + "]" * 200
    data = parse_yaml(nested, "edge").data
    for _ in range(200):
        data = data[0]
    assert data == 1


def test_errors_keep_the_pure_parsers_message() -> None:
    with pytest.raises(InputError) as fast_err:
        parse_yaml("a: [1, 2\n", "syn")
    with pytest.raises(InputError) as pure_err:
        _parse_yaml("a: [1, 2\n", "syn", InputError, yaml.SafeLoader)
    assert str(fast_err.value) == str(pure_err.value)
    assert "syn:2: YAML syntax" in str(fast_err.value)
