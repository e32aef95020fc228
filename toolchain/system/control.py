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
The section is checked by the layout's schema (layout_schema.ControlSection).

The daemon's configuration (xscale/npkd/cfg.h) is written when the image is started,
from the router configuration the image was linked with, the system map and the
layout's rings; the statistics block and the exception log it keeps in SRAM are read
here (`read_stats`, `LogReader`), and so are the owned table and the records after it of
its send backlog and ARP cache, what a daemon that dies leaves (`owned_buffers`,
`send_backlog`, `arp_record`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import LinkError
from .sysmap import (
    CP_CHANGES_BASE,
    CP_CHANGES_CAP,
    CP_LOG_BASE,
    CP_LOG_CAP,
    CP_OWNED_BASE,
    CP_OWNED_MAGIC,
    CP_PLUGIN_LOG_BASE,
    CP_PLUGIN_LOG_CAP,
    CP_STATS_BASE,
    SYS,
)

STATS_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "stats.h"
CP_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "cp.h"
CFG_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "cfg.h"
EXIT_RESTART = 75  # npkd's exit status for "restart me" (`npk route restart`)
GUEST_RUN_DIR = "/run/npkd"  # where the XScale sees the daemon's files (ControlPlane.dir)


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


def control_allocations() -> list[tuple[int, int, str]]:
    """The SRAM the daemon writes for the host and for the daemon started after it: (first
    byte, end byte, what), for the linker's overlap check (link.system_allocations)."""
    return [(CP_STATS_BASE, CP_STATS_BASE + 16 + 4 * len(stat_names()), "statistics block"),
            (CP_LOG_BASE, CP_LOG_BASE + 16 + 16 * CP_LOG_CAP, "exception log"),
            (CP_CHANGES_BASE, CP_CHANGES_BASE + 16 + 16 * CP_CHANGES_CAP, "route change log"),
            (CP_OWNED_BASE, CP_OWNED_BASE + owned_bytes(), "table of the buffers it owns, its send backlog and ARP cache"),
            (CP_PLUGIN_LOG_BASE, CP_PLUGIN_LOG_BASE + 16 + 32 * CP_PLUGIN_LOG_CAP, "plugin log")]  # fmt: skip


def owned_words() -> int:
    """Longwords of the daemon's table of the buffers it owns: a bit a buffer handle."""
    return (SYS.n_bufs + 31) // 32


def arp_mirror_cap() -> int:
    """ARP cache entries the daemon keeps a record of in SRAM (xscale/npkd/cp.h NPKD_ARP_MIRROR)."""
    m = re.search(r"#define NPKD_ARP_MIRROR (\d+)u", CP_H.read_text())
    assert m is not None, "cp.h: NPKD_ARP_MIRROR"
    return int(m[1])


def backlog_base() -> int:
    """Where the record of the daemon's send backlog starts (cp.h NPKD_BACKLOG_AT)."""
    return CP_OWNED_BASE + 16 + 4 * owned_words()


def arp_record_base() -> int:
    """Where the record of the daemon's ARP cache starts (cp.h NPKD_ARPM_AT)."""
    return backlog_base() + 8 * SYS.n_bufs


def owned_bytes() -> int:
    """The owned table and the records after it (cp.h NPKD_OWNED_BYTES)."""
    return arp_record_base() + 16 + 16 * arp_mirror_cap() - CP_OWNED_BASE


def stat_names() -> list[str]:
    """The daemon's counters in the order of its statistics block (xscale/npkd/stats.h)."""
    body = STATS_H.read_text().split("NPKD_STATS(X)", 1)[1].split("enum", 1)[0]
    return re.findall(r"X\((\w+)\)", body)


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
        f"routes {routes}",
        f"redirects {int(bool(router.send_redirects))}",
        f"lpm {lay.ctl_base:#x} {lay.root_base:#x} {lay.nh_base:#x} {lay.nh_capacity} {lay.node_base:#x} {node_bytes:#x}",
        f"sys {SYS.desc_base:#x} {SYS.desc_shift} {SYS.n_bufs} {SYS.buf_base:#x} {SYS.buf_shift} "
        f"{SYS.freelist_q:#x} {SYS.stat_exc_base:#x}",
        f"rings {rings[0]} {rings[1]}",
        f"log {CP_LOG_BASE:#x} {CP_LOG_CAP}",
        f"changelog {CP_CHANGES_BASE:#x} {CP_CHANGES_CAP}",
        f"stats {CP_STATS_BASE:#x}",
        f"owned {CP_OWNED_BASE:#x} {SYS.n_bufs}",
    ]  # fmt: skip
    lines += [f"option {k} {v}" for k, v in sorted((options or {}).items())]
    lines += [f"change {c}" for c in changes or []]
    if state:
        lines.append(f"state {state}")
    if socket:
        lines.append(f"socket {socket}")
    return "\n".join(lines) + "\n"


