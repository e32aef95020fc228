"""Encoder and decoder for physical MEv2 instructions, driven by mev2.yaml.

`encode("alu[a1, a2, +, 0x10]") -> int` takes an instruction whose operands are
physical (registers a3/b7/@a5/$2/$$5/n$1/*l$index0[2]..., numbers, CSR and
input-state names, signal numbers `sN`, branch targets as addresses or names a
resolver turns into addresses).  `decode(word) -> str` gives text that encodes
back to the same word for every word `encode` can produce.

Field positions, class patterns and enum values come from the YAML; the
per-family functions below only say which operand goes in which field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import model
from .model import ClassDef, MemCmd, Mnemonic
from .operands import (
    NONE,
    BankError,
    Op,
    OperandError,
    check_context_relative,
    encode_restricted,
    encode_unrestricted,
    parse_physical,
)
from .roles import fixed_banks, operand_roles
from .syntax import SplitInstr, SyntaxProblem, Token, reference_count, split_instruction


class EncodeError(ValueError):
    """The instruction cannot be encoded; `arg` is the index of the operand at fault."""

    def __init__(self, message: str, arg: int | None = None):
        super().__init__(message)
        self.arg = arg


Resolver = Callable[[str], int | None]


@dataclass
class _Ctx:
    split: SplitInstr
    resolve: Resolver | None
    ctx_mode: int
    used_tokens: set[int]
    mn: Mnemonic  # the instruction's entry in mev2.yaml `mnemonics`

    def fact(self, key: str, default: object = None) -> object:
        return self.mn.fact(key, default)

    def arg(self, i: int) -> str:
        if i >= len(self.split.args):
            raise EncodeError(f"'{self.split.mnemonic}' needs more operands", None)
        return self.split.args[i]

    def op(self, i: int) -> Op:
        try:
            op = parse_physical(self.arg(i))
            check_context_relative(op, self.ctx_mode)
        except OperandError as e:
            raise EncodeError(str(e), i) from None
        return op

    def number(self, i: int, what: str = "a constant") -> int:
        text = self.arg(i)
        try:
            return int(text, 0)
        except ValueError:
            pass
        if self.resolve is not None:
            val = self.resolve(text)
            if val is not None:
                return val
        raise EncodeError(f"expected {what}, got '{text}'", i)

    def token(self, name: str) -> Token | None:
        for k, tok in enumerate(self.split.tokens):
            if tok.name.lower() == name:
                self.used_tokens.add(k)
                return tok
        return None

    def nargs(self, *allowed: int) -> int:
        n = len(self.split.args)
        if n not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise EncodeError(f"'{self.split.mnemonic}' takes {want} operands, got {n}")
        return n


def _cls(name: str) -> ClassDef:
    return model.isa().classes[name]


def _enum(name: str) -> dict:
    return model.isa().enums[name]


def _lookup_enum(table: str, key: str, ctx_arg: int | None = None) -> int:
    enum = _enum(table)
    for k, v in enum.items():
        if str(k).lower() == key.lower():
            return v
    raise EncodeError(f"unknown {table.replace('_', ' ')} '{key}'", ctx_arg)


def _reverse(table: str) -> dict[int, str]:
    return {v: str(k) for k, v in _enum(table).items()}


# ---- operand pairs -------------------------------------------------------------


def _pair_unrestricted(a: Op, b: Op) -> tuple[int, int, int]:
    """(a_field, b_field, swap) for two logical sources in unrestricted fields."""
    for swap, (fa, fb) in ((0, (a, b)), (1, (b, a))):
        try:
            return encode_unrestricted(fa, "a", False), encode_unrestricted(fb, "b", False), swap
        except OperandError:
            continue
    raise EncodeError(_bank_conflict(a, b))


def _pair_restricted(a: Op, b: Op, fields: tuple[str, str] = ("", "")) -> tuple[int, int, int, int]:
    """(a_field, b_field, swap, imm_msb) for restricted fields; `fields` the field ("a" /
    "b") the description fixes for a and for b (roles.fixed_banks), "" where either will do."""
    other: OperandError | None = None  # a fault of an operand itself, not of its bank
    for swap, (fa, fb) in ((0, (a, b)), (1, (b, a))):
        if fields[swap] not in ("", "a") or fields[1 - swap] not in ("", "b"):
            continue  # swap puts b in the A field, a in the B field
        try:
            va, ma = encode_restricted(fa, "a", False)
            vb, mb = encode_restricted(fb, "b", False)
        except BankError:
            continue
        except OperandError as e:
            other = other or e
            continue
        msbs = {m for m in (ma, mb) if m is not None and not (m == 0 and _is_none(fa, fb, m))}
        if len(msbs) > 1:
            raise EncodeError("both constants must share bit 7 (one immediate MSB per instruction)")
        return va, vb, swap, (msbs.pop() if msbs else 0)
    if other is not None:
        raise EncodeError(str(other))
    raise EncodeError(_bank_conflict(a, b))


def _is_none(fa: Op, fb: Op, m: int) -> bool:
    return fa.kind == "none" or fb.kind == "none"


def _bank_conflict(a: Op, b: Op) -> str:
    if a.is_reg and b.is_reg and a.bank == b.bank:
        return f"{a.text()} and {b.text()} are both in bank {a.bank.upper()}: one source must be in A, the other in B"
    return f"operands {a.text()} and {b.text()} cannot be encoded together"


def _dest_unrestricted(op: Op) -> tuple[int, int]:
    """(dest field, dest_bank) for a 10-bit destination."""
    bank = 1 if op.bank == "b" else 0
    try:
        return encode_unrestricted(op, op.bank or "a", True), bank
    except OperandError as e:
        raise EncodeError(str(e), 0) from None


def _dest_restricted(op: Op) -> tuple[int, int]:
    bank = 1 if op.bank == "b" else 0
    try:
        val, _ = encode_restricted(op, op.bank or "a", True)
        return val, bank
    except OperandError as e:
        raise EncodeError(str(e), 0) from None


# ---- shifts ------------------------------------------------------------------------

_SHIFT_RE = re.compile(r"^(<<|>>)\s*(rot)?\s*(indirect|\d+)$", re.IGNORECASE)


def _encode_shift(text: str, dbl: bool = False) -> tuple[int, int]:
    """(shift_type, shift_amt) for '<<N', '>>N', '<<rotN', '>>rotN', '<<indirect'."""
    m = _SHIFT_RE.match(text.replace(" ", ""))
    if not m:
        raise EncodeError(f"expected a shift such as <<4, >>8, <<rot3 or >>indirect, got '{text}'")
    direction, rot, amount = m[1], m[2], m[3].lower()
    st = _enum("shift_type")
    if amount == "indirect":
        if rot:
            raise EncodeError("rotate by indirect amount is not encodable")
        if dbl:
            return st["dbl_right"], 0
        return (st["right"], 0) if direction == ">>" else (st["left"], 0)
    n = int(amount)
    if not 0 <= n <= 31:
        raise EncodeError(f"shift amount {n} out of range (0-31)")
    if dbl:
        if direction != ">>" or rot or n == 0:
            raise EncodeError("dbl_shf takes a right shift of 1-31 or >>indirect")
        return st["dbl_right"], n
    if rot:
        left = n if direction == "<<" else (32 - n) & 31
        return st["rot_left"], (32 - left) & 31
    if n == 0:
        return st["rot_left"], 0
    if direction == ">>":
        return st["right"], n
    return st["left"], (32 - n) & 31


def _decode_shift(stype: int, amt: int, dbl: bool = False) -> str:
    st = _enum("shift_type")
    if stype == st["dbl_right"]:
        return ">>indirect" if amt == 0 else f">>{amt}"
    if stype == st["rot_left"]:
        n = (32 - amt) & 31
        return "<<0" if n == 0 else f"<<rot{n}"
    if stype == st["right"]:
        return ">>indirect" if amt == 0 else f">>{amt}"
    return "<<indirect" if amt == 0 else f"<<{(32 - amt) & 31}"


# ---- families ----------------------------------------------------------------------


def _defer(c: _Ctx, max_defer: int = 3) -> int:
    tok = c.token("defer")
    if tok is None:
        return 0
    if not tok.args or len(tok.args) != 1 or not tok.args[0].isdigit():
        raise EncodeError("defer takes a count, e.g. defer[1]")
    n = int(tok.args[0])
    if not 0 <= n <= max_defer:
        raise EncodeError(f"defer[{n}] out of range (0-{max_defer})")
    return n


def _target(c: _Ctx, i: int) -> int:
    t = c.number(i, "a branch target")
    if not 0 <= t < (1 << 13):
        raise EncodeError(f"branch target {t} outside the control store", i)
    return t


def enc_alu(c: _Ctx) -> int:
    n = c.nargs(4, 5)
    if n == 5:
        return enc_alu_shf(c)
    cls = _cls("alu")
    op_name = c.arg(2)
    op = _lookup_enum("alu_op", op_name, 2)
    if op_name.lower() in ("pop_count1", "pop_count2", "pop_count3", "cam_clear", "crc"):
        raise EncodeError(f"'{op_name}' is not an alu operation", 2)
    dest, bank = _dest_unrestricted(c.op(0))
    fa, fb, swap = _pair_unrestricted(c.op(1), c.op(3))
    w = cls.value
    for f, v in (("dest", dest), ("dest_bank", bank), ("op", op), ("a_src", fa), ("b_src", fb), ("swap", swap)):
        w = cls.put(w, f, v)
    return w


def _alu_special(c: _Ctx, op_name: str, dest: Op, a: Op, b: Op, force_swap: int | None = None) -> int:
    cls = _cls("alu")
    d, bank = _dest_unrestricted(dest) if dest.kind != "imm" else (0x300 | dest.index, 0)
    if force_swap is None:
        fa, fb, swap = _pair_unrestricted(a, b)
    else:
        src = a if a.kind != "none" else b  # the one real source goes in the A field
        try:
            fa = encode_unrestricted(src, "a", False)
        except OperandError as e:
            raise EncodeError(f"{e} (this operand must be in bank A)") from None
        fb, swap = 0x300, force_swap
    w = cls.value
    for f, v in (("dest", d), ("dest_bank", bank), ("op", _enum("alu_op")[op_name]),
                 ("a_src", fa), ("b_src", fb), ("swap", swap)):  # fmt: skip
        w = cls.put(w, f, v)
    return w


def _alu_op(c: _Ctx) -> str:
    return str(c.fact("alu_op"))


def enc_alu_source(c: _Ctx) -> int:
    """op[src]: pop_count1, pop_count2."""
    c.nargs(1)
    return _alu_special(c, _alu_op(c), NONE, NONE, c.op(0))


def enc_alu_unary(c: _Ctx) -> int:
    """op[dest, src]: pop_count3, find_bset, cam_read_tag, cam_read_state."""
    c.nargs(2)
    return _alu_special(c, _alu_op(c), c.op(0), NONE, c.op(1))


def enc_alu_binary(c: _Ctx) -> int:
    """op[dest, a, b]: find_bset_with_mask."""
    c.nargs(3)
    return _alu_special(c, _alu_op(c), c.op(0), c.op(1), c.op(2))


def enc_alu_nullary(c: _Ctx) -> int:
    """op (no operands): cam_clear."""
    c.nargs(0)
    return _alu_special(c, _alu_op(c), NONE, NONE, NONE)


def enc_cam_lookup(c: _Ctx) -> int:
    c.nargs(2)
    lm = 0
    for k in (0, 1):
        tok = c.token(f"lm_addr{k}")
        if tok is not None:
            if not tok.args or len(tok.args) != 1 or not tok.args[0].isdigit() or int(tok.args[0]) > 3:
                raise EncodeError(f"lm_addr{k} takes an entry 0-3, e.g. lm_addr{k}[0]")
            lm = (1 << k) | (int(tok.args[0]) << 2)
    return _alu_special(c, _alu_op(c), c.op(0), c.op(1), Op("imm", lm))


def enc_cam_write(c: _Ctx) -> int:
    """cam_write[entry, tag, state], cam_write_state[entry, state]."""
    with_tag = len(c.mn.operands) == 3
    c.nargs(3 if with_tag else 2)
    state = c.number(2 if with_tag else 1, "a CAM state (0-15)")
    return _cam_write(_alu_op(c), entry=c.op(0), tag=c.op(1) if with_tag else NONE, state=state)


def _cam_write(m: str, entry: Op, tag: Op, state: int) -> int:
    cls = _cls("alu")
    if not 0 <= state <= 15:
        raise EncodeError(f"CAM state {state} out of range (0-15)")
    try:
        fb = encode_unrestricted(entry, "b", False)
        fa = encode_unrestricted(tag, "a", False)
    except OperandError as e:
        raise EncodeError(f"{e} (cam_write: entry in bank B or constant, tag in bank A)") from None
    w = cls.value
    for f, v in (("dest", 0x300 | state), ("op", _enum("alu_op")[m]), ("a_src", fa), ("b_src", fb)):
        w = cls.put(w, f, v)
    return w


def enc_crc(c: _Ctx) -> int:
    c.nargs(3)
    cls = _cls("alu")
    crc_type = _lookup_enum("crc_type", c.arg(0), 0)
    nbytes = _enum("crc_bytes")["bytes_0_3"]
    for name, val in _enum("crc_bytes").items():
        if c.token(str(name)) is not None or c.token("crc_" + str(name)) is not None:
            nbytes = val
    bit_swap = 1 if c.token("bit_swap") is not None else 0
    le = int(str(c.fact("crc_le", 0)))
    w = _alu_special(c, "crc", c.op(1), c.op(2), NONE, force_swap=1)
    w = cls.put(w, "b_src", 0x300)
    for f, v in (("crc_type", crc_type), ("crc_bytes", nbytes), ("crc_bit_swap", bit_swap), ("crc_le", le)):
        w = cls.put(w, f, v)
    return w


def enc_alu_shf(c: _Ctx) -> int:
    c.nargs(5)
    op_name = c.arg(2)
    op = _lookup_enum("alu_shf_op", op_name, 2)
    if op_name.lower() == "byte_align":
        raise EncodeError("use byte_align_be[] or byte_align_le[]", 2)
    stype, amt = _encode_shift(c.arg(4))
    return _alu_shf_word(c.op(0), c.op(1), op, c.op(3), stype, amt)


def _alu_shf_word(dest: Op, a: Op, op: int, b: Op, stype: int, amt: int) -> int:
    cls = _cls("alu_shf")
    d, bank = _dest_restricted(dest)
    fa, fb, swap, msb = _pair_restricted(a, b)
    w = cls.value
    for f, v in (("dest", d), ("dest_bank", bank), ("op", op), ("a_src", fa), ("b_src", fb),
                 ("swap", swap), ("imm_msb", msb), ("shift_type", stype), ("shift_amt", amt)):  # fmt: skip
        w = cls.put(w, f, v)
    return w


def enc_dbl_shf(c: _Ctx) -> int:
    c.nargs(4)
    stype, amt = _encode_shift(c.arg(3), dbl=True)
    return _alu_shf_word(c.op(0), c.op(1), 0, c.op(2), stype, amt)


def enc_asr(c: _Ctx) -> int:
    c.nargs(3)
    m = _SHIFT_RE.match(c.arg(2).replace(" ", ""))
    if m is not None and (m[1] != ">>" or m[2] or (m[3].isdigit() and int(m[3]) == 0)):  # not arithmetic
        raise EncodeError("asr takes a right shift of 1-31 or >>indirect", 2)
    stype, amt = _encode_shift(c.arg(2))
    return _alu_shf_word(c.op(0), NONE, _enum("alu_shf_op")["asr"], c.op(1), stype, amt)


def enc_byte_align(c: _Ctx) -> int:
    c.nargs(2)
    st = _enum("shift_type")
    stype = st[str(c.fact("shift_type"))]
    return _alu_shf_word(c.op(0), c.op(1), _enum("alu_shf_op")["byte_align"], NONE, stype, 0)


def enc_ld_field(c: _Ctx) -> int:
    n = c.nargs(3, 4)
    cls = _cls("ld_field")
    mask_text = c.arg(1)
    if not re.fullmatch(r"[01]{4}", mask_text):
        raise EncodeError(f"byte mask must be four binary digits like 0011, got '{mask_text}'", 1)
    stype, amt = _encode_shift(c.arg(3)) if n == 4 else (0, 0)
    fa, fb, dest_is_b, msb = _ld_field_operands(c.op(0), c.op(2))
    w = cls.value
    for f, v in (("a_src", fa), ("b_src", fb), ("dest_is_b", dest_is_b), ("imm_msb", msb or 0),
                 ("byte_mask", int(mask_text, 2)), ("shift_type", stype), ("shift_amt", amt),
                 ("w_clr", int(str(c.fact("w_clr", 0)))),
                 ("load_cc", 1 if c.token("load_cc") is not None else 0)):  # fmt: skip
        w = cls.put(w, f, v)
    return w


def _ld_field_operands(dest: Op, src: Op) -> tuple[int, int, int, int | None]:
    """(a_src, b_src, dest_is_b, imm_msb): the destination in its bank's field and the
    source in the other; a destination of no bank (a transfer register) takes the field
    the source leaves, A when both will do."""
    first: OperandError | None = None
    for dest_is_b in (1,) if dest.bank == "b" else (0,) if dest.bank == "a" else (0, 1):
        try:
            fd, _ = encode_restricted(dest, "ab"[dest_is_b], True)
            fs, msb = encode_restricted(src, "ba"[dest_is_b], False)
        except OperandError as e:
            first = first or e
            continue
        return (fs, fd, 1, msb) if dest_is_b else (fd, fs, 0, msb)
    raise EncodeError(f"{first} (ld_field: destination and source must be in different banks)")


def enc_immed(c: _Ctx) -> int:
    cls = _cls("immed")
    family, m = c.mn.encoder, c.mn.name
    kinds = _enum("immed_kind")
    dest = NONE if family == "nop" else c.op(0)
    if family == "nop":
        c.nargs(0)
        kind, value, shift, invert, hi = kinds["immed"], 0, 0, 0, 0
    elif family == "immed":
        n = c.nargs(2, 3)
        val = c.number(1)
        if not -(1 << 31) <= val <= 0xFFFFFFFF:
            raise EncodeError(f"immed constant {val:#x} does not fit 32 bits (-2^31..0xFFFFFFFF)", 1)
        val &= 0xFFFFFFFF
        if n == 3:
            sm = re.fullmatch(r"<<\s*(0|8|16|24)", c.arg(2).replace(" ", ""))
            if not sm:
                raise EncodeError("immed shift must be <<0, <<8, <<16 or <<24", 2)
            shifts = [int(sm[1]) // 8]
        else:
            shifts = [0, 1, 2]
        for s in shifts:
            if n == 3:
                pre = val  # value is given before the shift
            else:
                if val & ((1 << (8 * s)) - 1):
                    continue
                pre = val >> (8 * s)
            if pre < 0x10000:
                invert = 0
                break
            if (~pre & 0xFFFFFFFF) < 0x10000 and n == 3 or (n == 2 and s == 0 and (~val & 0xFFFFFFFF) < 0x10000):
                invert, pre = 1, (~pre & 0xFFFFFFFF)
                break
        else:
            raise EncodeError(
                f"0x{val:x} is not encodable in one immed (16 bits, optionally inverted or "
                "shifted by a byte); use immed_w0 and immed_w1",
                1,
            )
        kind, value, shift, hi = kinds["immed"], pre & 0xFF, s, (pre >> 8) & 0xFF
    elif family == "immed_byte":
        c.nargs(2)
        val = c.number(1)
        if not 0 <= val <= 0xFF:
            raise EncodeError(f"{m} takes an 8-bit constant, got 0x{val:x}", 1)
        kind, value, shift, invert, hi = kinds["byte"], val, int(str(c.fact("shift"))), 0, 0
    else:  # immed_word: immed_w0 / immed_w1
        c.nargs(2)
        val = c.number(1)
        if not 0 <= val <= 0xFFFF:
            raise EncodeError(f"{m} takes a 16-bit constant, got 0x{val:x}", 1)
        kind, value, shift, invert, hi = kinds["word"], val & 0xFF, int(str(c.fact("shift"))), 0, val >> 8
    try:
        if dest.bank == "b":
            fb = encode_unrestricted(dest, "b", True)
            fa = 0x300 | value
        else:
            fa = encode_unrestricted(dest, "a", True)
            fb = 0x300 | value
    except OperandError as e:
        raise EncodeError(str(e), 0) from None
    w = cls.value
    for f, v in (("a_src", fa), ("b_src", fb), ("kind", kind), ("shift", shift), ("invert", invert), ("hi_byte", hi)):
        w = cls.put(w, f, v)
    return w


def enc_branch(c: _Ctx) -> int:
    """Every branch on a condition: the mnemonic's `cond` and `stage` say which (mev2.yaml);
    the stage says what the parameter operand is."""
    cls = _cls("branch")
    conds, stages = _enum("branch_cond"), _enum("branch_stage")
    cond, stage = conds[str(c.fact("cond"))], str(c.fact("stage"))
    param = 0
    if stage in ("cc", "always"):
        c.nargs(1)
        tgt = _target(c, 0)
    elif stage == "ctx":
        c.nargs(2)
        param = c.number(0, "a context number")
        if not 0 <= param <= 7:
            raise EncodeError(f"context {param} out of range (0-7)", 0)
        tgt = _target(c, 1)
    elif stage == "signal":
        c.nargs(2)
        param = _signal_number(c, 0)
        tgt = _target(c, 1)
    else:  # inp_state
        c.nargs(2)
        param = _lookup_enum("input_state", c.arg(0), 0)
        tgt = _target(c, 1)
    c.token("guess_branch")
    w = cls.value
    for f, v in (("cond", cond), ("stage", stages[stage]), ("param", param), ("target", tgt), ("defer", _defer(c))):
        w = cls.put(w, f, v)
    return w


def _signal_number(c: _Ctx, i: int) -> int:
    text = c.arg(i)
    m = re.fullmatch(r"s(\d+)", text)
    n = int(m[1]) if m else c.number(i, "a signal")
    if not 1 <= n <= 15:
        raise EncodeError(f"signal {n} out of range (1-15)", i)
    return n


def enc_br_bit(c: _Ctx) -> int:
    c.nargs(3)
    cls = _cls("br_bit")
    reg = c.op(0)
    bit = c.number(1, "a bit position")
    if not 0 <= bit <= 31:
        raise EncodeError(f"bit position {bit} out of range (0-31)", 1)
    posfield = Op("imm", (bit + 1) & 31)
    try:
        if reg.bank == "b":
            fb, _ = encode_restricted(reg, "b", False)
            fa, _ = encode_restricted(posfield, "a", False)
        else:
            fa, _ = encode_restricted(reg, "a", False)
            fb, _ = encode_restricted(posfield, "b", False)
    except OperandError as e:
        raise EncodeError(str(e), 0) from None
    w = cls.value
    for f, v in (("a_src", fa), ("b_src", fb), ("set", int(str(c.fact("set")))),
                 ("target", _target(c, 2)), ("defer", _defer(c))):  # fmt: skip
        w = cls.put(w, f, v)
    return w


def enc_br_byte(c: _Ctx) -> int:
    c.nargs(4)
    cls = _cls("br_byte")
    reg, value = c.op(0), c.op(2)
    byte_no = c.number(1, "a byte number")
    if not 0 <= byte_no <= 3:
        raise EncodeError(f"byte number {byte_no} out of range (0-3)", 1)
    mn = c.split.mnemonic
    if reg.kind == "none":
        raise EncodeError(f"{mn}: the first operand is the register tested, not --", 0)
    if reg.kind == "imm" and value.kind != "imm":
        raise EncodeError(f"{mn}: the first operand must be a register when the compare value "
                          f"{value.text()} is a register", 0)  # fmt: skip
    if value.kind == "none":
        raise EncodeError(f"{mn}: the compare value is a register or a constant, not --", 2)
    banks = _fixed_banks(c, {0: reg, 2: value})
    try:
        fa, fb, _swap, msb = _pair_restricted(reg, value, (banks[0], banks[2]))
    except EncodeError as e:
        raise _br_byte_error(mn, reg, value, (banks[0], banks[2]), e) from None
    w = cls.value
    for f, v in (("a_src", fa), ("b_src", fb), ("imm_msb", msb), ("byte_no", byte_no),
                 ("equal", int(str(c.fact("equal")))),
                 ("target", _target(c, 3)), ("defer", _defer(c))):  # fmt: skip
        w = cls.put(w, f, v)
    return w


def _fixed_banks(c: _Ctx, ops: dict[int, Op]) -> list[str]:
    """roles.fixed_banks for this instruction: operand i is a register unless ops[i] is a
    constant or -- (operands not in `ops` are in no group, so they do not count)."""
    roles = operand_roles(c.split.mnemonic, list(c.split.args))
    return fixed_banks(roles, [i not in ops or ops[i].kind not in ("imm", "none") for i in range(len(roles))])


def _br_byte_error(mnemonic: str, reg: Op, value: Op, banks: tuple[str, str], e: EncodeError) -> EncodeError:
    """Why br=byte/br!=byte cannot encode: with a register compare value the description fixes
    the bank of both (the register tested in B, the compare value in A)."""
    reg_wrong = reg.kind == "gpr" and banks[0] not in ("", reg.bank)
    value_wrong = value.kind == "gpr" and banks[1] not in ("", value.bank)
    if reg_wrong or value_wrong:
        return EncodeError(f"{mnemonic}: with a register as the compare value, the register tested must be "
                           f"in bank {banks[0].upper()} and the compare value in bank {banks[1].upper()}; "
                           f"got {reg.text()} and {value.text()}", 0 if reg_wrong else 2)  # fmt: skip
    return EncodeError(str(e), 2 if value.kind == "abs" else 0)


def enc_jump(c: _Ctx) -> int:
    cls = _cls("jump")
    if c.fact("rtn"):
        c.nargs(1)
        tgt, rtn = 0, 1
    else:
        c.nargs(2)
        tgt, rtn = _target(c, 1), 0
    src = c.op(0)
    try:
        if src.bank == "a":
            fa = encode_unrestricted(src, "a", False)
            fb = 0x300 | (tgt & 0xFF)
        else:
            fb = encode_unrestricted(src, "b", False)
            fa = tgt & 0xFF
            if fb & 0x300 == 0x300:
                raise OperandError("a jump source must be a register")
    except OperandError as e:
        raise EncodeError(str(e), 0) from None
    w = cls.value
    for f, v in (("a_src", fa), ("b_src", fb), ("target_hi", tgt >> 8), ("rtn", rtn), ("defer", _defer(c))):
        w = cls.put(w, f, v)
    return w


def enc_ctx_arb(c: _Ctx) -> int:
    cls = _cls("ctx_arb")
    w = cls.value
    if c.mn.encoder == "halt":
        c.nargs(0)
        return cls.put(w, "bpt", 1)
    sigs = 0
    for i, a in enumerate(c.split.args):
        al = a.lower()
        if al == "voluntary":
            w = cls.put(w, "voluntary", 1)
        elif al == "kill":
            w = cls.put(w, "any", 1)
        elif al == "bpt":
            w = cls.put(w, "bpt", 1)
        elif al == "--":
            w = cls.put(w, "dashes", 1)
        else:
            sigs |= 1 << _signal_number(c, i)
    w = cls.put(w, "sigs", sigs >> 1)
    if c.token("any") is not None:
        w = cls.put(w, "any", 1)
    tok = c.token("br")
    if tok is not None:
        if not tok.args or len(tok.args) != 1:
            raise EncodeError("br[] after ctx_arb takes one target")
        tgt = _resolve_token_target(c, tok.args[0])
        w = cls.put(cls.put(w, "br_enable", 1), "target", tgt)
    return cls.put(w, "defer", _defer(c, 2))


def _resolve_token_target(c: _Ctx, text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        val = c.resolve(text) if c.resolve else None
        if val is None:
            raise EncodeError(f"unknown branch target '{text}'") from None
        return val


def _csr_address(c: _Ctx, i: int, table: dict[str, int], prefix: str) -> int:
    text = c.arg(i)
    up = text.upper()
    if up in table:
        return table[up]
    m = re.fullmatch(prefix + r"([0-9a-fA-F]+)", text, re.IGNORECASE)
    if m:
        return int(m[1], 16)
    return c.number(i, "a CSR name")


def enc_local_csr(c: _Ctx) -> int:
    cls = _cls("local_csr")
    addr = _csr_address(c, 0, model.isa().local_csrs, "local_csr_")
    if addr % 4 or not 0 <= addr < 0x2000:
        raise EncodeError(f"local CSR address 0x{addr:x} is not a valid CSR", 0)
    w = cls.put(cls.value, "csr", addr >> 2)
    if not c.fact("write"):
        c.nargs(1)
        return cls.put(cls.put(w, "a_src", 0), "b_src", 0x300)
    c.nargs(2)
    src = c.op(1)
    try:
        if src.is_reg and src.bank == "a":
            fa, fb = encode_unrestricted(src, "a", False), 0x300
        elif src.kind == "imm":
            fa = fb = encode_unrestricted(src, "b", False)
        else:
            fa, fb = 0x300, encode_unrestricted(src, "b", False)
    except OperandError as e:
        raise EncodeError(str(e), 1) from None
    for f, v in (("write", 1), ("a_src", fa), ("b_src", fb)):
        w = cls.put(w, f, v)
    return w


_MUL_TOKEN = re.compile(r"^(start|24x8|16x16|32x32)(?:_(step[1-4]|last2?))?$", re.IGNORECASE)


def enc_mul_step(c: _Ctx) -> int:
    cls = _cls("mul_step")
    c.nargs(2)
    kind = None
    for k, tok in enumerate(c.split.tokens):
        mm = _MUL_TOKEN.match(tok.name)
        if mm:
            c.used_tokens.add(k)
            kind = mm
    if kind is None:
        raise EncodeError("mul_step needs a step token such as 32x32_step1, 24x8_last or start")
    size = _enum("mul_size")[kind[1].lower()]
    step = (kind[2] or "").lower()
    w = cls.put(cls.value, "mul_size", size)
    if step.startswith("last"):
        dest = c.op(0)
        try:
            fa = encode_unrestricted(dest, dest.bank or "a", True)
        except OperandError as e:
            raise EncodeError(str(e), 0) from None
        for f, v in (("a_src", fa), ("b_src", 0x300), ("last", 1), ("last_bank", 1 if dest.bank == "b" else 0),
                     ("step", 1 if step == "last2" else 0)):  # fmt: skip
            w = cls.put(w, f, v)
        return w
    fa, fb, swap = _pair_unrestricted(c.op(0), c.op(1))
    stepn = int(step[-1]) - 1 if step else 0
    for f, v in (("a_src", fa), ("b_src", fb), ("swap", swap), ("step", stepn)):
        w = cls.put(w, f, v)
    return w


# ---- memory and unit commands ----------------------------------------------------------

def _signal_fields(c: _Ctx, allow: bool = True) -> tuple[int, int]:
    """(sig, sig_mode) from ctx_swap[]/sig_done[]/defer[] tokens."""
    swap, done = c.token("ctx_swap"), c.token("sig_done")
    if swap is not None and done is not None:
        raise EncodeError("use either ctx_swap[] or sig_done[], not both")
    tok = swap or done
    if tok is None:
        return 0, _enum("sig_mode")["sig_done"]
    if not allow:
        raise EncodeError(f"'{c.split.mnemonic}[{c.arg(0)}]' does not signal")
    if not tok.args or len(tok.args) != 1:
        raise EncodeError(f"{tok.name} takes one signal")
    m = re.fullmatch(r"s(\d+)", tok.args[0])
    if m is None:
        val = c.resolve(tok.args[0]) if c.resolve else None
        if val is None:
            raise EncodeError(f"unknown signal '{tok.args[0]}'")
        sig = val
    else:
        sig = int(m[1])
    if not 1 <= sig <= 15:
        raise EncodeError(f"signal {sig} out of range (1-15)")
    if done is not None:
        return sig, _enum("sig_mode")["sig_done"]
    return sig, _defer(c, 2)


def _xfer_field(c: _Ctx, i: int, default_dram: bool) -> int:
    op = c.op(i)
    if op.kind not in ("xfer", "dxfer"):
        raise EncodeError(f"expected a transfer register, got '{c.arg(i)}'", i)
    is_dram = op.kind == "dxfer"
    if is_dram == default_dram:
        return op.index  # in range for the context mode: c.op checked it
    if c.ctx_mode != 8:
        raise EncodeError(f"{op.text()} cannot be used with this command", i)
    return 0x10 | op.index


def _count(c: _Ctx, i: int) -> int:
    n = reference_count(c.arg(i))
    if n is None:
        n = c.number(i, "a reference count")
    if not 1 <= n <= 8:
        raise EncodeError(f"reference count {n} out of range (1-8)", i)
    return n - 1


def _mem_command(c: _Ctx, unit: str, name: str, i: int) -> MemCmd:
    cmd = model.isa().command(unit, name)
    if cmd is None:
        raise EncodeError(f"unknown {unit} command '{name}'", i)
    return cmd


def enc_mem(c: _Ctx) -> int:
    unit = model.isa().units[str(c.fact("unit"))]
    if unit.name == "cap" and c.split.args and (c.arg(0).lower() == "fast_wr" or _is_cap_csr_form(c)):
        return enc_cap_csr(c)
    cls = _cls(unit.cls)
    spec = _mem_command(c, unit.name, c.arg(0), 0)
    n = c.nargs(5 if spec.count else 4)
    if spec.no_xfer and not spec.xfer_optional:
        if c.arg(1) != "--":
            raise EncodeError(f"{unit.name}[{spec.name}] takes no transfer register: write --", 1)
        xfer = 0
    elif c.arg(1) == "--":
        xfer = 0
    else:
        xfer = _xfer_field(c, 1, unit.xfer == "dram")
    a, b = c.op(2), c.op(3)
    if (a.kind == "imm" and a.index > 127) or (b.kind == "imm" and b.index > 127):
        raise EncodeError("address constants in memory commands must be 0-127")
    fa, fb = _address_pair(a, b, ordered=spec.ordered, what=f"{unit.name}[{spec.name}]")
    sig, sig_mode = _signal_fields(c, allow=not spec.no_sig)
    w = cls.value
    for f, v in (("cmd", spec.cmd), ("sub", spec.sub), ("xfer", xfer), ("a_src", fa),
                 ("b_src", fb), ("sig", sig), ("sig_mode", sig_mode),
                 ("ref_cnt", _count(c, 4) if n == 5 else 0)):  # fmt: skip
        w = cls.put(w, f, v)
    if c.token("ignore_data_error") is not None:
        w = cls.put(w, "opt19", 1)
    if c.token("indirect_ref") is not None:
        w = cls.put(w, "indirect_ref", 1)
    return w


def _address_pair(a: Op, b: Op, ordered: bool = False, what: str = "") -> tuple[int, int]:
    """Memory addresses are a + b, so the operands may trade fields (as Intel's assembler
    does) -- except for commands whose two operands mean different things (`ordered`)."""
    for x, y in ((a, b),) if ordered else ((a, b), (b, a)):
        try:
            return encode_restricted(x, "a", False)[0], encode_restricted(y, "b", False)[0]
        except OperandError:
            continue
    if ordered:
        raise EncodeError(f"{what}: the first address operand must be in bank A (or a constant) "
                          "and the second in bank B (or a constant)")
    raise EncodeError(
        f"address operands {a.text()} and {b.text()} need one in bank A (or a constant) and one in bank B"
    )


def _is_cap_csr_form(c: _Ctx) -> bool:
    return len(c.split.args) == 4 and c.split.args[2].upper() in model.isa().cap_csrs or (
        len(c.split.args) == 4 and c.split.args[2].lower().startswith("csr_")
    )


def enc_cap_csr(c: _Ctx) -> int:
    cls = _cls("cap_csr")
    cmd = c.arg(0).lower()
    w = cls.value
    if cmd == "fast_wr":
        c.nargs(3)
        addr = _csr_address(c, 2, model.isa().cap_csrs, "csr_")
        data_text = c.arg(1)
        codes = _enum("cap_csr_cmd")
        w = cls.put(w, "cmd", codes["fast_wr"])
        if data_text.upper() == "ALU":
            w = cls.put(w, "cmd", codes["fast_wr_alu"])
        else:
            data = c.number(1, "fast_wr data")
            if not 0 <= data < (1 << 14):
                raise EncodeError("cap fast_wr data must fit 14 bits", 1)
            w = cls.put(w, "fast_data", data)
        w = cls.put(w, "sig_mode", _enum("sig_mode")["sig_done"])
    else:
        c.nargs(4)
        if cmd not in ("read", "write"):
            raise EncodeError(f"unknown cap command '{c.arg(0)}'", 0)
        addr = _csr_address(c, 2, model.isa().cap_csrs, "csr_")
        sig, sig_mode = _signal_fields(c)
        for f, v in (("cmd", _enum("cap_csr_cmd")[cmd]), ("xfer", _xfer_field(c, 1, False)),
                     ("ref_cnt", _count(c, 3)), ("sig", sig), ("sig_mode", sig_mode)):  # fmt: skip
            w = cls.put(w, f, v)
    if not 0 <= addr <= 0xFFFF:
        raise EncodeError(f"CAP CSR address 0x{addr:x} out of range", 2)
    w = cls.put(cls.put(w, "csr_hi", addr >> 8), "csr_lo", addr & 0xFF)
    if c.token("indirect_ref") is not None:
        w = cls.put(w, "indirect_ref", 1)
    return w


def enc_hash(c: _Ctx) -> int:
    cls = _cls("hash")
    c.nargs(2)
    spec = _mem_command(c, str(c.fact("unit")), c.mn.name, 0)
    count = c.number(1, "a count (1-3)")
    if not 1 <= count <= 3:
        raise EncodeError(f"hash count {count} out of range (1-3)", 1)
    sig, sig_mode = _signal_fields(c)
    w = cls.value
    for f, v in (("cmd", spec.cmd), ("sub", spec.sub), ("xfer", _xfer_field(c, 0, False)),
                 ("ref_cnt", count), ("sig", sig), ("sig_mode", sig_mode)):  # fmt: skip
        w = cls.put(w, f, v)
    if c.token("indirect_ref") is not None:
        w = cls.put(w, "indirect_ref", 1)
    return w


# Encoder families (mev2.yaml `mnemonics` names one for every mnemonic)
FAMILIES: dict[str, Callable[[_Ctx], int]] = {
    "alu": enc_alu, "alu_shf": enc_alu_shf, "dbl_shf": enc_dbl_shf, "asr": enc_asr,
    "byte_align": enc_byte_align, "ld_field": enc_ld_field,
    "immed": enc_immed, "immed_byte": enc_immed, "immed_word": enc_immed, "nop": enc_immed,
    "alu_source": enc_alu_source, "alu_unary": enc_alu_unary, "alu_binary": enc_alu_binary,
    "alu_nullary": enc_alu_nullary, "cam_lookup": enc_cam_lookup, "cam_write": enc_cam_write,
    "crc": enc_crc, "branch": enc_branch, "br_bit": enc_br_bit, "br_byte": enc_br_byte,
    "jump": enc_jump, "ctx_arb": enc_ctx_arb, "halt": enc_ctx_arb, "local_csr": enc_local_csr,
    "mul_step": enc_mul_step, "mem": enc_mem, "hash": enc_hash,
}  # fmt: skip


def encoders(d: model.Isa | None = None) -> dict[str, Callable[[_Ctx], int]]:
    """Mnemonic -> encoder, from the description's `mnemonics` (aliases not included)."""
    d = d or model.isa()
    missing = {m.encoder for m in d.mnemonics.values()} - set(FAMILIES)
    if missing:
        raise model.IsaError(f"mev2.yaml names encoder families codec.py lacks: {sorted(missing)}")
    return {name: FAMILIES[m.encoder] for name, m in d.mnemonics.items()}


ENCODERS = encoders()
MNEMONICS: frozenset[str] = frozenset(ENCODERS) | frozenset(model.isa().mnemonic_aliases)


def encode(text: str | SplitInstr, resolve: Resolver | None = None, ctx_mode: int = 8) -> int:
    """Encode one instruction with physical operands.  Raises EncodeError."""
    try:
        split = text if isinstance(text, SplitInstr) else split_instruction(text)
    except SyntaxProblem as e:
        raise EncodeError(str(e)) from None
    mn = model.isa().mnemonic(split.mnemonic)
    if mn is None or mn.encoder not in FAMILIES:
        raise EncodeError(f"unknown instruction '{split.mnemonic}'")
    c = _Ctx(split, resolve, ctx_mode, set(), mn)
    fn = FAMILIES[mn.encoder]
    try:
        word = fn(c)
    except ValueError as e:
        if isinstance(e, EncodeError):
            raise
        raise EncodeError(str(e)) from None
    for k, tok in enumerate(split.tokens):
        if k not in c.used_tokens:
            raise EncodeError(f"optional token '{tok.name}' is not valid for '{split.mnemonic}'")
    return word
