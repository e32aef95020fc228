"""An ARP answer teaches the router only when the daemon takes it from the exception ring.
The run's model handles each exception at its arrival, so it learnt a next hop's MAC
from an answer the daemon never took: one that came just before the daemon was killed
(the one started again takes it from the ring, with an empty cache, and learns it then),
or one the fast path dropped at a full exception ring.  Now the model takes back what
such an answer taught (RouterModel.unlearn) and the judge gives it to the restarted
daemon (ControlJudge._untaught_by_the_dead) or to no one (a drop)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from npkit.emulator.msf_device import MsfDevice
from npkit.emulator.traffic.control import DaemonArp, RouterModel
from npkit.emulator.traffic.control import arp_frame as arp
from npkit.emulator.traffic.oracle import Except, Forward
from npkit.emulator.traffic.packet import UDP, ip
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic_run import DROPPED, EXCEPTED, FORWARDED
from npkit.toolchain.system.control_run import ControlJudge

from .test_control_plane import EXAMPLES
from .test_control_rfc import HOST, ROUTER_MAC, v4
from .test_kill_races import run_spec
from .test_withdrawal import GATEWAY, GATEWAY_MAC, PORT2, arp_requests, to44

REPLY = arp(2, GATEWAY_MAC, GATEWAY, ROUTER_MAC[2], PORT2)


def answered() -> RouterModel:
    """Packet 0 to 44/8 held for the gateway (the daemon's resolution under way), then the
    gateway's answer (packet 1), which lets it go."""
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    m.process(0, to44(0), 0, 10_000)
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 1, 12_000)})
    m.process(1, REPLY, 2, 20_000)
    assert isinstance(m.results[0].final, Forward) and GATEWAY in m.fast.arp
    m.emitted.clear()
    return m


def test_an_answer_the_daemon_never_took_teaches_nothing() -> None:
    m = answered()
    assert m.unlearn(1) == [0]
    assert m.results[0].final is None and m.cache[GATEWAY].state == "incomplete" and GATEWAY not in m.fast.arp
    nxt = m.process(2, to44(2), 0, 30_000)
    assert nxt.fast == Except("arp_miss") and nxt.final is None and arp_requests(m) == []  # held in the same one
    m.finish()  # nobody answers: both given up, the daemon's three requests
    assert m.results[0].final == Except("arp_miss") and m.results[2].final == Except("arp_miss")
    assert arp_requests(m) == [-1, -1]


def test_an_error_the_answer_let_go_of_is_held_again() -> None:
    """A time-exceeded error about a packet from 44/8 waits for the gateway's MAC: the
    answer sends it, and taking the answer back holds it again (`unsent`)."""
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    m.process(0, v4(2, ip("44.1.2.3"), HOST, UDP(1000, 53), ttl=1, src_mac=GATEWAY_MAC), 2, 10_000)
    assert m.emitted[-1].frame[12:14] == b"\x08\x06" and m.cache[GATEWAY].hold[0].generated
    m.process(1, REPLY, 2, 20_000)
    error = m.emitted[-1]
    assert error.pid == 0 and error.frame[:6] == GATEWAY_MAC and error.frame[23] == 1
    m.unlearn(1)
    assert m.unsent == [error] and m.cache[GATEWAY].hold[0].generated


def test_an_answer_the_daemon_took_stands() -> None:
    m = answered()
    m.taken(1)
    assert m.unlearn(1) == [] and m.cache[GATEWAY].state == "reachable" and GATEWAY in m.fast.arp


def test_an_answer_taught_again_since_is_not_taken_back() -> None:
    m = answered()
    m.process(2, REPLY, 2, 30_000)
    assert m.unlearn(1) == [] and m.cache[GATEWAY].state == "reachable"


