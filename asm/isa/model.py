"""Loads asm/isa/mev2.yaml once and gives typed access to it.

`isa()` is the description every consumer uses.  `load(path)` reads another file (a
modified description in a test); `use(description)` makes it the one `isa()` returns
for a while, so that encoder, decoder and roles work from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from npkit.asm.base.yaml_data import load_data

ISA_FILE = Path(__file__).with_name("mev2.yaml")
WORD_MASK = (1 << 40) - 1

DIRS = ("none", "push", "pull", "both")
WORD_RULES = ("count", "one", "quadwords", "keys")
SUB_RULES = ("exact", "opt19", "any")


class IsaError(ValueError):
    """The description itself is inconsistent (a bad edit of mev2.yaml)."""


@dataclass(frozen=True)
class ClassDef:
    name: str
    mask: int
    value: int
    fields: dict[str, tuple[int, int]]
    decoder: str = ""

    def get(self, word: int, field: str) -> int:
        hi, lo = self.fields[field]
        return (word >> lo) & ((1 << (hi - lo + 1)) - 1)

    def put(self, word: int, field: str, value: int) -> int:
        hi, lo = self.fields[field]
        width = hi - lo + 1
        if value < 0 or value >= (1 << width):
            raise ValueError(f"value {value} does not fit field {self.name}.{field} ({width} bits)")
        mask = ((1 << width) - 1) << lo
        return (word & ~mask) | (value << lo)


@dataclass(frozen=True)
class MemCmd:
    """One memory/unit command (mev2.yaml `units`)."""

    unit: str
    name: str
    cmd: int
    sub: int = 0
    count: bool = False
    dir: str = "none"  # none | push | pull | both
    words: str = "count"  # count | one | quadwords | keys
    key_words: int = 0
    no_xfer: bool = False
    xfer_optional: bool = False  # no_xfer: optional
    no_sig: bool = False
    split: bool = False  # address: split
    ordered: bool = False
    msf_buffer: bool = False
    descriptor: str = ""  # ring | queue: what the address names
    sem: str = ""

    @property
    def push(self) -> bool:
        return self.dir in ("push", "both")

    @property
    def pull(self) -> bool:
        return self.dir in ("pull", "both")

    @property
    def words_per_count(self) -> int:
        """Longwords per unit of the count operand (DRAM counts 64-bit quadwords)."""
        return 2 if self.words == "quadwords" else 1

    @property
    def xfer_dir(self) -> str:
        """The transfer operand as the allocator sees it: read (the unit fills it), write
        (the unit reads it) or both.  A command that moves nothing through it is allocated
        like a write."""
        return {"push": "read", "both": "both"}.get(self.dir, "write")


@dataclass(frozen=True)
class Unit:
    """A shared unit and its command table (mev2.yaml `units`)."""

    name: str
    cls: str
    sub_rule: str
    xfer: str  # sram | dram: the transfer registers its commands name
    signal_pair: bool
    commands: dict[str, MemCmd]

    def lookup(self, cmd: int, sub: int) -> tuple[MemCmd, bool] | None:
        """The command a (cmd, sub) field pair names, and whether bit 19 was read as
        ignore_data_error (opt19); None: no such command in this unit."""
        for c in self.commands.values():
            if c.cmd == cmd and c.sub == sub:
                return c, False
        if self.sub_rule in ("opt19", "any") and sub & 2:
            for c in self.commands.values():
                if c.cmd == cmd and c.sub == (sub & 1):
                    return c, True
        if self.sub_rule == "any":
            for c in self.commands.values():
                if c.cmd == cmd:
                    return c, False
        return None


@dataclass(frozen=True)
class OperandEntry:
    """One line of mev2.yaml `operand_fields`."""

    mask: int
    match: int
    kind: str  # gpr | abs | xfer | dxfer | nn | imm | index
    name: str = ""
    file: str = ""
    via: str = ""
    step: int = 0
    offset: bool = False
    source_only: bool = False
    none: int | None = None

    def covers(self, num: int) -> bool:
        return num & self.mask == self.match

    def number(self, num: int) -> int:
        return num & ~self.mask


@dataclass(frozen=True)
class Form:
    when: dict[str, Any]
    operands: tuple[str, ...]


@dataclass(frozen=True)
class Mnemonic:
    """One instruction the assembler accepts (mev2.yaml `mnemonics`)."""

    name: str
    cls: str
    encoder: str
    operands: tuple[str, ...] = ()
    forms: tuple[Form, ...] = ()
    keywords: tuple[str, ...] = ()
    repeat: str = ""
    facts: dict[str, Any] = field(default_factory=dict)  # alu_op, cond, unit, ...

    def fact(self, key: str, default: Any = None) -> Any:
        return self.facts.get(key, default)


@dataclass(eq=False)
class Isa:
    raw: dict[str, Any]
    classes: dict[str, ClassDef]
    enums: dict[str, dict[str, Any]]
    local_csrs: dict[str, int]
    cap_csrs: dict[str, int]
    restricted_index_regs: dict[Any, str]
    mnemonic_aliases: dict[str, str]
    npkit_assigned: tuple[tuple[str, tuple[tuple[str, int], ...], str], ...]
    units: dict[str, Unit]
    mnemonics: dict[str, Mnemonic]
    operand_fields: dict[str, tuple[OperandEntry, ...]]
    roles: dict[str, dict[str, Any]]

    def classify(self, word: int) -> ClassDef | None:
        for cls in self.classes.values():
            if word & cls.mask == cls.value:
                return cls
        return None

    def canonical_mnemonic(self, mnemonic: str) -> str:
        """The instruction an alias stands for (`ffs` -> `find_bset`); others unchanged."""
        m = mnemonic.lower()
        return self.mnemonic_aliases.get(m, m)

    def mnemonic(self, mnemonic: str) -> Mnemonic | None:
        return self.mnemonics.get(self.canonical_mnemonic(mnemonic))

    def assigned_by_npkit(self, word: int) -> list[str]:
        """What in `word` is npkit's own encoding (mev2.yaml npkit_assigned), if anything."""
        cls = self.classify(word)
        if cls is None:
            return []
        return [what for name, match, what in self.npkit_assigned
                if name == cls.name and all(cls.get(word, f) == v for f, v in match)]  # fmt: skip

    @cached_property
    def unit_of_class(self) -> dict[str, Unit]:
        """Instruction class -> the unit whose commands it issues."""
        return {u.cls: u for u in self.units.values()}

    def command(self, unit: str, name: str) -> MemCmd | None:
        u = self.units.get(unit)
        return u.commands.get(name.lower()) if u is not None else None

    def unit_of_mnemonic(self, mnemonic: str) -> Unit | None:
        """The unit a memory/unit instruction issues to (sram[...], hash_48[...]), else None."""
        m = self.mnemonic(mnemonic)
        unit = m.fact("unit") if m is not None else None
        return self.units.get(str(unit)) if unit is not None else None

    def memory_command(self, mnemonic: str, args: list[str] | tuple[str, ...]) -> MemCmd | None:
        """The command a memory/unit instruction names (operand 0, or the mnemonic itself
        for the hash unit's), None when it is not one."""
        m = self.mnemonic(mnemonic)
        unit = self.unit_of_mnemonic(mnemonic)
        if m is None or unit is None:
            return None
        name = m.name if m.fact("command") == "mnemonic" else (args[0] if args else "")
        return unit.commands.get(name.lower())

    def commands_with_cmd(self, unit: str, cmd: int) -> list[MemCmd]:
        """The commands of `unit` with this cmd field (any sub): what a history record
        (which keeps cmd only) can be."""
        u = self.units.get(unit)
        return [c for c in u.commands.values() if c.cmd == cmd] if u is not None else []

    @cached_property
    def alu_op_mnemonics(self) -> dict[str, Mnemonic]:
        """ALU operation name -> the mnemonic that writes it as its own instruction
        (pop_count1, cam_lookup, crc_be, ...); the others are written alu[d, a, OP, b]."""
        out: dict[str, Mnemonic] = {}
        for m in self.mnemonics.values():
            op = m.fact("alu_op")
            if m.cls == "alu" and op is not None:
                out.setdefault(str(op), m)
        return out

    @cached_property
    def branch_mnemonics(self) -> dict[str, Mnemonic]:
        """Branch condition name -> the first mnemonic that tests it (the decoder's choice)."""
        out: dict[str, Mnemonic] = {}
        for m in self.mnemonics.values():
            if m.encoder == "branch":
                out.setdefault(str(m.fact("cond")), m)
        return out


