"""A traffic spec's `fields:` (issue 45, traffic can reach any block): the L2-L4 fields of
the generated frames are what the spec says, the C and Python builders agree, the same
seed gives the same bytes, a spec without fields is unchanged, every bad section is a
located error, and the router judges such traffic correctly."""

from __future__ import annotations

import ipaddress
import json
import re
import struct
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.emulator.traffic.cpkt import CFrameBuilder, c_router, oracle_window
from npkit.emulator.traffic.frames import FrameBuilder
from npkit.emulator.traffic.generator import iter_packets
from npkit.emulator.traffic.oracle import Drop, RefRouter
from npkit.emulator.traffic.pcap import PcapReader
from npkit.emulator.traffic.spec import KINDS, SpecError, TrafficSpec, load_spec, spec_from_dict
from npkit.emulator.traffic.spec_fields import FIELD_NAMES
from npkit.emulator.traffic.window import window_of
from npkit.toolchain.cli import main

from .conftest import EXAMPLES, ROUTER_YAML

FIELDS_YAML = EXAMPLES / "fields.yaml"
S, SA, A = 0x02, 0x12, 0x10


def _spec(fields: dict[str, Any], seed: int = 3, count: int = 300, **port: Any) -> TrafficSpec:
    return spec_from_dict({"seed": seed, "router": str(ROUTER_YAML), "count": count,
                           "defaults": {"size": {"uniform": [100, 400]}, "load": 0.5, "fields": fields, **port}},
                          EXAMPLES)  # fmt: skip


def _parse(frame: bytes) -> dict[str, Any]:
    """The fields of a generated frame, read back from its bytes."""
    out: dict[str, Any] = {"vlan": None}
    at = 12
    if frame[12:14] == b"\x81\x00":
        out["vlan"] = struct.unpack_from("!H", frame, 14)[0] & 0xFFF
        at = 16
    assert frame[at : at + 2] == b"\x08\x00"
    ip = frame[at + 2 :]
    ihl = (ip[0] & 0xF) * 4
    out.update(tos=ip[1], ttl=ip[8], proto=ip[9], src=int.from_bytes(ip[12:16], "big"),
               dst=int.from_bytes(ip[16:20], "big"), options=bytes(ip[20:ihl]), l4=bytes(ip[ihl:]))  # fmt: skip
    if out["proto"] in (6, 17):
        out["sport"], out["dport"] = struct.unpack_from("!HH", ip, ihl)
    if out["proto"] == 6:
        out["flags"] = ip[ihl + 13]
    return out


