"""Issue 49, the programmer's statistics and coverage: the core's per-instruction profile
(executions and branches taken per address), per-context figures, the annotated listing
of `npk run --profile`, lcov coverage (`--coverage FILE` on npk run, demo, debug) and
faults placed on their source line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.emulator.binding import Chip, EmulatorError
from npkit.toolchain.commands.demo import demo_cmd
from npkit.toolchain.commands.run import run_cmd
from npkit.toolchain.debug.cli import debug_cmd
from npkit.toolchain.debug.profile import fault_site_lines, locate_faults, placement
from npkit.toolchain.debug.target import read_images, split_images

from ..emulator.util import chip_with

# context 0 counts a register down from 5; the others end at once
LOOP_UC = """\
.reg n
    br!=ctx[0, done#]
    immed[n, 5]
loop#:
    alu[n, n, -, 1]
    bne[loop#]
done#:
    ctx_arb[kill]
"""
# line numbers in LOOP_UC
LINE_ALU, LINE_BNE, LINE_KILL = 5, 6, 8

# a put on scratch ring 3, which is never configured: a fault at line 3
FAULT_UC = """\
.reg r
    immed[r, 12]
    scratch[put, $x, r, 0, 1], ctx_swap[s]
    ctx_arb[kill]
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_profile_counts_executions_and_taken_branches_without_changing_the_run() -> None:
    prog = ["immed[a0, 5]", "alu[a0, a0, -, 1]", "bne[1]", "halt"]
    plain = chip_with({0: prog})
    plain.run(2000)
    counted = chip_with({0: prog})
    with pytest.raises(EmulatorError):
        counted.profile(0, 4)  # off until enabled
    counted.profile_enable(True)
    counted.run(2000)
    ex, taken = counted.profile(0, 4)
    assert ex == [1, 5, 5, 1]
    assert taken == [0, 0, 4, 0]  # bne taken while a0 is not yet 0
    a, b = plain.stats()["mes"][0], counted.stats()["mes"][0]
    assert sum(ex) == b["instructions"]
    for key in ("instructions", "executing_cycles", "aborted_cycles", "stalled_cycles", "idle_cycles"):
        assert a[key] == b[key], key
    assert plain.cycle == counted.cycle
    counted.reset()
    assert counted.profile(0, 4) == ([0, 0, 0, 0], [0, 0, 0, 0])


def test_profile_of_a_program_on_two_mes_counts_each(tmp_path: Path) -> None:
    chip = chip_with({0: ["alu[a0, a0, +, 1]", "halt"], 1: ["alu[a0, a0, +, 1]", "alu[a0, a0, +, 1]", "halt"]})
    chip.profile_enable(True)
    chip.run(1000)
    assert chip.profile(0, 2)[0] == [1, 1]
    assert chip.profile(1, 3)[0] == [1, 1, 1]


def test_npk_run_contexts_gives_each_contexts_figures(tmp_path: Path) -> None:
    src = _write(tmp_path, "loop.uc", LOOP_UC)
    res = CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000", "--contexts", "--json"])
    assert res.exit_code == 0, res.output
    me = json.loads(res.output)["mes"][0]
    rows = me["contexts"]
    assert len(rows) == 8
    assert sum(r["instructions"] for r in rows) == me["instructions"]
    # context 0: br!=ctx, immed, 5 x (alu, bne), ctx_arb = 13; the others: br!=ctx, ctx_arb
    assert [r["instructions"] for r in rows] == [13] + [2] * 7
    elapsed = sum(me[k] for k in ("executing_cycles", "aborted_cycles", "stalled_cycles", "idle_cycles"))
    for r in rows:
        assert r["executing_cycles"] + r["waiting_signal_cycles"] + r["ready_cycles"] + r["idle_cycles"] == elapsed
    text = CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000", "--contexts"])
    assert "waiting signal" in text.output and "idle" in text.output


def test_npk_run_profile_annotates_the_listing_with_counts(tmp_path: Path) -> None:
    src = _write(tmp_path, "loop.uc", LOOP_UC)
    res = CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000", "--profile"])
    assert res.exit_code == 0, res.output
    rows = {line.split("|")[1].strip().split()[0]: line for line in res.output.splitlines() if "| " in line}
    alu, bne = rows[f"{src}:{LINE_ALU}"].split(), rows[f"{src}:{LINE_BNE}"].split()
    assert alu[1] == "5" and bne[1] == "5"
    assert bne[3] == "4"  # taken 4 of 5
    assert "hot instructions of 'loop':" in res.output
    tail = res.output.split("hot instructions of 'loop':")[1].splitlines()
    hot = [line.split() for line in tail if line.startswith(";")]
    assert [int(h[2]) for h in hot] == [8, 8, 5, 5, 1]  # br!=ctx and ctx_arb (every context), the loop, immed
    assert hot[2][4] == f"{src}:{LINE_ALU}"
    js = json.loads(CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000", "--profile", "--json"]).output)
    assert js["profile"]["loop"]["instructions"] == js["mes"][0]["instructions"]


def test_npk_run_coverage_writes_an_lcov_tracefile(tmp_path: Path) -> None:
    src = _write(tmp_path, "loop.uc", LOOP_UC)
    info = tmp_path / "loop.info"
    res = CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000", "--coverage", str(info)])
    assert res.exit_code == 0, res.output
    text = info.read_text()
    assert f"SF:{src.resolve()}" in text
    assert f"DA:{LINE_ALU},5" in text and f"DA:{LINE_KILL},8" in text
    # bne: taken 4 times, fell through once
    assert any(line.startswith(f"BRDA:{LINE_BNE},") and line.endswith(",0,4") for line in text.splitlines())
    assert any(line.startswith(f"BRDA:{LINE_BNE},") and line.endswith(",1,1") for line in text.splitlines())
    assert "LF:5" in text and "LH:5" in text and text.rstrip().endswith("end_of_record")


def test_npk_run_coverage_to_an_unwritable_path_is_one_line(tmp_path: Path) -> None:
    src = _write(tmp_path, "loop.uc", LOOP_UC)
    res = CliRunner().invoke(run_cmd, [str(src), "--coverage", str(tmp_path / "no" / "dir" / "x.info")])
    assert res.exit_code == 1
    assert "cannot write the coverage tracefile" in res.output and "Traceback" not in res.output


def test_npk_debug_coverage_is_written_when_the_session_ends(tmp_path: Path) -> None:
    src = _write(tmp_path, "loop.uc", LOOP_UC)
    batch = _write(tmp_path, "b.txt", "run 3000\nstats\n")
    info = tmp_path / "dbg.info"
    res = CliRunner().invoke(debug_cmd, [str(src), "--batch", str(batch), "--coverage", str(info)])
    assert res.exit_code == 0, res.output
    assert "ctx  instr/exec cyc" in res.output  # stats: per-context rows
    assert f"DA:{LINE_ALU},5" in info.read_text()


def test_faults_are_placed_on_their_source_line(tmp_path: Path) -> None:
    src = _write(tmp_path, "fault.uc", FAULT_UC)
    res = CliRunner().invoke(run_cmd, [str(src), "--cycles", "3000"])
    assert f"ring_unconfigured at ME 0x00 ctx 0 pc 1 at {src}:3" in res.output
    # the router summary's lines (npk demo) come from the same placement
    _, named = read_images(split_images((str(src),), None), None, (), {}, lambda _: None)[1:]
    chip = Chip("ixp2800")
    from npkit.emulator.loader import load_images

    per_image = load_images(chip, named, [])
    chip.run(3000)
    located = locate_faults(chip.faults(), placement([img for _, img, _ in named], per_image), chip.me_name)
    assert {f["source"] for f in located["last"]} == {f"{src}:3"}
    lines = fault_site_lines(located)
    assert lines and all(f"ME 0x00 ctx 0 pc 1 at {src}:3: address 0x3" in line for line in lines)


def test_npk_demo_coverage_of_the_router_blocks(tmp_path: Path) -> None:
    info = tmp_path / "router.info"
    res = CliRunner().invoke(demo_cmd, ["--ms", "0.05", "--coverage", str(info), "--profile", "lookup", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    progs = out["coverage"]["programs"]
    assert set(progs) == {"rx", "parse", "lookup", "hdr_format", "qm", "tx"}
    for name, c in progs.items():
        assert 0 < c["lines_hit"] <= c["lines"], name
    text = info.read_text()
    for block in ("rx", "parse", "lookup", "hdr_format", "qm", "tx"):
        assert f"/microcode/{block}/{block}.uc" in text, block
    assert out["profile"]["lookup"]["instructions"] == out["blocks"]["lookup"]["instructions"]
    # counting (the lock-step path) leaves the router's run as it is
    plain = json.loads(CliRunner().invoke(demo_cmd, ["--ms", "0.05", "--json"]).output)
    for key in ("emulated_cycles", "latency_us", "comparison", "totals", "blocks"):
        assert plain[key] == out[key], key
    if not shutil.which("genhtml"):
        pytest.fail("genhtml (Debian lcov, which `make` installs) is not on PATH")
    html = tmp_path / "html"
    gen = subprocess.run(["genhtml", "--branch-coverage", str(info), "-o", str(html)], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    assert (html / "index.html").is_file()


def test_npk_demo_profile_of_a_block_that_does_not_run_is_a_usage_error() -> None:
    res = CliRunner().invoke(demo_cmd, ["--ms", "0.05", "--profile", "nosuch"])
    assert res.exit_code == 2
    assert "no such block" in res.output and "lookup" in res.output
