"""The I3 daemon (xscale/i3d, docs/spp.md "The GPE and its I3 daemon"): its configuration,
written from the SPP application's slice file, the chip config's TCAM and the system map;
what it leaves in SRAM for the host (statistics, the GPE path's delays, the exception log,
the filter mirror); and the control socket's commands (`npk slice`, `npk filter`, `npk
finger`), parsed into data.

A layout runs it as its control program (`control: {program: i3d, placement: gpe}`:
examples/apps/spp/spp_gpe.yaml); npkit.toolchain.system.i3d_run starts it beside a run and
judges what it does.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .control import ControlSocketError, control_request
from .errors import LinkError
from .sysmap import SYS

I3D_H = Path(__file__).resolve().parents[2] / "xscale" / "i3d" / "i3d.h"
# SRAM channel 2, below the SPP chip's TCAM window (0x80600000) and above npkd's data
I3D_STATS_BASE = 0x8050_0000
STATS_MAGIC = 0x49334430  # "I3D0"


def _h_int(name: str) -> int:
    m = re.search(rf"#define {name} (0x[0-9A-Fa-f]+|\d+)u", I3D_H.read_text())
    assert m is not None, f"i3d.h: {name}"
    return int(m[1], 0)


def option_names() -> list[str]:
    """The daemon's tunables (xscale/i3d/i3d.h I3D_OPTIONS): a layout's control.options."""
    body = I3D_H.read_text().split("#define I3D_OPTIONS(X)", 1)[1].split("typedef", 1)[0]
    # and the run's own: ipv4 (1: npkd beside i3d, npkd_spp; not written to i3d's configuration)
    return [*re.findall(r"X\((\w+),", body), "ipv4"]


def mirror_offset() -> int:
    """Where the filter mirror starts in the statistics block's region (i3d.h I3D_MIRROR_OFF)."""
    return _h_int("I3D_MIRROR_OFF")


def stat_names() -> list[str]:
    """The daemon's counters in the order of its statistics block (xscale/i3d/i3d.h I3D_STATS)."""
    body = I3D_H.read_text().split("#define I3D_STATS(X)", 1)[1].split("enum", 1)[0]
    return re.findall(r"X\((\w+)\)", body)


# ---- the configuration ---------------------------------------------------------------------------


def load_substrate(app_folder: str | Path) -> Any:
    """The application's slice file, compiled by its own slices.py (loaded by path: the
    application is not a package of npkit's)."""
    folder = Path(app_folder)
    src = folder / "slices.py"
    if not src.is_file() or not (folder / "slices.yaml").is_file():
        raise LinkError(f"{folder}: the i3 daemon needs the application's slices.py and slices.yaml (docs/spp.md §3)")
    key = f"npk_i3d_slices_{abs(hash(str(folder.resolve())))}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, src)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    try:
        return mod.load_slices(folder / "slices.yaml")
    except ValueError as e:
        raise LinkError(str(e)) from None


def _ip(a: int) -> str:
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"


def _prefix(value: int, mask: int) -> str:
    return "*" if not mask else f"{_ip(value)}/{bin(mask).count('1')}"


def filter_words(sub: Any, f: Any) -> str:
    """A slice file filter (compiled: key, mask, result) as the daemon's filter fields
    (`npk filter add` syntax; docs/spp.md §5 gives the key's layout)."""
    sl = sub.slices[f.slice_index]
    k, m = f.key, f.mask
    words: list[str] = []
    if sl.option == "i3":
        ident, imask = (k >> 48) & (2**64 - 1), (m >> 48) & (2**64 - 1)
        length = bin(imask).count("1")
        words += ["trigger", f"0x{ident:016x}" + ("" if length == 64 else f"/{length}")]
    else:
        words += ["dst", _prefix((k >> 80) & 0xFFFFFFFF, (m >> 80) & 0xFFFFFFFF),
                  "src", _prefix((k >> 48) & 0xFFFFFFFF, (m >> 48) & 0xFFFFFFFF)]  # fmt: skip
        for name, shift, bits in (("proto", 8, 0xFF), ("dport", 32, 0xFFFF), ("sport", 16, 0xFFFF)):
            if (m >> shift) & bits:
                words += [name, str((k >> shift) & bits)]
    if m & 0xFF:
        words += ["in", sub.meta_ifs[k & 0xFF].name]
    if f.action == 1:
        words += ["out", sub.meta_ifs[f.out_mi].name, "next_hop", f"{_ip(f.nh_ip)}:{f.nh_port}"]
    else:
        words += ["action", {2: "gpe", 3: "drop"}.get(f.action, "drop")]
    return " ".join(words)