def test_the_example_spec_writes_its_fields_into_the_pcaps(tmp_path: Path) -> None:
    """examples/traffic/fields.yaml through `npk traffic gen`: each field in the pcaps as
    the spec gives it (values, weights, cycles, ranges, the payload pattern)."""
    res = CliRunner().invoke(main, ["traffic", "gen", str(FIELDS_YAML), "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    with PcapReader(tmp_path / "port0.pcap") as r:
        port0 = [rec.data for rec in r]
    with PcapReader(tmp_path / "port1.pcap") as r:
        port1 = [rec.data for rec in r]
    assert len(port0) == len(port1) == 400
    f0 = [_parse(d) for d in port0]
    vlans = Counter(f["vlan"] for f in f0)
    assert set(vlans) == {None, 10, 20} and 50 < vlans[10] + vlans[20] < 110  # weight 0.2 of 400
    protos = Counter(f["proto"] for f in f0)
    assert set(protos) == {6, 17} and 240 < protos[6] < 320  # tcp 0.7
    assert all(20000 <= f["sport"] <= 20099 for f in f0)
    dports = Counter(f["dport"] for f in f0)
    assert set(dports) == {80, 443, 53} and dports[80] > dports[443] > dports[53]
    # tcp_flags cycle S, SA, A over the port's normal packets, one step a packet
    assert all(f["flags"] == (S, SA, A)[k % 3] for k, f in enumerate(f0) if f["proto"] == 6)
    for f in f0:
        payload = f["l4"][20 if f["proto"] == 6 else 8 :]
        assert payload[:4] == b"NPK1"
        rest = payload[8:]
        assert rest == (b"\xde\xad\xbe\xef" * len(rest))[: len(rest)] and len(rest) > 0
    f1 = [_parse(d) for d in port1]
    assert {f["proto"] for f in f1} == {1, 47}
    assert all(f["src"] in ipaddress.ip_network("10.9.9.0/24") for f in map(_as_addr, f1))
    assert {f["tos"] for f in f1} == {0, 0x10, 0xB8}
    assert all(2 <= f["ttl"] <= 255 for f in f1) and len({f["ttl"] for f in f1}) > 100
    options = Counter(f["options"] for f in f1)
    assert set(options) == {b"", b"\x94\x04\x00\x00"} and 20 < options[b"\x94\x04\x00\x00"] < 70
    assert all(f["l4"][:2] == b"\x08\x00" for f in f1 if f["proto"] == 1)  # echo requests
    assert all(f["l4"][:4] == b"NPK1" for f in f1 if f["proto"] == 47)  # the tag right after IP


def _as_addr(f: dict[str, Any]) -> dict[str, Any]:
    return {**f, "src": ipaddress.ip_address(f["src"])}


def test_c_and_python_builders_give_the_same_frames_with_fields() -> None:
    """The C builder leaves a port's normal packets to Python when the port has fields,
    and still builds the kinds it does (here ttl_expiring, options, runt)."""
    spec = _spec({"vlan": {"ids": {"range": [1, 4094]}, "weight": 0.3}, "ip_proto": {"tcp": 1, "udp": 1, "icmp": 1},
                  "dst_port": [53, 80], "tcp_flags": ["S", "FA", "R"], "payload": "random"},
                 mix={"ttl_expiring": 0.1, "options": 0.1, "runt": 0.1})  # fmt: skip
    py = [(p.id, p.port, p.kind, p.data) for p in iter_packets(spec, use_c=False)]
    c = [(p.id, p.port, p.kind, p.data) for p in iter_packets(spec, use_c=True)]
    assert len(py) == 1500 and py == c
    b = CFrameBuilder(FrameBuilder(spec, spec.ports[0]))
    kinds = bytes([KINDS.index(k) for k in ("normal", "ttl_expiring", "normal", "runt")] * 10)
    lens = array("H", [120, 120, 120, 50] * 10)
    off = array("Q", [120 * i for i in range(40)])
    out = bytearray(120 * 40)
    b.build(kinds, lens, array("I", range(40)), out, off)
    assert b.py_frames == 20 and b.c_frames == 20


def test_same_seed_same_bytes_and_no_fields_unchanged() -> None:
    fields = {"src": ["10.9.9.0/24", "172.16.0.0/12"], "ttl": {"range": [2, 9]}, "payload": {"pattern": "aa55"}}
    a = [p.data for p in iter_packets(_spec(fields, seed=8))]
    assert a == [p.data for p in iter_packets(_spec(fields, seed=8))]
    assert a != [p.data for p in iter_packets(_spec(fields, seed=9))]
    plain = spec_from_dict({"seed": 8, "router": str(ROUTER_YAML), "count": 300,
                            "defaults": {"size": {"uniform": [100, 400]}, "load": 0.5}}, EXAMPLES)  # fmt: skip
    assert [p.data for p in iter_packets(_spec({}, seed=8))] == [p.data for p in iter_packets(plain)]


def test_both_oracles_judge_fields_traffic_alike_vlan_frames_are_non_ipv4() -> None:
    spec = _spec({"vlan": {"ids": [7], "weight": 0.5}, "ip_proto": {"tcp": 1, "udp": 1, "icmp": 1, 132: 1},
                  "ip_options": {"none": 3, "router_alert": 1}, "ttl": [1, 64]})  # fmt: skip
    pkts = list(iter_packets(spec))
    ref = RefRouter(spec.router)
    w = window_of(0, [p.time_ns for p in pkts], [p.port for p in pkts], [p.data for p in pkts])
    v = oracle_window(c_router(spec.router), w.data, w.off, w.lens, w.ports)
    outcomes = [ref.process(p.data, p.port) for p in pkts]
    assert [v.outcome(i, w.off[i], w.lens[i]) for i in range(len(pkts))] == outcomes
    tagged = [o for p, o in zip(pkts, outcomes, strict=True) if p.data[12:14] == b"\x81\x00"]
    assert len(tagged) > 500 and all(o == Drop("non_ipv4_ethertype") for o in tagged)
    assert Counter(type(o).__name__ for o in outcomes)["Forward"] > 200


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "s.yaml").write_text(f"router: {ROUTER_YAML}\ncount: 5\n" + text)
    return tmp_path / "s.yaml"


@pytest.mark.parametrize(("text", "line", "where", "what"), [
    ("defaults:\n  fields:\n    vlan: 5000\n", 5, "defaults.fields.vlan", "0..4095"),
    ("defaults:\n  fields:\n    colour: red\n", 5, "defaults.fields.colour", ""),
    ("ports:\n  2:\n    fields:\n      dst_port: {range: [9, 3]}\n", 6, "ports.2.fields.dst_port.range", "empty"),
    ("defaults:\n  fields:\n    tcp_flags: [S, X]\n", 5, "defaults.fields.tcp_flags[1]", "FSRPAUEC"),
    ("defaults:\n  fields:\n    src: [10.9.9.1/24]\n", 5, "defaults.fields.src[0]", "host bits"),
    ("defaults:\n  fields:\n    vlan: {ids: {cycle: [1, -1]}}\n", 5, "defaults.fields.vlan.ids.cycle[1]", "0..4095"),
    ("defaults:\n  fields:\n    ip_options: \"94 04 00\"\n    ip_proto: tcp\n    vlan: 3\n  size: 64\n", 8,
     "defaults.size", "too small for the headers"),
    ("defaults:\n  protocol: tunnel\n  size: 100\n  fields: {ttl: 3}\n", 6, "defaults.fields", "tunnel"),
    ("defaults:\n  fields:\n    payload: {pattern: xyz}\n", 5, "defaults.fields.payload", "hex bytes"),
    ("fields:\n  dst_mac: 12:34:56:00:00:01\n", 4, "fields.dst_mac", "in quotes"),
])  # fmt: skip
def test_bad_fields_are_located_errors(tmp_path: Path, text: str, line: int, where: str, what: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value).startswith(f"{path}:{line}: {where}"), str(e.value)
    assert what in str(e.value)
    res = CliRunner().invoke(main, ["traffic", "gen", str(path), "-o", str(tmp_path / "out")])
    assert res.exit_code != 0 and f"{path}:{line}:" in res.output and "Traceback" not in res.output


HOSTILE = [-1, 0, 1, 7, 47, 80, 4095, 4096, 65535, 65536, 2**40, 1.5, float("nan"), True, None, "", "x",
           "S", "SA", "tcp", "none", "random", "router_alert", "94 04", "10.9.9.0/24", "10.0.0.1/40", "de ad",
           [], {}]  # fmt: skip
FORMS = ["cycle", "range", "ids", "weight", "pcp", "pattern", "tcp", 80, "S"]
hostile = st.recursive(st.sampled_from(HOSTILE) | st.integers(-5, 70000) | st.text(max_size=6),
                       lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.sampled_from(FORMS) | st.sampled_from(HOSTILE[:12]), inner, max_size=3),
                       max_leaves=12)  # fmt: skip
