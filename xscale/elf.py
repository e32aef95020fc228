"""Read a static 32-bit ARM ELF executable: loadable segments, entry, symbols.

Only what the XScale loader and the debugger need; the cross toolchain's
readelf/addr2line remain the reference for anything else.
"""

from __future__ import annotations

import bisect
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from npkit.asm.base.reading import MIB, read_bytes

ELF_LIMIT = 256 * MIB  # bytes of an ARM program (a static build is a few MB)

PT_LOAD, PT_PHDR, PT_TLS = 1, 6, 7
EM_ARM = 40
ET_EXEC = 2
STT_FUNC = 2


class ElfError(ValueError):
    """The file is not a static 32-bit little-endian ARM executable (message says why)."""


@dataclass(frozen=True)
class Segment:
    vaddr: int
    memsz: int
    data: bytes
    flags: int  # PF_X 1, PF_W 2, PF_R 4


@dataclass
class ArmElf:
    path: Path
    entry: int
    phoff: int
    phentsize: int
    phnum: int
    segments: list[Segment]
    phdr_vaddr: int
    symbols: list[tuple[int, int, str]] = field(default_factory=list)  # (addr, size, name), sorted

    @property
    def end(self) -> int:
        """First byte after the highest loaded segment (where brk starts)."""
        return max(s.vaddr + s.memsz for s in self.segments)

    @cached_property
    def _sym_addrs(self) -> list[int]:
        return [s[0] for s in self.symbols]

    def symbol(self, name: str) -> int | None:
        return next((a for a, _, n in self.symbols if n == name), None)

    def function_at(self, pc: int) -> str | None:
        """Name of the function containing pc (from .symtab), or None."""
        i = bisect.bisect_right(self._sym_addrs, pc) - 1
        if i < 0:
            return None
        addr, size, name = self.symbols[i]
        return name if pc < addr + max(size, 1) else None

    def line_at(self, pc: int) -> str | None:
        """file:line from the DWARF line table (arm-linux-gnueabi-addr2line), or None."""
        tool = shutil.which("arm-linux-gnueabi-addr2line")
        if not tool:
            return None
        out = subprocess.run([tool, "-e", str(self.path), hex(pc)], capture_output=True, text=True, timeout=10)
        text = out.stdout.strip()
        return None if not text or text.startswith("??") else text


def _unpack(fmt: str, raw: bytes, offset: int, path: Path, what: str) -> tuple[int, ...]:
    """struct.unpack_from that says which part of a short file is missing."""
    if offset < 0 or offset + struct.calcsize(fmt) > len(raw):
        raise ElfError(f"{path}: truncated ELF: {what} past the end of the file")
    return struct.unpack_from(fmt, raw, offset)


def _span(raw: bytes, offset: int, size: int, path: Path, what: str) -> bytes:
    """raw[offset:offset+size], or ElfError when the file ends before it does."""
    if offset + size > len(raw):
        raise ElfError(f"{path}: truncated ELF: {what} past the end of the file")
    return raw[offset : offset + size]


def read_elf(path: str | Path) -> ArmElf:
    p = Path(path)
    raw = read_bytes(p, limit=ELF_LIMIT, error=ElfError, what="ELF program")
    if raw[:4] != b"\x7fELF":
        raise ElfError(f"{p}: not an ELF file")
    if len(raw) < 6 or raw[4] != 1 or raw[5] != 1:
        raise ElfError(f"{p}: not a 32-bit little-endian ELF (build it for armv5te-linux-gnueabi)")
    e_type, e_machine = _unpack("<HH", raw, 16, p, "the ELF header")
    if e_machine != EM_ARM:
        if b".npk.meta" in raw:     # the section name in the string table: npkit's own image
            raise ElfError(f"{p}: a microengine image (npk asm / npk link), not an XScale program: "
                           "run it with `npk run`; build XScale programs with `npk xscale build`")  # fmt: skip
        raise ElfError(f"{p}: machine {e_machine} is not ARM")
    if e_type != ET_EXEC:
        raise ElfError(f"{p}: not a static executable (ELF type {e_type}; link with -static -fno-pie)")
    entry, phoff, shoff = _unpack("<III", raw, 24, p, "the ELF header")
    phentsize, phnum, shentsize, shnum, _shstrndx = _unpack("<HHHHH", raw, 42, p, "the ELF header")
    if phnum and phentsize < 32:
        raise ElfError(f"{p}: malformed ELF: program header size {phentsize} (32 expected)")
    segs: list[Segment] = []
    phdr_vaddr = 0
    for i in range(phnum):
        p_type, off, vaddr, _pa, filesz, memsz, flags, _al = _unpack("<8I", raw, phoff + i * phentsize, p,
                                                                     "program headers")  # fmt: skip
        if p_type == PT_LOAD:
            segs.append(Segment(vaddr, memsz, _span(raw, off, filesz, p, f"segment {i}"), flags))
            if off <= phoff < off + filesz:
                phdr_vaddr = vaddr + phoff - off
        elif p_type == PT_PHDR:
            phdr_vaddr = vaddr
        elif p_type == 3:  # PT_INTERP
            raise ElfError(f"{p}: dynamically linked (link with -static)")
    if not segs:
        raise ElfError(f"{p}: no loadable segment")
    elf = ArmElf(p, entry, phoff, phentsize, phnum, segs, phdr_vaddr)
    elf.symbols = _symbols(raw, shoff, shentsize, shnum, p)
    return elf


def _symbols(raw: bytes, shoff: int, shentsize: int, shnum: int, path: Path) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    if shnum and shentsize < 40:
        raise ElfError(f"{path}: malformed ELF: section header size {shentsize} (40 expected)")
    secs = [_unpack("<10I", raw, shoff + i * shentsize, path, "section headers") for i in range(shnum)]
    for sh in secs:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        if sh[6] >= len(secs):
            raise ElfError(f"{path}: malformed ELF: the symbol table's string table is section {sh[6]} of {len(secs)}")
        strtab = secs[sh[6]]
        strings = _span(raw, strtab[4], strtab[5], path, "the symbol names")
        table = _span(raw, sh[4], sh[5] // 16 * 16, path, "the symbol table")
        for name_off, value, size, info, _other, _shndx in struct.iter_unpack("<IIIBBH", table):
            if info & 0xF != STT_FUNC or not value:
                continue
            end = strings.find(b"\0", name_off)
            if end < 0:
                raise ElfError(f"{path}: malformed ELF: a symbol name runs past its string table")
            out.append((value & ~1, size, strings[name_off:end].decode(errors="replace")))
    out.sort()
    return out
