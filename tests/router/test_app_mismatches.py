"""A failed comparison names the mismatching packets (`comparison.mismatches`, the first
20, and `comparison.mismatches_total`), the text lists them, and `npk why pkt:N` replays
one: the ACL example with its model's port test inverted (copied, edited) exits 1, and
the packets it names really are those the two models disagree on."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.system.mismatches import MAX_NAMED

ROOT = Path(__file__).resolve().parents[2]
ACL = ROOT / "examples" / "apps" / "acl"
RIGHT, WRONG = 'r["dport"] == f.dport', 'r["dport"] != f.dport'


def _wrong_acl(tmp_path: Path) -> Path:
    dst = tmp_path / "wrong_acl"
    shutil.copytree(ACL, dst, ignore=shutil.ignore_patterns("__pycache__"))
    model = (dst / "model.py").read_text()
    assert RIGHT in model
    (dst / "model.py").write_text(model.replace(RIGHT, WRONG))
    return dst


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _frames(app: Path, ms: float) -> list[tuple[int, bytes]]:
    """The application's traffic as `npk demo --app` generates it: (in port, frame) by id."""
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.app_run import app_inputs

    inputs = app_inputs(app)
    tr = load_traffic_source(inputs.traffic, int(ms * 1e6), overrides={"router": str(inputs.router_yaml())})
    got = tr.collect()
    return list(zip(got.ports, got.frames, strict=True))


def _rows(app: Path) -> dict[str, Any]:
    from npkit.toolchain.system.app_tables import load_tables, model_rows

    return model_rows({t.name: t.record() for t in load_tables(app / "tables.yaml")})


def test_a_wrong_model_names_the_packets_it_disagrees_on(tmp_path: Path) -> None:
    app = _wrong_acl(tmp_path)
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--ms", "1", "--json"])
    assert res.exit_code == 1
    s, _ = json.JSONDecoder().raw_decode(res.output[res.output.index("{") :])
    cmp_ = s["comparison"]
    named = cmp_["mismatches"]
    assert cmp_["mismatches_total"] == cmp_["wrong_outcome"] > MAX_NAMED and len(named) == MAX_NAMED
    assert not s["verdict"]["ok"] and not any("stuck" in r for r in s["verdict"]["reasons"])
    frames = _frames(app, 1)
    tables = _rows(app)
    wrong = _module(app / "model.py", "wrong_acl_model").acl
    right = _module(ACL / "model.py", "right_acl_model").acl
    for m in named:
        port, frame = frames[m["packet"]]
        assert m["port_in"] == port
        # the wrong model drops it, the right one (and the microcode) does not: it left
        assert m["expected"] == {"outcome": "drop", "reason": "acl_deny"}
        assert m["got"]["outcome"] == "forward"
        assert wrong(frame, tables) and not right(frame, tables)
    # npk why replays the first one: forwarded, on the port the run saw
    first = named[0]
    res = CliRunner().invoke(main, ["why", f"pkt:{first['packet']}", "--app", str(app), "--json"])
    assert res.exit_code == 0, res.output
    fate = json.loads(res.output[res.output.index("{") :])["fate"]
    assert fate["outcome"] == "forwarded" and fate["port"] == first["got"]["port"]


def test_the_text_lists_the_mismatching_packets(tmp_path: Path) -> None:
    app = _wrong_acl(tmp_path)
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--ms", "0.3"])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.startswith("  pkt:")]
    assert lines and all("wrong_outcome: expected dropped with acl_deny, got forwarded on port" in ln for ln in lines)
    assert "mismatching packets:" in res.output and "npk why pkt:N" in res.output