def flow_conf(flows: dict[str, Any] | None, chip_config: dict[str, Any]) -> str:
    """npkd's lines for the flow table of `-D classify=flows` (xscale/npkd/flows.h): its
    place, the hash unit's multiplier, and the plugins loaded at start."""
    if not flows:
        return ""
    hi, lo = int(chip_config.get("hash_mult128_hi", 0)), int(chip_config.get("hash_mult128_lo", 0))
    lines = [f"flows {flows['key_base']:#x} {flows['aux_base']:#x} {flows['buckets']} {hi:#x} {lo:#x}",
             f"pluginlog {CP_PLUGIN_LOG_BASE:#x} {CP_PLUGIN_LOG_CAP}"]
    if flows.get("idle_us"):
        lines.append(f"flowidle {int(flows['idle_us'])}")
    for slot, p in sorted((flows.get("plugins") or {}).items(), key=lambda kv: int(kv[0])):
        lines.append(" ".join(["plugin", str(slot), p["name"], *(str(a) for a in p.get("args", []))]))
    return "\n".join(lines) + "\n"


def control_meta(lay: Any) -> dict[str, Any]:
    """What an image records of its control plane (`meta["control"]`): the spec, the ring
    numbers, and the program built for its placement (`npk link` builds it: cached)."""
    from npkit.xscale.toolchain import BuildError, program

    spec: ControlSpec = lay.control
    meta = {**spec.to_meta(), "exceptions_ring": lay.rings[lay.exceptions].number,
            "ring_number": lay.rings[spec.ring].number if spec.ring else None}  # fmt: skip
    if spec.placement == "host":
        return meta
    try:
        meta["elf"] = str(program(spec.program))
        if spec.placement == "gpe":
            meta["native"] = str(program(spec.program, native=True))
    except BuildError as e:
        raise LinkError(f"control program {spec.program}: {e}") from None
    return meta


# ---- the running control plane ------------------------------------------------------------------


def route_change_lines(changes: list[Any] | None) -> list[str]:
    """Timed route changes (npkit.emulator.traffic.spec.RouteChange, or their text: `at 2ms
    add 10.1.0.0/16 via 10.0.3.2`, `at 3ms del 10.1.0.0/16`) as npkd's `change`
    directives: time in ns."""
    from npkit.emulator.traffic.spec import parse_route_change

    out = []
    for c in changes or []:
        if isinstance(c, str):
            c = parse_route_change(c)
        out.append(f"{c.at_ns} {c.op} {c.route_text}")
    return out


@dataclass(frozen=True)
class LogRecord:
    """One exception the daemon handled (xscale/npkd/cp.h)."""

    digest: int
    length: int
    in_port: int
    reason: int
    action: int
    sent: int
    handle: int
    time_us: int


ACTIONS = {1: "consumed", 2: "forwarded", 3: "dropped", 4: "held"}


