"""Decoder: 40-bit word -> instruction text that encodes back to the same word.

Targets print as numbers unless a `label_of(addr)` callback names them.
Words that no class or sub-code covers raise DecodeError with the reason, so
the emulator and the disassembler can report "illegal instruction" precisely.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import model
from .codec import _decode_shift
from .model import ClassDef, Isa
from .operands import Op, OperandError, decode_restricted, decode_unrestricted, encode_restricted


class DecodeError(ValueError):
    pass


LabelOf = Callable[[int], str | None]
Decoder = Callable[[ClassDef, int, "LabelOf | None", int], str]


def _rev(table: str) -> dict[int, str]:
    return {v: str(k) for k, v in model.isa().enums[table].items()}


def _tgt(addr: int, label_of: LabelOf | None) -> str:
    if label_of is not None:
        name = label_of(addr)
        if name:
            return name
    return str(addr)


def _u(num: int, bank: str, dest: bool = False) -> Op:
    try:
        return decode_unrestricted(num, bank, dest)
    except OperandError as e:
        raise DecodeError(str(e)) from None


def _r(num: int, bank: str, msb: int, dest: bool = False) -> Op:
    try:
        return decode_restricted(num, bank, dest, msb)
    except OperandError as e:
        raise DecodeError(str(e)) from None


def _defer(n: int) -> str:
    return f", defer[{n}]" if n else ""


def dec_alu(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    op = g("op")
    names = _rev("alu_op")
    if op not in names:
        raise DecodeError(f"undefined alu operation {op}")
    name = names[op]
    mn = model.isa().alu_op_mnemonics.get(name)  # an operation written as its own instruction
    family = mn.encoder if mn is not None else "alu"
    a, b = _u(g("a_src"), "a"), _u(g("b_src"), "b")
    if g("swap"):
        a, b = b, a
    dbank = "b" if g("dest_bank") else "a"
    if mn is not None and family == "cam_write":  # the dest field carries the state constant
        if g("dest") & 0x3F0 != 0x300:
            raise DecodeError(f"{name} without a state constant")
        entry = _u(g("b_src"), "b")
        state = g("dest") & 0xF
        if len(mn.operands) == 3:
            return f"{mn.name}[{entry.text()}, {_u(g('a_src'), 'a').text()}, {state}]"
        return f"{mn.name}[{entry.text()}, {state}]"
    dest = _u(g("dest"), dbank, True)
    if mn is not None and family == "alu_source":
        return f"{mn.name}[{b.text()}]"
    if mn is not None and family == "alu_unary":
        return f"{mn.name}[{dest.text()}, {b.text()}]"
    if mn is not None and family == "alu_binary":
        return f"{mn.name}[{dest.text()}, {a.text()}, {b.text()}]"
    if mn is not None and family == "alu_nullary":
        return mn.name
    if family == "cam_lookup":
        right = g("b_src") if not g("swap") else g("a_src")
        tok = ""
        if right & 1:
            tok = f", lm_addr0[{(right >> 2) & 3}]"
        elif right & 2:
            tok = f", lm_addr1[{(right >> 2) & 3}]"
        return f"cam_lookup[{dest.text()}, {a.text()}]{tok}"
    if family == "crc":
        types, nbytes = _rev("crc_type"), _rev("crc_bytes")
        ct, nb = g("crc_type"), g("crc_bytes")
        if ct not in types or nb not in nbytes:
            raise DecodeError("undefined crc type or byte selection")
        src = _u(g("a_src"), "a")
        swap = ", bit_swap" if g("crc_bit_swap") else ""
        endian = "le" if g("crc_le") else "be"
        return f"crc_{endian}[{types[ct]}, {dest.text()}, {src.text()}], {nbytes[nb]}{swap}"
    if name in ("B", "~B") and _unused_a(g("swap"), g("a_src"), g("b_src"), 0x300):
        return f"alu[{dest.text()}, --, {name}, {b.text()}]"
    return f"alu[{dest.text()}, {a.text()}, {name}, {b.text()}]"


def _fits_restricted(op: Op, bank: str) -> bool:
    """Can `op` go in the restricted `bank` field (else the encoder swaps the operands)?"""
    try:
        encode_restricted(op, bank, False)
    except OperandError:
        return False
    return True


def _unused_a(swap: int, a_field: int, b_field: int, b_none: int) -> bool:
    """True when the logical A operand's field holds exactly the '--' encoding."""
    return b_field == b_none if swap else a_field == 0


