"""An application's tables, declared once (`tables.yaml`, docs/applications.md "Tables").

Each table names its memory (sram or scratch), its base address, the layout of an entry
(fields with widths in bits, packed big-endian into 32-bit words: a field starts in the
current word when it fits in what is left of it, else in the next) and its rows.  The
same declaration gives

- the memory initialisers of the linked image (`initial_memory`),
- a C header for the microcode, `<name>_table.h` (`header`): the table's base, entry size
  in words, row count and each field's word index, shift and mask,
- the reference model's rows (`model_rows`): a list of plain dicts a table, with an
  address as an int and a prefix as npkit.emulator.traffic.model.Prefix.

Field types: `uint` (an integer of `bits` bits, 1..32), `ipv4` (a dotted quad, 32 bits),
`prefix` ("a.b.c.d/len": two words, the address then its mask; the header names the mask
word `<FIELD>_NETMASK`).  Errors are TablesError `file:line: field: what is wrong`.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from npkit.asm.base.reading import load_yaml
from npkit.asm.base.schema import at, irange, validate
from npkit.emulator.traffic.model import Prefix

from .errors import LinkError
from .sysmap import SYS

_CNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
MAX_ROWS = 65536
MAX_FIELDS = 64
SCRATCH_BYTES = SYS.scratch_bytes
SRAM_SPAN = 1 << 32


class TablesError(LinkError):
    """A tables.yaml that cannot be used; the message says where."""


class FieldSpec(BaseModel):
    """One field of an entry."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["uint", "ipv4", "prefix"] = Field("uint", description="uint, ipv4 (dotted quad) or prefix (a.b.c.d/len)")
    bits: irange(1, 32) | None = Field(None, description="width in bits (uint: required; ipv4: 32; prefix: not given)")

    @model_validator(mode="after")
    def _width(self) -> FieldSpec:
        if self.type == "uint" and self.bits is None:
            raise at("bits", "a uint field needs its width: bits: 1..32")
        if self.type == "ipv4" and self.bits not in (None, 32):
            raise at("bits", "an ipv4 field is 32 bits")
        if self.type == "prefix" and self.bits is not None:
            raise at("bits", "a prefix field is two words (address, mask): give no bits")
        return self


class TableSpec(BaseModel):
    """One table: where it lives, the layout of an entry, its rows."""

    model_config = ConfigDict(extra="forbid")

    memory: Literal["sram", "scratch"] = Field(description="sram or scratch")
    base: irange(0, SRAM_SPAN - 4) = Field(description="byte address of the first entry (longword aligned)")
    fields: dict[str, FieldSpec] = Field(description="field name -> {type, bits}, in entry order")
    rows: list[dict[str, Any]] = Field(default_factory=list, description="each a mapping field -> value")

    @model_validator(mode="after")
    def _check(self) -> TableSpec:
        if self.base % 4:
            raise at("base", f"0x{self.base:x}: a table starts on a longword (4-byte) boundary")
        if not self.fields:
            raise at("fields", "a table has at least one field")
        if len(self.fields) > MAX_FIELDS:
            raise at("fields", f"at most {MAX_FIELDS} fields")
        if len(self.rows) > MAX_ROWS:
            raise at("rows", f"at most {MAX_ROWS} rows")
        for name in self.fields:
            if not _CNAME.fullmatch(name):
                raise at(("fields", name), f"{name!r}: a field name is a C identifier (1-32 letters, digits, _)")
        end = self.base + 4 * entry_words(self) * len(self.rows)
        limit = SCRATCH_BYTES if self.memory == "scratch" else ((self.base >> 30) + 1) << 30
        if end > limit:
            raise at("base", f"the table's {len(self.rows)} rows end at 0x{end:x}, past the end of "
                     f"{'scratch' if self.memory == 'scratch' else 'its SRAM channel'} (0x{limit:x})")  # fmt: skip
        for i, row in enumerate(self.rows):
            for name in row:
                if name not in self.fields:
                    raise at(("rows", i, name), f"{name!r}: not a field of the table ({', '.join(self.fields)})")
            for name, spec in self.fields.items():
                if name not in row:
                    raise at(("rows", i), f"row {i} lacks field {name}")
                _value(spec, row[name], ("rows", i, name))
        return self


def _value(spec: FieldSpec, v: Any, path: tuple[Any, ...]) -> int | Prefix:
    """A row's value of a field, checked: an int (uint, ipv4) or a Prefix."""
    if spec.type == "uint":
        if type(v) is not int or not 0 <= v < 1 << (spec.bits or 32):
            raise at(path, f"{v!r}: a {spec.bits}-bit unsigned integer (0..{(1 << (spec.bits or 32)) - 1})")
        return v
    if spec.type == "ipv4":
        try:
            if not isinstance(v, str):
                raise ValueError
            return int(ipaddress.IPv4Address(v))
        except ValueError:
            raise at(path, f"{v!r}: an IPv4 address as a dotted quad (10.0.0.1)") from None
    try:
        if not isinstance(v, str):
            raise ValueError("not a string")
        net = ipaddress.IPv4Network(v, strict=True)
    except ValueError as e:
        raise at(path, f"{v!r}: an IPv4 prefix a.b.c.d/len with no host bits set ({e})") from None
    return Prefix(int(net.network_address), net.prefixlen)


