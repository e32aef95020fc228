#!/usr/bin/env python3
"""The emulator benchmarks' loops on the C core alone (tools/core_counts.c): ME
instructions per host second, and a fingerprint of the final state that a change to the
core must keep; with --callgrind, the host instructions inside npk_run as well (valgrind
counts them exactly, whatever else the machine is doing).  docs/performance-log.md says how
the figures there were made with it.

  tools/core_counts.py [--loop mem|alu] [--cycles N] [--callgrind] [--src DIR] [--mes N]

--src: another tree's emulator/ (a worktree of an older commit) to build and run instead
of this one's -- the way to compare two versions in one run.  --mes: the loop on the first
N MEs only (the others stay disabled).  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tools" / "core_counts.c"
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-g", "-fno-semantic-interposition",
          "-D_POSIX_C_SOURCE=200809L"]  # fmt: skip


def _inputs(work: Path, loop: str) -> tuple[Path, Path, Path]:
    """The ixp2800 config as an npk_config's bytes, the loop's words, and every context's
    a1 and b1 as toolchain/bench/emulator.py sets them (ME by ME, context by context), in `work`."""
    from npkit.emulator.binding import _ffi, _fill_config, load_config
    from npkit.toolchain.bench.emulator import ALU_LOOP, MEM_LOOP, _loop_regs, _words

    ffi = _ffi()
    cfg = load_config("ixp2800")
    config, words, regs = work / "config.bin", work / "words.txt", work / "regs.txt"
    config.write_bytes(bytes(ffi.buffer(_fill_config(ffi, cfg))))
    words.write_text("".join(f"{w:x}\n" for w in _words(MEM_LOOP if loop == "mem" else ALU_LOOP)))
    pairs = (_loop_regs(me, ctx) for me in range(cfg["num_me"]) for ctx in range(8))
    regs.write_text("".join(f"{a1:x} {b1:x}\n" for a1, b1 in pairs))
    return config, words, regs


def build(emulator: Path, out: Path) -> None:
    """The driver linked with the core's sources under `emulator` (its src/gen header made
    by `make` there)."""
    srcs = sorted((emulator / "src").glob("*.c")) + sorted((emulator / "src" / "units").glob("*.c"))
    incs = [f"-I{emulator / d}" for d in ("include", "src", "src/gen")]
    subprocess.run(["cc", *CFLAGS, *incs, "-o", str(out), *map(str, srcs), str(DRIVER)], check=True)


def run(binary: Path, inputs: tuple[Path, Path, Path], cycles: int, callgrind: bool, mes: int | None = None) -> dict[str, Any]:
    cmd = [str(binary), *map(str, inputs), str(cycles), *([str(mes)] if mes is not None else [])]
    if not callgrind:
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return dict(json.loads(res.stdout))
    if not shutil.which("valgrind"):
        raise SystemExit("core_counts: --callgrind needs valgrind (Debian: valgrind)")
    out = binary.parent / "callgrind.out"
    res = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=npk_run", f"--callgrind-out-file={out}",
                          *cmd], check=True, capture_output=True, text=True)  # fmt: skip
    m = re.search(r"refs:\s+([\d,]+)", res.stderr)
    if not m:
        raise SystemExit(f"core_counts: no instruction count from callgrind:\n{res.stderr[-2000:]}")
    result = dict(json.loads(res.stdout))
    result["host_instructions_in_npk_run"] = int(m.group(1).replace(",", ""))
    result.pop("mips")   # (under valgrind: meaningless)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loop", choices=("mem", "alu"), default="mem")
    ap.add_argument("--cycles", type=int, default=300_000)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--src", type=Path, default=ROOT / "emulator", help="the emulator/ folder to build")
    ap.add_argument("--mes", type=int, help="run the loop on the first MES MEs only (default: all)")
    args = ap.parse_args(argv)
    if not (args.src / "src" / "gen").is_dir():
        print(f"core_counts: {args.src} has no src/gen (run `make` in that tree first)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="core_counts.") as tmp:
        work = Path(tmp)
        inputs = _inputs(work, args.loop)
        build(args.src, work / "core_counts")
        result = run(work / "core_counts", inputs, args.cycles, args.callgrind, args.mes)
    print(json.dumps({"loop": args.loop, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
