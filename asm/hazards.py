"""Warnings for hazards the hardware leaves to the programmer.

Checked on the final physical code, in straight-line stretches:

* reading a read-transfer register that a memory command with `sig_done[s]`
  is still filling, before a `ctx_arb` on s;
* using the effect of a `local_csr_wr` (ACTIVE_LM_ADDR_n, T_INDEX,
  BYTE_INDEX...) fewer than 3 instructions after the write;
* branching to an instruction that sits in another branch's defer shadow.
"""

from __future__ import annotations

import re

from npkit.asm.isa import isa, operand_roles
from npkit.asm.isa.syntax import reference_count

from .errors import Diagnostics
from .parser import Emitted, Unit

CSR_WRITE_TO_USE = 3
_CSR_EFFECTS: dict[str, tuple[str, ...]] = {
    "ACTIVE_LM_ADDR_0": ("*l$index0",),
    "ACTIVE_LM_ADDR_1": ("*l$index1",),
    "ACTIVE_LM_ADDR_0_BYTE_INDEX": ("*l$index0", "byte_align"),
    "ACTIVE_LM_ADDR_1_BYTE_INDEX": ("*l$index1", "byte_align"),
    "T_INDEX": ("*$index", "*$$index"),
    "T_INDEX_BYTE_INDEX": ("*$index", "*$$index", "byte_align"),
    "BYTE_INDEX": ("byte_align",),
    "NN_GET": ("*n$index",),
}
_BRANCHY = re.compile(r"^(br|b[a-z]{2}$|jump|rtn)")


def check_hazards(
    emitted: list[Emitted], labels: dict[str, int], unit: Unit, diags: Diagnostics
) -> None:
    targets = set(labels.values())
    # in-flight memory commands: key -> (xfers it fills, xfers it sends, command address,
    # last address before the wait (ctx_swap with defer) or None (sig_done: until ctx_arb), signal)
    pending: dict[object, tuple[set[str], set[str], int, int | None, str]] = {}
    csr_writes: list[tuple[int, str]] = []  # (address, csr name) of recent local_csr_wr
    shadows: dict[int, int] = {}  # address in a defer shadow -> address of the branch
    branch_targets: list[tuple[int, int]] = []  # (branch address, target)
    for e in emitted:
        sp = e.split
        mn = sp.mnemonic
        roles = operand_roles(mn, list(sp.args))
        if e.addr in targets:
            pending.clear()
        for key in [k for k, v in pending.items() if v[3] is not None and e.addr > v[3]]:
            del pending[key]
        # 1. using a transfer register a memory command is still filling or sending
        if pending:
            _check_xfers(e, roles, pending, diags)
        if mn == "ctx_arb":
            for a in sp.args:
                pending.pop(a, None)
        if isa().unit_of_mnemonic(mn) is not None and len(sp.args) >= 2 and roles[1].kind == "xfer":
            _note_command(e, roles, pending)
        # 2. local CSR write-to-use distance
        csr_writes = [(a, c) for a, c in csr_writes if e.addr - a <= CSR_WRITE_TO_USE]
        if csr_writes:
            text_ops = [a for a in sp.args] + [mn]
            for a, csr in csr_writes:
                for eff in _CSR_EFFECTS[csr]:
                    if any(op.startswith(eff) for op in text_ops):
                        diags.warn(f"uses {eff} {e.addr - a - 1} instruction(s) after local_csr_wr[{csr}] "
                                   f"at address {a}: the new value takes effect only after "
                                   f"{CSR_WRITE_TO_USE} instructions", e.ins.arg_loc(None))  # fmt: skip
                        csr_writes = [(x, c) for x, c in csr_writes if x != a]
                        break
        if mn == "local_csr_wr" and sp.args and sp.args[0].upper() in _CSR_EFFECTS:
            csr_writes.append((e.addr, sp.args[0].upper()))
        if _BRANCHY.match(mn) and mn not in ("br_bset", "br_bclr") and not _has_defer(sp.tokens) \
                and mn in ("br", "jump", "rtn"):  # fmt: skip
            csr_writes = []
            pending.clear()
        # 3. defer shadows and branch targets
        defer = _defer(sp.tokens)
        for k in range(1, defer + 1):
            shadows[e.addr + k] = e.addr
        for i, role in enumerate(roles):
            if role.kind == "label":
                try:
                    branch_targets.append((e.addr, int(sp.args[i], 0)))
                except ValueError:
                    pass
        for t in sp.tokens:
            if t.name.lower() == "br" and t.args:
                try:
                    branch_targets.append((e.addr, int(t.args[0], 0)))
                except ValueError:
                    pass
    # 4. an instruction that grew (bank copy, immed split) inside a defer shadow
    words_of: dict[int, list[Emitted]] = {}
    for e in emitted:
        words_of.setdefault(e.ins.index, []).append(e)
    for group in words_of.values():
        if len(group) > 1 and any(e.addr in shadows for e in group):
            e = group[-1]
            diags.warn(f"'{e.ins.mnemonic}' needs {len(group)} words here, inside the defer shadow of the "
                       f"branch at address {shadows[next(g.addr for g in group if g.addr in shadows)]}: "
                       "the branch now defers different instructions", e.ins.arg_loc(None))  # fmt: skip
    for src, tgt in branch_targets:
        if tgt in shadows and shadows[tgt] != src:
            e = emitted[src]
            diags.warn(f"branches to address {tgt}, which is in the defer shadow of the branch at "
                       f"address {shadows[tgt]}", e.ins.arg_loc(None))  # fmt: skip


