"""`npk traffic compare` on captures of `npk run`: the run's dispositions.json says what
answered its exceptions (`control_plane`); compare, whose oracle is the fast path's,
refuses captures a control daemon answered (exit 2, naming it and `npk run`'s own
verdict) instead of listing dozens of bogus mismatches or calling control_killed an
unknown drop reason, and compares the host stand-in's captures as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.emulator.binding import load_config
from npkit.emulator.traffic.compare import ControlPlaneAnswered, compare_dirs
from npkit.emulator.traffic.control import KILLED
from npkit.emulator.traffic.dataset import DISPOSITIONS, load_dispositions, load_traffic
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
ERRORS = ROOT / "examples" / "traffic" / "errors.yaml"
ROUTER = ROOT / "examples" / "traffic" / "router.yaml"
MS = "0.4"  # of errors.yaml: 89 of its 10,001 packets, 45 of them to the exception path


def npk(*args: object) -> tuple[int, str]:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout if "--json" in args else res.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """errors.yaml generated whole, and three runs of its first 0.4 ms captured: npkd on
    the XScale, the same killed and started again, and the host's stand-in reader."""
    d = tmp_path_factory.mktemp("cmp")
    assert npk("traffic", "gen", ERRORS, "-o", d / "in")[0] == 0
    assert npk("link", "pipelined", "-o", d / "npkd.elf")[0] == 0
    assert npk("link", "pipelined", "-D", "control=host", "-o", d / "host.elf")[0] == 0
    out: dict[str, Any] = {"dir": d}
    for name, elf, extra in (("daemon", "npkd.elf", ()), ("host", "host.elf", ()),
                             ("killed", "npkd.elf", ("--kill-control-at", "0.25", "--restart-control-at", "0.35"))):  # fmt: skip
        code, text = npk("run", d / elf, "--traffic", ERRORS, "--duration-ms", MS, "--capture", d / name, "--json", *extra)
        assert code == 0, text
        out[name] = json.loads(text)
    return out


def _dispositions(runs: dict[str, Any], name: str) -> dict[str, Any]:
    return json.loads((runs["dir"] / name / DISPOSITIONS).read_text())


def _compare(runs: dict[str, Any], out: str | Path) -> tuple[int, str]:
    return npk("traffic", "compare", runs["dir"] / "in", runs["dir"] / out, "--config", ROUTER)


def test_a_daemons_captures_are_refused_naming_it_and_the_runs_verdict(runs: dict[str, Any]) -> None:
    s = runs["daemon"]
    assert s["verdict"]["ok"] and s["comparison"]["matched_control"] > 0
    handled = sum(s["control_plane"]["exceptions_handled"].values())
    assert handled > 0
    assert _dispositions(runs, "daemon")["control_plane"] == {
        "program": "npkd", "placement": "xscale", "exceptions": handled, "events": []}  # fmt: skip
    code, text = _compare(runs, "daemon")
    # before: exit 1 and dozens of bogus missing / wrong_outcome / unexpected issues
    assert code == 2, text
    assert f"npkd on the xscale ({handled} exceptions sent to it)" in text
    assert "fast path only" in text and "comparison, control_plane, verdict" in text
    assert "mismatches" not in text and "missing" not in text and "Traceback" not in text
    with pytest.raises(ControlPlaneAnswered) as err:
        compare_dirs(runs["dir"] / "in", runs["dir"] / "daemon", RouterConfig.load(ROUTER))
    rec = err.value.record
    assert rec is not None and (rec.program, rec.placement, rec.exceptions) == ("npkd", "xscale", handled)


