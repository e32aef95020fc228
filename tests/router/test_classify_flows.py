"""`-D classify=flows` (docs/flows.md): the flow table before the route lookup, in both
layouts, at 5 x 1 Gb/s, judged by the flow table's model; the chip's per-flow counters
equal the model's; a route entry changes where its flow goes; a bad declaration is an
error at its line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic.flows import FlowError, FlowKey, gf_hash128, key_of, load_flows
from npkit.emulator.traffic.router_config import load_router_config
from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "examples" / "traffic" / "flows.yaml"
ROUTER = ROOT / "examples" / "traffic" / "router.yaml"


def _demo(*args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["demo", "--json", "--ms", "1", *args])
    summary, _ = json.JSONDecoder().raw_decode(res.output[res.output.index("{") :])
    return res.exit_code, summary


@pytest.mark.parametrize(("layout", "cache"), [("pipelined", "0"), ("parallel", "0"), ("pipelined", "1")])
def test_classify_flows_at_line_rate_is_judged_ok(layout: str, cache: str) -> None:
    extra = ["-D", f"flow_cache={cache}"] if cache == "1" else []
    code, s = _demo("--layout", layout, "-D", "classify=flows", *extra, "--traffic", str(TRAFFIC))
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["params"]["classify"] == "flows"
    assert s["totals"]["lost"] == 0 and s["throughput"]["pct_line_rate"] > 99.0
    f = s["flows"]
    assert f["hits"] == f["model_hits"] > 0 and not f["problems"]
    by_action = {r["action"]: r for r in f["table"]}
    route = by_action["route"]
    assert route["packets"] == route["model_packets"] > 0
    assert all(r["bytes"] == r["model_bytes"] for r in f["table"])


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
def test_classify_flows_with_the_demos_own_traffic(layout: str) -> None:
    """`npk demo -D classify=flows` as it is (seed 003's traffic at 5 x 1 Gb/s, a new flow
    every packet: every one pays the classify step and misses)."""
    code, s = _demo("--layout", layout, "-D", "classify=flows")
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert s["throughput"]["pct_line_rate"] > 99.0 and s["totals"]["lost"] == 0
    assert s["flows"]["hits"] == s["flows"]["model_hits"] == 0


def test_default_layout_has_no_flow_table() -> None:
    code, s = _demo("--traffic", str(TRAFFIC))
    assert code == 0 and s["verdict"]["ok"] and "flows" not in s


def test_a_route_entry_sends_its_flow_to_its_own_next_hop() -> None:
    """The model of a route entry: the frame rewritten for the flow's next hop (10.0.1.3),
    not the route's (the on-link host itself)."""
    from npkit.emulator.traffic.flows import FlowModel

    cfg = load_router_config(ROUTER)
    table = load_flows(ROOT / "microcode" / "classify" / "flows.yaml", cfg)
    model = FlowModel(table, cfg)
    route = next(f for f in table.flows if f.action == "route")
    frame = bytearray(78 - 4)
    frame[0:6] = bytes(cfg.ports[0].mac)
    frame[12:14] = b"\x08\x00"
    frame[14], frame[22], frame[23] = 0x45, 64, 17
    frame[16:18] = (60).to_bytes(2, "big")
    frame[26:30] = route.key.src.to_bytes(4, "big")
    frame[30:34] = route.key.dst.to_bytes(4, "big")
    frame[34:36] = route.key.sport.to_bytes(2, "big")
    frame[36:38] = route.key.dport.to_bytes(2, "big")
    assert key_of(bytes(frame)) == route.key
    kind, (port, out) = model.decide(bytes(frame), 0)
    assert kind == "forward" and port == 1 and out[0:6] == bytes(cfg.arp[route.via]) and out[22] == 63
    frame[22] = 1
    assert model.decide(bytes(frame), 0) == ("exception", "ttl_expired")
    frame[34] ^= 1  # another source port: no entry
    assert model.decide(bytes(frame), 0) is None


