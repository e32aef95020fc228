"""Applications (npkit.toolchain.system.app, docs/applications.md): the manifest and its
errors, `--app DIR` on npk demo / link / run, the IPv4 router as the first application,
and block sources looked up in the application's folder before npkit's library."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.toolchain.cli import main
from npkit.toolchain.system.app import AppError, load_app
from npkit.toolchain.system.link import link

ROOT = Path(__file__).resolve().parents[2]
IPV4 = ROOT / "microcode" / "ipv4"
TIMING = ("host_s", "emulated_ms_per_host_s", "host_s_per_emulated_ms")


def _write(folder: Path, manifest: dict[str, Any] | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
    (folder / "app.yaml").write_text(text)
    return folder


def test_ipv4_application_names_the_router_files() -> None:
    app = load_app(IPV4)
    assert app.name == "ipv4" and app.default_layout == "pipelined"
    assert app.layouts["parallel"] == ROOT / "microcode" / "layouts" / "parallel.yaml"
    assert app.file("reasons") == ROOT / "microcode" / "reasons.yaml"
    assert app.file("traffic") == ROOT / "examples" / "traffic" / "seed003_balanced.yaml"
    assert app.layout_file(None) == str(ROOT / "microcode" / "layouts" / "pipelined.yaml")


def _without_timing(s: dict[str, Any]) -> dict[str, Any]:
    s = {k: v for k, v in s.items() if k not in TIMING and k != "app"}
    if isinstance(s.get("run"), dict):
        s["run"] = {k: v for k, v in s["run"].items() if k not in TIMING}
    return s


def test_demo_with_the_ipv4_app_is_the_demo() -> None:
    runs = []
    for extra in ([], ["--app", str(IPV4)]):
        res = CliRunner().invoke(main, ["demo", "--ms", "0.3", "--json", *extra])
        assert res.exit_code == 0, res.output
        runs.append(json.loads(res.output))
    assert "app" not in runs[0] and runs[1]["app"]["name"] == "ipv4"
    assert runs[0]["comparison"] == runs[1]["comparison"] and runs[0]["verdict"] == runs[1]["verdict"]
    assert _without_timing(runs[0]) == _without_timing(runs[1])


def test_link_app_default_layout_and_unknown_layout(tmp_path: Path) -> None:
    out = tmp_path / "r.elf"
    res = CliRunner().invoke(main, ["link", "--app", str(IPV4), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and out.exists()
    res = CliRunner().invoke(main, ["link", "--app", str(IPV4), "nope", "-o", str(out)])
    assert res.exit_code == 1 and "application ipv4 has no such layout" in res.output
    assert "pipelined, parallel" in res.output
    res = CliRunner().invoke(main, ["link", "-o", str(out)])
    assert res.exit_code == 2 and "--app DIR" in res.output


def test_run_app_uses_its_traffic(tmp_path: Path) -> None:
    out = tmp_path / "r.elf"
    assert CliRunner().invoke(main, ["link", "--app", str(IPV4), "-o", str(out)]).exit_code == 0
    res = CliRunner().invoke(main, ["run", str(out), "--app", str(IPV4), "--duration-ms", "0.1", "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["traffic"] == str(ROOT / "examples" / "traffic" / "seed003_balanced.yaml")
    assert s["verdict"]["ok"]


def test_block_source_from_the_app_folder_first(tmp_path: Path) -> None:
    """A layout's block source found in the application's folder is built from there;
    the others come from npkit's library; a change to the folder's source is rebuilt."""
    app_dir = tmp_path / "mine"
    (app_dir / "hdr_format").mkdir(parents=True)
    own = app_dir / "hdr_format" / "hdr_format.uc"
    shutil.copy(ROOT / "microcode" / "hdr_format" / "hdr_format.uc", own)
    shutil.copy(ROOT / "microcode" / "layouts" / "pipelined.yaml", app_dir / "pipe.yaml")
    _write(app_dir, {"name": "mine", "extends": "ipv4", "layouts": {"pipe": "pipe.yaml"}, "default_layout": "pipe"})
    app = load_app(app_dir)
    assert app.chain == ("mine", "ipv4") and set(app.layouts) == {"pipelined", "parallel", "pipe"}
    image = link(None, {"io": "msf"}, app=app)
    progs = {p.name: p for p in image.programs}
    assert str(own) in progs["hdr_format"].source_files
    assert not any(str(app_dir) in f for f in progs["lookup"].source_files)
    assert image.meta["app"] == {"name": "mine", "folder": str(app_dir), "reasons": [str(ROOT / "microcode" / "reasons.yaml")],
                                 "extends": "ipv4"}
    words = list(progs["hdr_format"].words)
    own.write_text(own.read_text().replace("npk_thread_setup", "nop\n    npk_thread_setup", 1))
    os.utime(own, ns=(1, 1))  # another time and size: the cached image is not this one
    again = {p.name: p for p in link(None, {"io": "msf"}, app=load_app(app_dir)).programs}
    assert len(again["hdr_format"].words) == len(words) + 1


def _error(folder: Path) -> str:
    try:
        load_app(folder)
    except AppError as e:
        return str(e)
    raise AssertionError("no error")


def test_manifest_errors_are_located(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", "name: a\nreasons: nothere.yaml\n")
    assert _error(a) == f"{a / 'app.yaml'}:2: reasons: nothere.yaml: no such file (relative to the application's folder)"
    b = _write(tmp_path / "b", "name: b\nlayouts:\n  x: x.yaml\n")
    assert _error(b).startswith(f"{b / 'app.yaml'}:3: layouts.x: x.yaml: no such file")
    c = _write(tmp_path / "c", "name: c\ncolour: red\n")
    assert _error(c).startswith(f"{c / 'app.yaml'}:2: colour: unknown key (allowed: name, ")
    d = _write(tmp_path / "d", "name: 9lives\n")
    assert _error(d).startswith(f"{d / 'app.yaml'}:1: name: '9lives': a name is")
    e = _write(tmp_path / "e", "name: e\nextends: ../f\n")
    _write(tmp_path / "f", "name: f\nextends: ../e\n")
    assert _error(e).startswith(f"{tmp_path / 'f' / 'app.yaml'}:2: extends: ../e: extends itself")
    g = _write(tmp_path / "g", "name: g\ndefault_layout: pipelined2\nextends: ipv4\n")
    assert _error(g).startswith(f"{g / 'app.yaml'}:2: default_layout: pipelined2: not one of the layouts")
    assert _error(tmp_path / "none").endswith("not there")
    (tmp_path / "empty").mkdir()
    assert "no app.yaml in this folder" in _error(tmp_path / "empty")


_KEYS = ["name", "description", "extends", "layouts", "default_layout", "include", "reasons", "tables", "model",
         "router", "routes", "traffic", "other"]  # fmt: skip
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                     st.sampled_from(["ipv4", "x.yaml", "../ipv4", "lay.yaml", "sub", ".", "", "a b", "pipelined"]),
                     st.text(max_size=8))  # fmt: skip
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=5) | st.sampled_from(["x"]),
                                                                         inner, max_size=3)), max_leaves=6)  # fmt: skip
_LOCATED = re.compile(r"^/\S+(:\d+)?: ")


@settings(max_examples=150, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=6) | _VALUES)
def test_any_manifest_gives_an_app_or_a_located_error(tmp_path: Path, manifest: Any) -> None:
    folder = tmp_path / "fz"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "sub").mkdir(parents=True)
    (folder / "lay.yaml").write_text("name: lay\n")
    (folder / "x.yaml").write_text("{}\n")
    _write(folder, yaml.safe_dump(manifest))
    try:
        app = load_app(folder)
    except AppError as e:
        assert _LOCATED.match(str(e)), str(e)
        return
    assert app.folder == folder.resolve() and app.include[0] == folder.resolve()


ACL_REASONS = """\
drops:
  acl_deny:
    code: 40
    step: 30
    rule: a first fragment matching an ACL rule (source prefix, destination port)
