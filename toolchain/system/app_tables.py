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

A table of `memory: tcam` (docs/tcam.md) has no base: its rows go to TCAM entries
`first_entry`, +1, ... (position is priority); its `fields` are the key (a value, `*` /
`any` for a wildcard, `{value, mask}`, or a prefix whose length gives the mask) and its
`result` fields are packed into the entry's 64-bit result.

Field types: `uint` (an integer of `bits` bits, 1..32), `ipv4` (a dotted quad, 32 bits),
`prefix` ("a.b.c.d/len": two words, the address then its mask; the header names the mask
word `<FIELD>_NETMASK`).  Errors are TablesError `file:line: field: what is wrong`.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from npkit.asm.base.reading import load_yaml
from npkit.asm.base.schema import at, irange, validate
from npkit.emulator.traffic.model import Prefix, Ternary

from .errors import LinkError
from .sysmap import SYS

_CNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
MAX_ROWS = 65536
MAX_FIELDS = 64
SCRATCH_BYTES = SYS.scratch_bytes
SRAM_SPAN = 1 << 32
TCAM_MAX_ENTRIES = 8192  # the most a chip config's tcam: block has (docs/tcam.md)
TCAM_KEY_WORDS = 9
WILDCARDS = ("*", "any")


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

    memory: Literal["sram", "scratch", "tcam"] = Field(description="sram, scratch or tcam")
    base: irange(0, SRAM_SPAN - 4) | None = Field(
        None, description="byte address of the first entry (longword aligned); not for tcam")
    first_entry: irange(0, TCAM_MAX_ENTRIES - 1) | None = Field(None, description="tcam: the entry of row 0 (default 0)")
    fields: dict[str, FieldSpec] = Field(description="field name -> {type, bits}, in entry order (tcam: the key)")
    result: dict[str, FieldSpec] | None = Field(None, description="tcam: result field name -> {type, bits}")
    rows: list[dict[str, Any]] = Field(default_factory=list, description="each a mapping field -> value")

    @model_validator(mode="after")
    def _check(self) -> TableSpec:
        if self.memory == "tcam":
            return _check_tcam(self)
        if self.base is None:
            raise at("base", f"a {self.memory} table needs its base address")
        for key in ("first_entry", "result"):
            if getattr(self, key) is not None:
                raise at(key, f"only a tcam table has {key}")
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


def _check_tcam(t: TableSpec) -> TableSpec:
    """A tcam table: no base; the key within 9 longwords, the result within 64 bits, the
    rows within the entries, every row giving every key and result field."""
    if t.base is not None:
        raise at("base", "a tcam table has no base: its rows go to TCAM entries first_entry, +1, ...")
    if not t.fields:
        raise at("fields", "a tcam table has at least one key field")
    result = t.result or {}
    for part, specs in (("fields", t.fields), ("result", result)):
        for name in specs:
            if not _CNAME.fullmatch(name):
                raise at((part, name), f"{name!r}: a field name is a C identifier (1-32 letters, digits, _)")
    for name in result:
        if name in t.fields:
            raise at(("result", name), f"{name!r} is a key field too: a row names each field once")
    kw = max(w for w, _, _ in _placement(t.fields, tcam=True).values()) + 1
    if kw > TCAM_KEY_WORDS:
        raise at("fields", f"the key takes {kw} longwords as packed: a TCAM key is at most {TCAM_KEY_WORDS} (288 bits)")
    if result and max(w for w, _, _ in _placement(result).values()) > 1:
        raise at("result", "the result fields take more than the 64-bit result (2 longwords as packed)")
    first = t.first_entry or 0
    if first + len(t.rows) > TCAM_MAX_ENTRIES:
        raise at("rows", f"{len(t.rows)} rows from entry {first} pass the TCAM's {TCAM_MAX_ENTRIES} entries at most")
    for i, row in enumerate(t.rows):
        for name in row:
            if name not in t.fields and name not in result:
                raise at(("rows", i, name), f"{name!r}: not a key or result field of the table "
                                            f"({', '.join([*t.fields, *result])})")  # fmt: skip
        for name in [*t.fields, *result]:
            if name not in row:
                raise at(("rows", i), f"row {i} lacks field {name}" + (" (\"*\": any value)" if name in t.fields else ""))
        for name, spec in t.fields.items():
            _ternary(spec, row[name], ("rows", i, name))
        for name, spec in result.items():
            _value(spec, row[name], ("rows", i, name))
    return t


