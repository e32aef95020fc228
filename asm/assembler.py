"""The assembler driver: source file -> Image.

preprocess -> parse (scopes, symbols, structured flow) -> classify operands ->
allocate registers/transfer registers/signals -> lay out (bank moves, immed
splits) -> rewrite to physical text -> encode -> hazards -> Image.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from npkit.asm.image import Image, LineEntry, Program, Symbol
from npkit.asm.isa import EncodeError, SplitInstr, Token, encode, isa
from npkit.asm.isa.operands import OperandError, check_context_relative, register_name

from .errors import AsmError, Diagnostics, SourceLoc
from .expr import evaluate
from .hazards import check_hazards
from .parser import Emitted, Instr, Parser, Sym, Unit
from .preprocess import LogicalLine, preprocess
from .regalloc import Allocator
from .resolve import Ref, classify, token_refs

_SHIFT_RE = re.compile(r"^(<<|>>)\s*(rot)?\s*(.+)$", re.IGNORECASE | re.DOTALL)
MEM_LIMITS = {"lmem": 640 * 4, "scratch": 16 * 1024, "sram": 1 << 30, "dram": 1 << 31}


@dataclass
class Assembly:
    image: Image
    program: Program
    unit: Unit
    emitted: list[Emitted]
    label_addrs: dict[str, int]
    diags: Diagnostics
    notes: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, unit: Unit, diags: Diagnostics):
        self.unit = unit
        self.diags = diags
        self.ctx_mode = unit.ctx_mode
        self.labels: dict[str, int] = {}
        self.mem_addr: dict[str, int] = {}

    # ---- expressions ------------------------------------------------------------

    def resolve_name(self, ins: Instr, name: str) -> int | None:
        if name.endswith("#"):
            return self.labels.get(name[:-1])
        sym = ins.scope.lookup(self.unit.synonyms.get(name, name))
        if sym is not None and sym.kind == "mem":
            return self.mem_addr.get(sym.name)
        return None

    def address_of(self, ins: Instr, name: str) -> int | None:
        if name.endswith("#"):
            return self.labels.get(name[:-1])
        sym = ins.scope.lookup(self.unit.synonyms.get(name, name))
        if sym is None:
            return None
        if sym.kind == "mem":
            return self.mem_addr.get(sym.name)
        return sym.index

    def value(self, ins: Instr, text: str, i: int | None) -> int:
        return evaluate(text, ins.arg_loc(i), lambda n: self.resolve_name(ins, n),
                        lambda n: self.address_of(ins, n))  # fmt: skip

    # ---- rewriting to physical text ------------------------------------------------

    def phys_arg(self, ins: Instr, i: int, ref: Ref) -> list[str]:
        role = ins.roles[i]
        k = ref.kind
        if k == "none":
            return ["--"]
        if k == "sym":
            assert ref.sym is not None
            return [ref.sym.phys()]
        if k == "phys":
            return [ref.text]
        if k == "label":
            return [str(self.labels[ref.text])]
        if k == "sig":
            if ref.sym is None:
                return [ref.text]
            n = ref.sym.index
            if ins.mnemonic == "ctx_arb" and ref.sym.pair:
                return [f"s{n}", f"s{n + 1}"]
            return [f"s{n}"]
        if k == "word":
            return [self.word(ins, i, ref.text)]
        val = self.value(ins, ref.text, i)
        if role.kind in ("dest", "src", "srcdest", "addr"):
            if not 0 <= val <= 0xFF:
                raise AsmError(f"constant {_hex(val)} does not fit an operand field (0-255); "
                               "load it into a register with immed[] first", ins.arg_loc(i))  # fmt: skip
            return [str(val)]
        if ins.mnemonic.startswith("immed"):
            if not I32_MIN <= val <= U32_MAX:
                raise AsmError(f"constant {_hex(val)} does not fit 32 bits ({I32_MIN}..0x{U32_MAX:X}): "
                               f"{ins.mnemonic} loads a 32-bit register", ins.arg_loc(i))  # fmt: skip
            val &= 0xFFFFFFFF
            return [f"0x{val:x}"]
        return [str(val)]

    def word(self, ins: Instr, i: int, text: str) -> str:
        m = _SHIFT_RE.match(text)
        if m and not re.fullmatch(r"\d+|indirect", m[3].strip(), re.IGNORECASE):
            return f"{m[1]}{m[2] or ''}{self.value(ins, m[3], i)}"
        if (
            isa().unit_of_mnemonic(ins.mnemonic) is not None
            and i == 4
            and not re.fullmatch(r"max_\d+|\d+", text, re.IGNORECASE)
        ):
            return str(self.value(ins, text, i))
        return text

    def phys_tokens(self, ins: Instr) -> tuple[Token, ...]:
        out = []
        for tok, ref in ins.tok_refs:
            if ref is None:
                out.append(tok)
            elif ref.kind == "drop":
                continue
            elif ref.kind == "label":
                out.append(Token(tok.name, (str(self.labels[ref.text]),), tok.col))
            elif ref.kind == "sig" and ref.sym is not None:
                out.append(Token(tok.name, (f"s{ref.sym.index}",), tok.col))
            elif ref.kind == "const":
                out.append(Token(tok.name, (str(self.value(ins, ref.text, None)),), tok.col))
            else:
                out.append(tok)
        return tuple(out)

    def physical(self, ins: Instr) -> tuple[SplitInstr, list[int]]:
        args: list[str] = []
        back: list[int] = []  # physical arg index -> source arg index
        for i, ref in enumerate(ins.refs):
            for a in self.phys_arg(ins, i, ref):
                args.append(a)
                back.append(i)
        split = SplitInstr(
            ins.mnemonic, tuple(args), tuple(ins.offs[j] for j in back), self.phys_tokens(ins)
        )
        return split, back

    # ---- encoding ---------------------------------------------------------------------

    def encode(self, ins: Instr, split: SplitInstr, back: list[int]) -> int:
        if ins.mnemonic == ".word":
            val = int(split.args[0], 0)
            if not 0 <= val < 1 << 40:
                raise AsmError(f".word value {_hex(val)} does not fit 40 bits", ins.arg_loc(0))
            return val
        try:
            return encode(split, ctx_mode=self.ctx_mode)
        except EncodeError as e:
            src = back[e.arg] if e.arg is not None and e.arg < len(back) else None
            loc = ins.arg_loc(src)
            m = re.search(r"token '([^']+)'", str(e))
            if src is None and m:
                tok = next((t for t in ins.tokens if t.name == m[1]), None)
                loc = ins.tok_loc(tok) if tok is not None else loc
            raise AsmError(str(e) + _allocated_names(ins, split, back, str(e)), loc) from None

    def immed_split(self, ins: Instr, split: SplitInstr) -> list[SplitInstr] | None:
        """immed[x, v] with v not encodable in one word -> immed_w0 + immed_w1 (as Intel's assembler)."""
        if ins.mnemonic != "immed" or len(split.args) != 2:
            return None
        try:
            encode(split, ctx_mode=self.ctx_mode)
            return None
        except EncodeError as e:
            if "immed_w0" not in str(e):
                return None
        v = int(split.args[1], 0) & 0xFFFFFFFF
        d, cols = split.args[0], split.arg_cols
        if not re.fullmatch(r"@?[ab]\d+|\*l\$index[01](\[\d+\])?", d):
            # immed_w0/immed_w1 each keep the other half of the destination by reading it back;
            # a transfer or next-neighbour register reads back a different register
            raise AsmError(f"0x{v:x} needs two words (immed_w0 + immed_w1), which read the destination "
                           f"back, and {d} cannot be read back: immed a GPR, then alu[{ins.args[0]}, --, b, gpr]",
                           ins.arg_loc(1))  # fmt: skip
        return [SplitInstr("immed_w0", (d, f"0x{v & 0xFFFF:x}"), cols, ()),
                SplitInstr("immed_w1", (d, f"0x{v >> 16:x}"), cols, ())]  # fmt: skip


_PHYS_REG_RE = re.compile(r"(?<![\w$@])(@?[ab]\d+|\$\$?\d+|n\$\d+)(?![\w$])")


def _allocated_names(ins: Instr, split: SplitInstr, back: list[int], message: str) -> str:
    """' (x is a0, y is b0)': the source names of the allocated registers an encoder message
    names, which the user wrote as symbols and never saw as physical registers."""
    names: dict[str, str] = {}
    for k, phys in enumerate(split.args):
        src = back[k] if k < len(back) else None
        if src is not None and ins.refs[src].kind == "sym" and ins.args[src] != phys:
            names.setdefault(phys, ins.args[src])
    said = [f"{names[r]} is {r}" for r in dict.fromkeys(_PHYS_REG_RE.findall(message)) if r in names]
    return f" ({', '.join(said)})" if said else ""


I32_MIN, U32_MAX = -(1 << 31), (1 << 32) - 1  # a 32-bit constant, as signed or unsigned


def _check_register_name(name: str, ctx_mode: int, loc: SourceLoc) -> None:
    """A register named by number in .init/.set must exist in every context."""
    op = register_name(name)
    try:
        if op is not None:
            check_context_relative(op, ctx_mode)
    except OperandError as e:
        raise AsmError(str(e), loc) from None


def _hex(v: int) -> str:
    return f"0x{v:x}" if v >= 0 else f"-0x{-v:x}"


def assemble_lines(lines: Sequence[LogicalLine], path: str, ctx_mode: int | None = None,
                   diags: Diagnostics | None = None, name: str | None = None) -> Assembly:  # fmt: skip
    diags = diags if diags is not None else Diagnostics()
    unit = Parser(diags, ctx_mode).parse(lines)
    if not unit.instrs:
        raise AsmError("the program has no instructions", SourceLoc(path, 1))
    alloc = Allocator(unit, diags)
    for ins in unit.instrs:
        ins.refs = classify(unit, ins)
        ins.tok_refs = token_refs(unit, ins)
        for ref in [*ins.refs, *(r for _, r in ins.tok_refs if r is not None)]:
            if ref.kind == "sig" and ref.sym is None and re.fullmatch(r"s\d+", ref.text):
                alloc.sig_reserved.add(int(ref.text[1:]))
    for entry in [*unit.set_sigs, *unit.sig_notes]:
        if isinstance(entry[0], int):
            alloc.sig_reserved.add(entry[0])
        else:
            entry[0].used = True
    for rname, scope, *_ in [*unit.inits, *unit.set_regs]:
        found = scope.lookup(unit.synonyms.get(rname, rname))
        if found is not None:
            found.used = True
    for message, loc in unit.diags_implicit:
        diags.warn(message, loc)
    alloc.run()
    b = _Builder(unit, diags)
    _allocate_memory(unit, b)

    # layout: provisional addresses (one word per instruction plus bank moves)
    seq: list[Instr] = []
    for ins in unit.instrs:
        seq.extend(ins.pre)
        seq.append(ins)
    first_addr = _first_addrs(unit, {})
    b.labels = {n: first_addr[lab.at] for n, lab in unit.labels.items()}
    splits: dict[int, bool] = {}
    for ins in unit.instrs:
        if ins.mnemonic == "immed" and len(ins.args) == 2:
            split, _ = b.physical(ins)
            splits[id(ins)] = b.immed_split(ins, split) is not None
    first_addr = _first_addrs(unit, splits)
    b.labels = {n: first_addr[lab.at] for n, lab in unit.labels.items()}
    emitted: list[Emitted] = []
    for ins in seq:
        split, back = b.physical(ins)
        parts = b.immed_split(ins, split) if ins.mnemonic == "immed" else None
        if (
            ins.mnemonic == "immed"
            and len(ins.args) == 2
            and (parts is not None) != splits.get(id(ins), False)
        ):
            raise AsmError("the immed value depends on label addresses in a way that changes the code "
                           "size; write immed_w0/immed_w1 explicitly", ins.arg_loc(1))  # fmt: skip
        if parts is not None:
            diags_note = f"immed value {split.args[1]} needs two words: immed_w0 + immed_w1"
            for k, p in enumerate(parts):
                emitted.append(
                    Emitted(
                        ins, p, b.encode(ins, p, back), len(emitted), diags_note if k == 0 else ""
                    )
                )
            continue
        emitted.append(Emitted(ins, split, b.encode(ins, split, back), len(emitted), ins.note))
    if len(emitted) > 8192:
        raise AsmError(f"the program needs {len(emitted)} words; the control store holds 8192",
                       unit.instrs[-1].loc)  # fmt: skip

    check_hazards(emitted, b.labels, unit, diags)
    program = _program(unit, b, emitted, name or Path(path).stem, path)
    return Assembly(Image(programs=[program]), program, unit, emitted, b.labels, diags)


def _first_addrs(unit: Unit, splits: Mapping[int, bool]) -> list[int]:
    out = []
    addr = 0
    for ins in unit.instrs:
        out.append(addr)
        addr += len(ins.pre) + (2 if splits.get(id(ins)) else 1)
    out.append(addr)
    return out


def _allocate_memory(unit: Unit, b: _Builder) -> None:
    nxt: dict[str, int] = {}
    for sym in unit.mems:
        base = nxt.get(sym.space, 0)
        base = (base + sym.align - 1) & ~(sym.align - 1)
        end = base + sym.size
        if end > MEM_LIMITS[sym.space]:
            raise AsmError(f"'{sym.name}' does not fit in {sym.space} ({end} bytes needed, "
                           f"{MEM_LIMITS[sym.space]} available)", sym.loc)  # fmt: skip
        b.mem_addr[sym.name] = base
        sym.index = base
        nxt[sym.space] = end


def _scope_name(sym: Sym) -> str:
    s = sym.scope
    if s.parent is None or s.loc is None:
        return ""
    return s.loc.short()


def _program(unit: Unit, b: _Builder, emitted: list[Emitted], name: str, path: str) -> Program:
    symbols: list[Symbol] = []
    # user labels first: readers take the first label at an address as its name
    for lname, addr in sorted(b.labels.items(), key=lambda kv: unit.labels[kv[0]].generated):
        symbols.append(Symbol(lname, "label", addr))
    for sym in unit.syms:
        if sym.name.startswith("__bank_tmp") or (sym.kind != "mem" and sym.index < 0):
            continue  # generated, or declared but never used (takes no register)
        if sym.kind in ("gpr", "abs"):
            symbols.append(Symbol(sym.name, "reg", sym.phys(), _scope_name(sym)))
        elif sym.kind in ("xfer", "dxfer"):
            symbols.append(Symbol(sym.name, "xfer", sym.phys(), _scope_name(sym)))
        elif sym.kind == "sig":
            symbols.append(Symbol(sym.name, "signal", sym.index, _scope_name(sym)))
        elif sym.kind == "mem":
            symbols.append(Symbol(sym.name, "mem", sym.index, sym.space, sym.size))
    lines = []
    files: list[str] = []
    for e in emitted:
        loc = e.ins.loc
        if loc.file not in files:
            files.append(loc.file)
        macro = " > ".join(f"{m}@{f}:{ln}" for m, f, ln in loc.expansion)
        lines.append(LineEntry(e.addr, loc.file, loc.line, macro))
    set_sigs: list[int] = []
    for entry, loc in unit.set_sigs:
        if isinstance(entry, int):
            if not 1 <= entry <= 15:
                raise AsmError(f"signal s{entry} out of range (1-15)", loc)
            set_sigs.append(entry)
        else:
            set_sigs.append(entry.index)
            if entry.pair:
                set_sigs.append(entry.index + 1)
    for rname, scope, loc in unit.set_regs:
        if scope.lookup(unit.synonyms.get(rname, rname)) is None:
            if not re.fullmatch(r"@?[ab]\d+|\$\$?\d+", rname):
                raise AsmError(f"'{rname}' is not a declared register", loc)
            _check_register_name(rname, unit.ctx_mode, loc)
    init_regs: list[tuple[str, int | None, int]] = []
    init_mem: list[tuple[str, int, bytes]] = []
    for rname, scope, values, loc in unit.inits:
        sym = scope.lookup(unit.synonyms.get(rname, rname))
        nums = []
        for v in values:
            num = evaluate(v, loc, lambda n, s=scope: b.mem_addr.get(n), None)
            if not I32_MIN <= num <= U32_MAX:
                raise AsmError(f".init value {_hex(num)} does not fit 32 bits ({I32_MIN}..0x{U32_MAX:X})", loc)
            nums.append(num & 0xFFFFFFFF)
        if sym is not None and sym.kind == "mem":
            data = b"".join(v.to_bytes(4, "big") for v in nums)
            if len(data) > sym.size:
                raise AsmError(
                    f".init gives {len(data)} bytes for '{rname}' of {sym.size} bytes", loc
                )
            init_mem.append((sym.space, sym.index, data))
        elif sym is not None and sym.kind in ("gpr", "abs", "xfer", "dxfer"):
            if len(nums) == 1:
                init_regs.append((sym.phys(), None, nums[0]))
            elif len(nums) == unit.ctx_mode:  # one value per context
                init_regs.extend((sym.phys(), ctx, v) for ctx, v in enumerate(nums))
            else:
                raise AsmError(f".init of a register takes one value (all contexts) or "
                               f"{unit.ctx_mode} (one per context), got {len(nums)}", loc)  # fmt: skip
        elif re.fullmatch(r"@?[ab]\d+|\$\$?\d+", rname):
            _check_register_name(rname, unit.ctx_mode, loc)
            init_regs.append((rname, None, nums[0]))
        else:
            raise AsmError(f"'{rname}' is not a declared register or memory symbol", loc)
    return Program(name=name, words=[e.word for e in emitted], ctx_mode=unit.ctx_mode, symbols=symbols,
                   lines=lines, init_regs=init_regs, set_sigs=sorted(set(set_sigs)), init_mem=init_mem,
                   source_files=files)  # fmt: skip


def assemble(path: str | Path, include_dirs: Sequence[str | Path] = (), defines: Mapping[str, str] | None = None,
             ctx_mode: int | None = None, diags: Diagnostics | None = None, source_text: str | None = None,
             name: str | None = None) -> Assembly:  # fmt: skip
    """Assemble one source file (or `source_text`, reported as `path`).  Raises AsmError."""
    diags = diags if diags is not None else Diagnostics()
    lines = preprocess(path, include_dirs, defines, diags, source_text)
    return assemble_lines(lines, str(path), ctx_mode, diags, name)


def assemble_text(text: str, path: str = "<input>", **kw: object) -> Assembly:
    return assemble(path, source_text=text, **kw)  # type: ignore[arg-type]
