"""The MEv2 instruction set, described once in mev2.yaml.

Public API:
    encode(text, resolve=None, ctx_mode=8) -> int      physical instruction -> 40-bit word
    decode(word, ctx_mode=8, label_of=None) -> str     40-bit word -> instruction text
    MNEMONICS                                          every mnemonic the encoder accepts
    operand_roles(mnemonic, args) -> list[Role]        what each operand is, for register allocation
    fixed_banks(roles, registers) -> list[str]         the bank the encoding fixes for each operand
    isa()                                              the loaded description (classes, fields, enums, CSRs)
"""

from .codec import MNEMONICS, EncodeError, encode
from .decode import DecodeError, decode
from .model import WORD_MASK, isa
from .roles import Role, fixed_banks, operand_roles
from .syntax import SplitInstr, SyntaxProblem, Token, split_instruction

__all__ = [
    "MNEMONICS",
    "WORD_MASK",
    "DecodeError",
    "EncodeError",
    "Role",
    "SplitInstr",
    "SyntaxProblem",
    "Token",
    "decode",
    "encode",
    "fixed_banks",
    "isa",
    "operand_roles",
    "split_instruction",
]  # fmt: skip
