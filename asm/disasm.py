"""Disassembler: words (ELF image, hex dump or C byte array) -> source that reassembles identically.

Input formats (detected):
  * an npkit ELF image (asm/image.py);
  * a hex dump, one word per line, optionally `addr: word` (`#`/`;`/`//` comments allowed),
    each word at its address (consecutive from 0, in any order: the assembler has no .org);
  * a C array of instruction bytes, five bytes per word, big-endian, like Linux's
    ixp2400_rx.ucode (`0xf0, 0x00, 0x0c, 0xc0, 0x05,`).

Output uses physical registers, `l<addr>#` labels where branch targets land
(or the image's own label names, including one after the last word), and a
`.num_contexts` line.  One program is one source: `pick` chooses it from a linked image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from npkit.asm.base.reading import read_bytes
from npkit.asm.image import IMAGE_LIMIT, ImageError, from_bytes, pick_program
from npkit.asm.isa import (
    DecodeError,
    EncodeError,
    decode,
    encode,
    operand_roles,
    split_instruction,
)

from .base.tcam_map import Window, constant_notes
from .errors import AsmError, SourceLoc


@dataclass
class Words:
    words: list[int]
    ctx_mode: int = 8
    labels: dict[int, str] = field(default_factory=dict)
    name: str = ""
    raw: bool = False  # words without a context mode of their own (hex dump, C array)


_HEX_LINE = re.compile(r"^\s*(?:(?:0x)?([0-9a-fA-F]+)\s*:\s*)?(?:0x)?([0-9a-fA-F]{1,10})\s*$")
_NO_ORG = (
    "the assembler has no directive to place code at an address (no .org), so only a dump "
    "of consecutive words from address 0 disassembles into source that reassembles there"
)


def read_words(path: str | Path, data: bytes | None = None) -> list[Words]:
    """Read every program in `path`; raises AsmError (with the line) on bad input."""
    path = str(path)
    if data is None:
        data = read_bytes(path, limit=IMAGE_LIMIT, error=AsmError, what="input")
    if data[:4] == b"\x7fELF":
        try:
            image = from_bytes(data, path)
        except ImageError as e:
            raise AsmError(f"bad image: {e}", SourceLoc(path, 1)) from None
        return [Words(p.words, p.ctx_mode, p.labels(), p.name) for p in image.programs]
    nul = data.find(b"\0")
    if nul >= 0:  # not echoed: a binary file's "line" can be megabytes
        raise AsmError("holds a NUL byte: a binary file, not an npkit image, a hex dump or a C array",
                       SourceLoc(path, data.count(b"\n", 0, nul) + 1))  # fmt: skip
    text = data.decode("latin-1")
    if re.search(r"0x[0-9a-fA-F]{2}\s*,\s*0x[0-9a-fA-F]{2}\s*,", text):
        return [Words(_c_array(text, path), raw=True)]
    return [Words(_hex_dump(text, path), raw=True)]


def pick(progs: list[Words], name: str | None, origin: str, every: bool = False) -> list[Words]:
    """The programs to disassemble: the one called `name` (`--program`); with no name the
    only one, since each program is a source of its own (a linked image of several is an
    error listing them), or with `every` all of them (JSON keeps them apart)."""
    if name is not None and progs[0].raw:
        raise AsmError(
            f"--program picks a program of an image; {origin} holds raw words of one unnamed program"
        )
    if every and name is None:
        return progs
    try:
        return [pick_program(progs, name, origin)]
    except ImageError as e:
        raise AsmError(str(e)) from None


def _strip_comment(line: str) -> str:
    return re.split(r"#|;|//", line, maxsplit=1)[0]


def _hex_dump(text: str, path: str) -> list[int]:
    """The words of a dump, each at its address: a line without one follows the line before
    (the first is at 0); out-of-order lines are placed at their addresses; an address given
    twice, a gap or a dump that does not start at 0 is an error on the line concerned."""
    at: dict[int, tuple[int, int]] = {}  # address -> (word, line number)
    nxt = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line.strip():
            continue
        m = _HEX_LINE.match(line)
        if not m:
            raise AsmError("expected one 40-bit word in hex per line (optionally 'addr: word')",
                           SourceLoc(path, n, 1, raw))  # fmt: skip
        addr = int(m[1], 16) if m[1] is not None else nxt
        if addr in at:
            raise AsmError(f"address 0x{addr:x} is given twice (first on line {at[addr][1]})",
                           SourceLoc(path, n, 1, raw))  # fmt: skip
        at[addr] = (int(m[2], 16), n)
        nxt = addr + 1
    if not at:
        raise AsmError("no instruction words found", SourceLoc(path, 1))
    expect = 0
    for addr in sorted(at):
        if addr != expect:
            gap = (
                f"no word at 0x{expect:x}"
                if addr == expect + 1
                else f"no words at 0x{expect:x}..0x{addr - 1:x}"
            )
            raise AsmError(
                f"{gap} (this line is at 0x{addr:x}): {_NO_ORG}", SourceLoc(path, at[addr][1])
            )
        expect = addr + 1
    return [at[a][0] for a in sorted(at)]


def _c_array(text: str, path: str) -> list[int]:
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    body = re.sub(r"//[^\n]*", "", body)
    # byte literals only: wider constants around the array (struct fields, masks) are not code
    nums = [int(x, 16) for x in re.findall(r"(?<![\w])0x([0-9a-fA-F]{1,2})(?![\w.])", body)]
    if not nums or len(nums) % 5:
        raise AsmError(
            f"a C byte array needs five bytes per word; found {len(nums)} bytes", SourceLoc(path, 1)
        )
    return [int.from_bytes(bytes(nums[i : i + 5]), "big") for i in range(0, len(nums), 5)]


def _targets(text: str) -> list[int]:
    sp = split_instruction(text)
    out = []
    for i, role in enumerate(operand_roles(sp.mnemonic, list(sp.args))):
        if role.kind == "label" and sp.args[i].isdigit():
            out.append(int(sp.args[i]))
    for t in sp.tokens:
        if t.name.lower() == "br" and t.args and t.args[0].isdigit():
            out.append(int(t.args[0]))
    return out


def _instruction_text(w: int, ctx_mode: int) -> tuple[str | None, str]:
    """(text, why): text if `w` decodes to an instruction that encodes back to `w`, else None."""
    try:
        text = decode(w, ctx_mode)
    except DecodeError as e:
        return None, f"not an instruction: {e}"
    try:
        same = encode(text, ctx_mode=ctx_mode) == w
    except EncodeError as e:
        return None, f"decodes as '{text}', which is not encodable ({e})"
    if not same:
        return None, f"decodes as '{text}', but that encodes differently"
    return text, ""


def disassemble(prog: Words, show_addr: bool = False, tcam: Window | None = None) -> str:
    """Source text that reassembles to exactly `prog.words`.

    Words that are not instructions the encoder could have produced (data in
    the control store, reserved bit patterns) come out as `.word 0x...`
    with the reason in a comment, so the round trip holds for any 40-bit word.
    With `tcam` (the chip's TCAM window), an SRAM command whose address the code
    before it makes known and that reaches the window says so in a comment
    (asm/base/tcam_map.py).
    """
    texts = [_instruction_text(w, prog.ctx_mode) for w in prog.words]
    names: dict[int, str] = {}
    for a, n in prog.labels.items():
        if re.fullmatch(r"[A-Za-z_]\w*", n):
            names[a] = n
    for t, _ in texts:
        for tgt in _targets(t) if t is not None else ():
            if tgt < len(prog.words):  # past the end: keep the number
                names.setdefault(tgt, f"l{tgt}")
    notes = constant_notes([t for t, _ in texts], set(names), tcam) if tcam is not None else {}
    out = []
    if prog.name:
        out.append(f"; program {prog.name}")
    out.append(f".num_contexts {prog.ctx_mode}")
    for addr, w in enumerate(prog.words):
        if addr in names:
            out.append(f"{names[addr]}#:")
        if texts[addr][0] is None:
            text = f".word 0x{w:010x}"
            comment = texts[addr][1]
        else:
            text = decode(
                w, prog.ctx_mode, label_of=lambda a: f"{names[a]}#" if a in names else None
            )
            comment = ""
        if addr in notes:
            comment = f"{comment}  {notes[addr]}" if comment else notes[addr]
        if show_addr:
            comment = f"{addr:5d}: {w:010x}" + (f"  {comment}" if comment else "")
        out.append(f"    {text:<56}; {comment}" if comment else f"    {text}")
    if len(prog.words) in names:  # a label after the last word (`end#:` or `.endif` last)
        out.append(f"{names[len(prog.words)]}#:")
    return "\n".join(out) + "\n"
