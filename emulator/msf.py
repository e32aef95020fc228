"""Packets in and out of the emulated chip through the modelled MSF.

    from npkit.emulator.binding import Chip
    from npkit.emulator.msf import TrafficRun, load_traffic_source
    chip = Chip("ixp2800"); load_path(chip, "passthrough.elf")
    run = TrafficRun(chip, load_traffic_source("examples/passthrough/min64.yaml"))
    run.run(1_000_000)                       # ns of emulated time
    report = run.report(); run.write_captures("out/")

The device itself is C (emulator/src/units/msf_dev.c; model and register map in
the "MSF device" section of emulator/include/npk_emu.h and in
examples/passthrough/README.md).  Python hands packets over in bulk (slices of
emulated time ahead of the chip), drains transmitted frames in bulk, writes
OUT/port<N>.pcap (nanosecond timestamps = first wire byte) and
OUT/dispositions.json, and accounts for every offered packet.

Accounting (per input port): offered = forwarded + dropped (by reason) +
excepted + in flight.  Forwarded packets are found by matching each
transmitted frame to an input packet (the generator's b"NPK1"+id tag, else the
exact bytes, else the bytes a router does not rewrite); drops come from the MSF (rbuf_full, no_rx_thread,
tbuf_underrun) and from software counters (`software` hook, for microcode
drops and exceptions).  The run is *balanced* when no frame is unmatched or
duplicated, no packet has two fates, and in flight is not negative.
"""

from __future__ import annotations

import json
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .binding import Chip, EmulatorError
from .traffic.dataset import DISPOSITIONS, load_manifest, load_traffic, port_pcaps
from .traffic.pcap import PcapWriter
from .traffic.reasons import load_reasons

TAG = b"NPK1"
MSF_DEFAULTS: dict[str, int] = {
    "ports": 5,
    "rate_bps": 1_000_000_000,
    "rbuf_elem_bytes": 64,
    "rbuf_elems": 128,
    "tbuf_elem_bytes": 64,
    "tbuf_elems": 128,
    "preamble_bytes": 8,
    "fcs_bytes": 4,
    "ifg_bytes": 12,
    "tx_fifo_bytes": 4096,
    "spi_bps": 12_800_000_000,
    "freelist_depth": 128,
    "tx_start_bytes": 0,
}
DROP_NAMES = {32: "rbuf_full", 33: "no_rx_thread", 37: "tbuf_underrun"}
PORT_FIELDS = ["rx_offered", "rx_received", "rx_bytes", "rx_mpackets", "rx_drop_rbuf_full",
               "rx_drop_no_rx_thread", "tx_elements", "tx_frames", "tx_bytes", "tx_drop_underrun",
               "tx_orphans", "rx_pending"]  # fmt: skip


class MsfError(ValueError):
    """Bad MSF configuration or traffic that the device cannot take."""


def msf_config(chip: Chip, **overrides: int) -> dict[str, int]:
    """The chip config's `msf:` section over the defaults, then overrides."""
    cfg = dict(MSF_DEFAULTS)
    for k, v in (chip.config.get("msf") or {}).items():
        if k not in MSF_DEFAULTS:
            raise MsfError(f"config msf.{k}: unknown key (known: {', '.join(MSF_DEFAULTS)})")
        cfg[k] = int(v)
    for k, v in overrides.items():
        if k not in MSF_DEFAULTS:
            raise MsfError(f"msf override {k}: unknown key")
        cfg[k] = int(v)
    return cfg


# ---------------------------------------------------------------------------- traffic


@dataclass
class Traffic:
    """Input packets in id order (= arrival order), columnar."""

    times: array[int] = field(default_factory=lambda: array("Q"))
    ports: array[int] = field(default_factory=lambda: array("B"))
    lens: array[int] = field(default_factory=lambda: array("H"))
    frames: list[bytes] = field(default_factory=list)
    wire: dict[int, tuple[int, int, int]] = field(
        default_factory=dict
    )  # port: (preamble, fcs, ifg)
    link_bps: int | None = None
    source: str = ""

    def __len__(self) -> int:
        return len(self.frames)

    def add(self, time_ns: int, port: int, data: bytes) -> None:
        self.times.append(time_ns)
        self.ports.append(port)
        self.lens.append(len(data))
        self.frames.append(data)


