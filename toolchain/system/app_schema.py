"""The application manifest `app.yaml` (npkit.toolchain.system.app, docs/applications.md).

Paths are relative to the application's folder; that they exist is checked by the reader
(npkit.toolchain.system.app), which knows the folder.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from npkit.asm.base.schema import at

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


class AppFile(BaseModel):
    """An application: its layouts, block folders, reasons, tables, model, router, traffic."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(description="the application's name (letters, digits, _ . -)")
    description: StrictStr | None = Field(None, description="one line on what it does")
    extends: StrictStr | None = Field(None, description="the folder of the application it builds on, or ipv4")
    layouts: dict[StrictStr, StrictStr] = Field(default_factory=dict, description="layout name -> YAML file")
    default_layout: StrictStr | None = Field(None, description="the layout run when none is named")
    include: list[StrictStr] = Field(default_factory=list,
                                     description="more folders for block sources and #include files")  # fmt: skip
    reasons: StrictStr | None = Field(None, description="drop and exception reasons (reasons.yaml)")
    tables: StrictStr | None = Field(None, description="tables declared once (tables.yaml)")
    model: StrictStr | None = Field(None, description="the reference model's rules (model.py)")
    router: StrictStr | None = Field(None, description="router config (ports, addresses, ARP)")
    routes: StrictStr | None = Field(None, description="route file (default: the demo's random table)")
    traffic: StrictStr | None = Field(None, description="default traffic: a spec (YAML) or a folder of pcaps")
    chip: StrictStr | None = Field(None, description="chip config: a name (ixp2800) or a YAML file (default: the base's, else ixp2800)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError(f"{v!r}: a name is 1-64 letters, digits, '_', '.' or '-', not starting with a digit")
        return v

    @field_validator("layouts", mode="before")
    @classmethod
    def _layouts(cls, v: Any) -> Any:
        if v is None:
            return {}
        if isinstance(v, dict):
            for k in v:
                if isinstance(k, str) and not _NAME.fullmatch(k):
                    raise at(k, f"{k!r}: a layout name is letters, digits, '_', '.' or '-'")
        return v

    @field_validator("include", mode="before")
    @classmethod
    def _include(cls, v: Any) -> Any:
        return [] if v is None else v
