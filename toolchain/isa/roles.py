"""Operand roles: what each operand of an instruction is, for the register allocator.

The assembler asks `operand_roles("alu", ["x", "y", "+", "z"])` before it picks
physical registers: which operands are written, which are read, which must sit
in opposite banks (same nonzero `group`), which go through a restricted field
(no absolute GPRs), and which are transfer registers and in which direction.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import model
from .codec import _BCC


@dataclass(frozen=True)
class Role:
    kind: str  # dest | src | srcdest | xfer | addr | const | label | signal | csr | word
    restricted: bool = False  # 8-bit field: relative GPRs only, constants to 255 with a shared MSB
    group: int = 0  # operands sharing a nonzero group must be in different GPR banks
    bank: str = ""  # "a" / "b" when the encoding fixes the bank
    xfer_dir: str = ""  # read (unit writes it) | write (unit reads it) | both
    unit: str = ""  # sram | scratch | dram | msf | pci | cap | hash, for xfer and signal roles


D_U, S_U = Role("dest"), Role("src")
D_R, S_R = Role("dest", True), Role("src", True)
PAIR_U = Role("src", False, 1)
PAIR_R = Role("src", True, 1)
WORD, CONST, LABEL, SIGNAL, CSR = Role("word"), Role("const"), Role("label"), Role("signal"), Role("csr")

_READ_CMDS = {"read", "get", "dequeue", "rd_qdesc_tail", "rd_qdesc_head", "csr_rd", "read64"}


def _xfer_dir(cmd: str) -> str:
    if cmd in _READ_CMDS:
        return "read"
    if cmd.startswith("test_and_") or cmd == "swap":
        return "both"
    return "write"


def _mem_roles(unit: str, args: list[str]) -> list[Role]:
    cmd = args[0].lower() if args else ""
    if unit == "cap" and cmd == "fast_wr":
        return [WORD, CONST, CSR]
    if unit == "cap" and len(args) == 4 and (args[2].upper() in model.isa().cap_csrs or args[2].lower().startswith("csr_")):
        return [WORD, Role("xfer", xfer_dir=_xfer_dir(cmd), unit=unit), CSR, CONST]
    xfer = Role("xfer", xfer_dir=_xfer_dir(cmd), unit=unit)
    spec = model.isa().enums.get(f"{unit}_cmd", {}).get(cmd, {})
    if isinstance(spec, dict) and spec.get("ordered"):
        return [WORD, xfer, Role("addr", True, 1, "a"), Role("addr", True, 1, "b"), CONST][: max(len(args), 4)]
    addr = Role("addr", True, 1)
    return [WORD, xfer, addr, addr, CONST][: max(len(args), 4)]


def operand_roles(mnemonic: str, args: list[str]) -> list[Role]:
    """Roles for each operand of `mnemonic[args]`; the list has len(args) entries."""
    m = model.isa().canonical_mnemonic(mnemonic)
    n = len(args)
    roles: list[Role]
    if m == "alu":
        roles = [D_U, PAIR_U, WORD, PAIR_U] if n != 5 else [D_R, PAIR_R, WORD, PAIR_R, WORD]
    elif m == "alu_shf":
        roles = [D_R, PAIR_R, WORD, PAIR_R, WORD]
    elif m == "dbl_shf":
        roles = [D_R, PAIR_R, PAIR_R, WORD]
    elif m == "asr":
        roles = [D_R, S_R, WORD]
    elif m in ("byte_align_be", "byte_align_le"):
        roles = [D_R, S_R]
    elif m in ("ld_field", "ld_field_w_clr"):
        roles = [Role("srcdest", True, 1), WORD, PAIR_R, WORD]
    elif m.startswith("immed"):
        roles = [D_U, CONST, WORD]
    elif m in ("pop_count1", "pop_count2"):
        roles = [S_U]
    elif m in ("pop_count3", "find_bset", "cam_read_tag", "cam_read_state"):
        roles = [D_U, S_U]
    elif m == "find_bset_with_mask":
        roles = [D_U, PAIR_U, PAIR_U]
    elif m == "cam_lookup":
        roles = [D_U, S_U]
    elif m == "cam_write":
        roles = [Role("src", bank="b"), Role("src", bank="a"), CONST]
    elif m == "cam_write_state":
        roles = [Role("src", bank="b"), CONST]
    elif m in ("crc_be", "crc_le"):
        roles = [WORD, D_U, Role("src", bank="a")]
    elif m in _BCC or m == "br":
        roles = [LABEL]
    elif m in ("br=ctx", "br!=ctx"):
        roles = [CONST, LABEL]
    elif m in ("br_signal", "br_!signal"):
        roles = [SIGNAL, LABEL]
    elif m in ("br_inp_state", "br_!inp_state"):
        roles = [WORD, LABEL]
    elif m in ("br_bset", "br_bclr"):
        roles = [S_R, CONST, LABEL]
    elif m in ("br=byte", "br!=byte"):
        roles = [PAIR_R, CONST, PAIR_R, LABEL]
    elif m == "jump":
        roles = [S_U, LABEL]
    elif m == "rtn":
        roles = [S_U]
    elif m == "ctx_arb":
        roles = [WORD if a.lower() in ("voluntary", "kill", "bpt", "--") else SIGNAL for a in args]
    elif m == "local_csr_rd":
        roles = [CSR]
    elif m == "local_csr_wr":
        roles = [CSR, S_U]
    elif m == "mul_step":
        roles = [PAIR_U, PAIR_U] if n == 2 and args[1] != "--" else [D_U, WORD]
    elif m in ("sram", "scratch", "dram", "msf", "pci", "cap"):
        roles = _mem_roles(m, args)
    elif m in ("hash_48", "hash_64", "hash_128"):
        roles = [Role("xfer", xfer_dir="both", unit="hash"), CONST]
    else:
        roles = []
    roles = list(roles[:n])
    roles += [WORD] * (n - len(roles))
    return roles
