"""Generate the emulator's C decoder header from mev2.yaml.

    python -m npkit.asm.isa.gen_c OUT.h [ISA.yaml]

The header holds class matching, field extractors, every enum value, the operand-field
map, the memory/unit command table (legality, direction, word count, signal pair) and
the dispatch lists that name each command's and each ALU operation's semantics
function, so the C core decodes and executes with exactly the facts the assembler
encodes with.  It includes npk_emu.h (the unit numbers NPK_UNIT_*).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import model
from .model import Isa, MemCmd, OperandEntry


def c_name(text: str) -> str:
    s = str(text).replace("+", "PLUS").replace("-", "MINUS").replace("~", "NOT")
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").upper()
    return ("_" + s) if s[:1].isdigit() else s


def _classes(d: Isa) -> list[str]:
    out = ["enum npk_iclass {"]
    out += [f"    NPK_IC_{c_name(name)}," for name in d.classes]
    out += ["    NPK_IC_ILLEGAL", "};", ""]
    out.append("static inline enum npk_iclass npk_iclass_of(uint64_t w)\n{")
    for name, cls in d.classes.items():
        out.append(f"    if ((w & 0x{cls.mask:010X}ull) == 0x{cls.value:010X}ull) return NPK_IC_{c_name(name)};")
    out += ["    return NPK_IC_ILLEGAL;", "}", ""]
    out.append("static inline const char *npk_iclass_name(enum npk_iclass c)\n{\n    switch (c) {")
    out += [f'    case NPK_IC_{c_name(name)}: return "{name}";' for name in d.classes]
    out += ['    default: return "illegal";', "    }", "}", ""]
    for name, cls in d.classes.items():
        for field, (hi, lo) in cls.fields.items():
            mask = (1 << (hi - lo + 1)) - 1
            out.append(f"#define NPK_{c_name(name)}_{c_name(field)}(w) ((uint32_t)(((w) >> {lo}) & 0x{mask:X}u))")
        out.append("")
    return out


def _enums(d: Isa) -> list[str]:
    """#define per value, and npk_<enum>_name(v): the value's name, NULL when undefined."""
    out: list[str] = []
    for enum_name, table in d.enums.items():
        for key, val in table.items():
            out.append(f"#define NPK_{c_name(enum_name)}_{c_name(key)} {int(val)}")
        out.append(f"static inline const char *npk_{enum_name}_name(uint32_t v)\n{{\n    switch (v) {{")
        seen: set[int] = set()
        for key, val in table.items():
            if int(val) not in seen:
                seen.add(int(val))
                out.append(f'    case {int(val)}: return "{key}";')
        out += ["    default: return 0;", "    }", "}", ""]
    for name, addr in d.local_csrs.items():
        out.append(f"#define NPK_LCSR_{c_name(name)} 0x{addr:03X}")
    out.append("")
    for name, addr in d.cap_csrs.items():
        out.append(f"#define NPK_CAPCSR_{c_name(name)} 0x{addr:04X}")
    out.append("")
    return out


# ---- operand fields ------------------------------------------------------------------

_KINDS = ("illegal", "gpr", "abs", "xfer", "dxfer", "nn", "imm", "none", "index")
_FILES = ("", "xfer", "dxfer", "lm", "nn")
_VIAS = ("", "t_index", "lm_addr0", "lm_addr1", "nn_ring")


def _opdef(e: OperandEntry, dest: bool) -> str:
    kind = "none" if dest and e.kind == "imm" else e.kind
    if dest and e.source_only:
        kind = "illegal"
    return (f"(npk_opdef){{NPK_OPK_{kind.upper()}, NPK_OPFILE_{(e.file or 'none').upper()}, "
            f"NPK_OPVIA_{(e.via or 'none').upper()}, {e.step}, {1 if e.offset else 0}, num & 0x{~e.mask & 0x3FF:X}u}}")  # fmt: skip


