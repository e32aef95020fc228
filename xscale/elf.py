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


def read_elf(path: str | Path) -> ArmElf:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ElfError(f"{p}: {e.strerror}") from None
    if raw[:4] != b"\x7fELF":
        raise ElfError(f"{p}: not an ELF file")
    if raw[4] != 1 or raw[5] != 1:
        raise ElfError(f"{p}: not a 32-bit little-endian ELF (build it for armv5te-linux-gnueabi)")
    e_type, e_machine = struct.unpack_from("<HH", raw, 16)
    if e_machine != EM_ARM:
        raise ElfError(f"{p}: machine {e_machine} is not ARM")
    if e_type != ET_EXEC:
        raise ElfError(f"{p}: not a static executable (ELF type {e_type}; link with -static -fno-pie)")
    entry, phoff, shoff = struct.unpack_from("<III", raw, 24)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", raw, 42)
    segs: list[Segment] = []
    phdr_vaddr = 0
    for i in range(phnum):
        p_type, off, vaddr, _pa, filesz, memsz, flags, _al = struct.unpack_from("<8I", raw, phoff + i * phentsize)
        if p_type == PT_LOAD:
            segs.append(Segment(vaddr, memsz, raw[off : off + filesz], flags))
            if off <= phoff < off + filesz:
                phdr_vaddr = vaddr + phoff - off
        elif p_type == PT_PHDR:
            phdr_vaddr = vaddr
        elif p_type == 3:  # PT_INTERP
            raise ElfError(f"{p}: dynamically linked (link with -static)")
    if not segs:
        raise ElfError(f"{p}: no loadable segment")
    elf = ArmElf(p, entry, phoff, phentsize, phnum, segs, phdr_vaddr)
    elf.symbols = _symbols(raw, shoff, shentsize, shnum)
    return elf


def _symbols(raw: bytes, shoff: int, shentsize: int, shnum: int) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    secs = [struct.unpack_from("<10I", raw, shoff + i * shentsize) for i in range(shnum)]
    for sh in secs:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = secs[sh[6]]
        s_off = strtab[4]
        table = raw[sh[4] : sh[4] + sh[5] // 16 * 16]
        for name_off, value, size, info, _other, _shndx in struct.iter_unpack("<IIIBBH", table):
            if info & 0xF != STT_FUNC or not value:
                continue
            end = raw.index(b"\0", s_off + name_off)
            out.append((value & ~1, size, raw[s_off + name_off : end].decode(errors="replace")))
    out.sort()
    return out
