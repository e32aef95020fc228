"""An application's own exception reasons in the control plane: its reasons.yaml says
what the daemon does with each (`control: consume` or `forward`), npkd does it (on the
emulated XScale and as a gpe process) and the judge expects the same.  The ACL example
turned into an application that hands the packets its rules match to the control plane
(copied, edited): judged ok both ways; with a wrong model, exit 1 and the packets named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.system.app import AppError, app_reasons, load_app

ROOT = Path(__file__).resolve().parents[2]
ACL = ROOT / "examples" / "apps" / "acl"

REASONS = """\
exceptions:
  acl_log:
    code: 20
    step: 30
    rule: a first fragment of a TCP or UDP packet matching an ACL rule, for the control plane
    control: {action}
"""


def _excepting_acl(tmp_path: Path, action: str, wrong_model: bool = False) -> Path:
    dst = tmp_path / f"acl_{action}"
    shutil.copytree(ACL, dst, ignore=shutil.ignore_patterns("__pycache__"))
    uc = (dst / "acl" / "acl.uc").read_text()
    assert "immed[kind, OUT_DROP]" in uc and "immed[code, DROP_ACL_DENY]" in uc
    uc = uc.replace("immed[kind, OUT_DROP]", "immed[kind, OUT_EXCEPTION]")
    (dst / "acl" / "acl.uc").write_text(uc.replace("immed[code, DROP_ACL_DENY]", "immed[code, EXC_ACL_LOG]"))
    (dst / "reasons.yaml").write_text(REASONS.format(action=action))
    model = (dst / "model.py").read_text().replace('drop="acl_deny"', 'exception="acl_log"')
    if wrong_model:
        model = model.replace('r["dport"] == f.dport', 'r["dport"] != f.dport')
    (dst / "model.py").write_text(model)
    return dst


def _demo(app: Path, *more: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--ms", "1", "--json", *more])
    s, _ = json.JSONDecoder().raw_decode(res.output[res.output.index("{") :])
    return res.exit_code, s


def test_consumed_by_the_daemon_as_a_gpe_process(tmp_path: Path) -> None:
    code, s = _demo(_excepting_acl(tmp_path, "consume"), "-D", "control=gpe")
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["control_plane"]["xscale"]["placement"] == "gpe"
    n = s["totals"]["exceptions"]["acl_log"]
    assert n > 100 and s["comparison"]["matched_exception"] >= n
    assert s["control_plane"]["packets_forwarded_by_it"] == 0
    assert s["control_plane"]["app_exceptions"] == {"acl_log": {"consumed": n}}


def test_forwarded_by_the_daemon_on_the_xscale(tmp_path: Path) -> None:
    _, consumed = _demo(_excepting_acl(tmp_path, "consume"))
    n = consumed["totals"]["exceptions"]["acl_log"]
    code, s = _demo(_excepting_acl(tmp_path, "forward"))
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["control_plane"]["xscale"]["placement"] == "xscale"
    # every packet the block excepted (as many as the same traffic gave when they were
    # consumed) went back out, routed by the daemon, with the bytes the model expects
    # (compared frame by frame: no wrong_bytes), none left as an exception
    assert n > 100 and s["control_plane"]["packets_forwarded_by_it"] == n
    assert s["control_plane"]["app_exceptions"] == {"acl_log": {"forwarded": n}}
    assert "acl_log" not in s["totals"]["exceptions"]
    assert s["totals"]["forwarded"] == consumed["totals"]["forwarded"] + n
    assert s["comparison"].get("wrong_bytes", 0) == 0 and s["totals"]["lost"] == 0


def test_a_model_that_disagrees_fails_the_run_naming_the_packets(tmp_path: Path) -> None:
    code, s = _demo(_excepting_acl(tmp_path, "consume", wrong_model=True))
    assert code == 1 and not s["verdict"]["ok"]
    named = s["comparison"]["mismatches"]
    assert named and s["comparison"]["mismatches_total"] >= len(named)
    # each named packet: the model hands it to the control plane and the block passed it
    # on, or the other way round
    log = {"outcome": "exception", "reason": "acl_log"}
    assert all((m["expected"] == log and m["got"]["outcome"] == "forward") or
               (m["got"] == log and m["expected"]["outcome"] == "forward") for m in named)  # fmt: skip
    assert s["comparison"]["mismatches_total"] == s["comparison"]["wrong_outcome"] + s["comparison"]["wrong_reason"]


def test_control_is_checked_at_its_line(tmp_path: Path) -> None:
    app = _excepting_acl(tmp_path, "consume")
    assert app_reasons(load_app(app)).exceptions["acl_log"].control == "consume"
    for text, want in ((REASONS.format(action="bounce"), "reasons.yaml:6: exceptions.acl_log.control"),
                       ("drops:\n  acl_deny: {code: 40, step: 30, rule: r, control: consume}\n",
                        "reasons.yaml:2: drops.acl_deny.control")):  # fmt: skip
        (app / "reasons.yaml").write_text(text)
        try:
            app_reasons(load_app(app))
            raise AssertionError("no error")
        except AppError as e:
            assert want in str(e), str(e)