class LogReader:
    """The daemon's exception log in SRAM, read incrementally (it wraps after CP_LOG_CAP
    records: `overrun` counts records lost because the host read too late)."""

    def __init__(self, chip: Any) -> None:
        self.chip = chip
        self.read = chip.read32("sram", CP_LOG_BASE)   # a restarted daemon appends
        self.overrun = 0

    def take(self) -> list[LogRecord]:
        count = self.chip.read32("sram", CP_LOG_BASE)
        if count <= self.read:
            return []
        if count - self.read > CP_LOG_CAP:
            self.overrun += count - self.read - CP_LOG_CAP
            self.read = count - CP_LOG_CAP
        out = []
        for k in range(self.read, count):
            a = CP_LOG_BASE + 16 + 16 * (k % CP_LOG_CAP)
            w = [int.from_bytes(self.chip.mem_read("sram", a, 16)[4 * i : 4 * i + 4], "big") for i in range(4)]
            out.append(LogRecord(w[0], w[1] >> 16, (w[1] >> 8) & 0xFF, w[1] & 0xFF, w[2] >> 24, (w[2] >> 16) & 0xFF,
                                 w[2] & 0xFFFF, w[3]))  # fmt: skip
        self.read = count
        return out


CHG_TIMED, CHG_SOCKET, CHG_TIMED_FAILED = 1, 2, 3  # a change log record's source (xscale/npkd/cp.h)
CHG_WITHDRAWN = 4  # ... a restarted daemon withdrew learnt ARP state (no route; the prefix: its start)


def plugin_log(chip: Any, start: int = 0) -> list[tuple[int, str, Any]]:
    """Records from `start` of the daemon's plugin log (xscale/npkd/flows.h), each as
    (time ns, kind, what): ("plugin", (slot, {name, args} or None for an emptied slot)), or
    ("flow", (FlowKey, its action word from then on: proto << 24 | action << 16 | arg))."""
    from npkit.emulator.traffic.flows import FlowKey

    n = min(int(chip.read32("sram", CP_PLUGIN_LOG_BASE)), CP_PLUGIN_LOG_CAP)
    out: list[tuple[int, str, Any]] = []
    for k in range(start, n):
        w = [chip.read32("sram", CP_PLUGIN_LOG_BASE + 16 + 32 * k + 4 * i) for i in range(8)]
        if w[1] >> 28 == 1:
            key = FlowKey(w[2], w[3], w[5] >> 24, w[4] >> 16, w[4] & 0xFFFF)
            out.append((w[0] * 1000, "flow", (key, w[5])))
            continue
        slot, loaded, nargs = (w[1] >> 24) & 0xF, (w[1] >> 16) & 1, w[1] & 0xFF
        name = b"".join(x.to_bytes(4, "big") for x in w[6:8]).rstrip(b"\0").decode("ascii", "replace")
        out.append((w[0] * 1000, "plugin", (slot, {"name": name, "args": w[2 : 2 + nargs]} if loaded else None)))
    return out


def change_log_count(chip: Any) -> int:
    """How many records the daemons have put in the change log since the chip was loaded."""
    return int(chip.read32("sram", CP_CHANGES_BASE))


def change_log(chip: Any, start: int = 0, end: int | None = None) -> list[tuple[int, Any]]:
    """Records [start, end) of the change log (end: all so far) as (source, RouteChange at
    the time it was made); the log is a ring of CP_CHANGES_CAP records, so only the
    last CP_CHANGES_CAP are there to read."""
    from npkit.emulator.traffic.spec import RouteChange

    n = change_log_count(chip) if end is None else end
    out = []
    for k in range(max(start, n - CP_CHANGES_CAP), n):
        raw = chip.mem_read("sram", CP_CHANGES_BASE + 16 + 16 * (k % CP_CHANGES_CAP), 16)
        t, w1, prefix, hop = (int.from_bytes(raw[i : i + 4], "big") for i in range(0, 16, 4))
        add = w1 >> 24
        out.append((w1 & 0xFF, RouteChange(t * 1000, "add" if add else "del", prefix, (w1 >> 16) & 0xFF, hop,
                                           (w1 >> 8) & 0xFF if add else -1)))  # fmt: skip
    return out