def i3d_conf(sub: Any, router: Any, tcam: dict[str, int] | None, *, rings: tuple[int, ...],
             socket: str | Path | None = None, options: dict[str, int] | None = None,
             timed: list[tuple[int, str]] | None = None, stats_base: int = I3D_STATS_BASE) -> str:  # fmt: skip
    """The daemon's configuration (xscale/i3d/i3cfg.c) for a compiled slice file, the image's
    router config and the chip's TCAM (Chip.tcam_info(); None: no TCAM, no filters in the
    fast path); `timed`: (emulated ns, control command) made at those times."""
    mac = ":".join
    lines = ["# i3d configuration (npkit.toolchain.system.i3d.i3d_conf)",
             f"sys {SYS.desc_base:#x} {SYS.desc_shift} {SYS.n_bufs} {SYS.buf_base:#x} {SYS.buf_shift} "
             f"{SYS.freelist_q:#x}",
             "rings " + " ".join(str(r) for r in rings)]  # fmt: skip
    nfilters = len(sub.filters())
    if tcam is not None:
        lines.append(f"tcam {tcam['base']:#x} {tcam['entries']} {nfilters} {max(0, tcam['entries'] - nfilters)}")
    base = getattr(sys.modules[type(sub).__module__], "META_IF_BASE", 0xC0010000)
    # the table's rows (the link's and free ones the daemon fills at `slice add`) and its
    # generation word after them, which the spp block reads beside every frame (spp.md §4.1)
    rows = int(getattr(sys.modules[type(sub).__module__], "MAX_META_IFS", len(sub.meta_ifs)))
    lines.append(f"mitable {base:#x} {rows} {base + 16 * rows:#x}")
    for i, p in enumerate(router.ports):
        lines.append(f"port {i} {mac(f'{b:02x}' for b in p.mac)}")
    for ip, m in sorted(router.arp.items()):
        lines.append(f"arp {_ip(ip)} {mac(f'{b:02x}' for b in m)}")
    finger_base = getattr(sys.modules[type(sub).__module__], "FINGER_BASE", 0xC0011000)
    finger_block = getattr(sys.modules[type(sub).__module__], "FINGER_BLOCK", 0x420)
    entry = 0
    for s in sub.slices:
        lines.append(f"slice {s.index} {s.id} {s.name} {s.option} {round(s.share * 1_000_000)}")
        for m in s.meta_ifs:
            lines.append(f"mi {m.index} {s.id} {m.name} {m.port} {_ip(m.ip)}:{m.udp}")
        if s.option == "i3":
            block = finger_base + s.i3_index * finger_block
            lines.append(f"ring {s.id} {s.node_id:#x} {s.predecessor:#x} {block:#x}")
            for k, g in sorted(s.fingers.items()):
                lines.append(f"finger {s.id} {k} {sub.meta_ifs[g.out_mi].name} {_ip(g.nh_ip)}:{g.nh_port}")
    for f in sub.filters():
        sl = sub.slices[f.slice_index]
        lines.append(f"filter {sl.id} {entry if tcam is not None else '-'} {filter_words(sub, f)}")
        entry += 1
    lines.append(f"stats {stats_base:#x}")
    lines += [f"option {k} {v}" for k, v in sorted((options or {}).items())]
    lines += [f"at {at} {cmd}" for at, cmd in sorted(timed or [], key=lambda x: x[0])]
    if socket:
        lines.append(f"socket {socket}")
    return "\n".join(lines) + "\n"


# ---- the layout ------------------------------------------------------------------------------------

GPE_HEADER = """# GENERATED from spp.yaml by npkit.toolchain.system.i3d.gpe_layout (`python -m
# npkit.toolchain.system.i3d examples/apps/spp`): do not edit; tests/xscale/test_i3d.py
# checks it is current.  The SPP's layout with its GPE: spp.yaml plus the I3 daemon
# (xscale/i3d) as the control program -- a host process attached to the emulator
# (placement gpe; -D control=xscale runs it on the emulated XScale) that takes every
# exception record, answers the I3 slices' (no trigger filter, several, no finger,
# complex) and sends their frames to the queue manager on cp_to_qm.  `npk slice|filter|
# finger --socket PATH` drive it while traffic runs (docs/spp.md "The GPE and its I3 daemon").
#
"""


