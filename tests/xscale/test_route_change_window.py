"""A route added and withdrawn again within the change window (what a route-add storm
on the control socket does, `make soak`): the judge's model of what the fast path may
still use around the add must not assume the route is still in the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
NPK = str(Path(sys.executable).with_name("npk"))


def test_add_and_delete_of_one_route_inside_the_window_is_judged(tmp_path: Path) -> None:
    spec = {"seed": 1, "router": str(ROOT / "examples" / "traffic" / "router.yaml"), "duration_ns": 1_000_000,
            "route_changes": ["at 0.3ms add 30.0.0.0/8 via 10.0.3.2", "at 0.31ms del 30.0.0.0/8",
                              "at 0.32ms add 30.0.0.0/8 via 10.0.2.2"],
            "defaults": {"enabled": False},
            "ports": {0: {"enabled": True, "size": 100, "rate_bps": 2e7,
                          "destinations": {"prefixes": ["30.1.2.3/32"]}}}}  # fmt: skip
    path = tmp_path / "changes.yaml"
    path.write_text(yaml.safe_dump(spec))
    image = tmp_path / "router.elf"
    subprocess.run([NPK, "link", "pipelined", "-o", str(image)], check=True, capture_output=True)
    out = subprocess.run([NPK, "run", str(image), "--traffic", str(path), "--duration-ms", "1", "--json"],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and rep["verdict"]["ok"], rep["verdict"]
    assert rep["totals"]["forwarded"] > 0  # after the last change its packets leave by port 2
