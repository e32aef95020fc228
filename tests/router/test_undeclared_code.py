"""A drop or exception code that no reason declares (issue 45, "the judge is general"):
the run names the code, the ME, context and PC that counted it and its block, attributes
the packets to it, and fails -- never "stuck: the router went idle with these packets
neither sent, dropped nor excepted", which is what such a run said before."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.router_run import run_router
from npkit.toolchain.system.verdict import Policy, judge

ROOT = Path(__file__).resolve().parents[2]
NPK = Path(sys.executable).parent / "npk"
HDR_LINE = "hdr_format: {source: hdr_format/hdr_format.uc,"

# the header-format block, but every packet whose buffer handle is a multiple of 8 gets
# KIND with code 14, which microcode/reasons.yaml declares neither as a drop nor as an exception
BLOCK = """#include "npk_sys.h"
#include "npk_block.h"
#include "hdr_format.h"
.reg nhi t0
    npk_thread_setup()
    br!=ctx[0, hdr_loop#]
    npk_start_tokens()
hdr_loop#:
    npk_get_input(hdr_loop#)
    alu[nhi, --, b, $i1]
    alu[t0, pw, and, 7]
    .if (t0 == 0)
        immed[kind, KIND]
        immed[code, 14]
    .else
        hdr_body(nhi, ow1)
    .endif
    npk_emit(hdr_loop#)
"""


def _layout(tmp_path: Path, kind: str) -> Path:
    src = tmp_path / f"hdr_{kind.lower()}.uc"
    src.write_text(BLOCK.replace("KIND", kind))
    text = (ROOT / "microcode" / "layouts" / "pipelined.yaml").read_text()
    assert text.count(HDR_LINE) == 1
    layout = tmp_path / f"undeclared_{kind.lower()}.yaml"
    layout.write_text(text.replace(HDR_LINE, f"hdr_format: {{source: {src},"))
    return layout


def _run(tmp_path: Path, kind: str) -> dict[str, Any]:
    duration = 200_000
    tr = load_traffic_source(ROOT / "examples" / "passthrough" / "seed003.yaml", duration)
    return run_router(str(_layout(tmp_path, kind)), {"control": "host"}, tr, duration)


@pytest.mark.parametrize(("kind", "verb", "table"), [("OUT_DROP", "dropped", "dropped"),
                                                     ("OUT_EXCEPTION", "sent to the exception path", "exceptions")])  # fmt: skip
def test_undeclared_code_is_named_with_its_thread_not_stuck(tmp_path: Path, kind: str, verb: str, table: str) -> None:
    s = _run(tmp_path, kind)
    t = s["totals"]
    n = t[table].get("undeclared_code_14", 0)
    assert n > 10, t  # the packets have a fate: the undeclared code
    assert t["in_flight"] == 0 and s["in_flight"]["count"] == 0, s["in_flight"]
    assert s["comparison"]["undeclared_reason"] == n
    assert t["forwarded"] + n == t["offered"]
    [u] = s["undeclared_codes"]
    assert (u["kind"], u["code"], u["packets"], u["me"], u["block"]) == (kind[4:].lower(), 14, n, "0x03", "hdr_format")
    assert 0 <= u["ctx"] < 8 and re.fullmatch(r".*/microcode/include/npk_block\.h:\d+", u["source"]), u
    v = judge(s, Policy())
    assert not v["ok"]
    assert not any("stuck" in r or "in flight" in r for r in v["reasons"]), v
    assert f"ME 0x03 ctx {u['ctx']} pc {u['pc']} (block hdr_format, " in u["why"]
    assert f"{verb} with code 14, which no reason declares: {n} packets" in u["why"]
    assert u["why"] in v["reasons"]


def test_npk_demo_exits_1_with_the_code_in_its_json_verdict(tmp_path: Path) -> None:
    layout = _layout(tmp_path, "OUT_DROP")
    res = subprocess.run([str(NPK), "demo", "--layout", str(layout), "-D", "control=host", "--ms", "0.2", "--json"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 1, res.stderr
    verdict = json.loads(res.stdout)["verdict"]
    assert not verdict["ok"]
    assert any("dropped with code 14, which no reason declares" in r for r in verdict["reasons"]), verdict
    assert "stuck" not in res.stderr
