"""Drop and exception reasons, loaded from microcode/reasons.yaml.

Why a loader rather than constants: the YAML is the single source of truth shared with
the microcode (which #includes the header `c_header()` writes) and the XScale daemon;
Python reads it so a code can never mean one thing here and another on the chip.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from npkit.asm.base.reading import Located, load_yaml, parse_yaml

REASONS_PATH = Path(__file__).resolve().parents[2] / "microcode" / "reasons.yaml"

Kind = Literal["drop", "exception"]


class ReasonError(ValueError):
    """reasons.yaml is inconsistent, or a reason name/code is unknown."""


@dataclass(frozen=True)
class Reason:
    name: str
    kind: Kind
    code: int
    step: int | None  # position in the oracle's rule order; None for resource drops
    rule: str
    ref: str = ""
    icmp: str = ""
    note: str = ""
    control: str = ""  # an application's exception: what the control daemon does (consume, forward)

    @property
    def predicted(self) -> bool:
        """True if the oracle can produce this reason (it depends on the packet alone)."""
        return self.step is not None

    @property
    def macro(self) -> str:
        return ("DROP_" if self.kind == "drop" else "EXC_") + self.name.upper()


class Reasons:
    """Both tables, with lookups by name and by code."""

    def __init__(self, drops: list[Reason], exceptions: list[Reason], source: str) -> None:
        self.source = source
        self.drops = {r.name: r for r in drops}
        self.exceptions = {r.name: r for r in exceptions}
        self._check()

    def _check(self) -> None:
        steps: dict[int, str] = {}
        for table in (self.drops, self.exceptions):
            codes: dict[int, str] = {}
            for r in table.values():
                if not re.fullmatch(r"[a-z][a-z0-9_]*", r.name):
                    raise ReasonError(f"{self.source}: bad reason name {r.name!r}")
                if not 1 <= r.code <= 255:
                    raise ReasonError(f"{self.source}: {r.name}: code {r.code} outside 1..255")
                if r.code in codes:
                    raise ReasonError(
                        f"{self.source}: {r.kind} code {r.code} used by {codes[r.code]} and {r.name}"
                    )
                codes[r.code] = r.name
                if r.step is not None:
                    if r.step in steps:
                        raise ReasonError(
                            f"{self.source}: step {r.step} used by {steps[r.step]} and {r.name}"
                        )
                    steps[r.step] = r.name
        if self.drops.keys() & self.exceptions.keys():
            raise ReasonError(f"{self.source}: names used for both a drop and an exception")

    def table(self, kind: Kind) -> dict[str, Reason]:
        return self.drops if kind == "drop" else self.exceptions

    def get(self, kind: Kind, key: str | int) -> Reason:
        """Look a reason up by name or numeric code (ints or digit strings)."""
        table = self.table(kind)
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            for r in table.values():
                if r.code == int(key):
                    return r
            raise ReasonError(f"unknown {kind} code {key}")
        if key not in table:
            raise ReasonError(f"unknown {kind} reason {key!r}; known: {', '.join(table)}")
        return table[key]

    def drop(self, key: str | int) -> Reason:
        return self.get("drop", key)

    def exception(self, key: str | int) -> Reason:
        return self.get("exception", key)

    def in_order(self) -> list[Reason]:
        """The oracle's rules, in decision order."""
        rules = [r for r in [*self.drops.values(), *self.exceptions.values()] if r.predicted]
        return sorted(rules, key=lambda r: r.step or 0)

    def to_json(self) -> dict[str, Any]:
        def entry(r: Reason) -> dict[str, Any]:
            return {k: v for k, v in vars(r).items() if v not in ("", None) and k != "name"}

        return {
            "drops": {r.name: entry(r) for r in self.drops.values()},
            "exceptions": {r.name: entry(r) for r in self.exceptions.values()},
        }

    def c_header(self) -> str:
        """`#define` lines for the microcode (and the XScale daemon's C)."""
        guard = "NPK_REASONS_H"
        out = [
            "// Generated from microcode/reasons.yaml by `npk traffic reasons --header`.",
            "// Do not edit: change the YAML and regenerate.",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
        ]
        for kind, table in (("drop", self.drops), ("exception", self.exceptions)):
            width = max((len(r.macro) for r in table.values()), default=0)
            for r in sorted(table.values(), key=lambda r: r.code):
                where = f"step {r.step}" if r.step is not None else "resource"
                out.append(f"#define {r.macro:<{width}} {r.code:3d}  // {where}: {r.rule}")
            prefix = "DROP" if kind == "drop" else "EXC"
            out.append(f"#define {prefix}_CODE_LIMIT {max((r.code for r in table.values()), default=0) + 1}")
            out.append("")
        out.append(f"#endif // {guard}")
        return "\n".join(out) + "\n"


def _reasons_of(fields: dict[str, Any], source: str) -> Reasons:
    """Reasons from the checked fields (`_checked_fields`)."""
    tables = {kind: [Reason(name=name, kind=kind, **entry) for name, entry in fields[kind + "s"].items()]
              for kind in ("drop", "exception")}  # fmt: skip
    return Reasons(tables["drop"], tables["exception"], source)


def _checked_fields(data: Any, source: str, located: Located | None) -> dict[str, Any]:
    """The file checked against its schema (reasons_schema.py), as plain data."""
    # the schema (and pydantic) only when the cache has no result for this file
    from npkit.asm.base.schema import validate

    from .reasons_schema import ReasonsFile

    model = validate(ReasonsFile, data, source, located=located, error=ReasonError)

    def entry(r: Any) -> dict[str, Any]:
        return {"code": r.code, "step": r.step, "rule": r.rule, "ref": r.ref, "icmp": r.icmp, "note": r.note.strip(),
                **({"control": r.control} if r.control else {})}  # fmt: skip

    return {"drops": {n: entry(r) for n, r in model.drops.items()},
            "exceptions": {n: entry(r) for n, r in model.exceptions.items()}}  # fmt: skip


def reasons_in(located: Located) -> Reasons:
    """The reasons of a parsed reasons file, checked against its schema (an application's
    own file: npkit.toolchain.system.app)."""
    return _reasons_of(_checked_fields(located.data, located.source, located), located.source)


def parse_reasons(text: str, source: str = "<reasons>") -> Reasons:
    """A reasons file's text, checked (`file:line: field: what is wrong` as ReasonError)."""
    located = parse_yaml(text, source, error=ReasonError)
    return _reasons_of(_checked_fields(located.data, source, located), source)


@functools.cache
def load_reasons(path: str | None = None) -> Reasons:
    """The reasons table (cached in the process; the schema's checks by content, while
    the file is unchanged). Default: microcode/reasons.yaml in this tree."""
    from npkit.asm.base.cache import checked

    p = Path(path) if path else REASONS_PATH

    def check() -> dict[str, Any]:
        located = load_yaml(p, error=ReasonError, what="reasons file")
        return _checked_fields(located.data, str(p), located)

    return _reasons_of(checked("reasons/1", [str(p)], check), str(p))
