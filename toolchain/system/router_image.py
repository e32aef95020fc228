"""What a linked router image carries about its router: the router configuration it was
linked with (and whether its route file is still the one it was linked with), and whether
its rx and tx take frames from the MSF.  Used by the run (npkit.toolchain.system.router_run),
the control plane (npkit.toolchain.system.control) and the linker (npkit.toolchain.system.link)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from npkit.asm.base.reading import read_bytes
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.routes import ROUTE_FILE_LIMIT


class RouterImageError(ValueError):
    """A system image the router harness cannot run (no router config, routes changed)."""


_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def routes_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (once per process while the file does not change)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    d = _DIGESTS.get(key)
    if d is None:
        data = read_bytes(p, limit=ROUTE_FILE_LIMIT, error=RouterImageError, what="route file")
        d = _DIGESTS[key] = hashlib.sha256(data).hexdigest()
    return d


def router_config_of(image: Any) -> RouterConfig:
    """The router configuration an image was linked with (`meta["router"]`, written by
    `npk link`): the oracle must see the same ports, ARP table and routes as the
    microcode's tables were built from."""
    meta = image.meta.get("router")
    if not isinstance(meta, dict):
        raise RouterImageError("the image carries no router configuration (not linked by `npk link`?)")
    routes = meta.get("routes")
    if isinstance(routes, str):
        p = Path(routes)
        if not p.exists():
            raise RouterImageError(f"the image was linked with the route file {p}, which is gone")
        if meta.get("routes_sha256") and routes_digest(p) != meta["routes_sha256"]:
            raise RouterImageError(f"the route file {p} changed since the image was linked: link again")
    cfg = {k: v for k, v in meta.items() if k != "routes_sha256"}
    # the config file the image names, when it still says the same (read once per process)
    source = Path(str(image.meta.get("router_config") or ""))
    if source.is_file():
        try:
            loaded = RouterConfig.load(source)
            if isinstance(routes, str) and loaded.route_file is not None and \
                    {**loaded.to_dict(), "routes": str(loaded.route_file.resolve())} == cfg:  # fmt: skip
                return loaded
        except ConfigError:
            pass
    try:
        return RouterConfig.from_dict(cfg, source=Path(str(image.meta.get("router_config") or "<image>")))
    except ConfigError as e:
        raise RouterImageError(f"the image's router configuration: {e}") from None


def check_msf_io(image: Any) -> None:
    """RouterImageError for an image linked with `io=host`: its rx and tx are the host's
    stand-ins (block tests), so frames offered on the MSF would sit there unread and the
    run end "stuck" with every packet in flight."""
    params = image.meta.get("params")
    io = params.get("io", "msf") if isinstance(params, dict) else "msf"
    if io != "msf":
        raise RouterImageError(
            f"the image was linked with io={io} (rx and tx are the host's stand-ins, which take "
            "packet words from the host's rings): traffic enters through the MSF, which needs rx and tx; "
            "link it again without -D io=host"
        )
