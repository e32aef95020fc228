"""The control socket's limits (xscale/npkd/ctl.h, README.md "The control socket"):
a client that never reads, idle connections, over-long lines, bad addresses, routes the
rules refuse, and the socket file's mode -- against the daemon running on the emulated
XScale (and the socket's mode on the gpe placement too)."""

from __future__ import annotations

import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from unicorn import UC_HOOK_CODE

from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.routes import Route, change_problem, route_problem
from npkit.toolchain.system.control import ControlSocketError, control_request
from npkit.toolchain.system.router_run import RouterRun

from .test_control_plane import EXAMPLES, traffic_of

SLICE_NS = 20_000


def _start(sock: Path, options: dict[str, int] | None = None, placement: str | None = None,
           spec: dict[str, Any] | None = None) -> RouterRun:  # fmt: skip
    """The pipelined router with a control socket, its daemon up with its route model."""
    tr = traffic_of(spec or {"duration_ns": 100_000, "defaults": {"size": 100, "load": 0.1}})
    control: dict[str, Any] = {"socket": str(sock), "options": options or {}}
    if placement:
        control["placement"] = placement
    rr = RouterRun.link("pipelined", {}, tr, control=control)
    _run_until(rr, lambda: (st := rr.control.stats()) is not None and st["state"] == "ready", 5_000_000)
    return rr


def _run_until(rr: RouterRun, done: Callable[[], bool], limit_ns: int) -> None:
    end = rr.run.now_ns + limit_ns
    while not done() and rr.run.now_ns < end:
        rr.run.run(SLICE_NS)
    assert done(), f"not reached within {limit_ns} ns"


def _client(rr: RouterRun, fn: Callable[[], Any], limit_ns: int = 30_000_000) -> Any:
    """fn() in a thread while the emulator runs; its result (or the exception it raised)."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except (OSError, ControlSocketError) as e:
            out["value"] = e

    th = threading.Thread(target=body, daemon=True)
    th.start()
    _run_until(rr, lambda: not th.is_alive(), limit_ns)
    th.join(1)
    return out["value"]


def _raw(sock: Path, data: bytes, answers: int) -> list[list[str]]:
    """Send raw bytes on one connection; read `answers` answers (each up to its ok/error line)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(sock))
        s.sendall(data)
        got: list[list[str]] = []
        buf, cur = b"", []
        while len(got) < answers:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf and len(got) < answers:
                line, buf = buf.split(b"\n", 1)
                cur.append(line.decode(errors="replace"))
                if line == b"ok" or line.startswith(b"error:") or line.startswith(b"ok "):
                    got.append(cur)
                    cur = []
        return got


def _error(sock: Path, command: str) -> ControlSocketError | list[str]:
    try:
        return control_request(sock, command, timeout_s=60)
    except ControlSocketError as e:
        return e


def _stats(sock: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in control_request(sock, "stats", timeout_s=60))