def owned_buffers(chip: Any) -> list[int] | None:
    """The buffer handles the daemon's table marks as its own (xscale/npkd/cp.h: held for
    ARP, waiting to go on the control ring, being handled), or None before a daemon has
    set the table up."""
    if chip.read32("sram", CP_OWNED_BASE) != CP_OWNED_MAGIC:
        return None
    raw = chip.mem_read("sram", CP_OWNED_BASE + 16, 4 * owned_words())
    out = []
    for i in range(owned_words()):
        w = int.from_bytes(raw[4 * i : 4 * i + 4], "big")
        out += [32 * i + b for b in range(32) if w >> b & 1]
    return out


def owned_packets(chip: Any) -> list[tuple[int, int, int]]:
    """The buffers the daemon's table marks as its own, as the exception log names the
    packets in them: (input port, frame length, frame_digest), from each buffer's
    descriptor (microcode/README.md §2) and bytes.  A packet the daemon took from the
    exception ring and had not logged when it died is among them."""
    from npkit.emulator.traffic.control import frame_digest

    out = []
    for h in owned_buffers(chip) or []:
        if h >= SYS.n_bufs:
            continue
        lw2, lw3 = chip.read32("sram", SYS.desc_addr(h) + 8), chip.read32("sram", SYS.desc_addr(h) + 12)
        length = min(lw2 >> 16, 128)
        frame = bytes(chip.mem_read("dram", SYS.buf_addr(h) + (lw2 & 0xFFFF), length))
        out.append((lw3 >> 24, lw2 >> 16, frame_digest(frame)))
    return out


@dataclass(frozen=True)
class BacklogEntry:
    """A message in the daemon's send backlog (waiting for room on the control ring):
    its packet word, output port, and the frame its buffer holds."""

    pw: int
    port: int
    frame: bytes

    @property
    def own(self) -> bool:
        """A frame the daemon made (packet word bit 25, cp.h PW_CONTROL), not a packet it forwards."""
        return bool(self.pw >> 25 & 1)


def send_backlog(chip: Any) -> list[BacklogEntry]:
    """The daemon's send backlog as its record in SRAM says (xscale/npkd/cp.h), oldest
    first, with each frame's bytes read from its buffer: what a daemon killed now takes
    with it.  Empty before a daemon has set the record up."""
    if chip.read32("sram", CP_OWNED_BASE) != CP_OWNED_MAGIC:
        return []
    n, first = chip.read32("sram", CP_OWNED_BASE + 8), chip.read32("sram", CP_OWNED_BASE + 12)
    if n > SYS.n_bufs or first >= SYS.n_bufs:
        return []
    out = []
    for k in range(n):
        raw = chip.mem_read("sram", backlog_base() + 8 * ((first + k) % SYS.n_bufs), 8)
        pw, port = int.from_bytes(raw[:4], "big"), int.from_bytes(raw[4:], "big")
        h = pw & 0xFFFF
        length = chip.read32("sram", SYS.desc_addr(h) + 8) >> 16
        out.append(BacklogEntry(pw, port, bytes(chip.mem_read("dram", SYS.buf_addr(h) + SYS.pkt_pad, length))))
    return out


@dataclass(frozen=True)
class ArpRecord:
    """An entry of the daemon's ARP cache as its record in SRAM says (cp.h)."""

    ip: int
    state: str  # none | incomplete | reachable
    tries: int
    port: int
    start_ns: int  # when its last resolution began: requests due at start + k * arp_retry_us


ARP_STATES = {0: "none", 1: "incomplete", 2: "reachable"}


def arp_record(chip: Any) -> dict[int, ArpRecord]:
    """The daemon's ARP cache by address, from its record in SRAM (cp.h; the first
    NPKD_ARP_MIRROR entries): what it knew and had done at this instant."""
    if chip.read32("sram", CP_OWNED_BASE) != CP_OWNED_MAGIC:
        return {}
    base = arp_record_base()
    n = min(chip.read32("sram", base), arp_mirror_cap())
    raw = chip.mem_read("sram", base + 16, 16 * n) if n else b""
    out = {}
    for i in range(n):
        ip, st, hi, lo = (int.from_bytes(raw[16 * i + 4 * k : 16 * i + 4 * k + 4], "big") for k in range(4))
        out[ip] = ArpRecord(ip, ARP_STATES.get(st >> 24, str(st >> 24)), (st >> 16) & 0xFF, st & 0xFF, hi << 32 | lo)
    return out


