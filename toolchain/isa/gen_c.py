"""Generate the emulator's C decoder header from mev2.yaml.

    python -m npkit.toolchain.isa.gen_c OUT.h

The header holds class matching, field extractors and every enum value, so the
C core decodes with exactly the facts the assembler encodes with.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import model


def c_name(text: str) -> str:
    s = str(text).replace("+", "PLUS").replace("-", "MINUS").replace("~", "NOT")
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").upper()
    return ("_" + s) if s[:1].isdigit() else s


def generate() -> str:
    isa = model.isa()
    out = [
        "/* Generated from toolchain/isa/mev2.yaml by npkit.toolchain.isa.gen_c. Do not edit. */",
        "#ifndef NPK_MEV2_ISA_H",
        "#define NPK_MEV2_ISA_H",
        "#include <stdint.h>",
        "",
        "#define NPK_WORD_BITS 40",
        "#define NPK_WORD_MASK 0xFFFFFFFFFFull",
        "",
        "enum npk_iclass {",
    ]
    out += [f"    NPK_IC_{c_name(name)}," for name in isa.classes]
    out += ["    NPK_IC_ILLEGAL", "};", ""]
    out.append("static inline enum npk_iclass npk_iclass_of(uint64_t w)\n{")
    for name, cls in isa.classes.items():
        out.append(f"    if ((w & 0x{cls.mask:010X}ull) == 0x{cls.value:010X}ull) return NPK_IC_{c_name(name)};")
    out += ["    return NPK_IC_ILLEGAL;", "}", ""]
    out.append("static inline const char *npk_iclass_name(enum npk_iclass c)\n{\n    switch (c) {")
    for name in isa.classes:
        out.append(f'    case NPK_IC_{c_name(name)}: return "{name}";')
    out += ['    default: return "illegal";', "    }", "}", ""]
    for name, cls in isa.classes.items():
        for field, (hi, lo) in cls.fields.items():
            mask = (1 << (hi - lo + 1)) - 1
            out.append(
                f"#define NPK_{c_name(name)}_{c_name(field)}(w) ((uint32_t)(((w) >> {lo}) & 0x{mask:X}u))"
            )
        out.append("")
    for enum_name, table in isa.enums.items():
        for key, val in table.items():
            base = f"NPK_{c_name(enum_name)}_{c_name(key)}"
            if isinstance(val, dict):
                out.append(f"#define {base}_CMD {int(val['cmd'])}")
                out.append(f"#define {base}_SUB {int(val.get('sub', 0))}")
            else:
                out.append(f"#define {base} {int(val)}")
        out.append("")
    for name, addr in isa.local_csrs.items():
        out.append(f"#define NPK_LCSR_{c_name(name)} 0x{addr:03X}")
    out.append("")
    for name, addr in isa.cap_csrs.items():
        out.append(f"#define NPK_CAPCSR_{c_name(name)} 0x{addr:04X}")
    out.append("")
    for code, name in isa.restricted_index_regs.items():
        out.append(f"/* restricted index register {int(code):2d}: {name} */")
    out += ["", "#endif /* NPK_MEV2_ISA_H */", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m npkit.toolchain.isa.gen_c OUT.h", file=sys.stderr)
        return 2
    path = Path(args[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    text = generate()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