def _flag(spec: dict[str, Any], key: str) -> bool:
    return bool(spec.get(key, False))


def _unit(name: str, spec: dict[str, Any]) -> Unit:
    rule = str(spec.get("sub", "exact"))
    if rule not in SUB_RULES:
        raise IsaError(f"unit {name}: sub rule '{rule}' is not one of {SUB_RULES}")
    cmds: dict[str, MemCmd] = {}
    for cname, c in (spec.get("commands") or {}).items():
        d, words = str(c.get("dir", "none")), str(c.get("words", "count"))
        if d not in DIRS or words not in WORD_RULES:
            raise IsaError(f"{name}[{cname}]: dir must be one of {DIRS}, words one of {WORD_RULES}")
        if words == "keys" and not c.get("key_words"):
            raise IsaError(f"{name}[{cname}]: words: keys needs key_words")
        if c.get("address", "sum") not in ("sum", "split"):
            raise IsaError(f"{name}[{cname}]: address must be sum or split")
        cmds[str(cname)] = MemCmd(
            unit=name, name=str(cname), cmd=int(c["cmd"]), sub=int(c.get("sub", 0)), count=_flag(c, "count"),
            dir=d, words=words, key_words=int(c.get("key_words", 0)), no_xfer=_flag(c, "no_xfer"),
            xfer_optional=c.get("no_xfer") == "optional", no_sig=_flag(c, "no_sig"), split=c.get("address") == "split", ordered=_flag(c, "ordered"),
            msf_buffer=_flag(c, "msf_buffer"), descriptor=str(c.get("descriptor", "")), sem=str(c.get("sem", cname)),
        )  # fmt: skip
    return Unit(name, str(spec["class"]), rule, str(spec.get("xfer", "sram")), _flag(spec, "signal_pair"), cmds)