def _ternary(spec: FieldSpec, v: Any, path: tuple[Any, ...]) -> Ternary | Prefix:
    """A tcam row's key field: a value, `*` / `any`, {value, mask}, or a prefix."""
    bits = 32 if spec.type != "uint" else spec.bits or 32
    full = (1 << bits) - 1
    if isinstance(v, str) and v.strip() in WILDCARDS:
        return Prefix(0, 0) if spec.type == "prefix" else Ternary(0, 0, bits)
    if spec.type == "prefix":
        p = _value(spec, v, path)
        assert isinstance(p, Prefix)
        return p
    if isinstance(v, dict):
        if set(v) != {"value", "mask"}:
            raise at(path, f"{v!r}: a ternary value is {{value: V, mask: M}} (mask bit 1 = compare)")
        value, mask = (_value(spec, v[k], (*path, k)) for k in ("value", "mask"))
        assert isinstance(value, int) and isinstance(mask, int)
        if value & ~mask:
            raise at((*path, "value"), f"0x{value:x} has bits the mask 0x{mask:x} does not compare")
        return Ternary(value, mask, bits)
    value = _value(spec, v, path)
    assert isinstance(value, int)
    return Ternary(value, full, bits)


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
    return max(w for w, _, _ in _placement(t.fields, t.memory == "tcam").values()) + 1 if t.fields else 0


def _span(t: TableSpec) -> tuple[str, int, int]:
    """(memory, start, end) of a table: bytes of SRAM or scratch, entries of the TCAM."""
    if t.memory == "tcam":
        first = t.first_entry or 0
        return "tcam", first, first + len(t.rows)
    assert t.base is not None
    return t.memory, t.base, t.base + 4 * entry_words(t) * len(t.rows)


