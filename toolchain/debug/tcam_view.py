"""What the debugger shows of the chip's TCAM (docs/tcam.md): `print tcam[N]` (one
entry, with the application table and row it holds, if any), `tcam` / `info tcam` (the
valid entries and the counters) and the SRAM span `watch tcam[N]` watches."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.tcam import E_CONTROL, ENTRY_BYTES

ENTRY_RE = re.compile(r"^\s*tcam\s*\[(?P<n>.+)\]\s*$")
MAX_LISTED = 64  # valid entries `tcam` lists at most


class TcamViewError(ValueError):
    """The chip has no TCAM, or no such entry."""


def info(chip: Chip) -> dict[str, int]:
    t = chip.tcam_info()
    if t is None:
        raise TcamViewError(f"chip config {chip.config.get('name', '')} has no TCAM (docs/tcam.md)")
    return t


def entry_span(chip: Chip, n: int) -> tuple[int, int]:
    """(SRAM address, length) of entry n's key, mask, result and control words."""
    t = info(chip)
    if not 0 <= n < t["entries"]:
        raise TcamViewError(f"tcam[{n}]: the TCAM has entries 0..{t['entries'] - 1}")
    return t["base"] + n * ENTRY_BYTES, E_CONTROL + 4


def _owner(meta: Mapping[str, Any], n: int) -> str:
    """`table NAME row R` when entry n holds a row of the image's tcam tables."""
    tables = ((meta.get("app") or {}).get("tables") or {}) if isinstance(meta, Mapping) else {}
    for name, t in tables.items():
        if isinstance(t, dict) and t.get("memory") == "tcam":
            first = int(t.get("first_entry", 0))
            if first <= n < first + len(t.get("rows") or ()):
                return f"  (table {name} row {n - first})"
    return ""


def entry_text(chip: Chip, n: int, meta: Mapping[str, Any] | None = None) -> str:
    """tcam[n]: valid or not, key/mask (the key's longwords), result."""
    entry_span(chip, n)
    kw = info(chip)["key_words"]
    e = chip.tcam_read(n)
    key = " ".join(f"{w:08x}" for w in e["key"][:kw])
    mask = " ".join(f"{w:08x}" for w in e["mask"][:kw])
    state = "valid" if e["valid"] else "invalid"
    return f"tcam[{n}]: {state} key {key} mask {mask} result 0x{e['result']:016x}{_owner(meta or {}, n)}"


def listing(chip: Chip, meta: Mapping[str, Any] | None = None) -> list[str]:
    """The counters, then the valid entries (the first MAX_LISTED)."""
    t = info(chip)
    st = chip.tcam_stats()
    out = [f"tcam at sram 0x{t['base']:08x}: {t['entries']} entries of {t['key_bits']}-bit keys; "
           f"lookups {st['lookups']} hits {st['hits']} multi-hits {st['multi_hits']}"]  # fmt: skip
    valid = [n for n in range(t["entries"]) if chip.read32("sram", t["base"] + n * ENTRY_BYTES + E_CONTROL) >> 31]
    out += [entry_text(chip, n, meta) for n in valid[:MAX_LISTED]]
    if len(valid) > MAX_LISTED:
        out.append(f"... {len(valid) - MAX_LISTED} more valid entries (print tcam[N])")
    if not valid:
        out.append("no valid entry")
    return out