_MNEMONIC_KEYS = ("class", "encoder", "operands", "forms", "keywords", "repeat")


def _mnemonic(name: str, spec: dict[str, Any], roles: dict[str, Any]) -> Mnemonic:
    forms = tuple(Form(dict(f.get("when") or {}), tuple(f["operands"])) for f in spec.get("forms") or [])
    for ops in [spec.get("operands") or [], *(f.operands for f in forms), [spec["repeat"]] if spec.get("repeat") else []]:
        for r in ops:
            if r not in roles:
                raise IsaError(f"mnemonic {name}: unknown operand role '{r}' (mev2.yaml roles)")
    return Mnemonic(
        name=name, cls=str(spec["class"]), encoder=str(spec["encoder"]), operands=tuple(spec.get("operands") or ()),
        forms=forms, keywords=tuple(str(k).lower() for k in spec.get("keywords") or ()), repeat=str(spec.get("repeat", "")),
        facts={k: v for k, v in spec.items() if k not in _MNEMONIC_KEYS},
    )  # fmt: skip


def _operand_entry(spec: dict[str, Any]) -> OperandEntry:
    return OperandEntry(
        mask=int(spec["mask"]), match=int(spec["match"]), kind=str(spec["kind"]), name=str(spec.get("name", "")),
        file=str(spec.get("file", "")), via=str(spec.get("via", "")), step=int(spec.get("step", 0)),
        offset=_flag(spec, "offset"), source_only=_flag(spec, "source_only"),
        none=int(spec["none"]) if "none" in spec else None,
    )  # fmt: skip


def from_dict(raw: dict[str, Any]) -> Isa:
    """Build the description from mev2.yaml's data (checked for consistency)."""
    classes: dict[str, ClassDef] = {}
    for name, spec in raw["classes"].items():
        fields = {f: (int(r[0]), int(r[1])) for f, r in raw["fields"][name].items()}
        classes[name] = ClassDef(name, int(spec["mask"]), int(spec["value"]), fields, str(spec.get("decoder", name)))
    roles = {str(k): dict(v) for k, v in (raw.get("roles") or {}).items()}
    units = {str(n): _unit(str(n), s) for n, s in (raw.get("units") or {}).items()}
    for u in units.values():
        if u.cls not in classes:
            raise IsaError(f"unit {u.name}: no instruction class '{u.cls}'")
    mnemonics = {str(n).lower(): _mnemonic(str(n).lower(), s, roles) for n, s in (raw.get("mnemonics") or {}).items()}
    for m in mnemonics.values():
        if m.cls not in classes:
            raise IsaError(f"mnemonic {m.name}: no instruction class '{m.cls}'")
    return Isa(
        raw=raw,
        classes=classes,
        enums=raw["enums"],
        local_csrs={k.upper(): int(v) for k, v in raw["local_csrs"].items()},
        cap_csrs={k.upper(): int(v) for k, v in raw["cap_csrs"].items()},
        restricted_index_regs=raw["restricted_index_regs"],
        mnemonic_aliases={str(k).lower(): str(v).lower() for k, v in (raw.get("mnemonic_aliases") or {}).items()},
        npkit_assigned=tuple(
            (str(e["class"]), tuple((str(f), int(v)) for f, v in e["match"].items()), str(e["what"]))
            for e in raw.get("npkit_assigned") or []
        ),
        units=units,
        mnemonics=mnemonics,
        operand_fields={k: tuple(_operand_entry(e) for e in v) for k, v in raw["operand_fields"].items()},
        roles=roles,
    )


def load(path: str | Path) -> Isa:
    """Read a description file (not cached, not made current: see `use`)."""
    return from_dict(load_data(Path(path).read_text()))  # libyaml: 10 ms instead of 70


@lru_cache(maxsize=1)
def _default() -> Isa:
    return load(ISA_FILE)


_current: list[Isa] = []


def isa() -> Isa:
    """The instruction set in use: mev2.yaml, or the one `use` installed."""
    return _current[-1] if _current else _default()


@contextmanager
def use(description: Isa) -> Iterator[Isa]:
    """Make `description` the instruction set `isa()` returns inside the block."""
    _current.append(description)
    try:
        yield description
    finally:
        _current.pop()