def read_stats(chip: Any) -> dict[str, Any] | None:
    """The daemon's statistics block (xscale/npkd/stats.h), or None if it never wrote one."""
    raw = chip.mem_read("sram", CP_STATS_BASE, 16)
    magic, version, state, starts = (int.from_bytes(raw[i : i + 4], "big") for i in range(0, 16, 4))
    if magic != 0x4E504B44:
        return None
    names = stat_names()
    data = chip.mem_read("sram", CP_STATS_BASE + 16, 4 * len(names))
    counters = {n: int.from_bytes(data[4 * i : 4 * i + 4], "big") for i, n in enumerate(names)}
    return {"state": {0: "starting", 1: "loading", 2: "ready", 3: "ready (routes loaded on demand)"}.get(state, str(state)), "starts": starts,
            "version": version, "counters": counters}  # fmt: skip


def stats_summary(st: dict[str, Any] | None) -> dict[str, Any]:
    """The daemon's statistics under keys that say what they count (`npk demo --json`)."""
    if st is None:
        return {"running": False}
    c = st["counters"]
    return {
        "running": True, "state": st["state"], "starts": st["starts"],
        "exceptions_handled": {k[4:]: v for k, v in c.items() if k.startswith("exc_") and v},
        # frames that left (one held for ARP counts when ARP resolves its next hop)
        "icmp_sent": {"time_exceeded": c["icmp_time_exceeded"],
                      "dest_unreachable_net": c["icmp_net_unreachable"],
                      "dest_unreachable_host": c["icmp_host_unreachable"],
                      "dest_unreachable_port": c["icmp_port_unreachable"],
                      "dest_unreachable_protocol": c["icmp_protocol_unreachable"],
                      "dest_unreachable_source_route_failed": c["icmp_source_route_failed"],
                      "redirect_host": c["icmp_redirect_host"], "parameter_problem": c["icmp_param_problem"],
                      "echo_reply": c["icmp_echo_reply"]},
        "icmp_suppressed_by_rate_limit": c["icmp_suppressed_rate_limit"],
        "icmp_not_sent_rfc1812_4_3_2_7": c["icmp_suppressed_rules"],
        "icmp_not_sent_no_route_back": c["icmp_no_route_back"],
        "arp_replies_sent": c["arp_replies_sent"], "arp_requests_sent": c["arp_requests_sent"],
        "arp_learnt": c["arp_learnt"], "arp_resolved": c["arp_resolved"], "arp_unresolved": c["arp_unresolved"],
        "packets_held_for_arp": c["held"], "held_packets_sent": c["held_sent"],
        "held_packets_dropped": c["held_dropped_overflow"] + c["held_dropped_unresolved"],
        "own_frames_dropped_no_arp": c["own_dropped_no_arp"],
        "buffers_reclaimed": c["buffers_reclaimed"],
        "route_pool_units_recovered": c["lpm_units_recovered"],
        # what the send backlog of a daemon killed (or restarted) held: never left
        "killed_in_send_backlog": {"own_frames": c["killed_backlog_own"],
                                   "forwarded_packets": c["killed_backlog_forwarded"]},
        "forwarded_by_control_plane": c["forwarded"], "frames_sent": c["frames_sent"],
        "counted_not_forwarded": {"broadcast": c["broadcast_counted"], "multicast": c["multicast_counted"],
                                  "local": c["local_counted"]},
        "routes": c["routes"], "route_changes": c["routes_added"] + c["routes_deleted"],
        # timed changes a restarted daemon made late: due before it had its route table
        # (while no daemon ran, or cut by a kill), not made by the one before it
        "timed_changes_late": c["timed_late"],
        "counters": c,
    }  # fmt: skip


