"""Plugins (-D classify=flows, docs/flows.md): a plugin unloaded and loaded again while
the router runs at 5 x 1 Gb/s.  The bound flow's packets meet what its slot holds when
the daemon takes them (the DSCP plugin's 46, then none, then 10), every other packet is
forwarded by the fast path as before, nothing is lost, and the judge, which follows the
daemon's plugin log, finds every frame right."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from npkit.emulator.traffic.flows import FlowKey, key_of
from npkit.emulator.traffic.generator import generate
from npkit.emulator.traffic.pcap import read_pcap
from npkit.emulator.traffic.source import Traffic
from npkit.emulator.traffic.spec import spec_from_dict
from npkit.toolchain.system.control import control_request
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "traffic"
BOUND = 1002  # the source port of the flow flows.yaml binds to plugin slot 1 (dscp 46)
UNDECLARED = 1003  # a flow of the traffic that flows.yaml has no entry for (198.18.0.1, as 1000 and 1001)


def _traffic(duration_ns: int, arrivals: dict[int, list[int]] | None = None) -> Traffic:
    """The example's traffic with the bound flow at 1 in 20 of port 0's packets;
    `arrivals`: filled with each source port's arrival times (port 0)."""
    spec = yaml.safe_load((EXAMPLES / "flows.yaml").read_text())
    spec["duration_ns"] = duration_ns
    # one packet in 20 of port 0's is the bound flow's (the example has 1 in 100)
    fields = spec["ports"][0]["fields"]
    fields["src_port"] = {"cycle": [1000, 1001, 1003, 1000, 1001] * 3 + [1000, 1001, 1003, 1000, BOUND]}
    fields["src"] = {"cycle": ["198.18.0.2" if p == BOUND else "198.18.0.1" for p in fields["src_port"]["cycle"]]}
    s = spec_from_dict(spec, EXAMPLES)
    tr = Traffic(link_bps=s.link_bps)
    for port in s.ports:
        tr.wire[port.index] = (port.wire.preamble, port.wire.fcs, port.wire.ifg)
    for p in generate(s):
        tr.add(p.time_ns, p.port, p.data)
        k = key_of(p.data)
        if arrivals is not None and k is not None and p.port == 0:
            arrivals.setdefault(k.sport, []).append(p.time_ns)
    return tr


def _at(rr: RouterRun, sock: Path, until_ns: int, command: str) -> list[str]:
    """Run to `until_ns`, then send `command` while the router keeps running."""
    rr.run.run(max(0, until_ns - rr.run.now_ns))
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.update(a=control_request(sock, command)), daemon=True)
    th.start()
    while th.is_alive() and rr.run.now_ns < until_ns + 5_000_000:
        rr.run.run(10_000)
    th.join(1)
    assert "a" in out, command
    return out["a"]