def test_with_json_the_refusal_is_json_on_stdout(runs: dict[str, Any]) -> None:
    """A CI job that reads compare's --json gets the refusal as JSON (before: click's
    usage text, "Usage: npk traffic compare ..." and the reason, on stderr only)."""
    res = CliRunner().invoke(main, ["traffic", "compare", str(runs["dir"] / "in"), str(runs["dir"] / "killed"),
                                    "--config", str(ROUTER), "--json"])  # fmt: skip
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert (doc["ok"], doc["judged"], doc["refused"]) == (False, False, "control_plane_answered")
    assert doc["control_plane"] == _dispositions(runs, "killed")["control_plane"]
    assert "npkd on the xscale (" in doc["reason"] and "Usage:" not in res.output
    res = CliRunner().invoke(main, ["traffic", "compare", str(runs["dir"] / "in"), str(runs["dir"] / "daemon"),
                                    "--config", str(ROUTER)])  # fmt: skip
    assert res.exit_code == 2 and "Usage:" not in res.output and res.stdout == ""
    assert res.stderr.startswith("Error: ") and "fast path only" in res.stderr


def test_a_killed_daemons_captures_are_refused_not_an_unknown_reason(runs: dict[str, Any]) -> None:
    s = runs["killed"]
    assert s["verdict"]["ok"] and s["totals"]["dropped"].get(KILLED, 0) >= 1
    disp = _dispositions(runs, "killed")
    assert any(d["reason"] == KILLED for d in disp["drops"])
    mhz = int(load_config("ixp2800")["clock_mhz"])  # the run's kill and restart, at the cycles its summary gives, in ns
    assert disp["control_plane"]["events"] == [
        {"t_ns": r["cycle"] * 1000 // mhz, "event": r["event"]} for r in s["control_plane"]["restarts"]]  # fmt: skip
    assert [e["event"] for e in disp["control_plane"]["events"]] == ["killed", "restarted"]
    code, text = _compare(runs, "killed")
    # before: exit 1, "drops[20]: unknown drop reason 'control_killed'"
    assert code == 2, text
    assert "unknown drop reason" not in text and "npkd on the xscale (" in text
    assert "killed at 0.2" in text and "restarted at 0.35 ms" in text
    # the reader knows the control plane's reason
    inputs = load_traffic(runs["dir"] / "in")[: disp["offered"]]
    recs = load_dispositions(runs["dir"] / "killed", inputs)
    assert sum(r == ("drop", KILLED) for v in recs.values() for r in v) == s["totals"]["dropped"][KILLED]


def test_the_host_stand_ins_captures_compare_clean(runs: dict[str, Any]) -> None:
    """No daemon: exceptions only reach a counter, dispositions.json names nothing, and
    compare judges the packets the run offered (not the whole generated spec)."""
    disp = _dispositions(runs, "host")
    assert "control_plane" not in disp and runs["host"]["verdict"]["ok"]
    code, text = npk("traffic", "compare", runs["dir"] / "in", runs["dir"] / "host", "--config", ROUTER, "--json")
    assert code == 0, text
    t = json.loads(text)["totals"]
    assert t["inputs"] == disp["offered"] == runs["host"]["totals"]["offered"] < 10_001
    assert t["matched_exception"] == t["predicted_exception"] > 0 and t["matched_drop"] == t["predicted_drop"]
    report = compare_dirs(runs["dir"] / "in", runs["dir"] / "host", RouterConfig.load(ROUTER))
    assert report.ok and report.totals["inputs"] == disp["offered"]


def test_hand_written_dispositions_control_killed_refused_made_up_reason_errors(runs: dict[str, Any]) -> None:
    """A file without `control_plane` whose drops name control_killed is a daemon's too
    (exit 2); a reason neither reasons.yaml nor the control plane knows stays an error
    naming it (exit 1)."""
    d = runs["dir"]
    for name, reason, code_, says in (("hand_killed", KILLED, 2, "records control_killed drops"),
                                      ("hand_made_up", "made_up", 1, "unknown drop reason 'made_up'")):  # fmt: skip
        shutil.copytree(d / "host", d / name)
        disp = _dispositions(runs, "host")
        disp["drops"][0]["reason"] = reason
        (d / name / DISPOSITIONS).write_text(json.dumps(disp))
        code, text = _compare(runs, name)
        assert code == code_ and says in text and "Traceback" not in text, text