def load_traffic_source(path: str | Path, duration_ns: int | None = None) -> Traffic:
    """A traffic spec (YAML, generated in memory) or a directory of port<N>.pcap
    (+ manifest.json for the wire model).  `duration_ns` keeps the packets that
    arrive before it; for a spec it replaces the spec's own duration_ns."""
    path = Path(path)
    tr = Traffic(source=str(path))
    if path.is_dir():
        if not port_pcaps(path):
            raise MsfError(f"{path}: no port<N>.pcap files")
        for pkt in load_traffic(path):
            if duration_ns is not None and pkt.time_ns >= duration_ns:
                continue
            tr.add(pkt.time_ns, pkt.port, pkt.data)
        man = load_manifest(path)
        if man:
            tr.link_bps = int(man.get("link_bps") or 0) or None
            for p in man.get("ports", []):
                w = p.get("wire", {})
                tr.wire[int(p["port"])] = (
                    int(w.get("preamble", 8)),
                    int(w.get("fcs", 4)),
                    int(w.get("ifg", 12)),
                )
        return tr
    from .traffic.generator import iter_packets
    from .traffic.spec import SpecError, load_spec

    try:
        spec = load_spec(path, overrides=None if duration_ns is None else {"duration_ns": duration_ns})
    except (SpecError, OSError) as e:
        raise MsfError(str(e)) from None
    tr.link_bps = int(spec.link_bps)
    for port in spec.ports:
        tr.wire[port.index] = (port.wire.preamble, port.wire.fcs, port.wire.ifg)
    for pkt in iter_packets(spec):
        if duration_ns is not None and pkt.time_ns >= duration_ns:
            continue
        tr.add(pkt.time_ns, pkt.port, pkt.data)
    return tr


# ---------------------------------------------------------------------------- device


class MsfDevice:
    """The C MSF device attached to `chip` (replaces any other MSF plug-in)."""

    def __init__(self, chip: Chip, **overrides: int) -> None:
        self.chip = chip
        self.ffi, self.lib = chip.ffi, chip.lib
        self.cfg = msf_config(chip, **overrides)
        c = self.ffi.new("npk_msf_cfg *")
        for k, v in self.cfg.items():
            setattr(c, k, v)
        self._dev = self.lib.npk_msf_create(chip._chip, c)
        if self._dev == self.ffi.NULL:
            raise MsfError(f"the emulator rejected the MSF config {self.cfg}")
        chip._msf_keep = self  # keeps the device alive as long as the chip uses it

    @property
    def ports(self) -> int:
        return self.cfg["ports"]

    def close(self) -> None:
        """Detach the device from its chip and free it (the chip gets the loopback stub)."""
        if self._dev != self.ffi.NULL:
            chip_alive = getattr(self.chip, "_chip", self.ffi.NULL) != self.ffi.NULL
            (self.lib.npk_msf_destroy if chip_alive else self.lib.npk_msf_release)(self._dev)
            self._dev = self.ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def set_wire(self, port: int, preamble: int, fcs: int, ifg: int) -> None:
        if self.lib.npk_msf_port_wire(self._dev, port, preamble, fcs, ifg) < 0:
            raise MsfError(
                f"bad wire model for port {port}: preamble {preamble} fcs {fcs} ifg {ifg}"
            )

    def push(
        self, times: array[int], ports: array[int], ids: array[int], lens: array[int], data: bytes
    ) -> None:
        n = len(times)
        if not n:
            return
        ffi = self.ffi
        rc = self.lib.npk_msf_rx_add(
            self._dev, n, ffi.from_buffer("uint64_t[]", times), ffi.from_buffer("uint8_t[]", ports),
            ffi.from_buffer("uint32_t[]", ids), ffi.from_buffer("uint16_t[]", lens),
            ffi.from_buffer("uint8_t[]", data or b"\0"),
        )  # fmt: skip
        if rc < 0:
            raise MsfError("the MSF refused the packets (port out of range or frame too long)")

    def drain(self) -> list[tuple[int, int, bytes, bool]]:
        """Frames that have departed: (port, departure ns, bytes, aborted)."""
        ffi = self.ffi
        nb = ffi.new("size_t *")
        n = self.lib.npk_msf_tx_ready(self._dev, nb)
        if not n:
            return []
        port = ffi.new("uint8_t[]", n)
        t = ffi.new("uint64_t[]", n)
        ln = ffi.new("uint16_t[]", n)
        ab = ffi.new("uint8_t[]", n)
        data = ffi.new("uint8_t[]", max(1, nb[0]))
        got = self.lib.npk_msf_tx_drain(self._dev, port, t, ln, ab, data, n, nb[0])
        blob = bytes(ffi.buffer(data, nb[0]))
        out = []
        off = 0
        for i in range(got):
            k = ln[i]
            out.append((port[i], t[i], blob[off : off + k], bool(ab[i])))
            off += k
        return out

    def drops(self) -> list[tuple[int, int, int]]:
        """(packet id, port, reason code) of MSF drops since the last call."""
        n = self.lib.npk_msf_drops(self._dev, self.ffi.NULL, self.ffi.NULL, self.ffi.NULL, 0)
        if not n:
            return []
        ids = self.ffi.new("uint32_t[]", n)
        ports = self.ffi.new("uint8_t[]", n)
        reasons = self.ffi.new("uint8_t[]", n)
        got = self.lib.npk_msf_drops(self._dev, ids, ports, reasons, n)
        return [(ids[i], ports[i], reasons[i]) for i in range(got)]

    def port_stats(self, port: int) -> dict[str, int]:
        st = self.ffi.new("npk_msf_port_stats *")
        if self.lib.npk_msf_port_stats_get(self._dev, port, st) < 0:
            raise MsfError(f"no port {port}")
        return {k: int(getattr(st, k)) for k in PORT_FIELDS}

    def stats(self) -> dict[str, int]:
        st = self.ffi.new("npk_msf_stats *")
        self.lib.npk_msf_stats_get(self._dev, st)
        keys = ["rsw_pushed", "freelist_overflow", "bad_element_done", "bad_tcw", "rbuf_free",
                "rbuf_full_list", "rbuf_held", "freelist_len", "tbuf_valid", "tx_sequence"]  # fmt: skip
        return {k: int(getattr(st, k)) for k in keys}


