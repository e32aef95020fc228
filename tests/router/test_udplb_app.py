"""The UDP load balancer (examples/apps/udplb): an application without a base, judged
by its own model.  Run from a copy outside the repository at 5 x 1 Gb/s, every drop is
counted under the application's reasons exactly as its model decides them; a wrong
model fails the run; `npk link --app` and `npk run --app` run it too."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from npkit.emulator.traffic.cpkt import DROP, FORWARD
from npkit.emulator.traffic.generator import generate
from npkit.emulator.traffic.model import StandaloneModel
from npkit.emulator.traffic.spec import load_spec
from npkit.toolchain.cli import main
from npkit.toolchain.system.app import load_app, model_of_app

ROOT = Path(__file__).resolve().parents[2]
UDPLB = ROOT / "examples" / "apps" / "udplb"
MS = 2


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "my_lb"
    shutil.copytree(UDPLB, dst, ignore=shutil.ignore_patterns("__pycache__"))
    assert not dst.resolve().is_relative_to(ROOT)
    return dst


def _json(res: Any) -> dict[str, Any]:
    summary, _ = json.JSONDecoder().raw_decode(res.output[res.output.index("{") :])
    return summary


def _demo(app: Path) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--json", "--ms", str(MS)])
    return res.exit_code, _json(res)


def _model_counts(app: Path) -> Counter[str]:
    """What the application's model does with the demo's traffic, by reason."""
    model = model_of_app(load_app(app))
    assert isinstance(model, StandaloneModel)
    spec = load_spec(app / "traffic.yaml", {"router": str(app / "router.yaml"), "duration_ns": MS * 1_000_000})
    out: Counter[str] = Counter()
    for p in generate(spec):
        v = model.decide(p.data, p.port)
        out["forwarded" if v.kind == FORWARD else v.reason] += 1
        assert v.kind in (FORWARD, DROP)
    return out


def test_udplb_copied_outside_the_repository_runs_judged_by_its_model(tmp_path: Path) -> None:
    app = _copy(tmp_path)
    code, s = _demo(app)
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["app"] == {"name": "udplb", "folder": str(app.resolve())}
    t = s["totals"]
    want = _model_counts(app)
    assert t["forwarded"] == want.pop("forwarded") > 0
    assert t["dropped"] == dict(want) and len(want) == 8, (t["dropped"], want)
    assert t["exceptions"] == {} and t["lost"] == 0
    assert s["comparison"]["matched_forward"] == t["forwarded"]
    assert s["throughput"]["tx_mbps"] > 2000  # half of the 5 Gb/s offered is for a service


def test_udplb_with_a_wrong_model_fails(tmp_path: Path) -> None:
    """The model lets TTL 1 through: the chip drops those frames, the model forwards them."""
    app = _copy(tmp_path)
    model = (app / "model.py").read_text()
    assert "    if ttl <= 1:\n" in model
    (app / "model.py").write_text(model.replace("    if ttl <= 1:\n", "    if ttl < 1:\n"))
    code, s = _demo(app)
    assert code == 1 and not s["verdict"]["ok"]
    assert any("wrong_outcome" in r for r in s["verdict"]["reasons"]), s["verdict"]
    named = s["comparison"]["mismatches"]  # the packets, named: the chip dropped what the model forwards
    assert named and all(m["got"] == {"outcome": "drop", "reason": "lb_ttl_expired"} for m in named), named[:3]
    assert s["totals"]["dropped"]["lb_ttl_expired"] > 0


def test_udplb_links_and_runs_with_npk_link_and_run(tmp_path: Path) -> None:
    image = tmp_path / "lb.elf"
    res = CliRunner().invoke(main, ["link", "--app", str(UDPLB), "-o", str(image)])
    assert res.exit_code == 0, res.output
    assert "udplb" in res.output and image.exists()
    res = CliRunner().invoke(main, ["run", str(image), "--app", str(UDPLB), "--duration-ms", "0.5", "--json"])
    s = _json(res)
    assert res.exit_code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["totals"]["dropped"]["lb_no_service"] > 0 and s["totals"]["forwarded"] > 0