@pytest.fixture(scope="module", params=["xscale", "gpe"])
def router(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """One router a placement: the same socket code runs on the emulated XScale and natively."""
    sock = tmp_path_factory.mktemp("sock") / "npkd.sock"
    rr = _start(sock, placement=request.param)
    yield rr, sock
    rr.close()


def test_an_over_long_lines_tail_is_not_a_command(router: Any) -> None:
    """511 bytes and `stats`: one "line too long", the tail discarded to its newline; the
    next line is a command again."""
    rr, sock = router
    answers = _client(rr, lambda: _raw(sock, b"X" * 511 + b"stats\narp\n", 2))
    assert answers[0] == ["error: line too long (at most 510 bytes)"], answers
    assert answers[1] == ["ok"] or all(" port " in line for line in answers[1][:-1]), answers   # `arp`, not stats
    assert not any(line.startswith("state ") for a in answers for line in a), answers


def test_show_of_a_bad_address_is_an_error(router: Any) -> None:
    rr, sock = router
    answers = _client(rr, lambda: _raw(sock, b"show 300.1.1.1\nshow\x00 1.2.3.4\nshow 1.2.3.4 x\n", 3))
    assert answers == [["error: cannot read the address '300.1.1.1' (show [A.B.C.D])"],
                       ["error: the command has a NUL byte"],
                       ["error: cannot read the address '1.2.3.4 x' (show [A.B.C.D])"]], answers  # fmt: skip
    ok = _client(rr, lambda: control_request(sock, "show 1.2.3.4"))
    assert ok[0].startswith("1.2.3.0/24 via 10.0.2.2 port 2"), ok


def _router_ports() -> list[tuple[int, int]]:
    cfg = RouterConfig.load(EXAMPLES / "router.yaml")
    return [(p.address, p.prefix_len) for p in cfg.ports]


REFUSED = {  # what issue 48 added over the socket, and the route each stands for (port as npkd picks it)
    "10.0.0.1/32 via 10.0.0.2": Route(0x0A000001, 32, 0x0A000002, 0),
    "10.0.1.0/24 via 10.0.0.2": Route(0x0A000100, 24, 0x0A000002, 0),
    "127.0.0.0/8 via 10.0.0.2": Route(0x7F000000, 8, 0x0A000002, 0),
    "224.0.0.0/4 via 10.0.0.2": Route(0xE0000000, 4, 0x0A000002, 0),
    "1.2.3.0/24 via 10.0.0.1": Route(0x01020300, 24, 0x0A000001, 0),
    "255.255.255.255/32 via 10.0.0.2": Route(0xFFFFFFFF, 32, 0x0A000002, 0),
    "5.6.7.0/24 via 10.0.0.255": Route(0x05060700, 24, 0x0A0000FF, 0),
}


def test_the_socket_refuses_what_the_rules_refuse_with_their_messages(router: Any) -> None:
    """Each route the router-config rules refuse is refused by `add` with the message the
    Python rules give (routes.route_problem), and changes nothing; a good one is added."""
    rr, sock = router
    ports = _router_ports()
    before = _client(rr, lambda: control_request(sock, "show"))

    def adds() -> list[str]:
        out = []
        for text in [*REFUSED, "40.0.0.0/8 via 10.0.0.2"]:
            try:
                out.append("ok" if control_request(sock, f"add {text}") == [] else "?")
            except ControlSocketError as e:
                out.append(str(e))
        return out

    got = _client(rr, adds)
    want = [route_problem(ports, r) for r in REFUSED.values()]
    short = _client(rr, lambda: [str(_error(sock, c)) for c in ("add 0.0.0.0/0 via 10.0.0.2", "del 0.0.0.0/0")])
    assert short == [change_problem(0, 0)] * 2, short
    assert all(want) and got[:-1] == want, list(zip(got, want, strict=False))
    assert got[-1] == "ok"
    after = _client(rr, lambda: control_request(sock, "show"))
    assert sorted(after) == sorted([*before, *(line for line in after if line.startswith("40.0.0.0/8 "))])
    assert len(after) == len(before) + 1


def test_four_idle_connections_do_not_lock_the_operator_out(router: Any) -> None:
    """Four connections that say nothing, then `stats`: answered (the one idle the longest
    made room, counted), not "too many connections"."""
    rr, sock = router
    idle = []
    try:
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(sock))
            idle.append(s)
        rr.run.run(200_000)                        # the daemon has accepted them
        st = _client(rr, lambda: _stats(sock))
        assert isinstance(st, dict), st
        assert int(st["control_evicted"]) >= 1 and st["state"] == "ready"
    finally:
        for s in idle:
            s.close()


