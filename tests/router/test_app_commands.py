"""`--app DIR` beyond demo, run and link (docs/applications.md): `npk debug`, `npk trace`
and `npk why` link the application's layout and generate its traffic for its router as
`npk demo --app` does; `npk asm --app --block` assembles one of its blocks with the
link's generated headers; an experiment design's `app:` runs it, its layout parameters
as factors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
ACL = ROOT / "examples" / "apps" / "acl"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "my_acl"
    shutil.copytree(ACL, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _drop_line() -> int:
    """The line of acl.uc that sets OUT_DROP (where a denied packet is decided)."""
    lines = (ACL / "acl" / "acl.uc").read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if "immed[kind, OUT_DROP]" in text)


def test_debug_with_app_stops_in_the_block_on_a_denied_packet(tmp_path: Path) -> None:
    """No image, no traffic file: the application's layout, traffic and router config."""
    app = _copy(tmp_path)
    script = tmp_path / "dbg.txt"
    script.write_text(f"break acl.uc:{_drop_line()}\nrun\nprint src\nprint dport\nmem sram 0xc0010000 12\n")
    res = CliRunner().invoke(main, ["debug", "--app", str(app), "--batch", str(script)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"acl.uc:{_drop_line()}) hit" in out
    src = int(out.split("src = ")[1].split()[0])
    dport = int(out.split("dport = ")[1].split()[0])
    rules = yaml.safe_load((app / "tables.yaml").read_text())["acl"]["rows"]
    import ipaddress

    # the packet stopped at the drop matches a rule of tables.yaml: its prefix and its port
    assert any(ipaddress.IPv4Address(src) in ipaddress.IPv4Network(r["src"]) and r["dport"] == dport for r in rules)
    assert "c6 12 00 00 ff ff ff 00 00 17" in out  # rule 0 as tables.yaml packed it: 198.18.0.0/24, port 23


def test_debug_with_an_app_on_its_own_chip_links_for_that_chip(tmp_path: Path) -> None:
    """The SPP's manifest names its chip (ixp2850_spp: a TCAM, which its tables need):
    `npk debug --app` links for it, as `npk demo --app` does (it linked for ixp2800 and
    refused the TCAM table)."""
    script = tmp_path / "dbg.txt"
    script.write_text("run 3000\n")
    res = CliRunner().invoke(main, ["debug", "--app", str(ROOT / "examples" / "apps" / "spp"), "--batch", str(script)])
    assert res.exit_code == 0, res.output
    assert "no TCAM" not in res.output and "now at cycle 3000" in res.output


def test_debug_without_image_or_app_is_a_usage_error() -> None:
    res = CliRunner().invoke(main, ["debug"])
    assert res.exit_code == 2 and "--app DIR" in res.output


def test_trace_and_why_with_app(tmp_path: Path) -> None:
    app = _copy(tmp_path)
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["trace", "--app", str(app), "--cycles", "8000", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output[res.output.index("{") :])
    assert summary["packets"] > 0 and json.loads(out.read_text())
    # the first packet the model denies, replayed: dropped by the acl block with acl_deny
    from .test_app_mismatches import _frames, _module, _rows

    rows, acl = _rows(app), _module(app / "model.py", "acl_model_why").acl
    pid = next(i for i, (_, frame) in enumerate(_frames(app, 1)) if acl(frame, rows))
    res = CliRunner().invoke(main, ["why", f"pkt:{pid}", "--app", str(app), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output[res.output.index("{") :])
    assert report["traffic_id"] == pid
    assert report["fate"]["outcome"] == "dropped" and report["fate"]["reason"] == "acl_deny"
    assert report["fate"]["block"] == "acl"


def test_asm_block_of_an_app_layout_with_its_generated_headers(tmp_path: Path) -> None:
    """acl.uc includes acl_table.h and uses DROP_ACL_DENY (reasons.h): both are generated
    for the application's link only, and `npk asm --app` finds them."""
    app = _copy(tmp_path)
    elf, lst = tmp_path / "acl.elf", tmp_path / "acl.lst"
    res = CliRunner().invoke(main, ["asm", "--app", str(app), "--block", "acl", "-o", str(elf), "--list", str(lst)])
    assert res.exit_code == 0, res.output
    assert elf.stat().st_size > 0 and "acl.uc" in lst.read_text()
    res = CliRunner().invoke(main, ["asm", "--app", str(app), "--layout", "acl_pipelined", "--block", "nosuch",
                                    "-o", str(elf)])  # fmt: skip
    assert res.exit_code == 1 and "nosuch" in res.output and "acl" in res.output
    # without --app the layout's block is not found in npkit's library
    res = CliRunner().invoke(main, ["asm", "--layout", str(app / "pipelined.yaml"), "--block", "acl", "-o", str(elf)])
    assert res.exit_code == 1


def test_experiment_design_with_app_runs_it_with_its_layout_params_as_factors(tmp_path: Path) -> None:
    from npkit.toolchain.experiment.design import load_design
    from npkit.toolchain.experiment.execute import run_config

    app = _copy(tmp_path)
    design = tmp_path / "d" / "acl.yaml"
    design.parent.mkdir()
    design.write_text(yaml.safe_dump({
        "name": "acl", "replications": 1, "seed": 45, "base": {"app": "../my_acl"},
        "factors": {"T": {"name": "threads", "set": "param.threads", "levels": [4, 8]}},
        "responses": ["throughput_mbps"], "capacity": False,
        "steady": {"window_us": 5, "min_ms": 0.25, "max_ms": 0.25, "drain_us": 20}}))  # fmt: skip
    d = load_design(design)
    assert d.base["app"] == str(app.resolve()) and d.base["layout"] == "acl_pipelined"
    assert d.base["traffic"] == str((app / "traffic.yaml").resolve())
    runs = d.runs()
    assert [r.config["params"]["threads"] for r in runs] == [4, 8]
    got = run_config(runs[0].config)["responses"]
    assert got["throughput_mbps"] > 0
    bad = tmp_path / "d" / "bad.yaml"
    bad.write_text(design.read_text().replace("../my_acl", "../nowhere"))
    res = CliRunner().invoke(main, ["experiment", "design", str(bad)])
    assert res.exit_code != 0 and "base.app" in res.output and "nowhere" in res.output


def test_debug_names_a_layout_of_the_app_with_its_parameters_and_exits(tmp_path: Path) -> None:
    """IMAGE is one of the application's layouts, -D one of its parameters; as a process
    (a forked traffic reader left behind would hold its exit)."""
    import subprocess
    import sys

    app = _copy(tmp_path)
    script = tmp_path / "dbg.txt"
    script.write_text(f"break acl.uc:{_drop_line()}\nrun\nthread\n")
    npk = str(Path(sys.executable).with_name("npk"))
    p = subprocess.run([npk, "debug", "--app", str(app), "acl_pipelined", "-D", "threads=4", "--batch", str(script)],
                       capture_output=True, text=True, timeout=240, stdin=None)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert f"acl.uc:{_drop_line()}) hit" in p.stdout
    res = CliRunner().invoke(main, ["debug", "--app", str(app), "nosuch_layout"])
    assert res.exit_code == 2 and "nosuch_layout" in res.output
