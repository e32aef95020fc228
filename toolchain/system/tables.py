"""Route tables for router runs: random BGP-shaped tables (`npk traffic routes`, the
table `npk demo` and the experiments use) and a copy of the example router config that
names a given table, so that the microcode's lookup, the oracle and the traffic
generator see the same routes.  What is generated is kept in the content cache
(npkit.asm.base.cache), so a second run starts at once."""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path

from npkit.asm.base.yaml_data import load_data

from .paths import DEFAULT_ROUTER

# The demo table's routes for the control plane, as in examples/traffic/routes.txt: the way
# back to the generator's sources (RFC 2544's 198.18.0.0/15: the control plane's ICMP
# errors reach them) and a next hop with no ARP entry (errors.yaml's neighbour 10.0.2.77
# answers for it).  (line, prefix, length)
CONTROL_PLANE_ROUTES = (("198.18.0.0/15 10.0.0.2 0", 0xC6120000, 15), ("44.0.0.0/8 10.0.2.77 2", 0x2C000000, 8))


def random_routes_text(count: int, seed: int, config: Path | None = None, ports: int = 5,
                       lengths: str = "default", extra: tuple[tuple[str, int, int], ...] = ()) -> tuple[str, int]:  # fmt: skip
    """The route file `npk traffic routes` writes, and how many next hops it uses; `extra`
    routes (line, prefix, length) are appended where the random table lacks the prefix."""
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.routes import BGP_LENGTHS, format_routes, random_routes

    if config is not None:
        hops = RouterConfig.load(config).next_hops()
    else:
        hops = [((10 << 24) | (p << 8) | 2, p) for p in range(ports)]
    routes = random_routes(count, seed, hops, BGP_LENGTHS if lengths == "bgp" else None)
    header = (f"random route table: {count} routes, seed {seed}\n"
              f"npk traffic routes --count {count} --seed {seed}"
              + (f" --config {config}" if config else f" --ports {ports}")
              + (f" --lengths {lengths}" if lengths != "default" else ""))  # fmt: skip
    text = format_routes(routes, header)
    if extra:
        taken = set(zip(routes.prefix, routes.length, strict=True))
        text += "\n# the control plane's cases (examples/traffic/routes.txt)\n"
        text += "".join(f"{line}\n" for line, p, n in extra if (p, n) not in taken)
    return text, len(hops)


def demo_routes(count: int, seed: int = 1, router: Path = DEFAULT_ROUTER) -> Path:
    """The demo's random table (`npk traffic routes --count COUNT --seed SEED --config
    ROUTER`, by default examples/traffic/router.yaml), generated once and kept in the
    cache (a temporary file when the cache is off)."""
    from npkit.asm.base.cache import cache_file, cache_put, code_digest, content_key

    key = content_key("routes/2", count, seed, str(router), router.read_bytes(), code_digest())
    hit = cache_file("routes", key)
    if hit is not None:
        return hit
    text = random_routes_text(count, seed, router, extra=CONTROL_PLANE_ROUTES)[0].encode()
    cache_put("routes", key, text)
    return cache_file("routes", key) or _temp_file(text, ".txt")


def router_with_routes(routes: Path, router: Path = DEFAULT_ROUTER) -> Path:
    """The example router (or `router`) with `routes` as its table, kept in the cache by content (a
    temporary file when the cache is off).  The route file is checked first, as `npk
    link --routes` checks it (RouteError `routes:line: ...`), so that its errors name it
    and not the config made here."""
    from npkit.asm.base.cache import cache_file, cache_put, content_key
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.routes import check_route_file, load_route_columns

    ports = [(p.address, p.prefix_len) for p in RouterConfig.load(router).ports]
    check_route_file(ports, load_route_columns(routes), routes)

    resolved = str(Path(routes).resolve())
    key = content_key("router/2", router.read_bytes(), resolved)
    hit = cache_file("router", key)
    if hit is not None:
        return hit
    import yaml

    data = load_data(router.read_text())
    data["routes"] = resolved
    text = yaml.safe_dump(data).encode()
    cache_put("router", key, text)
    return cache_file("router", key) or _temp_file(text, ".yaml")


def _temp_file(data: bytes, suffix: str) -> Path:
    f = tempfile.NamedTemporaryFile(prefix="npk-demo-", suffix=suffix, delete=False)  # noqa: SIM115
    with f:
        f.write(data)
    atexit.register(Path(f.name).unlink, missing_ok=True)
    return Path(f.name)
