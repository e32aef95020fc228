"""Located diagnostics shared by every assembler stage.

Every error the assembler reports carries a SourceLoc so the user sees
file:line:column, the offending line, and a caret under the column.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int  # 1-based
    col: int = 1  # 1-based
    text: str = ""  # the physical source line, for the caret display
    # macro expansion chain, outermost first: (macro name, file, line) of each call
    expansion: tuple[tuple[str, str, int], ...] = ()

    def short(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def format_diagnostic(kind: str, message: str, loc: SourceLoc | None) -> str:
    if loc is None:
        return f"{kind}: {message}"
    out = [f"{loc.short()}: {kind}: {message}"]
    if loc.text:
        line = loc.text.rstrip("\n").expandtabs(8)
        # recompute the caret column in the tab-expanded line
        caret_col = len(loc.text[: max(loc.col - 1, 0)].expandtabs(8))
        out.append(f"    {line}")
        out.append("    " + " " * caret_col + "^")
    for name, file, line_no in reversed(loc.expansion):
        out.append(f"  in expansion of macro '{name}' called at {file}:{line_no}")
    return "\n".join(out)


class AsmError(Exception):
    """A user-facing error with a location.  Never shown as a traceback."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        return format_diagnostic("error", self.message, self.loc)


@dataclass
class Diagnostics:
    """Collects warnings (and optionally errors) without stopping."""

    warnings: list[tuple[str, SourceLoc | None]] = field(default_factory=list)

    def warn(self, message: str, loc: SourceLoc | None = None) -> None:
        self.warnings.append((message, loc))

    def render(self) -> list[str]:
        return [format_diagnostic("warning", m, loc) for m, loc in self.warnings]
