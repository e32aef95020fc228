"""Profiles and coverage of microcode runs: per-context figures, per-instruction counts on
a program's source, lcov tracefiles, and faults placed on their source line.

The counts come from the core's per-instruction profile (Chip.profile_enable, npk_emu.h
npk_profile_enable): per ME and control-store address, executions and, for conditional
branches, the times taken.  A program loaded on several MEs is counted over all of them.
Addresses map to source lines through the image's line table (SourceMap): a word counts
on its own line and on every macro call line that led to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npkit.asm.image import Program
from npkit.asm.isa import DecodeError, decode, isa
from npkit.emulator.binding import Chip

from .source import SourceMap, macro_frames, short

COND_BRANCH_CLASSES = ("branch", "br_bit", "br_byte")


class ProfileError(ValueError):
    """A profile or coverage request that cannot be met (its message says why)."""


# -- per-context figures -----------------------------------------------------------
def context_rows(me_stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Per context of one ME (Chip.stats()["mes"][i]): instructions (= executing cycles:
    one an instruction), cycles asleep waiting for a signal, ready but waiting for the ME,
    and idle (the rest: inactive, or holding the ME without issuing -- aborted branch
    bubbles, swaps, stalls), with their shares of the ME's elapsed cycles."""
    elapsed = sum(me_stats[k] for k in ("executing_cycles", "aborted_cycles", "stalled_cycles", "idle_cycles"))
    rows = []
    for i, c in enumerate(me_stats["ctx"]):
        ex, sl, rd = c["instructions"], c["sleep_cycles"], c["ready_cycles"]
        idle = max(0, elapsed - ex - sl - rd)
        rows.append({"ctx": i, "instructions": ex, "executing_cycles": ex, "waiting_signal_cycles": sl,
                     "ready_cycles": rd, "idle_cycles": idle,
                     "executing_pct": _pct(ex, elapsed), "waiting_signal_pct": _pct(sl, elapsed),
                     "ready_pct": _pct(rd, elapsed), "idle_pct": _pct(idle, elapsed)})  # fmt: skip
    return rows


def _pct(n: int, total: int) -> float:
    return round(100.0 * n / total, 2) if total else 0.0


def format_context_rows(me_name: str, rows: list[dict[str, Any]], indent: str = "    ") -> list[str]:
    """Text lines of context_rows; contexts that did nothing are left out."""
    out = [f"{indent}ME {me_name} ctx  instr/exec cyc   waiting signal        ready         idle"]
    for r in rows:
        if not (r["instructions"] or r["waiting_signal_cycles"] or r["ready_cycles"]):
            continue
        out.append(f"{indent}       {r['ctx']:>3} {r['instructions']:>10} {r['executing_pct']:5.1f}%"
                   f" {r['waiting_signal_cycles']:>10} {r['waiting_signal_pct']:5.1f}%"
                   f" {r['ready_cycles']:>9} {r['ready_pct']:5.1f}% {r['idle_cycles']:>9} {r['idle_pct']:5.1f}%")  # fmt: skip
    return out


def block_figures(stats: dict[str, Any], programs: list[Program]) -> dict[str, dict[str, Any]]:
    """Per program (a router block) over its MEs: instructions, the ME cycles by kind,
    and its contexts' cycles waiting for signals and ready (Chip.stats())."""
    by_me = {m["me"]: m for m in stats["mes"]}
    out: dict[str, dict[str, Any]] = {}
    for prog in programs:
        mes = [by_me[m] for m in prog.mes if m in by_me]
        if not mes:
            continue
        keys = ("instructions", "executing_cycles", "aborted_cycles", "stalled_cycles", "idle_cycles", "ctx_swaps")
        fig: dict[str, Any] = {k: sum(m[k] for m in mes) for k in keys}
        fig["waiting_signal_cycles"] = sum(c["sleep_cycles"] for m in mes for c in m["ctx"])
        fig["ready_cycles"] = sum(c["ready_cycles"] for m in mes for c in m["ctx"])
        fig["mes"] = [m["me_name"] for m in mes]
        out[prog.name] = fig
    return out


# -- counts by program -----------------------------------------------------------------
@dataclass
class ProgramCounts:
    """One program's per-address counts, summed over the MEs it ran on."""

    program: Program
    mes: list[int]
    exec: list[int]
    taken: list[int]
    source: SourceMap = field(repr=False)

    @property
    def total(self) -> int:
        return sum(self.exec)