def _operands(d: Isa) -> list[str]:
    u = d.operand_fields["unrestricted"]
    r = d.operand_fields["restricted"]
    out = ["/* Operand fields (mev2.yaml operand_fields): what a 10-bit unrestricted field value names */"]
    out.append("enum npk_opk {" + ", ".join(f"NPK_OPK_{k.upper()}" for k in _KINDS) + "};")
    out.append("enum npk_opfile {" + ", ".join(f"NPK_OPFILE_{(f or 'none').upper()}" for f in _FILES) + "};")
    out.append("enum npk_opvia {" + ", ".join(f"NPK_OPVIA_{(v or 'none').upper()}" for v in _VIAS) + "};")
    out += [
        "typedef struct npk_opdef {",
        "    uint8_t kind;      /* NPK_OPK_*: none = a destination that discards the write */",
        "    uint8_t file;      /* index registers: the registers reached (NPK_OPFILE_*) */",
        "    uint8_t via;       /* index registers: the index (NPK_OPVIA_*) */",
        "    int8_t step;       /* index registers: post-increment, in registers */",
        "    uint8_t offset;    /* index registers: num is an offset added to the index */",
        "    uint32_t num;      /* register number, offset or constant */",
        "} npk_opdef;",
        "",
        "static inline npk_opdef npk_unrestricted_def(uint32_t num, int is_dest)\n{",
    ]
    for e in u:
        cond = f"(num & 0x{e.mask:03X}u) == 0x{e.match:03X}u"
        if e.source_only or e.kind == "imm":
            out.append(f"    if ({cond}) return is_dest ? {_opdef(e, True)} : {_opdef(e, False)};")
        else:
            out.append(f"    if ({cond}) return {_opdef(e, False)};")
    out += ["    return (npk_opdef){NPK_OPK_ILLEGAL, 0, 0, 0, 0, num};", "}", ""]
    # restricted -> the unrestricted field value naming the same operand
    by_kind = {e.kind: e for e in u if e.kind != "index"}
    index_by_name = {e.name: e for e in u if e.kind == "index"}
    out.append("/* The unrestricted field value of the operand a restricted field names (imm_msb: the")
    out.append(" * instruction's immediate MSB); NPK_OPERAND_ILLEGAL when it names none */")
    out.append("#define NPK_OPERAND_ILLEGAL 0x400u")
    out.append("static inline uint32_t npk_restricted_to_u(uint32_t num, uint32_t imm_msb, int is_dest)\n{")
    imm_u = by_kind["imm"]
    for e in r:
        cond = f"(num & 0x{e.mask:02X}u) == 0x{e.match:02X}u"
        if e.kind == "imm":
            out.append(f"    if ({cond}) {{")
            if e.none is not None:
                out.append(f"        if (is_dest && num == 0x{e.none:02X}u) return 0x{imm_u.none or 0:03X}u;")
            out.append(f"        return 0x{imm_u.match:03X}u | (((imm_msb << 7) | ((num & 0xC0u) >> 1) | (num & 0x1Fu)) & 0xFFu);")
            out.append("    }")
        elif e.kind == "index":
            out.append(f"    if ({cond}) switch (num & 0x{~e.mask & 0xFF:02X}u) {{")
            for code, name in sorted((int(k), str(v)) for k, v in d.restricted_index_regs.items()):
                m = re.match(r"^(.*?)(?:\[(\d+)\])?$", name)
                ue = index_by_name.get(name) or index_by_name[m[1] if m else name]
                value = ue.match | (int(m[2] or 0) if m and ue.offset else 0)
                if ue.source_only:
                    out.append(f"        case {code}: return is_dest ? NPK_OPERAND_ILLEGAL : 0x{value:03X}u;  /* {name} */")
                else:
                    out.append(f"        case {code}: return 0x{value:03X}u;  /* {name} */")
            out.append("        default: return NPK_OPERAND_ILLEGAL;")
            out.append("    }")
        else:
            out.append(f"    if ({cond}) return 0x{by_kind[e.kind].match:03X}u | (num & 0x{~e.mask & 0xFF:02X}u);")
    out += ["    return NPK_OPERAND_ILLEGAL;", "}", ""]
    return out


# ---- memory / unit commands ------------------------------------------------------------


def _cmd_id(c: MemCmd) -> str:
    return f"NPK_CMD_{c_name(c.unit)}_{c_name(c.name)}"


