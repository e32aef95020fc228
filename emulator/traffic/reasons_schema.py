"""Reasons file (YAML): the schema of microcode/reasons.yaml, which
npkit.emulator.traffic.reasons reads.

Every check of the format lives here, so that each problem is reported at its line
(`file:line: field: what is wrong`): reason names that make C macro names, codes in
1..255 used once per table, steps (the oracle's decision order) used once across both
tables, names used once across both tables, and the text fields as strings.  A float
`step: 19.5` or a word `step: twenty` is an error at its line, never truncated.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

from npkit.asm.base.schema import Doc, at, irange

NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_CODE = 255  # a code is one byte of an exception record (microcode/include/npk_block.h)
MAX_STEP = 10_000
MAX_REASONS = 255  # a table

Text = Annotated[StrictStr, Doc("text")]


class ReasonEntry(BaseModel):
    """One drop or exception reason; its name is its key."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    code: irange(1, MAX_CODE) = Field(description="number used by microcode, counters and exception records; never reused")
    step: irange(1, MAX_STEP) | None = Field(None, description="position in the oracle's decision order (first matching rule "
                                                "wins); absent for resource drops, which depend on timing")  # fmt: skip
    rule: Text = Field(min_length=1, description="the test, precisely enough to implement")
    ref: Text = Field("", description="the requirement it follows")
    icmp: Text = Field("", description="(exceptions) what the control plane is expected to send")
    note: Text = Field("", description="why this choice, where the requirement leaves room")
    control: Literal["consume", "forward"] | None = Field(
        None, description="(an application's exceptions) what the control daemon does with the packet: consume "
        "(count it and free its buffer; the default) or forward (route it as the fast path does and send it)")


def _table(v: Any) -> Any:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"expected a mapping of reason name -> fields, got {'a list' if isinstance(v, list) else repr(v)}")
    if len(v) > MAX_REASONS:
        raise ValueError(f"{len(v)} reasons: at most {MAX_REASONS} a table")
    for name in v:
        if not (isinstance(name, str) and NAME_RE.fullmatch(name)):
            raise at(name if isinstance(name, str | int) else (), f"reason name {name!r} is not lower-case letters, "
                     "digits and '_' starting with a letter (at most 40): it becomes a C macro name")  # fmt: skip
    return v


class ReasonsFile(BaseModel):
    """Drop and exception reasons (microcode/reasons.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: Literal[1] = Field(1, description="format version")
    drops: dict[str, ReasonEntry] = Field(default_factory=dict,
                                          description="drop reasons by name (DROP_<NAME> in reasons.h)")  # fmt: skip
    exceptions: dict[str, ReasonEntry] = Field(default_factory=dict,
                                               description="exception reasons by name (EXC_<NAME> in reasons.h)")  # fmt: skip

    @field_validator("drops", "exceptions", mode="before")
    @classmethod
    def _tables(cls, v: Any) -> Any:
        return _table(v)

    @model_validator(mode="after")
    def _unique(self) -> ReasonsFile:
        steps: dict[int, str] = {}
        for table_name, table in (("drops", self.drops), ("exceptions", self.exceptions)):
            codes: dict[int, str] = {}
            for name, r in table.items():
                if r.code in codes:
                    raise at((table_name, name, "code"), f"code {r.code} used by {codes[r.code]} and {name}")
                codes[r.code] = name
                if r.step is not None:
                    if r.step in steps:
                        raise at((table_name, name, "step"), f"step {r.step} used by {steps[r.step]} and {name}")
                    steps[r.step] = name
        for name, r in self.drops.items():
            if r.control is not None:
                raise at(("drops", name, "control"), "a drop never reaches the control plane: `control` is for exceptions")
        both = sorted(self.drops.keys() & self.exceptions.keys())
        if both:
            raise at(("exceptions", both[0]), f"{both[0]!r} names a drop too: a name is used once")
        return self