def collect(chip: Chip, placed: list[tuple[Program, list[int]]], search: list[Path] | None = None) -> list[ProgramCounts]:
    """The profile's counts of each (program, its MEs) (the chip's profile must be on)."""
    out = []
    for prog, mes in placed:
        n = len(prog.words)
        ex, tk = [0] * n, [0] * n
        for me in mes:
            e, t = chip.profile(me, n)
            ex = [a + b for a, b in zip(ex, e, strict=True)]
            tk = [a + b for a, b in zip(tk, t, strict=True)]
        out.append(ProgramCounts(prog, list(mes), ex, tk, SourceMap(prog, list(search or []) + [Path.cwd()])))
    return out


def is_cond_branch(word: int) -> bool:
    """A branch with a direction to take or not (not `br[]`, which always goes)."""
    cls = isa().classify(word)
    if cls is None or cls.name not in COND_BRANCH_CLASSES:
        return False
    if cls.name != "branch":
        return True
    try:
        return not decode(word, 8).split("[", 1)[0].strip() == "br"
    except DecodeError:
        return False


def _disasm(word: int, ctx_mode: int) -> str:
    try:
        return decode(word, ctx_mode)
    except DecodeError as e:
        return f"<{e}>"


# -- annotated listing ------------------------------------------------------------------
def hot_instructions(pc: ProgramCounts, top: int = 10) -> list[dict[str, Any]]:
    """The `top` most executed words: address, count, share of the program's, source line."""
    total = pc.total
    order = sorted((a for a in range(len(pc.exec)) if pc.exec[a]), key=lambda a: (-pc.exec[a], a))[:top]
    rows = []
    for a in order:
        e = pc.source.entry(a)
        rows.append({"addr": a, "count": pc.exec[a], "pct": _pct(pc.exec[a], total),
                     "where": f"{short(e.file)}:{e.line}" if e else "?",
                     "instruction": _disasm(pc.program.words[a], pc.program.ctx_mode)})  # fmt: skip
    return rows


def annotated_listing(pc: ProgramCounts, top: int = 10) -> str:
    """The program word by word with its count and share, its branches' taken counts and
    its source line; then the hot instructions."""
    prog, total = pc.program, pc.total
    mes = ", ".join(str(m) for m in pc.mes)
    lines = [f"; profile of '{prog.name}' on ME(s) {mes}: {total} instructions executed",
             f"; {'addr':>5} {'count':>10} {'%':>6}  {'taken':>9}  {'disassembly':<44} | source"]  # fmt: skip
    for a, word in enumerate(prog.words):
        label = pc.source.label_at.get(a)
        if label:
            lines.append(f"{'':36}{label}#:")
        e = pc.source.entry(a)
        src = ""
        if e is not None:
            src = f"{short(e.file)}:{e.line}  {pc.source.source_line(e.file, e.line).strip()}"
        taken = f"{pc.taken[a]:>9}" if is_cond_branch(word) else f"{'':>9}"
        count = f"{pc.exec[a]:>10}" if pc.exec[a] else f"{'.':>10}"
        lines.append(f"  {a:>5} {count} {_pct(pc.exec[a], total):6.2f}  {taken}  "
                     f"{_disasm(word, prog.ctx_mode):<44} | {src}")  # fmt: skip
    lines.append(f"; hot instructions of '{prog.name}':")
    for r in hot_instructions(pc, top):
        lines.append(f";   {r['addr']:>5} {r['count']:>10} {r['pct']:6.2f}%  {r['where']:<28} {r['instruction']}")
    return "\n".join(lines)


# -- coverage (lcov) ----------------------------------------------------------------------
@dataclass
class FileCoverage:
    """One source file's lines (line -> count, the most any of its words ran) and branches
    ((line, block, branch) -> taken count, None: never evaluated)."""

    path: str
    lines: dict[int, int] = field(default_factory=dict)
    branches: dict[tuple[int, int, int], int | None] = field(default_factory=dict)

    def line_hit(self, line: int, count: int) -> None:
        self.lines[line] = max(self.lines.get(line, 0), count)

    def branch(self, line: int, block: int, taken: int | None, not_taken: int | None) -> None:
        for br, n in ((0, taken), (1, not_taken)):
            key = (line, block, br)
            old = self.branches.get(key)
            self.branches[key] = n if old is None else old + (n or 0)

    @property
    def hit(self) -> int:
        return sum(1 for n in self.lines.values() if n)

    @property
    def branches_hit(self) -> int:
        return sum(1 for n in self.branches.values() if n)


