"""Operand classification: what each operand of each instruction refers to.

After parsing, every operand becomes a Ref: a declared symbol (virtual GPR,
absolute register, transfer register, signal), a physical operand written as
such (`a3`, `$2`, `*l$index0[1]`, `n$0`), a constant expression, a label, or a
keyword the encoder understands (`+`, `<<4`, `max_8`, CSR names).  The uses
also tell the allocator which transfer-register halves a `$name` needs and
how many consecutive registers a memory command reads from it, and which
signals dram[] uses (those need an even/odd pair).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from npkit.asm.isa import Role, Token, isa
from npkit.asm.isa.operands import Op, OperandError, parse_physical
from npkit.asm.isa.syntax import reference_count

from .errors import AsmError, SourceLoc, at
from .parser import Instr, Sym, Unit

IDENT_RE = re.compile(r"^(?:\$\$|\$|@)?[A-Za-z_]\w*(?:\[\d+\])?$")


@dataclass(eq=False)
class Ref:
    kind: str  # none | sym | phys | const | label | word | sig
    text: str
    sym: Sym | None = None
    op: Op | None = None


NONE_REF = Ref("none", "--")


def lookup(unit: Unit, ins: Instr, name: str) -> Sym | None:
    name = unit.synonyms.get(name, name)
    return ins.scope.lookup(name)


def _reg_ref(unit: Unit, ins: Instr, i: int, text: str, role: Role) -> Ref:
    if text == "--":
        return NONE_REF
    sym = lookup(unit, ins, text)
    if sym is not None:
        if sym.kind in ("gpr", "abs", "xfer", "dxfer"):
            sym.used = True
            return Ref("sym", text, sym)
        return Ref("const", "&" + text if sym.kind == "sig" else text)
    try:
        op = parse_physical(text)
    except OperandError:
        op = None
    if op is not None:
        if op.kind == "imm":
            return Ref("const", text)
        return Ref("phys", op.text() if op.kind != "idx" else text, op=op)
    if IDENT_RE.match(text) and not text.endswith("#"):
        return Ref("sym", text, implicit(unit, ins, i, text))
    m = _NO_COMMA_RE.search(text)
    if m is not None:  # 'a0 --': two operands where an expression has an operator between them
        raise AsmError(f"expected ',' between '{m[1]}' and '{m[2]}'", at(ins.loc, ins.offs[i] + m.start(2)))
    return Ref("const", text)


# two operand words side by side, with nothing but white space between them
_WORD = r"--|[$@*]*\w[\w$@#]*(?:\[\d+\])?"
_NO_COMMA_RE = re.compile(rf"(?<![\w$@#\]])({_WORD})\s+({_WORD})")


def implicit(
    unit: Unit, ins: Instr, i: int | None, text: str, kind: str = "", loc: SourceLoc | None = None
) -> Sym:
    """Intel's assembler declares a name it has not seen as a global register (or signal)."""
    if not kind:
        kind = "dxfer" if text.startswith("$$") else "xfer" if text.startswith("$") else \
            "abs" if text.startswith("@") else "gpr"  # fmt: skip
    what = {"gpr": "register", "abs": "absolute register", "sig": "signal"}.get(
        kind, "transfer register"
    )
    directive = ".sig" if kind == "sig" else ".reg"
    loc = loc or ins.arg_loc(i)
    sym = Sym(text, kind, loc, unit.root, used=True)
    unit.root.syms[text] = sym
    unit.syms.append(sym)
    unit.diags_implicit.append((f"'{text}' is not declared: taken as a global {what} "
                                f"(declare it with {directive})", loc))  # fmt: skip
    return sym


