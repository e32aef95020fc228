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


# the widest source line an error echoes (longer ones are cut around the caret) and the
# longest message (a message quoting a huge operand keeps its head and its explanation)
ECHO_WIDTH = 200
MESSAGE_WIDTH = 1000


def _shown(ch: str, width: int) -> str:
    """How one source character is echoed at display column `width`: tabs to the next stop
    of 8, control and other unprintable characters escaped (a raw NUL or ESC reaches the
    terminal otherwise)."""
    if ch == "\t":
        return " " * (8 - width % 8)
    if ch.isprintable():
        return ch
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def visible(text: str) -> str:
    """`text` with unprintable characters escaped, for quoting user input in a message."""
    return "".join(_shown(ch, 0) if ch != "\t" else " " for ch in text)


def clip(text: str, width: int = 60) -> str:
    """User text quoted in a message: escaped, and cut to `width` with an ellipsis."""
    text = visible(text[: width + 1])
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def echo_line(text: str, col: int, width: int = ECHO_WIDTH) -> tuple[str, int]:
    """(the source line as echoed under an error, the caret's column in it): tabs expanded,
    unprintable characters escaped, and a line wider than `width` cut to a window around
    column `col` (1-based) with an ellipsis where it was cut."""
    text = text.rstrip("\n")
    lo, hi = 0, len(text)
    if hi > 2 * width:  # never render megabytes to show a window of `width`
        lo = max(0, min(col - 1, hi) - width)
        hi = min(hi, lo + 2 * width)
    pieces: list[str] = []
    shown, caret = 0, -1
    for i in range(lo, hi):
        if i == col - 1:
            caret = shown
        pieces.append(_shown(text[i], shown))
        shown += len(pieces[-1])
    caret = shown if caret < 0 else caret
    line = "".join(pieces)
    start = max(0, min(caret - width // 2, len(line) - width))
    end = start + width
    head, tail = lo > 0 or start > 0, hi < len(text) or end < len(line)
    line, caret = line[start:end], caret - start
    if head:
        line, caret = "\u2026" + line, caret + 1
    return line + ("\u2026" if tail else ""), caret


def _message_text(message: str) -> str:
    message = visible(message)
    if len(message) <= MESSAGE_WIDTH:
        return message
    keep = MESSAGE_WIDTH // 2
    return f"{message[:keep]} \u2026 {message[-keep:]}"


def format_diagnostic(kind: str, message: str, loc: SourceLoc | None) -> str:
    message = _message_text(message)
    if loc is None:
        return f"{kind}: {message}"
    out = [f"{loc.short()}: {kind}: {message}"]
    if loc.text:
        line, caret_col = echo_line(loc.text, loc.col)
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


def at(loc: SourceLoc, off: int) -> SourceLoc:
    """The location `off` characters into a logical line that starts at `loc`."""
    if off <= 0:
        return loc
    col = loc.col + off
    if loc.text and col > len(loc.text) + 1:
        col = loc.col  # the logical line was joined or expanded: stay at its start
    return SourceLoc(loc.file, loc.line, col, loc.text, loc.expansion)