def _resolve(sm: SourceMap, recorded: str) -> str:
    """The recorded source path as an existing file when one is found (absolute), else as recorded."""
    for p in [Path(recorded)] + [d / recorded for d in sm.search]:
        if p.is_file():
            return str(p.resolve())
    return recorded


def coverage(counts: list[ProgramCounts]) -> dict[str, FileCoverage]:
    """Coverage by source file over all programs: a file a program shares with another
    (a header of macros) adds up; a line counts the most any one of its words ran in each
    program, summed over programs."""
    files: dict[str, FileCoverage] = {}
    for k, pc in enumerate(counts):
        per_prog: dict[str, FileCoverage] = {}
        for e in pc.program.lines:
            if e.addr >= len(pc.exec):
                continue
            n = pc.exec[e.addr]
            sites = [(e.file, e.line)] + [(f.file, f.line) for f in macro_frames(e)]
            word = pc.program.words[e.addr]
            cond = is_cond_branch(word)
            for file, line in dict.fromkeys(sites):
                fc = per_prog.setdefault(file, FileCoverage(file))
                fc.line_hit(line, n)
                if cond:
                    t = pc.taken[e.addr]
                    fc.branch(line, k * 100_000 + e.addr, t if n else None, n - t if n else None)
        for file, fc in per_prog.items():
            path = _resolve(pc.source, file)
            tot = files.setdefault(path, FileCoverage(path))
            for line, n in fc.lines.items():
                tot.lines[line] = tot.lines.get(line, 0) + n
            for key, v in fc.branches.items():
                tot.branches[key] = v if key not in tot.branches or tot.branches[key] is None else tot.branches[key] + (v or 0)
    return files


def lcov_text(files: dict[str, FileCoverage], test_name: str = "npk") -> str:
    """lcov's tracefile format (geninfo(1)): per source file SF, DA per line, BRDA per
    branch direction (0 taken, 1 not taken; '-' never evaluated), LF/LH/BRF/BRH.  Sources
    that are no file (what the linker generates, `<npk link>/...`) are left out: genhtml
    and editors read the text of every file named."""
    out = []
    for path in sorted(p for p in files if Path(p).is_file()):
        fc = files[path]
        out += [f"TN:{_tn(test_name)}", f"SF:{path}"]
        for (line, block, br), n in sorted(fc.branches.items()):
            out.append(f"BRDA:{line},{block},{br},{'-' if n is None else n}")
        out += [f"BRF:{len(fc.branches)}", f"BRH:{fc.branches_hit}"]
        out += [f"DA:{line},{n}" for line, n in sorted(fc.lines.items())]
        out += [f"LF:{len(fc.lines)}", f"LH:{fc.hit}", "end_of_record"]
    return "\n".join(out) + "\n"


