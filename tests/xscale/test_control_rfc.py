"""The router's control plane against the RFCs, with crafted traffic that carries no
npkit tag (as a real capture): the bytes the daemon puts on the wire are checked field by
field against RFC 792/826/1122/1812/5227, not only against the oracle's model (which
follows the daemon step for step), and the run must account for every packet."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from npkit.emulator.traffic.control import KILLED
from npkit.emulator.traffic.packet import (
    ARP,
    ICMP,
    TCP,
    UDP,
    Ethernet,
    IPv4,
    arp_frame,
    internet_checksum,
    ip,
)
from npkit.emulator.traffic.packet import ipv4_frame as _ipv4_frame
from npkit.emulator.traffic.packet import mac as _mac
from npkit.emulator.traffic.source import Traffic, load_traffic_source
from npkit.toolchain.system.buffers import free_list, rx_spares
from npkit.toolchain.system.control import owned_buffers
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.sysmap import SYS

from .test_control_plane import MISMATCHES

ROUTER_MAC = [_mac(f"02:4e:50:00:00:0{p}") for p in range(5)]
HOST = ip("198.18.1.1")  # routed back out of port 0 (198.18.0.0/15 via 10.0.0.2)
START_NS = 400_000  # the daemon has booted
GAP_NS = 20_000
ECHO_DATA = bytes(range(40))


def v4(port: int, src: int, dst: int, l4: Any, payload: bytes = b"", *, options: bytes = b"", ttl: int = 64,
       src_mac: bytes | None = None, ident: int = 0x1234) -> bytes:  # fmt: skip
    eth = Ethernet(ROUTER_MAC[port], src_mac or _mac(f"02:00:0a:00:0{port}:02"), 0x0800)
    proto = {ICMP: 1, TCP: 6, UDP: 17}.get(type(l4), 99)
    return _ipv4_frame(eth, IPv4(src, dst, proto, ttl=ttl, identification=ident, options=options), l4, payload)


def echo_request(port: int, dst: int, options: bytes = b"", src: int = HOST, src_mac: bytes | None = None,
                 echo_id: int = 7) -> bytes:  # fmt: skip
    return v4(port, src, dst, ICMP(8, 0, struct.pack("!HH", echo_id, 1)), ECHO_DATA, options=options,
              src_mac=src_mac)  # fmt: skip


def traffic(frames: list[tuple[int, bytes]]) -> Traffic:
    tr = Traffic()
    for k, (port, frame) in enumerate(frames):
        tr.add(START_NS + k * GAP_NS, port, frame)
    return tr


def run(frames: list[tuple[int, bytes]], duration_ns: int = 1_200_000, control: dict[str, Any] | None = None,
        timed: tuple[tuple[int, int, bytes], ...] = ()) -> tuple[RouterRun, dict[str, Any]]:  # fmt: skip
    """The frames GAP_NS apart from START_NS, and `timed` ones (time, port, frame)."""
    tr = traffic(frames)
    for t, port, frame in timed:
        tr.add(t, port, frame)
    rr = RouterRun.link("pipelined", {}, tr, control=control, record=True)
    rr.run_traffic(duration_ns)
    rr.drain()
    return rr, rr.summary()


def account(s: dict[str, Any]) -> list[str]:
    """What is wrong with the run's account (nothing: [])."""
    cmp_ = s["comparison"]
    bad = [f"{k} {cmp_[k]}" for k in MISMATCHES if cmp_.get(k) and k != "untagged"]  # (crafted: no tags)
    if not s["conservation"]["balanced"]:
        bad.append(f"conservation {s['conservation']['problems']}")
    if s["in_flight"]["count"]:
        bad.append(f"in flight {s['in_flight']}")
    if s["totals"]["lost"]:
        bad.append(f"lost {s['totals']['lost']}")
    return bad


def generated(rr: RouterRun) -> list[tuple[int, bytes]]:
    assert rr.run.generated_out is not None
    return [(p, d) for p, frames in rr.run.generated_out.items() for _t, d in frames]


def icmp_of(frame: bytes) -> tuple[IPv4, bytes]:
    """The IP header and the ICMP message of a frame the router sent, its checksums checked."""
    assert frame[12:14] == b"\x08\x00"
    h = IPv4.unpack(frame[14:])
    assert h.version == 4 and h.protocol == 1 and h.ttl > 0
    assert internet_checksum(frame[14 : 14 + h.header_len]) == 0, "IP header checksum"
    msg = frame[14 + h.header_len : 14 + h.total_length]
    assert internet_checksum(msg) == 0, "ICMP checksum"
    return h, msg


# ---- local delivery and ARP: one run -----------------------------------------------------------

RR_OPTION = bytes([7, 11, 4]) + bytes(8) + b"\x00"  # record route, two slots, then end of list
CASES = {
    "ping_nop": (1, echo_request(1, ip("10.0.1.1"), b"\x01\x01\x01\x00")),
    "ping_rr": (1, echo_request(1, ip("10.0.1.1"), RR_OPTION)),
    "probe": (1, arp_frame(Ethernet(b"\xff" * 6, _mac("02:00:0a:00:01:20"), 0x0806),
                          ARP(1, _mac("02:00:0a:00:01:20"), 0, bytes(6), ip("10.0.1.1")))),  # fmt: skip
    "proto99": (1, v4(1, HOST, ip("10.0.1.1"), None, b"q" * 20)),
    "tcp": (1, v4(1, HOST, ip("10.0.1.1"), TCP(1234, 80, 1, 0, 0x02, 8192))),
}


