"""npkit images: assembled programs and linked systems, stored as ELF files.

One format for both: an Image holds one or more Programs; each Program is a
control-store image (40-bit words) with the MEs it loads on, its symbols, a
line table and initial state.  An assembled `.uc` is an Image with one Program
and no ME assignment (it loads on ME 0 unless told otherwise); the linker
produces an Image with one Program per block, each assigned to its MEs.

ELF layout (ELF32, little-endian, e_machine EM_NONE, so GNU readelf/objdump read it):
  .text.<n>   one per program: each 40-bit word stored as a little-endian uint64
  .npk.meta   UTF-8 JSON: format version, and per program everything but the words
              (its schema: npkit.asm.image_schema, checked on every read)
  .symtab/.strtab  program labels as ELF symbols (value = word address) for readelf -s
  .shstrtab
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from npkit.asm.base.reading import parse_json, read_bytes
from npkit.asm.base.writing import write_output
from npkit.asm.image_format import FORMAT_VERSION, IMAGE_LIMIT, MAX_MES, MAX_USTORE, WORD_LIMIT

_ELF_HDR = struct.Struct("<16sHHIIIIIHHHHHH")
_SHDR = struct.Struct("<IIIIIIIIII")
_SYM = struct.Struct("<IIIBBH")
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4


class ImageError(ValueError):
    """A malformed or unsupported image; the message says why."""


@dataclass
class Symbol:
    name: str
    kind: str  # label | reg | signal | xfer | const | mem
    value: int | str
    scope: str = ""  # a register's scope; a mem symbol's space
    size: int = 0  # mem: bytes allocated (.alloc_mem)


@dataclass
class LineEntry:
    addr: int
    file: str
    line: int
    macro: str = ""  # macro expansion chain, outermost first, "" if none


@dataclass
class Program:
    name: str
    words: list[int]
    ctx_mode: int = 8
    mes: list[int] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)
    lines: list[LineEntry] = field(default_factory=list)
    init_regs: list[tuple[str, int | None, int]] = field(default_factory=list)  # (reg, ctx|None=all, value)
    set_sigs: list[int] = field(default_factory=list)
    init_mem: list[tuple[str, int, bytes]] = field(default_factory=list)  # (space, byte address, data)
    source_files: list[str] = field(default_factory=list)
    ctx_enable: int = 0  # contexts the loader enables (bit n = context n); 0 = all of ctx_mode

    def labels(self) -> dict[int, str]:
        """Word address -> first label defined there."""
        out: dict[int, str] = {}
        for s in self.symbols:
            if s.kind == "label" and isinstance(s.value, int):
                out.setdefault(s.value, s.name)
        return out

    def line_at(self, addr: int) -> LineEntry | None:
        for entry in self.lines:
            if entry.addr == addr:
                return entry
        return None


@dataclass
class Image:
    programs: list[Program]
    config: str = ""  # chip config the image was linked for ("" = any)
    meta: dict[str, Any] = field(default_factory=dict)


class _Named(Protocol):
    name: str


_P = TypeVar("_P", bound=_Named)


def pick_program(programs: list[_P], name: str | None, origin: str) -> _P:
    """The program called `name` (the `--program NAME` of the commands); with no name, the
    only one: an image of several is an error that lists them."""
    names = ", ".join(p.name for p in programs)
    if name is None:
        if len(programs) > 1:
            raise ImageError(f"{origin} holds {len(programs)} programs; pick one with --program ({names})")
        return programs[0]
    for p in programs:
        if p.name == name:
            return p
    raise ImageError(f"no program '{name}' in {origin} (it holds: {names})")


# ---- writing ---------------------------------------------------------------------


def _program_meta(p: Program) -> dict[str, Any]:
    d = asdict(p)
    d.pop("words")
    d["init_mem"] = [[space, addr, data.hex()] for space, addr, data in p.init_mem]
    return d


def to_bytes(image: Image) -> bytes:
    validate_image(image)
    meta = {
        "format": FORMAT_VERSION,
        "config": image.config,
        "meta": image.meta,
        "programs": [_program_meta(p) for p in image.programs],
    }
    labels = [[(s.name, s.value) for s in p.symbols if s.kind == "label" and isinstance(s.value, int)]
              for p in image.programs]  # fmt: skip
    return elf_bytes([p.words for p in image.programs], meta, labels, [p.name for p in image.programs])


def elf_bytes(texts: list[list[int]], meta: dict[str, Any], labels: list[list[tuple[str, int]]],
              names: list[str]) -> bytes:  # fmt: skip
    """The ELF file of one `.text.N` section per word list and a `.npk.meta` of `meta`
    (as given: `read_image` checks it), with the labels as symbols."""
    shstr = bytearray(b"\0")
    strtab = bytearray(b"\0")

    def sh_name(name: str) -> int:
        off = len(shstr)
        shstr.extend(name.encode() + b"\0")
        return off

    sections: list[tuple[int, int, int, bytes, int, int, int]] = []  # name, type, flags, data, link, info, entsize
    text_index: list[int] = []
    for n, words in enumerate(texts):
        data = b"".join(struct.pack("<Q", w) for w in words)
        text_index.append(len(sections) + 1)
        sections.append((sh_name(f".text.{n}"), SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, data, 0, 0, 8))
    sections.append((sh_name(".npk.meta"), SHT_PROGBITS, 0, json.dumps(meta).encode(), 0, 0, 0))
    syms = bytearray(_SYM.pack(0, 0, 0, 0, 0, 0))
    for n, prog_labels in enumerate(labels):
        for label, value in prog_labels:
            name_off = len(strtab)
            strtab.extend(f"{names[n]}.{label}".encode() + b"\0")
            syms.extend(_SYM.pack(name_off, value, 1, 0x10 | 0, 0, text_index[n]))  # global NOTYPE
    symtab_idx = len(sections) + 1
    sections.append((sh_name(".symtab"), SHT_SYMTAB, 0, bytes(syms), symtab_idx + 1, 1, _SYM.size))
    sections.append((sh_name(".strtab"), SHT_STRTAB, 0, bytes(strtab), 0, 0, 0))
    shstr_name = sh_name(".shstrtab")
    sections.append((shstr_name, SHT_STRTAB, 0, bytes(shstr), 0, 0, 0))

    body = bytearray()
    offsets: list[int] = []
    pos = _ELF_HDR.size
    for _, _, _, data, _, _, _ in sections:
        pad = (-pos) % 8
        body.extend(b"\0" * pad)
        pos += pad
        offsets.append(pos)
        body.extend(data)
        pos += len(data)
    pad = (-pos) % 4
    body.extend(b"\0" * pad)
    shoff = pos + pad
    shdrs = bytearray(_SHDR.pack(*([0] * 10)))
    for (name, typ, flags, data, link, info, ent), off in zip(sections, offsets, strict=True):
        align = 8 if typ == SHT_PROGBITS else 4
        shdrs.extend(_SHDR.pack(name, typ, flags, 0, off, len(data), link, info, align, ent))
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + b"\0" * 8
    hdr = _ELF_HDR.pack(
        ident, 1, 0, 1, 0, 0, shoff, 0, _ELF_HDR.size, 0, 0, _SHDR.size, len(sections) + 1, len(sections)
    )
    return hdr + bytes(body) + bytes(shdrs)


def write_image(path: str | Path, image: Image) -> None:
    """Write atomically: a failed write never leaves a partial file behind (raises
    npkit.asm.base.writing.OutputError naming the path)."""
    write_output(path, to_bytes(image))


# ---- reading ---------------------------------------------------------------------


def from_bytes(data: bytes, origin: str = "<bytes>") -> Image:
    if len(data) < _ELF_HDR.size or data[:4] != b"\x7fELF":
        raise ImageError(f"{origin}: not an ELF file")
    if data[4] != 1 or data[5] != 1:
        raise ImageError(f"{origin}: not a 32-bit little-endian npkit image")
    fields = _ELF_HDR.unpack_from(data, 0)
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    if shentsize != _SHDR.size or shnum == 0 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise ImageError(f"{origin}: corrupt section header table")
    shdrs = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    for sh in shdrs:
        if sh[4] + sh[5] > len(data):
            raise ImageError(f"{origin}: a section runs past the end of the file")
    names_sh = shdrs[shstrndx]
    names = data[names_sh[4] : names_sh[4] + names_sh[5]]

    def name_of(off: int) -> str:
        end = names.find(b"\0", off)
        return names[off:end].decode(errors="replace") if end >= 0 else ""

    by_name = {name_of(sh[0]): sh for sh in shdrs[1:]}
    meta_sh = by_name.get(".npk.meta")
    if meta_sh is None:
        raise ImageError(f"{origin}: no .npk.meta section (not an npkit image)")
    where = f"{origin}: .npk.meta"
    try:
        meta_text = data[meta_sh[4] : meta_sh[4] + meta_sh[5]].decode("utf-8")
    except UnicodeDecodeError as e:
        raise ImageError(f"{where} is not UTF-8 text (byte {e.start})") from None
    meta = parse_json(meta_text, where, error=ImageError, what="the image's metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        raise ImageError(f"{origin}: unsupported image format version {meta.get('format') if isinstance(meta, dict) else '?'}")
    from npkit.asm.base.cache import checked

    config, progs = checked("image-meta/1", hashlib.sha256(data[meta_sh[4] : meta_sh[4] + meta_sh[5]]).hexdigest(),
                            lambda: _checked_meta(meta, where))  # fmt: skip
    programs: list[Program] = []
    for n, pm in enumerate(progs):
        sh = by_name.get(f".text.{n}")
        if sh is None:
            raise ImageError(f"{origin}: program {n} has no .text.{n} section")
        raw = data[sh[4] : sh[4] + sh[5]]
        if len(raw) % 8:
            raise ImageError(f"{origin}: .text.{n} size {len(raw)} is not a whole number of words")
        if len(raw) > 8 * MAX_USTORE:
            raise ImageError(f"{origin}: .text.{n} holds {len(raw) // 8} words (control store holds {MAX_USTORE})")
        programs.append(
            Program(
                name=pm["name"],
                words=[w for (w,) in struct.iter_unpack("<Q", raw)],
                ctx_mode=pm["ctx_mode"],
                mes=pm["mes"],
                symbols=[Symbol(**s) for s in pm["symbols"]],
                lines=[LineEntry(**e) for e in pm["lines"]],
                init_regs=pm["init_regs"],
                set_sigs=pm["set_sigs"],
                init_mem=pm["init_mem"],
                source_files=pm["source_files"],
                ctx_enable=pm["ctx_enable"],
            )
        )
    image = Image(programs, config, dict(meta.get("meta") or {}))  # as written, once checked
    validate_image(image, origin)
    return image


def _checked_meta(meta: dict[str, Any], where: str) -> tuple[str, list[dict[str, Any]]]:
    """The image's metadata checked against image_schema.ImageMeta, as plain data: its
    chip config and, per program, the fields of a Program but its words."""
    # the schema (and pydantic) only when the cache has no result for this metadata
    from npkit.asm.base.schema import validate

    from .image_schema import ImageMeta

    checked = validate(ImageMeta, meta, where, error=ImageError)
    return checked.config, [{
        "name": pm.name, "ctx_mode": pm.ctx_mode, "mes": list(pm.mes),
        "symbols": [dict(vars(s)) for s in pm.symbols],  # flat models: their fields, as model_dump gives
        "lines": [dict(vars(e)) for e in pm.lines],
        "init_regs": [(r, c, v) for r, c, v in pm.init_regs], "set_sigs": list(pm.set_sigs),
        "init_mem": [(s, a, d) for s, a, d in pm.init_mem], "source_files": list(pm.source_files),
        "ctx_enable": pm.ctx_enable,
    } for pm in checked.programs]  # fmt: skip


def read_image(path: str | Path) -> Image:
    """Read and check an image (its metadata against image_schema.ImageMeta)."""
    path = Path(path)
    return from_bytes(read_bytes(path, limit=IMAGE_LIMIT, error=ImageError, what="image"), str(path))


def validate_image(image: Image, origin: str = "image") -> None:
    """Reject what the emulator could not load, with the reason."""
    if not image.programs:
        raise ImageError(f"{origin}: no programs")
    claimed: dict[int, str] = {}
    for p in image.programs:
        if p.ctx_mode not in (4, 8):
            raise ImageError(f"{origin}: program '{p.name}' has context mode {p.ctx_mode} (must be 4 or 8)")
        if not p.words:
            raise ImageError(f"{origin}: program '{p.name}' is empty")
        if len(p.words) > MAX_USTORE:
            raise ImageError(f"{origin}: program '{p.name}' has {len(p.words)} words (control store holds {MAX_USTORE})")
        for i, w in enumerate(p.words):
            if not 0 <= w < WORD_LIMIT:
                raise ImageError(f"{origin}: program '{p.name}' word {i} is wider than 40 bits")
        for me in p.mes:
            if not 0 <= me < MAX_MES:
                raise ImageError(f"{origin}: program '{p.name}' assigned to ME {me} (out of range)")
            if me in claimed:
                raise ImageError(f"{origin}: ME {me} assigned to both '{claimed[me]}' and '{p.name}'")
            claimed[me] = p.name
        for sig in p.set_sigs:
            if not 1 <= sig <= 15:
                raise ImageError(f"{origin}: program '{p.name}' sets signal {sig} (must be 1-15)")