@pytest.mark.parametrize(("placement", "cache"), [("xscale", False), ("gpe", False), ("xscale", True)])
def test_plugin_unloaded_and_loaded_during_a_run(tmp_path: Path, placement: str, cache: bool) -> None:
    """(With the CAM flow cache, the entry added at 1 ms is of a flow the cache holds as
    having none: the daemon's generation bump makes the fast path look again.)"""
    sock, cap = tmp_path / "npkd.sock", tmp_path / "cap"
    params = {"classify": "flows", "control": placement, "flow_cache": cache}
    rr = RouterRun.link("pipelined", params, _traffic(3_000_000), capture=cap, control={"socket": str(sock)})
    assert _at(rr, sock, 900_000, "plugin unload 1") == []
    # a count entry added by the daemon (its hash placing it): the fast path counts it
    assert _at(rr, sock, 1_000_000, f"flow add 198.18.0.1 10.0.1.10 udp {UNDECLARED} 5001 count") == []
    assert _at(rr, sock, 1_800_000, "plugin load 1 dscp 10") == []
    slots = _at(rr, sock, 2_000_000, "plugin list")
    shown = {int(line.split()[3]): int(line.split()[8]) for line in _at(rr, sock, 2_500_000, "flow show")}
    rr.run_traffic(3_000_000 - rr.run.now_ns)
    rr.drain()
    s = rr.summary()
    rr.write_captures(cap)
    rr.close()
    verdict = judge(s, Policy())
    assert verdict["ok"], (verdict, s["comparison"])
    assert s["totals"]["lost"] == 0 and s["conservation"]["balanced"]
    assert any(line.startswith("slot 1 dscp") and "loads 2" in line for line in slots), slots

    bound = next(r for r in s["flows"]["table"] if r["action"] == "plugin")
    dscp: Counter[int] = Counter()
    others: Counter[int] = Counter()
    for rec in read_pcap(cap / "port1.pcap"):
        k = key_of(rec.data)
        if k is not None and k.sport == BOUND and k.src == 0xC6120002:
            dscp[rec.data[15] >> 2] += 1
        else:
            others[rec.data[15] >> 2] += 1
    # the bound flow: through the plugin (46), passed on unchanged (0), the plugin loaded again (10)
    assert dscp[46] > 0 and dscp[0] > 0 and dscp[10] > 0, dscp
    assert sum(dscp.values()) == bound["packets"] == bound["model_packets"]    # every one left, once
    assert set(others) == {0} and sum(others.values()) > 10 * sum(dscp.values())  # the rest untouched
    assert s["control_plane"]["packets_forwarded_by_it"] == bound["packets"]
    # the entry added at 1 ms counted its flow's packets since (about a fifth of port 0's)
    assert 0 < shown[UNDECLARED] < shown[1000]


def test_a_flow_added_while_the_cam_cache_holds_it_as_unknown_is_counted(tmp_path: Path) -> None:
    """Only port 0 sends (its four flows stay in the lookup ME's 16-entry CAM cache): the
    flow with no entry is cached as having none; `flow add` bumps the table's generation,
    so the fast path looks again and counts the flow from then on."""
    spec = yaml.safe_load((EXAMPLES / "flows.yaml").read_text())
    spec["duration_ns"] = 1_500_000
    for p in (1, 2, 3, 4):
        spec["ports"][p] = {"enabled": False}
    s = spec_from_dict(spec, EXAMPLES)
    tr = Traffic(link_bps=s.link_bps)
    for port in s.ports:
        tr.wire[port.index] = (port.wire.preamble, port.wire.fcs, port.wire.ifg)
    for p in generate(s):
        tr.add(p.time_ns, p.port, p.data)
    sock = tmp_path / "npkd.sock"
    rr = RouterRun.link("pipelined", {"classify": "flows", "flow_cache": True}, tr, control={"socket": str(sock)})
    assert _at(rr, sock, 500_000, f"flow add 198.18.0.1 10.0.1.10 udp {UNDECLARED} 5001 count") == []
    shown = {int(line.split()[3]): int(line.split()[8]) for line in _at(rr, sock, 1_400_000, "flow show")}
    rr.run_traffic(1_500_000 - rr.run.now_ns)
    rr.drain()
    summary = rr.summary()
    rr.close()
    assert judge(summary, Policy())["ok"]
    # about 0.9 ms of a flow that is 19 % of 1.39 Mpkt/s: well over 100 packets
    assert shown[UNDECLARED] > 100, shown