APP_EXCEPTIONS = "npkd.exceptions"  # xscale/npkd/cp.h NPKD_APP_EXCEPTIONS


def _app_exceptions(image: Any) -> list[str]:
    """The image's application's exception reasons as the lines of npkd's
    NPKD_APP_EXCEPTIONS file ("CODE consume|forward", xscale/npkd/cp.h)."""
    if not (image.meta.get("app") or {}).get("reasons"):
        return []
    from .app import reasons_of_image
    from .app_reasons import daemon_exception_lines

    return daemon_exception_lines(reasons_of_image(image.meta))


class ControlPlane:
    """A router image's control program started on its chip (the `control:` section the
    image was linked with): npkd on the XScale (or as a gpe process), its configuration
    written into `workdir`, the chip advanced by the System from now on (Chip.run)."""

    def __init__(self, chip: Any, image: Any, *, placement: str | None = None, gdb_port: int | str | None = None,
                 changes: list[str] | None = None, socket: str | Path | None = None,
                 kill_at_ns: int | None = None, restart_at_ns: int | None = None, echo: Any = None,
                 workdir: str | Path | None = None, options: dict[str, int] | None = None,
                 router: Any = None) -> None:  # fmt: skip
        """`router`: the image's RouterConfig when the caller has read it already."""
        import tempfile

        from .router_image import router_config_of

        meta = image.meta["control"]
        self.chip = chip
        self.placement = placement or meta["placement"]
        if self.placement not in ("xscale", "gpe"):
            raise LinkError(f"control placement {self.placement!r}: the daemon runs on xscale or gpe")
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="npkd-")
        self.dir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = str(socket) if socket else None
        router = router if router is not None else router_config_of(image)
        self.changes = list(changes or [])
        # the daemon's files (its config, the route table, its journal) in self.dir, which
        # the XScale sees at a fixed path: what it parses does not depend on the host's paths
        seen = Path(GUEST_RUN_DIR) if self.placement == "xscale" else self.dir
        table = self.dir / "routes.txt"
        table.unlink(missing_ok=True)
        table.symlink_to(Path(image.meta["router"]["routes"]).resolve())
        conf = daemon_conf(router, seen / table.name,
                           rings=(int(meta["exceptions_ring"]), int(meta["ring_number"])),
                           options={**meta.get("options", {}), **(options or {})},
                           changes=route_change_lines(self.changes), state=seen / "routes.state",
                           socket=self.socket, sram_channel_bytes=int(chip.config["sram_channel_bytes"]))  # fmt: skip
        conf += flow_conf(image.meta.get("flows"), chip.config)
        self.conf = self.dir / "npkd.conf"
        self.conf.write_text(conf)
        app_exc = self.dir / APP_EXCEPTIONS  # beside the route table, where npkd looks (xscale/npkd/cp.h)
        app_exc.unlink(missing_ok=True)
        lines = _app_exceptions(image)
        if lines:
            app_exc.write_text("".join(f"{line}\n" for line in lines))
        self.system, self.host, self.program = start_daemon(chip, meta, self.placement, self.dir, self.conf,
                                                            kill_at_ns, restart_at_ns, gdb_port, echo)  # fmt: skip

    def stats(self) -> dict[str, Any] | None:
        return read_stats(self.chip)

    def summary(self) -> dict[str, Any]:
        out = stats_summary(self.stats())
        st = self.system.status() or {}
        out["xscale"] = {k: st.get(k) for k in ("placement", "state", "instructions", "interrupts", "wait_cycles",
                                                "exit_code", "fault", "starts")}  # fmt: skip
        out["restarts"] = [{"cycle": c, "event": e} for c, e in self.system.events]
        if not out["running"]:      # it never came up: where it crashed, hangs or waits
            out["process"] = self.whereabouts()
        err = self.host.stderr.decode(errors="replace").strip() if self.system.xscale is not None else ""
        if err:
            out["stderr"] = err[-2000:]
        return out

    def failed(self) -> str | None:
        """Why the daemon is not running when it should be (crashed, exited), else None."""
        st = self.system.status() or {}
        if self.system.killed:
            return None
        if st.get("state") in ("crashed", "exited"):
            err = self.host.stderr.decode(errors="replace").strip()
            why = [f"the control daemon {st['state']} (exit code {st.get('exit_code')})"]
            if st.get("fault"):     # it says the pc and function already (npkit.xscale.core)
                why.append(st["fault"])
            elif "pc" in st:
                why.append(f"at pc {st['pc']:#x} in {st.get('function') or '?'}")
            if err:
                why.append(f"stderr: {err[-300:]}")
            return ": ".join(why)
        return None

    def whereabouts(self) -> str:
        """Where the daemon's process is: 'running at pc 0x10570 in main', 'waiting
        at pc ... in read (waiting on read fd 3 (interrupt))', 'crashed ...'."""
        st = self.system.status() or {}
        text = str(st.get("state", "not started"))
        if "pc" in st:
            text += f" at pc {st['pc']:#x} in {st.get('function') or '?'}"
        if st.get("waiting_on"):
            text += f" (waiting on {st['waiting_on']})"
        return text

    def close(self) -> None:
        self.system.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