def _tn(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def write_lcov(path: str | Path, counts: list[ProgramCounts], test_name: str = "npk") -> dict[str, FileCoverage]:
    """Write the tracefile of `counts` to `path`; returns the coverage by file."""
    files = coverage(counts)
    try:
        Path(path).write_text(lcov_text(files, test_name))
    except OSError as e:
        raise ProfileError(f"{path}: cannot write the coverage tracefile: {e.strerror}") from None
    return files


def program_coverage(pc: ProgramCounts) -> dict[str, Any]:
    """One program's coverage summary: lines and branch directions with code, hit, and the
    lines of its own source files (not shared headers) that never ran."""
    files = coverage([pc])
    lf = sum(len(f.lines) for f in files.values())
    lh = sum(f.hit for f in files.values())
    brf = sum(len(f.branches) for f in files.values())
    brh = sum(f.branches_hit for f in files.values())
    missed = {short(p): sorted(n for n, c in f.lines.items() if not c) for p, f in files.items()}
    return {"lines": lf, "lines_hit": lh, "branches": brf, "branches_hit": brh,
            "line_pct": _pct(lh, lf), "branch_pct": _pct(brh, brf),
            "missed_lines": {p: ls for p, ls in missed.items() if ls}}  # fmt: skip


def format_coverage(summary: dict[str, dict[str, Any]]) -> list[str]:
    """One line per program of program_coverage."""
    return [f"  {name:<16} lines {c['lines_hit']}/{c['lines']} ({c['line_pct']:.1f} %), "
            f"branch directions {c['branches_hit']}/{c['branches']} ({c['branch_pct']:.1f} %)"
            for name, c in summary.items()]  # fmt: skip


# -- faults on their source line -----------------------------------------------------------
def fault_source(placed: list[tuple[Program, list[int]]], me: int, pc: int) -> str | None:
    """file:line (in macro ...) of address pc of the program on ME me, or None."""
    from .source import where

    for prog, mes in placed:
        if me in mes:
            e = next((x for x in prog.lines if x.addr == pc), None)
            return where(e) if e is not None else None
    return None


def locate_faults(faults: dict[str, Any], placed: list[tuple[Program, list[int]]],
                  me_name: Callable[[int], str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Chip.faults() with each logged fault's source line added (`source`; None: an API
    call, or an address the image has no line for) and, given `me_name`, its ME's name."""
    last = []
    for f in faults.get("last", []):
        g = {**f, "source": fault_source(placed, f["me"], f["pc"]) if f["me"] >= 0 else None}
        if me_name is not None and f["me"] >= 0:
            g["me_name"] = me_name(f["me"])
        last.append(g)
    return {**faults, "last": last}


# -- which program runs where ----------------------------------------------------------------
def placement(images: list[Any], loaded: list[dict[int, str]]) -> list[tuple[Program, list[int]]]:
    """(program, its MEs) of images loaded as the loader reports it (per image: ME ->
    program name); programs loaded nowhere are left out."""
    out = []
    for img, each in zip(images, loaded, strict=True):
        for prog in img.programs:
            mes = sorted(me for me, name in each.items() if name == prog.name)
            if mes:
                out.append((prog, mes))
    return out


def image_placement(image: Any) -> list[tuple[Program, list[int]]]:
    """(program, its MEs) of a linked image (each program names its MEs)."""
    return [(p, list(p.mes)) for p in image.programs if p.mes]


def fault_site_lines(faults: dict[str, Any], limit: int = 8) -> list[str]:
    """One line per distinct (kind, ME, PC) among the faults kept (locate_faults): the
    thread, the PC and its source line."""
    sites: dict[tuple[str, int, int], dict[str, Any]] = {}
    for f in faults.get("last", []):
        sites.setdefault((f["kind"], f["me"], f["pc"]), f)
    out = []
    for (kind, me, pc), f in list(sites.items())[-limit:]:
        who = f"ME {f.get('me_name', me)} ctx {f['ctx']} pc {pc}" if me >= 0 else "an API call"
        src = f" at {f['source']}" if f.get("source") else ""
        out.append(f"  {kind} at {who}{src}: address 0x{f['address']:x} (cycle {f['cycle']})")
    return out


# -- tracefiles merged (runs of several chips, test workers) -----------------------------------
def merge_coverage(into: dict[str, FileCoverage], more: dict[str, FileCoverage]) -> None:
    """Add `more` to `into`: line counts and branch counts add up (a branch evaluated in
    either is evaluated)."""
    for path, fc in more.items():
        tot = into.setdefault(path, FileCoverage(path))
        for line, n in fc.lines.items():
            tot.lines[line] = tot.lines.get(line, 0) + n
        for key, v in fc.branches.items():
            old = tot.branches.get(key)
            tot.branches[key] = v if old is None else old + (v or 0)


def read_lcov(text: str, origin: str = "<tracefile>") -> dict[str, FileCoverage]:
    """The SF / DA / BRDA records of an lcov tracefile (what lcov_text writes); a malformed
    record is a ProfileError naming origin:line."""
    files: dict[str, FileCoverage] = {}
    cur: FileCoverage | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        key, _, val = raw.strip().partition(":")
        try:
            if key == "SF":
                cur = files.setdefault(val, FileCoverage(val))
            elif key == "DA" and cur is not None:
                line, count = val.split(",")[:2]
                cur.lines[int(line)] = cur.lines.get(int(line), 0) + int(count)
            elif key == "BRDA" and cur is not None:
                line, block, br, taken = val.split(",")
                k = (int(line), int(block), int(br))
                t = None if taken == "-" else int(taken)
                old = cur.branches.get(k)
                cur.branches[k] = t if old is None else old + (t or 0)
            elif key == "end_of_record":
                cur = None
        except ValueError:
            raise ProfileError(f"{origin}:{n}: not an lcov record: {raw.strip()!r}") from None
    return files


def missed_ranges(lines: list[int]) -> str:
    """Sorted line numbers as ranges: '12, 40-45, 300'."""
    out: list[str] = []
    for n in lines:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)