"""


def _acl_app(tmp_path: Path, reasons: str = ACL_REASONS) -> Path:
    """An application extending ipv4 with its own reasons and its own copy of hdr_format,
    which assembles only when reasons.h has the application's code."""
    app_dir = tmp_path / "acl"
    (app_dir / "hdr_format").mkdir(parents=True)
    src = (ROOT / "microcode" / "hdr_format" / "hdr_format.uc").read_text()
    check = "#if (DROP_ACL_DENY != 40) || (DROP_SHORT_FRAME != 1)\n#error reasons.h lacks the application's codes\n#endif\n"
    marker = '#include "npk_block.h"'
    assert marker in src
    (app_dir / "hdr_format" / "hdr_format.uc").write_text(src.replace(marker, marker + "\n" + check, 1))
    (app_dir / "reasons.yaml").write_text(reasons)
    _write(app_dir, {"name": "acl", "extends": "ipv4", "reasons": "reasons.yaml"})
    return app_dir


def test_app_reasons_are_npkits_and_its_own(tmp_path: Path) -> None:
    from npkit.emulator.traffic.reasons import load_reasons
    from npkit.toolchain.system.app import app_reasons

    app = load_app(_acl_app(tmp_path))
    assert app.own_reasons and not load_app(IPV4).own_reasons
    reasons = app_reasons(app)
    assert reasons.drop(40).name == "acl_deny" and reasons.drop("short_frame").code == 1
    assert set(reasons.exceptions) == set(load_reasons().exceptions)
    assert "acl_deny" not in load_reasons().drops  # npkit's table is not changed


