"""An application's model.py, any of it (Hypothesis): loading it gives a Model or a
ModelError that names the file and a line, never another exception; a model that loads,
applied to a window of frames, judges them or raises a ModelError naming the file, the
line and the rule -- a rule's own error at run time too (and `npk demo` says it as an
error, exit 1).  The other file kinds have theirs: tests/router/test_apps.py (app.yaml,
an application's reasons.yaml), tests/router/test_app_tables.py (tables.yaml),
tests/formats/test_fuzz_formats.py (npkit's reasons.yaml)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.emulator.traffic.cpkt import c_router, oracle_window
from npkit.emulator.traffic.model import ModelError, load_model
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.window import Window
from npkit.toolchain.cli import main
from npkit.toolchain.system.app import app_reasons, load_app
from npkit.toolchain.system.app_tables import load_tables, model_rows

ROOT = Path(__file__).resolve().parents[2]
ACL = ROOT / "examples" / "apps" / "acl"
APP = load_app(ACL)
REASONS = app_reasons(APP)
TABLES = model_rows({t.name: t.record() for t in load_tables(ACL / "tables.yaml")})

_HEAD = st.sampled_from(["from npkit.emulator.traffic.model import ipv4_fields, rule",
                         "from npkit.emulator.traffic.model import rule", "import os", "", "x = = 1",
                         "raise SystemExit(3)", "from npkit.emulator.traffic.model import nothing",
                         "rule = 5", "import npkit_no_such_module"])  # fmt: skip
_AFTER = st.sampled_from(['"no_route"', '"lookup"', '"short_frame"', "3", "None", '"ttl_expired"'])
_REASON = st.sampled_from(['drop="acl_deny"', 'exception="acl_deny"', 'drop="ttl_expired"', 'drop="nosuch"',
                           "drop=5", "", 'drop="acl_deny", exception="acl_deny"', "drop=40"])  # fmt: skip
_BODY = st.sampled_from(["return True", "return False", "return 1 / 0", 'return tables["acl"]',
                         'return tables["nosuch"]', "return ipv4_fields(frame) is not None", "return frame[99999]",
                         "raise SystemExit(2)", "return f(frame)", "return len(frame) > 80",
                         "return any(r['dport'] == 23 for r in tables['acl'])", "pass"])  # fmt: skip
_RULE = st.tuples(_AFTER, _REASON, _BODY, st.booleans()).map(
    lambda t: f"@rule(after={t[0]}{', ' + t[1] if t[1] else ''})\ndef r(frame, tables):\n    {t[2]}\n"
    if t[3] else f"r = rule(after={t[0]}{', ' + t[1] if t[1] else ''})({t[2].startswith('return') and 'lambda frame, tables: ' + t[2][7:] or 'print'})\n")  # fmt: skip
_IMPORT = "from npkit.emulator.traffic.model import ipv4_fields, rule\n"
_MODELS = st.tuples(st.booleans(), st.lists(_HEAD, max_size=2), st.lists(_RULE, max_size=3)).map(
    lambda t: (_IMPORT if t[0] else "") + "\n".join(t[1]) + "\n\n"
    + "\n\n".join(r.replace(" r(", f" r{k}(").replace("r = ", f"r{k} = ") for k, r in enumerate(t[2])))


def _window() -> Window:
    """A frame for port 0's MAC (IPv4, TCP to port 23 from 198.18.0.1), one for nobody, one too short."""
    ip = bytes.fromhex("450000280001000040060000c6120001") + bytes([10, 0, 1, 5]) + bytes.fromhex("04d20017") + bytes(16)
    frames = [bytes.fromhex("024e50000000") + bytes(6) + b"\x08\x00" + ip,
              bytes.fromhex("020000000099") + bytes(6) + b"\x08\x00" + ip,
              bytes.fromhex("020000000099") + bytes(6) + b"\x08\x00" + bytes(20)]  # fmt: skip
    w = Window(0)
    for f in frames:
        w.off.append(len(w.data))
        w.lens.append(len(f))
        w.ports.append(0)
        w.data += f
    return w


WINDOW = _window()
BASE = oracle_window(c_router(RouterConfig.load(ROOT / "examples" / "traffic" / "router.yaml")), WINDOW.data,
                     WINDOW.off, WINDOW.lens, WINDOW.ports)  # fmt: skip
LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): ")


def _located(e: ModelError, path: Path) -> None:
    m = LOCATED.match(str(e))
    assert m is not None and m["file"] == str(path), str(e)
    assert 0 <= int(m["line"]) <= len(path.read_text().splitlines()) + 1, str(e)


@settings(max_examples=200, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(_MODELS)
def test_any_model_gives_verdicts_or_a_located_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "model.py"
    path.write_text(text)
    try:
        model = load_model(path, REASONS, TABLES)
    except ModelError as e:
        if not str(e).startswith(f"{path}: "):  # (an error of the whole file: no line to name)
            _located(e, path)
        return
    from dataclasses import replace

    base = replace(BASE, kind=bytearray(BASE.kind), reason=bytearray(BASE.reason))
    try:
        v = model.apply(base, WINDOW.data, WINDOW.off, WINDOW.lens)
    except ModelError as e:
        _located(e, path)
        assert "rule " in str(e)
        return
    outcomes: list[Any] = [v.outcome(i, WINDOW.off[i], WINDOW.lens[i]) for i in range(3)]
    assert outcomes[2].reason == "short_frame"  # decided at step 1: no rule ran on it


def test_a_rule_that_fails_at_run_time_is_a_located_error_of_the_run(tmp_path: Path) -> None:
    app = tmp_path / "acl"
    shutil.copytree(ACL, app, ignore=shutil.ignore_patterns("__pycache__"))
    text = (app / "model.py").read_text()
    (app / "model.py").write_text(text.replace("    f = ipv4_fields(frame)\n",
                                               "    f = ipv4_fields(frame)\n    assert f is None or f.dport != 53\n"))  # fmt: skip
    res = CliRunner().invoke(main, ["demo", "--app", str(app), "--ms", "0.3", "--json"])
    assert res.exit_code == 1 and res.exception is None or isinstance(res.exception, SystemExit)
    line = next(n for n, t in enumerate((app / "model.py").read_text().splitlines(), 1) if "assert f is None" in t)
    assert f"{(app / 'model.py').resolve()}:{line}: rule acl: AssertionError" in res.output
