"""The generated C header classifies and extracts fields exactly as the Python ISA does."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from npkit.toolchain import isa
from npkit.toolchain.isa import gen_c

C_PROGRAM = r"""
#include <stdio.h>
#include <inttypes.h>
#include "mev2_isa.h"
int main(void) {
    uint64_t w;
    while (scanf("%" SCNx64, &w) == 1) {
        enum npk_iclass c = npk_iclass_of(w);
        printf("%s", npk_iclass_name(c));
        if (c == NPK_IC_ALU) printf(" %u %u %u %u", NPK_ALU_OP(w), NPK_ALU_DEST(w), NPK_ALU_A_SRC(w), NPK_ALU_B_SRC(w));
        if (c == NPK_IC_BRANCH) printf(" %u %u", NPK_BRANCH_COND(w), NPK_BRANCH_TARGET(w));
        if (c == NPK_IC_SRAM) printf(" %u %u %u", NPK_SRAM_CMD(w), NPK_SRAM_SIG(w), NPK_SRAM_REF_CNT(w));
        printf("\n");
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is required (installed by make)"
    d = tmp_path_factory.mktemp("genc")
    (d / "mev2_isa.h").write_text(gen_c.generate())
    (d / "main.c").write_text(C_PROGRAM)
    exe = d / "classify"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(d), str(d / "main.c"), "-o", str(exe)],
                   check=True)
    return exe


def _python_view(w: int) -> str:
    cls = isa.isa().classify(w)
    if cls is None:
        return "illegal"
    out = cls.name
    if cls.name == "alu":
        out += " " + " ".join(str(cls.get(w, f)) for f in ("op", "dest", "a_src", "b_src"))
    if cls.name == "branch":
        out += f" {cls.get(w, 'cond')} {cls.get(w, 'target')}"
    if cls.name == "sram":
        out += " " + " ".join(str(cls.get(w, f)) for f in ("cmd", "sig", "ref_cnt"))
    return out


def test_c_header_agrees_with_python(classifier: Path) -> None:
    rng = random.Random(7)
    words = [rng.getrandbits(40) for _ in range(3000)]
    words += [0xF0000CC005, 0xD805C00011, 0x0042108002, 0xE000020000]
    out = subprocess.run([str(classifier)], input="\n".join(f"{w:x}" for w in words), capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == [_python_view(w) for w in words]
    assert len({line.split()[0] for line in out}) >= 15  # random words reach most classes
