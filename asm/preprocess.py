"""The assembler's preprocessor: files in, expanded logical lines out.

It accepts the preprocessor language of Intel's IXP microcode assembler
(as in the IXA SDK and the Linux ``drivers/net/ixp2000/*.uc`` sources) and
turns a ``.uc`` file into a flat list of :class:`LogicalLine` objects whose
text is comment-free and fully expanded, each pointing back at the physical
line (and the chain of macro calls) it came from.

Directives: ``#include``, ``#define`` (object- and function-like),
``#undef``, ``#define_eval``, ``#macro``/``#endm``, ``#if``/``#ifdef``/
``#ifndef``/``#elif``/``#else``/``#endif``, ``#while``/``#endloop``,
``#error``, ``#warning``.  Only a line whose first non-blank character is
``#`` followed by a word is a directive; ``loop#:`` is a label.

Semantics chosen where the language is loose (documented because the rest
of the assembler depends on them):

Comments
    ``//`` and ``;`` run to the end of the line, ``/* */`` may span lines;
    none of them counts inside a double-quoted string.  ``/**/`` is not a
    comment but the token-paste marker (below).  Block comments are blanked
    with spaces so columns after them stay true.

Continuation
    A line is joined with the next while, after comment removal, it ends
    with ``\\`` (the backslash is dropped), ends with ``,``, or has more
    ``[``/``(`` than ``]``/``)``.  The ``,`` and bracket rules never swallow a
    following directive line, so a stray ``[`` cannot eat an ``#endif``, and
    on a directive line only ``\\`` and brackets continue it (``#define L a,``
    stays one line).  Joined pieces are separated by one space and the
    logical line keeps the location of its first physical line.

Substitution
    Only whole identifiers are replaced, never text in double-quoted strings,
    never names that start with ``$`` or ``@`` (transfer and absolute
    registers) or ``.`` (assembler directives).  ``#`` is not part of an
    identifier, so ``landing/**/IDX#`` with ``IDX`` = 3 gives ``landing3#``,
    as IXA macro libraries expect.  Expansion is rescanned until nothing
    changes; like C, a define is not expanded inside its own expansion.

Token pasting
    ``/**/`` joins its neighbours *after* substitution: with ``#define N 3``,
    ``reg/**/N`` becomes ``reg3``.  The pasted result is scanned again, so
    ``PREFIX/**/_SIZE`` can name another define.  Only the marker is removed;
    whitespace around it stays.

``#define_eval NAME expr``
    Expands ``expr`` with the current definitions and stores the decimal
    value.  If the text is not a constant expression (a register name, say)
    the expanded text itself is stored, which is how IXA libraries pass
    operands through it; ``'text'`` in single quotes stores ``text``.
    Arithmetic faults (division by zero) are errors.  Redefining with
    ``#define_eval`` never warns; ``#define`` with a different value does.

Expressions
    ``#if``/``#elif``/``#while``/``#define_eval`` expand their text (leaving
    the operand of ``defined`` alone) and evaluate it with
    :func:`npkit.asm.expr.evaluate`.  A name still undefined after expansion
    is an error, except in a short-circuited branch.

Macros
    ``#macro name(p1, p2)`` ... ``#endm`` (``name[p1, p2]`` and a bare
    ``name`` for no parameters are accepted too).  A macro may be defined
    several times with different parameter counts; the call picks the one
    whose arity matches.  A call is a line whose first token is the macro
    name followed by ``(args)``, ``[args]`` or nothing.  Arguments are split
    on top-level commas, passed as text (not pre-expanded), and replace
    whole-identifier parameters in every body line, directives included;
    the body then runs like source, so ``#if``/``#while`` in a body see the
    arguments.

Labels in macros
    Each expansion that *defines* a label ``name#:`` gets that label and
    every reference to it within the expansion renamed to
    ``name__<n>#`` (``n`` counts expansions), so a macro with local labels
    can be called twice.  Labels that arrive as call arguments are the
    caller's and are left alone.  A label defined in a macro therefore
    cannot be targeted from outside that expansion; pass the label in as an
    argument instead.  ``preprocess(..., unique_macro_labels=False)`` turns
    the renaming off.

Predefined names
    ``__LINE__`` (the current line number) and ``__FILE__`` (its file, as a
    quoted string), plus whatever ``defines`` supplies (like ``-D``; a key
    ``F(a)`` defines a function-like macro).

Files
    A source is read only when it is a regular file of at most 16 MB (a FIFO or a
    device such as ``/dev/zero`` is refused before it is read).  ``#include`` takes
    only microcode source: a file named ``*.uc`` or ``*.h`` (its name and, through a
    symbolic link, its target's); any other file is refused without a byte of it in
    the message, so that an error cannot echo a line of a file that is not source.

Limits turn runaway input into located errors instead of hangs or
Python tracebacks: include depth 64, macro nesting 64, 100,000 iterations
per ``#while`` (1,000,000 in total), expansions of 1,000,000 characters, and an
output of at most 4 x 8,192 lines (4 times the control store; the error names the
macro chain that was expanding).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .base.reading import MIB, InputError, read_bytes
from .errors import AsmError, Diagnostics, SourceLoc
from .expr import ExprError, evaluate

__all__ = ["LogicalLine", "preprocess"]

MAX_INCLUDE_DEPTH = 64
MAX_MACRO_DEPTH = 64
MAX_BLOCK_DEPTH = 128  # includes + macro calls + #while bodies, nested
MAX_WHILE_ITERATIONS = 100_000
MAX_TOTAL_ITERATIONS = 1_000_000
MAX_EXPANSION_DEPTH = 64  # nested #define expansions
MAX_EXPANDED_LENGTH = 1_000_000
MAX_PASTE_ROUNDS = 32
CONTROL_STORE = 8192  # instructions an ME holds (IXP2800)
# Lines a whole expansion may produce: a program cannot be more than the control store,
# and declarations, labels and directives take lines too; a doubling macro stops here
# instead of filling the machine's memory.
MAX_OUTPUT_LINES = 4 * CONTROL_STORE
SOURCE_LIMIT = 16 * MIB  # bytes of one source file
SOURCE_SUFFIXES = (".uc", ".h")  # what #include takes
PASTE = "/**/"


@dataclass(frozen=True)
class LogicalLine:
    """One expanded source line and where it came from."""

    text: str
    loc: SourceLoc


# --------------------------------------------------------------------------
# Lexical helpers

# Comment scanner: strings are skipped, /**/ is kept, /* starts a block,
# // and ; end the line.
_COMMENT_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|(/\*\*/)|(/\*)|(//|;)')
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"?')
_DIRECTIVE_RE = re.compile(r"#\s*([A-Za-z_]\w*)[ \t]*", re.ASCII)
# Substitution scanner: group 1 is a replaceable identifier; everything else
# (strings, numbers, $reg/@reg, .directive) is matched only to be skipped.
_SUBST_RE = re.compile(
    r'"(?:[^"\\]|\\.)*"?|[0-9][\w]*|[$@]+[\w$@]*|\.[A-Za-z_][\w$@]*|([A-Za-z_][\w$@]*)',
    re.ASCII,
)
_subst_names = _SUBST_RE.findall
_NAME_RE = re.compile(r"[A-Za-z_]\w*", re.ASCII)
_DEFINE_HEAD_RE = re.compile(r"([A-Za-z_]\w*)(\()?", re.ASCII)
_DEFINED_OPERAND_RE = re.compile(r"\s*(?:\(\s*[A-Za-z_]\w*\s*\)|[A-Za-z_]\w*)", re.ASCII)
_ARG_SCAN_RE = re.compile(r'[()\[\],"]')
_LABEL_DEF_RE = re.compile(r"([A-Za-z_][\w$]*)#\s*:", re.ASCII)
_LABEL_TOKEN_RE = re.compile(r"(?<![\w$@])([A-Za-z_][\w$]*)#", re.ASCII)
_WS_RE = re.compile(r"\s*")

_CONDITIONAL_OPENERS = frozenset({"if", "ifdef", "ifndef"})


def _strip_comments(line: str, in_block: bool) -> tuple[str, bool]:
    """Blank out the comments of one physical line.

    Returns the line with block comments replaced by spaces (so columns are
    preserved) and line comments cut off, and whether a block comment is
    still open at its end.
    """
    pos = 0
    if in_block:
        end = line.find("*/")
        if end < 0:
            return "", True
        line = " " * (end + 2) + line[end + 2 :]
        pos = end + 2
    while True:
        m = _COMMENT_RE.search(line, pos)
        if m is None:
            return line, False
        if m.group(3):
            return line[: m.start()], False
        if m.group(2):
            end = line.find("*/", m.end())
            if end < 0:
                return line[: m.start()], True
            line = line[: m.start()] + " " * (end + 2 - m.start()) + line[end + 2 :]
            pos = end + 2
        else:
            pos = m.end()


def _bracket_depth(text: str) -> int:
    """Open ``[``/``(`` minus closed ones, ignoring string contents."""
    if '"' in text:
        text = _STRING_RE.sub("", text)
    return text.count("[") + text.count("(") - text.count("]") - text.count(")")


class _Line:
    """A logical source line before expansion (directive already split off)."""

    __slots__ = ("text", "loc", "directive", "arg", "arg_off")

    def __init__(self, text: str, loc: SourceLoc):
        self.text = text
        self.loc = loc
        self.directive: str | None = None
        self.arg = ""
        self.arg_off = 0
        if text[0] == "#":
            m = _DIRECTIVE_RE.match(text)
            if m is not None:
                self.directive = m.group(1)
                self.arg = text[m.end() :].rstrip()
                self.arg_off = m.end()

    def arg_loc(self, extra: int = 0) -> SourceLoc:
        """Location of the directive argument (plus ``extra`` characters)."""
        loc = self.loc
        return SourceLoc(
            loc.file, loc.line, loc.col + self.arg_off + extra, loc.text, loc.expansion
        )


def _split_source(text: str, file: str) -> list[_Line]:
    """Physical lines -> comment-free, continuation-joined logical lines."""
    _reject_binary(text, file)
    result: list[_Line] = []
    in_block = False
    opened: SourceLoc | None = None  # where the open block comment began
    acc: list[str] = []  # pieces of the logical line being built
    acc_loc: SourceLoc | None = None
    acc_depth = 0
    acc_directive = False
    acc_backslash = False

    def flush() -> None:
        joined = " ".join(piece for piece in acc if piece)
        if joined and acc_loc is not None:
            result.append(_Line(joined, acc_loc))

    # Only \n and \r\n end a line: str.splitlines() would also split on form
    # feeds and other separators that editors do not count.
    physical = text.replace("\r\n", "\n").split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    for lineno, raw in enumerate(physical, 1):
        if in_block or "/" in raw or ";" in raw or '"' in raw:
            was_open = in_block
            s, in_block = _strip_comments(raw, in_block)
            if in_block and (s or not was_open):  # a new /* (its text is what precedes it)
                opened = SourceLoc(file, lineno, len(s) + 1, raw)
        else:
            s = raw
        body = s.strip()
        if acc:
            if not body:
                continue
            if not acc_backslash and body[0] == "#" and _DIRECTIVE_RE.match(body):
                flush()
                acc = []
            else:
                acc_backslash = body[-1] == "\\"
                if acc_backslash:
                    body = body[:-1].rstrip()
                acc.append(body)
                acc_depth += _bracket_depth(body)
                if not (acc_backslash or acc_depth > 0 or (not acc_directive and body[-1:] == ",")):
                    flush()
                    acc = []
                continue
        if not body:
            continue
        acc_loc = SourceLoc(file, lineno, len(s) - len(s.lstrip()) + 1, raw)
        acc_directive = body[0] == "#" and _DIRECTIVE_RE.match(body) is not None
        acc_backslash = body[-1] == "\\"
        if acc_backslash:
            body = body[:-1].rstrip()
        acc_depth = _bracket_depth(body) if ("[" in body or "(" in body) else 0
        if acc_backslash or acc_depth > 0 or (not acc_directive and body[-1:] == ","):
            acc = [body]
            continue
        if body:
            result.append(_Line(body, acc_loc))
    if in_block and opened is not None:
        raise AsmError("unterminated comment", opened)
    if acc:
        flush()
    return result


def _reject_binary(text: str, file: str) -> None:
    """A NUL byte is never assembler source: say so once instead of echoing the bytes."""
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        col = nul - (text.rfind("\n", 0, nul) + 1) + 1
        raise AsmError("a NUL byte: a binary file, not assembler source",
                       SourceLoc(file, line, col))  # fmt: skip


def _split_args(text: str, open_idx: int, what: str, loc: SourceLoc) -> tuple[list[str], int]:
    """Split the bracketed argument list starting at ``text[open_idx]``.

    Returns the stripped arguments (split on top-level commas; nested
    brackets and strings are kept whole) and the index after the closer.
    An empty list means ``()``.
    """
    depth = 0
    args: list[str] = []
    start = open_idx + 1
    pos = open_idx
    while True:
        m = _ARG_SCAN_RE.search(text, pos)
        if m is None:
            raise AsmError(f"unterminated argument list for {what}", loc)
        ch = m.group()
        pos = m.end()
        if ch == '"':
            s = _STRING_RE.match(text, m.start())
            pos = s.end() if s else pos
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                args.append(text[start : m.start()].strip())
                if len(args) == 1 and not args[0]:
                    args = []
                return args, pos
        elif depth == 1:  # top-level comma
            args.append(text[start : m.start()].strip())
            start = pos


def _substitute(text: str, mapping: Mapping[str, str]) -> str:
    """Replace whole-identifier keys of ``mapping`` in ``text`` in one pass."""
    if mapping.keys().isdisjoint(_subst_names(text)):
        return text

    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return m.group()
        return mapping.get(name, name)

    return _SUBST_RE.sub(repl, text)


def _message(arg: str) -> str:
    """The text of an #error/#warning, without surrounding quotes."""
    arg = arg.strip()
    if len(arg) >= 2 and arg[0] == '"' and arg[-1] == '"' and '"' not in arg[1:-1]:
        return arg[1:-1]
    return arg


# --------------------------------------------------------------------------
# Definitions


class _Define:
    __slots__ = ("name", "params", "body", "loc")

    def __init__(self, name: str, params: tuple[str, ...] | None, body: str, loc: SourceLoc | None):
        self.name = name
        self.params = params
        self.body = body
        self.loc = loc


class _Macro:
    __slots__ = ("name", "params", "body", "loc")

    def __init__(self, name: str, params: tuple[str, ...], body: list[_Line], loc: SourceLoc):
        self.name = name
        self.params = params
        self.body = body
        self.loc = loc


_LINE_MACRO = "__LINE__"
_FILE_MACRO = "__FILE__"
_DYNAMIC = frozenset({_LINE_MACRO, _FILE_MACRO})


def _parse_params(text: str, loc: SourceLoc, what: str) -> tuple[str, ...]:
    """Validate a comma-separated parameter list."""
    if not text.strip():
        return ()
    params = tuple(p.strip() for p in text.split(","))
    for p in params:
        if not _NAME_RE.fullmatch(p):
            raise AsmError(f"invalid parameter name '{p}' in {what}", loc)
    if len(set(params)) != len(params):
        raise AsmError(f"duplicate parameter name in {what}", loc)
    return params


# --------------------------------------------------------------------------
# The interpreter


class _Cond:
    """One open #if group: where it started and whether #else was seen."""

    __slots__ = ("loc", "seen_else")

    def __init__(self, loc: SourceLoc):
        self.loc = loc
        self.seen_else = False


class _Preprocessor:
    def __init__(
        self,
        include_dirs: Sequence[str | Path],
        diags: Diagnostics,
        unique_macro_labels: bool,
    ):
        self.include_dirs = [Path(d) for d in include_dirs]
        self.diags = diags
        self.unique_macro_labels = unique_macro_labels
        self.defines: dict[str, _Define] = {
            name: _Define(name, None, "", None) for name in _DYNAMIC
        }
        self.macros: dict[str, dict[int, _Macro]] = {}
        self.out: list[LogicalLine] = []
        self.file_cache: dict[str, list[_Line]] = {}
        self.include_depth = 0
        self.macro_depth = 0
        self.block_depth = 0
        self.total_iterations = 0
        self.expansions = 0
        self.mangled: set[str] = set()
        self.current: SourceLoc | None = None
        self.handlers = {
            "define": self.do_define,
            "undef": self.do_undef,
            "define_eval": self.do_define_eval,
            "include": self.do_include,
            "if": self.do_if,
            "ifdef": self.do_ifdef,
            "ifndef": self.do_ifdef,
            "elif": self.do_else,
            "else": self.do_else,
            "endif": self.do_endif,
            "macro": self.do_macro,
            "endm": self.do_stray_end,
            "while": self.do_while,
            "endloop": self.do_stray_end,
            "error": self.do_error,
            "warning": self.do_warning,
        }

    # -- running blocks -----------------------------------------------------
    def run_block(self, lines: Sequence[_Line], loc: SourceLoc | None) -> None:
        """Run a file, macro body or loop body with its own #if nesting."""
        self.block_depth += 1
        if self.block_depth > MAX_BLOCK_DEPTH:
            raise AsmError(f"nesting too deep (more than {MAX_BLOCK_DEPTH} levels)", loc)
        try:
            stack: list[_Cond] = []
            i, n = 0, len(lines)
            while i < n:
                line = lines[i]
                self.current = line.loc
                if line.directive is None:
                    self.emit(line)
                    i += 1
                    continue
                handler = self.handlers.get(line.directive)
                if handler is None:
                    raise AsmError(f"unknown preprocessor directive '#{line.directive}'", line.loc)
                i = handler(lines, i, stack)
            if stack:
                raise AsmError("unterminated #if (no matching #endif)", stack[-1].loc)
        finally:
            self.block_depth -= 1

    def run_file(self, path: str, text: str, loc: SourceLoc | None) -> None:
        lines = self.file_cache.get(path)
        if lines is None:
            lines = _split_source(text.removeprefix("\ufeff"), path)  # a UTF-8 byte-order mark is not code
            self.file_cache[path] = lines
        self.run_block(lines, loc)

    # -- text lines and macro calls -----------------------------------------
    def emit(self, line: _Line) -> None:
        text = line.text
        m = _NAME_RE.match(text)
        if m is not None and m.group() in self.macros and self.call_macro(line, m.group(), m.end()):
            return
        expanded = self.expand(text, line.loc)
        if expanded is not text:
            expanded = expanded.strip()
            if not expanded:
                return
        self.out.append(LogicalLine(expanded, line.loc))
        if len(self.out) > MAX_OUTPUT_LINES:
            chain = " > ".join(f"{m} ({f}:{n})" for m, f, n in line.loc.expansion)
            raise AsmError(
                f"the expansion exceeds {MAX_OUTPUT_LINES} lines (4 x the {CONTROL_STORE}-instruction "
                f"control store)" + (f" while expanding macro {chain}" if chain else ""),
                line.loc,
            )

    def call_macro(self, line: _Line, name: str, after: int) -> bool:
        """Expand ``line`` as a call of macro ``name``; False if it is not one."""
        text = line.text
        j = _WS_RE.match(text, after).end()  # type: ignore[union-attr]
        if j == len(text):
            args: list[str] = []
        elif text[j] in "([":
            args, end = _split_args(text, j, f"macro '{name}'", line.loc)
            if text[end:].strip():
                raise AsmError(f"unexpected text after the call of macro '{name}'", line.loc)
        else:
            return False
        overloads = self.macros[name]
        macro = overloads.get(len(args))
        if macro is None and not args and 1 in overloads:
            macro, args = overloads[1], [""]  # name() passes one empty argument
        if macro is None:
            wanted = " or ".join(str(k) for k in sorted(overloads))
            raise AsmError(
                f"macro '{name}' takes {wanted} argument(s), {len(args)} given", line.loc
            )
        self.expand_macro(macro, args, line)
        return True

    def expand_macro(self, macro: _Macro, args: list[str], call: _Line) -> None:
        if self.macro_depth >= MAX_MACRO_DEPTH:
            raise AsmError(
                f"macro expansion nested too deeply (more than {MAX_MACRO_DEPTH} levels)"
                f" in '{macro.name}'",
                call.loc,
            )
        self.macro_depth += 1
        self.expansions += 1
        serial = self.expansions
        cl = call.loc
        chain = cl.expansion + ((macro.name, cl.file, cl.line),)
        mapping = dict(zip(macro.params, args, strict=True))
        body = []
        for bl in macro.body:
            b = bl.loc
            text = _substitute(bl.text, mapping)
            if len(text) > MAX_EXPANDED_LENGTH:  # arguments that grow with each nested call
                raise AsmError(
                    f"macro expansion too large (a line of more than {MAX_EXPANDED_LENGTH} characters)"
                    f" in '{macro.name}'",
                    call.loc,
                )
            body.append(_Line(text, SourceLoc(b.file, b.line, b.col, b.text, chain)))
        start = len(self.out)
        self.run_block(body, call.loc)
        if self.unique_macro_labels and len(self.out) > start:
            self.rename_labels(start, args, serial)
        self.macro_depth -= 1

    def rename_labels(self, start: int, args: list[str], serial: int) -> None:
        """Give the labels this expansion defines a per-expansion name."""
        out = self.out
        labels: set[str] = set()
        for k in range(start, len(out)):
            text = out[k].text
            if "#" in text:
                m = _LABEL_DEF_RE.match(text)
                if m is not None:
                    labels.add(m.group(1))
        if not labels:
            return
        labels -= self.mangled
        for arg in args:
            if "#" in arg:
                labels.difference_update(_LABEL_TOKEN_RE.findall(arg))
        if not labels:
            return
        names = sorted(labels, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w$@])(" + "|".join(map(re.escape, names)) + r")#")
        suffix = f"__{serial}#"
        self.mangled.update(name + f"__{serial}" for name in names)
        for k in range(start, len(out)):
            ll = out[k]
            if "#" in ll.text:
                new = pattern.sub(lambda m: m.group(1) + suffix, ll.text)
                if new != ll.text:
                    out[k] = LogicalLine(new, ll.loc)

    # -- define expansion ---------------------------------------------------
    def expand(self, text: str, loc: SourceLoc, protect_defined: bool = False) -> str:
        """Fully expand defines in ``text`` and apply ``/**/`` pasting.

        Returns ``text`` itself (the same object) when nothing changes, which
        is the common case and the fast path.
        """
        if PASTE not in text and self.defines.keys().isdisjoint(_subst_names(text)):
            return text
        for _ in range(MAX_PASTE_ROUNDS):
            text = self.expand_names(text, loc, frozenset(), 0, protect_defined)
            if PASTE not in text:
                return text
            text = text.replace(PASTE, "")
        raise AsmError("token pasting with '/**/' does not terminate", loc)

    def expand_names(
        self,
        text: str,
        loc: SourceLoc,
        disabled: frozenset[str],
        depth: int,
        protect_defined: bool,
    ) -> str:
        defines = self.defines
        if defines.keys().isdisjoint(_subst_names(text)):
            return text
        if depth > MAX_EXPANSION_DEPTH:
            raise AsmError(
                f"define expansion nested too deeply (more than {MAX_EXPANSION_DEPTH} levels)", loc
            )
        pieces: list[str] = []
        size = 0
        last = pos = 0
        while True:
            m = _SUBST_RE.search(text, pos)
            if m is None:
                break
            pos = m.end()
            name = m.group(1)
            if name is None or name in disabled:
                continue
            if protect_defined and name == "defined":
                operand = _DEFINED_OPERAND_RE.match(text, pos)
                if operand is not None:
                    pos = operand.end()
                continue
            d = defines.get(name)
            if d is None:
                continue
            end = pos
            if name in _DYNAMIC:
                body = str(loc.line) if name == _LINE_MACRO else '"' + loc.file + '"'
            elif d.params is None:
                body = d.body
            else:
                j = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
                if j >= len(text) or text[j] != "(":
                    continue  # a function-like name without arguments stays
                args, end = _split_args(text, j, f"'{name}'", loc)
                if len(args) != len(d.params):
                    if not (len(d.params) == 1 and not args):
                        raise AsmError(
                            f"'{name}' takes {len(d.params)} argument(s), {len(args)} given", loc
                        )
                    args = [""]
                body = _substitute(d.body, dict(zip(d.params, args, strict=True)))
            body = self.expand_names(body, loc, disabled | {name}, depth + 1, protect_defined)
            pieces.append(text[last : m.start()])
            pieces.append(body)
            size += m.start() - last + len(body)
            if size > MAX_EXPANDED_LENGTH:
                raise AsmError(
                    f"define expansion too large (more than {MAX_EXPANDED_LENGTH} characters)", loc
                )
            last = pos = end
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)

    # -- expressions --------------------------------------------------------
    def evaluate(self, line: _Line, text: str, extra: int = 0) -> int:
        """Expand and evaluate a directive's expression ``text``."""
        loc = line.arg_loc(extra)
        if not text.strip():
            raise AsmError(f"#{line.directive} needs an expression", loc)
        expanded = self.expand(text, loc, protect_defined=True)
        try:
            return evaluate(expanded, loc, is_defined=self.defines.__contains__)
        except ExprError as exc:
            if expanded is text:
                raise
            raise ExprError(
                f"{exc.message} (in '{expanded.strip()}' after expansion)", loc, exc.kind
            ) from None

    # -- directives ---------------------------------------------------------
    # Each handler gets (lines, index, #if stack) and returns the next index.

    def do_define(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        self.define_from_text(line.arg, line.arg_loc(), warn=True)
        return i + 1

    def define_from_text(self, arg: str, loc: SourceLoc, warn: bool) -> None:
        m = _DEFINE_HEAD_RE.match(arg)
        if m is None:
            raise AsmError("expected a name after #define", loc)
        name = m.group(1)
        params: tuple[str, ...] | None = None
        rest = arg[m.end() :]
        if m.group(2):
            close = rest.find(")")
            if close < 0:
                raise AsmError(f"missing ')' in parameter list of '{name}'", loc)
            params = _parse_params(rest[:close], loc, f"#define {name}")
            rest = rest[close + 1 :]
        elif rest and not rest[0].isspace():
            raise AsmError(f"expected a space after the name '{name}' in #define", loc)
        self.set_define(name, params, rest.strip(), loc, warn)

    def set_define(
        self, name: str, params: tuple[str, ...] | None, body: str, loc: SourceLoc, warn: bool
    ) -> None:
        if name == "defined":
            raise AsmError("'defined' cannot be defined", loc)
        old = self.defines.get(name)
        if warn and old is not None and (old.params != params or old.body != body):
            where = f" (previous definition at {old.loc.short()})" if old.loc else ""
            self.diags.warn(f"'{name}' redefined with a different value{where}", loc)
        self.defines[name] = _Define(name, params, body, loc)

    def do_undef(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        m = _NAME_RE.match(line.arg)
        if m is None:
            raise AsmError("expected a name after #undef", line.arg_loc())
        self.defines.pop(m.group(), None)
        return i + 1

    def do_define_eval(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        m = _NAME_RE.match(line.arg)
        if m is None:
            raise AsmError("expected a name after #define_eval", line.arg_loc())
        name = m.group()
        text = line.arg[m.end() :]
        if not text.strip():
            raise AsmError(f"#define_eval {name} needs an expression", line.arg_loc(m.end()))
        loc = line.arg_loc(m.end() + len(text) - len(text.lstrip()))
        expanded = self.expand(text, loc, protect_defined=True).strip()
        if len(expanded) >= 2 and expanded[0] == "'" and expanded[-1] == "'":
            value = expanded[1:-1].strip()
        else:
            try:
                value = str(evaluate(expanded, loc, is_defined=self.defines.__contains__))
            except ExprError as exc:
                if exc.kind == "value":
                    raise
                value = expanded  # not a constant: keep the text (register names...)
        self.set_define(name, None, value, line.loc, warn=False)
        return i + 1

    def do_include(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        target = line.arg.strip()
        if target[:1] not in ('"', "<"):
            target = self.expand(target, line.loc).strip()
        if len(target) >= 2 and target[0] == '"' and target.find('"', 1) > 0:
            name, quoted = target[1 : target.find('"', 1)], True
        elif len(target) >= 2 and target[0] == "<" and target.find(">", 1) > 0:
            name, quoted = target[1 : target.find(">", 1)], False
        else:
            raise AsmError('#include expects "file" or <file>', line.arg_loc())
        if not name:
            raise AsmError("#include with an empty file name", line.arg_loc())
        if self.include_depth >= MAX_INCLUDE_DEPTH:
            raise AsmError(
                f"#include nested too deeply (more than {MAX_INCLUDE_DEPTH} levels);"
                " does a file include itself?",
                line.loc,
            )
        path = self.find_include(name, quoted, line.loc.file)
        if path is None:
            raise AsmError(f"cannot find include file '{name}'", line.arg_loc())
        _check_source_name(name, path, line.arg_loc())
        key = str(path)
        text = "" if key in self.file_cache else _read_source(path, line.arg_loc())
        self.include_depth += 1
        self.run_file(key, text, line.loc)
        self.include_depth -= 1
        return i + 1

    def find_include(self, name: str, quoted: bool, including: str) -> Path | None:
        """Quotes search the including file's directory first, <> last."""
        here = Path(including).parent
        candidate = Path(name)
        if candidate.is_absolute():
            return candidate if candidate.is_file() else None
        dirs = [here, *self.include_dirs] if quoted else [*self.include_dirs, here]
        for d in dirs:
            p = d / name
            try:
                if p.is_file():
                    return p
            except OSError:  # name too long, bad characters...
                continue
        return None

    def do_if(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        stack.append(_Cond(line.loc))
        if self.evaluate(line, line.arg) != 0:
            return i + 1
        return self.skip_false(lines, i + 1, stack)

    def do_ifdef(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        m = _NAME_RE.match(line.arg)
        if m is None:
            raise AsmError(f"expected a name after #{line.directive}", line.arg_loc())
        stack.append(_Cond(line.loc))
        if (m.group() in self.defines) == (line.directive == "ifdef"):
            return i + 1
        return self.skip_false(lines, i + 1, stack)

    def find_branch(self, lines: Sequence[_Line], j: int, stack: list[_Cond]) -> int:
        """Index of the next #elif/#else/#endif of the current group."""
        depth = 0
        n = len(lines)
        while j < n:
            d = lines[j].directive
            if d is not None:
                if d in _CONDITIONAL_OPENERS:
                    depth += 1
                elif d == "endif":
                    if depth == 0:
                        return j
                    depth -= 1
                elif depth == 0 and (d == "else" or d == "elif"):
                    return j
            j += 1
        raise AsmError("unterminated #if (no matching #endif)", stack[-1].loc)

    def skip_false(self, lines: Sequence[_Line], j: int, stack: list[_Cond]) -> int:
        """Skip a false branch; stop in the first branch that is taken."""
        while True:
            k = self.find_branch(lines, j, stack)
            line = lines[k]
            cond = stack[-1]
            if line.directive == "endif":
                stack.pop()
                return k + 1
            if cond.seen_else:
                raise AsmError(f"#{line.directive} after #else", line.loc)
            if line.directive == "else":
                cond.seen_else = True
                return k + 1
            if self.evaluate(line, line.arg) != 0:
                return k + 1
            j = k + 1

    def do_else(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        """#elif/#else reached from a taken branch: skip to the #endif."""
        line = lines[i]
        if not stack:
            raise AsmError(f"#{line.directive} without #if", line.loc)
        k = i
        while True:
            cond = stack[-1]
            if lines[k].directive == "endif":
                stack.pop()
                return k + 1
            if cond.seen_else:
                raise AsmError(f"#{lines[k].directive} after #else", lines[k].loc)
            if lines[k].directive == "else":
                cond.seen_else = True
            k = self.find_branch(lines, k + 1, stack)

    def do_endif(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        if not stack:
            raise AsmError("#endif without #if", lines[i].loc)
        stack.pop()
        return i + 1

    def find_end(self, lines: Sequence[_Line], i: int, opener: str, closer: str) -> int:
        """Index of the ``#closer`` matching the ``#opener`` at ``lines[i]``."""
        depth = 0
        for k in range(i + 1, len(lines)):
            d = lines[k].directive
            if d == opener:
                depth += 1
            elif d == closer:
                if depth == 0:
                    return k
                depth -= 1
        raise AsmError(f"unterminated #{opener} (no matching #{closer})", lines[i].loc)

    def do_macro(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        end = self.find_end(lines, i, "macro", "endm")
        loc = line.arg_loc()
        header = line.arg.replace(PASTE, "")  # a macro-built macro: #macro op_/**/n()
        m = _NAME_RE.match(header)
        if m is None:
            raise AsmError("expected a macro name after #macro", loc)
        name = m.group()
        rest = header[m.end() :].strip()
        params: tuple[str, ...] = ()
        if rest:
            closer = {"(": ")", "[": "]"}.get(rest[0])
            if closer is None or rest[-1] != closer:
                raise AsmError(f"expected '(parameters)' after #macro {name}", loc)
            params = _parse_params(rest[1:-1], loc, f"#macro {name}")
        body = list(lines[i + 1 : end])
        overloads = self.macros.setdefault(name, {})
        old = overloads.get(len(params))
        if old is not None and [b.text for b in old.body] != [b.text for b in body]:
            self.diags.warn(
                f"macro '{name}' redefined (previous definition at {old.loc.short()})", line.loc
            )
        overloads[len(params)] = _Macro(name, params, body, line.loc)
        return end + 1

    def do_while(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        end = self.find_end(lines, i, "while", "endloop")
        body = lines[i + 1 : end]
        count = 0
        while self.evaluate(line, line.arg) != 0:
            count += 1
            self.total_iterations += 1
            if count > MAX_WHILE_ITERATIONS:
                raise AsmError(
                    f"#while loop did not finish after {MAX_WHILE_ITERATIONS} iterations", line.loc
                )
            if self.total_iterations > MAX_TOTAL_ITERATIONS:
                raise AsmError(
                    f"more than {MAX_TOTAL_ITERATIONS} #while iterations in total", line.loc
                )
            self.run_block(body, line.loc)
        return end + 1

    def do_stray_end(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        opener = "macro" if line.directive == "endm" else "while"
        raise AsmError(f"#{line.directive} without #{opener}", line.loc)

    def do_error(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        raise AsmError(_message(line.arg) or "#error", line.loc)

    def do_warning(self, lines: Sequence[_Line], i: int, stack: list[_Cond]) -> int:
        line = lines[i]
        self.diags.warn(_message(line.arg) or "#warning", line.loc)
        return i + 1


def _check_source_name(name: str, path: Path, loc: SourceLoc) -> None:
    """Refuse to include a file that is not named as source (see the module doc)."""
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop of links: find_include found a file, so rare
        target = path
    if path.suffix.lower() not in SOURCE_SUFFIXES or target.suffix.lower() not in SOURCE_SUFFIXES:
        shown = "/".join(SOURCE_SUFFIXES)
        raise AsmError(f"#include '{name}': not microcode source (only {shown} files are included)", loc)


def _read_source(path: Path, loc: SourceLoc | None) -> str:
    """Read a source file (a bounded read of a regular file); microcode is ASCII but old
    files carry Latin-1."""
    try:
        data = read_bytes(path, limit=SOURCE_LIMIT, what="source")
    except InputError as exc:
        problem = str(exc).removeprefix(f"{path}: ").removeprefix("cannot read source: ")
        raise AsmError(f"cannot read '{path}': {problem}", loc) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def source_lines(path: Path) -> list[str] | None:
    """The lines of a microcode source named by an image's line table (for a debugger or
    a graph to show), or None: only a regular `.uc`/`.h` file within SOURCE_LIMIT is
    shown, as `#include` takes, so that an image naming another file cannot show it."""
    if path.suffix.lower() not in SOURCE_SUFFIXES:
        return None
    try:
        if path.resolve().suffix.lower() not in SOURCE_SUFFIXES:
            return None
        data = read_bytes(path, limit=SOURCE_LIMIT, what="source")
    except (OSError, RuntimeError, InputError):
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def parse_defines(defines: Sequence[str]) -> dict[str, str]:
    """-D NAME[=VALUE] options as the ``defines`` of :func:`preprocess`; a
    ValueError names a malformed one."""
    out = {}
    for d in defines:
        name, _, val = d.partition("=")
        if not re.fullmatch(r"[A-Za-z_]\w*(\(.*\))?", name):  # NAME, or a macro NAME(params)
            raise ValueError(f"expected NAME or NAME=VALUE, got '{d}'")
        out[name] = val
    return out


def preprocess(
    path: str | Path,
    include_dirs: Sequence[str | Path] = (),
    defines: Mapping[str, str] | None = None,
    diags: Diagnostics | None = None,
    source_text: str | None = None,
    *,
    unique_macro_labels: bool = True,
) -> list[LogicalLine]:
    """Preprocess ``path`` (or ``source_text``, reported as ``path``).

    ``include_dirs`` are searched in order after the including file's
    directory (for ``"file"``) or before it (for ``<file>``); ``defines``
    act like ``-D NAME=value``.  Warnings go to ``diags``.  Every failure is
    an :class:`AsmError` with a location.
    """
    pp = _Preprocessor(
        include_dirs, diags if diags is not None else Diagnostics(), unique_macro_labels
    )
    file = str(path)
    cmdline = SourceLoc("<command line>", 1)
    for name, value in (defines or {}).items():
        text = f"{name} {value}" if value is not None and str(value) != "" else str(name)
        pp.define_from_text(text, cmdline, warn=False)
    if source_text is None:
        source_text = _read_source(Path(path), SourceLoc(file, 1))
    try:
        pp.run_file(file, source_text, None)
    except RecursionError:
        raise AsmError("source nested too deeply", pp.current or SourceLoc(file, 1)) from None
    return pp.out