def gpe_layout(text: str, cp_ring: int = 12) -> str:
    """The SPP layout with the GPE's daemon, from the SPP's layout (its text): the same
    blocks and rings, plus a `control` parameter (gpe | xscale), the ring the daemon sends
    on, the `control:` section naming i3d, and the queue manager serving that ring."""
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        if line.startswith("name: "):
            line = line + "_gpe"
        out.append(line)
        if line.startswith("params:"):
            out.append("  control: gpe          # where i3d runs: gpe (a host process) or xscale (the emulated XScale)")
            out.append("  gpe_slow_slice: 0     # a slice id whose filters start out of the TCAM: its packets take the")
            out.append("                        # GPE path (the GPE's side of the latency experiment; 0: none)")
            out.append("  gpe_ipv4: 0           # 1: npkd beside i3d (a second gpe process) answers the IPv4 slices'")
            out.append("                        # records i3d relays (spp_to_gpe): docs/spp.md §12")
        elif line.startswith("  exceptions: {ring:"):
            out.append(f"  cp_to_qm:   {{ring: {cp_ring}, size: 256}}   # frames the I3 daemon sends")
        elif line.startswith("exceptions: "):
            out += ["control:", '  placement: "${control}"', "  program: i3d", "  ring: cp_to_qm",
                    '  options: {slow_slice: "${gpe_slow_slice}", ipv4: "${gpe_ipv4}"}']
    body = "\n".join(out) + "\n"
    qm = body.find("  qm:  {variant:")
    if qm < 0 or "cp_to_qm" not in body or "control:" not in body:
        raise LinkError("the SPP layout has no qm block, exceptions ring or exceptions: line to add the GPE to")
    end = body.find("mes:", qm)
    body = body[:end] + "control_in: cp_to_qm, " + body[end:]
    return GPE_HEADER + body


# ---- what it leaves in SRAM ----------------------------------------------------------------------