@pytest.fixture(scope="module")
def local_run() -> dict[str, Any]:
    rr, s = run(list(CASES.values()))
    return {"rr": rr, "s": s, "frames": generated(rr)}


def is_echo_reply(d: bytes) -> bool:
    return d[12:14] == b"\x08\x00" and d[23] == 1 and d[14 + 4 * (d[14] & 0xF)] == 0


def test_echo_request_with_ip_options_gets_a_reply(local_run: dict[str, Any]) -> None:
    """RFC 1812 4.3.3.6: an Echo Request to the router is answered, options or not; the
    reply carries the request's data whole, from the address asked.  NOPs are not
    returned (IHL 5); a Record Route comes back with the address of the interface the
    reply leaves by added (RFC 1122 3.2.2.6: the route of the whole round trip)."""
    replies = sorted(((p, d) for p, d in local_run["frames"] if is_echo_reply(d)), key=lambda pd: pd[1][14])
    assert len(replies) == 2, local_run["frames"]
    for port, d in replies:
        h, msg = icmp_of(d)
        assert port == 0 and d[0:6] == _mac("02:00:0a:00:00:02") and d[6:12] == ROUTER_MAC[0]
        assert h.src == ip("10.0.1.1") and h.dst == HOST and h.total_length == h.header_len + len(msg)
        assert msg[0:2] == b"\x00\x00" and msg[4:8] == struct.pack("!HH", 7, 1) and msg[8:] == ECHO_DATA
    assert replies[0][1][14] == 0x45                                    # ping_nop
    assert replies[1][1][14:15] + replies[1][1][34:46] == b"\x48" + bytes([7, 11, 8, 10, 0, 0, 1]) + bytes(5)
    assert local_run["s"]["control_plane"]["icmp_sent"]["echo_reply"] == 2


def test_arp_probe_for_the_router_is_answered(local_run: dict[str, Any]) -> None:
    """RFC 826 / RFC 5227 2.1.1: a probe (sender 0.0.0.0) for the port's address gets a
    reply (npkd: unicast to the asker's hardware address, target 0.0.0.0); nothing is learnt."""
    arp = [(p, d) for p, d in local_run["frames"] if d[12:14] == b"\x08\x06"]
    assert len(arp) == 1, local_run["frames"]
    port, d = arp[0]
    a = ARP.unpack(d[14:])
    asker = _mac("02:00:0a:00:01:20")
    assert port == 1 and d[0:6] == asker and d[6:12] == ROUTER_MAC[1] and a.op == 2
    assert a.sender_mac == ROUTER_MAC[1] and a.sender_ip == ip("10.0.1.1")
    assert a.target_mac == asker and a.target_ip == 0
    assert local_run["s"]["control_plane"]["counters"]["arp_learnt"] == 0


def test_tcp_and_unknown_protocols_to_the_router_get_protocol_unreachable(local_run: dict[str, Any]) -> None:
    """RFC 1122 3.2.2.1 / RFC 1812 4.3.2: a protocol the router does not implement (npkd
    has no TCP) gets Destination Unreachable, code 2, quoting the datagram as received,
    from the address of the interface it leaves by, TOS 0xC0."""
    errors = [(p, d) for p, d in local_run["frames"] if d[12:14] == b"\x08\x00" and d[34] == 3]
    assert len(errors) == 2, local_run["frames"]
    quoted = {CASES["proto99"][1][14:], CASES["tcp"][1][14:]}
    for port, d in errors:
        h, msg = icmp_of(d)
        assert port == 0 and h.src == ip("10.0.0.1") and h.dst == HOST and h.tos == 0xC0
        assert msg[1] == 2 and msg[4:8] == bytes(4)
        quote = msg[8:]
        assert quote in {q[: len(quote)] for q in quoted} and len(quote) == IPv4.unpack(quote).total_length
    assert local_run["s"]["control_plane"]["icmp_sent"]["dest_unreachable_protocol"] == 2


def test_local_run_accounts_for_everything(local_run: dict[str, Any]) -> None:
    s = local_run["s"]
    assert not account(s), account(s)
    assert s["comparison"]["matched_control"] == len(local_run["frames"]) == 5


# ---- forwarding after IP options, and the router's own frames without ARP: one run --------------

FAR = ip("1.9.9.9")  # routed out of port 0 (10.0.0.1)
UNKNOWN = ip("10.0.1.51")  # on port 1's subnet, in no ARP table, and nobody answers for it
UNKNOWN_MAC = _mac("02:00:0a:00:01:33")
FWD = {
    "rr": (1, v4(1, HOST, FAR, UDP(1000, 2000), b"x" * 18, options=RR_OPTION)),
    "ts": (1, v4(1, HOST, FAR, UDP(1000, 2000), b"x" * 18, options=bytes([68, 12, 5, 0]) + bytes(8))),
    "lsrr": (1, v4(1, HOST, ip("10.0.1.1"), UDP(1000, 2000), b"x" * 18,
                   options=bytes([131, 11, 4]) + FAR.to_bytes(4, "big") + ip("1.2.3.1").to_bytes(4, "big") + b"\0")),
    "ping_unknown": (1, echo_request(1, ip("10.0.1.1"), src=UNKNOWN, src_mac=UNKNOWN_MAC)),
    "ttl1_unknown": (1, v4(1, UNKNOWN, FAR, UDP(1000, 2000), b"x" * 18, ttl=1, src_mac=UNKNOWN_MAC)),
}  # fmt: skip


