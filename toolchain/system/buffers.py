"""The audit of the packet buffers at the end of a run (microcode/README.md §2).

Once a run has gone idle (nothing on a ring, in a queue or in the MSF) every buffer is
on the free list or held by one of the two that keep buffers at rest, and says so:

* rx: each of its contexts keeps a spare buffer, taken off the free list ahead of the
  next frame (§4.6), in its `spare` register (bit 31 set: one is there);
* the control daemon: its table of the buffers it owns (xscale/npkd/cp.h, read by
  `control.owned_buffers`): held for ARP, waiting for room on the control ring -- and
  the buffers a killed daemon held, until the next one gives them back.

A buffer neither free nor held has leaked; one both free and held, or a free list that
does not chain its count of descriptors from head to tail, is a double free.
"""

from __future__ import annotations

from typing import Any

from .sysmap import SYS


def free_list(chip: Any) -> tuple[list[int], str]:
    """The buffer handles on the free list, head to tail, and what is wrong with the list
    ('' when nothing): a descriptor that is no buffer's, one met twice, a count that is
    not the chain's length, a tail that is not the last descriptor."""
    head, tail, count = (chip.read32("sram", SYS.freelist_q + 4 * j) for j in range(3))
    raw = chip.mem_read("sram", SYS.desc_base, SYS.n_bufs << SYS.desc_shift)
    handles: list[int] = []
    seen: set[int] = set()
    d = head
    while len(handles) < count:
        h = (d - SYS.desc_base) >> SYS.desc_shift
        if not 0 <= h < SYS.n_bufs or SYS.desc_addr(h) != d:
            return handles, f"the free list's element {len(handles)} is {d:#x}, no buffer's descriptor"
        if h in seen:
            return handles, f"buffer {h} is on the free list twice"
        seen.add(h)
        handles.append(h)
        off = h << SYS.desc_shift
        d = int.from_bytes(raw[off : off + 4], "big")
    if count and SYS.desc_addr(handles[-1]) != tail:
        return handles, f"the free list's tail {tail:#x} is not its last descriptor"
    if not count and head:
        return handles, f"the free list counts 0 but its head is {head:#x}"
    return handles, ""


def rx_spares(chip: Any, image: Any) -> list[int] | None:
    """The buffers rx's contexts keep as spares (None: the image has no rx block with a
    `spare` register to read)."""
    out: list[int] = []
    found = False
    for prog in image.programs:
        if prog.name != "rx":
            continue
        reg = next((s.value for s in prog.symbols if s.kind == "reg" and s.name == "spare"), None)
        if not isinstance(reg, str):
            return None
        found = True
        mask = prog.ctx_enable or (0x55 if prog.ctx_mode == 4 else 0xFF)
        for me in prog.mes:
            for ctx in (c for c in range(8) if mask >> c & 1):
                v = chip.reg(me, reg, ctx)
                if v >> 31:
                    out.append(v & 0xFFFF)
    return out if found else None


def audit(chip: Any, image: Any, owned: list[int] | None, claimed: int | None = None) -> tuple[dict[str, Any], list[str]]:
    """The buffers at the end of an idle run: {total, free, rx_spares, control_plane,
    leaked} and the problems found (none: []).  `owned`: the daemon's table (None: no
    daemon); `claimed`: what a running daemon says it holds (held for ARP, send backlog),
    which its table must mark, no more (None: it is not running)."""
    free, broken = free_list(chip)
    spares = rx_spares(chip, image)
    held = owned or []
    out: dict[str, Any] = {"total": SYS.n_bufs, "free": len(free), "rx_spares": None if spares is None else len(spares),
                           "control_plane": len(held), "leaked": None}  # fmt: skip
    if broken:
        return out, [f"buffers: {broken}"]
    problems = []
    if claimed is not None and claimed != len(held):
        problems.append(f"buffers: the control daemon's table marks {len(held)} as its own, it holds {claimed}")
    if spares is None:
        return out, problems
    free_set = set(free)
    for who, hs in (("an rx context's spare", spares), ("the control daemon's", held)):
        both = sorted(set(hs) & free_set)
        if both:
            problems.append(f"buffers on the free list and {who} too (freed twice): {both[:10]}")
    leaked = sorted(set(range(SYS.n_bufs)) - free_set - set(spares) - set(held))
    out["leaked"] = len(leaked)
    if leaked:
        more = " ..." if len(leaked) > 10 else ""
        problems.append(f"{len(leaked)} buffer{'' if len(leaked) == 1 else 's'} leaked: neither on the free list "
                        f"nor held by rx or the control daemon (handles {leaked[:10]}{more})")  # fmt: skip
    return out, problems
