"""microcode/reasons.yaml: consistent, and in step with the oracle."""

from __future__ import annotations

import re

import pytest

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
