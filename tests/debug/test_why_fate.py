"""`npk why pkt:N` ends with the packet's fate (issue 45): forwarded on a port, dropped by
a block with its reason, or excepted with its reason and what the control plane did --
each as the oracle says for examples/traffic/errors.yaml (`npk traffic predict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic.oracle import Drop, Except, Forward, RefRouter
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.cli import main
from npkit.toolchain.debug.target import frames_of
from npkit.toolchain.debug.why import RunSpec, explain
from npkit.toolchain.system.paths import DEFAULT_ROUTER

ROOT = Path(__file__).resolve().parents[2]
PIPELINED = ROOT / "microcode" / "layouts" / "pipelined.yaml"
ERRORS = ROOT / "examples" / "traffic" / "errors.yaml"


def _oracle(pid: int) -> Any:
    port, frame = frames_of(str(ERRORS))[pid]  # the frames `npk why` hands the MSF
    return RefRouter(RouterConfig.load(DEFAULT_ROUTER)).process(frame, port)  # the config it links with


def _fate(pid: int, params: dict[str, Any], cycles: int = 100_000) -> dict[str, Any]:
    spec = RunSpec([(str(PIPELINED), None)], traffic=str(ERRORS), cycles=cycles, params=params)
    fate = explain(spec, f"pkt:{pid}")["fate"]
    assert isinstance(fate, dict)
    return fate


# the first packets of errors.yaml: 3 forwarded, 5 dropped by parse, 2 excepted (ip_options)
@pytest.mark.parametrize(("pid", "cycles"), [(3, 40_000), (5, 40_000), (2, 40_000)])
def test_fate_is_the_oracles(pid: int, cycles: int) -> None:
    fate, o = _fate(pid, {"control": "host"}, cycles), _oracle(pid)
    if isinstance(o, Forward):
        assert (fate["outcome"], fate["port"]) == ("forwarded", o.port), fate
        assert fate["text"] == f"forwarded on port {o.port}"
    elif isinstance(o, Drop):
        assert (fate["outcome"], fate["reason"], fate["block"], fate["me_name"]) == ("dropped", o.reason, "parse", "0x01")
        assert fate["text"].startswith("dropped by parse (ME 0x01 ctx ") and fate["text"].endswith(f" with {o.reason}")
    else:
        assert isinstance(o, Except)
        assert (fate["outcome"], fate["reason"]) == ("exception", o.reason), fate
        assert fate["text"].startswith(f"excepted with {o.reason}; no control program: the host's reader")


def test_fate_says_what_the_control_daemon_did() -> None:
    # packet 13: a redirect; the daemon sends the redirect and forwards the packet itself
    o = _oracle(13)
    assert isinstance(o, Except) and o.reason == "redirect"
    fate = _fate(13, {"control": "xscale"})
    assert (fate["outcome"], fate["reason"], fate["control_plane"]) == ("exception", "redirect", "forwarded"), fate
    assert fate["text"].startswith(f"excepted with redirect; the control plane forwarded it on port {fate['port']}")


def test_npk_why_prints_the_fate_last() -> None:
    args = ["why", "pkt:5", "--image", str(PIPELINED), "-D", "control=host", "--traffic", str(ERRORS),
            "--cycles", "40000"]  # fmt: skip
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    last = r.output.rstrip().splitlines()[-1]
    assert last.startswith("fate: dropped by parse (ME 0x01 ctx ") and last.endswith(" with link_broadcast_unicast_ip")
