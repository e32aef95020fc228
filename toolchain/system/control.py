"""The router's control plane on the chip's control processor: the layout's `control:`
section, the configuration the daemon (xscale/npkd) reads, and the host's view of it.

A layout names its control plane::

    control:
      placement: xscale            # xscale (the Unicorn XScale) | gpe (a host process) | host
      program: npkd                # a program name (xscale/toolchain.py PROGRAMS), C sources or an ELF
      args: []                     # extra arguments
      ring: cp_to_qm               # the layout ring that carries its frames to the queue manager
      options: {icmp_rate: 200000} # npkd tunables (xscale/npkd/cfg.h NPKD_OPTIONS)

(`xscale: {program: ...}` is read as the same section.)  `host` keeps the Python stand-in
of the exception path (microcode/host/host_sink.uc and the host's reader): block tests.

The daemon's configuration (xscale/npkd/cfg.h) is written when the image is started,
from the router configuration the image was linked with, the system map and the
layout's rings; the statistics block and the exception log it keeps in SRAM are read
here (`read_stats`, `LogReader`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .layout import LinkError
from .sysmap import CP_LOG_BASE, CP_LOG_CAP, CP_STATS_BASE, SYS

PLACEMENTS = ("xscale", "gpe", "host")
STATS_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "stats.h"
CFG_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "cfg.h"
EXIT_RESTART = 75  # npkd's exit status for "restart me" (`npk route restart`)


@dataclass
class ControlSpec:
    placement: str = "xscale"
    program: str = "npkd"
    args: list[str] = field(default_factory=list)
    ring: str | None = None
    options: dict[str, int] = field(default_factory=dict)

    def to_meta(self) -> dict[str, Any]:
        return {"placement": self.placement, "program": self.program, "args": list(self.args),
                "ring": self.ring, "options": dict(self.options)}  # fmt: skip


def option_names() -> list[str]:
    """The daemon's tunables, from xscale/npkd/cfg.h (NPKD_OPTIONS)."""
    return re.findall(r"X\((\w+),", CFG_H.read_text().split("NPKD_OPTIONS(X)", 1)[1].split("typedef", 1)[0])


def stat_names() -> list[str]:
    """The daemon's counters in the order of its statistics block (xscale/npkd/stats.h)."""
    body = STATS_H.read_text().split("NPKD_STATS(X)", 1)[1].split("enum", 1)[0]
    return re.findall(r"X\((\w+)\)", body)


def control_spec(raw: Any, where: str) -> ControlSpec | None:
    """A layout's `control:` (or `xscale:`) mapping, checked; None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LinkError(f"{where}: control: expected a mapping {{placement, program, args, ring, options}}")
    unknown = set(raw) - {"placement", "program", "args", "ring", "options"}
    if unknown:
        raise LinkError(f"{where}: control: unknown keys {', '.join(sorted(unknown))}")
    placement = str(raw.get("placement", "xscale"))
    if placement not in PLACEMENTS:
        raise LinkError(f"{where}: control.placement: {placement!r} is not one of {', '.join(PLACEMENTS)}")
    args = raw.get("args") or []
    if not isinstance(args, list):
        raise LinkError(f"{where}: control.args: a list of strings")
    opts = raw.get("options") or {}
    known = option_names()
    if not isinstance(opts, dict) or any(k not in known for k in opts):
        bad = [k for k in opts if k not in known] if isinstance(opts, dict) else opts
        raise LinkError(f"{where}: control.options: unknown {bad} (known: {', '.join(known)})")
    try:
        options = {str(k): int(v) for k, v in opts.items()}
    except (TypeError, ValueError):
        raise LinkError(f"{where}: control.options: integer values") from None
    return ControlSpec(placement, str(raw.get("program", "npkd")), [str(a) for a in args],
                       None if raw.get("ring") is None else str(raw["ring"]), options)  # fmt: skip


# ---- the daemon's configuration ------------------------------------------------------------


def _ip(a: int) -> str:
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"


def _mac(m: bytes) -> str:
    return ":".join(f"{b:02x}" for b in m)


def daemon_conf(router: Any, routes: str | Path, *, rings: tuple[int, int] = (11, 12),
                options: dict[str, int] | None = None, changes: list[str] | None = None,
                state: str | Path | None = None, socket: str | Path | None = None,
                sram_channel_bytes: int = 8 << 20) -> str:  # fmt: skip
    """npkd's configuration (xscale/npkd/cfg.h) for a RouterConfig and its route file."""
    from npkit.toolchain.router.layout import default_layout

    lay = default_layout()
    node_bytes = min(lay.node_bytes, max(0, sram_channel_bytes - (lay.node_base & 0x3FFFFFFF)))
    lines = ["# npkd configuration (npkit.toolchain.system.control.daemon_conf)"]
    for p in router.ports:
        lines.append(f"port {p.index} {_ip(p.address)} {p.prefix_len} {_mac(p.mac)}")
    for addr, mac in sorted(router.arp.items()):
        lines.append(f"arp {_ip(addr)} {_mac(mac)}")
    lines += [
        f"routes {Path(routes).resolve()}",
        f"redirects {int(bool(router.send_redirects))}",
        f"lpm {lay.ctl_base:#x} {lay.root_base:#x} {lay.nh_base:#x} {lay.nh_capacity} {lay.node_base:#x} {node_bytes:#x}",
        f"sys {SYS.desc_base:#x} {SYS.desc_shift} {SYS.n_bufs} {SYS.buf_base:#x} {SYS.buf_shift} "
        f"{SYS.freelist_q:#x} {SYS.stat_exc_base:#x}",
        f"rings {rings[0]} {rings[1]}",
        f"log {CP_LOG_BASE:#x} {CP_LOG_CAP}",
        f"stats {CP_STATS_BASE:#x}",
    ]  # fmt: skip
    lines += [f"option {k} {v}" for k, v in sorted((options or {}).items())]
    lines += [f"change {c}" for c in changes or []]
    if state:
        lines.append(f"state {state}")
    if socket:
        lines.append(f"socket {socket}")
    return "\n".join(lines) + "\n"
