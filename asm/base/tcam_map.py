"""The TCAM's 2 MB SRAM window (docs/tcam.md, microcode/include/tcam.h): its layout as data,
what an address of it is, and the notes the listing and the disassembler put on SRAM
commands that reach it.

The disassembler knows an address when the straight-line code before the command put
constants in its operand registers (immed, immed_w0/w1): a register's value is forgotten
at every branch target and whenever another instruction writes it.  One operand known to
lie in the window is enough to say which part of it the command reaches (the other is
then the offset: a slot or an entry)."""

from __future__ import annotations

import re
from dataclasses import dataclass

WINDOW_BYTES = 0x200000
ENTRY_OFF = 0x000000
KEY_OFF = 0x100000
RESULT_OFF = 0x110000
CSR_OFF = 0x120000
ENTRY_BYTES = 128
KEY_WORDS = 9
E_MASK = 36
E_RESULT = 72
E_CONTROL = 80
VALID = 0x80000000
SLOTS = 256
CSR_NAMES = ("lookups", "hits", "multi_hits", "entries", "key_bits")
DEFAULT_BASE = 0x80600000  # tcam.h's default: examples/chips/ixp2850_spp.yaml
MACROS = {"tcam_lookup": "tcam", "tcam_lookup9": "tcam", "tcam_entry_addr": "tcam"}


@dataclass(frozen=True)
class Window:
    """Where a chip's TCAM answers: SRAM address `base`, `entries` entries."""

    base: int = DEFAULT_BASE
    entries: int = 8192

    def describe(self, addr: int, exact: bool = True) -> str | None:
        """What SRAM address `addr` is (None: outside the window); not `exact`: the
        region it starts (an offset is added to it)."""
        off = addr - self.base
        if not 0 <= off < WINDOW_BYTES:
            return None
        if off < KEY_OFF:
            if not exact:
                return "tcam entries"
            i, within = divmod(off - ENTRY_OFF, ENTRY_BYTES)
            part = "key" if within < E_MASK else "mask" if within < E_RESULT else "result" if within < E_CONTROL else "control"
            return f"tcam entry {i} {part}" if i < self.entries else f"tcam (past entry {self.entries - 1})"
        if off < RESULT_OFF:
            s = (off - KEY_OFF) // 64
            return ("tcam key" if not exact else f"tcam key slot {s}") if s < SLOTS else "tcam (unused)"
        if off < CSR_OFF:
            s = (off - RESULT_OFF) // 16
            return ("tcam lookup" if not exact else f"tcam lookup, result slot {s}") if s < SLOTS else "tcam (unused)"
        k = (off - CSR_OFF) // 4
        return f"tcam counter {CSR_NAMES[k]}" if k < len(CSR_NAMES) else "tcam (unused)"


_GPR = re.compile(r"^[ab]\d+$")
_CALL = re.compile(r"^(?P<op>\w+)\[(?P<args>[^\]]*)\]")
_BRANCH = re.compile(r"^(br|bcc|bne|beq|bgt|blt|bge|ble|bmi|bpl|bcs|bvs|bvc|jump|rtn|ctx_arb)")


def _num(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _immed(op: str, args: list[str], regs: dict[str, int]) -> None:
    """What an immed form puts in its register (kept in `regs`, or forgotten)."""
    dest, v = args[0], _num(args[1]) if len(args) > 1 else None
    if v is None:
        regs.pop(dest, None)
        return
    if op == "immed":
        shift = int(args[2].lstrip("<")) if len(args) > 2 and args[2].startswith("<<") else 0
        regs[dest] = (v << shift) & 0xFFFFFFFF
    elif op in ("immed_w0", "immed_w1") and dest in regs:
        keep = 0xFFFF0000 if op == "immed_w0" else 0xFFFF
        regs[dest] = (regs[dest] & keep) | ((v & 0xFFFF) << (0 if op == "immed_w0" else 16))
    elif op in ("immed_w0", "immed_w1"):
        regs.pop(dest, None)


def constant_notes(texts: list[str | None], targets: set[int], window: Window) -> dict[int, str]:
    """Address -> note for each SRAM command of `texts` (decoded words, None: data) that
    reaches the window; `targets`: the branch targets (where what is known is forgotten)."""
    regs: dict[str, int] = {}
    notes: dict[int, str] = {}
    for addr, text in enumerate(texts):
        if addr in targets:
            regs.clear()
        m = _CALL.match(text or "")
        if m is None:
            continue
        op, args = m["op"], [a.strip() for a in m["args"].split(",")]
        if op.startswith("immed"):
            _immed(op, args, regs)
        elif op == "sram" and len(args) >= 4:
            note = _sram_note(args, regs, window)
            if note:
                notes[addr] = note
        elif args and _GPR.match(args[0]):
            regs.pop(args[0], None)
        if _BRANCH.match(text or ""):
            regs.clear()
    return notes


def _sram_note(args: list[str], regs: dict[str, int], window: Window) -> str | None:
    """`sram[cmd, $x, A, B, ...]`: the part of the window A + B reaches, if known."""
    a, b = (regs.get(x, _num(x)) for x in (args[2], args[3]))
    if a is not None and b is not None:
        what = window.describe((a + b) & 0xFFFFFFFF)
    else:
        known = a if a is not None else b
        what = window.describe(known, exact=False) if known is not None else None
        if what is not None:
            what += f" (+ {args[3] if a is not None else args[2]})"
    if what is None:
        return None
    return what if args[0] == "read" or not what.startswith("tcam lookup") else f"{what}: a {args[0]}, not a lookup"


def macro_note(expansion_names: list[str], text: str) -> str | None:
    """The note of an SRAM command a tcam.h macro expanded to (listing)."""
    if not any(n in MACROS for n in expansion_names) or not text.startswith("sram["):
        return None
    return "tcam lookup" if text.startswith("sram[read") else "tcam key" if text.startswith("sram[write") else None
