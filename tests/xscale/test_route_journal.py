"""The route journal under a SIGKILL (xscale/npkd/cp.c commit_change): a kill is taken at
the daemon's next system call, and the one a route change makes is its journal line's
write(); so a kill that comes while the daemon makes a change lands there.  After the
restart, the daemon's model (what `npk route show` and `route del` answer from) and the
fast path's tables in SRAM (what packets are forwarded by) must agree on that route."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from unicorn import UC_HOOK_CODE

from npkit.toolchain.system.control import ControlSocketError, control_request
from npkit.toolchain.system.router_run import RouterRun

from .test_control_plane import traffic_of

ROUTE = "30.0.0.0/8"
ADDR = "30.1.2.3"
SLICE_NS = 20_000


def _start(sock: Path) -> RouterRun:
    """The pipelined router with a control socket, its daemon up with its route model."""
    tr = traffic_of({"duration_ns": 100_000, "defaults": {"size": 100, "load": 0.1}})
    rr = RouterRun.link("pipelined", {}, tr, control={"socket": str(sock)})
    _run_until(rr, lambda: _ready(rr, 1), 5_000_000)
    return rr


def _ready(rr: RouterRun, starts: int) -> bool:
    st = rr.control.stats()
    return st is not None and st["starts"] == starts and st["state"] == "ready"


def _run_until(rr: RouterRun, done: Any, limit_ns: int) -> None:
    end = rr.run.now_ns + limit_ns
    while not done() and rr.run.now_ns < end:
        rr.run.run(SLICE_NS)
    assert done(), f"not reached within {limit_ns} ns"


def _ask(rr: RouterRun, sock: Path, *commands: str) -> list[list[str] | str]:
    """Commands to the daemon, in order, from a client thread while the emulator runs:
    each answer's lines, or the error's text."""
    out: list[list[str] | str] = []

    def client() -> None:
        for c in commands:
            try:
                out.append(control_request(sock, c, timeout_s=120))
            except ControlSocketError as e:
                out.append(str(e))

    th = threading.Thread(target=client, daemon=True)
    th.start()
    _run_until(rr, lambda: not th.is_alive(), 30_000_000)
    th.join(1)
    return out


def _kill_at_next_journal_write(rr: RouterRun, restart_after_ns: int) -> dict[str, int]:
    """SIGKILL for the daemon as it enters journal_write (npkd.c), as the System's own
    kill does it (xscale/system.py _supervise): pending on the core, taken at its next
    system call -- the journal's write() -- and the daemon started again
    restart_after_ns later.  A test hook on the core, not a product path."""
    system = rr.control.system
    core = system.xscale.core
    addr = core.elf.symbol("journal_write")
    assert addr is not None
    mhz = float(rr.chip.config["clock_mhz"])
    fired: dict[str, int] = {}

    def hit(_uc: Any, _address: int, _size: int, _user: Any) -> None:
        if fired:
            return
        fired["cycle"] = system.clock.now
        core.kill_pending = True
        system.kill_at = system.clock.now
        system.restart_at = system.clock.now + int(restart_after_ns * mhz // 1000)

    core.uc.hook_add(UC_HOOK_CODE, hit, None, addr, addr)
    core.uc.ctl_remove_cache(addr, addr + 4)     # (translated already if a line was written)
    return fired


def _model_and_fast_path(answer: list[str] | str) -> tuple[int, int]:
    """`route show ADDR`: (the next-hop index of the daemon's matching route, 0 if it has
    none; the index the fast path's walk of SRAM gives)."""
    assert isinstance(answer, list), answer
    model = 0
    for line in answer:
        m = re.match(r"\S+/\d+ via \S+ port \d+ index (\d+)", line)
        if m:
            model = int(m.group(1))
    fast = [int(m.group(1)) for line in answer if (m := re.match(r"fast path: index (\d+)", line))]
    assert len(fast) == 1, answer
    return model, fast[0]


def _killed_in_change(tmp_path: Path, before: list[str], change: str) -> tuple[RouterRun, Path, list[Any]]:
    """Run `before`, then `change` with the daemon killed at that change's journal write;
    wait for the restarted daemon to have its route model again."""
    sock = tmp_path / "npkd.sock"
    rr = _start(sock)
    first = _ask(rr, sock, *before) if before else []
    fired = _kill_at_next_journal_write(rr, 200_000)
    cut = _ask(rr, sock, change)
    assert fired, "the change wrote no journal line"
    assert isinstance(cut[0], str) and "closed the connection" in cut[0], cut    # it died answering
    _run_until(rr, lambda: _ready(rr, 2), 10_000_000)
    assert [e for _c, e in rr.control.system.events] == ["killed", "restarted"]
    return rr, sock, first


def test_kill_at_the_journal_write_of_a_route_add(tmp_path: Path) -> None:
    """Killed as it journals `route add 30.0.0.0/8`: after the restart the daemon and the
    fast path agree on 30.1.2.3 (the add happened in neither), and the route can be added
    and deleted again, the fast path following each time."""
    rr, sock, _ = _killed_in_change(tmp_path, [], f"add {ROUTE} via 10.0.3.2")
    show, add, show2, delete, show3 = _ask(rr, sock, f"show {ADDR}", f"add {ROUTE} via 10.0.3.2", f"show {ADDR}",
                                           f"del {ROUTE}", f"show {ADDR}")  # fmt: skip
    model, fast = _model_and_fast_path(show)
    assert model == fast, show
    assert add == [] and delete == [], (add, delete)
    model2, fast2 = _model_and_fast_path(show2)
    assert model2 == fast2 != 0, show2
    assert _model_and_fast_path(show3) == (0, 0), show3
    rr.close()


def test_kill_at_the_journal_write_of_a_route_del(tmp_path: Path) -> None:
    """`route add 30.0.0.0/8`, then killed as it journals `route del 30.0.0.0/8`: after the
    restart the daemon and the fast path agree on 30.1.2.3 (the route is in both: the del
    never happened), and `route del` then takes it out of both."""
    rr, sock, first = _killed_in_change(tmp_path, [f"add {ROUTE} via 10.0.3.2"], f"del {ROUTE}")
    assert first == [[]], first
    show, delete, show2 = _ask(rr, sock, f"show {ADDR}", f"del {ROUTE}", f"show {ADDR}")
    model, fast = _model_and_fast_path(show)
    assert model == fast != 0, show
    assert delete == [], delete
    assert _model_and_fast_path(show2) == (0, 0), show2
    rr.close()


def test_acknowledged_routes_survive_kills_at_random_points_of_an_add_storm(tmp_path: Path,
                                                                           monkeypatch: Any) -> None:  # fmt: skip
    """An add storm over the socket; three times, at a random one of its journal writes,
    the write is cut at a random byte (the line half on disk) and the daemon SIGKILLed
    there.  After each restart: every add the daemon acknowledged is in its model and in
    the fast path; an add cut in its write is in neither (its torn line is dropped, not
    replayed, and cut off before the next line is appended)."""
    import os
    import random
    import time

    from npkit.xscale.linux import HostFile

    sock = tmp_path / "npkd.sock"
    rr = _start(sock)
    journal = str((rr.control.dir / "routes.state").resolve())
    rng = random.Random(48)
    arm = {"left": 3, "writes": 0, "at": rng.randrange(1, 6)}
    write = HostFile.write

    def cut_write(self: HostFile, data: bytes) -> int:
        if arm["left"] and data.startswith(b"add ") and os.readlink(f"/proc/self/fd/{self.fd}") == journal:
            arm["writes"] += 1
            if arm["writes"] == arm["at"]:
                arm.update(left=arm["left"] - 1, writes=0, at=rng.randrange(1, 6))
                system = rr.control.system
                mhz = float(rr.chip.config["clock_mhz"])
                system.xscale.core.kill_pending = True
                system.kill_at = system.clock.now
                system.restart_at = system.clock.now + int(200_000 * mhz // 1000)
                return write(self, data[: rng.randrange(1, len(data))])
        return write(self, data)

    monkeypatch.setattr(HostFile, "write", cut_write)
    acked: list[int] = []
    cut: list[int] = []

    def storm() -> None:
        for k in range(20):
            for _attempt in range(400):
                try:
                    acked.append(k) if control_request(sock, f"add 30.{k}.0.0/16 via 10.0.3.2",
                                                       timeout_s=120) == [] else None  # fmt: skip
                    break
                except ControlSocketError as e:
                    if "closed the connection" in str(e):
                        cut.append(k)
                        break
                    time.sleep(0.02)            # down: wait for the restart

    th = threading.Thread(target=storm, daemon=True)
    th.start()
    _run_until(rr, lambda: not th.is_alive(), 60_000_000)
    assert arm["left"] == 0 and len(cut) == 3 and sorted(acked + cut) == list(range(20)), (arm, acked, cut)
    _run_until(rr, lambda: _ready(rr, 4), 10_000_000)
    answers = _ask(rr, sock, *(f"show 30.{k}.1.1" for k in range(20)))
    for k, answer in enumerate(answers):
        model, fast = _model_and_fast_path(answer)
        assert model == fast, (k, answer)
        assert (model != 0) == (k in acked), (k, answer, acked, cut)
    with open(journal) as f:
        assert all(line.endswith("\n") for line in f), "a torn line was left in the journal"
    rr.close()