def _commands(d: Isa) -> list[str]:
    cmds = [c for u in d.units.values() for c in u.commands.values()]
    out = [
        "/* Memory and unit commands (mev2.yaml units).  NPK_UNIT_* are the C API's unit numbers. */",
        "enum npk_dir { NPK_DIR_NONE = 0, NPK_DIR_PUSH = 1, NPK_DIR_PULL = 2, NPK_DIR_BOTH = 3 };",
        "enum npk_words { " + ", ".join(f"NPK_WORDS_{w.upper()} = {i}" for i, w in enumerate(model.WORD_RULES)) + " };",
        "enum npk_cmd {",
        "    NPK_CMD_NONE = 0,",
    ]
    out += [f"    {_cmd_id(c)}," for c in cmds]
    out += ["    NPK_CMD_COUNT", "};", ""]
    out += [
        "typedef struct npk_cmd_info {",
        "    const char *unit, *name;",
        "    uint8_t unit_id;       /* NPK_UNIT_* */",
        "    uint8_t cmd, sub;",
        "    uint8_t dir;           /* NPK_DIR_* */",
        "    uint8_t words;         /* NPK_WORDS_* */",
        "    uint8_t key_words;     /* words: keys */",
        "    uint8_t count;         /* the instruction gives a reference count (else ref_cnt must be 0) */",
        "    uint8_t no_xfer, no_sig;",
        "    uint8_t split;         /* the unit gets the two address operands apart */",
        "    uint8_t msf_buffer;    /* moves data between DRAM and RBUF/TBUF */",
        "    uint8_t sig_pair;      /* signals s and s+1 */",
        "    uint8_t xfer_dram;     /* names $$ registers by default */",
        "} npk_cmd_info;",
        "",
        "static inline const npk_cmd_info *npk_cmd_info_of(uint32_t op)\n{",
        "    static const npk_cmd_info t[NPK_CMD_COUNT] = {",
        '        {"", "", 0, 0, 0, NPK_DIR_NONE, NPK_WORDS_COUNT, 0, 0, 0, 0, 0, 0, 0, 0},',
    ]
    for c in cmds:
        u = d.units[c.unit]
        out.append(
            f'        {{"{c.unit}", "{c.name}", NPK_UNIT_{c_name(c.unit)}, {c.cmd}, {c.sub}, NPK_DIR_{c.dir.upper()}, '
            f"NPK_WORDS_{c.words.upper()}, {c.key_words}, {int(c.count)}, {int(c.no_xfer)}, {int(c.no_sig)}, "
            f"{int(c.split)}, {int(c.msf_buffer)}, {int(u.signal_pair)}, {int(u.xfer == 'dram')}}},"
        )
    out += ["    };", "    return &t[op < NPK_CMD_COUNT ? op : 0];", "}", ""]
    # (class, cmd, sub) -> command, by the decoder's own rule (model.Unit.lookup)
    out.append("/* The command a word of class c names by its cmd and sub fields (the unit's sub rule")
    out.append(" * applied); NPK_CMD_NONE: an illegal instruction */")
    out.append("static inline uint32_t npk_cmd_lookup(enum npk_iclass c, uint32_t cmd, uint32_t sub)\n{")
    out.append("    switch (c) {")
    for u in d.units.values():
        out.append(f"    case NPK_IC_{c_name(u.cls)}:")
        out.append("        switch ((cmd & 15) << 2 | (sub & 3)) {")
        for cmd in range(16):
            for sub in range(4):
                found = u.lookup(cmd, sub)
                if found is not None:
                    out.append(f"        case {cmd << 2 | sub}: return {_cmd_id(found[0])};")
        out.append("        default: return NPK_CMD_NONE;")
        out.append("        }")
    out += ["    default: return NPK_CMD_NONE;", "    }", "}", ""]
    # the whole word's legality, the disassembler's rules (asm/isa/decode.py dec_mem/dec_hash)
    mem = c_name(next(iter(d.units.values())).cls)  # the memory classes share one field layout
    out += [
        "/* The command of a memory-class word, NPK_CMD_NONE when the word is no instruction: a",
        " * (cmd, sub) the unit lacks, ctx_swap[] without a signal, a signal on a command that",
        " * cannot signal, a reference count on a command that takes none, a key count outside",
        " * 1-3 (the disassembler's rules; all memory classes share one field layout) */",
        "static inline uint32_t npk_mem_command(enum npk_iclass c, uint64_t w)\n{",
        f"    uint32_t op = npk_cmd_lookup(c, NPK_{mem}_CMD(w), NPK_{mem}_SUB(w));",
        "    const npk_cmd_info *k = npk_cmd_info_of(op);",
        f"    uint32_t sig = NPK_{mem}_SIG(w), mode = NPK_{mem}_SIG_MODE(w), cnt = NPK_{mem}_REF_CNT(w);",
        "    if (op == NPK_CMD_NONE) return NPK_CMD_NONE;",
        "    if (sig == 0 && mode != NPK_SIG_MODE_SIG_DONE) return NPK_CMD_NONE;",
        "    if (k->no_sig && sig != 0) return NPK_CMD_NONE;",
        "    if (k->words == NPK_WORDS_KEYS) return cnt >= 1 && cnt <= 3 ? op : NPK_CMD_NONE;",
        "    if (!k->count && cnt != 0) return NPK_CMD_NONE;",
        "    return op;",
        "}",
        "",
    ]
    # unit of a class
    out.append("/* The unit a class issues to (-1: none) */")
    out.append("static inline int npk_iclass_unit(enum npk_iclass c)\n{\n    switch (c) {")
    for u in d.units.values():
        out.append(f"    case NPK_IC_{c_name(u.cls)}: return NPK_UNIT_{c_name(u.name)};")
    if "cap_csr" in d.classes and "cap" in d.units:
        out.append("    case NPK_IC_CAP_CSR: return NPK_UNIT_CAP;")
    out += ["    default: return -1;", "    }", "}", ""]
    # semantics
    sems = {c: f"npk_{c.unit}_{c.sem}" for c in cmds}
    out.append("/* Semantics: the unit carries out command `op` when it completes; out[] receives the")
    out.append(" * words the command pushes (its dir says whether it pushes).  One function each,")
    out.append(" * named npk_<unit>_<sem> (mev2.yaml units.*.commands.*.sem, default the name). */")
    out.append("struct npk_event;")
    for fn in dict.fromkeys(sems.values()):
        out.append(f"void {fn}(npk_chip *c, struct npk_event *e, uint32_t *out);")
    out.append("#define NPK_CMD_SEMANTICS(X) \\")
    out += [f"    X({_cmd_id(c)}, {sems[c]}) \\" for c in cmds]
    out.append("")
    return out


