"""This tree against another commit, side by side: `npk bench --against REF`.

Speed-ups measured an hour apart on a shared machine mean little, so both builds run
in the same session: whole `npk demo` processes (set-up, emulation, checks, exit),
this tree's and the other build's in turn, pair after pair, after one warm-up run of
each (which fills the image cache and the page cache).  A figure is the median wall
time of each side and their ratio.  The emulator benchmarks (`npk bench emu`: the core's
ME instructions, cycles and references a host second) run the same way, and each rate's
ratio is taken pair by pair.

The other build is a copy of the commit's files (`git archive`) under
`$NPK_CACHE_DIR/against/<sha>`, built by its own `make` (its own venv), kept for the
next comparison; `--against-npk PATH` compares with an `npk` already built instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.asm.base.cache import cache_dir

from .paths import ROOT

LAYOUTS = ("pipelined", "parallel")
# the rates `npk bench emu` reports (higher is faster); an older build may lack some
EMU_RATES = ("emu.alu_mips", "emu.mem_mips", "emu.idle_gcycles_per_s", "emu.inflight_mrefs_per_s")


class AgainstError(Exception):
    """The other build could not be made or run."""


@dataclass
class Timed:
    """One whole process: wall seconds, exit status, what it printed, CPU seconds (user +
    system, its children included)."""

    wall_s: float
    code: int
    out: str
    cpu_s: float = 0.0


Runner = Callable[[Sequence[str]], Timed]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_timed(cmd: Sequence[str]) -> Timed:
    c0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    return Timed(wall, p.returncode, p.stdout, _children_cpu() - c0)


def resolve(ref: str, repo: Path = ROOT) -> str:
    """The full commit id `ref` names in `repo`."""
    p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                       capture_output=True, text=True, check=False)  # fmt: skip
    if p.returncode != 0:
        raise AgainstError(f"'{ref}' is not a commit of {repo}")
    return p.stdout.strip()


def _root(root: Path | None) -> Path:
    """Where kept builds live: `root`, default $NPK_CACHE_DIR/against, else the system's
    temporary directory."""
    return root if root is not None else (cache_dir() or Path(tempfile.gettempdir()) / "npkit") / "against"


def _kept(tree: Path) -> Path | None:
    """The `npk` of the build in `tree` if it finished and still runs."""
    npk = tree / ".venv" / "bin" / "npk"
    return npk if (tree / ".built").exists() and _runnable(npk) else None


def is_built(ref: str, repo: Path = ROOT, root: Path | None = None) -> bool:
    """Whether commit `ref` has a kept build that still runs (build_ref returns it at once)."""
    return _kept(_root(root) / resolve(ref, repo)) is not None


def build_ref(ref: str, repo: Path = ROOT, root: Path | None = None, make: str = "make") -> Path:
    """The `npk` of commit `ref`, built once in its own copy of the tree (kept under
    `root`: see _root)."""
    sha = resolve(ref, repo)
    root = _root(root)
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{sha}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build of a commit at a time; the others wait for it
        return _build(sha, repo, root / sha, make)


def _build(sha: str, repo: Path, tree: Path, make: str) -> Path:
    root = tree.parent
    kept = _kept(tree)
    if kept is not None:
        return kept
    if (tree / ".built").exists():
        shutil.rmtree(tree, ignore_errors=True)  # damaged since (a file removed): build it again
    npk = tree / ".venv" / "bin" / "npk"
    if not tree.exists():
        # unpacked beside its final name and renamed, so an interrupted run leaves no half tree
        tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=root))
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha],
                                 capture_output=True, check=False)  # fmt: skip
        if archive.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise AgainstError(f"git archive {sha[:12]}: {archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        tmp.rename(tree)
    log = tree / "build.log"
    with log.open("w") as f:
        p = subprocess.run([make, "-C", str(tree)], stdout=f, stderr=subprocess.STDOUT, check=False,
                           env=build_env())  # fmt: skip
    if p.returncode != 0 or not _runnable(npk):
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise AgainstError(f"building {sha[:12]} in {tree} failed (exit {p.returncode}); the end of {log}:\n"
                           + "\n".join(tail))  # fmt: skip
    (tree / ".built").touch()
    return npk


def build_env() -> dict[str, str]:
    """The environment for the other tree's make: without what a calling make passes down
    (its flags and variables) or this tree's venv on PATH, as if run from a shell."""
    skip = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    venv = str(ROOT / ".venv")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    return env


