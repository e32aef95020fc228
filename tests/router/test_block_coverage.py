"""The router's tests report the coverage of its blocks (issue 49): NPK_BLOCK_COVERAGE=FILE
makes a test session write an lcov tracefile of the blocks' lines and branch directions
and end with a note naming the lines no test reached (tests/block_coverage.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_router_test_session_reports_its_blocks_coverage(tmp_path: Path) -> None:
    info = tmp_path / "blocks.info"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # (not as a worker of ours)
    env["NPK_BLOCK_COVERAGE"] = str(info)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/router/test_blocks_hdr_format.py"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    note = res.stdout.split("block coverage (NPK_BLOCK_COVERAGE=")[1].splitlines()
    rows = {line.split()[0]: line for line in note[1:] if line.startswith("  ")}
    assert "hdr_format/hdr_format.h" in rows
    hdr = rows["hdr_format/hdr_format.h"]
    hit, total = (int(x) for x in hdr.split("lines ")[1].split(",")[0].split("/"))
    assert 0 < hit <= total
    text = info.read_text()
    assert f"SF:{ROOT / 'microcode' / 'hdr_format' / 'hdr_format.h'}" in text
    # the lines the note names as unreached are those the tracefile has at count 0
    sf = text.split(f"SF:{ROOT / 'microcode' / 'hdr_format' / 'hdr_format.h'}")[1].split("end_of_record")[0]
    zero = sorted(int(r[3:].split(",")[0]) for r in sf.splitlines() if r.startswith("DA:") and r.endswith(",0"))
    assert len(zero) == total - hit
    if zero:
        assert f"no test reaches lines {zero[0]}" in hdr
