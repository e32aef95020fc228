"""What `npk run`, `npk demo` and `npk debug` add to a run on request: per-context figures
(--contexts), per-instruction counts on the listing (--profile), an lcov tracefile of
the lines and branch directions it executed (--coverage FILE), and the source line of
every fault the chip logged.  The work is npkit.toolchain.debug.profile's; docs/profiling.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from npkit.asm.image import Program
from npkit.emulator.binding import Chip
from npkit.toolchain.debug.profile import (
    ProfileError,
    block_figures,
    collect,
    context_rows,
    format_context_rows,
    format_coverage,
    hot_instructions,
    locate_faults,
    program_coverage,
    write_lcov,
)

Placed = list[tuple[Program, list[int]]]


@dataclass
class Request:
    """What to add: `profile` True (every program) or a program's name (None: no listing),
    `coverage` the tracefile to write, `contexts` the per-context table in the text."""

    profile: bool | str | None = None
    coverage: str | None = None
    contexts: bool = False
    test_name: str = "npk"

    @property
    def counting(self) -> bool:
        return bool(self.profile) or self.coverage is not None


def coverage_option(fn: Any) -> Any:
    return click.option("--coverage", "coverage", default=None, type=click.Path(dir_okay=False),
                        metavar="FILE",
                        help="Write which microcode lines and branch directions the run executed to FILE, in "
                             "lcov's tracefile format (genhtml FILE -o DIR). Runs every word on the lock-step "
                             "path: slower.")(fn)  # fmt: skip


def start(chip: Chip, req: Request) -> None:
    """Turn the core's per-instruction profile on when the request needs it (before the run)."""
    if req.counting:
        chip.profile_enable(True)


def check_block(req: Request, placed: Placed) -> None:
    """--profile NAME names a program that runs (else a usage error listing those that do)."""
    if isinstance(req.profile, str) and req.profile not in {p.name for p, _ in placed}:
        names = ", ".join(sorted({p.name for p, _ in placed}))
        raise click.UsageError(f"--profile {req.profile}: no such block or program (these run: {names})")


def finish(chip: Chip, placed: Placed, req: Request, out: dict[str, Any], search: list[Path] | None = None) -> list[str]:
    """Add to the run's summary `out` what `req` asks for, the faults' source lines
    always; write the tracefile; return the text lines to print after the summary."""
    if "faults" in out:
        out["faults"] = locate_faults(out["faults"], placed, chip.me_name)
    lines: list[str] = []
    stats = chip.stats() if (req.contexts or "mes" in out or "me_utilisation" in out) else None
    if stats is not None:
        lines += _contexts(stats, placed, req, out)
    if not req.counting:
        return lines
    counts = collect(chip, placed, search)
    if req.profile:
        chosen = [c for c in counts if req.profile is True or c.program.name == req.profile]
        out["profile"] = {c.program.name: {"instructions": c.total, "exec": c.exec, "taken": c.taken,
                                           "hot": hot_instructions(c)} for c in chosen}  # fmt: skip
        from npkit.toolchain.debug.profile import annotated_listing

        lines += [annotated_listing(c) for c in chosen]
    if req.coverage is not None:
        try:
            write_lcov(req.coverage, counts, req.test_name)
        except ProfileError as e:
            raise click.ClickException(str(e)) from None
        summary = {c.program.name: program_coverage(c) for c in counts}
        out["coverage"] = {"file": req.coverage, "programs": summary}
        lines += [f"coverage written to {req.coverage} (lcov tracefile: genhtml {req.coverage} -o DIR)",
                  *format_coverage(summary)]  # fmt: skip
    return lines


def _contexts(stats: dict[str, Any], placed: Placed, req: Request, out: dict[str, Any]) -> list[str]:
    """Per-context rows into each ME of out["mes"], per-block figures into out["blocks"]
    (a router's summary); their text when req.contexts."""
    by_me = {m["me"]: m for m in stats["mes"]}
    lines: list[str] = []
    for m in out.get("mes", []):
        rows = context_rows(by_me[m["me"]])
        m["contexts"] = rows
        if req.contexts:
            lines += format_context_rows(m["me_name"], rows, indent="  ")
    if "me_utilisation" in out:
        out["blocks"] = block_figures(stats, [p for p, _ in placed])
        if req.contexts:
            lines += _block_lines(out["blocks"])
            for prog, mes in placed:
                for me in mes:
                    lines += format_context_rows(f"{by_me[me]['me_name']} ({prog.name})", context_rows(by_me[me]), "  ")
    return lines


def _block_lines(blocks: dict[str, dict[str, Any]]) -> list[str]:
    out = ["per block (summed over its MEs): instructions, ME cycles executing / aborted / stalled / idle, "
           "contexts' cycles waiting for a signal / ready"]  # fmt: skip
    for name, b in blocks.items():
        out.append(f"  {name:<14} instr {b['instructions']:>10}  exec {b['executing_cycles']:>10} aborted "
                   f"{b['aborted_cycles']:>9} stalled {b['stalled_cycles']:>9} idle {b['idle_cycles']:>10}  "
                   f"waiting {b['waiting_signal_cycles']:>11} ready {b['ready_cycles']:>10}  MEs {','.join(b['mes'])}")  # fmt: skip
    return out


class Extras:
    """A run's request bound to its chip and programs: the profile turned on at once (after
    loading, before running), finish() after the run."""

    def __init__(self, chip: Chip, placed: Placed, req: Request, search: list[Path] | None = None):
        self.chip, self.placed, self.req, self.search = chip, placed, req, search
        check_block(req, placed)
        start(chip, req)

    def finish(self, out: dict[str, Any]) -> str:
        """finish() on `out`; the text to print after the summary ("" or a newline first)."""
        lines = finish(self.chip, self.placed, self.req, out, self.search)
        return "\n" + "\n".join(lines) if lines else ""
