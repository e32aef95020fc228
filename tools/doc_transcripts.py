#!/usr/bin/env python3
"""Transcripts in the docs are made by running them, never pasted.

A fenced block in a Markdown file under docs/ that follows a marker line

    <!-- transcript: npk ARGS... -->

is the output of `npk ARGS...` run from the top of the tree.  When the block holds
debugger commands (lines that start with `(npk) `), they are the script: the command runs
as `npk ARGS... --batch FILE` with those commands, and the block is its output (which
echoes each command).  Lines of the block that start with `$ ` (and the lines they
continue with a trailing backslash) are the command as the reader would type it; they
are kept as written and the output follows them.

    tools/doc_transcripts.py              check every marked block (exit 1: the stale ones)
    tools/doc_transcripts.py --write      rewrite the stale blocks from the runs
    tools/doc_transcripts.py FILE.md...   only those files

tests/debug/test_doc_transcripts.py runs the check, so a change of output fails until the
docs are rewritten (with --write, and the diff read).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- transcript: npk (?P<args>.*?) -->\s*$")
FENCE = "```"


class TranscriptError(ValueError):
    """A marker without its block, or a run that fails; the message names FILE:LINE."""


@dataclass
class Block:
    path: Path
    marker_line: int  # 1-based line of the marker
    args: list[str]
    start: int  # 0-based index of the first line inside the fence
    end: int  # 0-based index of the closing fence
    lines: list[str]  # the block as it is

    @property
    def where(self) -> str:
        return f"{self.path}:{self.marker_line}"


def find_blocks(path: Path, text: str) -> list[Block]:
    """Every marked block of a Markdown text."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith(FENCE):
            raise TranscriptError(f"{path}:{i + 1}: a transcript marker is followed by a fenced block (```)")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith(FENCE)), None)
        if end is None:
            raise TranscriptError(f"{path}:{i + 2}: the fenced block is not closed")
        out.append(Block(path, i + 1, shlex.split(m["args"]), i + 2, end, lines[i + 2 : end]))
    return out


def typed_lines(lines: list[str]) -> list[str]:
    """The leading `$ ...` lines (with their backslash continuations): the command as shown."""
    out: list[str] = []
    for line in lines:
        if line.startswith("$ ") or (out and out[-1].endswith("\\")):
            out.append(line)
        else:
            break
    return out


def run(block: Block) -> str:
    """The output the block should hold, from a run of its command in the top of the tree."""
    import os

    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    shown = typed_lines(block.lines)
    script = [ln[len("(npk) ") :] for ln in block.lines if ln.startswith("(npk) ")]
    args = list(block.args)
    old = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="npk-doc-") as tmp:
        if script:
            batch = Path(tmp) / "script.npkdbg"
            batch.write_text("\n".join(script) + "\n")
            args += ["--batch", str(batch)]
        os.chdir(ROOT)
        try:
            r = CliRunner().invoke(main, args)
        finally:
            os.chdir(old)
    if r.exit_code != 0:
        raise TranscriptError(f"{block.where}: npk {shlex.join(block.args)} exited {r.exit_code}: "
                              f"{(r.stderr or r.output).strip()[-400:]}")  # fmt: skip
    return "\n".join([*shown, r.stdout.rstrip("\n")])


def stale(paths: list[Path]) -> list[tuple[Block, str]]:
    """(block, what it should hold) for every marked block that differs from its run."""
    out = []
    for path in paths:
        for block in find_blocks(path, path.read_text()):
            want = run(block)
            if want != "\n".join(block.lines):
                out.append((block, want))
    return out


def rewrite(path: Path, fixes: list[tuple[Block, str]]) -> None:
    lines = path.read_text().split("\n")
    for block, want in sorted(fixes, key=lambda f: -f[0].start):  # from the end: indices stay valid
        lines[block.start : block.end] = want.split("\n")
    path.write_text("\n".join(lines))


def doc_files(given: list[str]) -> list[Path]:
    return [Path(p) for p in given] if given else sorted((ROOT / "docs").glob("*.md"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: docs/*.md)")
    ap.add_argument("--write", action="store_true", help="rewrite the stale blocks")
    a = ap.parse_args(argv)
    try:
        found = stale(doc_files(a.files))
    except TranscriptError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for block, _ in found:
        print(f"{block.where}: npk {shlex.join(block.args)}: the block differs from the run"
              + ("; rewritten" if a.write else ""))  # fmt: skip
    if a.write:
        for path in {b.path for b, _ in found}:
            rewrite(path, [f for f in found if f[0].path == path])
        return 0
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
