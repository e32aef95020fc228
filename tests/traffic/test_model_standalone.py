"""A standalone model (an application without a base decides every frame itself:
npkit.emulator.traffic.model, `@decide`), on the UDP load balancer's (examples/apps/udplb):
its outputs are right from scratch, its hash spreads flows over each service's backends,
the batch API agrees with the one-frame API, and a model that cannot be used is an error
naming its file and line."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.cpkt import DROP, FORWARD
from npkit.emulator.traffic.generator import generate
from npkit.emulator.traffic.model import ModelError, StandaloneModel, load_model
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.spec import load_spec
from npkit.emulator.traffic.window import offsets
from npkit.toolchain.system.app import AppError, app_reasons, load_app, model_of_app, model_of_image
from npkit.toolchain.system.app_tables import load_tables

ROOT = Path(__file__).resolve().parents[2]
UDPLB = ROOT / "examples" / "apps" / "udplb"
OWN = ("lb_runt", "lb_not_ours", "lb_not_ipv4", "lb_bad_header", "lb_fragment", "lb_not_udp", "lb_no_service",
       "lb_ttl_expired")  # fmt: skip


@pytest.fixture(scope="module")
def model() -> StandaloneModel:
    m = model_of_app(load_app(UDPLB))
    assert isinstance(m, StandaloneModel)
    return m


@pytest.fixture(scope="module")
def frames() -> list[Any]:
    spec = load_spec(UDPLB / "traffic.yaml", {"router": str(UDPLB / "router.yaml"), "duration_ns": 400_000})
    return generate(spec)


def _window(frames: list[Any]) -> tuple[bytes, Any, Any, Any]:
    from array import array

    lens = array("H", (len(p.data) for p in frames))
    return b"".join(p.data for p in frames), offsets(lens)[0], lens, array("B", (p.port for p in frames))


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _tables() -> dict[str, list[dict[str, Any]]]:
    return {t.name: t.rows for t in load_tables(UDPLB / "tables.yaml")}


def test_every_reason_is_hit_and_forwarded_frames_are_right_from_scratch(model: StandaloneModel,
                                                                        frames: list[Any]) -> None:  # fmt: skip
    """Every forwarded frame: the backend's MAC, address and port, the port's MAC as
    source, TTL one less, an IPv4 header checksum and a UDP checksum that verify when
    summed from scratch (the model updates them incrementally), the payload unchanged."""
    tables = _tables()
    backends, services = tables["backends"], {(s["vip"], s["port"]) for s in tables["services"]}
    macs = [p.mac for p in RouterConfig.load(UDPLB / "router.yaml").ports]
    v = model.verdicts(*_window(frames))
    counts = Counter(v.names[v.reason[i]] if v.kind[i] == DROP else "forward" for i in range(len(frames)))
    assert set(counts) == {"forward", *OWN}, counts
    checked = 0
    for i, p in enumerate(frames):
        if v.kind[i] != FORWARD:
            continue
        inp, out = p.data, model.decide(p.data, p.port).frame
        b = next(b for b in backends if b["ip"] == int.from_bytes(out[30:34], "big"))
        assert (int.from_bytes(inp[30:34], "big"), int.from_bytes(inp[36:38], "big")) in services
        assert v.port[i] == b["port"]
        assert out[0:6] == b["mac_hi"].to_bytes(4, "big") + b["mac_lo"].to_bytes(2, "big")
        assert out[6:12] == macs[b["port"]] and out[12:14] == b"\x08\x00"
        assert out[22] == inp[22] - 1 and out[26:30] == inp[26:30] and out[34:38] == inp[34:38]
        assert _sum16(out[14:34]) == 0xFFFF
        ulen = int.from_bytes(out[38:40], "big")
        pseudo = out[26:34] + bytes((0, 17)) + out[38:40]
        assert out[40:42] != b"\0\0" and _sum16(pseudo + out[34 : 34 + ulen]) == 0xFFFF
        assert out[42:] == inp[42:]
        checked += 1
    assert checked > 500


def test_the_batch_api_agrees_with_one_frame_at_a_time(model: StandaloneModel, frames: list[Any]) -> None:
    data, off, lens, ports = _window(frames)
    v = model.verdicts(data, off, lens, ports)
    for i, p in enumerate(frames[:3000]):
        one = model.decide(p.data, p.port)
        assert one.kind == v.kind[i]
        if one.kind == FORWARD:
            assert (one.port, one.frame) == (v.port[i], bytes(v.out[off[i] : off[i] + lens[i]]))
        else:
            assert one.reason == v.names[v.reason[i]]
            assert bytes(v.out[off[i] : off[i] + lens[i]]) == p.data


def test_the_hash_spreads_flows_over_each_services_backends(model: StandaloneModel, frames: list[Any]) -> None:
    """Each backend of a service takes its share of the service's flows (source address
    and port), within a third; a flow always goes to the same backend."""
    tables = _tables()
    by_ip = {b["ip"]: k for k, b in enumerate(tables["backends"])}
    flows: dict[tuple[int, int], Counter[int]] = {}
    seen: dict[tuple[bytes, bytes, bytes], int] = {}
    for p in frames:
        r = model.decide(p.data, p.port)
        if r.kind != FORWARD:
            continue
        d = p.data
        key = (int.from_bytes(d[30:34], "big"), int.from_bytes(d[36:38], "big"))
        k = by_ip[int.from_bytes(r.frame[30:34], "big")]
        flow = (d[26:30], d[34:36], d[30:34] + d[36:38])
        assert seen.setdefault(flow, k) == k, f"flow {flow} went to backends {seen[flow]} and {k}"
        flows.setdefault(key, Counter())[k] += 1
    for s in tables["services"]:
        got = flows[(s["vip"], s["port"])]
        mine = range(s["first"], s["first"] + s["count"])
        assert set(got) == set(mine), (s, got)
        fair = sum(got.values()) / s["count"]
        assert all(abs(got[k] - fair) < fair / 3 for k in mine), (s, got)


def _write_model(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text("from npkit.emulator.traffic.model import decide, drop, forward, rule\n\n" + body)
    return path


def _load(path: Path) -> Any:
    return load_model(path, app_reasons(load_app(UDPLB)), {}, RouterConfig.load(UDPLB / "router.yaml"))


@pytest.mark.parametrize("body, says", [
    ("@decide\ndef m(frame, port, ctx):\n    return drop('no_such_reason')\n", "model.py:3: m: drop('no_such_reason'): no drop reason"),
    ("@decide\ndef m(frame, port, ctx):\n    return forward(1, frame[:-1])\n", "a forwarded frame keeps its length"),
    ("@decide\ndef m(frame, port, ctx):\n    return None\n", "return forward(port, frame), drop(reason) or exception(reason)"),
    ("@decide\ndef m(frame, port, ctx):\n    return 1 // 0\n", "model.py:5: ZeroDivisionError"),
    ("@decide\ndef m(frame, port, ctx):\n    return drop('lb_runt')\n\n@decide\ndef n(frame, port, ctx):\n"
     "    return drop('lb_runt')\n", "model.py:7: n: a model decides every frame with one @decide function"),
])  # fmt: skip
def test_a_model_that_cannot_be_used_is_a_located_error(tmp_path: Path, frames: list[Any], body: str, says: str) -> None:
    with pytest.raises(ModelError) as e:
        _load(_write_model(tmp_path, body)).verdicts(*_window(frames[:50]))
    assert says in str(e.value) and str(tmp_path) in str(e.value)


def test_a_deciding_model_in_an_application_with_a_base_is_refused(tmp_path: Path) -> None:
    path = _write_model(tmp_path, "@decide\ndef m(frame, port, ctx):\n    return drop('lb_runt')\n")
    meta = {"app": {"name": "x", "model": str(path), "extends": "ipv4"}}
    with pytest.raises(AppError, match="is for an application without extends"):
        model_of_image(meta, app_reasons(load_app(UDPLB)), RouterConfig.load(UDPLB / "router.yaml"))


def test_the_traffic_hits_and_misses_every_service(frames: list[Any]) -> None:
    """For each service: UDP to it, UDP to its VIP on another port, UDP to its port on
    another address, and TCP to its VIP and port."""
    udp, tcp = Counter(), Counter()
    for p in frames:
        d = p.data
        if len(d) >= 42 and d[12:14] == b"\x08\x00" and d[14] == 0x45 and not int.from_bytes(d[20:22], "big") & 0x3FFF:
            (udp if d[23] == 17 else tcp if d[23] == 6 else Counter())[(d[30:34], d[36:38])] += 1
    for s in _tables()["services"]:
        vip, port = s["vip"].to_bytes(4, "big"), s["port"].to_bytes(2, "big")
        assert udp[(vip, port)] > 0 and tcp[(vip, port)] > 0, s
        assert sum(n for (a, q), n in udp.items() if a == vip and q != port) > 0, s
        assert sum(n for (a, q), n in udp.items() if a != vip and q == port) > 0, s
