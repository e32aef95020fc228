"""microcode/reasons.yaml: consistent, and in step with the oracle."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic import oracle
from npkit.emulator.traffic.reasons import ReasonError, load_reasons, parse_reasons


def test_codes_unique_and_named() -> None:
    reasons = load_reasons()
    for table in (reasons.drops, reasons.exceptions):
        codes = [r.code for r in table.values()]
        assert len(codes) == len(set(codes)) and min(codes) >= 1
    assert reasons.drop("bad_checksum").code == 9
    assert reasons.drop(9).name == "bad_checksum"
    assert reasons.exception("no_route").icmp.startswith("Destination Unreachable")
    with pytest.raises(ReasonError):
        reasons.drop("no_route")  # an exception, not a drop


def test_every_predicted_rule_cites_a_requirement() -> None:
    for r in load_reasons().in_order():
        assert r.ref, f"{r.name} has no ref"


def test_oracle_docstring_lists_the_yaml_steps_in_order() -> None:
    """The microcode is written from this list; it must not drift from the YAML."""
    listed = re.findall(r"^\s*(\d+)\. (\w+)\s+(drop|exc)\b", oracle.__doc__ or "", re.M)
    yaml_order = [(r.step, r.name, "exc" if r.kind == "exception" else "drop")
                  for r in load_reasons().in_order()]
    assert [(int(n), name, kind) for n, name, kind in listed] == yaml_order


def test_resource_drops_are_not_predicted() -> None:
    reasons = load_reasons()
    resource = {r.name for r in reasons.drops.values() if not r.predicted}
    assert {"rbuf_full", "queue_full", "tbuf_underrun", "no_rx_thread"} <= resource


def test_c_header_defines_every_code() -> None:
    reasons = load_reasons()
    header = reasons.c_header()
    defines = dict(re.findall(r"^#define (\w+)\s+(\d+)", header, re.M))
    assert defines["DROP_BAD_CHECKSUM"] == "9"
    assert defines["EXC_TTL_EXPIRED"] == str(reasons.exception("ttl_expired").code)
    assert len([k for k in defines if not k.endswith("CODE_LIMIT")]) == len(reasons.drops) + len(
        reasons.exceptions)


def test_inconsistent_yaml_is_rejected() -> None:
    with pytest.raises(ReasonError, match="code 1 used by"):
        parse_reasons("drops: {a: {code: 1, rule: x}, b: {code: 1, rule: y}}\nexceptions: {}")
    with pytest.raises(ReasonError, match="step 3 used by"):
        parse_reasons("drops: {a: {code: 1, step: 3, rule: x}}\n"
                      "exceptions: {b: {code: 1, step: 3, rule: y}}")


# ---- the schema: every problem at its line, never a traceback (issue 45) ---------------------

REASONS_YAML = Path(__file__).resolve().parents[2] / "microcode" / "reasons.yaml"
NO_ROUTE_STEP = "    step: 19\n"  # exceptions.no_route


def _broken(tmp_path: Path, step: str) -> tuple[Path, int]:
    """reasons.yaml with no_route's step replaced: the file and the line of the step."""
    text = REASONS_YAML.read_text()
    assert text.count(NO_ROUTE_STEP) == 1
    path = tmp_path / "reasons.yaml"
    path.write_text(text.replace(NO_ROUTE_STEP, f"    step: {step}\n"))
    return path, text[: text.index(NO_ROUTE_STEP)].count("\n") + 1


@pytest.mark.parametrize(("step", "shown"), [("19.5", "19.5"), ("twenty", "'twenty'"), ("true", "True")])
def test_a_step_that_is_not_an_integer_is_an_error_at_its_line(tmp_path: Path, step: str, shown: str) -> None:
    # was: 19.5 silently truncated to 19 (then a clash of steps), 'twenty' a bare ValueError
    path, line = _broken(tmp_path, step)
    with pytest.raises(ReasonError) as e:
        load_reasons.__wrapped__(str(path))
    assert str(e.value) == f"{path}:{line}: exceptions.no_route.step: expected an integer, got {shown}"


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("drops: {a: {code: 1.0, rule: x}}", "<r>:1: drops.a.code: expected an integer, got 1.0"),
    ("drops: {a: {code: 300, rule: x}}", "<r>:1: drops.a.code: "),
    ("drops: {Bad-Name: {code: 1, rule: x}}", "<r>:1: drops.Bad-Name: reason name 'Bad-Name'"),
    ("drops: {a: {code: 1, rule: x, colour: red}}", "<r>:1: drops.a.colour: "),
    ("drops: {a: {code: 1}}", "<r>:1: drops.a.rule: "),
    ("drops: [a, b]", "<r>:1: drops: expected a mapping of reason name -> fields, got a list"),
    ("drops:\n  a: {code: 1, rule: x}\nexceptions:\n  a: {code: 1, rule: y}\n",
     "<r>:4: exceptions.a: 'a' names a drop too"),
    ("- 1\n", "<r>:1: (top level): "),
])  # fmt: skip
def test_every_field_is_checked_with_its_line(yaml_text: str, expected: str) -> None:
    with pytest.raises(ReasonError) as e:
        parse_reasons(yaml_text, "<r>")
    assert str(e.value).startswith(expected), str(e.value)


def test_npk_traffic_reasons_and_npk_link_print_the_located_error(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from npkit.emulator.traffic import reasons as reasons_mod
    from npkit.toolchain.cli import main

    path, line = _broken(tmp_path, "twenty")
    res = CliRunner().invoke(main, ["traffic", "reasons", str(path)])
    assert res.exit_code == 1, res.output
    assert f"{path}:{line}: exceptions.no_route.step: expected an integer, got 'twenty'" in res.output
    assert "Traceback" not in res.output
    # npk link reads microcode/reasons.yaml: this one stands in for it (the header is not
    # written: the file is refused first), with the process's cache of it emptied
    monkeypatch.setattr(reasons_mod, "REASONS_PATH", path)
    load_reasons.cache_clear()
    try:
        res = CliRunner().invoke(main, ["link", "pipelined", "-o", str(tmp_path / "r.elf")])
    finally:
        load_reasons.cache_clear()
    assert res.exit_code == 1, res.output
    assert f"{path}:{line}: exceptions.no_route.step: expected an integer, got 'twenty'" in res.output
    assert not (tmp_path / "r.elf").exists()
