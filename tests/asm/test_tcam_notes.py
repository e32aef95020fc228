"""The assembler, listing and disassembler know the TCAM (docs/tcam.md): tcam.h takes the
chip config's defines (`npk asm --config`), the listing notes the SRAM commands of its
macros, and the disassembler (`npk disasm --config`) notes an SRAM command whose address
the code before it makes known in the TCAM's window."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from npkit.asm.assembler import assemble_text
from npkit.asm.base.tcam_map import Window
from npkit.asm.disasm import Words, disassemble
from npkit.asm.listing import render_listing
from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "microcode" / "include"
SPP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")

KNOWN = """\
    immed[a3, 0x0010]
    immed_w1[a3, 0x8071]
    sram[read, $0, a3, 0, 4], ctx_swap[s1]
    immed[a4, 0x8060, <<16]
    immed[b2, 720]
    sram[write, $0, a4, b2, 1], ctx_swap[s1]
    sram[read, $0, a4, b1, 1], ctx_swap[s1]
    alu[a3, a3, +, 1]
    sram[read, $0, a3, 0, 1], ctx_swap[s1]
    immed[a5, 0x100]
    sram[read, $0, a5, 0, 1], ctx_swap[s1]
    halt
"""


def _disasm(text: str, window: Window | None) -> list[str]:
    asm = assemble_text(text)
    return disassemble(Words(asm.program.words), tcam=window).splitlines()


def test_disassembler_notes_known_addresses() -> None:
    lines = [ln for ln in _disasm(KNOWN, Window()) if ln.strip().startswith("sram")]
    assert lines[0].endswith("; tcam lookup, result slot 1")
    assert lines[1].endswith("; tcam entry 5 control")  # 0x80600000 + 5 * 128 + 80
    assert lines[2].endswith("; tcam entries (+ b1)")  # the base known, the offset not
    assert ";" not in lines[3]  # a3 changed by the alu: no longer known
    assert ";" not in lines[4]  # outside the window
    assert all(";" not in ln for ln in _disasm(KNOWN, None) if ln.strip().startswith("sram"))
    other = [ln for ln in _disasm(KNOWN, Window(0xC0600000)) if ln.strip().startswith("sram")]
    assert all(";" not in ln for ln in other)  # another chip's window


def test_branch_target_forgets_values() -> None:
    text = "    immed[a3, 0x8061, <<16]\nagain#:\n    sram[read, $0, a3, 0, 4], ctx_swap[s1]\n    br[again#]\n"
    assert all(";" not in ln for ln in _disasm(text, Window()) if ln.strip().startswith("sram"))


LOOKUP = """\
#define NUM_CONTEXTS 8
#include "tcam.h"
.reg slot
.reg write $k0 $k1 $k2 $k3 $k4
.reg read $r0 $r1 $r2 $r3
.xfer_order $k0 $k1 $k2 $k3 $k4
.xfer_order $r0 $r1 $r2 $r3
    tcam_slot(slot)
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    halt
"""


def test_listing_notes_the_macros_commands() -> None:
    asm = assemble_text(LOOKUP, path="l.uc", include_dirs=[INCLUDE])
    rows = [ln for ln in render_listing(asm).splitlines() if "sram[" in ln]
    assert re.search(r"; tcam key \(\+ [ab]\d+\)$", rows[0]), rows[0]  # the base known, the slot's offset not
    assert re.search(r"; tcam lookup \(\+ [ab]\d+\)$", rows[1]), rows[1]


def test_npk_asm_config_defines_tcam_h(tmp_path: Path) -> None:
    src = tmp_path / "t.uc"
    src.write_text("#include \"tcam.h\"\n#if (TCAM_BASE != 0x83E00000) || (TCAM_KEY_LW != 9)\n#error not the config's\n"
                   "#endif\n    halt\n")  # fmt: skip
    chip = tmp_path / "chip.yaml"
    chip.write_text(Path(SPP).read_text().replace("window: 0x00600000", "window: 0x03E00000")
                    .replace("key_bits: 144", "key_bits: 288") + "sram_channel_bytes: 67108864\n")  # fmt: skip
    run = CliRunner().invoke(main, ["asm", str(src), "-I", str(INCLUDE), "--config", str(chip), "-o", str(tmp_path / "t.elf")])
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(main, ["asm", str(src), "-I", str(INCLUDE), "-o", str(tmp_path / "t.elf")])
    assert run.exit_code == 1 and "not the config's" in run.output
    chip.write_text(Path(SPP).read_text().replace("key_bits: 144", "key_bits: 100"))
    run = CliRunner().invoke(main, ["asm", str(src), "-I", str(INCLUDE), "--config", str(chip)])
    assert run.exit_code == 1 and f"{chip}:17: tcam.key_bits" in run.output and "Traceback" not in run.output


def test_npk_disasm_config(tmp_path: Path) -> None:
    src = tmp_path / "k.uc"
    src.write_text(KNOWN)
    elf = tmp_path / "k.elf"
    assert CliRunner().invoke(main, ["asm", str(src), "-o", str(elf)]).exit_code == 0
    run = CliRunner().invoke(main, ["disasm", str(elf), "--config", SPP])
    assert run.exit_code == 0 and "; tcam lookup, result slot 1" in run.output
    assert "tcam" not in CliRunner().invoke(main, ["disasm", str(elf)]).output