def test_the_hash_is_the_hash_units() -> None:
    # GF(2): key 1 hashes to the multiplier, and the hash is linear
    assert gf_hash128(1, 0x1234) == 0x1234
    a, b = FlowKey(1, 2, 17, 3, 4), FlowKey(5, 6, 6, 7, 8)
    assert a.bucket(1024) != b.bucket(1024) or a.bucket(4096) != b.bucket(4096)


def test_a_bad_flow_is_an_error_at_its_line(tmp_path: Path) -> None:
    cfg = load_router_config(ROUTER)
    p = tmp_path / "flows.yaml"
    p.write_text("buckets: 64\nflows:\n  - {src: 1.2.3.4, dst: 10.0.1.10, proto: udp, action: route, via: 10.9.9.9, port: 1}\n")
    with pytest.raises(FlowError, match=r"flows.yaml:3: via: 10.9.9.9: not in the router's ARP table"):
        load_flows(p, cfg)
    p.write_text("buckets: 100\n")
    with pytest.raises(FlowError, match=r"flows.yaml:1: buckets: 100: a power of two"):
        load_flows(p, cfg)


def test_a_model_that_ignores_route_entries_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge compares the chip with the flow table's model: a model that forgets what
    a route entry does finds the route flow's frames wrong."""
    from npkit.emulator.traffic import flows

    real = flows.FlowModel.decide

    def forgetful(self: Any, frame: bytes, in_port: int, count: bool = True) -> Any:
        d = real(self, frame, in_port, count)
        return None if d is not None and d[0] == "forward" else d

    monkeypatch.setattr(flows.FlowModel, "decide", forgetful)
    code, s = _demo("-D", "classify=flows", "--traffic", str(TRAFFIC))
    assert code == 1 and not s["verdict"]["ok"]
    assert s["comparison"].get("wrong_bytes", 0) > 0


def test_an_application_declares_its_own_flows(tmp_path: Path) -> None:
    """An application's classify/flows.yaml replaces npkit's: the route flow now goes to
    10.0.1.2; the image's SRAM, the microcode's header and the model all follow."""
    app = tmp_path / "myflows"
    (app / "classify").mkdir(parents=True)
    (app / "app.yaml").write_text("name: myflows\nextends: ipv4\n")
    text = (ROOT / "microcode" / "classify" / "flows.yaml").read_text()
    assert "via: 10.0.1.3" in text
    (app / "classify" / "flows.yaml").write_text(text.replace("via: 10.0.1.3", "via: 10.0.1.2"))
    code, s = _demo("--app", str(app), "-D", "classify=flows", "--traffic", str(TRAFFIC))
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    route = next(r for r in s["flows"]["table"] if r["action"] == "route")
    assert route["packets"] == route["model_packets"] > 0 and route["via"] == "10.0.1.2"


def test_flow_cache_needs_the_lookup_cam_to_itself() -> None:
    from npkit.toolchain.system.layout import LinkError
    from npkit.toolchain.system.link import link

    with pytest.raises(LinkError, match="flow_cache .* needs the lookup block's CAM to itself"):
        link("pipelined", {"classify": "flows", "flow_cache": True, "lookup_cache": True})


def test_a_table_over_the_flow_table_is_refused(tmp_path: Path) -> None:
    app = tmp_path / "clash"
    app.mkdir()
    (app / "app.yaml").write_text("name: clash\nextends: ipv4\ntables: tables.yaml\n")
    (app / "tables.yaml").write_text("t:\n  memory: sram\n  base: 0xC0200000\n  fields: {a: {bits: 8}}\n"
                                     "  rows:\n    - {a: 1}\n")
    res = CliRunner().invoke(main, ["link", "--app", str(app), "-D", "classify=flows", "-o", str(tmp_path / "x.elf")])
    assert res.exit_code != 0 and "claimed twice" in res.output and "the flow table" in res.output, res.output
    assert "Traceback" not in res.output
