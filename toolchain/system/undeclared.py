"""Drop and exception codes no reason declares (issue 45, "the judge is general").

The microcode counts each drop at `STAT_DROP_BASE + 4 * code` and each exception at
`STAT_EXC_BASE + 4 * code` in scratch (microcode/include/npk_block.h, `npk_emit`).  A
code that the reasons table does not declare used to leave its packets with no fate,
so a run reported them as stuck.  A router run now guards both counter tables
(`npk_scratch_guard`, npk_emu.h): the emulator records the first thread (ME, context
and PC of the instruction) that counted each undeclared code, at no cost to a run that
counts none, and the judge attributes those drops to packets under the name
`undeclared_code_<N>` and fails the run saying which code came from where.
"""

from __future__ import annotations

import struct
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.me_names import me_name, per_cluster
from npkit.emulator.traffic.reasons import Kind, ReasonError, Reasons

from .sysmap import SYS

PREFIX = "undeclared_code_"
CODES = 256  # counters a table (sysmap: 256 drop counters, then 256 exception counters)


def undeclared_name(code: int) -> str:
    """The name a drop or exception of an undeclared code is attributed under."""
    return f"{PREFIX}{code}"


def reason_name(reasons: Reasons, kind: Kind, code: int) -> str:
    """The name a counted or recorded code goes by: its reason's, or `undeclared_name`."""
    try:
        return reasons.get(kind, code).name
    except ReasonError:
        return undeclared_name(code)


def is_undeclared(reason: str) -> bool:
    return reason.startswith(PREFIX)


def arm_guard(chip: Chip, reasons: Reasons) -> None:
    """Guard the drop and exception counters: a thread that counts a code `reasons` does
    not declare is recorded (Chip.guard_hits)."""
    assert SYS.stat_exc_base == SYS.stat_drop_base + 4 * CODES
    drops = {r.code for r in reasons.drops.values()}
    excs = {r.code for r in reasons.exceptions.values()}
    allowed = [c in drops for c in range(CODES)] + [c in excs for c in range(CODES)]
    chip.scratch_guard(SYS.stat_drop_base, allowed)


def undeclared_counts(chip: Chip, reasons: Reasons) -> dict[tuple[str, int], int]:
    """{("drop" | "exception", code): count} of the counters no reason declares."""
    raw = chip.mem_read("scratch", SYS.stat_drop_base, 8 * CODES)
    values = struct.unpack(f">{2 * CODES}I", raw)
    out: dict[tuple[str, int], int] = {}
    for kind, table, first in (("drop", reasons.drops, 0), ("exception", reasons.exceptions, CODES)):
        declared = {r.code for r in table.values()}
        for code in range(CODES):
            n = values[first + code]
            if n and code not in declared:
                out[(kind, code)] = n
    return out


def _block_at(programs: list[Any], me: int, pc: int) -> tuple[str, str]:
    """The program (block) on flat ME `me` and the source line of its instruction `pc`
    ("file:line", "" when the image has no line table)."""
    for prog in programs:
        if me in (getattr(prog, "mes", None) or []):
            lines = [e for e in getattr(prog, "lines", []) if e.addr == pc]
            return prog.name, (f"{lines[0].file}:{lines[0].line}" if lines else "")
    return "", ""


def report(chip: Chip, counts: dict[tuple[str, int], int], programs: list[Any] | None = None) -> list[dict[str, Any]]:
    """One entry a code counted that no reason declares: kind, code, packets, and where
    the first came from (me, ctx, pc, cycle: the guard's record, and from `programs`,
    the image's, the block and source line; absent when the guard did not see it), with
    `why`, the sentence the verdict gives."""
    hits = {h["addr"]: h for h in chip.guard_hits()}
    k = per_cluster(chip.config)
    out = []
    for (kind, code), n in sorted(counts.items()):
        base = SYS.stat_drop_base if kind == "drop" else SYS.stat_exc_base
        hit = hits.get(base + 4 * code)
        verb = "dropped" if kind == "drop" else "sent to the exception path"
        entry: dict[str, Any] = {"kind": kind, "code": code, "packets": n}
        if hit is not None and hit["me"] >= 0:
            name = me_name(hit["me"], k)
            block, line = _block_at(programs or [], hit["me"], hit["pc"])
            entry.update(me=name, ctx=hit["ctx"], pc=hit["pc"], cycle=hit["cycle"], block=block, source=line)
            where = f"ME {name} ctx {hit['ctx']} pc {hit['pc']}"
            known = [x for x in (f"block {block}" if block else "", line) if x]
            if known:
                where += f" ({', '.join(known)})"
        else:
            where = "the microcode"
        entry["why"] = (f"{where} {verb} with code {code}, which no reason declares: {n} packet"
                        f"{'s' if n != 1 else ''} (the {kind} codes of microcode/reasons.yaml)")  # fmt: skip
        out.append(entry)
    return out