@pytest.fixture(scope="module")
def fwd_run() -> dict[str, Any]:
    rr, s = run(list(FWD.values()), 1_600_000)
    assert rr.run.out is not None
    return {"rr": rr, "s": s, "out": [(p, d) for p, f in rr.run.out.items() for _t, d in f],
            "frames": generated(rr)}  # fmt: skip


def _forwarded(fwd_run: dict[str, Any], name: str) -> bytes:
    src = FWD[name][1]
    hl = 4 * (src[14] & 0xF)
    got = [d for p, d in fwd_run["out"] if p == 0 and d[34] == src[34] and d[14 + hl :] == src[14 + hl :]]
    assert len(got) == 1, (name, fwd_run["out"])
    d = got[0]
    assert d[0:6] == _mac("02:00:0a:00:00:02") and d[6:12] == ROUTER_MAC[0]
    assert d[22] == 63 and internet_checksum(d[14 : 14 + hl]) == 0 and d[14] == src[14]
    return d


def test_forwarded_after_options_is_right_and_accounted(fwd_run: dict[str, Any]) -> None:
    """RFC 791 / RFC 1812 5.2.4: the control plane forwards datagrams with options after
    recording the outgoing interface's address (Record Route, loose source route: the
    next address becomes the destination) or a timestamp (ms since midnight UT); the run
    finds these untagged frames (by the model's predicted bytes) and accounts them."""
    out_addr = ip("10.0.0.1").to_bytes(4, "big")
    rr = _forwarded(fwd_run, "rr")
    assert rr[34:37] == bytes([7, 11, 8]) and rr[37:41] == out_addr and rr[41:45] == bytes(4)
    ts = _forwarded(fwd_run, "ts")
    stamp = int.from_bytes(ts[38:42], "big")
    assert ts[34:38] == bytes([68, 12, 9, 0]) and 80_000_000 <= stamp < 80_000_000 + 20   # epoch_s 1700000000
    lsrr = _forwarded(fwd_run, "lsrr")
    assert int.from_bytes(lsrr[30:34], "big") == FAR
    assert lsrr[34:37] == bytes([131, 11, 8]) and lsrr[37:41] == out_addr and lsrr[41:45] == bytes([1, 2, 3, 1])
    s = fwd_run["s"]
    assert s["comparison"]["matched_forward"] == 3 and not s["comparison"].get("unmatched"), s["comparison"]
    assert s["totals"]["forwarded"] == s["totals"]["predicted_forward"] == 3


def test_own_frames_waiting_for_arp_nobody_answers(fwd_run: dict[str, Any]) -> None:
    """RFC 1122 2.3.2.1-2: the echo reply and the Time Exceeded for a host on the port's
    subnet that nobody answers ARP for: arp_tries requests for it (one entry), then the
    frames are dropped -- counted as the router's own frames lost, not as ICMP sent."""
    frames = fwd_run["frames"]
    requests = [d for p, d in frames if p == 1 and d[12:14] == b"\x08\x06"]
    assert len(requests) == 3 and all(ARP.unpack(d[14:]).target_ip == UNKNOWN for d in requests)
    assert all(d[0:6] == b"\xff" * 6 for d in requests)
    assert not [d for _p, d in frames if d[12:14] == b"\x08\x00"]   # no ICMP left
    cp = fwd_run["s"]["control_plane"]
    assert cp["own_frames_dropped_no_arp"] == 2
    assert cp["icmp_sent"]["echo_reply"] == cp["icmp_sent"]["time_exceeded"] == 0
    assert cp["arp_unresolved"] == 1


def test_fwd_run_accounts_for_everything(fwd_run: dict[str, Any]) -> None:
    s = fwd_run["s"]
    assert not account(s), account(s)
    assert s["comparison"]["matched_control"] == len(fwd_run["frames"]) == 3


def test_kill_and_restart_on_the_exception_rich_spec() -> None:
    """`npk run --traffic errors.yaml --duration-ms 3 --kill-control-at 1
    --restart-control-at 2`: the packet the daemon held for ARP when it was killed is a
    counted drop (control_killed), not stuck in flight; the restarted daemon starts ARP
    afresh and the model knows it (its ARP requests for next hops learnt before are
    expected), so the run balances with nothing unexpected or lost."""
    from npkit.emulator.traffic.control import KILLED
    from npkit.emulator.traffic.source import load_traffic_source

    from .test_control_plane import EXAMPLES

    tr = load_traffic_source(EXAMPLES / "errors.yaml", 3_000_000)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": 1_000_000, "restart_at_ns": 2_000_000})
    rr.run_traffic(3_000_000)
    rr.drain()
    s = rr.summary()
    assert [e["event"] for e in s["control_plane"]["restarts"]] == ["killed", "restarted"]
    assert not account(s), account(s)
    assert s["totals"]["dropped"].get(KILLED, 0) >= 1
    assert s["comparison"]["matched_control"] > 150 and s["control_plane"]["arp_requests_sent"] > 20


