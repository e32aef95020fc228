"""A restarted daemon withdraws the ARP state its predecessor put in the fast path (the
learnt gateway MACs back to ARP_MISS, learnt /32s deleted: xscale/npkd/README.md "The
route table"), and the run's model follows from the instant the fast path sees it: the
daemon stamps a change log record of it (CHG_WITHDRAWN) and the host maps the stamp to
the start of the XScale quantum that made it (XScaleHost.visible_from).  Before, the
model withdrew at the slice in which it saw the daemon ready, up to tens of
microseconds late; a packet to the learnt gateway in between was forwarded by the model
and excepted by the fast path, the daemon's ARP resolution began from another packet
than the model's, and a correct router failed with unexpected or missing ARP requests."""

from __future__ import annotations

from typing import Any

import pytest

from npkit.emulator.traffic.control import DaemonArp, RouterModel
from npkit.emulator.traffic.control import arp_frame as arp
from npkit.emulator.traffic.oracle import Except, Forward
from npkit.emulator.traffic.packet import UDP, ip
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.control import CHG_WITHDRAWN, change_log

from .test_control_plane import EXAMPLES, clean, run
from .test_control_rfc import HOST, ROUTER_MAC, v4

GATEWAY = ip("10.0.2.77")  # routes.txt: 44/8 via it, out of port 2; in no static ARP table
GATEWAY_MAC = bytes.fromhex("02000a00024d")
PORT2 = ip("10.0.2.1")


def to44(k: int) -> bytes:
    return v4(0, HOST, ip(f"44.1.2.{k}"), UDP(1000 + k, 53))


def arp_requests(m: RouterModel) -> list[int]:
    """The ids of the packets the ARP requests for the gateway the model sent are about."""
    return [e.pid for e in m.emitted if e.frame[12:14] == b"\x08\x06" and e.frame[38:42] == GATEWAY.to_bytes(4, "big")]


def learnt_then_restarted() -> RouterModel:
    """A model that resolved the gateway (a packet held, the neighbour's reply), whose
    daemon was then killed at 30 us and started again at 40 us."""
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    first = m.process(0, to44(0), 0, 10_000)
    assert first.fast == Except("arp_miss") and first.final is None
    m.process(1, arp(2, GATEWAY_MAC, GATEWAY, ROUTER_MAC[2], PORT2), 2, 20_000)
    assert isinstance(first.final, Forward)
    m.kill(30_000)
    m.restart(40_000)
    m.emitted.clear()
    return m


def test_the_model_withdraws_learnt_macs_at_the_time_the_daemon_did() -> None:
    m = learnt_then_restarted()
    m.withdraw_at(60_000)
    before = m.process(2, to44(2), 0, 59_999)
    assert isinstance(before.fast, Forward) and before.learnt_hop       # the fast path still had the MAC
    assert arp_requests(m) == []
    after = m.process(3, to44(3), 0, 60_000)
    assert after.fast == Except("arp_miss") and after.final is None     # held: ARP afresh
    assert arp_requests(m) == [3]


def test_a_withdrawal_the_model_is_past_takes_effect_at_once() -> None:
    m = learnt_then_restarted()
    m.process(2, to44(2), 0, 70_000)
    m.withdraw_at(60_000)
    assert m.process(3, to44(3), 0, 70_001).fast == Except("arp_miss")


def test_a_resolution_the_daemon_began_before_the_model_takes_the_daemons_time() -> None:
    """The daemon began resolving the gateway for a packet the model forwarded (a model
    late by up to a quantum): the model's resolution, begun for a later packet, takes the
    daemon's start, and its retries fall at the daemon's instants."""
    m = learnt_then_restarted()
    m.withdraw_at(60_000)
    m.process(2, to44(2), 0, 70_000)
    step = m.opt["arp_retry_us"] * 1000
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 1, 65_000)})
    e = m.cache[GATEWAY]
    assert (e.start, e.next_try, e.confirmed) == (65_000, 65_000 + step, True)


def test_a_daemon_record_from_before_the_models_last_resolution_ended_is_not_taken() -> None:
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    m.process(0, to44(0), 0, 10_000)
    m.finish()                                             # nobody answers: given up
    gave_up = m.cache[GATEWAY].gave_up
    assert gave_up > 10_000 and m.cache[GATEWAY].state == "none"
    m.process(1, to44(1), 0, gave_up + 5_000)               # a resolution afresh
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 3, gave_up - 1_000)})   # the old one, still going there
    assert m.cache[GATEWAY].start == gave_up + 5_000 and not m.cache[GATEWAY].confirmed


@pytest.mark.parametrize("given_up_since", [True, False])
def test_a_packet_found_excepted_when_its_hold_ended_shares_its_resolutions_fate(given_up_since: bool) -> None:
    """A packet the model forwarded through the learnt MAC that the daemon logs as arp_miss
    when its hold ends: if the model has since given up the gateway's resolution, the
    packet was held in it: given up with it (ICMP host unreachable), no resolution afresh
    (before: three ARP requests more than the daemon sent)."""
    m = learnt_then_restarted()
    m.withdraw_at(60_000)
    fwd = m.process(2, to44(2), 0, 59_000)
    assert isinstance(fwd.final, Forward)
    m.process(3, to44(3), 0, 61_000)
    m.finish()
    gave_up = m.cache[GATEWAY].gave_up
    m.emitted.clear()
    arrived = 59_000 if given_up_since else gave_up + 1
    res = m.take_exception(2, to44(2), 0, Except("arp_miss"), arrived)
    icmp = [e.frame for e in m.emitted if e.pid == 2 and e.frame[23] == 1]
    if given_up_since:
        assert res.final == Except("arp_miss") and arp_requests(m) == []
        assert [(f[34], f[35]) for f in icmp] == [(3, 1)]
    else:
        assert res.final is None and arp_requests(m) == [2] and icmp == []


@pytest.mark.parametrize(("kill_ms", "restart_ms"), [(0.25, 0.6), (0.3, 0.65), (0.45, 0.6)])
def test_kill_and_restart_around_the_learnt_gateway(kill_ms: float, restart_ms: float) -> None:
    """errors.yaml for 2 ms (a gateway learnt from the neighbour's one answer) with the
    daemon killed and restarted at times that failed a correct router: unexpected_control
    3 or missing_control 3, the ARP requests for the gateway resolved afresh.  The change
    log has the withdrawal, by the second daemon, stamped after its restart; the model
    took it from the start of the quantum then."""
    tr = load_traffic_source(EXAMPLES / "errors.yaml", 2_000_000)
    restart_ns = int(restart_ms * 1e6)
    rr, s = run(tr, 2_000_000, control={"kill_at_ns": int(kill_ms * 1e6), "restart_at_ns": restart_ns})
    clean(s)
    assert s["comparison"]["matched_control"] > 140
    withdrawn = [c for src, c in change_log(rr.chip) if src == CHG_WITHDRAWN]
    assert [c.prefix for c in withdrawn] == [2]                              # the second daemon's
    stamp = withdrawn[0].at_ns + withdrawn[0].next_hop
    host: Any = rr.control.system.xscale if rr.control is not None else None
    mhz = int(rr.chip.config["clock_mhz"])
    start = host.visible_from(stamp * mhz // 1000) * 1000 // mhz
    quantum_ns = host.quantum * 1000 // host.xs_mhz
    assert restart_ns < start <= stamp <= start + quantum_ns + 1
    rr.close()