def test_a_flow_bound_and_expired_while_it_runs_is_judged(tmp_path: Path) -> None:
    """`plugin bind` of a running flow that had no entry, then `flow del` (expiry): its
    packets go round the DSCP plugin between the two, through the fast path before and
    after, while the same hosts' other flows stay on the fast path; the judge follows the
    daemon's log of the changes, so every frame is right."""
    sock, cap = tmp_path / "npkd.sock", tmp_path / "cap"
    arrivals: dict[int, list[int]] = {}
    rr = RouterRun.link("pipelined", {"classify": "flows"}, _traffic(3_000_000, arrivals), capture=cap,
                        control={"socket": str(sock)})  # fmt: skip
    flow = f"198.18.0.1 10.0.1.10 udp {UNDECLARED} 5001"
    assert _at(rr, sock, 1_000_000, f"plugin bind 1 {flow}") == []
    assert _at(rr, sock, 1_200_000, f"flow del {flow}") == []
    rr.run_traffic(3_000_000 - rr.run.now_ns)
    rr.drain()
    s = rr.summary()
    rr.write_captures(cap)
    rr.close()
    verdict = judge(s, Policy())
    assert verdict["ok"], (verdict, s["comparison"])
    marks: Counter[int] = Counter()
    for rec in read_pcap(cap / "port1.pcap"):
        k = key_of(rec.data)
        if k is not None and k.sport == UNDECLARED:
            marks[rec.data[15] >> 2] += 1
    # bound from the bind to the delete, as the daemon's log stamps them (socket commands
    # reach it when the host lets them: about 0.2 ms apart, of a flow at 19 % of 1.39
    # Mpkt/s, about 50 packets): the packets that came between, give or take those of the
    # 100 us before each stamp (the XScale's quantum, the lag of its clock, the packet's
    # way to the classify step)
    key = FlowKey(0xC6120001, 0x0A00010A, 17, UNDECLARED, 5001)  # 198.18.0.1 > 10.0.1.10 udp
    (bound_at, _), (deleted_at, _) = rr.flows.changes[key]
    times = arrivals[UNDECLARED]
    fewest = sum(1 for t in times if bound_at <= t < deleted_at - 100_000)
    most = sum(1 for t in times if bound_at - 100_000 <= t < deleted_at)
    assert 0 < marks[46] and fewest <= marks[46] <= most, (marks, fewest, most, bound_at, deleted_at)
    assert marks[0] + marks[46] == len(times)  # every other one left unchanged
    assert s["control_plane"]["packets_forwarded_by_it"] >= marks[46]


def test_idle_entries_expire(tmp_path: Path) -> None:
    """`flow idle 200`: an entry no packet meets is deleted within 400 us of emulated
    time, the ones whose flows run are kept; the judge follows the deletions."""
    sock = tmp_path / "npkd.sock"
    rr = RouterRun.link("pipelined", {"classify": "flows"}, _traffic(2_000_000), control={"socket": str(sock)})
    assert _at(rr, sock, 400_000, "flow add 198.18.0.9 10.0.2.10 udp 7 7 count") == []
    assert _at(rr, sock, 500_000, "flow idle 200") == []
    before = [line.split()[0] for line in _at(rr, sock, 600_000, "flow show")]
    after = [line.split()[:4] for line in _at(rr, sock, 1_500_000, "flow show")]
    rr.run_traffic(2_000_000 - rr.run.now_ns)
    rr.drain()
    s = rr.summary()
    rr.close()
    verdict = judge(s, Policy())
    assert verdict["ok"], verdict["reasons"]
    assert "198.18.0.9" in before and "198.18.0.9" not in [a[0] for a in after]
    assert sorted(int(a[3]) for a in after) == [1000, 1001, BOUND]   # the declared flows, running


def _udp(cfg: Any, src: str, sport: int) -> bytes:
    import ipaddress

    from npkit.emulator.traffic.packet import internet_checksum

    f = bytearray(74)
    f[0:6] = bytes(cfg.ports[0].mac)
    f[12:14] = b"\x08\x00"
    f[14], f[22], f[23] = 0x45, 64, 17
    f[16:18] = (60).to_bytes(2, "big")
    f[26:30] = int(ipaddress.IPv4Address(src)).to_bytes(4, "big")
    f[30:34] = int(ipaddress.IPv4Address("10.0.1.10")).to_bytes(4, "big")
    f[34:36] = sport.to_bytes(2, "big")
    f[36:38] = (5001).to_bytes(2, "big")
    f[24:26] = internet_checksum(bytes(f[14:34])).to_bytes(2, "big")
    return bytes(f)


