"""Timed route changes across a kill of the daemon (xscale/npkd/README.md "The route
table"): a timed change the killed daemon had not made -- one due while no daemon runs,
or one cut by the kill at its journal write -- is made by the daemon started after it,
at once once it has its route table, and counted (`timed_changes_late`); one it had made
is not made again.  The run's model follows (RouterModel.owe, timed_made): the verdict
is ok, every packet accounted for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.source import Traffic
from npkit.emulator.traffic.spec import parse_route_change
from npkit.toolchain.system.control import CHG_TIMED, CHG_TIMED_FAILED, change_log
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

from .test_control_plane import EXAMPLES
from .test_control_rfc import HOST, UDP, account, ip, v4
from .test_route_journal import (
    _ask,
    _kill_at_next_journal_write,
    _model_and_fast_path,
    _ready,
    _run_until,
)

NET30, NET20 = "30.0.0.0/8", "20.1.2.0/24"
TO30, TO20 = "30.1.2.3", "20.1.2.9"
VIA30 = bytes.fromhex("02000a000302")  # 10.0.3.2 (router.yaml's static ARP)
VIA20 = bytes.fromhex("02000a000102")  # 10.0.1.2 (20.1.2/24 added; 20/8 is via 10.0.1.3)
FIRST_NS, GAP_NS = 400_000, 10_000


def traffic(changes: list[str], end_ns: int) -> Traffic:
    """Port 0 sends to 30.1.2.3 and 20.1.2.9 in turn, a datagram every 10 us (the k-th
    has IP identification k).  The router has no route to 30.1.2.3 until a change adds
    30/8 (until then: ICMP net unreachable); 20.1.2.9 leaves port 1 by 20/8 via
    10.0.1.3, or by 20.1.2/24 via 10.0.1.2 once a change adds that."""
    router = RouterConfig.load(EXAMPLES / "router.yaml")
    tr = Traffic(route_changes=[parse_route_change(c, router) for c in changes])
    for k, t in enumerate(range(FIRST_NS, end_ns, GAP_NS)):
        tr.add(t, 0, v4(0, HOST, ip(TO30 if k % 2 == 0 else TO20), UDP(1000, 2000 + k % 50), b"p" * 18, ident=k))
    return tr


def departures(rr: RouterRun, dst: str) -> list[tuple[int, int, bytes]]:
    """(arrival time, output port, destination MAC) of each datagram to dst that left,
    in order of arrival."""
    assert rr.run.out is not None
    want = ip(dst).to_bytes(4, "big")
    return sorted((FIRST_NS + GAP_NS * int.from_bytes(d[18:20], "big"), port, d[:6])
                  for port, frames in rr.run.out.items() for _t, d in frames if d[30:34] == want)  # fmt: skip


def timed_records(rr: RouterRun, source: int = CHG_TIMED) -> list[Any]:
    """The timed changes the daemons made (or, CHG_TIMED_FAILED, tried and failed), from
    the change log (at the time each made it)."""
    return [c for s, c in change_log(rr.chip) if s == source]


def journal_lines(rr: RouterRun) -> list[str]:
    assert rr.control is not None
    return (rr.control.dir / "routes.state").read_text().splitlines()


def check_run(rr: RouterRun) -> dict[str, Any]:
    s = rr.summary()
    assert not account(s), account(s)
    v = judge(s, Policy())
    assert v["ok"], v["reasons"]
    return s


def killed_and_restarted(changes: list[str], kill: int, start: int) -> tuple[RouterRun, dict[str, Any]]:
    """`traffic` to 2.6 ms with these timed changes, the daemon killed at `kill` and
    started again at `start`, run to 2.8 ms and drained; checked clean."""
    rr = RouterRun.link("pipelined", {}, traffic(changes, 2_600_000), record=True,
                        control={"kill_at_ns": kill, "restart_at_ns": start})  # fmt: skip
    rr.run_traffic(2_800_000)
    rr.drain()
    return rr, check_run(rr)


def test_a_timed_change_due_while_the_daemon_is_down_is_made_after_the_restart() -> None:
    """Two timed changes, the daemon killed at 1 ms and started again at 1.5 ms: the one
    at 0.8 ms it made before the kill (20.1.2/24) is not made again; the one at 1.2 ms
    (30/8), due while no daemon ran, the restarted daemon makes once it has its route
    table -- late, and counted so.  The fast path forwards to 30.1.2.3 from then on and
    not before (ICMP net unreachable until then), to 20.1.2.9 all along from 0.8 ms; the
    oracle follows, the verdict is ok.  (Before: the restarted daemon skipped the change
    as past, the fast path never had 30/8 and the oracle, which applied it at 1.2 ms,
    failed the run.)"""
    kill, start = 1_000_000, 1_500_000
    changes = [f"at 800us add {NET20} via 10.0.1.2", f"at 1200us add {NET30} via 10.0.3.2"]
    rr, s = killed_and_restarted(changes, kill, start)
    cp = s["control_plane"]
    assert [e["event"] for e in cp["restarts"]] == ["killed", "restarted"]
    c = cp["counters"]
    assert cp["timed_changes_late"] == c["timed_late"] == 1
    assert (c["timed_changes"], c["routes_added"], c["route_errors"]) == (2, 2, 0)
    made = timed_records(rr)
    assert [(m.prefix, m.length) for m in made] == [(ip("20.1.2.0"), 24), (ip("30.0.0.0"), 8)]
    assert made[0].at_ns < kill < start < made[1].at_ns
    assert journal_lines(rr) == ["timed 0 add 20.1.2.0/24 via 10.0.1.2 port 1",
                                 "timed 1 add 30.0.0.0/8 via 10.0.3.2 port 3"]  # fmt: skip
    to30 = departures(rr, TO30)
    assert to30 and all((port, mac) == (3, VIA30) for _t, port, mac in to30)
    assert min(t for t, _p, _m in to30) >= start                # none while the route was not there
    after = range(made[1].at_ns + 100_000, 2_600_000)
    assert [t for t, _p, _m in to30 if t in after] == [t for t in range(FIRST_NS, 2_600_000, 2 * GAP_NS) if t in after]
    to20 = [(t, port, mac) for t, port, mac in departures(rr, TO20) if t >= 900_000]
    assert [t for t, _p, _m in to20] == list(range(FIRST_NS + GAP_NS + 25 * 2 * GAP_NS, 2_600_000, 2 * GAP_NS))
    assert all((port, mac) == (1, VIA20) for _t, port, mac in to20)     # the change of 0.8 ms kept
    rr.close()


def test_a_timed_change_cut_by_a_kill_at_its_journal_write_is_made_once(tmp_path: Path) -> None:
    """Timed changes at 0.6 ms (20.1.2/24) and 1 ms (30/8), the daemon killed as it
    journals the second (a kill is taken at a system call: its journal line's write, so
    the change is in neither the journal, nor SRAM, nor the change log) and started again
    0.3 ms later: the restarted daemon makes the cut change, once, and not the first
    again; `route show` agrees with the fast path; the verdict is ok."""
    sock = tmp_path / "npkd.sock"
    changes = [f"at 600us add {NET20} via 10.0.1.2", f"at 1000us add {NET30} via 10.0.3.2"]
    rr = RouterRun.link("pipelined", {}, traffic(changes, 2_400_000), record=True, control={"socket": str(sock)})
    _run_until(rr, lambda: len(timed_records(rr)) == 1, 1_000_000)         # the first made
    fired = _kill_at_next_journal_write(rr, 300_000)
    _run_until(rr, lambda: _ready(rr, 2), 3_000_000)
    assert fired and [e for _c, e in rr.control.system.events] == ["killed", "restarted"]
    assert 1_000_000 <= fired["cycle"] * 1000 // float(rr.chip.config["clock_mhz"]) < 1_100_000   # killed in it
    _run_until(rr, lambda: len(timed_records(rr)) == 2, 1_000_000)         # the cut one, by the new daemon
    show = _ask(rr, sock, f"show {TO30}", f"show {TO20}")
    for answer in show:
        model, fast = _model_and_fast_path(answer)
        assert model == fast != 0, answer
    rr.run_traffic(2_500_000 - rr.run.now_ns)
    rr.drain()
    s = check_run(rr)
    c = s["control_plane"]["counters"]
    assert (c["timed_changes"], c["timed_late"], c["routes_added"], c["route_errors"]) == (2, 1, 2, 0)
    assert [(m.prefix, m.length) for m in timed_records(rr)] == [(ip("20.1.2.0"), 24), (ip("30.0.0.0"), 8)]
    assert journal_lines(rr) == ["timed 0 add 20.1.2.0/24 via 10.0.1.2 port 1",
                                 "timed 1 add 30.0.0.0/8 via 10.0.3.2 port 3"]  # fmt: skip
    to30 = departures(rr, TO30)
    assert to30 and all((port, mac) == (3, VIA30) for _t, port, mac in to30)
    assert min(t for t, _p, _m in to30) > 1_300_000                         # not before the restart
    rr.close()


def test_a_timed_change_owed_and_failed_after_the_restart_is_owed_no_more() -> None:
    """Two timed changes due while no daemon runs: a del of a route the table does not
    have (1.2 ms) and an add of 30/8 (1.4 ms).  The restarted daemon deals with both
    late, in order: the del fails (a route error; journalled as dealt with, "timed 0",
    with a change log record of the failure), the add is made.  The run's model takes the
    failure's record as the end of what it owed: the verdict is ok.  (Before, a failure
    left no record, and the run failed with "owed by a killed daemon was never made".)"""
    kill, start = 1_000_000, 1_500_000
    changes = [f"at 1200us del {NET30}", f"at 1400us add {NET30} via 10.0.3.2"]
    rr, s = killed_and_restarted(changes, kill, start)
    cp = s["control_plane"]
    c = cp["counters"]
    assert (c["timed_changes"], c["timed_late"], c["routes_added"], c["route_errors"]) == (2, 2, 1, 1)
    failed, made = timed_records(rr, CHG_TIMED_FAILED), timed_records(rr)
    assert [(f.op, f.prefix, f.length) for f in failed] == [("del", ip("30.0.0.0"), 8)]
    assert [(m.op, m.prefix, m.length) for m in made] == [("add", ip("30.0.0.0"), 8)]
    assert start < failed[0].at_ns <= made[0].at_ns
    assert journal_lines(rr) == ["timed 0", "timed 1 add 30.0.0.0/8 via 10.0.3.2 port 3"]
    to30 = departures(rr, TO30)
    assert to30 and min(t for t, _p, _m in to30) >= start and all(p == 3 for _t, p, _m in to30)


def test_timed_changes_due_before_the_first_daemon_has_its_table_are_made_and_followed() -> None:
    """The first daemon starts some tens of microseconds into the run and takes hundreds
    more to load its route model: a timed change due before it started (10 us) is made
    once it has the model, late and counted so, and one due while it loads (200 us) when
    it has it.  The model owes both until the change log says they were made (as after a
    restart), and the verdict is ok.  (Before: the daemon skipped the change due before
    it started, and the model applied both at their time with a 100 us window, so the
    fast path's no_route exceptions and port 1 forwards failed the run.)"""
    changes = [f"at 10us add {NET20} via 10.0.1.2", f"at 200us add {NET30} via 10.0.3.2"]
    router = RouterConfig.load(EXAMPLES / "router.yaml")
    tr = Traffic(route_changes=[parse_route_change(c, router) for c in changes])
    first, gap, end = 20_000, 10_000, 1_400_000
    for k, t in enumerate(range(first, end, gap)):
        tr.add(t, 0, v4(0, HOST, ip(TO30 if k % 2 == 0 else TO20), UDP(1000, 2000 + k % 50), b"p" * 18, ident=k))
    rr = RouterRun.link("pipelined", {}, tr, record=True)
    rr.run_traffic(1_500_000)
    rr.drain()
    s = check_run(rr)
    c = s["control_plane"]["counters"]
    assert (c["timed_changes"], c["timed_late"], c["routes_added"], c["route_errors"]) == (2, 1, 2, 0)
    made = timed_records(rr)
    assert [(m.prefix, m.length) for m in made] == [(ip("20.1.2.0"), 24), (ip("30.0.0.0"), 8)]
    assert 200_000 < made[0].at_ns <= made[1].at_ns < 1_000_000      # both late: after the model's load
    assert journal_lines(rr) == ["timed 0 add 20.1.2.0/24 via 10.0.1.2 port 1",
                                 "timed 1 add 30.0.0.0/8 via 10.0.3.2 port 3"]  # fmt: skip
    assert rr.run.out is not None
    left: dict[str, list[tuple[int, int, bytes]]] = {TO20: [], TO30: []}
    for port, frames in rr.run.out.items():
        for _t, d in frames:
            dst = ".".join(str(b) for b in d[30:34])
            if dst in left:
                left[dst].append((first + gap * int.from_bytes(d[18:20], "big"), port, d[:6]))
    after = [t for t in range(first, end, 2 * gap) if t > made[1].at_ns + 100_000]   # to 30.1.2.3: every one
    assert [t for t, _p, _m in sorted(left[TO30]) if t > made[1].at_ns + 100_000] == after
    assert all((port, mac) == (3, VIA30) for _t, port, mac in left[TO30])
    assert all((port, mac) == (1, VIA20) for t, port, mac in left[TO20] if t > made[0].at_ns + 100_000)
    rr.close()