def test_app_reasons_header_is_generated_for_its_link_only(tmp_path: Path) -> None:
    npkit_header = (ROOT / "microcode" / "include" / "reasons.h").read_bytes()
    app = load_app(_acl_app(tmp_path))
    image = link(None, {"io": "msf"}, app=app)  # hdr_format's #error fires without the app's header
    assert image.meta["app"]["reasons"][-1] == str(tmp_path / "acl" / "reasons.yaml")
    assert (ROOT / "microcode" / "include" / "reasons.h").read_bytes() == npkit_header
    assert not list((tmp_path / "acl").rglob("reasons.h"))


def test_app_reasons_that_collide_with_the_base_are_located(tmp_path: Path) -> None:
    from npkit.toolchain.system.app import app_reasons

    taken = ACL_REASONS.replace("code: 40", "code: 13")
    with_error = load_app(_acl_app(tmp_path / "a", taken))
    path = tmp_path / "a" / "acl" / "reasons.yaml"
    try:
        app_reasons(with_error)
        raise AssertionError("no error")
    except AppError as e:
        assert str(e).startswith(f"{path}:3: drops.acl_deny.code: drop code 13 is the base's ")
    step = load_app(_acl_app(tmp_path / "b", ACL_REASONS.replace("step: 30", "step: 7")))
    res = CliRunner().invoke(main, ["link", "--app", str(step.folder), "-o", str(tmp_path / "x.elf")])
    assert res.exit_code == 1 and f"{step.folder / 'reasons.yaml'}:4: drops.acl_deny.step: step 7 is the base's" in res.output
    name = load_app(_acl_app(tmp_path / "c", ACL_REASONS.replace("acl_deny", "ttl_expired")))
    try:
        app_reasons(name)
        raise AssertionError("no error")
    except AppError as e:
        assert ":2: drops.ttl_expired: ttl_expired: the base already declares a reason of this name" in str(e)


def test_counters_are_named_by_the_app_reasons(tmp_path: Path) -> None:
    from npkit.emulator.binding import Chip
    from npkit.toolchain.system.app import app_reasons
    from npkit.toolchain.system.sysmap import SYS, read_counters

    chip = Chip("ixp2800")
    chip.write32("scratch", SYS.stat_drop_base + 4 * 40, 3)
    chip.write32("scratch", SYS.stat_drop_base + 4 * 1, 2)
    assert read_counters(chip)["drops"] == {"short_frame": 2}  # npkit's reasons: code 40 has no name
    named = read_counters(chip, reasons=app_reasons(load_app(_acl_app(tmp_path))))["drops"]
    assert named == {"short_frame": 2, "acl_deny": 3}


WRONG_MODEL = '''\
from npkit.emulator.traffic.model import ipv4_fields, rule


@rule(after="no_route", drop="acl_deny")
def deny(frame, tables):
    f = ipv4_fields(frame)
    return f is not None and f.sport % 7 == 0
'''
# right: a rule placed before the base's dst_mac_mismatch (step 3) that gives the same outcome
RIGHT_MODEL = '''\
from npkit.emulator.traffic.model import rule

PORT_MACS = {bytes.fromhex("024e500000%02x" % p) for p in range(5)}


@rule(after="short_frame", drop="dst_mac_mismatch")
def not_for_us(frame, tables):
    return len(frame) >= 60 and not frame[0] & 1 and frame[:6] not in PORT_MACS
'''


def _model_app(tmp_path: Path, model: str) -> Path:
    app_dir = tmp_path / "m"
    app_dir.mkdir(parents=True)
    (app_dir / "reasons.yaml").write_text(ACL_REASONS)
    (app_dir / "model.py").write_text(model)
    _write(app_dir, {"name": "m", "extends": "ipv4", "reasons": "reasons.yaml", "model": "model.py"})
    return app_dir


def test_a_wrong_model_fails_the_run(tmp_path: Path) -> None:
    """The model drops a seventh of the packets the microcode forwards: exit 1, wrong_outcome."""
    app_dir = _model_app(tmp_path, WRONG_MODEL)
    res = CliRunner().invoke(main, ["demo", "--app", str(app_dir), "--ms", "0.2", "--json"])
    assert res.exit_code == 1
    s = json.loads(res.output[: res.output.rindex("}") + 1])
    assert s["comparison"]["wrong_outcome"] > 0 and not s["verdict"]["ok"]
    assert any("wrong_outcome" in r for r in s["verdict"]["reasons"])


