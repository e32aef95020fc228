"""The router config (YAML): loading, connected routes, and the checks made on load."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.packet import ip, mac
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig

from .conftest import ROUTER_YAML

BASE = {
    "ports": [{"address": "10.0.0.1/24", "mac": "02:00:00:00:00:00"},
              {"address": "10.0.1.1/24", "mac": "02:00:00:00:00:01"}],
    "arp": {"10.0.1.2": "02:00:00:00:01:02"},
    "routes": ["1.0.0.0/8 10.0.1.2 1"],
}


def test_example_config(config: RouterConfig) -> None:
    assert len(config.ports) == 5
    p2 = config.ports[2]
    assert (p2.address, p2.prefix_len, p2.mac) == (ip("10.0.2.1"), 24, mac("02:4e:50:00:00:02"))
    assert (p2.network, p2.broadcast) == (ip("10.0.2.0"), ip("10.0.2.255"))
    assert config.addresses[ip("10.0.4.1")] == 4
    assert config.route_file == ROUTER_YAML.parent / "routes.txt"
    # connected subnets are routes too, out of their own port, next hop on-link
    r = config.routes.lookup(ip("10.0.3.77"))
    assert r is not None and r.port == 3 and r.direct
    assert (ip("10.0.2.2"), 2) in config.next_hops()


def test_inline_routes_and_round_trip(tmp_path: Path) -> None:
    cfg = RouterConfig.from_dict(BASE)
    assert cfg.routes.lookup(ip("1.2.3.4")).port == 1
    again = RouterConfig.from_dict(cfg.to_dict())
    assert again.to_dict() == cfg.to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ports": [{"address": "10.0.0.1/24", "mac": "03:00:00:00:00:00"}]}, "unicast"),
        ({"ports": [{"address": "10.0.0.0/24", "mac": "02:00:00:00:00:00"}]}, "network or"),
        ({"ports": [{"address": "10.0.0.1/24", "mac": "02:00:00:00:00:00"},
                    {"address": "10.0.0.9/16", "mac": "02:00:00:00:00:01"}]}, "overlaps"),
        ({"ports": [{"address": "10.0.0.1/24", "mac": "02:00:00:00:00:00"},
                    {"address": "10.0.1.1/24", "mac": "02:00:00:00:00:00"}]}, "another port"),
        ({"routes": ["1.0.0.0/8 10.0.1.2 7"]}, "does not exist"),
        ({"routes": ["1.0.0.0/8 10.0.3.2 1"]}, "not on port 1"),
        ({"routes": ["10.0.1.0/24 0.0.0.0 1"]}, "connected"),
        ({"arp": {"10.0.1.2": "01:00:5e:00:00:01"}}, "not unicast"),
        ({"bogus": 1}, "unknown key"),
        ({"ports": [{"address": "10.0.0.1", "mac": "02:00:00:00:00:00"}]}, "prefix"),
    ],
)
def test_bad_configs_are_rejected(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RouterConfig.from_dict({**BASE, **change})


def test_load_reports_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("ports: []\n")
    with pytest.raises(ConfigError, match=str(path)):
        RouterConfig.load(path)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (None, None),
        ("1.0.0.0/8 10.0.1.2 7", "does not exist"),
        ("1.0.0.0/8 10.0.3.2 1", "not on port 1"),
        ("1.0.0.0/8 10.0.1.1 1", "port 1's own address"),
        ("10.0.1.0/24 0.0.0.0 1", "connected"),
        ("10.0.0.255/32 0.0.0.0 0", "broadcast"),
        ("127.1.0.0/16 10.0.1.2 1", "loopback"),
        ("224.0.0.0/4 10.0.1.2 1", "multicast"),
        ("0.0.0.0/8 10.0.1.2 1", "network 0"),
    ],
)
def test_route_file_columns_find_what_the_route_by_route_check_finds(bad: str | None, message: str | None) -> None:
    """A route file's routes come as columns, screened by their distinct values before
    any route is looked at alone: the problems found are those of the routes one by one."""
    from npkit.emulator.traffic.router_schema import route_problems
    from npkit.emulator.traffic.routes import RouteColumns, parse_routes

    good = [f"{20 + i % 100}.{i // 100}.0.0/16 10.0.{i % 2}.{2 + i % 3} {i % 2}" for i in range(400)]  # not 127/8
    routes = parse_routes("\n".join(good[:150] + ([bad] if bad else []) + good[150:]))
    ports = [(ip("10.0.0.1"), 24), (ip("10.0.1.1"), 24)]
    found = list(route_problems(ports, RouteColumns.of(routes)))
    assert found == list(route_problems(ports, routes))
    if message is None:
        assert found == []
    else:
        assert [k for k, _ in found] == [150] and message in found[0][1]
