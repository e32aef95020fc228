"""The SPP with the DRR queue manager's local-memory state (microcode/qm/qm_drr.uc,
QM_LM_STATE: four classes, so the queues' words and the ports' active rings are in local
memory) at seed 004 Figure 11's heaviest point: all I3, 0 B of payload (73-byte frames,
5 x 1 Gb/s).  With the local-memory state a packet is visible to the schedulers as soon
as its enqueue is issued, so they may dequeue it a few cycles later; that is right only
because an SRAM enqueue and the queue's dequeue go to the same channel's controller in
order.  The emulator sent an enqueue to the channel of the queue's address plus the
buffer's (0x40000200 + 0x4001xxxx: channel 2), where it could still wait when the
dequeue, on channel 1, came back empty: tx got a buffer handle from nothing, faulted, and
the run forwarded nothing (1,951 in flight).  The run must now forward every packet."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main
from tests.spp.spp_files import ROOT, SPP

DESIGN = ROOT / "examples" / "experiments" / "spp_fig11.yaml"


def _all_i3_0b(path: Path) -> Path:
    """Figure 11's traffic at S = 1 (every packet I3), P = 0 B: the design's base traffic
    with its S = 1.0 level's fields, as the experiment runner makes it."""
    design = yaml.safe_load(DESIGN.read_text())
    spec = yaml.safe_load((DESIGN.parent / design["base"]["traffic"]).read_text())
    for key, value in design["factors"]["S"]["levels"][1.0].items():
        _, _, port, field = key.split(".")
        spec["ports"][int(port)][field] = value
    spec["defaults"]["size"] = 73
    path.write_text(yaml.safe_dump(spec))
    return path


def _app_with_lm_state(tmp: Path) -> Path:
    """The SPP application, its queue manager on the local-memory state (a copy without the
    layout's QM_SRAM_STATE fallback, if it has one)."""
    app = tmp / "spp"
    shutil.copytree(SPP, app, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("slices.yaml", "app.yaml"):
        f = app / name
        f.write_text(f.read_text().replace("../../traffic/", f"{ROOT}/examples/traffic/")
                     .replace("../../chips/", f"{ROOT}/examples/chips/"))  # fmt: skip
    layout = app / "spp.yaml"
    layout.write_text(re.sub(r",\s*defines: \{QM_SRAM_STATE: 1\}\}[^\n]*", "}", layout.read_text()))
    assert "QM_SRAM_STATE" not in layout.read_text()
    return app


def _demo(*args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["demo", "--json", *args])
    summary, _ = json.JSONDecoder().raw_decode(res.output[res.output.index('{\n  "layout"') :])
    return res.exit_code, summary


def test_all_i3_at_0_bytes_is_forwarded_with_the_local_memory_state(tmp_path: Path) -> None:
    app = _app_with_lm_state(tmp_path)
    traffic = _all_i3_0b(tmp_path / "fig11_s1_p0.yaml")
    code, s = _demo("--app", str(app), "--traffic", str(traffic), "--ms", "0.3")
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["faults"]["total"] == 0, s["faults"]
    t = s["totals"]
    assert t["offered"] > 1500 and t["forwarded"] == t["offered"] and t["in_flight"] == 0, t
    rows = {g["name"]: g for g in s["slices"]}
    assert rows["i3a"]["forwarded"] == t["offered"]          # all of it the I3 slice's
    assert s["throughput"]["pct_line_rate"] > 90, s["throughput"]
    assert s["scheduler"]["ok"] and s["scheduler"]["fifo_violations"] == 0