def classify(unit: Unit, ins: Instr) -> list[Ref]:
    refs: list[Ref] = []
    mn = ins.mnemonic
    for i, (text, role) in enumerate(zip(ins.args, ins.roles, strict=True)):
        k = role.kind
        if k in ("dest", "src", "srcdest", "addr"):
            ref = _reg_ref(unit, ins, i, text, role)
        elif k == "xfer":
            ref = _reg_ref(unit, ins, i, text, role)
            if ref.kind == "sym" and ref.sym is not None and ref.sym.kind not in ("xfer", "dxfer"):
                raise AsmError(f"'{text}' is not a transfer register", ins.arg_loc(i))
            if ref.kind == "const":
                raise AsmError(f"expected a transfer register, got '{text}'", ins.arg_loc(i))
        elif k == "label":
            if text.endswith("#"):
                if text[:-1] not in unit.labels:
                    raise AsmError(f"undefined label '{text}'", ins.arg_loc(i))
                ref = Ref("label", text[:-1])
            else:
                ref = Ref("const", text)
        elif k == "signal":
            ref = signal_ref(unit, ins, text, i)
        elif k == "const":
            ref = (
                Ref("word", text)
                if re.fullmatch(r"max_\d+", text, re.IGNORECASE)
                else Ref("const", text)
            )
        else:
            ref = Ref("word", text)
        refs.append(ref)
        if ref.kind == "const" and "&" in ref.text:
            mark_address_uses(unit, ins, ref.text)
        if ref.kind == "sym" and ref.sym is not None and ref.sym.kind in ("xfer", "dxfer"):
            _note_xfer_use(ins, i, role, ref.sym)
    if mn == "ctx_arb":
        for r in refs:
            if r.kind == "sig" and r.sym is not None:
                r.sym.used = True
    return refs


_ADDR_OF_RE = re.compile(r"&\s*([$@]*[A-Za-z_][\w$@]*(?:\[\d+\])?)")


def mark_address_uses(unit: Unit, ins: Instr, text: str) -> None:
    """`&name` in an expression needs name's physical number: the symbol must be allocated."""
    for m in _ADDR_OF_RE.finditer(text):
        sym = lookup(unit, ins, m[1])
        if sym is not None:
            sym.used = True


def signal_ref(
    unit: Unit, ins: Instr, text: str, i: int | None, loc: SourceLoc | None = None
) -> Ref:
    sym = lookup(unit, ins, text)
    if sym is not None:
        if sym.kind != "sig":
            raise AsmError(
                f"'{text}' is a {sym.kind} register, not a signal", loc or ins.arg_loc(i)
            )
        sym.used = True
        return Ref("sig", text, sym)
    if re.fullmatch(r"s\d+", text):
        return Ref("sig", text)
    if re.fullmatch(r"[A-Za-z_]\w*", text):
        return Ref("sig", text, implicit(unit, ins, i, text, "sig", loc))
    return Ref("const", text)


def _note_xfer_use(ins: Instr, i: int, role: Role, sym: Sym) -> None:
    if role.kind == "xfer":
        dirs = {"read": {"read"}, "write": {"write"}}.get(role.xfer_dir, {"read", "write"})
        cmd = isa().memory_command(ins.mnemonic, ins.args)
        if cmd is not None and len(ins.args) == 5:
            n = reference_count(ins.args[4])
            if n is not None:
                sym.span = max(sym.span, n * cmd.words_per_count)
    elif role.kind == "src" or role.kind == "addr":
        dirs = {"read"}
    elif role.kind == "dest":
        dirs = {"write"}
    else:
        dirs = {"read", "write"}
    if not sym.declared_dirs:
        sym.dirs |= dirs


def token_refs(unit: Unit, ins: Instr) -> list[tuple[Token, Ref | None]]:
    """Signals and branch targets inside optional tokens (ctx_swap[s], sig_done[s], br[l#])."""
    out: list[tuple[Token, Ref | None]] = []
    for tok in ins.tokens:
        name = tok.name.lower()
        ref: Ref | None = None
        if name in ("ctx_swap", "sig_done") and tok.args and len(tok.args) == 1:
            ref = signal_ref(unit, ins, tok.args[0], None, ins.tok_loc(tok))
            unit = isa().unit_of_mnemonic(ins.mnemonic)
            if ref.sym is not None and unit is not None and unit.signal_pair:
                ref.sym.pair = True
        elif name == "targets":  # jump[r, l#], targets[a#, b#]: a hint for the assembler only
            for t in tok.args or ():
                if not t.endswith("#") or t[:-1] not in unit.labels:
                    raise AsmError(f"targets[] names labels; '{t}' is not one", ins.tok_loc(tok))
            ref = Ref("drop", tok.name)
        elif name == "br" and tok.args and len(tok.args) == 1 and tok.args[0].endswith("#"):
            if tok.args[0][:-1] not in unit.labels:
                raise AsmError(f"undefined label '{tok.args[0]}'", ins.tok_loc(tok))
            ref = Ref("label", tok.args[0][:-1])
        out.append((tok, ref))
    return out
