"""Tab completion for `npk debug`: every word of every command, from the session's state.

`candidates(session, text)` is the grammar (which words fit where the cursor is: commands,
labels, `FILE:` and its lines with code, `.reg` names of the current thread, memory spaces,
threads, breakpoint numbers, `set` targets); `DebugCompleter` hands them to prompt_toolkit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from npkit.asm.isa import isa
from npkit.emulator.binding import MEM_SPACES

from .source import short

if TYPE_CHECKING:
    from .session import Session

MAX_LINES = 400  # line numbers offered after FILE:
_EXPR_WORD = re.compile(r"[\w$@.#]*$")

Candidate = tuple[str, str]  # (text, what it is)


def _commands(session: Session) -> list[Candidate]:
    out = [(c, session.commands[c][1].split("  ")[0]) for c in session.commands]
    return out + [(a, f"= {c}") for a, c in session.aliases.items()]


def _labels(session: Session, mes: Iterable[int]) -> list[Candidate]:
    out: dict[str, str] = {}
    for me in mes:
        for name, addr in session.target.smap(me).labels.items():
            out.setdefault(name, f"label, address {addr}")
    return sorted(out.items())


def _files(session: Session) -> dict[str, str]:
    """Recorded source paths of every loaded program, as the user would type them."""
    out: dict[str, str] = {}
    for me in session.target.mes:
        for f in session.target.smap(me).files():
            out.setdefault(short(f), f)
    return out


def _locations(session: Session, word: str) -> list[Candidate]:
    """FILE:LINE (files, then the lines with code), labels, for break and list."""
    file, colon, line = word.rpartition(":")
    if colon:
        out: list[Candidate] = []
        for me in session.target.mes:
            sm = session.target.smap(me)
            for f in sm.files():
                if not (short(f) == file or Path(f).name == file or short(f).endswith("/" + file)):
                    continue
                for n, what in sorted(sm.code_lines(f).items()):
                    if str(n).startswith(line):
                        src = sm.source_line(f, n).strip()
                        out.append((f"{file}:{n}", f"{what}: {src}" if what else src))
        return _unique(out)[:MAX_LINES]
    out = []
    for shown, _ in _files(session).items():
        out.append((Path(shown).name + ":", shown))
        if "/" in word:
            out.append((shown + ":", "source file"))
    return out + _labels(session, session.target.mes)


def _names(session: Session) -> list[Candidate]:
    """Names an expression can use in the current thread: .reg names, labels, signals, memory."""
    sm = session.target.smap(session.me)
    out = [(r.name, f".reg {r.phys}" + (f" [{r.scope}]" if r.scope else "")) for r in sm.regs]
    out += _labels(session, [session.me])
    out += [(k, f"signal s{v}") for k, v in sm.signals.items()]
    out += [(k, "memory symbol") for k in sm.mems]
    return out


def _threads(session: Session) -> list[Candidate]:
    return [(f"{session.nm(me)}:{ctx}", f"ME {session.nm(me)} ctx {ctx} ({session.target.loaded[me]})")
            for me in session.target.mes for ctx in session.target.ctxs(me)]  # fmt: skip


def _set_targets(session: Session) -> list[Candidate]:
    sm = session.target.smap(session.me)
    out = [(r.name, f".reg {r.phys}") for r in sm.regs]
    out += [("pc", "program counter"), ("cc", "condition codes"), ("signals", "pending signals")]
    out += [(f"{m}[", f"memory: {m}[ADDR] or {m}[ADDR, WIDTH]") for m in MEM_SPACES]
    return out + [(c, "local CSR") for c in sorted(isa().local_csrs)]


def _arguments(session: Session, cmd: str, before: list[str], text: str) -> list[Candidate]:
    """Candidates for the next word of command `cmd` after the words `before`."""
    n = len(before)
    if cmd in ("break", "list"):
        if n == 0:
            return []  # the location: handled by the caller (a whole word)
        if cmd == "break" and "if" not in before:
            return [("if", "condition")] if n == 1 else []
        return _names(session) if cmd == "break" else []
    if cmd == "watch":
        if n == 0:
            sm = session.target.smap(session.me)
            return [(m, "memory: ADDR [LEN]") for m in MEM_SPACES] + [(r.name, f".reg {r.phys}") for r in sm.regs]
        return _names(session) if before[0] in MEM_SPACES and n < 3 else []
    if cmd == "mem":
        return [(m, "memory space") for m in MEM_SPACES] if n == 0 else _names(session) if n < 3 else []
    if cmd in ("print", "queues"):
        return _names(session)
    if cmd == "packet":
        return _names(session) + [("pad", "frame offset in the buffer"), ("len", "frame length")]
    if cmd == "set":
        if "=" in text or "[" in text:  # the value, or the address inside MEM[...]
            return _names(session)
        return _set_targets(session) if n == 0 else [("=", "")]
    if cmd in ("thread", "regs"):
        return _threads(session) if n == 0 else []
    if cmd == "step":
        return _threads(session) if n < 2 else []
    if cmd == "signals":
        return [(str(me), session.target.loaded[me]) for me in session.target.mes] if n == 0 else []
    if cmd == "delete":
        nums = [(str(k), f"break {b.spec}") for k, b in session.breaks.items()]
        return nums + [(str(k), f"watch {w.spec}") for k, w in session.watches.items()]
    if cmd == "help":
        return [(c, "") for c in session.commands] if n == 0 else []
    return []


def candidates(session: Session, text: str) -> tuple[str, list[Candidate]]:
    """(the word being completed, the words that can stand there) for the command line
    `text` up to the cursor."""
    stripped = text.lstrip()
    if not re.search(r"\s", stripped):
        return stripped, _unique(c for c in _commands(session) if c[0].startswith(stripped))
    cmd_word = stripped.split()[0]
    rest = stripped[len(cmd_word) :]
    cmd = session.command_name(cmd_word)
    if cmd is None:
        return "", []
    words = rest.split()
    ends_open = rest[-1].isspace()
    before = words if ends_open else words[:-1]
    last = "" if ends_open else words[-1]
    if cmd in ("break", "list") and not before:
        return last, _unique(c for c in _locations(session, last) if c[0].startswith(last))
    cands = _arguments(session, cmd, before, rest)
    if cmd in ("print", "packet", "queues") or (cmd == "set" and ("=" in rest or "[" in rest)) \
            or "if" in before or (cmd in ("watch", "mem") and before):  # fmt: skip
        m = _EXPR_WORD.search(last)
        last = m[0] if m else ""
    return last, _unique(c for c in cands if c[0].startswith(last))


def _unique(cands: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per text (the first one's description)."""
    seen: dict[str, str] = {}
    for text, meta in cands:
        seen.setdefault(text, meta)
    return list(seen.items())


class DebugCompleter(Completer):
    """prompt_toolkit completer over a Session (reads its state at every Tab)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        word, cands = candidates(self.session, document.text_before_cursor)
        for text, meta in cands:
            yield Completion(text, start_position=-len(word), display_meta=meta)
