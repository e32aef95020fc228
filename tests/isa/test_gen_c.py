"""The generated C header says what the Python ISA says: classes and fields (3,000 random
words), every memory/unit command of every unit (legality, direction, word count, signal
pair), the whole operand-field map, every enum value, and which ALU operations are
instructions of their own."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from npkit.asm import isa
from npkit.asm.isa import DecodeError, decode, gen_c
from npkit.asm.isa.gen_c import c_name
from npkit.asm.isa.operands import OperandError, decode_restricted, decode_unrestricted

INCLUDE = Path(__file__).resolve().parents[2] / "emulator" / "include"

CLASSIFY = r"""
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
        if (npk_iclass_unit(c) >= 0 && c != NPK_IC_CAP_CSR) printf(" cmd %s", npk_cmd_info_of(npk_mem_command(c, w))->name);
        printf("\n");
    }
    return 0;
}
"""

DIRS = ["none", "push", "pull", "both"]


def _tables_program() -> str:
    """A C program that prints the generated tables, one fact a line."""
    d = isa.isa()
    lines = ["#include <stdio.h>", '#include "mev2_isa.h"', "int main(void) {"]
    lines.append("""
    for (int c = 0; c < NPK_IC_ILLEGAL; c++) {
        if (npk_iclass_unit((enum npk_iclass)c) < 0) continue;
        for (unsigned cmd = 0; cmd < 16; cmd++)
            for (unsigned sub = 0; sub < 4; sub++) {
                const npk_cmd_info *k = npk_cmd_info_of(npk_cmd_lookup((enum npk_iclass)c, cmd, sub));
                if (!k->name[0]) continue;
                printf("cmd %s %u %u %s %s %u %u %u %u %u %u %u %u %u %u %u %u\\n", npk_iclass_name((enum npk_iclass)c), cmd, sub,
                       k->unit, k->name, k->unit_id, k->cmd, k->sub, k->dir, k->words, k->key_words, k->count,
                       k->no_xfer, k->no_sig, k->split, k->msf_buffer, k->sig_pair + 2u * k->xfer_dram);
            }
    }
    for (unsigned n = 0; n < 1024; n++)
        for (int dest = 0; dest < 2; dest++) {
            npk_opdef o = npk_unrestricted_def(n, dest);
            printf("u %u %d %u %u %u %d %u %u\\n", n, dest, o.kind, o.file, o.via, o.step, o.offset, o.num);
        }
    for (unsigned n = 0; n < 256; n++)
        for (unsigned msb = 0; msb < 2; msb++)
            for (int dest = 0; dest < 2; dest++)
                printf("r %u %u %d %u\\n", n, msb, dest, npk_restricted_to_u(n, msb, dest));
#define ALU(NAME, CODE) printf("alu %s %d\\n", #NAME, CODE);
    NPK_ALU_PLAIN_OPS(ALU)
#undef ALU
#define OWN(NAME, CODE) printf("own %s %d\\n", #NAME, CODE);
    NPK_ALU_OWN_OPS(OWN)
#undef OWN""")
    for enum in d.enums:
        lines.append(f'    for (unsigned v = 0; v < 64; v++) {{ const char *s = npk_{enum}_name(v); '
                     f'if (s) printf("enum {enum} %u %s\\n", v, s); }}')  # fmt: skip
    lines.append("    return 0;\n}\n")
    return "\n".join(lines)


def _build(tmp: Path, name: str, source: str, header: str | None = None) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is required (installed by make)"
    (tmp / "mev2_isa.h").write_text(header if header is not None else gen_c.generate())
    (tmp / f"{name}.c").write_text(source)
    exe = tmp / name
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(tmp), "-I", str(INCLUDE),
                    str(tmp / f"{name}.c"), "-o", str(exe)], check=True)  # fmt: skip
    return exe


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("genc")
    return {"classify": _build(d, "classify", CLASSIFY), "tables": _build(d, "tables", _tables_program())}


@pytest.fixture(scope="module")
def tables(built: dict[str, Path]) -> list[list[str]]:
    return [line.split() for line in subprocess.run([str(built["tables"])], capture_output=True, text=True,
                                                    check=True).stdout.splitlines()]  # fmt: skip


def _python_view(w: int) -> str:
    d = isa.isa()
    cls = d.classify(w)
    if cls is None:
        return "illegal"
    out = cls.name
    if cls.name == "alu":
        out += " " + " ".join(str(cls.get(w, f)) for f in ("op", "dest", "a_src", "b_src"))
    if cls.name == "branch":
        out += f" {cls.get(w, 'cond')} {cls.get(w, 'target')}"
    if cls.name == "sram":
        out += " " + " ".join(str(cls.get(w, f)) for f in ("cmd", "sig", "ref_cnt"))
    unit = d.unit_of_class.get(cls.name)
    if unit is not None:
        found = unit.lookup(cls.get(w, "cmd"), cls.get(w, "sub"))
        out += f" cmd {found[0].name if found is not None and _command_fields_ok(cls, w, found[0]) else ''}"
    return out


def _command_fields_ok(cls: isa.model.ClassDef, w: int, c: isa.model.MemCmd) -> bool:
    sig, mode, cnt = cls.get(w, "sig"), cls.get(w, "sig_mode"), cls.get(w, "ref_cnt")
    if (sig == 0 and mode != 3) or (c.no_sig and sig):
        return False
    return 1 <= cnt <= 3 if c.words == "keys" else (c.count or cnt == 0)


