"""Register, transfer-register and signal allocation.

Strategy
--------
1. *Bank constraints.*  For every instruction, `operand_roles` says which
   operands share an A/B group (they must sit in opposite banks) and
   `fixed_banks` which banks the encoding fixes (always, or only while the
   other operands of the group are registers: br=byte).  Each constraint is
   an edge "different bank" (or "bank X") in a parity union-find over virtual
   registers; a constraint that would close an odd cycle (or contradict a
   fixed bank) cannot be met, so the operand is copied first through a fresh
   temporary (`alu[tmp, --, b, v]` inserted before the instruction) and a
   warning says so.  A physical register written in the source is never
   copied: if its bank is wrong the encoder says so.
2. *Orientation.*  Each connected component can be flipped as a whole; the
   assembler picks the orientation that keeps the two banks balanced.
   Registers with no constraint choose their bank at colouring time.
3. *Colouring.*  A register lives over its `.begin/.end` scope (instruction
   index interval); intervals nest, so greedy colouring in order of start
   is optimal: registers of disjoint scopes share physical registers.
   Physical registers written in the source are reserved everywhere.
4. *Absolute registers* (`.reg @x`, shared by all contexts) take relative
   indices the program does not use, from the top of the file: relative
   index r of every context c (absolute c*per_ctx + r) serves per_ctx/... one
   global each, so no context's relative registers are touched.
5. *Transfer registers*: `.xfer_order` groups, `$x[n]` arrays and memory
   commands with a count need consecutive indices; read and write halves are
   separate registers, so a register only read (or only written) by the ME
   takes only its half.  Same interval colouring over (kind, half, index).
6. *Signals* s1..s15; a signal used by dram[] gets an even number n and n+1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from npkit.asm.isa import fixed_banks, operand_roles
from npkit.asm.isa.operands import Op

from .errors import AsmError, Diagnostics, SourceLoc
from .parser import Instr, Scope, Sym, Unit
from .resolve import Ref

_A = "<bank A>"


@dataclass
class _UF:
    parent: dict[object, object] = field(default_factory=dict)
    parity: dict[object, int] = field(default_factory=dict)

    def find(self, x: object) -> tuple[object, int]:
        path = []
        p = 0
        while True:
            up = self.parent.get(x)
            if up is None or up is x:
                break
            path.append(x)
            p ^= self.parity[x]
            x = up
        root = x
        # path compression
        acc = p
        for node in path:
            nxt_par = self.parity[node]
            self.parent[node] = root
            self.parity[node] = acc
            acc ^= nxt_par
        return root, p

    def relate(self, a: object, b: object, diff: int) -> bool:
        """Require bank(a) xor bank(b) == diff; False if it contradicts."""
        ra, pa = self.find(a)
        rb, pb = self.find(b)
        if ra is rb:
            return (pa ^ pb) == diff
        if rb is _A:
            ra, rb, pa, pb = rb, ra, pb, pa
        self.parent[rb] = ra
        self.parity[rb] = pa ^ pb ^ diff
        return True


def _gpr(ref: Ref) -> bool:
    if ref.kind == "sym":
        return ref.sym is not None and ref.sym.kind in ("gpr", "abs")
    return ref.kind == "phys" and ref.op is not None and ref.op.kind in ("gpr", "abs")


class Allocator:
    def __init__(self, unit: Unit, diags: Diagnostics):
        self.unit = unit
        self.diags = diags
        self.per_ctx = 16 if unit.ctx_mode == 8 else 32
        self.nctx = unit.ctx_mode
        self.uf = _UF()
        self.constrained: set[Sym] = set()
        self.temps = 0
        self.reserved: dict[str, set[int]] = {"a": set(), "b": set()}
        self.xfer_reserved: set[tuple[str, int]] = set()
        self.sig_reserved: set[int] = set()

    # ---- 1. bank constraints ------------------------------------------------------

    def _fix(self, sym: Sym, bank: str) -> bool:
        self.constrained.add(sym)
        return self.uf.relate(_A, sym, 0 if bank == "a" else 1)

    def _pair(self, r1: Ref, r2: Ref) -> bool:
        if r1.kind == "phys" and r2.kind == "phys":
            return True
        if r1.kind == "phys":
            r1, r2 = r2, r1
        assert r1.sym is not None
        if r2.kind == "phys":
            assert r2.op is not None
            return self._fix(r1.sym, "b" if r2.op.bank == "a" else "a")
        assert r2.sym is not None
        self.constrained.update((r1.sym, r2.sym))
        return self.uf.relate(r1.sym, r2.sym, 1)

    def constrain(self, ins: Instr) -> None:
        refs = ins.refs
        # the banks the encoding fixes, given which operands are registers (not constants)
        banks = fixed_banks(ins.roles, [ref.kind in ("sym", "phys") for ref in refs])
        groups: dict[int, list[int]] = {}
        for i, (role, ref) in enumerate(zip(ins.roles, refs, strict=True)):
            if not _gpr(ref):
                continue
            if role.restricted and (ref.kind == "sym" and ref.sym and ref.sym.kind == "abs"):
                raise AsmError(f"absolute register '{ref.text}' cannot be used in this operand "
                               f"(restricted field of '{ins.mnemonic}'); copy it to a GPR first",
                               ins.arg_loc(i))  # fmt: skip
            if (
                banks[i]
                and ref.kind == "sym"
                and ref.sym is not None
                and not self._fix(ref.sym, banks[i])
            ):
                self._move(ins, i, banks[i])
            if role.group:
                groups.setdefault(role.group, []).append(i)
        for members in groups.values():
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    i, j = members[x], members[y]
                    if banks[i] and banks[j] and banks[i] != banks[j]:
                        continue  # both banks fixed above, opposite: nothing more to ask
                    if (
                        refs[i].kind == "sym"
                        and refs[i].sym is refs[j].sym
                        and refs[i].sym is not None
                    ):
                        ok = False
                    else:
                        ok = self._pair(refs[i], refs[j])
                    if not ok:
                        k = j if ins.roles[j].kind != "srcdest" and refs[j].kind == "sym" else i
                        self._move(ins, k, None, partner=refs[i if k == j else j])

    def _move(self, ins: Instr, i: int, bank: str | None, partner: Ref | None = None) -> None:
        """Copy operand i through a fresh temporary so the bank rule can be met."""
        ref = ins.refs[i]
        if ref.kind != "sym" or ins.roles[i].kind == "srcdest":
            raise AsmError(f"operands of '{ins.mnemonic}' cannot be placed in opposite A/B banks",
                           ins.arg_loc(i))  # fmt: skip
        self.temps += 1
        scope = Scope(f"temp{self.temps}", ins.scope, ins.loc, ins.index, ins.index + 1)
        tmp = Sym(f"__bank_tmp{self.temps}", "gpr", ins.arg_loc(i), scope)
        tmp.used = True
        self.unit.syms.append(tmp)
        move = Instr("alu", [tmp.name, "--", "b", ref.text], [ins.offs[i]] * 4, (), ins.loc, scope,
                      mn_off=ins.offs[i], note="bank move")  # fmt: skip
        move.roles = operand_roles("alu", move.args)
        move.index = ins.index
        ins.pre.append(move)
        move.refs = [Ref("sym", tmp.name, tmp), Ref("none", "--"), Ref("word", "b"), ref]
        ins.refs[i] = Ref("sym", tmp.name, tmp)
        ins.args[i] = tmp.name
        if bank is not None:
            self._fix(tmp, bank)
        elif partner is not None:
            self._pair(Ref("sym", tmp.name, tmp), partner)
        where = (f"bank {bank.upper()}, where '{ins.mnemonic}' needs this operand" if bank is not None
                 else f"the opposite bank of the other operand of '{ins.mnemonic}'")  # fmt: skip
        self.diags.warn(f"'{ref.text}' cannot be in {where}: copied through a temporary "
                        "(one extra instruction)", ins.arg_loc(i))  # fmt: skip

    # ---- 2./3./4. GPRs ------------------------------------------------------------

    def run(self) -> None:
        self.collect_reserved()
        self.apply_pins()
        for ins in self.unit.instrs:
            self.constrain(ins)
        self.allocate_gprs()
        self.allocate_xfers()
        self.allocate_signals()

    def collect_reserved(self) -> None:
        for ins in self.unit.instrs:
            for ref in ins.refs:
                if ref.kind == "phys" and ref.op is not None:
                    self._reserve_phys(ref.op)

    def _reserve_phys(self, op: Op) -> None:
        if op.kind == "gpr":
            self.reserved[op.bank].add(op.index)
        elif op.kind == "abs":
            self.reserved[op.bank].add(op.index % self.per_ctx)
        elif op.kind in ("xfer", "dxfer"):
            self.xfer_reserved.add((op.kind, op.index))

    def apply_pins(self) -> None:
        for name, scope, spec, loc in self.unit.pins:
            sym = scope.lookup(self.unit.synonyms.get(name, name))
            if sym is None:
                raise AsmError(f"'{name}' is not declared", loc)
            parts = spec.split()
            try:
                num = int(parts[0], 0)
            except ValueError:
                raise AsmError(
                    f"expected a register/signal number, got '{parts[0]}'", loc
                ) from None
            bank = parts[1].lower() if len(parts) > 1 else ""
            if sym.kind == "gpr":
                if bank not in ("a", "b"):
                    raise AsmError("a GPR address needs a bank: '.addr name N a' or '... b'", loc)
                if not 0 <= num < self.per_ctx:
                    raise AsmError(f"GPR number {num} out of range (0-{self.per_ctx - 1})", loc)
                sym.pin, sym.pin_bank = num, bank
                self._fix(sym, bank)
            elif sym.kind == "abs":
                if bank not in ("a", "b") or not 0 <= num <= 127:
                    raise AsmError("expected '.addr @name N a|b' with N 0-127", loc)
                sym.pin, sym.pin_bank = num, bank
                self._fix(sym, bank)
            elif sym.kind in ("xfer", "dxfer"):
                if not 0 <= num < self.per_ctx:
                    raise AsmError(
                        f"transfer register number {num} out of range (0-{self.per_ctx - 1})", loc
                    )
                sym.pin = num
            elif sym.kind == "sig":
                if not 1 <= num <= 15:
                    raise AsmError(f"signal number {num} out of range (1-15)", loc)
                sym.pin = num
            else:
                raise AsmError(f"'{name}' cannot be given an address", loc)

    def _bank_of(self, sym: Sym, flip: dict[object, int]) -> str:
        root, p = self.uf.find(sym)
        if root is _A:
            return "b" if p else "a"
        return "b" if p ^ flip.get(root, 0) else "a"

    def allocate_gprs(self) -> None:
        syms = [
            s for s in self.unit.syms if s.kind in ("gpr", "abs") and (s.used or s.pin is not None)
        ]
        # orientation of free components, balancing the banks
        comps: dict[object, list[tuple[Sym, int]]] = {}
        for s in syms:
            if s in self.constrained:
                root, p = self.uf.find(s)
                if root is not _A:
                    comps.setdefault(root, []).append((s, p))
        count = {"a": 0, "b": 0}
        for s in syms:
            if s in self.constrained and self.uf.find(s)[0] is _A:
                count[self._bank_of(s, {})] += 1
        flip: dict[object, int] = {}
        for root, members in sorted(comps.items(), key=lambda kv: -len(kv[1])):
            zeros = sum(1 for _, p in members if p == 0)
            ones = len(members) - zeros
            keep = abs(count["a"] + zeros - count["b"] - ones)  # zeros in A, ones in B
            swap = abs(count["a"] + ones - count["b"] - zeros)
            f = 0 if keep <= swap else 1
            flip[root] = f
            count["a"] += ones if f else zeros
            count["b"] += zeros if f else ones
        # absolute registers first: they take whole relative indices from the top
        self._allocate_abs([s for s in syms if s.kind == "abs"], flip)
        rel = [s for s in syms if s.kind == "gpr"]
        rel.sort(key=lambda s: (s.scope.start, -s.scope.end))
        pinned = [s for s in rel if s.pin is not None]
        for s in pinned:
            s.bank, s.index = s.pin_bank, s.pin or 0
        # a component that overflows its bank is flipped and colouring retried (bounded)
        fixed_roots = {self.uf.find(s)[0] for s in syms if s.kind == "abs"} | {_A}
        tried: set[object] = set()
        while True:
            failed = self._colour(rel, flip, pinned)
            if failed is None:
                return
            root = self.uf.find(failed)[0] if failed in self.constrained else None
            if root is None or root in fixed_roots or root in tried or len(tried) >= 32:
                banks = [self._bank_of(failed, flip)] if failed in self.constrained else ["a", "b"]
                self._too_many(failed, banks)
            tried.add(root)
            flip[root] = flip.get(root, 0) ^ 1

    def _colour(self, rel: list[Sym], flip: dict[object, int], pinned: list[Sym]) -> Sym | None:
        """Interval colouring in order of start; returns the register that found no room."""
        free_at = {b: [0] * self.per_ctx for b in "ab"}  # end of the last occupant of each index
        for s in rel:
            if s.pin is not None:
                continue
            start, end = s.scope.start, s.scope.end
            if s in self.constrained:
                banks = [self._bank_of(s, flip)]
            else:  # free to choose: the bank with more room now
                room = {b: sum(1 for i in range(self.per_ctx) if free_at[b][i] <= start
                               and i not in self.reserved[b]) for b in "ab"}  # fmt: skip
                banks = ["a", "b"] if room["a"] >= room["b"] else ["b", "a"]
            for bank in banks:
                idx = self._first_free(bank, free_at[bank], start, end, pinned, s)
                if idx is not None:
                    s.bank, s.index = bank, idx
                    free_at[bank][idx] = end
                    break
            else:
                return s
        return None

    def _first_free(self, bank: str, free_at: list[int], start: int, end: int, pinned: list[Sym],
                    s: Sym) -> int | None:  # fmt: skip
        for idx in range(self.per_ctx):
            if idx in self.reserved[bank] or free_at[idx] > start:
                continue
            if any(p.bank == bank and p.index == idx and p.scope.start < end and start < p.scope.end
                   for p in pinned if p is not s):  # fmt: skip
                continue
            return idx
        return None

    def _too_many(self, s: Sym, banks: list[str]) -> None:
        live = sum(1 for o in self.unit.syms if o.kind == "gpr" and o.scope.start < s.scope.end
                   and s.scope.start < o.scope.end)  # fmt: skip
        which = " or ".join(f"bank {b.upper()}" for b in banks)
        raise AsmError(
            f"out of general-purpose registers: no free register in {which} for '{s.name}' declared in "
            f"{s.scope.describe()} ({live} registers live there; {self.per_ctx} per bank per context in "
            f"{self.nctx}-context mode)", s.loc)  # fmt: skip

    def _allocate_abs(self, syms: list[Sym], flip: dict[object, int]) -> None:
        for bank in "ab":
            mine = [s for s in syms if s.pin is None and (self._bank_of(s, flip) if s in self.constrained
                                                          else None) in (bank, None)]  # fmt: skip
            if bank == "a":  # unconstrained globals: split between the banks
                free = [s for s in mine if s not in self.constrained]
                mine = [s for s in mine if s in self.constrained] + free[: (len(free) + 1) // 2]
                self._abs_b_extra = free[(len(free) + 1) // 2 :]
            else:
                mine = [s for s in mine if s in self.constrained] + self._abs_b_extra
            pinned_abs = {s.pin for s in syms if s.pin is not None and s.pin_bank == bank}
            for p in pinned_abs:
                self.reserved[bank].add((p or 0) % self.per_ctx)
            # a relative register pinned with .areg/.breg occupies its index in every context
            pinned_rel = {s.pin for s in self.unit.syms
                          if s.kind == "gpr" and s.pin is not None and s.pin_bank == bank}  # fmt: skip
            slots: list[int] = []
            rel_idx = self.per_ctx - 1
            for s in mine:
                if not slots:
                    while rel_idx >= 0 and (rel_idx in self.reserved[bank] or rel_idx in pinned_rel):
                        rel_idx -= 1
                    if rel_idx < 0:
                        raise AsmError(f"out of absolute registers in bank {bank.upper()} for '{s.name}' "
                                       "(they need relative registers no context uses)", s.loc)  # fmt: skip
                    self.reserved[bank].add(rel_idx)
                    slots = [c * self.per_ctx + rel_idx for c in range(self.nctx)]
                s.bank, s.index = bank, slots.pop()
            for s in syms:
                if s.pin is not None and s.pin_bank == bank:
                    s.bank, s.index = bank, s.pin

    # ---- 5. transfer registers -------------------------------------------------------

    @staticmethod
    def _needed(s: Sym) -> bool:
        """Unused declarations take no register; a .xfer_order group is allocated as a whole."""
        members = s.group.members if s.group is not None else [s]
        return any(m.used or m.pin is not None for m in members)

    def allocate_xfers(self) -> None:
        syms = [s for s in self.unit.syms if s.kind in ("xfer", "dxfer") and self._needed(s)]
        units: list[tuple[int, int, list[tuple[Sym, int]], int, set[str], str, SourceLoc]] = []
        seen: set[int] = set()
        for s in syms:
            if s.group is not None:
                if id(s.group) in seen:
                    continue
                seen.add(id(s.group))
                members = [(m, m.group_pos) for m in s.group.members]
            else:
                members = [(s, 0)]
            length = max(pos + m.span for m, pos in members)
            length = max(length, len(members))
            dirs: set[str] = set()
            for m, _ in members:
                dirs |= m.dirs if m.dirs else ({"read", "write"} if m.used else set())
            if not dirs:
                dirs = {"read", "write"}
            start = min(m.scope.start for m, _ in members)
            end = max(m.scope.end for m, _ in members)
            units.append((start, end, members, length, dirs, s.kind, s.loc))
        units.sort(key=lambda u: (u[0], -u[1]))
        free_at: dict[tuple[str, str, int], int] = {}
        pinned_slots: list[tuple[str, str, int, int, int]] = []
        for start, end, members, length, dirs, kind, _loc in units:
            base_pin = next((m.pin - pos for m, pos in members if m.pin is not None), None)
            if base_pin is not None:
                for k in range(length):
                    for h in dirs:
                        pinned_slots.append((kind, h, base_pin + k, start, end))
        for start, end, members, length, dirs, kind, loc in units:
            base_pin = next((m.pin - pos for m, pos in members if m.pin is not None), None)
            if base_pin is not None:
                if base_pin < 0 or base_pin + length > self.per_ctx:
                    raise AsmError(
                        f"pinned transfer registers do not fit (0-{self.per_ctx - 1})", loc
                    )
                base = base_pin
            else:
                base = self._xfer_base(kind, dirs, length, start, end, free_at, pinned_slots)
                if base is None:
                    names = ", ".join(m.name for m, _ in members)
                    half = "/".join(sorted(dirs))
                    raise AsmError(
                        f"out of transfer registers: {length} consecutive {half} "
                        f"{'$$' if kind == 'dxfer' else '$'} registers needed for {names} in "
                        f"{members[0][0].scope.describe()} ({self.per_ctx} per context in "
                        f"{self.nctx}-context mode)", loc)  # fmt: skip
            for k in range(length):
                for h in dirs:
                    free_at[(kind, h, base + k)] = end
            for m, pos in members:
                m.index = base + pos

    def _xfer_base(self, kind: str, dirs: set[str], length: int, start: int, end: int,
                   free_at: dict[tuple[str, str, int], int],
                   pinned: list[tuple[str, str, int, int, int]]) -> int | None:  # fmt: skip
        for base in range(self.per_ctx - length + 1):
            ok = True
            for k in range(base, base + length):
                if (kind, k) in self.xfer_reserved:
                    ok = False
                    break
                for h in dirs:
                    if free_at.get((kind, h, k), 0) > start or any(
                            pk == kind and ph == h and pi == k and ps < end and start < pe
                            for pk, ph, pi, ps, pe in pinned):  # fmt: skip
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                return base
        return None

    # ---- 6. signals --------------------------------------------------------------------

    def allocate_signals(self) -> None:
        syms = [s for s in self.unit.syms if s.kind == "sig" and (s.used or s.pin is not None)]
        syms.sort(key=lambda s: (s.scope.start, -s.scope.end))
        free_at = [0] * 16
        pinned = [s for s in syms if s.pin is not None]
        for s in pinned:
            s.index = s.pin or 0
        for s in syms:
            if s.pin is not None:
                continue
            start, end = s.scope.start, s.scope.end

            def ok(n: int, s: Sym = s, start: int = start, end: int = end) -> bool:
                return (1 <= n <= 15 and n not in self.sig_reserved and free_at[n] <= start
                        and not any(p.scope.start < end and start < p.scope.end and n in (
                            p.index, p.index + (1 if p.pair else 0)) for p in pinned))  # fmt: skip

            if s.pair:
                cands = [n for n in range(2, 15, 2) if ok(n) and ok(n + 1)]
            else:
                cands = [n for n in range(1, 16) if ok(n)]  # lowest first, as Intel's assembler
            if not cands:
                pair = "an even/odd signal pair (dram[] signals twice) " if s.pair else "a signal "
                raise AsmError(f"out of signals: no {pair}for '{s.name}' in {s.scope.describe()} "
                               "(s1-s15 per context)", s.loc)  # fmt: skip
            n = cands[0]
            s.index = n
            free_at[n] = end
            if s.pair:
                free_at[n + 1] = end