def dec_alu_shf(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    msb = g("imm_msb")
    a, b = _r(g("a_src"), "a", msb), _r(g("b_src"), "b", msb)
    if g("swap"):
        a, b = b, a
    dest = _r(g("dest"), "b" if g("dest_bank") else "a", msb, True)
    op, stype, amt = g("op"), g("shift_type"), g("shift_amt")
    names = _rev("alu_shf_op")
    st = model.isa().enums["shift_type"]
    if op == model.isa().enums["alu_shf_op"]["B"] and stype == st["dbl_right"]:
        return f"dbl_shf[{dest.text()}, {a.text()}, {b.text()}, {_decode_shift(stype, amt)}]"
    if stype == st["dbl_right"]:
        raise DecodeError("double-shift type with a non-B alu_shf operation")
    own = [m for m in model.isa().mnemonics.values() if m.cls == "alu_shf" and m.fact("alu_shf_op") == names[op]]
    if own and own[0].encoder == "asr":
        return f"{own[0].name}[{dest.text()}, {b.text()}, {_decode_shift(stype, amt)}]"
    if own:  # byte_align_be / _le: the shift type says which
        pick = [m for m in own if st[str(m.fact("shift_type"))] == stype]
        if not pick or amt:
            raise DecodeError(f"undefined {names[op]} variant")
        return f"{pick[0].name}[{dest.text()}, {a.text()}]"
    a_text = a.text()
    if names[op] in ("B", "~B") and _unused_a(g("swap"), g("a_src"), g("b_src"), 0) and not msb \
            and (not g("swap") or not _fits_restricted(b, "b")):
        # an unused source is 0 in either field, which is also b0's number in the B field:
        # '--' only where the encoder writes it, so that text and word round-trip
        a_text = "--"
    return f"alu_shf[{dest.text()}, {a_text}, {names[op]}, {b.text()}, {_decode_shift(stype, amt)}]"


def dec_ld_field(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    msb = g("imm_msb")
    if g("dest_is_b"):
        dest, src = _r(g("b_src"), "b", msb, True), _r(g("a_src"), "a", msb)
    else:
        dest, src = _r(g("a_src"), "a", msb, True), _r(g("b_src"), "b", msb)
    stype, amt = g("shift_type"), g("shift_amt")
    shift = "" if stype == 0 and amt == 0 else f", {_decode_shift(stype, amt)}"
    name = "ld_field_w_clr" if g("w_clr") else "ld_field"
    cc = ", load_cc" if g("load_cc") else ""
    return f"{name}[{dest.text()}, {g('byte_mask'):04b}, {src.text()}{shift}]{cc}"


def dec_br_byte(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    msb = g("imm_msb")
    if g("b_src") & 0x20:
        reg, val = _r(g("a_src"), "a", msb), _r(g("b_src"), "b", msb)
    else:
        reg, val = _r(g("b_src"), "b", msb), _r(g("a_src"), "a", msb)
    eq = "br=byte" if g("equal") else "br!=byte"
    return f"{eq}[{reg.text()}, {g('byte_no')}, {val.text()}, {_tgt(g('target'), label_of)}]{_defer(g('defer'))}"


def dec_br_bit(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    if g("b_src") & 0x20:
        reg, pos = _r(g("a_src"), "a", 0), _r(g("b_src"), "b", 0)
    else:
        reg, pos = _r(g("b_src"), "b", 0), _r(g("a_src"), "a", 0)
    if pos.kind != "imm" or pos.index > 31:
        raise DecodeError("bit branch without a bit-position constant")
    bit = (pos.index + 31) & 31
    name = "br_bset" if g("set") else "br_bclr"
    return f"{name}[{reg.text()}, {bit}, {_tgt(g('target'), label_of)}]{_defer(g('defer'))}"


def dec_branch(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    conds = _rev("branch_cond")
    cond = g("cond")
    if cond not in conds:
        raise DecodeError(f"undefined branch condition {cond}")
    mn = model.isa().branch_mnemonics.get(conds[cond])
    if mn is None:
        raise DecodeError(f"no instruction branches on condition {conds[cond]}")
    stage = str(mn.fact("stage"))
    tgt, d, p = _tgt(g("target"), label_of), _defer(g("defer")), g("param")
    if stage == "ctx":
        if p > 7:
            raise DecodeError("context number out of range")
        text = f"{mn.name}[{p}, {tgt}]{d}"
    elif stage == "signal":
        if p == 0:
            raise DecodeError("branch on signal 0")
        text = f"{mn.name}[s{p}, {tgt}]{d}"
    elif stage == "inp_state":
        text = f"{mn.name}[{_rev('input_state')[p]}, {tgt}]{d}"
    else:
        text = f"{mn.name}[{tgt}]{d}"
    if g("stage") != model.isa().enums["branch_stage"][stage] or (stage in ("cc", "always") and p):
        raise DecodeError("branch with unexpected stage/parameter bits")
    return text


def dec_ctx_arb(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    if w == cls.put(cls.value, "bpt", 1):
        return "halt"
    items = [f"s{i}" for i in range(1, 16) if (g("sigs") >> (i - 1)) & 1]
    if g("voluntary"):
        items.append("voluntary")
    kill = g("any") and not g("sigs") and not g("voluntary") and not g("bpt") and not g("dashes")
    if kill:
        items.append("kill")
    if g("bpt"):
        items.append("bpt")
    if g("dashes"):
        items.append("--")
    if not items:
        raise DecodeError("ctx_arb with nothing to wait for")
    toks = ""
    if g("any") and not kill:
        toks += ", any"
    if g("defer"):
        if g("defer") > 2:
            raise DecodeError("ctx_arb defer out of range")
        toks += _defer(g("defer"))
    if g("br_enable"):
        toks += f", br[{_tgt(g('target'), label_of)}]"
    elif g("target"):
        raise DecodeError("ctx_arb target bits without br[]")
    return f"ctx_arb[{', '.join(items)}]{toks}"


def dec_jump(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    if g("b_src") & 0x300 == 0x300:
        src, lo = _u(g("a_src"), "a"), g("b_src") & 0xFF
    else:
        src, lo = _u(g("b_src"), "b"), g("a_src")
        if lo > 0xFF:
            raise DecodeError("jump target low bits out of range")
    if src.kind == "imm" or src.kind == "none":
        raise DecodeError("jump without a source register")
    d = _defer(g("defer"))
    if g("rtn"):
        if lo or g("target_hi"):
            raise DecodeError("rtn with target bits")
        return f"rtn[{src.text()}]{d}"
    return f"jump[{src.text()}, {_tgt((g('target_hi') << 8) | lo, label_of)}]{d}"


def dec_immed(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    if g("b_src") & 0x300 == 0x300:
        lo, dest = g("b_src") & 0xFF, _u(g("a_src"), "a", True)
    else:
        if g("a_src") & 0x300 != 0x300:
            raise DecodeError("immed without a constant field")
        lo, dest = g("a_src") & 0xFF, _u(g("b_src"), "b", True)
    if dest.kind == "imm":
        raise DecodeError("immed destination is a constant")
    kind, shift, inv, hi = g("kind"), g("shift"), g("invert"), g("hi_byte")
    if kind == 0:
        if dest.kind == "none" and lo == 0 and hi == 0 and not shift and not inv and g("a_src") == 0x300:
            return "nop"
        val = (hi << 8) | lo
        if inv:
            val = ~val & 0xFFFFFFFF
        if shift == 3:
            raise DecodeError("immed shift of 24 bits is not encodable")
        suffix = f", <<{8 * shift}" if shift or inv else ""
        return f"immed[{dest.text()}, 0x{val:x}{suffix}]"
    if kind == 1:
        if hi or inv:
            raise DecodeError("immed_b with high-byte or invert bits")
        return f"immed_b{shift}[{dest.text()}, 0x{lo:x}]"
    if kind == 2:
        if inv or shift & 1:
            raise DecodeError("immed_w with invert or odd shift bits")
        return f"immed_w{shift >> 1}[{dest.text()}, 0x{(hi << 8) | lo:x}]"
    raise DecodeError("undefined immed kind 3")


def dec_mul_step(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    size = _rev("mul_size")[g("mul_size")]
    if g("last"):
        dest = _u(g("a_src"), "b" if g("last_bank") else "a", True)
        return f"mul_step[{dest.text()}, --], {size}_last{'2' if g('step') else ''}"
    a, b = _u(g("a_src"), "a"), _u(g("b_src"), "b")
    if g("swap"):
        a, b = b, a
    step = "" if size == "start" and g("step") == 0 else f"_step{g('step') + 1}"
    return f"mul_step[{a.text()}, {b.text()}], {size}{step}"


def dec_local_csr(cls: ClassDef, w: int, label_of: LabelOf | None) -> str:
    g = partial(cls.get, w)
    addr = g("csr") << 2
    names = {v: k for k, v in model.isa().local_csrs.items()}
    csr = names.get(addr, f"local_csr_{addr:03x}")
    if not g("write"):
        return f"local_csr_rd[{csr}]"
    if g("a_src") & 0x300 == 0x300:
        src = _u(g("b_src"), "b")
    else:
        src = _u(g("a_src"), "a")
    return f"local_csr_wr[{csr}, {src.text()}]"


def _mem_common(cls: ClassDef, w: int) -> tuple[str, str, str]:
    g = partial(cls.get, w)
    sig, mode = g("sig"), g("sig_mode")
    done = model.isa().enums["sig_mode"]["sig_done"]
    if sig == 0 and mode == done:
        sig_text = ""
    elif sig == 0:
        raise DecodeError("ctx_swap without a signal")
    elif mode == done:
        sig_text = f", sig_done[s{sig}]"
    else:
        sig_text = f", ctx_swap[s{sig}]" + _defer(mode)
    ind = ", indirect_ref" if g("indirect_ref") else ""
    return sig_text, ind, ""


def _xfer_text(num: int, default_dram: bool, ctx_mode: int) -> str:
    dram = default_dram
    if ctx_mode == 8 and num & 0x10:
        dram, num = not dram, num & 0xF
    return f"$${num}" if dram else f"${num}"


def dec_mem(cls: ClassDef, w: int, label_of: LabelOf | None, ctx_mode: int = 8) -> str:
    g = partial(cls.get, w)
    unit = model.isa().unit_of_class[cls.name]
    found = unit.lookup(g("cmd"), g("sub"))
    if found is None:
        raise DecodeError(f"undefined {unit.name} command {g('cmd')}/{g('sub')}")
    spec, _ = found
    ide = ", ignore_data_error" if g("opt19") and spec.sub & 2 == 0 else ""
    sig_text, ind, _ = _mem_common(cls, w)
    if spec.no_sig and sig_text:
        raise DecodeError(f"{unit.name}[{spec.name}] with signal bits")
    xfer = "--" if spec.no_xfer and g("xfer") == 0 else _xfer_text(g("xfer"), unit.xfer == "dram", ctx_mode)
    a, b = _r(g("a_src"), "a", 0), _r(g("b_src"), "b", 0)
    count = f", {g('ref_cnt') + 1}" if spec.count else ""
    if not spec.count and g("ref_cnt"):
        raise DecodeError(f"{unit.name}[{spec.name}] with a reference count")
    return f"{unit.name}[{spec.name}, {xfer}, {a.text()}, {b.text()}{count}]{sig_text}{ind}{ide}"


def dec_cap_csr(cls: ClassDef, w: int, label_of: LabelOf | None, ctx_mode: int = 8) -> str:
    g = partial(cls.get, w)
    addr = (g("csr_hi") << 8) | g("csr_lo")
    names = {v: k for k, v in model.isa().cap_csrs.items()}
    csr = names.get(addr, f"csr_{addr:04x}")
    ind = ", indirect_ref" if g("indirect_ref") else ""
    cmd = g("cmd")
    codes = model.isa().enums["cap_csr_cmd"]
    if cmd in (codes["fast_wr"], codes["fast_wr_alu"]):
        data = str(g("fast_data")) if cmd == codes["fast_wr"] else "ALU"
        return f"cap[fast_wr, {data}, {csr}]{ind}"
    sig_text, _, _ = _mem_common(cls, w)
    rw = "write" if cmd == codes["write"] else "read"
    return f"cap[{rw}, {_xfer_text(g('xfer'), False, ctx_mode)}, {csr}, {g('ref_cnt') + 1}]{sig_text}{ind}"


def dec_hash(cls: ClassDef, w: int, label_of: LabelOf | None, ctx_mode: int = 8) -> str:
    g = partial(cls.get, w)
    found = model.isa().unit_of_class[cls.name].lookup(g("cmd"), g("sub"))
    if found is None or not 1 <= g("ref_cnt") <= 3:
        raise DecodeError("undefined hash command")
    sig_text, ind, _ = _mem_common(cls, w)
    return f"{found[0].name}[{_xfer_text(g('xfer'), False, ctx_mode)}, {g('ref_cnt')}]{sig_text}{ind}"


def decode(word: int, ctx_mode: int = 8, label_of: LabelOf | None = None) -> str:
    """Disassemble one word.  Raises DecodeError for an illegal word."""
    if not 0 <= word < (1 << 40):
        raise DecodeError("word wider than 40 bits")
    cls = model.isa().classify(word)
    if cls is None:
        raise DecodeError(f"no instruction class matches 0x{word:010x}")
    return decoders(model.isa())[cls.decoder](cls, word, label_of, ctx_mode)


def _no_mode(fn: Callable[[ClassDef, int, LabelOf | None], str]) -> Decoder:
    return lambda cls, w, label_of, ctx_mode: fn(cls, w, label_of)


# Decoder families (mev2.yaml `classes` names one for every class)
FAMILIES: dict[str, Decoder] = {
    "alu": _no_mode(dec_alu), "alu_shf": _no_mode(dec_alu_shf), "ld_field": _no_mode(dec_ld_field),
    "br_byte": _no_mode(dec_br_byte), "br_bit": _no_mode(dec_br_bit), "branch": _no_mode(dec_branch),
    "ctx_arb": _no_mode(dec_ctx_arb), "jump": _no_mode(dec_jump), "immed": _no_mode(dec_immed),
    "mul_step": _no_mode(dec_mul_step), "local_csr": _no_mode(dec_local_csr),
    "mem": dec_mem, "cap_csr": dec_cap_csr, "hash": dec_hash,
}  # fmt: skip


def decoders(d: Isa) -> dict[str, Decoder]:
    """Class decoder name -> function; every name the description uses must exist."""
    missing = {c.decoder for c in d.classes.values()} - set(FAMILIES)
    if missing:
        raise model.IsaError(f"mev2.yaml names decoder families decode.py lacks: {sorted(missing)}")
    return FAMILIES