# ---------------------------------------------------------------------------- runs


def _loose_key(frame: bytes) -> bytes:
    """What a router leaves alone in a forwarded IPv4 frame: the length and everything
    from the IP source address on (the MACs, TTL and header checksum change)."""
    return b"L" + len(frame).to_bytes(2, "big") + frame[26:]


Software = Callable[[Chip], dict[str, list[tuple[int, str]]]]
"""Hook returning microcode-counted fates: {"drops": [(id, reason)], "exceptions": [(id, reason)]}."""


class TrafficRun:
    """Feed `traffic` through the MSF of `chip` and account for every packet."""

    def __init__(
        self, chip: Chip, traffic: Traffic, software: Software | None = None, **msf: int
    ) -> None:
        if traffic.link_bps and "rate_bps" not in msf:
            msf["rate_bps"] = traffic.link_bps
        self.chip = chip
        self.traffic = traffic
        self.software = software
        self.dev = MsfDevice(chip, **msf)
        bad = [p for p in set(traffic.ports) if p >= self.dev.ports]
        if bad:
            raise MsfError(
                f"traffic uses port(s) {sorted(bad)} but the MSF has {self.dev.ports} ports"
            )
        for p, (pre, fcs, ifg) in traffic.wire.items():
            if p < self.dev.ports:
                self.dev.set_wire(p, pre, fcs, ifg)
        self.clock_mhz = float(chip.config["clock_mhz"])
        self.pushed = 0
        self.out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(self.dev.ports)}
        self.aborted: list[tuple[int, int, bytes]] = []
        self.msf_drops: list[tuple[int, int, int]] = []
        self.now_ns = 0
        self.host_s = 0.0

    def _ns_to_cycle(self, ns: int) -> int:
        return int(ns * self.clock_mhz // 1000)

    def _push_until(self, t_ns: int) -> None:
        tr = self.traffic
        lo = self.pushed
        hi = lo
        n = len(tr)
        while hi < n and tr.times[hi] < t_ns:
            hi += 1
        if hi == lo:
            return
        self.dev.push(tr.times[lo:hi], tr.ports[lo:hi], array("I", range(lo, hi)), tr.lens[lo:hi],
                      b"".join(tr.frames[lo:hi]))  # fmt: skip
        self.pushed = hi

    def _collect(self) -> None:
        for port, t, data, aborted in self.dev.drain():
            if aborted:
                self.aborted.append((port, t, data))
            else:
                self.out[port].append((t, data))
        self.msf_drops.extend(self.dev.drops())

    def run(
        self,
        duration_ns: int,
        slice_ns: int = 20_000,
        progress: Callable[[int], None] | None = None,
    ) -> str:
        """Run the chip for `duration_ns` more nanoseconds of emulated time."""
        import time

        t0 = time.perf_counter()
        end = self.now_ns + duration_ns
        reason = "budget"
        while self.now_ns < end:
            step = min(slice_ns, end - self.now_ns)
            self._push_until(self.now_ns + step + slice_ns)
            target = self._ns_to_cycle(self.now_ns + step)
            reason = self.chip.run(max(0, target - self.chip.cycle))
            self.now_ns += step
            self._collect()
            if progress is not None:
                progress(self.now_ns)
            if reason not in ("budget", "halted"):
                break
        self.host_s += time.perf_counter() - t0
        return reason

    # -- accounting
    def identify(self, data: bytes) -> int | None:
        """The id of the offered packet `data` came from: the generator's tag, else
        the first packet with exactly these bytes; None when nothing matches."""
        tr = self.traffic
        k = data.find(TAG)
        if k >= 0 and k + 8 <= len(data):
            cand = int.from_bytes(data[k + 4 : k + 8], "big")
            if cand < self.pushed and TAG in tr.frames[cand]:
                return cand
        loose = _loose_key(data)
        for j in range(self.pushed):
            if tr.frames[j] == data:
                return j
        for j in range(self.pushed):
            if _loose_key(tr.frames[j]) == loose:
                return j
        return None

    def _match(self) -> tuple[dict[int, int], list[tuple[int, int]], list[int]]:
        """{input id: output port} for transmitted frames, unmatched (port, index), duplicate ids."""
        tr = self.traffic
        n = len(tr)
        fwd: dict[int, int] = {}
        unmatched: list[tuple[int, int]] = []
        dups: list[int] = []
        by_key: dict[bytes, deque[int]] | None = None
        for port, frames in self.out.items():
            for i, (_, data) in enumerate(frames):
                pid = -1
                k = data.find(TAG)
                if k >= 0 and k + 8 <= len(data):
                    cand = int.from_bytes(data[k + 4 : k + 8], "big")
                    if cand < self.pushed and TAG in tr.frames[cand]:
                        pid = cand
                if pid < 0:
                    if by_key is None:
                        by_key = {}
                        for j in range(min(n, self.pushed)):
                            by_key.setdefault(tr.frames[j], deque()).append(j)
                            by_key.setdefault(_loose_key(tr.frames[j]), deque()).append(j)
                    for key in (data, _loose_key(data)):
                        q = by_key.get(key)
                        while q and q[0] in fwd:
                            q.popleft()
                        if q:
                            pid = q.popleft()
                            break
                if pid < 0:
                    unmatched.append((port, i))
                elif pid in fwd:
                    dups.append(pid)
                else:
                    fwd[pid] = port
        return fwd, unmatched, dups

    def report(self) -> dict[str, Any]:
        """Per-port table and conservation totals."""
        tr = self.traffic
        reasons = load_reasons()
        fwd, unmatched, dups = self._match()
        fate: dict[int, tuple[str, str]] = {}
        conflicts: list[int] = []

        def mark(pid: int, kind: str, reason: str) -> None:
            if pid in fate or pid in fwd:
                conflicts.append(pid)
            fate[pid] = (kind, reason)

        for pid, _port, code in self.msf_drops:
            mark(pid, "drop", DROP_NAMES.get(code, str(code)))
        for _port, _t, data in self.aborted:
            found = self.identify(data)
            pid = -1 if found is None else found
            if 0 <= pid < self.pushed:
                mark(pid, "drop", "tbuf_underrun")
        if self.software is not None:
            sw = self.software(self.chip)
            for kind, key in (("drop", "drops"), ("exception", "exceptions")):
                for pid, reason in sw.get(key, []):
                    mark(int(pid), kind, reasons.get(kind, reason).name)  # type: ignore[arg-type]
        nports = self.dev.ports
        rows = []
        msf_ports = [self.dev.port_stats(p) for p in range(nports)]
        per_port: dict[int, list[int]] = {p: [] for p in range(nports)}
        for i in range(self.pushed):
            per_port[tr.ports[i]].append(i)
        for p in range(nports):
            st = msf_ports[p]
            offered = st["rx_offered"]
            ids = per_port[p][:offered]  # the MSF takes a port's packets in order
            forwarded = sum(1 for i in ids if i in fwd)
            drops: dict[str, int] = {}
            exc: dict[str, int] = {}
            for i in ids:
                f = fate.get(i)
                if f is None:
                    continue
                (drops if f[0] == "drop" else exc)[f[1]] = (drops if f[0] == "drop" else exc).get(
                    f[1], 0
                ) + 1
            ndrop = sum(drops.values())
            nexc = sum(exc.values())
            rows.append({
                "port": p, "offered": offered, "received": st["rx_received"],
                "transmitted": len(self.out[p]), "forwarded": forwarded,
                "dropped": drops, "exceptions": exc,
                "in_flight": offered - forwarded - ndrop - nexc,
                "rx_bytes": st["rx_bytes"], "tx_bytes": sum(len(d) for _, d in self.out[p]),
            })  # fmt: skip
        tot_off = sum(r["offered"] for r in rows)
        tot_fwd = sum(r["forwarded"] for r in rows)
        tot_drop: dict[str, int] = {}
        tot_exc: dict[str, int] = {}
        for r in rows:
            for k, v in r["dropped"].items():
                tot_drop[k] = tot_drop.get(k, 0) + v
            for k, v in r["exceptions"].items():
                tot_exc[k] = tot_exc.get(k, 0) + v
        in_flight = tot_off - tot_fwd - sum(tot_drop.values()) - sum(tot_exc.values())
        problems = []
        if unmatched:
            problems.append(f"{len(unmatched)} transmitted frame(s) match no input packet (first: port "
                            f"{unmatched[0][0]} frame {unmatched[0][1]})")  # fmt: skip
        if dups:
            problems.append(
                f"{len(dups)} input packet(s) transmitted more than once (first id {dups[0]})"
            )
        if conflicts:
            problems.append(f"{len(conflicts)} packet(s) with two fates (first id {conflicts[0]})")
        for r in rows:
            if r["in_flight"] < 0:
                problems.append(f"port {r['port']}: in flight is negative ({r['in_flight']})")
        tx_total = sum(r["transmitted"] for r in rows)
        if tx_total != tot_fwd + len(unmatched) + len(dups):
            problems.append(
                f"transmitted {tx_total} != forwarded {tot_fwd} + unmatched + duplicates"
            )
        return {
            "time_ns": self.now_ns,
            "cycle": self.chip.cycle,
            "host_s": round(self.host_s, 3),
            "ports": rows,
            "totals": {
                "offered": tot_off,
                "forwarded": tot_fwd,
                "transmitted": tx_total,
                "dropped": tot_drop,
                "exceptions": tot_exc,
                "in_flight": in_flight,
            },  # fmt: skip
            "msf": self.dev.stats(),
            "balanced": not problems,
            "problems": problems,
            "fates": {
                "drops": sorted((i, r) for i, (k, r) in fate.items() if k == "drop"),
                "exceptions": sorted((i, r) for i, (k, r) in fate.items() if k == "exception"),
            },  # fmt: skip
        }

    def write_captures(
        self, outdir: str | Path, report: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """OUT/port<N>.pcap for every port and OUT/dispositions.json."""
        outdir = Path(outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        for p, frames in self.out.items():
            with PcapWriter(outdir / f"port{p}.pcap") as w:
                for t, data in frames:
                    w.write(t, data)
        rep = report if report is not None else self.report()
        disp = {"drops": [{"id": i, "reason": r} for i, r in rep["fates"]["drops"]],
                "exceptions": [{"id": i, "reason": r} for i, r in rep["fates"]["exceptions"]]}  # fmt: skip
        (outdir / DISPOSITIONS).write_text(json.dumps(disp, indent=1) + "\n")
        return rep


def format_report(rep: dict[str, Any]) -> str:
    """The per-port table and the conservation line, for people."""
    lines = [f"{'port':>4} {'offered':>9} {'received':>9} {'transmitted':>11} {'dropped':>8} "
             f"{'exception':>9} {'in flight':>9}  drop reasons"]  # fmt: skip
    for r in rep["ports"]:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["dropped"].items())) or "-"
        lines.append(f"{r['port']:>4} {r['offered']:>9} {r['received']:>9} {r['transmitted']:>11} "
                     f"{sum(r['dropped'].values()):>8} {sum(r['exceptions'].values()):>9} "
                     f"{r['in_flight']:>9}  {reasons}")  # fmt: skip
    t = rep["totals"]
    lines.append(f"total: offered {t['offered']} = forwarded {t['forwarded']} + dropped "
                 f"{sum(t['dropped'].values())} + exceptions {sum(t['exceptions'].values())} + in flight "
                 f"{t['in_flight']}")  # fmt: skip
    if rep["balanced"]:
        lines.append("conservation: balanced")
    else:
        lines.append("CONSERVATION FAILED: " + "; ".join(rep["problems"]))
    return "\n".join(lines)


__all__ = ["MsfDevice", "MsfError", "Traffic", "TrafficRun", "load_traffic_source", "format_report",
           "msf_config", "EmulatorError"]  # fmt: skip