def _runnable(script: Path) -> bool:
    """The script exists and so does the interpreter its #! line names."""
    from npkit.asm.base.reading import InputError, open_regular

    try:
        with open_regular(script, what="npk script") as f:  # a FIFO or a device is no script
            first = f.readline(4096).rstrip(b"\n")
    except (OSError, InputError):
        return False
    if not first.startswith(b"#!"):
        return True
    interpreter = first[2:].strip().split(b" ", 1)[0].decode(errors="replace")
    return Path(interpreter).exists()


def runnable_npk(npk: Path | str) -> Path:
    """`npk` as a path a process can be started from (a bare name found in the current
    directory is that file, not one on PATH); AgainstError unless it is an executable file."""
    path = Path(npk).absolute()
    if not path.is_file():
        raise AgainstError(f"{npk}: no such npk (a file is needed)")
    if not os.access(path, os.X_OK):
        raise AgainstError(f"{npk}: not executable (chmod +x, or give the npk of a built tree: .venv/bin/npk)")
    return path


def demo_command(npk: Path | str, layout: str, ms: float) -> list[str]:
    return [str(npk), "demo", "--ms", f"{ms:g}", "--layout", layout, "--json"]


def emu_command(npk: Path | str, quick: bool) -> list[str]:
    return [str(npk), "bench", "emu", "--json", *(["--quick"] if quick else [])]


def emu_rates(out: str) -> dict[str, float]:
    """The EMU_RATES that `npk bench emu --json` printed (none: no such JSON)."""
    try:
        d = json.loads(out)
    except ValueError:
        return {}
    if not isinstance(d, dict):
        return {}
    return {k: float(d[k]) for k in EMU_RATES if isinstance(d.get(k), int | float) and d[k] > 0}


def emulated_ms(out: str) -> float | None:
    """The emulated milliseconds a demo's JSON reports (None: no such JSON)."""
    try:
        v = json.loads(out).get("emulated_ms")
    except (ValueError, AttributeError):
        return None
    return float(v) if isinstance(v, int | float) else None


def in_turn(this: Sequence[str], other: Sequence[str], pairs: int,
            run: Runner) -> Iterator[tuple[bool, str, Sequence[str], Timed]]:  # fmt: skip
    """Run `this` and `other` in turn: a warm-up round, then `pairs` rounds, the side that
    starts a round alternating.  Yields (timed: not the warm-up, "this" or "other", the
    command, what it did)."""
    order = [("this", this), ("other", other)]
    for i in range(pairs + 1):
        for side, cmd in order if i % 2 == 0 else order[::-1]:
            yield i > 0, side, cmd, run(cmd)