ADDRESSES = ["10.9.9.0/24", "10.1.2.3", "198.18.0.0/15", "0.0.0.0/0", "224.0.0.1", "10.0.2.10"]
MACS = ["02:4e:50:00:00:00", "ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "02:00:00:00:00:99", "0:1:2:3:4:5"]
ITEMS: dict[str, st.SearchStrategy[Any]] = {
    "dst_mac": st.sampled_from(MACS), "src_mac": st.sampled_from(MACS),
    "vlan": st.integers(0, 4095), "ip_proto": st.sampled_from(["tcp", "udp", "icmp", 47, 132, 6]),
    "src": st.sampled_from(ADDRESSES), "dst": st.sampled_from(ADDRESSES),
    "src_port": st.integers(0, 65535), "dst_port": st.integers(0, 65535),
    "tcp_flags": st.sampled_from(["S", "SA", "A", "FA", "R", "none", 0, 255]),
    "ttl": st.integers(0, 255), "tos": st.integers(0, 255),
    "ip_options": st.sampled_from(["none", "router_alert", "record_route", "timestamp", "nop", "94 04", "01"]),
    "payload": st.sampled_from(["zeros", "random", {"pattern": "de ad be ef"}, {"pattern": "00"}]),
}  # fmt: skip
RANGED = {"vlan", "src_port", "dst_port", "ttl", "tos"}


@st.composite
def field_value(draw: st.DrawFn, name: str) -> Any:
    """A field's value: mostly one of its forms over good items, sometimes anything."""
    item = ITEMS.get(name, hostile)
    hashable = item.filter(lambda v: isinstance(v, (int, float, str)) or v is None)
    forms = [item, st.lists(item, min_size=1, max_size=4), st.lists(item, min_size=1, max_size=3).map(lambda v: {"cycle": v}),
             st.dictionaries(hashable, st.floats(0, 5), min_size=1, max_size=3), hostile]  # fmt: skip
    if name in RANGED:
        forms.append(st.tuples(item, item).map(lambda lh: {"range": sorted(lh)}))
    if name == "vlan":
        forms.append(st.fixed_dictionaries({"ids": st.lists(item, min_size=1, max_size=3)},
                                           optional={"weight": st.floats(0, 1), "pcp": st.integers(0, 8)}))  # fmt: skip
    return draw(st.one_of(forms))


@st.composite
def field_sections(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from([*FIELD_NAMES, "bogus"]), unique=True, max_size=6))
    return {n: draw(field_value(n)) for n in names}


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(fields=field_sections(), size=st.sampled_from([64, 128, {"uniform": [64, 300]}]))
def test_any_fields_section_gives_a_spec_or_a_located_error(tmp_path: Path, fields: dict[str, Any], size: Any) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump({"router": str(ROUTER_YAML), "count": 8, "defaults": {"size": size, "fields": fields}}))
    with pytest.MonkeyPatch.context() as m:
        m.setenv("NPK_CACHE_DIR", "off")
        try:
            spec = load_spec(path)
        except SpecError as e:
            assert re.match(rf"{re.escape(str(path))}:\d+: defaults\.(fields|size)", str(e)), str(e)
            return
    pkts = list(iter_packets(spec))  # a valid spec generates: every frame at its drawn size
    assert len(pkts) == 40 and all(60 <= len(p.data) <= 1514 for p in pkts)
    assert [p.data for p in pkts] == [p.data for p in iter_packets(spec, use_c=False)]