def test_a_model_rule_composes_with_the_ipv4_oracle(tmp_path: Path) -> None:
    """A rule that decides earlier what the base decides at a later step: the run is
    judged as without it, and the rule did run on the frames that reached it."""
    from npkit.emulator.traffic.cpkt import DROP, c_router, oracle_window
    from npkit.emulator.traffic.model import load_model
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.window import Window
    from npkit.toolchain.system.app import app_reasons

    app = load_app(_model_app(tmp_path, RIGHT_MODEL))
    model = load_model(app.file("model"), app_reasons(app))
    cfg = RouterConfig.load(ROOT / "examples" / "traffic" / "router.yaml")
    # a frame for port 0's MAC, one for nobody, one too short
    frames = [bytes.fromhex("024e50000000") + bytes(6) + b"\x08\x00" + bytes(50),
              bytes.fromhex("020000000099") + bytes(6) + b"\x08\x00" + bytes(50),
              bytes.fromhex("020000000099") + bytes(6) + b"\x08\x00" + bytes(20)]  # fmt: skip
    w = Window(0)
    for f in frames:
        w.off.append(len(w.data))
        w.lens.append(len(f))
        w.ports.append(0)
        w.data += f
    base = oracle_window(c_router(cfg), w.data, w.off, w.lens, w.ports)
    before = [base.outcome(i, w.off[i], w.lens[i]) for i in range(3)]
    v = model.apply(base, w.data, w.off, w.lens)
    after = [v.outcome(i, w.off[i], w.lens[i]) for i in range(3)]
    assert after == before and after[1].reason == "dst_mac_mismatch" and v.kind[1] == DROP
    assert model.frames_run == 2  # the short frame was decided at step 1, before the rule
    res = CliRunner().invoke(main, ["demo", "--app", str(app.folder), "--ms", "0.2", "--json",
                                    "--traffic", str(ROOT / "examples" / "traffic" / "errors.yaml")])  # fmt: skip
    s = json.loads(res.output[: res.output.rindex("}") + 1])
    assert res.exit_code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["comparison"].get("wrong_outcome", 0) == 0


def test_model_errors_are_located(tmp_path: Path) -> None:
    from npkit.emulator.traffic.model import ModelError, load_model
    from npkit.toolchain.system.app import app_reasons

    app = load_app(_model_app(tmp_path, WRONG_MODEL))
    reasons = app_reasons(app)
    path = app.folder / "model.py"
    for text, want in ((WRONG_MODEL.replace('after="no_route"', 'after="lookup"'),
                        f"{path}:4: rule deny: after='lookup' is not one of the base's rules"),
                       (WRONG_MODEL.replace('drop="acl_deny"', 'drop="acl_denied"'),
                        f"{path}:4: rule deny: unknown drop reason 'acl_denied'"),
                       (WRONG_MODEL + "\nx = 1 / 0\n", f"{path}:9: ZeroDivisionError: division by zero")):  # fmt: skip
        path.write_text(text)
        try:
            load_model(path, reasons)
            raise AssertionError("no error")
        except ModelError as e:
            assert str(e).startswith(want), str(e)


_REASON_FIELDS = st.dictionaries(st.sampled_from(["code", "step", "rule", "ref", "note", "icmp", "control", "other"]),
                                 _SCALARS, max_size=5)  # fmt: skip
_REASON_FILES = st.one_of(
    _VALUES,
    st.dictionaries(st.sampled_from(["drops", "exceptions", "version", "x"]),
                    st.one_of(_VALUES, st.dictionaries(st.sampled_from(["acl_deny", "ttl_expired", "Bad", "x"]),
                                                       _REASON_FIELDS | _VALUES, max_size=3)), max_size=3),
)  # fmt: skip


@settings(max_examples=150, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(_REASON_FILES)
def test_any_app_reasons_file_gives_a_table_or_an_error_naming_it(tmp_path: Path, reasons: Any) -> None:
    from npkit.toolchain.system.app import app_reasons

    folder = tmp_path / "rz"
    folder.mkdir(exist_ok=True)
    (folder / "reasons.yaml").write_text(yaml.safe_dump(reasons))
    _write(folder, {"name": "rz", "extends": "ipv4", "reasons": "reasons.yaml"})
    try:
        table = app_reasons(load_app(folder))
    except AppError as e:
        assert str(e).startswith(str(folder / "reasons.yaml")), str(e)
        return
    assert table.drop("short_frame").code == 1
