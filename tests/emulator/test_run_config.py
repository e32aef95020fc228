"""An image runs on the chip config it was linked for (`Image.config`): `npk run`, `debug`,
`trace` and `why` take it from the image unless --config names one, refuse a --config
that differs from it (naming the fields) and images linked for different configs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.assembler import assemble_text
from npkit.asm.image import Image, write_image
from npkit.emulator.binding import CONFIG_DIR
from npkit.emulator.loader import LoadError
from npkit.emulator.run_config import ConfigMismatch, recorded_config, run_config
from npkit.toolchain.commands.run import run_cmd
from npkit.toolchain.debug.target import TargetError, open_target

PROGRAM = "    alu[a1, a1, +, 1]\n    ctx_arb[kill]\n"
BIG_SRAM = 1 << 26


def _image(config: str = "", name: str = "p") -> Image:
    image = assemble_text(PROGRAM, f"{name}.uc", name=name).image
    image.config = config
    return image


def _chip_config(tmp_path: Path, name: str = "big_sram", **fields: int) -> str:
    """ixp2800 with other fields (a config of its own name, as a user writes one)."""
    path = tmp_path / f"{name}.yaml"
    lines = ["base: ixp2800", f"name: {name}", *(f"{k}: {v}" for k, v in fields.items())]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _write(tmp_path: Path, name: str, image: Image) -> str:
    path = tmp_path / f"{name}.elf"
    write_image(path, image)
    return str(path)


def test_without_config_the_image_chooses_and_an_assembled_one_runs_on_ixp2800(tmp_path: Path) -> None:
    big = _chip_config(tmp_path, sram_channel_bytes=BIG_SRAM)
    assert run_config([("a.elf", _image())], None) == ("ixp2800", [])
    assert run_config([("a.elf", _image(big)), ("b.elf", _image())], None) == (big, [])


def test_a_config_given_must_hold_what_the_image_was_linked_for(tmp_path: Path) -> None:
    big = _chip_config(tmp_path, sram_channel_bytes=BIG_SRAM)
    same_as_big = _chip_config(tmp_path, name="big_sram_copy", sram_channel_bytes=BIG_SRAM)
    with pytest.raises(ConfigMismatch, match=r"a\.elf was linked for chip config .*big_sram\.yaml.*"
                                             r"--config ixp2800 differs in sram_channel_bytes \(67108864 vs 8388608\)"):  # fmt: skip
        run_config([("a.elf", _image(big))], "ixp2800")
    # compared by what they hold: another file of the same fields under another name is the same chip
    assert run_config([("a.elf", _image(big))], same_as_big) == (same_as_big, [])
    assert run_config([("a.elf", _image(big))], big) == (big, [])
    assert run_config([("a.elf", _image())], big) == (big, [])


def test_images_linked_for_different_configs_do_not_run_together(tmp_path: Path) -> None:
    big = _chip_config(tmp_path, sram_channel_bytes=BIG_SRAM, ctx_swap_cost=4)
    with pytest.raises(LoadError, match=r"b\.elf was linked for chip config 'ixp2800' and a\.elf for '.*big_sram"
                                        r"\.yaml', which differ in ctx_swap_cost \(3 vs 4\), sram_channel_bytes"):  # fmt: skip
        run_config([("a.elf", _image(big)), ("b.elf", _image("ixp2800"))], None)


def test_a_config_that_cannot_be_read_needs_config_and_then_says_so(tmp_path: Path) -> None:
    gone = str(tmp_path / "moved.yaml")
    with pytest.raises(LoadError, match=r"a\.elf was linked for chip config '.*moved\.yaml', which cannot be "
                                        r"read here .*; give the chip config with --config"):  # fmt: skip
        run_config([("a.elf", _image(gone))], None)
    config, notes = run_config([("a.elf", _image(gone))], "ixp2800")
    assert config == "ixp2800"
    assert len(notes) == 1 and "cannot be read here" in notes[0] and "runs on --config ixp2800" in notes[0]


def test_npk_run_takes_the_image_config_and_refuses_another(tmp_path: Path) -> None:
    big = _chip_config(tmp_path, sram_channel_bytes=BIG_SRAM)
    elf = _write(tmp_path, "p", _image(big))
    res = CliRunner().invoke(run_cmd, [elf, "--cycles", "100", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["config"] == "big_sram"
    res = CliRunner().invoke(run_cmd, [elf, "--config", "ixp2800", "--cycles", "100"])
    assert res.exit_code == 2, res.output
    assert "differs in sram_channel_bytes (67108864 vs 8388608): run it with --config" in res.output
    other = _write(tmp_path, "q", _image("ixp2800", name="q"))
    res = CliRunner().invoke(run_cmd, [f"{elf}@0", f"{other}@1", "--cycles", "100"])
    assert res.exit_code == 1 and "must be linked for one chip config" in res.output, res.output


def test_me_names_are_read_on_the_image_config(tmp_path: Path) -> None:
    """An ME list names MEs of the chip the image runs on: 1:2 is flat 6 with 4 MEs a
    cluster, 10 with eight."""
    eight = _chip_config(tmp_path, name="eight_a_cluster", me_per_cluster=8)
    elf = _write(tmp_path, "p", _image(eight))
    res = CliRunner().invoke(run_cmd, [f"{elf}@1:2", "--cycles", "100", "--json"])
    assert res.exit_code == 0, res.output
    assert [m["me"] for m in json.loads(res.output)["mes"]] == [10]


def test_the_debugger_opens_an_image_on_its_config(tmp_path: Path) -> None:
    big = _chip_config(tmp_path, sram_channel_bytes=BIG_SRAM)
    elf = _write(tmp_path, "p", _image(big))
    assert open_target(elf).chip.config["sram_channel_bytes"] == BIG_SRAM
    with pytest.raises(TargetError, match="differs in"):
        open_target(elf, "ixp2800")


def test_a_config_file_is_recorded_by_its_absolute_path(tmp_path: Path) -> None:
    rel = os.path.relpath(_chip_config(tmp_path), Path.cwd())
    assert recorded_config(rel) == str((Path.cwd() / rel).resolve())
    assert recorded_config("ixp2800") == "ixp2800"
    assert recorded_config(str(CONFIG_DIR / "ixp2800.yaml")) == str((CONFIG_DIR / "ixp2800.yaml").resolve())
