"""The transcripts in docs/ are the output of real runs (tools/doc_transcripts.py): every
marked block is run again here and must match, so a change of output cannot leave the
docs stale; the tool finds a stale block and rewrites it from the run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_transcripts", ROOT / "tools" / "doc_transcripts.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["doc_transcripts"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_debugging_transcripts_are_what_the_commands_print(tool: ModuleType) -> None:
    doc = ROOT / "docs" / "debugging.md"
    blocks = tool.find_blocks(doc, doc.read_text())
    assert len(blocks) >= 8  # the walk-through's sessions, why's reports, the router's breakpoint
    stale = [f"{b.where}: npk {' '.join(b.args)}" for b, _ in tool.stale([doc])]
    assert stale == [], "stale transcripts (tools/doc_transcripts.py --write rewrites them): " + "; ".join(stale)


def test_a_stale_block_is_found_and_rewritten(tool: ModuleType, tmp_path: Path) -> None:
    md = tmp_path / "t.md"
    md.write_text("Intro.\n\n<!-- transcript: npk debug examples/debug/ttl.uc -->\n```\n"
                  "$ printf 'print one\\n' | npk debug ttl.elf\n(npk) print one\none = 1 (0x1)\n```\nEnd.\n")
    found = tool.stale([md])
    assert [b.marker_line for b, _ in found] == [3]
    assert tool.main([str(md)]) == 1
    assert tool.main(["--write", str(md)]) == 0
    assert md.read_text() == ("Intro.\n\n<!-- transcript: npk debug examples/debug/ttl.uc -->\n```\n"
                              "$ printf 'print one\\n' | npk debug ttl.elf\n(npk) print one\none = 0 (0x0)\n```\nEnd.\n")
    assert tool.main([str(md)]) == 0


def test_a_marker_without_a_block_and_a_failing_run_are_located_errors(tool: ModuleType, tmp_path: Path) -> None:
    md = tmp_path / "bad.md"
    md.write_text("<!-- transcript: npk debug examples/debug/ttl.uc -->\ntext\n")
    with pytest.raises(tool.TranscriptError, match=r"bad.md:1: a transcript marker is followed by a fenced block"):
        tool.stale([md])
    md.write_text("<!-- transcript: npk debug examples/debug/ttl.uc -->\n```\n(npk) break nowhere\n```\n")
    with pytest.raises(tool.TranscriptError, match=r"bad.md:1: npk debug examples/debug/ttl.uc exited 1: .*'nowhere'"):
        tool.stale([md])
