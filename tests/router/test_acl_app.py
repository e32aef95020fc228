"""The ACL application (examples/apps/acl, the tutorial of docs/applications.md): run
from a copy outside the repository, judged right; a wrong model fails the run; the
rules are declared once (an edit of tables.yaml changes the microcode and the model
alike); its traffic hits and misses every rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from npkit.emulator.traffic.model import ipv4_fields
from npkit.toolchain.cli import main
from npkit.toolchain.system.app_tables import load_tables

ROOT = Path(__file__).resolve().parents[2]
ACL = ROOT / "examples" / "apps" / "acl"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "my_acl"
    shutil.copytree(ACL, dst, ignore=shutil.ignore_patterns("__pycache__"))
    assert not dst.resolve().is_relative_to(ROOT)
    return dst


def _demo(app: Path) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--json"])
    summary, _ = json.JSONDecoder().raw_decode(res.output[res.output.index("{") :])
    return res.exit_code, summary


def test_acl_copied_outside_the_repository_runs_judged_ok(tmp_path: Path) -> None:
    app = _copy(tmp_path)
    code, s = _demo(app)
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["app"] == {"name": "acl", "folder": str(app.resolve())}
    assert s["totals"]["dropped"].get("acl_deny", 0) > 0 and s["totals"]["forwarded"] > 0
    assert s["comparison"].get("wrong_outcome", 0) == 0 and s["totals"]["lost"] == 0


def test_acl_with_the_port_compare_inverted_in_its_model_fails(tmp_path: Path) -> None:
    app = _copy(tmp_path)
    model = (app / "model.py").read_text()
    assert 'r["dport"] == f.dport' in model
    (app / "model.py").write_text(model.replace('r["dport"] == f.dport', 'r["dport"] != f.dport'))
    code, s = _demo(app)
    assert code == 1 and not s["verdict"]["ok"]
    assert s["comparison"]["wrong_outcome"] > 0
    assert any("wrong_outcome" in r for r in s["verdict"]["reasons"])


def test_acl_rules_are_declared_once(tmp_path: Path) -> None:
    """One rule's port changed in tables.yaml: the microcode (through acl_table.h and the
    image's SRAM) and the model (through the image's rows) both follow; still judged ok,
    and the drops are not those of the original rules."""
    app = _copy(tmp_path)
    _, before = _demo(app)
    text = (app / "tables.yaml").read_text()
    assert "dport: 445}" in text
    (app / "tables.yaml").write_text(text.replace("dport: 445}", "dport: 80}").replace(
        "{src: 198.18.0.0/24, dport: 23}", "{src: 198.18.0.0/23, dport: 80}"))  # fmt: skip
    code, after = _demo(app)
    assert code == 0 and after["verdict"]["ok"], after["verdict"]
    assert after["totals"]["dropped"]["acl_deny"] != before["totals"]["dropped"]["acl_deny"]


def test_acl_traffic_hits_and_misses_every_rule() -> None:
    """For each rule: frames it drops, frames from its prefix to another port, frames to
    its port from outside its prefix (TCP/UDP first fragments), and ICMP from its prefix."""
    from npkit.emulator.traffic.generator import generate
    from npkit.emulator.traffic.spec import load_spec

    (table,) = load_tables(ACL / "tables.yaml")
    spec = load_spec(ACL / "traffic.yaml", {"router": str(ROOT / "examples" / "traffic" / "router.yaml")})
    fields = [f for f in (ipv4_fields(p.data) for p in generate(spec)) if f is not None]
    assert len(table.rows) >= 3
    for r in table.rows:
        l4 = [f for f in fields if f.proto in (6, 17) and f.first_fragment]
        hit = sum(r["src"].matches(f.src) and f.dport == r["dport"] for f in l4)
        port_miss = sum(r["src"].matches(f.src) and f.dport != r["dport"] for f in l4)
        src_miss = sum(not r["src"].matches(f.src) and f.dport == r["dport"] for f in l4)
        other = sum(r["src"].matches(f.src) and f.proto not in (6, 17) for f in fields)
        assert min(hit, port_miss, src_miss, other) > 0, (r, hit, port_miss, src_miss, other)
