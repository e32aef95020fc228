"""What differs between the design a results folder was made with and the one run now.

A results folder holds the runs of one design.  Run again with the same design, the
experiment resumes; run with a changed one (levels, settings, --quick, a file a run
reads), `npk experiment run` refuses and names what changed, unless told `--force`
(runs whose configuration changed are then run again and their records replaced).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .design import Design, DesignError, design_from_dict

MAX_NAMED = 6  # differences named in the message


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths where two YAML trees differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in list(old) + [k for k in new if k not in old]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append(f"{sub} (added)")
            elif k not in new:
                out.append(f"{sub} (removed)")
            else:
                out += differences(old[k], new[k], sub)
        return out
    if old != new:
        return [f"{path or 'the design'}: {_short(old)} -> {_short(new)}"]
    return []


def _short(v: Any) -> str:
    text = yaml.safe_dump(v, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()
    return text if len(text) <= 60 else text[:57] + "..."


def stored_design_changes(root: Path, design: Design, config_hashes: dict[str, str]) -> list[str]:
    """What changed from the design stored in `root` (empty: none, or no design stored)."""
    stored = root / "design.yaml"
    manifest = root / "experiment.json"
    if not stored.is_file():
        return []
    try:
        data = yaml.safe_load(stored.read_text(encoding="utf-8"))
        before = design_from_dict(data, check_files=False).raw
    except (OSError, UnicodeDecodeError, yaml.YAMLError, DesignError) as e:
        return [f"the stored design.yaml cannot be read as a design ({e})"]
    out = differences(before, design.raw)
    if not out and manifest.is_file():
        import json

        try:
            old_hashes = json.loads(manifest.read_text(encoding="utf-8")).get("config_hashes") or {}
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            old_hashes = {}
        changed = sorted(r for r, h in config_hashes.items() if r in old_hashes and old_hashes[r] != h)
        if changed:
            out.append(f"the configuration of run(s) {', '.join(changed[:MAX_NAMED])} "
                       "(a file the design names changed)")  # fmt: skip
    return out


def describe(changes: list[str]) -> str:
    more = len(changes) - MAX_NAMED
    return "; ".join(changes[:MAX_NAMED]) + (f"; and {more} more" if more > 0 else "")
