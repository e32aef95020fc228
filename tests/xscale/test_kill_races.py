"""Two races a kill/restart sweep found (errors.yaml seeds 99 and 5 at load 0.1, imix.yaml;
2 ms, both layouts) where the run's judge failed a correct router.

- A packet for a next hop whose resolution the model had just given up, which the
  daemon -- behind its deadline -- took into that resolution before it gave it up: the
  model began a resolution of its own for the packet and expected its three requests
  (missing_control 3).  The daemon's log decides: it logs the packets one resolution
  held one after the other, the first held (the one it was begun for) first, so a
  packet logged right after another held for the same next hop began none.
- A packet with IP options the daemon forwarded and then logged, with an XScale quantum
  between the two: its frame left, its window of input packets was let go of, and the
  log record came for a packet no longer known (unmatched_exception 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npkit.emulator.traffic.control import DaemonArp, Emitted, RouterModel, is_arp_request_for
from npkit.emulator.traffic.oracle import Except
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.control import LogRecord
from npkit.toolchain.system.control_run import ControlJudge
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

from .test_control_plane import EXAMPLES
from .test_kill_arp import icmp_errors
from .test_withdrawal import GATEWAY, arp_requests, to44

RETRY_NS = 200_000  # cfg.h arp_retry_us
CONSUMED = 1  # xscale/npkd/cp.h ACT_CONSUMED


def given_up_then_another(clear: bool = True) -> RouterModel:
    """A model whose resolution of the gateway (begun at 12 us by the daemon's record, for
    packet 0) it gave up at 612 us; packet 1 came at 630 us and began another (`clear`:
    what it sent so far forgotten)."""
    m = RouterModel(RouterConfig.load(EXAMPLES / "router.yaml"))
    m.process(0, to44(0), 0, 10_000)
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 1, 12_000)})
    m.advance(12_000 + 3 * RETRY_NS + 8_000)
    assert m.results[0].final == Except("arp_miss")
    m.process(1, to44(1), 0, 630_000)
    assert m.results[1].final is None and arp_requests(m)[-1] == 1
    if clear:
        m.emitted.clear()
    return m


def test_a_packet_the_daemon_gave_up_with_the_last_resolution_began_none() -> None:
    m = given_up_then_another()
    assert m.given_up_before(1)
    assert m.results[1].final == Except("arp_miss") and icmp_errors(m) == [1]
    m.advance(2_000_000)                       # no resolution under way: no retries, no give-up
    assert arp_requests(m) == [] and icmp_errors(m) == [1] and m.cache[GATEWAY].state == "none"


def test_the_next_packet_held_begins_the_resolution_afresh() -> None:
    m = given_up_then_another()
    m.process(2, to44(2), 0, 640_000)
    assert m.given_up_before(1)
    assert m.results[2].final is None and arp_requests(m) == [2] and m.cache[GATEWAY].starter == 2


def test_a_resolution_the_daemon_confirmed_keeps_its_packet() -> None:
    """The daemon's record shows a resolution begun after the model's ended: it is this
    one, and the packet was held in it (the model gives it up at its own deadline)."""
    m = given_up_then_another()
    m.follow_arp({GATEWAY: DaemonArp("incomplete", 1, 631_000)})
    assert not m.given_up_before(1)
    assert m.results[1].final is None and m.cache[GATEWAY].state == "incomplete"


def judge_of(m: RouterModel) -> ControlJudge:
    """The judge's log-record rule alone: its model, the frames about packets not yet
    logged (all the model's so far)."""
    cj = ControlJudge.__new__(ControlJudge)
    cj.model, cj._hold_end, cj.provisional = m, None, {}
    for em in m.emitted:
        cj.provisional.setdefault(em.pid, []).append(em)
    m.emitted.clear()
    return cj


def requests_about(cj: ControlJudge, pid: int) -> list[Emitted]:
    return [em for em in cj.provisional.get(pid, []) if is_arp_request_for(em.frame, GATEWAY)]


def given_up_twice() -> ControlJudge:
    """The model gave up its resolution of packet 1 too (at 1230 us): the daemon, further
    behind, logs packets 0 and 1 later."""
    m = given_up_then_another(clear=False)
    m.advance(1_300_000)
    assert m.results[1].final == Except("arp_miss") and arp_requests(m) == [0, -1, -1, 1, 1, 1]
    return judge_of(m)


def log(pid: int, time_us: int, action: int = CONSUMED) -> LogRecord:
    return LogRecord(pid, 64, 0, 9, action, 1, pid, time_us)


def test_a_packet_logged_after_another_of_the_same_resolution_has_no_requests() -> None:
    cj = given_up_twice()
    r = cj.model.results
    cj._joined(log(0, 1300), 0, r[0])
    cj._joined(log(1, 1300), 1, r[1])
    assert requests_about(cj, 1) == [] and len(cj.provisional[1]) == 1     # its ICMP error stays


def test_a_packet_logged_alone_keeps_its_requests() -> None:
    """Not the same give-up: another record between them, or a retry interval apart."""
    for between in (True, False):
        cj = given_up_twice()
        r = cj.model.results
        cj._joined(log(0, 1300), 0, r[0])
        if between:
            cj._joined(log(7, 1300), 7, None)
        cj._joined(log(1, 1300 if between else 1501), 1, r[1])
        assert len(requests_about(cj, 1)) == 3


def run_spec(tmp_path: Path, spec: Path, edit: dict[str, str], layout: str, kill_us: int | None,
             restart_us: int | None) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """2 ms of `spec` (its text edited) on `layout`, the daemon killed and restarted at
    those times (None: neither): the run's summary and verdict."""
    text = spec.read_text()
    for old, new in {**edit, "router: router.yaml": f"router: {EXAMPLES / 'router.yaml'}"}.items():
        text = text.replace(old, new)
    (tmp_path / spec.name).write_text(text)
    tr = load_traffic_source(tmp_path / spec.name, 2_000_000)
    times = {} if kill_us is None or restart_us is None else {"kill_at_ns": kill_us * 1000, "restart_at_ns": restart_us * 1000}
    rr = RouterRun.link(layout, {}, tr, control=times)
    try:
        rr.run_traffic(2_000_000)
        rr.drain()
        s = rr.summary()
        return s, judge(s, Policy())
    finally:
        rr.close()


def test_a_daemon_giving_up_late_takes_the_next_packet_in(tmp_path: Path) -> None:
    """errors.yaml, seed 99, killed at 0.5 ms, started again at 0.65: the daemon gives up
    the gateway at 2020 us, 41 us after its deadline, with a packet that came 21 us after
    it (was: missing_control 3)."""
    s, v = run_spec(tmp_path, EXAMPLES / "errors.yaml", {"seed: 11": "seed: 99"}, "pipelined", 500, 650)
    assert v["ok"], v["reasons"]
    assert s["control_plane"]["arp_unresolved"] > 0


def test_a_forwarded_packet_that_left_before_its_log_record(tmp_path: Path) -> None:
    """imix.yaml killed at 0.9 ms, started again at 1.25: an options packet forwarded by
    the restarted daemon at 1645 us leaves before the record (was: unmatched_exception 1)."""
    s, v = run_spec(tmp_path, EXAMPLES / "imix.yaml", {}, "parallel", 900, 1250)
    assert v["ok"], v["reasons"]
    cp = s["control_plane"]
    assert cp["packets_forwarded_by_it"] == cp["forwarded_by_control_plane"] > 0


def test_the_judge_still_fails_a_lost_or_extra_frame_there(tmp_path: Path, monkeypatch: Any) -> None:
    """The same run, the wire seen without the host unreachable error the late give-up
    sent about that packet (lost), or with the gateway's last ARP request twice (one the
    daemon would have sent had it begun a resolution for the packet)."""
    real = ControlJudge.generated

    def edited(self: ControlJudge, port: int, t: int, frame: bytes) -> None:
        icmp_unreach = frame[12:14] == b"\x08\x00" and frame[23] == 1 and frame[34:36] == b"\x03\x01"
        if mode == "lose" and icmp_unreach and t >= 2_020_000 and not done:
            done.append(t)
            return
        real(self, port, t, frame)
        if mode == "extra" and is_arp_request_for(frame, GATEWAY) and t >= 1_800_000 and not done:
            done.append(t)
            real(self, port, t, frame)

    monkeypatch.setattr(ControlJudge, "generated", edited)
    for mode, reason in (("lose", "missing_control 1"), ("extra", "unexpected_control 1")):
        done: list[int] = []
        _s, v = run_spec(tmp_path, EXAMPLES / "errors.yaml", {"seed: 11": "seed: 99"}, "pipelined", 500, 650)
        assert done and not v["ok"] and any(reason in r for r in v["reasons"]), (mode, v["reasons"])


def test_only_packets_still_to_be_logged_are_kept(tmp_path: Path) -> None:
    """The judge keeps a packet past its window only while the daemon's record of it is
    still to come: at the end of a run in which the daemon forwarded packets (imix's IP
    options), none is kept, so nothing piles up over a long run."""
    text = (EXAMPLES / "imix.yaml").read_text().replace("router: router.yaml", f"router: {EXAMPLES / 'router.yaml'}")
    (tmp_path / "imix.yaml").write_text(text)
    tr = load_traffic_source(tmp_path / "imix.yaml", 2_000_000)
    rr = RouterRun.link("pipelined", {}, tr)
    try:
        rr.run_traffic(2_000_000)
        rr.drain()
        s = rr.summary()
        assert judge(s, Policy())["ok"]
        assert s["control_plane"]["packets_forwarded_by_it"] > 0
        assert rr.cp is not None and rr.cp.unlogged == set()
    finally:
        rr.close()