def _buffers_at_the_end(rr: RouterRun, s: dict[str, Any], initial: int) -> None:
    """Every buffer back: the free list holds what it held when the run began but rx's
    spares, each once, and the daemon's table marks none."""
    handles, broken = free_list(rr.chip)
    spares = rx_spares(rr.chip, rr.image)
    assert not broken and spares is not None and initial == SYS.n_bufs
    assert len(handles) + len(spares) == initial and owned_buffers(rr.chip) == []
    assert s["conservation"]["buffers"] == {"total": initial, "free": len(handles), "rx_spares": len(spares),
                                            "control_plane": 0, "leaked": 0}  # fmt: skip


def test_restarted_daemon_gives_back_the_buffers_its_predecessor_held() -> None:
    """The run of the test above: the packet held for ARP when the daemon is killed at
    1 ms is dropped (control_killed), and its buffer is not lost with the daemon: while
    it is down the daemon's table in SRAM marks it, and the daemon started at 2 ms gives
    it back to the free list (buffers_reclaimed: one a packet dropped as control_killed)."""
    from .test_control_plane import EXAMPLES

    tr = load_traffic_source(EXAMPLES / "errors.yaml", 3_000_000)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": 1_000_000, "restart_at_ns": 2_000_000})
    initial = rr.chip.read32("sram", SYS.freelist_q + 8)
    rr.run_traffic(1_500_000)
    down = owned_buffers(rr.chip)                       # the daemon killed, not yet started again
    rr.run_traffic(1_500_000)
    rr.drain()
    s = rr.summary()
    killed = s["totals"]["dropped"].get(KILLED, 0)
    assert killed >= 1 and down is not None and len(down) == killed
    assert s["control_plane"]["buffers_reclaimed"] == killed
    assert not account(s), account(s)
    _buffers_at_the_end(rr, s, initial)
    assert set(down) <= set(free_list(rr.chip)[0])


def test_a_packet_the_daemon_had_half_handled_when_killed_is_a_counted_drop() -> None:
    """The daemon comes up ~110 us into errors.yaml with exceptions waiting in the ring,
    takes them, and is killed at 0.1 ms with one taken but not yet logged: its buffer
    marked as the daemon's own, no record naming it.  That packet is dropped
    (control_killed: lost_half_handled), found by its buffer's frame the instant the
    daemon dies, and the daemon started at 0.2 ms gives its buffer back; before, it had
    no fate ("1 packets in flight at the end: stuck") and the run failed."""
    from .test_control_plane import EXAMPLES

    tr = load_traffic_source(EXAMPLES / "errors.yaml", 400_000)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": 100_000, "restart_at_ns": 200_000})
    initial = rr.chip.read32("sram", SYS.freelist_q + 8)
    rr.run_traffic(400_000)
    rr.drain()
    s = rr.summary()
    assert not account(s), account(s)
    half = s["control_plane"]["lost_half_handled"]
    assert half >= 1 and s["totals"]["dropped"].get(KILLED, 0) == half
    assert s["control_plane"]["buffers_reclaimed"] == half
    _buffers_at_the_end(rr, s, initial)


def test_restart_gives_back_held_packets_and_own_frames() -> None:
    """Crafted: five datagrams to a host on port 1's subnet nobody answers ARP for, and an
    echo request from it (the router's reply waits for the same ARP), the daemon killed
    while they wait and started again: the five are control_killed drops, the reply never
    leaves, and the new daemon gives back all six buffers."""
    frames = [(0, v4(0, HOST, UNKNOWN, UDP(1000, 2000 + k), b"u" * 18)) for k in range(5)]
    frames.append((1, echo_request(1, ip("10.0.1.1"), src=UNKNOWN, src_mac=UNKNOWN_MAC)))
    tr = traffic(frames)
    # killed between the daemon's second and third ARP request (arp_retry_us 200 apart)
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": START_NS + 300_000,
                                                      "restart_at_ns": START_NS + 500_000})  # fmt: skip
    initial = rr.chip.read32("sram", SYS.freelist_q + 8)
    rr.run_traffic(START_NS + 400_000)
    down = owned_buffers(rr.chip)                       # the daemon killed, not yet started again
    rr.run_traffic(1_200_000 - START_NS - 400_000)
    rr.drain()
    s = rr.summary()
    assert [e["event"] for e in s["control_plane"]["restarts"]] == ["killed", "restarted"]
    assert s["totals"]["dropped"].get(KILLED, 0) == 5 and s["control_plane"]["icmp_sent"]["echo_reply"] == 0
    assert down is not None and len(down) == s["control_plane"]["buffers_reclaimed"] == 6
    assert not account(s), account(s)
    _buffers_at_the_end(rr, s, initial)
    assert set(down) <= set(free_list(rr.chip)[0])


