"""Debugger batch files (`npk debug --batch FILE`, or stdin when it is not a terminal).

A batch file is UTF-8 text, one debugger command a line, as typed at the `(npk)` prompt;
blank lines and lines starting with `#` are skipped and `quit` ends the file early.  The
file and each line are bounded (1 MB, 4,096 characters) and a line holds no control
characters (but tab), so a binary file is refused with its line before anything runs.
Which commands exist and what they take is the debugger's own table (`help`,
docs/debugging.md); a command it refuses stops the batch with `FILE:LINE: error: ...`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from npkit.asm.base.schema import Located, decode_text, read_bytes, validate

BATCH_LIMIT = 1 << 20
MAX_LINE = 4096
MAX_LINES = 100_000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class BatchError(ValueError):
    """A batch file that is not a list of command lines; the message names FILE:LINE."""


def _line(text: str) -> str:
    m = _CONTROL.search(text)
    if m:
        raise ValueError(f"control character 0x{ord(m[0]):02x} at column {m.start() + 1}: "
                         "not a command line (a binary file?)")  # fmt: skip
    return text


class BatchFile(BaseModel):
    """One command a line, as typed at the `(npk)` prompt."""

    model_config = ConfigDict(extra="forbid")
    lines: list[Annotated[str, Field(max_length=MAX_LINE)]] = Field(
        max_length=MAX_LINES, description=f"command lines ('#' comments, blank lines skipped), each at most {MAX_LINE} characters")

    @field_validator("lines")
    @classmethod
    def _no_control(cls, v: list[str]) -> list[str]:
        from npkit.asm.base.schema import at

        for i, text in enumerate(v):
            try:
                _line(text)
            except ValueError as e:
                raise at(i, str(e)) from None
        return v


def parse_batch(data: bytes, source: str) -> list[str]:
    """The command lines of a batch file's bytes, checked (BatchError `FILE:LINE: ...`)."""
    if len(data) > BATCH_LIMIT:
        raise BatchError(f"{source}: batch file is larger than {BATCH_LIMIT} bytes")
    lines = decode_text(data, source, error=BatchError, what="batch file").splitlines()
    located = Located({"lines": lines}, source, {("lines", i): i + 1 for i in range(len(lines))})
    try:
        return validate(BatchFile, {"lines": lines}, source, located=located, error=BatchError).lines
    except BatchError as e:  # `lines[N]: ` says nothing the line number does not
        raise BatchError(re.sub(r": lines\[\d+\]: ", ": ", str(e))) from None


def read_batch(path: str | Path) -> list[str]:
    """Read and check a batch file."""
    return parse_batch(read_bytes(path, limit=BATCH_LIMIT, error=BatchError, what="batch file"), str(path))
