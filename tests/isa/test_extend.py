"""Adding an instruction is an edit of mev2.yaml plus its semantics function, nothing else.

A test-only memory command (scratch[test_xor], an atomic exclusive or) and a test-only
mnemonic (test_bitrev[dest, src], an ALU operation of its own) are added to a copy of the
description; the C core is built from the generated header of that copy with one extra
C file holding the two semantics functions, and a program using both runs on it: the
assembler, the disassembler, the operand roles and the emulator all take the new
instructions from the description alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from npkit.asm.isa import decode, gen_c, model, operand_roles

ROOT = Path(__file__).resolve().parents[2]
EMU = ROOT / "emulator"

SEMANTICS = r"""
#include "exec.h"

/* scratch[test_xor, $x, a, b]: the word at a + b becomes word ^ $x; the old word comes back */
void npk_scratch_test_xor(npk_chip *c, struct npk_event *e, uint32_t *out)
{
    uint64_t a = e->addr & ~3u;
    uint32_t old = npk_rd32(c->scratch + a);
    npk_wr32(c->scratch + a, old ^ e->data[0]);
    out[0] = old;
}

/* test_bitrev[dest, src]: dest = src with its 32 bits in reverse order */
void npk_alu_TEST_BITREV(npk_exec *e, const npk_uop *u)
{
    uint32_t a, b, r = 0;
    npk_alu_sources(e, u, &a, &b);
    for (int i = 0; i < 32; i++) r |= ((b >> i) & 1u) << (31 - i);
    npk_wr(e, &u->d, r);
    npk_set_alu(e, a, b, r);
}
"""

PROGRAM = """
    immed[a1, 0x40]                  // scratch address
    immed[b1, 0x12345678]
    alu[$1, --, B, b1]
    scratch[test_xor, $1, a1, 0], ctx_swap[s1]
    alu[b2, --, B, $1]              // the word as it was
    test_bitrev[a2, b1]
    halt
"""

RUN = r"""
import json, sys
from npkit.emulator.binding import Chip
words = json.loads(sys.argv[1])
chip = Chip("ixp2800")
chip.write32("scratch", 0x40, 0xF0F0F0F0)
chip.load(0, words)
chip.enable(0, 1)
chip.run(5000)
print(json.dumps({"state": chip.me_status(0)["state"], "scratch": chip.read32("scratch", 0x40),
                  "old": chip.reg(0, "b2"), "rev": chip.reg(0, "a2")}))
"""


def _extended_description(tmp: Path) -> Path:
    raw = yaml.safe_load(model.ISA_FILE.read_text())
    raw["units"]["scratch"]["commands"]["test_xor"] = {"cmd": 11, "dir": "both", "words": "one"}
    raw["enums"]["alu_op"]["test_bitrev"] = 2
    raw["mnemonics"]["test_bitrev"] = {"class": "alu", "encoder": "alu_unary", "alu_op": "test_bitrev",
                                       "operands": ["dest", "src"]}  # fmt: skip
    path = tmp / "mev2_test.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _build_core(tmp: Path, description: model.Isa) -> Path:
    cc = shutil.which("cc")
    assert cc, "a C compiler is required (installed by make)"
    (tmp / "mev2_isa.h").write_text(gen_c.generate(description))
    (tmp / "extra.c").write_text(SEMANTICS)
    sources = sorted(str(p) for p in (EMU / "src").glob("*.c")) + sorted(str(p) for p in (EMU / "src" / "units").glob("*.c"))
    lib = tmp / "libnpkemu_test.so"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared", "-D_POSIX_C_SOURCE=200809L",
                    f"-I{tmp}", f"-I{EMU / 'include'}", f"-I{EMU / 'src'}", "-o", str(lib), *sources, str(tmp / "extra.c")],
                   check=True, capture_output=True, text=True, timeout=300)  # fmt: skip
    return lib


def test_a_command_and_a_mnemonic_added_in_the_description_alone(tmp_path: Path) -> None:
    from npkit.asm.assembler import assemble_text

    description = model.load(_extended_description(tmp_path))
    with model.use(description):
        asm = assemble_text(PROGRAM)
        words = list(asm.image.programs[0].words)
        texts = [decode(w) for w in words]
        assert any(t.startswith("scratch[test_xor, $") for t in texts), texts
        assert any(t.startswith("test_bitrev[") for t in texts), texts
        roles = operand_roles("scratch", ["test_xor", "$1", "a1", "0"])
        assert roles[1].xfer_dir == "both"  # from the command's dir
        assert [r.kind for r in operand_roles("test_bitrev", ["a2", "b1"])] == ["dest", "src"]
    lib = _build_core(tmp_path, description)
    env = dict(os.environ, NPKEMU_LIB=str(lib))
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(words)], env=env, capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    got = json.loads(out.stdout)
    assert got == {"state": "halt", "scratch": 0xF0F0F0F0 ^ 0x12345678, "old": 0xF0F0F0F0,
                   "rev": int(f"{0x12345678:032b}"[::-1], 2)}  # fmt: skip


def test_the_real_description_lacks_them() -> None:
    # the additions above live in the test's copy only
    assert model.isa().command("scratch", "test_xor") is None and model.isa().mnemonic("test_bitrev") is None
    assert "test_xor" not in (EMU / "src" / "gen" / "mev2_isa.h").read_text()
