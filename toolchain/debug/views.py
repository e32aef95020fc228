"""What `rings` and `stats` say about a linked router beyond the chip's own counters: the
layout's name for each scratch ring (with who puts and who gets), the router's drop and
exception counters by reason, and the counter updates still in flight (a thread's
`scratch[incr]` / `scratch[add]` issued but not yet landed, so that a reading between
them is not taken for a wrong count)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from npkit.emulator.binding import UNITS, HistEvent

from .events import is_command

COUNTER_COMMANDS = ("incr", "add", "decr", "sub", "test_and_incr", "test_and_add")
STAT_SPAN = 4096  # bytes of scratch from stat_port_base that hold the router's counters


def ring_names(meta: Mapping[str, Any]) -> dict[int, str]:
    """Scratch ring number -> `name (producers -> consumers)` from a linked image's layout."""
    rings = meta.get("rings")
    if not isinstance(rings, dict):
        return {}
    control = meta.get("control") if isinstance(meta.get("control"), dict) else {}
    out: dict[int, str] = {}
    for name, r in rings.items():
        if not isinstance(r, dict) or not isinstance(r.get("ring"), int):
            continue
        puts = list(r.get("producers") or [])
        gets = list(r.get("consumers") or [])
        if control and control.get("ring") == name and not puts:
            puts = [f"control plane ({control.get('placement', '?')})"]
        if name == meta.get("exceptions") and not gets:
            gets = ["control plane"]
        who = f" ({', '.join(puts) or '?'} -> {', '.join(gets) or '?'})" if puts or gets else ""
        out[int(r["ring"])] = f"{name}{who}"
    return out


def counters_in_flight(events: Iterable[HistEvent], sysmap: Mapping[str, Any]) -> int:
    """Scratch commands to the router's counters issued and not yet completed."""
    unit = UNITS.index("scratch")
    lo = int(sysmap.get("stat_port_base", 0))
    pending: Counter[tuple[int, int, int]] = Counter()
    for e in events:
        if e.unit != unit or not lo <= e.a1 < lo + STAT_SPAN or not is_command(e, *COUNTER_COMMANDS):
            continue  # (ring puts and gets name their ring in the address field)
        key = (e.me, e.ctx, e.a1)
        if e.kind == "mem_issue":
            pending[key] += 1
        elif e.kind == "mem_done" and pending[key] > 0:
            pending[key] -= 1
    return sum(pending.values())


def reason_lines(counters: Mapping[str, Any]) -> list[str]:
    """The router's drop and exception counters by reason, a line each kind ('none' too)."""
    out = []
    for kind in ("drops", "exceptions"):
        by = counters.get(kind) or {}
        total = sum(by.values())
        shown = ", ".join(f"{k} {v}" for k, v in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(f"  router {kind} by reason: " + (f"{total} ({shown})" if by else "none"))
    return out


def msf_drops(ps: Mapping[str, int]) -> str:
    """An MSF port's receive drops, with the reason of each when there are any."""
    parts = {"rbuf full": ps["rx_drop_rbuf_full"], "no rx thread": ps["rx_drop_no_rx_thread"],
             "oversize": ps["rx_drop_oversize"]}  # fmt: skip
    total = sum(parts.values())
    why = ", ".join(f"{k} {v}" for k, v in parts.items() if v)
    return f"dropped {total}" + (f" ({why})" if why else "")