def read_stats(chip: Any, base: int = I3D_STATS_BASE) -> dict[str, Any] | None:
    """The daemon's statistics block (i3d.h), or None if it never wrote one: its counters
    and the GPE path's delays (receive timestamp to the hand-over of its frame to the
    queue manager): samples, mean, percentiles of the last ones kept, maximum, in ns."""
    if chip.read32("sram", base) != STATS_MAGIC:
        return None
    names = stat_names()
    raw = chip.mem_read("sram", base + 16, 4 * len(names))
    counters = {n: int.from_bytes(raw[4 * i : 4 * i + 4], "big") for i, n in enumerate(names)}
    lat = _h_int("I3D_LAT_OFF")
    n, mx, hi, lo = (chip.read32("sram", base + lat + 4 * i) for i in range(4))
    cap = _h_int("I3D_SAMPLES")
    kept = min(n, cap)
    sraw = chip.mem_read("sram", base + _h_int("I3D_SAMPLES_OFF"), 4 * kept) if kept else b""
    samples = sorted(int.from_bytes(sraw[4 * i : 4 * i + 4], "big") for i in range(kept))
    delay: dict[str, Any] = {"samples": n, "max": mx, "mean": round((hi << 32 | lo) / n) if n else 0}
    for p in (50, 90, 99):
        delay[f"p{p}"] = samples[min(len(samples) - 1, len(samples) * p // 100)] if samples else 0
    return {"starts": chip.read32("sram", base + 12), "counters": counters, "gpe_delay_ns": delay}


@dataclass(frozen=True)
class I3LogRecord:
    """One exception the daemon handled (i3d.h: the exception log)."""

    digest: int
    length: int
    in_port: int
    code: int
    action: int  # 1 consumed, 2 forwarded, 3 dropped, 5 relayed
    sent: int
    handle: int
    time_us: int


ACTIONS = {1: "consumed", 2: "forwarded", 3: "dropped", 5: "relayed"}


class I3LogReader:
    """The daemon's exception log, read incrementally (it wraps: `overrun` counts the
    records lost because the host read too late)."""

    def __init__(self, chip: Any, base: int = I3D_STATS_BASE) -> None:
        self.chip = chip
        self.at = base + _h_int("I3D_LOG_OFF")
        self.cap = _h_int("I3D_LOG_CAP")
        self.read = 0
        self.overrun = 0

    def take(self) -> list[I3LogRecord]:
        count = self.chip.read32("sram", self.at)
        if count <= self.read:
            return []
        if count - self.read > self.cap:
            self.overrun += count - self.read - self.cap
            self.read = count - self.cap
        out = []
        for k in range(self.read, count):
            raw = self.chip.mem_read("sram", self.at + 16 + 16 * (k % self.cap), 16)
            w = [int.from_bytes(raw[4 * i : 4 * i + 4], "big") for i in range(4)]
            out.append(I3LogRecord(w[0], w[1] >> 16, (w[1] >> 8) & 0xFF, w[1] & 0xFF, w[2] >> 24, (w[2] >> 16) & 0xFF,
                                   w[2] & 0xFFFF, w[3]))  # fmt: skip
        self.read = count
        return out


@dataclass(frozen=True)
class MirroredFilter:
    """A filter as the daemon's mirror in SRAM has it (i3d.h)."""

    handle: int
    slice_id: int
    code: int
    action: int
    ident: int
    length: int
    fast: bool
    in_mi: int  # 0xFF: any
    out_mi: int
    nh_ip: int
    nh_port: int
    entry: int

    def matches(self, slice_id: int, ident: int) -> bool:
        mask = ((1 << self.length) - 1) << (64 - self.length)
        return self.code == 2 and self.slice_id == slice_id and (self.ident ^ ident) & mask == 0


def mirror_changed_us(chip: Any, base: int = I3D_STATS_BASE) -> int:
    """When the daemon last wrote a TCAM filter in or out (µs of emulated time, read just
    after the write: its mirror's stamp)."""
    return int(chip.read32("sram", base + _h_int("I3D_MIRROR_OFF") + 8))


def read_mirror(chip: Any, base: int = I3D_STATS_BASE) -> list[MirroredFilter]:
    """The daemon's filters as it last published them (after every change)."""
    at = base + _h_int("I3D_MIRROR_OFF")
    n = min(chip.read32("sram", at), _h_int("I3D_MIRROR_CAP"))
    raw = chip.mem_read("sram", at + 16, 32 * n) if n else b""
    out = []
    for i in range(n):
        w = [int.from_bytes(raw[32 * i + 4 * k : 32 * i + 4 * k + 4], "big") for k in range(8)]
        out.append(MirroredFilter(w[0], w[1] >> 16, (w[1] >> 8) & 0xFF, w[1] & 0xFF, w[2] << 32 | w[3], w[4] >> 24,
                                  bool((w[4] >> 16) & 1), (w[4] >> 8) & 0xFF, w[4] & 0xFF, w[5], w[6] >> 16,
                                  w[7] - (1 << 32) if w[7] >> 31 else w[7]))  # fmt: skip
    return out


# ---- the control socket --------------------------------------------------------------------------


def request(socket: str | Path, command: str) -> list[str]:
    """One command to a running i3d (ControlSocketError: refused or unreachable)."""
    return control_request(socket, command)


def _pairs(words: list[str]) -> dict[str, str]:
    return {words[i]: words[i + 1] for i in range(0, len(words) - 1, 2)}


def parse_slice(line: str) -> dict[str, Any]:
    """A `slice show` line as data."""
    words = line.split()
    out: dict[str, Any] = {"id": int(words[1])}
    mis = []
    i = 2
    while i + 1 < len(words):
        k, v = words[i], words[i + 1]
        if k == "mi":
            name, index, port, ip, udp = v.split(":")
            mis.append({"name": name, "index": int(index), "port": int(port), "ip": ip, "udp": int(udp)})
        elif k in ("index", "share_ppm", "filters"):
            out[k] = int(v)
        else:
            out[{"code": "code_option"}.get(k, k)] = v
        i += 2
    out["meta_interfaces"] = mis
    return out


def parse_filter(line: str) -> dict[str, Any]:
    """A `filter show` / `filter add` line as data: handle, slice, entry (None: the GPE's
    alone), the fields, hits (packets the GPE delivered by it)."""
    words = line.split()
    slow = words[-3] == "slow" if len(words) > 3 else False
    body = [w for w in words[6:-2] if w != "slow"]
    return {"handle": int(words[1]), "slice": int(words[3]), "entry": None if words[5] == "-" else int(words[5]),
            "fields": _pairs(body), "slow": slow, "hits": int(words[-1])}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Write FOLDER/spp_gpe.yaml from FOLDER/spp.yaml (gpe_layout)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m npkit.toolchain.system.i3d")
    ap.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    (a.folder / "spp_gpe.yaml").write_text(gpe_layout((a.folder / "spp.yaml").read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["ControlSocketError", "I3LogReader", "I3LogRecord", "MirroredFilter", "gpe_layout", "i3d_conf", "load_substrate",
           "parse_filter", "parse_slice", "read_mirror", "read_stats", "request"]  # fmt: skip