def test_a_packet_judged_before_a_bind_was_read_may_go_round_the_plugin() -> None:
    """The daemon's log of a flow change is read at the end of a slice; a packet that came
    just before, judged by the table without the entry, may meet the entry in the chip.
    Once the change is read the packet may have been excepted to the plugin, and the
    daemon's forward of it -- which can leave before its log record -- is one of the
    daemon's frames (`by_daemon`), the DSCP plugin's 46, not a fast-path alternative."""
    from npkit.emulator.traffic.control import PLUGIN, RouterModel
    from npkit.emulator.traffic.flows import ACTIONS, FlowModel, load_flows
    from npkit.emulator.traffic.oracle import Forward
    from npkit.emulator.traffic.router_config import load_router_config

    cfg = load_router_config(EXAMPLES / "router.yaml")
    model = RouterModel(cfg)
    model.flows = FlowModel(load_flows(ROOT / "microcode" / "classify" / "flows.yaml", cfg), cfg)
    frame = _udp(cfg, "198.18.0.1", UNDECLARED)
    r = model.process(7, frame, 0, 1_000_000)
    assert isinstance(r.fast, Forward) and not r.alternatives and not r.by_daemon
    key = key_of(frame)
    assert key is not None
    model.flows.flow_changed(1_010_000, key, 17 << 24 | ACTIONS["plugin"] << 16 | 1)  # bound just after it came
    assert model.flow_changed_near(7, frame, 0)
    assert PLUGIN in r.alternatives and r.fast == Forward(r.fast.port, r.fast.data)
    assert [o.data[15] >> 2 for o in r.by_daemon if isinstance(o, Forward)] == [46]
    assert not any(isinstance(o, Forward) for o in r.alternatives)  # the fast path forwards it unchanged only as `fast`
    # a packet of the bound flow, judged round the plugin, then the entry deleted just after it came:
    # the fast path may have forwarded it itself
    r2 = model.process(8, frame, 0, 1_100_000)
    assert r2.fast == PLUGIN and isinstance(r2.final, Forward) and r2.final.data[15] >> 2 == 46
    model.flows.flow_changed(1_105_000, key, 17 << 24)
    assert not model.flow_changed_near(8, frame, 0)
    assert r.fast in r2.alternatives


def test_a_plugin_packet_whose_frame_left_first_waits_for_its_record() -> None:
    """The daemon sends a packet round a plugin, then logs it: its window may be let go in
    between (every packet has a fate).  The judge keeps the packet's index entry until the
    record comes -- also near a flow change, where the fast path may have forwarded it
    itself, and where the plugin's frames are alternatives of the daemon's -- so that the
    record is matched, not `unmatched_exception`."""
    from types import SimpleNamespace

    from npkit.emulator.traffic.control import PLUGIN, CpResult
    from npkit.emulator.traffic.oracle import Forward
    from npkit.emulator.traffic_run import FORWARDED
    from npkit.toolchain.system.control_run import ControlJudge

    fast, marked = Forward(1, b"a"), Forward(1, b"b")
    results = {
        10: CpResult(PLUGIN, final=marked, reason="plugin", by_daemon=[fast]),  # round the plugin; near a plugin change
        11: CpResult(PLUGIN, final=marked, reason="plugin", alternatives=[fast]),  # ... near an unbind
        12: CpResult(fast, final=fast, alternatives=[PLUGIN], by_daemon=[marked]),  # ... near a bind
        13: CpResult(fast, final=fast, alternatives=[Forward(2, b"c")]),  # near a route change: no plugin
    }
    judge = object.__new__(ControlJudge)
    judge.model = SimpleNamespace(results=results)
    judge.indexed = {pid: (0, 60, pid) for pid in results}
    judge.handled = set()
    chunk = SimpleNamespace(first=10, end=14, fate=bytearray([FORWARDED] * 4))
    assert judge._unlogged(chunk) == {10, 11, 12}
