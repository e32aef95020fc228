"""Assembler listing: one row per instruction word, then the symbol table.

file:line      addr  word        disassembly                       | source
"""

from __future__ import annotations

from pathlib import Path

from npkit.asm.isa import DecodeError, decode, isa

from .assembler import Assembly
from .base.tcam_map import Window, constant_notes, macro_note


def _decoded(word: int, ctx_mode: int) -> str | None:
    try:
        return decode(word, ctx_mode)
    except DecodeError:
        return None


def render_listing(asm: Assembly, tcam: Window | None = None) -> str:
    """The listing; an SRAM command of a tcam.h macro, or one whose address the code before
    it makes known inside `tcam` (the chip's TCAM window; without it, tcam.h's default
    when the source includes tcam.h), is noted."""
    prog = asm.program
    if tcam is None and any(Path(f).name == "tcam.h" for f in prog.source_files):
        tcam = Window()
    texts = [_decoded(e.word, prog.ctx_mode) for e in asm.emitted]
    notes = constant_notes(texts, set(asm.label_addrs.values()), tcam) if tcam is not None else {}
    by_addr: dict[int, list[str]] = {}
    gen = {n for n, lab in asm.unit.labels.items() if lab.generated}
    for name, addr in sorted(asm.label_addrs.items(), key=lambda kv: kv[0] in gen):
        by_addr.setdefault(addr, []).append(name)
    first = {a: names[0] for a, names in by_addr.items()}
    out = [f"; npkit listing: program '{prog.name}', {len(prog.words)} words, "
           f"{prog.ctx_mode}-context mode"]  # fmt: skip
    out.append(f"; {'source':<24} {'addr':>5}  {'word':<10}  {'disassembly':<44} | source text")
    for e in asm.emitted:
        for name in by_addr.get(e.addr, []):
            out.append(f"{'':26} {name}#:")
        try:
            dis = decode(
                e.word, prog.ctx_mode, label_of=lambda a: first.get(a, "") and first[a] + "#"
            )
        except DecodeError as err:
            dis = f"<{err}>"
        loc = e.ins.loc
        where = f"{loc.file.rsplit('/', 1)[-1]}:{loc.line}"
        src = loc.text.strip() if loc.text else e.ins.source()
        if loc.expansion:
            name, mfile, mline = loc.expansion[-1]
            src = f"{src}   ; in {name}[] called at {mfile.rsplit('/', 1)[-1]}:{mline}"
        if e.note:
            src = f"{src}   ; {e.note}"
        tnote = notes.get(e.addr) or macro_note([x[0] for x in loc.expansion], dis)
        if tnote:
            src = f"{src}   ; {tnote}"
        for what in isa().assigned_by_npkit(e.word):
            src = f"{src}   ; npkit encoding, no public source: {what}"
        out.append(f"  {where:<24} {e.addr:5d}  {e.word:010x}  {dis:<44} | {src}")
    out.append("")
    out.append("; symbols")
    out.append(f";   {'name':<32} {'kind':<7} {'value':<10} scope")
    for s in sorted(prog.symbols, key=lambda s: (s.kind, str(s.name))):
        val = f"0x{s.value:x}" if isinstance(s.value, int) and s.kind == "mem" else str(s.value)
        out.append(f";   {s.name:<32} {s.kind:<7} {val:<10} {s.scope}")
    if prog.init_regs:
        out.append("; initial registers")
        for reg, ctx, value in prog.init_regs:
            out.append(f";   {reg:<8} ctx {'all' if ctx is None else ctx}  0x{value:08x}")
    if prog.set_sigs:
        out.append("; signals set at start: " + ", ".join(f"s{n}" for n in prog.set_sigs))
    return "\n".join(out) + "\n"