def test_restarted_daemons_get_back_the_route_pool() -> None:
    """Route churn in three /16s of 20/8 (a /24 or /25 of each added via 10.0.1.2 and
    withdrawn in turn, a change every 100 us) with the daemon killed and started again
    twice: each new daemon finds the trie's pool units its predecessor had free or in
    limbo (LAYOUT.md §7 rule 7, at its first change a grace period after it started) and
    counts them (lpm_units_recovered); packets to the churned prefixes all along leave by
    the table before or after each change, and the verdict is ok."""
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.spec import parse_route_change
    from npkit.toolchain.system.verdict import Policy, judge

    from .test_control_plane import EXAMPLES

    down = [(1_500_000, 1_800_000), (4_000_000, 4_300_000)]     # killed, started again (ns)
    prefixes = ["20.1.2.0/24", "20.2.3.0/24", "20.3.4.0/25"]
    changes: list[str] = []
    for t in range(600_000, 6_000_000, 100_000):
        if not any(kill - 100_000 <= t <= start + 500_000 for kill, start in down):   # (while it reloads)
            p = prefixes[len(changes) % 3]
            changes.append(f"at {t}ns " + (f"add {p} via 10.0.1.2" if len(changes) // 3 % 2 == 0 else f"del {p}"))
    router = RouterConfig.load(EXAMPLES / "router.yaml")
    tr = Traffic(route_changes=[parse_route_change(c, router) for c in changes])
    for k, t in enumerate(range(START_NS, 6_200_000, 25_000)):
        dst = ip(["20.1.2.9", "20.2.3.9", "20.3.4.9"][k % 3])
        tr.add(t, 0, v4(0, HOST, dst, UDP(1000, 2000 + k % 50), b"p" * 18))
    rr = RouterRun.link("pipelined", {}, tr, control={"kill_at_ns": down[0][0], "restart_at_ns": down[0][1]})
    rr.run_traffic(3_900_000)
    first = rr.control.stats()["counters"]["lpm_units_recovered"]
    system = rr.control.system                          # the second kill and start: the
    assert system.kill_at is None and system.restart_at is None   # System's next pair
    mhz = float(rr.chip.config["clock_mhz"])
    system.kill_at, system.restart_at = (int(ns * mhz // 1000) for ns in down[1])
    rr.run_traffic(6_300_000 - 3_900_000)
    rr.drain()
    s = rr.summary()
    cp = s["control_plane"]
    assert [e["event"] for e in cp["restarts"]] == ["killed", "restarted"] * 2 and cp["starts"] == 3
    assert 0 < first < cp["route_pool_units_recovered"] == cp["counters"]["lpm_units_recovered"]
    assert cp["counters"]["timed_changes"] == len(changes) and cp["counters"]["route_errors"] == 0
    assert s["totals"]["forwarded"] == len(tr) and not account(s), account(s)
    assert judge(s, Policy())["ok"]


def slow_control_ring_layout() -> dict[str, Any]:
    """The pipelined layout with the smallest control ring (128 longwords: 64 messages)
    and a queue manager that polls it as seldom as its timer allows (255 x 16 cycles,
    ~3 us a message): the daemon's frames outrun it, so its send backlog fills."""
    import yaml

    from npkit.toolchain.system.paths import LAYOUTS

    lay = yaml.safe_load((LAYOUTS / "pipelined.yaml").read_text())
    lay["rings"]["cp_to_qm"]["size"] = 128
    lay["blocks"]["qm"]["defines"] = {"QM_POLL_TICKS": 255}
    return dict(lay)


def arp_reply(port: int, sender: int, sender_mac: bytes) -> bytes:
    return arp_frame(Ethernet(ROUTER_MAC[port], sender_mac, 0x0806),
                     ARP(2, sender_mac, sender, ROUTER_MAC[port], ip(f"10.0.{port}.1")))  # fmt: skip


def test_kill_with_a_full_send_backlog_accounts_for_every_packet() -> None:
    """140 datagrams to a host on port 1's subnet held for ARP, then ten echo requests
    from it (the router's replies wait for the same ARP), then its ARP reply: the daemon
    releases all 150 in one go, faster than the queue manager (polled slowly here) takes
    them off the control ring, and is killed when it has done so -- with messages still
    in its send backlog.  The run reads the backlog the instant the daemon dies (its record
    in SRAM): the datagrams there are control_killed drops, the replies there are
    expected no more, the restarted daemon counts both (killed_backlog_forwarded,
    killed_backlog_own) and gives their buffers back; everything else leaves.  Nothing
    is lost, unmatched or leaked."""
    tr = Traffic()
    t = START_NS
    for k in range(150):
        if k < 140:
            tr.add(t, 0, v4(0, HOST, UNKNOWN, UDP(1000, 2000 + k), b"u" * 18))
        else:
            tr.add(t, 1, echo_request(1, ip("10.0.1.1"), src=UNKNOWN, src_mac=UNKNOWN_MAC, echo_id=k))
        t += 2_000
    reply_at = t + 20_000
    tr.add(reply_at, 1, arp_reply(1, UNKNOWN, UNKNOWN_MAC))
    # killed at the first system call after the reply was handled: the end of the turn
    # of the daemon's loop that releases the 150 (some 200 us)
    rr = RouterRun.link(slow_control_ring_layout(), {}, tr, record=True,
                        control={"kill_at_ns": reply_at + 30_000, "restart_at_ns": reply_at + 330_000,
                                 "options": {"arp_hold": 200}})  # fmt: skip
    initial = rr.chip.read32("sram", SYS.freelist_q + 8)
    rr.run_traffic(reply_at + 1_500_000)
    rr.drain()
    s = rr.summary()
    cp = s["control_plane"]
    lost = cp["lost_in_send_backlog"]
    assert [e["event"] for e in cp["restarts"]] == ["killed", "restarted"]
    assert cp["counters"]["tx_backlog_max"] > 0 and lost["forwarded_packets"] > 0 and lost["own_frames"] > 0
    assert cp["killed_in_send_backlog"] == lost                     # the daemon's count, the run's
    assert s["totals"]["dropped"] == {KILLED: lost["forwarded_packets"]}
    assert s["totals"]["forwarded"] == 140 - lost["forwarded_packets"]
    replies = [d for _p, d in generated(rr) if is_echo_reply(d)]
    assert len(replies) == 10 - lost["own_frames"] and cp["icmp_sent"]["echo_reply"] == 10
    assert cp["buffers_reclaimed"] == lost["forwarded_packets"] + lost["own_frames"]
    assert not account(s), account(s)
    _buffers_at_the_end(rr, s, initial)


@pytest.fixture(scope="module")
def retry_instants() -> dict[str, int]:
    """When the daemon began resolving UNKNOWN for a datagram arriving at START_NS (its
    ARP record): its retries are due at that + k x arp_retry_us, some microseconds after
    the arrival-based instants (it handles the packet that much later)."""
    from npkit.toolchain.system.control import arp_record

    rr = RouterRun.link("pipelined", {}, traffic([(0, v4(0, HOST, UNKNOWN, UDP(1000, 2000), b"u" * 18))]))
    rr.run_traffic(START_NS + 50_000)
    start = arp_record(rr.chip)[UNKNOWN].start_ns
    assert START_NS < start < START_NS + 50_000
    return {"daemon": start + 200_000, "arrival": START_NS + 200_000, "daemon_second": start + 400_000,
            "daemon_gives_up": start + 600_000}  # fmt: skip


BROADCAST = _ipv4_frame(Ethernet(b"\xff" * 6, _mac("02:00:0a:00:00:02"), 0x0800), IPv4(HOST, ip("10.0.0.255"), 17),
                        UDP(1, 2), b"b" * 18)  # fmt: skip


@pytest.mark.parametrize(("instant", "offset_ns", "requests"), [
    ("daemon", 0, 1),              # its first retry's instant: asleep until then, killed first
    ("arrival", 0, 1),             # the instant the retry would be due from the arrival
    ("daemon_second", 0, 2),       # its second retry's: the first was sent
    ("daemon_gives_up", 0, 3),     # when it would give up (Host Unreachable): killed first
    ("daemon", 100, 1),            # 100 ns after, still asleep -- and the model, which met a
])                                 # packet in between, had made the retry: taken back
def test_kill_at_the_instant_of_an_arp_retry(retry_instants: dict[str, int], instant: str, offset_ns: int,
                                            requests: int) -> None:  # fmt: skip
    """A datagram held for ARP, the daemon killed exactly when an ARP retry (or the
    give-up after the last) is due, or a hair after: the emulated daemon sleeps in ppoll to a deadline at or after its retry
    time and the kill is taken at that system call, so at equal times the kill comes
    first.  The model does the retries the daemon's ARP record (read the instant it
    died) says it made, no more: the requests on the wire are those it expects, and the
    datagram is a control_killed drop.  (With offset 100 ns a broadcast arrives 20 ns
    after the retry instant: the model, brought to that arrival before it learns of the
    kill, sends the retry, and takes it back at the kill.)"""
    kill = retry_instants[instant] + offset_ns
    frames = [(0, v4(0, HOST, UNKNOWN, UDP(1000, 2000), b"u" * 18))]
    timed = ((retry_instants[instant] + 20, 0, BROADCAST),) if offset_ns else ()
    rr, s = run(frames, 1_400_000, control={"kill_at_ns": kill, "restart_at_ns": kill + 200_000}, timed=timed)
    arp_requests = [d for _p, d in generated(rr) if d[12:14] == b"\x08\x06"]
    assert len(arp_requests) == requests == s["control_plane"]["arp_requests_sent"]
    assert s["totals"]["dropped"] == {KILLED: 1}
    assert not account(s), account(s)


# ---- echo requests with IP options: what comes back (RFC 1122 3.2.2.6, RFC 1812 4.3.3.6) --------


def a4(text: str) -> bytes:
    return ip(text).to_bytes(4, "big")


ME = ip("10.0.1.1")  # the address asked (port 1); replies to HOST leave by port 0 (10.0.0.1)
STAMP = b"\xff\xff\xff\xff"  # (in the expected options: a timestamp of the control plane's clock)
# name: (request's options, expected reply's options or None (no reply), reply's IP destination, port)
ECHO: dict[str, tuple[bytes, bytes | None, int, int]] = {
    "rr": (bytes([7, 11, 4]) + bytes(8), bytes([7, 11, 8]) + a4("10.0.0.1") + bytes(5), HOST, 0),
    "rr_full": (bytes([7, 7, 8]) + a4("1.2.3.4"), bytes([7, 7, 8]) + a4("1.2.3.4") + bytes(1), HOST, 0),
    "ts0": (bytes([68, 12, 5, 0]) + bytes(8), bytes([68, 12, 9, 0]) + STAMP + bytes(4), HOST, 0),
    "ts0_full": (bytes([68, 8, 9, 0x20]) + a4("0.0.0.9"), bytes([68, 8, 9, 0x30]) + a4("0.0.0.9"), HOST, 0),
    "ts1": (bytes([68, 12, 5, 1]) + bytes(8), bytes([68, 12, 13, 1]) + a4("10.0.0.1") + STAMP, HOST, 0),
    "ts1_full": (bytes([68, 12, 13, 1]) + a4("9.9.9.9") + bytes(4),
                 bytes([68, 12, 13, 0x11]) + a4("9.9.9.9") + bytes(4), HOST, 0),
    # prespecified: the address asked is the router's (not the interface the reply leaves by)
    "ts3": (bytes([68, 12, 5, 3]) + a4("10.0.1.1") + bytes(4), bytes([68, 12, 13, 3]) + a4("10.0.1.1") + STAMP,
            HOST, 0),
    "ts3_other": (bytes([68, 12, 5, 3]) + a4("10.0.9.9") + bytes(4),
                  bytes([68, 12, 5, 3]) + a4("10.0.9.9") + bytes(4), HOST, 0),
    "ts3_full": (bytes([68, 12, 13, 3]) + a4("10.0.1.1") + a4("0.0.0.5"),
                 bytes([68, 12, 13, 0x13]) + a4("10.0.1.1") + a4("0.0.0.5"), HOST, 0),
    # HOST -> 1.2.3.1 -> 10.0.1.2 -> us: back to 10.0.1.2 (port 1) carrying {1.2.3.1, HOST}
    "lsrr": (bytes([131, 11, 12]) + a4("1.2.3.1") + a4("10.0.1.2"),
             bytes([131, 11, 4]) + a4("1.2.3.1") + HOST.to_bytes(4, "big") + bytes(1), ip("10.0.1.2"), 1),
    "ssrr": (bytes([137, 7, 8]) + a4("10.0.2.2"), bytes([137, 7, 4]) + HOST.to_bytes(4, "big") + bytes(1),
             ip("10.0.2.2"), 2),
    "ssrr_far": (bytes([137, 7, 8]) + a4("1.2.3.1"), None, 0, 0),   # 1.2.3.1 is not on-link: no strict way back
    # the source named first (RFC 1122 3.2.1.8 case B): HOST once on the way back
    "case_b": (bytes([131, 11, 12]) + HOST.to_bytes(4, "big") + a4("10.0.1.2"),
               bytes([131, 7, 4]) + HOST.to_bytes(4, "big") + bytes(1), ip("10.0.1.2"), 1),
    # all together, with a NOP and a router alert (not returned): route, RR, TS in that order
    "all": (bytes([1, 148, 4, 0, 0, 7, 7, 4]) + bytes(4) + bytes([68, 8, 5, 0]) + bytes(4)
            + bytes([131, 7, 8]) + a4("10.0.3.2"),
            bytes([131, 7, 4]) + HOST.to_bytes(4, "big") + bytes([7, 7, 8]) + a4("10.0.3.1")
            + bytes([68, 8, 9, 0]) + STAMP + bytes(2), ip("10.0.3.2"), 3),
}  # fmt: skip
ECHO_FRAMES = {name: (1, echo_request(1, ME, opts, echo_id=100 + k)) for k, (name, (opts, *_)) in enumerate(ECHO.items())}
ECHO_FRAMES["bad"] = (1, echo_request(1, ME, bytes([7, 2, 0, 0]), echo_id=99))   # RR of length 2
# a loose source route to us whose next address is ours too, then FAR: not for us -- on to FAR
ECHO_FRAMES["via_us"] = (1, echo_request(1, ME, bytes([131, 11, 4]) + a4("10.0.2.1") + FAR.to_bytes(4, "big"),
                                         echo_id=98))  # fmt: skip
# ... whose last address is ours too: that hop made, the route is used up -- answered from
# 10.0.2.1, back by 10.0.1.2 (the hop to itself is no hop back)
ECHO_FRAMES["to_us"] = (1, echo_request(1, ME, bytes([131, 11, 8]) + a4("10.0.1.2") + a4("10.0.2.1"), echo_id=96))
STAMP_MS = (80_000_000, 80_000_000 + 20)  # epoch_s 1700000000: 80,000 s after midnight UT; the run's first ms
# a timestamp request that arrives 1 us before the end of the run's first ms: the model stamps
# the arrival's ms, npkd the next one (it handles the request a few us later)
LATE = (999_000, 1, echo_request(1, ME, bytes([68, 8, 5, 0]) + bytes(4), echo_id=97))


@pytest.fixture(scope="module")
def echo_run() -> dict[str, Any]:
    rr, s = run(list(ECHO_FRAMES.values()), 2_000_000, timed=(LATE,))
    assert rr.run.out is not None
    return {"rr": rr, "s": s, "frames": generated(rr),
            "out": [(p, d) for p, f in rr.run.out.items() for _t, d in f]}  # fmt: skip


def _reply(frames: list[tuple[int, bytes]], echo_id: int) -> list[tuple[int, bytes]]:
    return [(p, d) for p, d in frames if is_echo_reply(d) and d[14 + 4 * (d[14] & 0xF) + 4 :][:2] == struct.pack("!H", echo_id)]


def _same_but_stamps(got: bytes, want: bytes) -> bool:
    """The options `got` are `want` with each STAMP a timestamp of the run's first ms."""
    for k in range(0, len(want), 1):
        if want[k : k + 4] == STAMP:
            t = int.from_bytes(got[k : k + 4], "big")
            return STAMP_MS[0] <= t < STAMP_MS[1] and _same_but_stamps(got[k + 4 :], want[k + 4 :]) \
                and got[:k] == want[:k]  # fmt: skip
    return got == want


@pytest.mark.parametrize("name", list(ECHO))
def test_echo_reply_returns_the_options(echo_run: dict[str, Any], name: str) -> None:
    """RFC 1122 3.2.2.6 / RFC 1812 4.3.3.6, npkd's frames field by field: a source route
    the request used up comes back reversed (same type, pointer 4) and the reply goes to
    its first hop (a strict one only if on-link); Record Route gets the address of the
    interface the reply leaves by, Timestamp this router's time (with it for flag 1; for
    flag 3 when the next address named is any of the router's), full ones unchanged but
    for the timestamp overflow count; nothing else comes back."""
    opts, want, to, port = ECHO[name]
    got = _reply(echo_run["frames"], 100 + list(ECHO).index(name))
    if want is None:
        assert not got
        return
    assert len(got) == 1, (name, echo_run["frames"])
    p, d = got[0]
    h, msg = icmp_of(d)
    neighbour = _mac(f"02:00:0a:00:0{port}:02")
    assert p == port and d[0:6] == neighbour and d[6:12] == ROUTER_MAC[port], name
    assert h.src == ME and h.dst == to and h.header_len == 20 + len(want) and h.identification == 0x1234 and h.ttl == 64
    assert _same_but_stamps(d[34 : 14 + h.header_len], want), (name, d[34 : 14 + h.header_len].hex(), want.hex())
    assert msg[0:2] == b"\x00\x00" and msg[8:] == ECHO_DATA


def test_malformed_and_unfinished_routes_as_when_forwarding(echo_run: dict[str, Any]) -> None:
    """A malformed option in an echo request to the router: Parameter Problem pointing at
    it (as for a datagram to forward), no reply.  A source route to the router whose next
    address is the router's too is not finished there: the router makes that hop itself
    and forwards the request on to FAR, recording the address it leaves by; if that was
    the route's last address, the request is for the router at it."""
    frames = echo_run["frames"]
    to_us = _reply(frames, 96)
    assert len(to_us) == 1 and to_us[0][0] == 1
    h, _msg = icmp_of(to_us[0][1])
    assert h.src == ip("10.0.2.1") and h.dst == ip("10.0.1.2")
    assert to_us[0][1][34:42] == bytes([131, 7, 4]) + HOST.to_bytes(4, "big") + bytes(1)
    assert not _reply(frames, 99) and not _reply(frames, 98)
    problems = [(p, d) for p, d in frames if d[12:14] == b"\x08\x00" and d[34] == 12]
    assert len(problems) == 1
    p, d = problems[0]
    h, msg = icmp_of(d)
    assert p == 0 and h.src == ip("10.0.0.1") and h.dst == HOST and msg[4] == 21
    assert msg[8:] == ECHO_FRAMES["bad"][1][14:]
    fwd = [(p, d) for p, d in echo_run["out"] if d[30:34] == FAR.to_bytes(4, "big")]
    assert len(fwd) == 1 and fwd[0][0] == 0 and fwd[0][1][22] == 63
    assert fwd[0][1][34:45] == bytes([131, 11, 12]) + a4("10.0.2.1") + a4("10.0.0.1")


def test_echo_run_npkd_and_model_agree(echo_run: dict[str, Any]) -> None:
    """The oracle's model (emulator/traffic/control.py) predicts every one of npkd's frames
    byte for byte, the forwarded one too, but for IP timestamps, which npkd writes with
    its clock when it handles the request: the late one's is the next ms, still matched
    (control_run: same_but_timestamps); the run accounts for every packet; the strict
    route that cannot be followed back is counted as no route back."""
    s = echo_run["s"]
    assert not account(s), account(s)
    late = _reply(echo_run["frames"], 97)
    assert len(late) == 1 and int.from_bytes(late[0][1][38:42], "big") == STAMP_MS[0] + 1
    replies = len(ECHO) - 1 + 2   # ssrr_far: none; LATE and to_us
    assert s["comparison"]["matched_control"] == len(echo_run["frames"]) == replies + 1
    assert s["comparison"]["matched_forward"] == 1
    cp = s["control_plane"]
    assert cp["icmp_sent"]["echo_reply"] == replies and cp["icmp_not_sent_no_route_back"] == 1