def entry_words(t: TableSpec) -> int:
    return max(w for w, _, _ in _placement(t).values()) + 1 if t.fields else 0


def _placement(t: TableSpec) -> dict[str, tuple[int, int, int]]:
    """Field (and prefix mask) name -> (word index, shift, width): packed big-endian,
    a field never straddling two words."""
    out: dict[str, tuple[int, int, int]] = {}
    word, used = 0, 0
    for name, spec in t.fields.items():
        parts = [(name, 32), (name + "_netmask", 32)] if spec.type == "prefix" else [(name, spec.bits or 32)]
        for part, bits in parts:
            if used + bits > 32:
                word, used = word + 1, 0
            out[part] = (word, 32 - used - bits, bits)
            used += bits
    return out


class TablesFile(RootModel[dict[str, TableSpec]]):
    """tables.yaml: table name -> table."""

    @model_validator(mode="after")
    def _names(self) -> TablesFile:
        for name in self.root:
            if not _CNAME.fullmatch(name):
                raise at(name, f"{name!r}: a table name is a C identifier (1-32 letters, digits, _)")
        spans = sorted((t.memory, t.base, t.base + 4 * entry_words(t) * len(t.rows), n) for n, t in self.root.items())
        for a, b in zip(spans, spans[1:], strict=False):
            if a[0] == b[0] and b[1] < a[2]:
                raise at((b[3], "base"), f"table {b[3]} overlaps table {a[3]} ({a[0]} 0x{a[1]:x}..0x{a[2] - 1:x})")
        return self


@dataclass(frozen=True)
class Table:
    """A compiled table."""

    name: str
    memory: str
    base: int
    entry_words: int
    placement: dict[str, tuple[int, int, int]]
    rows: list[dict[str, Any]]  # field -> int or Prefix
    source: str

    @property
    def end(self) -> int:
        return self.base + 4 * self.entry_words * len(self.rows)

    def data(self) -> bytes:
        out = bytearray()
        for row in self.rows:
            words = [0] * self.entry_words
            for name, v in row.items():
                parts = [(name, v.addr), (name + "_netmask", v.mask)] if isinstance(v, Prefix) else [(name, v)]
                for part, x in parts:
                    w, shift, bits = self.placement[part]
                    words[w] |= (x & ((1 << bits) - 1)) << shift
            out += struct.pack(f">{self.entry_words}I", *words)
        return bytes(out)

    def header(self) -> str:
        up = self.name.upper()
        lines = [f"// {self.name}_table.h -- generated by `npk link` from {self.source}; do not edit.",
                 f"#ifndef {up}_TABLE_H", f"#define {up}_TABLE_H",
                 f"#define {up}_BASE 0x{self.base:x}", f"#define {up}_ENTRY_WORDS {self.entry_words}",
                 f"#define {up}_ROWS {len(self.rows)}"]  # fmt: skip
        for part, (w, shift, bits) in self.placement.items():
            p = f"{up}_{part.upper()}"
            lines += [f"#define {p}_WORD {w}", f"#define {p}_SHIFT {shift}", f"#define {p}_MASK 0x{(1 << bits) - 1:x}"]
        return "\n".join([*lines, "#endif", ""])

    def record(self) -> dict[str, Any]:
        """What the image's metadata keeps (JSON): a prefix as [address, length]."""
        rows = [{k: [v.addr, v.length] if isinstance(v, Prefix) else v for k, v in r.items()} for r in self.rows]
        return {"memory": self.memory, "base": self.base, "entry_words": self.entry_words, "rows": rows,
                "prefix_fields": sorted(k for k, v in (self.rows[0] if self.rows else {}).items()
                                        if isinstance(v, Prefix))}  # fmt: skip


def load_tables(path: str | Path) -> list[Table]:
    """The tables of a tables.yaml, compiled (TablesError: located)."""
    located = load_yaml(path, error=TablesError, what="tables")
    model = validate(TablesFile, located.data, str(path), located=located, error=TablesError)
    out = []
    for name, t in model.root.items():
        rows = [{f: _value(spec, row[f], ()) for f, spec in t.fields.items()} for row in t.rows]
        out.append(Table(name, t.memory, t.base, entry_words(t), _placement(t), rows, str(path)))
    return out


def model_rows(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The model's tables from the image's metadata (`meta.app.tables`): rows as plain
    dicts, a prefix field's value a Prefix."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, t in (record or {}).items():
        pf = set(t.get("prefix_fields") or ())
        out[name] = [{k: Prefix(*v) if k in pf else v for k, v in r.items()} for r in t["rows"]]
    return out