def test_the_restarted_daemon_learns_from_an_answer_left_on_the_ring() -> None:
    """Killed at 25 us with the answer on the ring: the packet held dies with the daemon,
    the one started at 40 us takes the answer and keeps the MAC through its withdrawal of
    what its predecessor learnt."""
    m = answered()
    m.unlearn(1)
    m.defer(1, REPLY, 2)
    assert m.kill(25_000, {GATEWAY: DaemonArp("incomplete", 1, 12_000)}) == [0]
    m.restart(40_000)
    assert m.cache[GATEWAY].state == "reachable"
    m.withdraw_at(60_000)
    later = m.process(2, to44(2), 0, 70_000)
    assert isinstance(later.fast, Forward) and later.final == later.fast


def kill_before_taken(tmp_path: Path, layout: str = "pipelined") -> tuple[dict[str, Any], Any]:
    """errors.yaml, seed 1, killed at 529 us, started again at 679: the gateway's answer
    came at 529.6 us, the daemon died at 534.7 without taking it, and the one started
    again took it (logged at 787 us) and forwarded 44/8 through the fast path after its
    withdrawal at 1365 us (was: wrong_outcome 2 -- the model had no MAC)."""
    return run_spec(tmp_path, EXAMPLES / "errors.yaml", {"seed: 11": "seed: 1"}, layout, 529, 679)


def test_an_answer_left_on_the_ring_at_a_kill(tmp_path: Path) -> None:
    s, v = kill_before_taken(tmp_path)
    assert v["ok"], v["reasons"]
    assert s["control_plane"]["counters"]["arp_replies_received"] == 1 and s["totals"]["dropped"].get("control_killed", 0) >= 1


def test_the_judge_still_fails_a_wrong_frame_there(tmp_path: Path, monkeypatch: Any) -> None:
    """The same run, the first packet to 44/8 after the withdrawal sent out of port 1, or
    with a wrong destination MAC."""
    real = MsfDevice.drain_raw

    def edited(self: MsfDevice) -> Any:
        d = real(self)
        off = 0
        for i in range(len(d.port) if d is not None else 0):
            n = d.len[i]
            if not done and d.port[i] == 2 and d.t[i] >= 1_400_000 and d.data[off + 30] == 44:
                done.append(i)
                if mode == "port":
                    d.port[i] = 1
                else:
                    d.data[off + 5] ^= 1
            off += n
        return d

    monkeypatch.setattr(MsfDevice, "drain_raw", edited)
    for mode, reason in (("port", "wrong_port"), ("mac", "wrong_bytes")):
        done: list[int] = []
        _s, v = kill_before_taken(tmp_path)
        assert done and not v["ok"] and any(reason in r for r in v["reasons"]), (mode, v["reasons"])


def judge_with(m: RouterModel, fate: int) -> ControlJudge:
    """The judge's drop rule alone: its model, packets 0-1 in one window, the answer's
    fate `fate`, the port demand it adjusts recorded."""
    cj = ControlJudge.__new__(ControlJudge)
    cj.model, cj.held, demand = m, set(), []
    w = SimpleNamespace(lens=[len(to44(0)), len(REPLY)])
    chunk = SimpleNamespace(first=0, fate=bytearray([FORWARDED, fate]), w=w)
    cj.run = SimpleNamespace(chunk_of=lambda pid: chunk if 0 <= pid < 2 else None)
    cj.rr = SimpleNamespace(add_demand=lambda port, n, sign=1, packet=True: demand.append((port, sign)))
    cj.demand = demand  # type: ignore[attr-defined]
    return cj


def test_an_answer_dropped_at_a_full_exception_ring_teaches_nothing() -> None:
    """The fast path dropped the gateway's answer (exception_ring_full): the packet it let
    go of is held again, no longer owed to port 2; one logged (EXCEPTED) stands."""
    cj = judge_with(answered(), DROPPED)
    cj._untaught_by_drops()
    assert cj.model.results[0].final is None and cj.held == {0} and GATEWAY not in cj.model.fast.arp
    assert cj.demand == [(2, -1)]  # type: ignore[attr-defined]
    cj = judge_with(answered(), EXCEPTED)
    cj._untaught_by_drops()
    assert isinstance(cj.model.results[0].final, Forward) and cj.held == set() and 1 in cj.model.untaken
