"""Parser: preprocessed logical lines -> labels, instructions, scopes and symbols.

One pass over the lines.  Directives that declare things (`.reg`, `.sig`,
`.xfer_order`, `.addr`, `.init`, `.alloc_mem`...) fill the symbol tables of
the current `.begin/.end` scope; structured control flow (`.if`, `.while`,
`.repeat`) is expanded on the spot into compare-and-branch instructions by
`structured.py`.  Operands keep their virtual names here: they are resolved
against the scope chain after the whole file is read (so a name declared
later in the same scope is visible), then allocated by `regalloc.py`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from npkit.asm.isa import (
    Role,
    SplitInstr,
    SyntaxProblem,
    Token,
    isa,
    operand_roles,
    split_instruction,
)
from npkit.asm.isa.operands import Op

from .errors import AsmError, Diagnostics, SourceLoc, at, clip
from .expr import evaluate
from .preprocess import LogicalLine
from .structured import Structured

LABEL_RE = re.compile(r"\s*([A-Za-z_][\w$]*)#\s*:")
NAME_RE = re.compile(r"^(?:\$\$|\$|@|n\$)?[A-Za-z_][\w]*(?:\[\d+\])?$")
MEM_SPACES = {"lmem": "lmem", "local_mem": "lmem", "lm": "lmem", "scratch": "scratch",
              "sram": "sram", "dram": "dram"}  # fmt: skip


@dataclass(eq=False)
class Scope:
    name: str
    parent: Scope | None
    loc: SourceLoc | None
    start: int  # first instruction index inside
    end: int = -1  # one past the last instruction index inside
    syms: dict[str, Sym] = field(default_factory=dict)

    def lookup(self, name: str) -> Sym | None:
        s: Scope | None = self
        while s is not None:
            sym = s.syms.get(name)
            if sym is not None:
                return sym
            s = s.parent
        return None

    def describe(self) -> str:
        if self.parent is None:
            return "the top-level scope"
        where = f" at {self.loc.short()}" if self.loc else ""
        return f"the .begin scope{where}"


@dataclass(eq=False)
class XferGroup:
    members: list[Sym]
    loc: SourceLoc
    length: int = 0


@dataclass(eq=False)
class Sym:
    name: str
    kind: str  # gpr | abs | xfer | dxfer | sig | mem
    loc: SourceLoc
    scope: Scope
    dirs: set[str] = field(default_factory=set)  # xfer: read / write halves in use
    declared_dirs: bool = False
    pin: int | None = None  # .addr / .areg / .breg
    pin_bank: str = ""
    span: int = 1  # xfer: consecutive registers a memory command needs from here
    group: XferGroup | None = None
    group_pos: int = 0
    pair: bool = False  # signal used by dram[]: needs an even/odd pair
    used: bool = False
    # allocation results
    bank: str = ""  # gpr/abs: "a" / "b"
    index: int = -1  # gpr: relative index; abs: absolute index; xfer: index; sig: number
    # memory symbols
    space: str = ""
    size: int = 0
    align: int = 4

    def interval(self) -> tuple[int, int]:
        return self.scope.start, self.scope.end

    def phys(self) -> str:
        if self.kind in ("gpr", "abs", "xfer", "dxfer"):
            return Op(self.kind, self.index, self.bank).text()  # the ISA's spelling
        if self.kind == "sig":
            return f"s{self.index}"
        return str(self.index)


@dataclass(eq=False)
class Instr:
    mnemonic: str
    args: list[str]
    offs: list[int]  # offset of each arg in the logical line text
    tokens: tuple[Token, ...]
    loc: SourceLoc  # start of the logical line
    scope: Scope
    mn_off: int = 0
    roles: list[Role] = field(default_factory=list)
    note: str = ""  # why the assembler generated it, if it did
    # filled by later stages
    pre: list[Instr] = field(default_factory=list)  # moves inserted before it
    refs: list[Any] = field(default_factory=list)  # resolve.Ref per operand
    tok_refs: list[Any] = field(default_factory=list)  # (Token, Ref | None) per optional token
    phys_args: list[str] = field(default_factory=list)
    words: list[int] = field(default_factory=list)
    addr: int = 0
    index: int = 0

    def arg_loc(self, i: int | None) -> SourceLoc:
        if i is None or i >= len(self.offs):
            return at(self.loc, self.mn_off)
        return at(self.loc, self.offs[i])

    def tok_loc(self, tok: Token) -> SourceLoc:
        return at(self.loc, tok.col)

    def source(self) -> str:
        return f"{self.mnemonic}[{', '.join(self.args)}]"


@dataclass
class Emitted:
    """One instruction word and where it came from."""

    ins: Instr
    split: SplitInstr
    word: int = 0
    addr: int = 0
    note: str = ""


@dataclass
class Label:
    name: str
    loc: SourceLoc
    at: int  # index of the instruction it labels
    generated: bool = False


@dataclass
class Unit:
    """Everything the parser learnt from one source file."""

    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, Label] = field(default_factory=dict)
    root: Scope = field(default_factory=lambda: Scope("", None, None, 0))
    scopes: list[Scope] = field(default_factory=list)
    syms: list[Sym] = field(default_factory=list)
    groups: list[XferGroup] = field(default_factory=list)
    ctx_mode: int = 8
    ctx_mode_loc: SourceLoc | None = None
    set_sigs: list[tuple[Sym | int, SourceLoc]] = field(default_factory=list)  # set at load time
    sig_notes: list[tuple[Sym | int, SourceLoc]] = field(default_factory=list)  # ".set_sig" after code
    set_regs: list[tuple[str, Scope, SourceLoc]] = field(default_factory=list)
    inits: list[tuple[str, Scope, list[str], SourceLoc]] = field(default_factory=list)
    pins: list[tuple[str, Scope, str, SourceLoc]] = field(default_factory=list)
    synonyms: dict[str, str] = field(default_factory=dict)
    mems: list[Sym] = field(default_factory=list)
    diags_implicit: list[tuple[str, SourceLoc]] = field(default_factory=list)


class Parser:
    def __init__(self, diags: Diagnostics, ctx_mode: int | None = None):
        self.unit = Unit()
        if ctx_mode is not None:
            self.unit.ctx_mode = ctx_mode
        self.cli_ctx_mode = ctx_mode
        self.diags = diags
        self.scope = self.unit.root
        self.unit.scopes.append(self.scope)
        self.structured = Structured(self)
        self.pending_labels: list[Label] = []

    # ---- entry ---------------------------------------------------------------

    def parse(self, lines: Sequence[LogicalLine]) -> Unit:
        for line in lines:
            self.line(line.text, line.loc)
        self.structured.finish()
        if self.scope is not self.unit.root:
            raise AsmError(".begin without a matching .end", self.scope.loc)
        self.unit.root.end = len(self.unit.instrs)
        return self.unit

    def line(self, text: str, loc: SourceLoc) -> None:
        off = 0
        while True:
            m = LABEL_RE.match(text, off)
            if not m:
                break
            self.label(m[1], at(loc, m.start(1)))
            off = m.end()
        rest = text[off:]
        stripped = rest.lstrip()
        if not stripped:
            return
        off += len(rest) - len(stripped)
        if stripped.startswith("."):
            self.directive(stripped, loc, off)
        else:
            self.instruction(stripped, loc, off)

    # ---- labels and instructions ---------------------------------------------------

    def label(self, name: str, loc: SourceLoc, generated: bool = False) -> None:
        old = self.unit.labels.get(name)
        if old is not None:
            raise AsmError(f"label '{name}#' is already defined at {old.loc.short()}", loc)
        lab = Label(name, loc, len(self.unit.instrs), generated)
        self.unit.labels[name] = lab

    def instruction(self, text: str, loc: SourceLoc, off: int, note: str = "") -> Instr:
        try:
            split = split_instruction(text)
        except SyntaxProblem as e:
            raise AsmError(str(e), at(loc, off + e.col)) from None
        mn = split.mnemonic.lower()
        if isa().mnemonic(mn) is None:
            what = "directive" if mn.startswith(".") else "instruction"
            raise AsmError(f"unknown {what} '{clip(split.mnemonic)}': expected an MEv2 instruction, "
                           "a directive or a label", at(loc, off))  # fmt: skip
        args = list(split.args)
        ins = Instr(mn, args, [off + c for c in split.arg_cols], split.tokens, loc, self.scope,
                    mn_off=off, note=note)  # fmt: skip
        ins.tokens = tuple(Token(t.name, t.args, off + t.col) for t in split.tokens)
        ins.roles = operand_roles(mn, args)
        ins.index = len(self.unit.instrs)
        self.unit.instrs.append(ins)
        return ins

    # ---- directives ---------------------------------------------------------------

    def directive(self, text: str, loc: SourceLoc, off: int) -> None:
        m = re.match(r"\.(\w+)\s*", text)
        if not m:
            raise AsmError("expected a directive name after '.'", at(loc, off))
        name = m[1].lower()
        rest = text[m.end() :]
        rest_off = off + m.end()
        dloc = at(loc, off)
        handler = getattr(self, f"d_{name}", None)
        if handler is not None:
            handler(rest, loc, rest_off, dloc)
            return
        if self.structured.handles(name):
            self.structured.directive(name, rest, loc, rest_off, dloc)
            return
        if name in IGNORED_DIRECTIVES:
            self.diags.warn(f"directive '.{name}' is accepted and ignored", dloc)
            return
        raise AsmError(f"unknown directive '.{m[1]}'", dloc)

    def words(self, rest: str, loc: SourceLoc, off: int) -> list[tuple[str, SourceLoc]]:
        out = []
        for m in re.finditer(r"[^\s,\[]+(?:\s*\[[^\]]*\])?|[^\s,]", rest):
            out.append((m[0].replace(" ", ""), at(loc, off + m.start())))
        return out

    def declare(self, sym: Sym, scope: Scope | None = None) -> Sym:
        scope = scope or self.scope
        old = scope.syms.get(sym.name)
        if old is not None:
            if old.kind == sym.kind and old.kind != "mem":
                return old  # redeclaring in the same scope (macro libraries do it) is harmless
            raise AsmError(f"'{sym.name}' is already declared at {old.loc.short()}", sym.loc)
        sym.scope = scope
        scope.syms[sym.name] = sym
        self.unit.syms.append(sym)
        return sym

    def d_reg(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        dirs: set[str] = set()
        is_global = False
        any_name = False
        for word, wloc in self.words(rest, loc, off):
            lw = word.lower()
            if lw in ("read", "write"):
                dirs.add(lw)
                continue
            if lw in ("volatile", "visible", "shared", "remote", "neighbor"):
                continue
            if lw == "global":
                is_global = True
                continue
            any_name = True
            scope = self.unit.root if is_global else self.scope
            arr = re.fullmatch(r"((?:\$\$?|@)?[A-Za-z_]\w*)\[(.+)\]", word)
            if arr:
                size = evaluate(arr[2], at(wloc, len(arr[1]) + 1))
                if arr[1].startswith("$"):
                    self.declare_xfer_array(arr[1], size, dirs, wloc, scope)
                else:
                    self.declare_gpr_array(arr[1], size, wloc, scope)
                continue
            if not NAME_RE.match(word) or "[" in word:
                raise AsmError(f"expected a register name, got '{word}'", wloc)
            if word.startswith("n$"):
                raise AsmError(
                    "next-neighbour registers are used by their physical names (n$0...)", wloc
                )
            if word.startswith("$$"):
                kind = "dxfer"
            elif word.startswith("$"):
                kind = "xfer"
            elif word.startswith("@"):
                kind = "abs"
            else:
                kind = "gpr"
                if dirs:
                    raise AsmError(
                        "'read'/'write' qualify transfer registers ($name), not GPRs", wloc
                    )
            sym = self.declare(Sym(word, kind, wloc, scope), scope)
            if kind in ("xfer", "dxfer") and dirs:
                sym.dirs |= dirs
                sym.declared_dirs = True
        if not any_name:
            raise AsmError(".reg needs at least one register name", dloc)

    def declare_xfer_array(
        self, base: str, n: int, dirs: set[str], loc: SourceLoc, scope: Scope
    ) -> None:
        if not 1 <= n <= 32:
            raise AsmError(f"transfer register array size {n} out of range (1-32)", loc)
        kind = "dxfer" if base.startswith("$$") else "xfer"
        members = []
        for i in range(n):
            sym = self.declare(Sym(f"{base}[{i}]", kind, loc, scope), scope)
            if dirs:
                sym.dirs |= dirs
                sym.declared_dirs = True
            members.append(sym)
        scope.syms.setdefault(base, members[0])
        self.make_group(members, loc)

    def declare_gpr_array(self, base: str, n: int, loc: SourceLoc, scope: Scope) -> None:
        if not 1 <= n <= 128:
            raise AsmError(f"register array size {n} out of range (1-128)", loc)
        kind = "abs" if base.startswith("@") else "gpr"
        for i in range(n):
            self.declare(Sym(f"{base}[{i}]", kind, loc, scope), scope)

    def make_group(self, members: list[Sym], loc: SourceLoc) -> None:
        group = XferGroup(members, loc)
        for pos, sym in enumerate(members):
            if sym.group is not None:
                raise AsmError(f"'{sym.name}' is already in a .xfer_order group "
                               f"(at {sym.group.loc.short()})", loc)  # fmt: skip
            sym.group, sym.group_pos = group, pos
        self.unit.groups.append(group)

    def d_xfer_order(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        members = []
        for word, wloc in self.words(rest, loc, off):
            sym = self.scope.lookup(word)
            if sym is None and re.fullmatch(r"\$\$?[A-Za-z_]\w*", word):
                kind = "dxfer" if word.startswith("$$") else "xfer"  # .xfer_order declares too
                sym = self.declare(Sym(word, kind, wloc, self.scope))
            if sym is None or sym.kind not in ("xfer", "dxfer"):
                raise AsmError(f"'{word}' is not a transfer register", wloc)
            group = sym.group
            if group is not None and sym.name.endswith("[0]") and sym.name != word:
                if len(self.words(rest, loc, off)) == 1:
                    return  # `.xfer_order $array`: an array is already in order
                raise AsmError(f"'{word}' is an array: name its elements ({word}[0]...)", wloc)
            if members and sym.kind != members[0].kind:
                raise AsmError(
                    "a .xfer_order group cannot mix $ (SRAM) and $$ (DRAM) registers", wloc
                )
            if sym in members:
                raise AsmError(f"'{word}' appears twice in .xfer_order", wloc)
            members.append(sym)
        if not members:
            raise AsmError(".xfer_order needs transfer register names", dloc)
        self.make_group(members, dloc)

    def d_sig(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        is_global = False
        names = 0
        for word, wloc in self.words(rest, loc, off):
            lw = word.lower()
            if lw in ("volatile", "remote", "visible", "shared"):
                continue
            if lw == "global":
                is_global = True
                continue
            if not re.fullmatch(r"[A-Za-z_]\w*", word):
                raise AsmError(f"expected a signal name, got '{word}'", wloc)
            scope = self.unit.root if is_global else self.scope
            self.declare(Sym(word, "sig", wloc, scope), scope)
            names += 1
        if not names:
            raise AsmError(".sig needs at least one signal name", dloc)

    def d_addr(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        ws = self.words(rest, loc, off)
        if len(ws) not in (2, 3):
            raise AsmError("expected '.addr name number [a|b]'", dloc)
        self.unit.pins.append((ws[0][0], self.scope, " ".join(w for w, _ in ws[1:]), ws[0][1]))

    def d_areg(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc, bank: str = "a") -> None:
        ws = self.words(rest, loc, off)
        if len(ws) != 2:
            raise AsmError(f"expected '.{bank}reg name number'", dloc)
        sym = self.declare(Sym(ws[0][0], "gpr", ws[0][1], self.scope))
        self.unit.pins.append((sym.name, self.scope, f"{ws[1][0]} {bank}", ws[1][1]))

    def d_breg(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        self.d_areg(rest, loc, off, dloc, "b")

    def d_set(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        ws = self.words(rest, loc, off)
        if not ws:
            raise AsmError(".set needs register names", dloc)
        for word, wloc in ws:
            self.unit.set_regs.append((word, self.scope, wloc))

    def d_set_sig(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        ws = self.words(rest, loc, off)
        if not ws:
            raise AsmError(".set_sig needs signal names", dloc)
        # Before the first instruction .set_sig gives a signal's state at load time;
        # after it, real code (e.g. Linux ixp2400_rx.uc) uses it only to tell the
        # assembler a signal is set at that point, so it must not be preset.
        target = self.unit.sig_notes if self.unit.instrs else self.unit.set_sigs
        for word, wloc in ws:
            sym = self.scope.lookup(word)
            if sym is not None and sym.kind == "sig":
                target.append((sym, wloc))
            elif re.fullmatch(r"s\d+", word):
                target.append((int(word[1:]), wloc))
            else:
                raise AsmError(f"'{word}' is not a declared signal", wloc)

    def d_init(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        ws = self.words(rest, loc, off)
        if len(ws) < 2:
            raise AsmError("expected '.init name value [value...]'", dloc)
        self.unit.inits.append((ws[0][0], self.scope, [w for w, _ in ws[1:]], ws[0][1]))

    def d_word(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        """`.word expr`: one raw 40-bit word (what the disassembler writes for non-instructions)."""
        if not rest.strip():
            raise AsmError(".word needs a value", dloc)
        ins = Instr(".word", [rest.strip()], [off], (), loc, self.scope, mn_off=dloc.col - loc.col)
        ins.roles = [Role("const")]
        ins.index = len(self.unit.instrs)
        self.unit.instrs.append(ins)

    def d_num_contexts(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        val = evaluate(rest.strip(), at(loc, off))
        if val not in (4, 8):
            raise AsmError(f".num_contexts must be 4 or 8, got {val}", at(loc, off))
        if self.unit.instrs or self.unit.syms:
            raise AsmError(".num_contexts must come before any instruction or declaration", dloc)
        if self.cli_ctx_mode is not None and self.cli_ctx_mode != val:
            raise AsmError(f".num_contexts {val} contradicts --contexts {self.cli_ctx_mode}", dloc)
        first = self.unit.ctx_mode_loc
        if first is not None and self.unit.ctx_mode != val:
            raise AsmError(f".num_contexts {val} contradicts .num_contexts {self.unit.ctx_mode} "
                           f"at {first.short()}", dloc)  # fmt: skip
        self.unit.ctx_mode = val
        self.unit.ctx_mode_loc = dloc

    def d_operand_synonym(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        ws = self.words(rest, loc, off)
        if len(ws) != 2:
            raise AsmError("expected '.operand_synonym new_name existing_name'", dloc)
        self.unit.synonyms[ws[0][0]] = ws[1][0]

    def d_alloc_mem(
        self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc, space: str = ""
    ) -> None:
        ws = self.words(rest, loc, off)
        need = 2 if space else 3
        if len(ws) < need:
            form = ".local_mem name size [align]" if space else ".alloc_mem name space size [align]"
            raise AsmError(f"expected '{form}'", dloc)
        name, nloc = ws[0]
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise AsmError(f"expected a memory symbol name, got '{name}'", nloc)
        k = 1
        if not space:
            sp = ws[1][0].lower()
            sp = re.sub(r"\d+$", "", sp) if sp.startswith(("sram", "dram")) else sp
            if sp not in MEM_SPACES:
                raise AsmError(
                    f"unknown memory space '{ws[1][0]}' (lmem, scratch, sram or dram)", ws[1][1]
                )
            space = MEM_SPACES[sp]
            k = 2
        nums = [(w, wl) for w, wl in ws[k:] if w.lower() not in ("me", "island", "global", "local")]
        if not nums:
            raise AsmError("missing memory size", dloc)
        size = evaluate(nums[0][0], nums[0][1])
        align = evaluate(nums[1][0], nums[1][1]) if len(nums) > 1 else 4
        if size <= 0:
            raise AsmError(f"memory size must be positive, got {size}", nums[0][1])
        if align <= 0 or align & (align - 1):
            raise AsmError(f"alignment must be a power of two, got {align}", nums[1][1])
        sym = Sym(name, "mem", nloc, self.unit.root, space=space, size=size, align=align)
        self.declare(sym, self.unit.root)
        self.unit.mems.append(sym)

    def d_local_mem(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        self.d_alloc_mem(rest, loc, off, dloc, space="lmem")

    def d_begin(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        s = Scope(rest.strip(), self.scope, dloc, len(self.unit.instrs))
        self.unit.scopes.append(s)
        self.scope = s

    def d_end(self, rest: str, loc: SourceLoc, off: int, dloc: SourceLoc) -> None:
        if self.scope.parent is None:
            raise AsmError(".end without a matching .begin", dloc)
        self.scope.end = len(self.unit.instrs)
        self.scope = self.scope.parent


IGNORED_DIRECTIVES = frozenset({"import_var", "export", "local_csr_init", "areg_init", "persistent",
                                "if_unsigned", "option", "ignore", "equ_import"})  # fmt: skip