# ---- ALU operations -----------------------------------------------------------------


def _alu_ops(d: Isa) -> list[str]:
    own = d.alu_op_mnemonics
    plain = [(k, int(v)) for k, v in d.enums["alu_op"].items() if str(k) not in own]
    special = [(k, int(v)) for k, v in d.enums["alu_op"].items() if str(k) in own]
    out = [
        "/* ALU operations written alu[dest, a, OP, b]: semantics",
        " *   uint8_t npk_alu_<OP>(uint32_t a, uint32_t b, uint8_t cc, uint32_t *result)",
        " * returning the new condition codes (emulator/src/alu_ops.h) */",
        "#define NPK_ALU_PLAIN_OPS(X) \\",
    ]
    out += [f"    X({c_name(k)}, {v}) \\" for k, v in plain]
    out += [
        "",
        "/* ALU operations that are instructions of their own (mev2.yaml mnemonics with alu_op):",
        " * semantics void npk_alu_<OP>(npk_exec *e, const npk_uop *u), the whole instruction (emulator/src/alu.c) */",
        "#define NPK_ALU_OWN_OPS(X) \\",
    ]
    out += [f"    X({c_name(k)}, {v}) \\" for k, v in special]
    out.append("")
    return out


def generate(d: Isa | None = None) -> str:
    d = d or model.isa()
    out = [
        "/* Generated from asm/isa/mev2.yaml by npkit.asm.isa.gen_c. Do not edit. */",
        "#ifndef NPK_MEV2_ISA_H",
        "#define NPK_MEV2_ISA_H",
        "#include <stdint.h>",
        '#include "npk_emu.h"',
        "",
        f"#define NPK_WORD_BITS {int(d.raw.get('word_bits', 40))}",
        "#define NPK_WORD_MASK 0xFFFFFFFFFFull",
        "",
    ]
    out += _classes(d) + _enums(d) + _operands(d) + _commands(d) + _alu_ops(d)
    out += ["#endif /* NPK_MEV2_ISA_H */", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print("usage: python -m npkit.asm.isa.gen_c OUT.h [ISA.yaml]", file=sys.stderr)
        return 2
    path = Path(args[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    text = generate(model.load(args[1]) if len(args) == 2 else None)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