class ControlSocketError(RuntimeError):
    """The daemon's control socket cannot be reached, or it refused the command."""


def control_request(path: str | Path, command: str, timeout_s: float = 60.0) -> list[str]:
    """Send one command line to a running daemon (xscale/npkd/ctl.h) and return its
    answer's lines (the final "ok" left out); ControlSocketError on "error: ...".

    The daemon reads its socket only while the emulator runs it (`npk run`, `npk demo`
    ...), between batches of exceptions: the answer can take a while in host time."""
    import socket as _socket

    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        try:
            s.connect(str(path))
        except OSError as e:
            raise ControlSocketError(f"{path}: no control daemon listening ({e.strerror or e})") from None
        s.sendall(command.strip().encode() + b"\n")
        buf = b""
        lines: list[str] = []
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                raise ControlSocketError(f"{path}: no answer within {timeout_s:g} s (is the emulator running?)") from None
            if not chunk:
                raise ControlSocketError(f"{path}: the daemon closed the connection")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith("error:"):
                    raise ControlSocketError(text[6:].strip())
                if text == "ok" or text.startswith("ok "):
                    return lines
                lines.append(text)
    finally:
        s.close()


def start_daemon(chip: Any, meta: dict[str, Any], placement: str, run_dir: Path, conf: Path,
                 kill_at_ns: int | None, restart_at_ns: int | None, gdb_port: Any, echo: Any) -> tuple[Any, Any, Any]:  # fmt: skip
    """A control program (meta["program"]: npkd, i3d) built for `placement` and started on
    `chip` with its configuration file `conf` (in `run_dir`, which the XScale sees at
    GUEST_RUN_DIR): (the System, its host, the program).  Killed (fault injection at
    `kill_at_ns`) it is started again at `restart_at_ns` and reads its configuration afresh."""
    from npkit.xscale.system import System
    from npkit.xscale.toolchain import BuildError, program

    try:
        prog = program(meta["program"], native=placement == "gpe")
    except BuildError as e:
        raise LinkError(f"control program {meta['program']}: {e}") from None
    seen = Path(GUEST_RUN_DIR) if placement == "xscale" else run_dir
    mhz = float(chip.config["clock_mhz"])

    def cyc(ns: int | None) -> int | None:
        return None if ns is None else int(ns * mhz // 1000)

    system = System(chip, respawn=True, kill_at=cyc(kill_at_ns), restart_at=cyc(restart_at_ns))
    args = [*meta.get("args", []), f"--sram-channel-bytes={int(chip.config['sram_channel_bytes'])}",
            str(seen / conf.name)]  # fmt: skip
    mounts = {GUEST_RUN_DIR: run_dir} if placement == "xscale" else None
    host = system.attach_xscale(prog, args, placement=placement, gdb_port=gdb_port, echo=echo, mounts=mounts)
    return system, host, prog
