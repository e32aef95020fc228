"""One set of route rules, two implementations: the Python one (emulator/traffic/routes.py
route_problem: route files, router configs, the traffic spec's route_changes) and the
daemon's (xscale/npkd/rcheck.c: timed changes, `add` on the control socket).  A corpus
of routes goes through both; verdicts and messages must be the same, word for word."""

from __future__ import annotations

import ctypes
import random
from pathlib import Path

import pytest

from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.routes import Route, change_problem, mask, route_problem
from npkit.emulator.traffic.spec import SpecError, parse_route_change

from .test_control_plane import EXAMPLES

LIB_PATH = Path(__file__).resolve().parents[2] / "xscale" / "build" / "libnpkd_rcheck.so"

PORT_SETS = [
    [(0x0A000001, 24), (0x0A000101, 24), (0x0A000201, 24), (0x0A000301, 24), (0x0A000401, 24)],
    [(0xC0A80001, 16), (0x0A0A0A0A, 30), (0x01000001, 8)],
    [(0x0A000005, 29)],
]


def _c_problem(lib: ctypes.CDLL, ports: list[tuple[int, int]], r: Route) -> str | None:
    n = len(ports)
    addr = (ctypes.c_uint32 * max(n, 1))(*(a for a, _ in ports))
    lens = (ctypes.c_uint8 * max(n, 1))(*(b for _, b in ports))
    msg = ctypes.create_string_buffer(200)
    bad = lib.npkd_route_problem(addr, lens, n, ctypes.c_uint32(r.prefix), r.length, ctypes.c_uint32(r.next_hop),
                                 r.port, msg, len(msg))  # fmt: skip
    return msg.value.decode() if bad else None


def _corpus(ports: list[tuple[int, int]], seed: int) -> list[Route]:
    """Routes near every rule's edge: the ports' own addresses, broadcasts, subnets, the
    blocks never forwarded to, next hops on and off the subnets, ports that do not exist."""
    rng = random.Random(seed)
    special = [0, 0xFFFFFFFF, 0x7F000001, 0xE0000001, 0xF0000000, 0x00FFFFFF, 0x80000000, 0x01020304, 0xDFFFFFFF]
    for a, n in ports:
        net = a & mask(n)
        special += [a, net, net | (~mask(n) & 0xFFFFFFFF), a + 1, net - 1 & 0xFFFFFFFF]
    routes = []
    for _ in range(3000):
        length = rng.choice([0, 1, 3, 4, 5, 7, 8, 9, 16, 24, 29, 30, 32, rng.randrange(33)])
        base = rng.choice(special) if rng.random() < 0.6 else rng.getrandbits(32)
        prefix = base & mask(length)
        port = rng.choice([*range(len(ports)), len(ports), -1]) if rng.random() < 0.2 else rng.randrange(len(ports))
        hop = 0 if rng.random() < 0.2 else rng.choice(special) if rng.random() < 0.5 else rng.getrandbits(32)
        if rng.random() < 0.4 and 0 <= port < len(ports):  # on the port's subnet
            a, n = ports[port]
            hop = (a & mask(n)) | (rng.getrandbits(32) & ~mask(n) & 0xFFFFFFFF)
        routes.append(Route(prefix, length, hop, port))
    return routes


@pytest.mark.parametrize("which", range(len(PORT_SETS)))
def test_python_and_the_daemon_give_the_same_verdict_and_message(xscale_built: Path, which: int) -> None:
    lib = ctypes.CDLL(str(LIB_PATH))
    ports = PORT_SETS[which]
    routes = _corpus(ports, which)
    verdicts = [(route_problem(ports, r), _c_problem(lib, ports, r)) for r in routes]
    differ = [(r, py, c) for r, (py, c) in zip(routes, verdicts, strict=True) if py != c]
    assert not differ, differ[:5]
    refused = [py for py, _ in verdicts if py]
    assert 300 < len(refused) < len(routes) - 300            # the corpus has both, plenty of each
    kinds = {"does not exist", "connected subnet", "answers it itself", "never forwards", "is not on port",
             "next hop"}  # fmt: skip
    assert all(any(k in m for m in refused) for k in kinds), {k: sum(k in m for m in refused) for k in kinds}


def test_route_changes_of_a_traffic_spec_meet_the_same_rules() -> None:
    """A timed change the daemon would refuse is refused in the spec, with the rules'
    message (before, `at 1ms add 127.0.0.0/8 via 10.0.0.2` was accepted)."""
    router = RouterConfig.load(EXAMPLES / "router.yaml")
    for text, problem in (("at 1ms add 127.0.0.0/8 via 10.0.0.2", "127.0.0.0/8 lies in 127.0.0.0/8 (loopback)"),
                          ("at 1ms add 10.0.0.1/32 via 10.0.0.2", "10.0.0.1 is port 0's own address"),
                          ("at 1ms add 1.2.3.0/24 via 10.0.0.1", "next hop 10.0.0.1 is port 0's own address")):  # fmt: skip
        with pytest.raises(SpecError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            parse_route_change(text, router)
    assert parse_route_change("at 1ms add 16.0.0.0/4 via 10.0.0.2", router).port == 0


def test_changes_while_running_refuse_the_same_short_prefixes(xscale_built: Path) -> None:
    """A prefix shorter than /4 changed at run time (`npk route add 0.0.0.0/0 ...`: before,
    answered ok after the daemon had spent over 10 ms of the run on it, the exception ring
    overflowing): the same verdict and message from Python and the daemon's rules."""
    lib = ctypes.CDLL(str(LIB_PATH))
    for length in range(33):
        prefix = 0xC0000000 & mask(length)
        msg = ctypes.create_string_buffer(300)
        bad = lib.npkd_change_problem(ctypes.c_uint32(prefix), length, msg, len(msg))
        assert (msg.value.decode() if bad else None) == change_problem(prefix, length), length
        assert bool(bad) == (length < 4)
    router = RouterConfig.load(EXAMPLES / "router.yaml")
    with pytest.raises(SpecError, match="0.0.0.0/0 is shorter than /4"):
        parse_route_change("at 1ms add 0.0.0.0/0 via 10.0.0.2", router)
    with pytest.raises(SpecError, match="128.0.0.0/1 is shorter than /4"):
        parse_route_change("at 1ms del 128.0.0.0/1", router)