def test_c_header_agrees_with_python(built: dict[str, Path]) -> None:
    rng = random.Random(7)
    words = [rng.getrandbits(40) for _ in range(3000)]
    words += [0xF0000CC005, 0xD805C00011, 0x0042108002, 0xE000020000]
    out = subprocess.run([str(built["classify"])], input="\n".join(f"{w:x}" for w in words), capture_output=True,
                         text=True, check=True).stdout.split("\n")[:-1]
    assert out == [_python_view(w) for w in words]
    assert len({line.split()[0] for line in out}) >= 15  # random words reach most classes
    assert sum(" cmd " in line and not line.endswith(" cmd ") for line in out) > 100


def test_every_command_of_every_unit_agrees(tables: list[list[str]]) -> None:
    d = isa.isa()
    got = {(r[1], int(r[2]), int(r[3])): r[4:] for r in tables if r[0] == "cmd"}
    want = {}
    for unit in d.units.values():
        for cmd in range(16):
            for sub in range(4):
                found = unit.lookup(cmd, sub)
                if found is None:
                    continue
                c = found[0]
                want[(unit.cls, cmd, sub)] = [
                    unit.name, c.name, "", str(c.cmd), str(c.sub), str(DIRS.index(c.dir)),
                    str(isa.model.WORD_RULES.index(c.words)), str(c.key_words), str(int(c.count)),
                    str(int(c.no_xfer)), str(int(c.no_sig)), str(int(c.split)), str(int(c.msf_buffer)),
                    str(int(unit.signal_pair) + 2 * (unit.xfer == "dram")),
                ]  # fmt: skip
    for key in got:
        got[key][2] = ""  # the unit number: NPK_UNIT_* of the C API, checked below
    assert got == want
    named = {c.name for u in d.units.values() for c in u.commands.values()}
    assert named == {v[1] for v in got.values()}, "every command is reachable from its (cmd, sub)"
    units = {r[4]: int(r[6]) for r in tables if r[0] == "cmd"}
    assert len(set(units.values())) == len(d.units)  # one C unit number per unit


def test_operand_field_map_agrees(tables: list[list[str]]) -> None:
    kinds = ["illegal", "gpr", "abs", "xfer", "dxfer", "nn", "imm", "none", "index"]
    checked = 0
    for r in (r for r in tables if r[0] == "u"):
        num, dest, kind, num_c = int(r[1]), r[2] == "1", kinds[int(r[3])], int(r[8])
        try:
            op = decode_unrestricted(num, "a", dest)
        except OperandError:
            # the disassembler rejects it: undefined (illegal in C), or a constant other than
            # 0x300 as a destination (the emulator drops that write)
            assert kind == "illegal" or (dest and kind == "none"), (num, dest, kind)
            continue
        if op.kind == "idx":
            entry = next(e for e in isa.isa().operand_fields["unrestricted"] if e.covers(num))
            assert kind == "index" and op.name.startswith(entry.name), (num, op, kind)
            assert int(r[6]) == entry.step and (num_c if entry.offset else 0) == (num & ~entry.mask), (num, r)
        else:
            assert kind == op.kind and (op.kind == "none" or num_c == op.index), (num, dest, op, r)
        checked += 1
    assert checked > 700
    for r in (r for r in tables if r[0] == "r"):
        num, msb, dest, u = int(r[1]), int(r[2]), r[3] == "1", int(r[4])
        try:
            op = decode_restricted(num, "a", dest, msb)
        except OperandError:
            assert u == 0x400 or (dest and u & 0x300 == 0x300), (num, msb, dest, u)
            continue
        assert u != 0x400 and decode_unrestricted(u, "a", dest) == op, (num, msb, dest, hex(u), op)


def test_enums_and_alu_operations_agree(tables: list[list[str]]) -> None:
    d = isa.isa()
    got = {(r[1], int(r[2])): r[3] for r in tables if r[0] == "enum"}
    want = {}
    for enum, table in d.enums.items():
        for name, value in table.items():
            if int(value) < 64:
                want.setdefault((enum, int(value)), str(name))
    assert got == want
    plain = {r[1]: int(r[2]) for r in tables if r[0] == "alu"}
    own = {r[1]: int(r[2]) for r in tables if r[0] == "own"}
    assert set(own) == {c_name(m.fact("alu_op")) for m in d.mnemonics.values() if m.fact("alu_op")}
    assert {**plain, **own} == {c_name(k): int(v) for k, v in d.enums["alu_op"].items()}


def test_decodable_memory_words_are_commands_in_c(built: dict[str, Path]) -> None:
    """Both ways: a memory word the disassembler accepts names a command in C, and a
    word C takes for a command decodes (undefined operand fields aside)."""
    rng = random.Random(11)
    d = isa.isa()
    words = []
    for unit in d.units.values():
        cls = d.classes[unit.cls]
        for _ in range(400):
            w = (rng.getrandbits(40) & ~cls.mask) | cls.value
            w = cls.put(cls.put(w, "a_src", rng.choice([1, 2, 0x21])), "b_src", rng.choice([3, 0x85, 0x22]))
            words.append(w)
    out = subprocess.run([str(built["classify"])], input="\n".join(f"{w:x}" for w in words), capture_output=True,
                         text=True, check=True).stdout.split("\n")[:-1]
    both = 0
    for w, line in zip(words, out, strict=True):
        c_cmd = line.split(" cmd", 1)[1].strip()
        try:
            text = decode(w)
        except DecodeError:
            assert c_cmd == "", (hex(w), line)
            continue
        assert c_cmd and f"[{c_cmd}," in text or text.startswith(f"{c_cmd}["), (hex(w), line, text)
        both += 1
    assert both > 300
