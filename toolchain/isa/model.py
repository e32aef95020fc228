"""Loads toolchain/isa/mev2.yaml once and gives typed access to it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ISA_FILE = Path(__file__).with_name("mev2.yaml")
WORD_MASK = (1 << 40) - 1


@dataclass(frozen=True)
class ClassDef:
    name: str
    mask: int
    value: int
    fields: dict[str, tuple[int, int]]

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
class Isa:
    raw: dict[str, Any]
    classes: dict[str, ClassDef]
    enums: dict[str, dict[str, Any]]
    local_csrs: dict[str, int]
    cap_csrs: dict[str, int]
    restricted_index_regs: dict[Any, str]
    mnemonic_aliases: dict[str, str]
    npkit_assigned: tuple[tuple[str, tuple[tuple[str, int], ...], str], ...]

    def classify(self, word: int) -> ClassDef | None:
        for cls in self.classes.values():
            if word & cls.mask == cls.value:
                return cls
        return None

    def canonical_mnemonic(self, mnemonic: str) -> str:
        """The instruction an alias stands for (`ffs` -> `find_bset`); others unchanged."""
        m = mnemonic.lower()
        return self.mnemonic_aliases.get(m, m)

    def assigned_by_npkit(self, word: int) -> list[str]:
        """What in `word` is npkit's own encoding (mev2.yaml npkit_assigned), if anything."""
        cls = self.classify(word)
        if cls is None:
            return []
        return [what for name, match, what in self.npkit_assigned
                if name == cls.name and all(cls.get(word, f) == v for f, v in match)]  # fmt: skip


@lru_cache(maxsize=1)
def isa() -> Isa:
    raw = yaml.safe_load(ISA_FILE.read_text())
    classes: dict[str, ClassDef] = {}
    for name, spec in raw["classes"].items():
        fields = {f: (int(r[0]), int(r[1])) for f, r in raw["fields"][name].items()}
        classes[name] = ClassDef(name, int(spec["mask"]), int(spec["value"]), fields)
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
    )