def _check_xfers(e: Emitted, roles: list, pending: dict, diags: Diagnostics) -> None:
    sp = e.split
    for i, role in enumerate(roles):
        reg = sp.args[i]
        where = e.ins.arg_loc(min(i, len(e.ins.args) - 1))
        for reads, writes, at, _, sig in pending.values():
            wait = (
                f"ctx_arb[{sig}] first"
                if sig.startswith("s")
                else "the ctx_swap has not happened yet"
            )
            if role.kind in ("src", "srcdest", "addr") and reg in reads:
                diags.warn(f"reads {reg} before the memory command at address {at} has filled it "
                           f"({wait})", where)  # fmt: skip
                reads.discard(reg)
            if role.kind in ("dest", "srcdest") and reg in writes:
                diags.warn(f"overwrites {reg} while the memory command at address {at} may still be "
                           f"sending it ({wait})", where)  # fmt: skip
                writes.discard(reg)


def _note_command(e: Emitted, roles: list, pending: dict) -> None:
    sp = e.split
    m = re.fullmatch(r"(\$\$?)(\d+)", sp.args[1])
    if not m:
        return
    done = next((t for t in sp.tokens if t.name.lower() == "sig_done" and t.args), None)
    swap = next((t for t in sp.tokens if t.name.lower() == "ctx_swap" and t.args), None)
    if done is not None:
        key: object = done.args[0]
        expiry = None
    elif swap is not None and _defer(sp.tokens):
        key, expiry = ("swap", e.addr), e.addr + _defer(sp.tokens)
    else:
        return
    cmd = isa().memory_command(sp.mnemonic, sp.args)
    per = cmd.words_per_count if cmd is not None else 1
    n = (reference_count(sp.args[4]) or 1) * per if len(sp.args) == 5 else 1
    regs = {f"{m[1]}{int(m[2]) + k}" for k in range(n)}
    d = roles[1].xfer_dir
    reads = set(regs) if d in ("read", "both") else set()
    writes = set(regs) if d in ("write", "both") else set()
    pending[key] = (reads, writes, e.addr, expiry, str(key) if isinstance(key, str) else "swap")


def _defer(tokens: tuple) -> int:
    for t in tokens:
        if t.name.lower() == "defer" and t.args and t.args[0].isdigit():
            return int(t.args[0])
    return 0


def _has_defer(tokens: tuple) -> bool:
    return _defer(tokens) > 0