def test_router_runs_the_example_and_the_judge_is_satisfied() -> None:
    """`npk demo --traffic fields.yaml`: the verdict is ok, nothing unmatched or stuck;
    the VLAN-tagged frames are dropped as non_ipv4_ethertype, the rest forwarded (router
    alert ones through the control plane)."""
    res = CliRunner().invoke(main, ["demo", "--ms", "3", "--json", "--traffic", str(FIELDS_YAML)])
    assert res.exit_code == 0, res.output[-2000:]
    s = json.loads(res.stdout)
    assert s["verdict"] == {"ok": True, "reasons": []}
    t, cmp_ = s["totals"], s["comparison"]
    assert t["in_flight"] == 0 and t["lost"] == 0 and cmp_["unmatched"] == 0
    assert t["dropped"].get("non_ipv4_ethertype", 0) > 0 and set(t["dropped"]) == {"non_ipv4_ethertype"}
    assert t["forwarded"] == cmp_["matched_forward"] > 100
    assert t["offered"] == t["forwarded"] + t["dropped"]["non_ipv4_ethertype"]


def test_frames_too_short_for_the_tag_are_judged_by_their_bytes(tmp_path: Path) -> None:
    """64-byte frames of TCP or with a router alert option have room for 2..6 bytes of the
    tag: the judge identifies them by their bytes, as it does without fields."""
    spec = {"seed": 2, "router": str(ROUTER_YAML), "count": 300,
            "defaults": {"size": 64, "load": 0.2, "fields": {
                "ip_proto": {"tcp": 1, 47: 1, "udp": 1}, "src_port": 1000, "dst_port": 80,
                "ip_options": {"none": 5, "router_alert": 1}, "payload": "random"}}}  # fmt: skip
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(main, ["demo", "--ms", "1", "--json", "--traffic", str(tmp_path / "short.yaml")])
    assert res.exit_code == 0, res.output[-2000:]
    s = json.loads(res.stdout)
    assert s["verdict"] == {"ok": True, "reasons": []}
    cmp_ = s["comparison"]
    assert cmp_["untagged"] > 50 and cmp_["unmatched"] == 0 and cmp_["matched_exception"] > 0
    assert cmp_["matched_forward"] == s["totals"]["forwarded"] == s["totals"]["offered"]


