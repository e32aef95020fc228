"""npk graph draws what the code has (issue 49): a layout's exception edges only from
blocks whose code raises an exception (labelled with the reasons), the control plane's
ring to qm with its edges, and the control flow of a block source through its layout's
include path (the linker's generated npk_sys.h)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = ROOT / "microcode" / "layouts"


def edges(dot: str) -> dict[tuple[str, str], str]:
    """(from, to) -> the edge's attributes."""
    return {(m[1], m[2]): m[3] or "" for m in re.finditer(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?;$", dot, re.M)}


def test_layout_draws_the_exception_edges_the_code_has(tmp_path: Path) -> None:
    out = tmp_path / "p.dot"
    r = CliRunner().invoke(main, ["graph", "layout", str(LAYOUTS / "pipelined.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    e = edges(out.read_text())
    raising = {src for (src, dst) in e if dst == "ring_exceptions"}
    assert raising == {"blk_parse", "blk_lookup", "blk_hdr_format"}  # rx, qm and tx raise none
    assert 'label="no_route"' in e[("blk_lookup", "ring_exceptions")]
    assert "ttl_expired" in e[("blk_hdr_format", "ring_exceptions")]
    assert ("xscale", "ring_cp_to_qm") in e and ("ring_cp_to_qm", "blk_qm") in e


def test_parallel_layout_control_ring_and_fastpath_exceptions(tmp_path: Path) -> None:
    out = tmp_path / "q.dot"
    r = CliRunner().invoke(main, ["graph", "layout", str(LAYOUTS / "parallel.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    e = edges(out.read_text())
    assert {src for (src, dst) in e if dst == "ring_exceptions"} == {"blk_fastpath"}
    assert ("xscale", "ring_cp_to_qm") in e and ("ring_cp_to_qm", "blk_qm") in e


def test_cfg_of_a_block_source_uses_its_layouts_include_path(tmp_path: Path) -> None:
    out = tmp_path / "parse.dot"
    r = CliRunner().invoke(main, ["graph", "cfg", str(ROOT / "microcode/parse/parse.uc"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    dot = out.read_text()
    assert dot.startswith('digraph "cfg parse"') and "parse.h:48 [macro]" in dot and "npk_block.h:" in dot
    stub = str(ROOT / "microcode/qm/qm_stub.uc")  # a variant: only with the parameter that picks it
    r = CliRunner().invoke(main, ["graph", "cfg", stub, "-o", str(out)])
    assert r.exit_code == 1 and "includes npk_sys.h" in r.output and "-D PARAM=VALUE" in r.output, r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(main, ["graph", "cfg", stub, "-D", "qm=stub", "-o", str(out)])
    assert r.exit_code == 0 and out.read_text().startswith('digraph "cfg qm"'), r.output
    r = CliRunner().invoke(main, ["graph", "cfg", str(ROOT / "microcode/parse/parse.uc"), "--layout", "parallel",
                                  "-o", str(out)])  # fmt: skip
    assert r.exit_code == 1 and "not the source of a block of parallel" in r.output, r.output