def _placement(fields: dict[str, FieldSpec], tcam: bool = False) -> dict[str, tuple[int, int, int]]:
    """Field (and prefix mask) name -> (word index, shift, width): packed big-endian,
    a field never straddling two words.  A tcam key's prefix is one word (its mask is
    the entry's)."""
    out: dict[str, tuple[int, int, int]] = {}
    word, used = 0, 0
    for name, spec in fields.items():
        two = spec.type == "prefix" and not tcam
        parts = [(name, 32), (name + "_netmask", 32)] if two else [(name, 32 if spec.type != "uint" else spec.bits or 32)]
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
        spans = sorted((*_span(t), n) for n, t in self.root.items())
        for a, b in zip(spans, spans[1:], strict=False):
            if a[0] == b[0] and b[1] < a[2]:
                if a[0] == "tcam":
                    raise at((b[3], "first_entry"), f"table {b[3]} overlaps table {a[3]} (TCAM entries {a[1]}..{a[2] - 1})")
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
    rows: list[dict[str, Any]]  # field -> int or Prefix (tcam key fields: Ternary or Prefix)
    source: str
    first_entry: int = 0  # tcam: the entry of row 0
    result_placement: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # tcam
    line: int = 0  # of its name in the file

    @property
    def end(self) -> int:
        return self.base + 4 * self.entry_words * len(self.rows)

    @property
    def is_tcam(self) -> bool:
        return self.memory == "tcam"

    def where(self) -> str:
        return f"{self.source}:{self.line}: {self.name}"

    def key_bits_used(self) -> int:
        """The key's bits from its MSB to the last bit a key field uses."""
        return max(32 * w + 32 - shift for w, shift, _ in self.placement.values())

    def key_of(self, values: dict[str, int]) -> list[int]:
        """A tcam table's key longwords for field values (what microcode writes into its key
        slot; chip.tcam_lookup takes them).  A field not given is 0."""
        words = [0] * self.entry_words
        for name, (w, shift, bits) in self.placement.items():
            words[w] |= (int(values.get(name, 0)) & ((1 << bits) - 1)) << shift
        return words

    def tcam_entries(self) -> bytes:
        """The rows as TCAM entries (128 bytes each, valid), from entry first_entry."""
        from npkit.emulator.tcam import entry_bytes

        out = bytearray()
        for row in self.rows:
            key, mask = [0] * self.entry_words, [0] * self.entry_words
            result = [0, 0]
            for name, v in row.items():
                if name in self.placement:
                    w, shift, bits = self.placement[name]
                    value, m = (v.addr, v.mask) if isinstance(v, Prefix) else (v.value, v.mask)
                    key[w] |= (value & ((1 << bits) - 1)) << shift
                    mask[w] |= (m & ((1 << bits) - 1)) << shift
                else:
                    w, shift, bits = self.result_placement[name]
                    result[w] |= (v & ((1 << bits) - 1)) << shift
            out += entry_bytes(key, mask, result[0] << 32 | result[1])
        return bytes(out)

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
        if self.is_tcam:
            return self._tcam_header()
        up = self.name.upper()
        lines = [f"// {self.name}_table.h -- generated by `npk link` from {self.source}; do not edit.",
                 f"#ifndef {up}_TABLE_H", f"#define {up}_TABLE_H",
                 f"#define {up}_BASE 0x{self.base:x}", f"#define {up}_ENTRY_WORDS {self.entry_words}",
                 f"#define {up}_ROWS {len(self.rows)}"]  # fmt: skip
        for part, (w, shift, bits) in self.placement.items():
            p = f"{up}_{part.upper()}"
            lines += [f"#define {p}_WORD {w}", f"#define {p}_SHIFT {shift}", f"#define {p}_MASK 0x{(1 << bits) - 1:x}"]
        return "\n".join([*lines, "#endif", ""])

    def _tcam_header(self) -> str:
        up = self.name.upper()
        lines = [f"// {self.name}_table.h -- generated by `npk link` from {self.source}; do not edit.",
                 "// A TCAM table (docs/tcam.md): key fields _WORD/_SHIFT/_MASK in the key's longwords,",
                 "// result fields _RES_WORD (0: result bits 63:32, the lookup's 3rd longword)/_RES_SHIFT/_RES_MASK.",
                 f"#ifndef {up}_TABLE_H", f"#define {up}_TABLE_H",
                 f"#define {up}_FIRST_ENTRY {self.first_entry}", f"#define {up}_ROWS {len(self.rows)}",
                 f"#define {up}_KEY_LW {self.entry_words}"]  # fmt: skip
        for part, (w, shift, bits) in self.placement.items():
            p = f"{up}_{part.upper()}"
            lines += [f"#define {p}_WORD {w}", f"#define {p}_SHIFT {shift}", f"#define {p}_MASK 0x{(1 << bits) - 1:x}"]
        for part, (w, shift, bits) in self.result_placement.items():
            p = f"{up}_{part.upper()}"
            lines += [f"#define {p}_RES_WORD {w}", f"#define {p}_RES_SHIFT {shift}",
                      f"#define {p}_RES_MASK 0x{(1 << bits) - 1:x}"]  # fmt: skip
        return "\n".join([*lines, "#endif", ""])

    def record(self) -> dict[str, Any]:
        """What the image's metadata keeps (JSON): a prefix as [address, length]."""
        if self.is_tcam:
            return self._tcam_record()
        rows = [{k: [v.addr, v.length] if isinstance(v, Prefix) else v for k, v in r.items()} for r in self.rows]
        return {"memory": self.memory, "base": self.base, "entry_words": self.entry_words, "rows": rows,
                "prefix_fields": sorted(k for k, v in (self.rows[0] if self.rows else {}).items()
                                        if isinstance(v, Prefix))}  # fmt: skip


    def _tcam_record(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            rows.append({k: [v.addr, v.length] if isinstance(v, Prefix) else [v.value, v.mask, v.bits]
                         if isinstance(v, Ternary) else v for k, v in row.items()})  # fmt: skip
        kinds = self.rows[0].items() if self.rows else ()
        return {"memory": "tcam", "first_entry": self.first_entry, "key_words": self.entry_words, "rows": rows,
                "prefix_fields": sorted(k for k, v in kinds if isinstance(v, Prefix)),
                "key_fields": list(self.placement), "result_fields": list(self.result_placement)}  # fmt: skip


def load_tables(path: str | Path) -> list[Table]:
    """The tables of a tables.yaml, compiled (TablesError: located)."""
    located = load_yaml(path, error=TablesError, what="tables")
    model = validate(TablesFile, located.data, str(path), located=located, error=TablesError)
    out = []
    for name, t in model.root.items():
        line = located.lines.get((name,), 0)
        if t.memory == "tcam":
            result = t.result or {}
            rows = [{**{f: _ternary(spec, row[f], ()) for f, spec in t.fields.items()},
                     **{f: _value(spec, row[f], ()) for f, spec in result.items()}} for row in t.rows]  # fmt: skip
            out.append(Table(name, "tcam", 0, entry_words(t), _placement(t.fields, tcam=True), rows, str(path),
                             first_entry=t.first_entry or 0, result_placement=_placement(result), line=line))  # fmt: skip
            continue
        rows = [{f: _value(spec, row[f], ()) for f, spec in t.fields.items()} for row in t.rows]
        assert t.base is not None
        out.append(Table(name, t.memory, t.base, entry_words(t), _placement(t.fields), rows, str(path), line=line))
    return out


def model_rows(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The model's tables from the image's metadata (`meta.app.tables`): rows as plain
    dicts, a prefix field's value a Prefix; a tcam table's key fields Ternary (or Prefix),
    its result fields ints, and `_entry` its TCAM entry (npkit.emulator.traffic.model.tcam_match)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, t in (record or {}).items():
        pf = set(t.get("prefix_fields") or ())
        if t.get("memory") == "tcam":
            keys, first = set(t.get("key_fields") or ()), int(t.get("first_entry", 0))
            out[name] = [{**{k: Prefix(*v) if k in pf else Ternary(*v) if k in keys else v for k, v in r.items()},
                          "_entry": first + i} for i, r in enumerate(t["rows"])]  # fmt: skip
            continue
        out[name] = [{k: Prefix(*v) if k in pf else v for k, v in r.items()} for r in t["rows"]]
    return out
