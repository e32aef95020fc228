#!/usr/bin/env python3
"""Sweep control-daemon kill/restart times over traffic specs and router layouts.

Runs, one at a time,
  npk run IMAGE --traffic SPEC --duration-ms D --kill-control-at K
      --restart-control-at K+GAP --json
and appends one JSON line per run (rc, verdict reasons, drop totals, the daemon's
restarts) to OUT.  Runs already in OUT are skipped, so an interrupted sweep resumes.

  tools/sweep_control_restart.py --image pipelined=/tmp/pipe.elf \
      --image parallel=/tmp/par.elf --spec examples/traffic/imix.yaml -o /tmp/out.jsonl
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def kill_times(first: float, last: float, count: int) -> list[float]:
    """COUNT kill times from FIRST to LAST ms, rounded to the microsecond."""
    if count == 1:
        return [first]
    step = (last - first) / (count - 1)
    return [round(first + i * step, 3) for i in range(count)]


def run_key(spec: str, layout: str, kill: float, gap: float) -> str:
    return f"{spec}|{layout}|{kill:.3f}|{gap:.3f}"


def summarise(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What the sweep keeps of one run's --json output."""
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": proc.stderr[-2000:] or proc.stdout[-2000:]}
    totals = data.get("totals", {})
    control = data.get("control_plane") or {}
    return {
        "reasons": data.get("verdict", {}).get("reasons", []),
        "dropped": totals.get("dropped", {}),
        "lost": totals.get("lost"),
        "restarts": control.get("restarts", []),
        "lost_half_handled": control.get("lost_half_handled"),
    }


def npk_command() -> str:
    """`npk` on PATH, else the one beside this Python (run with a venv's python, its bin/
    need not be on PATH); exit with a reason when there is neither."""
    found = shutil.which("npk") or shutil.which("npk", path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit("sweep_control_restart: no npk on PATH or beside this Python: run `make` first, "
                 "then put .venv/bin on PATH or run this script with .venv/bin/python")
    return found


def one_run(image: str, spec: str, duration: float, kill: float, gap: float) -> dict[str, Any]:
    cmd = [
        npk_command(), "run", image, "--traffic", spec, "--duration-ms", str(duration),
        "--kill-control-at", f"{kill:.3f}", "--restart-control-at", f"{kill + gap:.3f}",
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return {"rc": proc.returncode, "cmd": " ".join(cmd), **summarise(proc)}


def done_keys(out: Path) -> set[str]:
    if not out.exists():
        return set()
    return {json.loads(line)["key"] for line in out.read_text().splitlines() if line}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", action="append", required=True, help="LAYOUT=ELF")
    parser.add_argument("--spec", action="append", required=True)
    parser.add_argument("--gap", action="append", type=float, help="restart gap, ms")
    parser.add_argument("--first", type=float, default=0.1)
    parser.add_argument("--last", type=float, default=1.6)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--duration-ms", type=float, default=2.0)
    parser.add_argument("-o", "--out", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    images = dict(item.split("=", 1) for item in args.image)
    gaps = args.gap or [0.15, 0.35]
    seen = done_keys(args.out)
    failures = 0
    with args.out.open("a") as out:
        for spec in args.spec:
            for layout, image in images.items():
                for kill in kill_times(args.first, args.last, args.count):
                    for gap in gaps:
                        key = run_key(spec, layout, kill, gap)
                        if key in seen:
                            continue
                        record = {"key": key, **one_run(image, spec, args.duration_ms, kill, gap)}
                        out.write(json.dumps(record) + "\n")
                        out.flush()
                        failures += record["rc"] != 0
                        print(key, "rc", record["rc"], record.get("reasons", ""), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
