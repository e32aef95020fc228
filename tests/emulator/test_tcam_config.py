"""The chip config's `tcam:` block (docs/tcam.md): a wrong field is an error at its line,
never a traceback, and whatever the schema accepts the C core builds and looks up in
(fuzzed with Hypothesis from examples/chips/ixp2850_spp.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from npkit.emulator.binding import Chip, EmulatorError, load_config

from ..formats.test_fuzz_formats import FUZZ, load_or_refuse, mutated, scalars

ROOT = Path(__file__).resolve().parents[2]
SPP_TEXT = (ROOT / "examples" / "chips" / "ixp2850_spp.yaml").read_text()
TCAM_KEYS = ["tcam", "channel", "window", "entries", "key_bits", "result_bits", "lookup_latency",
             "cycles_per_lookup", "sram_channel_bytes", "units", "sram", "channels"]  # fmt: skip


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "chip.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("old,new,where", [
    ("key_bits: 144", "key_bits: 100", "tcam.key_bits: expected 72, 144 or 288"),
    ("window: 0x00600000", "window: 0x00800000", "tcam.window: 0x800000: the 2 MB window must lie inside"),
    ("window: 0x00600000", "window: 0x00610000", "tcam.window: must be in"),
    ("entries: 8192", "entries: 8193", "tcam.entries:"),
    ("entries: 8192", "entries: lots", "tcam.entries:"),
    ("result_bits: 64", "result_bits: 48", "tcam.result_bits:"),
    ("cycles_per_lookup: 14", "cycles_per_lookup: 0", "tcam.cycles_per_lookup:"),
    ("channel: 2 ", "colour: 2 ", "tcam.colour:"),
])  # fmt: skip
def test_located_errors(tmp_path: Path, old: str, new: str, where: str) -> None:
    path = _write(tmp_path, SPP_TEXT.replace(old, new))
    line = next(i for i, t in enumerate(SPP_TEXT.splitlines(), 1) if old in t)
    with pytest.raises(EmulatorError) as e:
        load_config(path)
    assert f"{path}:{line}: {where}" in str(e.value), str(e.value)
    assert "Traceback" not in str(e.value)


def test_channel_the_chip_lacks(tmp_path: Path) -> None:
    path = _write(tmp_path, SPP_TEXT + "units: {sram: {channels: 2}}\n")
    with pytest.raises(EmulatorError, match=r"chip.yaml:\d+: tcam.channel: 2: the chip has SRAM channels 0..1"):
        load_config(path)


def test_window_at_the_end_of_a_bigger_channel(tmp_path: Path) -> None:
    text = SPP_TEXT.replace("window: 0x00600000", "window: 0x03E00000") + "sram_channel_bytes: 67108864\n"
    chip = Chip(_write(tmp_path, text))
    assert chip.tcam_info()["base"] == 0x83E00000
    chip.tcam_write(0, [7], [0xFFFFFFFF], 9)
    assert chip.tcam_lookup([7])["result"] == 9


def _built(cfg: dict[str, Any], path: Path) -> None:
    """What the schema accepts, the core builds: the TCAM where the config says."""
    chip = Chip(path)
    info = chip.tcam_info()
    if cfg.get("tcam") is None:
        assert info is None
        return
    t = cfg["tcam"]
    assert info is not None and info["entries"] == t["entries"] and info["key_bits"] == t["key_bits"]
    last = t["entries"] - 1
    chip.tcam_write(last, [1, 2], [0xFFFFFFFF, 0xFFFFFFFF], 5)
    assert chip.tcam_lookup([1, 2]) == {"hit": True, "count": 1, "index": last, "result": 5}
    chip.close()


@FUZZ
@given(data=mutated(SPP_TEXT, TCAM_KEYS))
def test_fuzz_tcam_block(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "chip.yaml"
    cfg = load_or_refuse(path, data, load_config, EmulatorError)
    if cfg is not None:
        _built(cfg, path)


@FUZZ
@given(tcam=st.dictionaries(st.sampled_from(TCAM_KEYS), st.one_of(scalars, st.integers(0, 1 << 27)), max_size=9))
def test_fuzz_tcam_fields(tmp_path: Path, tcam: dict[str, Any]) -> None:
    path = tmp_path / "chip.yaml"
    data = yaml.safe_dump({"base": "ixp2800", "tcam": tcam}).encode()
    cfg = load_or_refuse(path, data, load_config, EmulatorError)
    if cfg is not None:
        _built(cfg, path)


def test_a_bad_base_is_located(tmp_path: Path) -> None:
    """(found by the fuzz above: an unknown `base:` named no file and line)"""
    path = _write(tmp_path, SPP_TEXT.replace("base: ixp2800", "base: ixp9999"))
    line = next(i for i, t in enumerate(SPP_TEXT.splitlines(), 1) if t.startswith("base:"))
    with pytest.raises(EmulatorError, match=rf"^{path}:{line}: base: unknown chip config 'ixp9999'"):
        load_config(path)
