"""ARP state across a kill of the control daemon, as the run's model must follow it
(found by a kill/restart sweep of errors.yaml variants, 2 ms, both layouts).

- A give-up the model made before the kill that the dying daemon had not: the daemon
  was behind its deadline (busy with the exception ring), its record in SRAM still
  shows the resolution under way, so the packets it held die with it (control_killed)
  -- the model had answered them (ICMP host unreachable) and no longer expected the ARP
  requests about them: a correct router failed with unexpected_control.
- A packet the fast path excepted (arp_miss) before the first daemon installed the next
  hop's MAC, taken from the ring by the restarted daemon before it withdrew what its
  predecessor learnt: npkd routes it by the fast path's next hop (cp.c route_to), which
  still has the MAC, and forwards it; the model looked only at its own (restarted, empty)
  ARP cache, held it and gave it up: wrong_outcome and missing_control."""

from __future__ import annotations

from pathlib import Path

from npkit.emulator.traffic.control import KILLED, DaemonArp, RouterModel
from npkit.emulator.traffic.oracle import Drop, Except, Forward
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

from .test_control_plane import EXAMPLES
from .test_withdrawal import GATEWAY, arp_requests, learnt_then_restarted, to44

RETRY_NS = 200_000  # cfg.h arp_retry_us


def icmp_errors(m: RouterModel) -> list[int]:
    return [e.pid for e in m.emitted if e.frame[12:14] == b"\x08\x00" and e.frame[23] == 1]


def given_up() -> RouterModel:
    """A model whose resolution of the gateway, begun at 12 us by the daemon's record, it
    gave up at 612 us (three requests, no answer): packet 0 answered, ICMP sent."""
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    first = m.process(0, to44(0), 0, 10_000)
    assert first.final is None
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 1, 12_000)})
    m.advance(12_000 + 3 * RETRY_NS + 8_000)
    assert first.final == Except("arp_miss")
    assert arp_requests(m) == [0, -1, -1] and icmp_errors(m) == [0]   # (after the record: about no one packet)
    return m


def test_a_give_up_the_dying_daemon_had_not_made_is_taken_back() -> None:
    m = given_up()
    lost = m.kill(630_000, {GATEWAY: DaemonArp("incomplete", 3, 12_000)})
    assert lost == [0] and m.results[0].final == Drop(KILLED)     # held by the dead daemon
    assert [e.pid for e in m.untold] == icmp_errors(m) == [0]       # its answer never sent


def test_a_give_up_the_daemon_had_made_stands() -> None:
    m = given_up()
    assert m.kill(630_000, {GATEWAY: DaemonArp("none", 3, 12_000)}) == []
    assert m.results[0].final == Except("arp_miss") and m.untold == []


def test_a_later_resolution_of_the_daemon_is_not_the_one_given_up() -> None:
    """The daemon gave up too and began another (for a packet the model had given up,
    taken after its deadline): the model's give-up stands."""
    m = given_up()
    assert m.kill(630_000, {GATEWAY: DaemonArp("incomplete", 1, 614_000)}) == []
    assert m.results[0].final == Except("arp_miss") and m.untold == []


def test_the_restarted_daemon_forwards_by_the_mac_its_predecessor_left_in_the_fast_path() -> None:
    m = learnt_then_restarted()
    m.process(2, to44(2), 0, 45_000)
    res = m.take_exception(2, to44(2), 0, Except("arp_miss"), arrived=45_000)
    assert isinstance(res.final, Forward) and res.final.port == 2
    assert arp_requests(m) == []
    m.withdraw_learnt()                      # then it is gone: resolved afresh, the packet held
    m.process(3, to44(3), 0, 50_000)
    assert m.results[3].final is None and arp_requests(m) == [3]


def test_an_overloaded_daemon_killed_behind_its_give_up(tmp_path: Path) -> None:
    """errors.yaml at load 0.1, seed 5: the daemon is ~50 us behind the ring; killed at
    1.4 ms, 11 us after the model gave up three resolutions of on-link hosts the daemon
    had not: the verdict is ok (was: unexpected_control 9)."""
    spec = (EXAMPLES / "errors.yaml").read_text().replace("seed: 11", "seed: 5").replace("load: 0.06", "load: 0.1")
    (tmp_path / "errors.yaml").write_text(spec.replace("router: router.yaml", f"router: {EXAMPLES / 'router.yaml'}"))
    tr = load_traffic_source(tmp_path / "errors.yaml", 2_000_000)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": 1_400_000, "restart_at_ns": 1_550_000})
    try:
        rr.run_traffic(2_000_000)
        rr.drain()
        s = rr.summary()
        v = judge(s, Policy())
        assert v["ok"], v["reasons"]
        assert s["control_plane"]["lost_half_handled"] == 0 and s["totals"]["dropped"].get(KILLED, 0) >= 3
    finally:
        rr.close()
