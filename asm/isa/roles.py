"""Operand roles: what each operand of an instruction is, for the register allocator.

The assembler asks `operand_roles("alu", ["x", "y", "+", "z"])` before it picks
physical registers: which operands are written, which are read, which must sit
in opposite banks (same nonzero `group`), which go through a restricted field
(no absolute GPRs), which the encoding fixes in a bank (`fixed_banks`), and which are
transfer registers and in which direction.
Every mnemonic's operand list is mev2.yaml `mnemonics` (role names defined in
mev2.yaml `roles`); a transfer operand's direction is its command's `dir`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from . import model
from .model import Isa, Mnemonic


@dataclass(frozen=True)
class Role:
    kind: str  # dest | src | srcdest | xfer | addr | const | label | signal | csr | word
    restricted: bool = False  # 8-bit field: relative GPRs only, constants to 255 with a shared MSB
    group: int = 0  # operands sharing a nonzero group must be in different GPR banks
    bank: str = ""  # "a" / "b" when the encoding fixes the bank
    paired_bank: str = ""  # "a" / "b": fixed only while every operand of its group is a register
    xfer_dir: str = ""  # read (unit writes it) | write (unit reads it) | both
    unit: str = ""  # sram | scratch | dram | msf | pci | cap | hash, for xfer and signal roles


WORD = Role("word")


def fixed_banks(roles: Sequence[Role], registers: Sequence[bool]) -> list[str]:
    """The bank ("a" / "b", "" for either) the encoding fixes for each operand, given which
    operands are registers (not constants): `bank` always, `paired_bank` while every
    operand of the role's group (two or more) is a register.  The encoder places operands
    by it and the register allocator puts virtual registers there."""
    members = Counter(r.group for r in roles if r.group)
    complete = {g for g, n in members.items() if n > 1}
    complete -= {r.group for r, reg in zip(roles, registers, strict=True) if not reg}
    return [r.bank or (r.paired_bank if r.group in complete else "") for r in roles]


@lru_cache(maxsize=8)
def _role_table(d: Isa) -> dict[str, Role]:
    return {name: Role(**spec) for name, spec in d.roles.items()}


def _is_cap_csr(d: Isa, text: str) -> bool:
    return text.upper() in d.cap_csrs or text.lower().startswith("csr_")


def _matches(d: Isa, when: dict[str, object], args: list[str]) -> bool:
    for key, want in when.items():
        if key == "count":
            ok = len(args) == want
        elif key.endswith("_cap_csr"):
            i = int(key[3:-len("_cap_csr")])
            ok = i < len(args) and _is_cap_csr(d, args[i]) == bool(want)
        else:
            negate = key.endswith("_not")
            i = int(key[3:-4] if negate else key[3:])
            words = {str(w).lower() for w in want} if isinstance(want, list) else set()
            ok = (i < len(args) and args[i].lower() in words) != negate
        if not ok:
            return False
    return True


def _role_names(d: Isa, m: Mnemonic, args: list[str]) -> list[str]:
    if m.repeat:
        return ["word" if a.lower() in m.keywords else m.repeat for a in args]
    form = next((f.operands for f in m.forms if _matches(d, f.when, args)), m.operands)
    return ["word" if i < len(args) and args[i].lower() in m.keywords else r for i, r in enumerate(form)]


def _resolve(d: Isa, m: Mnemonic, name: str, args: list[str]) -> Role:
    role = _role_table(d)[name]
    unit = m.fact("unit")
    if unit is None or role.kind != "xfer":
        return role
    cmd = d.memory_command(m.name, args)
    return replace(role, xfer_dir=cmd.xfer_dir if cmd is not None else "write", unit=str(unit))


def operand_roles(mnemonic: str, args: list[str]) -> list[Role]:
    """Roles for each operand of `mnemonic[args]`; the list has len(args) entries."""
    d = model.isa()
    m = d.mnemonic(mnemonic)
    n = len(args)
    if m is None:
        return [WORD] * n
    roles = [_resolve(d, m, r, args) for r in _role_names(d, m, args)[:n]]
    cmd = d.memory_command(m.name, args)
    if cmd is not None and cmd.ordered:  # the encoder keeps A then B: fix the banks
            addrs = [i for i, r in enumerate(roles) if r.kind == "addr"]
            for i, bank in zip(addrs, "ab", strict=False):
                roles[i] = replace(roles[i], bank=bank)
    return roles + [WORD] * (n - len(roles))