def test_top_level_fields_apply_to_every_port_and_a_port_replaces_them() -> None:
    spec = spec_from_dict({"seed": 1, "router": str(ROUTER_YAML), "count": 30, "fields": {"ttl": 9},
                           "ports": {3: {"fields": {"tos": 4}}}}, EXAMPLES)  # fmt: skip
    by_port: dict[int, set[tuple[int, int]]] = {}
    for p in iter_packets(spec):
        f = _parse(p.data)
        by_port.setdefault(p.port, set()).add((f["ttl"], f["tos"]))
    assert by_port == {0: {(9, 0)}, 1: {(9, 0)}, 2: {(9, 0)}, 3: {(64, 4)}, 4: {(9, 0)}}


def test_mac_fields_and_what_the_router_makes_of_them() -> None:
    """dst_mac: the port's own MAC is forwarded, the broadcast MAC with a unicast IP is a
    link_broadcast_unicast_ip drop, another unicast MAC a dst_mac_mismatch drop."""
    own, other = "02:4e:50:00:00:00", "02:00:00:00:00:99"
    spec = spec_from_dict({"seed": 6, "router": str(ROUTER_YAML), "count": 300, "ports": {0: {"fields": {
        "dst_mac": {own: 2, "ff:ff:ff:ff:ff:ff": 1, other: 1}, "src_mac": "02:00:00:00:00:42"}}}}, EXAMPLES)  # fmt: skip
    ref = RefRouter(spec.router)
    seen: dict[bytes, set[str]] = {}
    for p in iter_packets(spec):
        if p.port == 0:
            assert p.data[6:12] == bytes.fromhex("020000000042")
            o = ref.process(p.data, 0)
            seen.setdefault(p.data[:6], set()).add(o.reason if isinstance(o, Drop) else type(o).__name__)
    assert seen == {bytes.fromhex("024e50000000"): {"Forward"}, b"\xff" * 6: {"link_broadcast_unicast_ip"},
                    bytes.fromhex("020000000099"): {"dst_mac_mismatch"}}  # fmt: skip