def side_by_side(this: Sequence[str], other: Sequence[str], pairs: int,
                 run: Runner = run_timed) -> dict[str, Any]:  # fmt: skip
    """Run `this` and `other` in turn, a warm-up of each and then `pairs` pairs (the
    side that starts a pair alternates); medians, ratio, and whether every run exited 0.

    speedup is the ratio of the median wall times (other / this); the ratio within each
    pair, whose two runs are seconds apart, moves less with a shared machine's load:
    pair_speedup is its median, pair_speedup_range its least and greatest; cpu_s is
    the CPU time of the processes, which another process's load moves less than wall."""
    walls: dict[str, list[float]] = {"this": [], "other": []}
    cpus: dict[str, list[float]] = {"this": [], "other": []}
    ems: dict[str, float | None] = {"this": None, "other": None}
    reasons: list[str] = []
    for timed, side, cmd, t in in_turn(this, other, pairs, run):
        if t.code != 0:
            reasons.append(f"{side}: `{' '.join(cmd)}` exited {t.code}")
        if timed:
            walls[side].append(t.wall_s)
            cpus[side].append(t.cpu_s)
        em = emulated_ms(t.out)
        if em is not None:
            ems[side] = em
    out: dict[str, Any] = {"pairs": pairs}
    for side in ("this", "other"):
        out[f"wall_s.{side}"] = round(statistics.median(walls[side]), 3) if walls[side] else None
        out[f"cpu_s.{side}"] = round(statistics.median(cpus[side]), 3) if cpus[side] else None
    a, b = out["wall_s.this"], out["wall_s.other"]
    out["speedup"] = round(b / a, 2) if a and b else None  # the other's wall over this tree's
    ratios = [y / x for x, y in zip(walls["this"], walls["other"], strict=True) if x > 0]
    out["pair_speedup"] = round(statistics.median(ratios), 2) if ratios else None
    out["pair_speedup_range"] = [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None
    # the other build's JSON may predate `emulated_ms`: the same demo emulates the same time
    em_this, em_other = ems["this"], ems["other"] if ems["other"] is not None else ems["this"]
    out["emulated_ms"] = em_this
    out["emulated_ms_per_host_s.this"] = round(em_this / a, 3) if em_this and a else None
    out["emulated_ms_per_host_s.other"] = round(em_other / b, 3) if em_other and b else None
    out["verdict"] = {"ok": not reasons, "reasons": reasons}
    return out


def rates_side_by_side(this: Sequence[str], other: Sequence[str], pairs: int,
                       run: Runner = run_timed) -> dict[str, Any]:  # fmt: skip
    """`npk bench emu --json` of both builds in turn (in_turn), each rate of EMU_RATES
    compared: its median on each side, and the ratio within each pair (this over other:
    the speed-up), its median and range.

    The verdict is this tree's: its runs must exit 0 and report every rate.  The other
    build is only measured: a rate it does not report (an older build) is None, and
    `notes` says so, as it says when one of its runs failed."""
    # one entry a timed run (None: not reported), so that entry j of both sides is round j's
    rates: dict[str, dict[str, list[float | None]]] = {k: {"this": [], "other": []} for k in EMU_RATES}
    reasons: list[str] = []
    notes: list[str] = []
    for timed, side, cmd, t in in_turn(this, other, pairs, run):
        got = emu_rates(t.out)
        missing = [k for k in EMU_RATES if k not in got]
        problem = f"exited {t.code}" if t.code != 0 else f"reported no {', '.join(missing)}" if missing else ""
        if problem:
            (reasons if side == "this" else notes).append(f"{side}: `{' '.join(cmd)}` {problem}")
        if timed:
            for k in EMU_RATES:
                rates[k][side].append(got.get(k))
    out: dict[str, Any] = {"pairs": pairs}
    for k, sides in rates.items():
        name = k.removeprefix("emu.")
        for side in ("this", "other"):
            values = [v for v in sides[side] if v is not None]
            out[f"{name}.{side}"] = round(statistics.median(values), 2) if values else None
        ratios = [a / b for a, b in zip(sides["this"], sides["other"], strict=True) if a and b]
        out[f"{name}.speedup"] = round(statistics.median(ratios), 2) if ratios else None
        out[f"{name}.speedup_range"] = [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None
    out["notes"] = sorted(set(notes))
    out["verdict"] = {"ok": not reasons, "reasons": reasons}
    return out


def compare(other_npk: Path | str, label: str, ms: float, pairs: int,
            this_npk: Path | str | None = None, run: Runner = run_timed, quick: bool = False) -> dict[str, Any]:  # fmt: skip
    """`compare.*` figures: `npk demo --ms ms` in both layouts, and `npk bench emu`
    (`--quick` with `quick`), this tree against other_npk."""
    if this_npk is None:  # this tree's own npk, not whichever comes first on PATH
        own = ROOT / ".venv" / "bin" / "npk"
        this_npk = own if own.exists() else shutil.which("npk") or "npk"
    other_npk = runnable_npk(other_npk)
    figures: dict[str, Any] = {"compare.against": label, "compare.demo_ms": ms}
    for layout in LAYOUTS:
        res = side_by_side(demo_command(this_npk, layout, ms), demo_command(other_npk, layout, ms), pairs, run)
        figures.update({f"compare.{layout}.{k}": v for k, v in res.items()})
    res = rates_side_by_side(emu_command(this_npk, quick), emu_command(other_npk, quick), pairs, run)
    figures.update({f"compare.emu.{k}": v for k, v in res.items()})
    return figures


def label_of(ref: str) -> str:
    try:
        return f"{ref} ({resolve(ref)[:12]})"
    except AgainstError:
        return ref

