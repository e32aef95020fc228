"""Physical operands of MEv2 instructions and their field encodings.

Two encodings exist (see mev2.yaml): the 10-bit *unrestricted* field used by
alu, immed, jump, local_csr and mul_step, and the 8-bit *restricted* field used
by alu_shf, ld_field, branches on bits/bytes and memory commands.  A restricted
field cannot name absolute GPRs, and its immediates are 7 bits plus one MSB
shared by the whole instruction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from . import model


class OperandError(ValueError):
    pass


@dataclass(frozen=True)
class Op:
    """kind: none | gpr | abs | xfer | dxfer | nn | imm | idx."""

    kind: str
    index: int = 0
    bank: str = ""  # "a" / "b" for gpr and abs
    name: str = ""  # canonical text for idx operands

    def text(self) -> str:
        if self.kind == "none":
            return "--"
        if self.kind == "gpr":
            return f"{self.bank}{self.index}"
        if self.kind == "abs":
            return f"@{self.bank}{self.index}"
        if self.kind == "xfer":
            return f"${self.index}"
        if self.kind == "dxfer":
            return f"$${self.index}"
        if self.kind == "nn":
            return f"n${self.index}"
        if self.kind == "imm":
            return f"0x{self.index:x}" if self.index > 9 else str(self.index)
        return self.name

    @property
    def is_reg(self) -> bool:
        return self.kind in ("gpr", "abs")


NONE = Op("none")

_UNRESTRICTED_IDX = {
    "*$$index": 0x100, "*$$index++": 0x102, "*$$index--": 0x104,
    "*$index": 0x140, "*$index++": 0x142, "*$index--": 0x144,
    "*l$index0++": 0x210, "*l$index0--": 0x211,
    "*l$index1++": 0x230, "*l$index1--": 0x231,
    "*n$index": 0x241, "*n$index++": 0x243,
}  # fmt: skip
_UNRESTRICTED_IDX_REV = {v: k for k, v in _UNRESTRICTED_IDX.items()}

_PHYS_RE = re.compile(
    r"^(?:(?P<gpr>@?[ab])(?P<gi>\d+)|(?P<x>\$\$?)(?P<xi>\d+)|n\$(?P<ni>\d+)|"
    r"\*l\$index(?P<lm>[01])(?:\[(?P<lmo>\d+)\])?|(?P<num>0x[0-9a-fA-F]+|\d+))$"
)


@lru_cache(maxsize=4096)
def parse_physical(text: str) -> Op:
    """Parse a physical operand as written in assembler source or disassembly."""
    t = text.strip()
    if t == "--":
        return NONE
    if t in _UNRESTRICTED_IDX:
        return Op("idx", name=t)
    m = _PHYS_RE.match(t)
    if not m:
        raise OperandError(f"'{t}' is not a register or constant")
    if m["gpr"]:
        idx = int(m["gi"])
        bank = m["gpr"][-1]
        if m["gpr"].startswith("@"):
            if idx > 127:
                raise OperandError(f"absolute register {t} out of range (0-127)")
            return Op("abs", idx, bank)
        if idx > 31:
            raise OperandError(f"relative register {t} out of range (0-31)")
        return Op("gpr", idx, bank)
    if m["x"]:
        idx = int(m["xi"])
        if idx > 31:
            raise OperandError(f"transfer register {t} out of range (0-31)")
        return Op("dxfer" if m["x"] == "$$" else "xfer", idx)
    if m["ni"] is not None:
        idx = int(m["ni"])
        if idx > 31:
            raise OperandError(f"next-neighbour register {t} out of range (0-31)")
        return Op("nn", idx)
    if m["lm"] is not None:
        off = int(m["lmo"] or 0)
        if off > 15:
            raise OperandError(f"local-memory offset in {t} out of range (0-15)")
        name = f"*l$index{m['lm']}" + (f"[{off}]" if off else "")
        return Op("idx", name=name)
    try:
        return Op("imm", int(m["num"], 0))
    except ValueError:  # '010': Python's base-0 int takes no leading zero (no octal here either)
        raise OperandError(f"number {t!r}: a decimal number has no leading zero (write {t.lstrip('0') or '0'} or 0x...)") from None


def _lm_offset(name: str) -> tuple[int, int] | None:
    m = re.match(r"^\*l\$index([01])(?:\[(\d+)\])?$", name)
    return (int(m[1]), int(m[2] or 0)) if m else None


# ---- unrestricted (10-bit) ------------------------------------------------------


def encode_unrestricted(op: Op, field_bank: str, is_dest: bool) -> int:
    k = op.kind
    if k == "none":
        # Intel's assembler writes an unused source as 0 in the A field and as
        # 0x300 in the B field (RX 45 / QAT 8); a destination "--" is 0x300.
        return 0 if (field_bank == "a" and not is_dest) else 0x300
    if k == "gpr":
        if op.bank != field_bank:
            raise OperandError(f"{op.text()} cannot go in the {field_bank.upper()} operand field")
        return op.index
    if k == "abs":
        if op.bank != field_bank:
            raise OperandError(f"{op.text()} cannot go in the {field_bank.upper()} operand field")
        return 0x80 | op.index
    if k == "xfer":
        return 0x180 | op.index
    if k == "dxfer":
        return 0x1C0 | op.index
    if k == "nn":
        return 0x280 | op.index
    if k == "imm":
        if is_dest:
            raise OperandError("a constant cannot be a destination")
        if not 0 <= op.index <= 0xFF:
            raise OperandError(f"constant {op.text()} does not fit the 8-bit operand field")
        return 0x300 | op.index
    if k == "idx":
        lm = _lm_offset(op.name)
        if lm is not None:
            return (0x200 if lm[0] == 0 else 0x220) | lm[1]
        code = _UNRESTRICTED_IDX[op.name]
        if is_dest and code == 0x241:
            raise OperandError("*n$index cannot be a destination")
        return code
    raise OperandError(f"unsupported operand {op.text()}")


def decode_unrestricted(num: int, field_bank: str, is_dest: bool) -> Op:
    if num & 0x3E0 == 0x000:
        return Op("gpr", num & 0x1F, field_bank)
    if num & 0x380 == 0x080:
        return Op("abs", num & 0x7F, field_bank)
    if num in _UNRESTRICTED_IDX_REV and not (is_dest and num == 0x241):
        return Op("idx", name=_UNRESTRICTED_IDX_REV[num])
    if num & 0x3E0 == 0x180:
        return Op("xfer", num & 0x1F)
    if num & 0x3E0 == 0x1C0:
        return Op("dxfer", num & 0x1F)
    if num & 0x3F0 == 0x200:
        return Op("idx", name="*l$index0" + (f"[{num & 0xF}]" if num & 0xF else ""))
    if num & 0x3F0 == 0x220:
        return Op("idx", name="*l$index1" + (f"[{num & 0xF}]" if num & 0xF else ""))
    if num & 0x3E0 == 0x280:
        return Op("nn", num & 0x1F)
    if num & 0x300 == 0x300:
        if is_dest:
            if num == 0x300:
                return NONE
            raise OperandError(f"constant 0x{num & 0xFF:x} as a destination")
        return Op("imm", num & 0xFF)
    raise OperandError(f"undefined operand encoding 0x{num:03x}")


# ---- restricted (8-bit) ---------------------------------------------------------


@lru_cache(maxsize=1)
def _restricted_idx() -> tuple[dict[str, int], dict[int, str]]:
    table = {int(k): v for k, v in model.isa().restricted_index_regs.items()}
    return {v: k for k, v in table.items()}, table


def encode_restricted(op: Op, field_bank: str, is_dest: bool) -> tuple[int, int | None]:
    """Return (field value, required immediate MSB or None)."""
    k = op.kind
    if k == "none":
        if is_dest:
            return 0x20, None
        # an unused source is 0 in either field, as Intel's assembler writes it: A field
        # RX 11 / TX 3, B field (operands swapped) QAT ae_inst_1b .10 / .11
        return 0, None
    if k == "gpr":
        if op.bank != field_bank:
            raise OperandError(f"{op.text()} cannot go in the {field_bank.upper()} operand field")
        return op.index, None
    if k == "abs":
        raise OperandError(f"absolute register {op.text()} is not allowed in this instruction")
    if k == "xfer":
        return 0x80 | op.index, None
    if k == "dxfer":
        return 0xC0 | op.index, None
    if k == "imm":
        if is_dest:
            raise OperandError("a constant cannot be a destination")
        v = op.index
        if not 0 <= v <= 0xFF:
            raise OperandError(f"constant {op.text()} does not fit the 8-bit operand field")
        return 0x20 | ((v >> 5) & 3) << 6 | (v & 0x1F), (v >> 7) & 1
    if k == "idx":
        by_name, _ = _restricted_idx()
        if op.name not in by_name:
            raise OperandError(f"{op.name} is not allowed in this instruction")
        code = by_name[op.name]
        if is_dest and code == 1:
            raise OperandError("*n$index cannot be a destination")
        return 0x40 | code, None
    raise OperandError(f"{op.text()} is not allowed in this instruction")


def decode_restricted(num: int, field_bank: str, is_dest: bool, imm_msb: int) -> Op:
    if is_dest and num == 0x20:
        return NONE
    if num & 0x20:
        if is_dest:
            raise OperandError(f"constant field 0x{num:02x} as a destination")
        return Op("imm", (imm_msb << 7) | ((num & 0xC0) >> 1) | (num & 0x1F))
    top = num & 0xC0
    if top == 0x00:
        return Op("gpr", num & 0x1F, field_bank)
    if top == 0x40:
        _, by_code = _restricted_idx()
        code = num & 0x1F
        if code in by_code and not (is_dest and code == 1):
            return Op("idx", name=by_code[code])
        raise OperandError(f"undefined index-register encoding 0x{num:02x}")
    if top == 0x80:
        return Op("xfer", num & 0x1F)
    return Op("dxfer", num & 0x1F)