def test_a_client_that_never_reads_holds_up_neither_exceptions_nor_others(tmp_path: Path) -> None:
    """200 `show` lines from a client that never reads its answers, under traffic with
    exceptions (errors.yaml): the daemon runs one command a turn of its loop, makes a
    long answer one step a turn once the step before has been sent, stops reading that
    client while an answer waits, answers another client's `stats`, and the run is
    clean (before: one turn ran all 200, the exception ring overflowed, packets stuck)."""
    from npkit.emulator.traffic.source import load_traffic_source

    sock = tmp_path / "npkd.sock"
    dur = 2_000_000
    tr = load_traffic_source(EXAMPLES / "errors.yaml", dur)
    rr = RouterRun.link("pipelined", {}, tr, control={"socket": str(sock)})
    rr.run.run(500_000)
    core = rr.control.system.xscale.core
    counts = {"turn": 0, "max": 0}

    def on_poll(*_: Any) -> None:
        counts["turn"] = 0

    def on_handle(*_: Any) -> None:
        counts["turn"] += 1
        counts["max"] = max(counts["max"], counts["turn"])

    for name, fn in (("cp_poll", on_poll), ("handle", on_handle)):
        addr = core.elf.symbol(name)
        assert addr is not None, name
        core.uc.hook_add(UC_HOOK_CODE, fn, None, addr, addr)
        core.uc.ctl_remove_cache(addr, addr + 4)
    rude = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        rude.connect(str(sock))
        rude.setblocking(False)
        sent = sum(1 for _ in range(200) if rude.send(b"show\n"))
        rr.run_traffic(dur)
        st = _client(rr, lambda: _stats(sock))
        assert isinstance(st, dict), st
        assert counts["max"] == 1, counts
        assert sent == 200 and int(st["control_requests"]) < 20, (sent, st["control_requests"])
        rr.drain()
        s = rr.summary()
        c = s["comparison"]
        assert c["matched_exception"] > 100 and s["conservation"]["balanced"], (c, s["conservation"])
        bad = {k: c.get(k, 0) for k in ("unmatched", "duplicates", "unexpected_control", "missing_control",
                                        "wrong_bytes", "wrong_port")}  # fmt: skip
        assert not any(bad.values()), bad
    finally:
        rude.close()
        rr.close()


@pytest.mark.parametrize("placement", ["xscale", "gpe"])
def test_idle_connections_time_out(tmp_path: Path, placement: str) -> None:
    """ctl_idle_us: a connection that says nothing is closed once that long has passed
    (at the daemon's next turn), and counted."""
    sock = tmp_path / "npkd.sock"
    rr = _start(sock, options={"ctl_idle_us": 300}, placement=placement)
    quiet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        quiet.connect(str(sock))
        first = _client(rr, lambda: _stats(sock))           # the daemon has accepted both
        assert isinstance(first, dict) and int(first["control_idle_closed"]) == 0, first
        for _ in range(50):                                # then 1 ms of silence
            rr.run.run(SLICE_NS)
        st = _client(rr, lambda: _stats(sock))
        assert isinstance(st, dict) and int(st["control_idle_closed"]) >= 1, st   # (gpe: the first client's too)
        quiet.settimeout(5)
        assert quiet.recv(100) == b""                      # closed by the daemon
    finally:
        quiet.close()
        rr.close()


@pytest.mark.parametrize("placement", ["xscale", "gpe"])
def test_an_answer_past_the_bound_closes_its_connection(tmp_path: Path, placement: str) -> None:
    """ctl_answer_max 1000: `stats` (some 1,300 bytes) closes its connection before its
    "ok"; short answers, and a whole-table `show` (sent in steps), still come whole."""
    sock = tmp_path / "npkd.sock"
    rr = _start(sock, options={"ctl_answer_max": 1000}, placement=placement)
    try:
        big = _client(rr, lambda: control_request(sock, "stats"))
        assert isinstance(big, ControlSocketError) and "closed the connection" in str(big), big
        one = _client(rr, lambda: control_request(sock, "show 1.2.3.4"))
        assert isinstance(one, list) and one[0].startswith("1.2.3.0/24 via 10.0.2.2 port 2"), one
        table = _client(rr, lambda: control_request(sock, "show"))
        assert isinstance(table, list) and len(table) > 30 and sum(len(x) + 1 for x in table) > 1000, table
        assert len(set(table)) == len(table)                # each route once
    finally:
        rr.close()


@pytest.mark.parametrize("placement", ["xscale", "gpe"])
def test_the_socket_is_the_runners_alone(tmp_path: Path, placement: str) -> None:
    sock = tmp_path / "npkd.sock"
    rr = _start(sock, placement=placement)
    try:
        mode = sock.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600, oct(mode)
        assert sock.stat().st_uid == Path(tmp_path).stat().st_uid
    finally:
        rr.close()
