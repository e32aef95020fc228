"""A traffic run: packets in and out of the emulated chip through the MSF device, and
the account of every packet offered.

    from npkit.emulator.binding import Chip
    from npkit.emulator.traffic_run import TrafficRun, load_traffic_source
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
from pathlib import Path
from typing import Any

from .binding import Chip, EmulatorError
from .msf_device import DROP_NAMES, MsfDevice, MsfError
from .traffic.dataset import DISPOSITIONS
from .traffic.pcap import PcapWriter
from .traffic.reasons import load_reasons
from .traffic.source import TAG, Traffic, TrafficError, load_traffic_source


def _loose_key(frame: bytes) -> bytes:
    """What a router leaves alone in a forwarded IPv4 frame: the length and everything
    from the IP source address on (the MACs, TTL and header checksum change)."""
    return b"L" + len(frame).to_bytes(2, "big") + frame[26:]


Software = Callable[[Chip], dict[str, list[tuple[int, str]]]]
"""Hook returning microcode-counted fates: {"drops": [(id, reason)], "exceptions": [(id, reason)]}."""
ControlFrame = Callable[[bytes], bool]
"""True for a transmitted frame the router made itself (a control plane's ICMP or ARP):
it is kept apart (`control_out`) and counted as generated, not matched to an input."""


class TrafficRun:
    """Feed `traffic` through the MSF of `chip` and account for every packet."""

    def __init__(
        self, chip: Chip, traffic: Traffic, software: Software | None = None,
        control_frame: ControlFrame | None = None, **msf: int,
    ) -> None:
        if traffic.link_bps and "rate_bps" not in msf:
            msf["rate_bps"] = traffic.link_bps
        self.chip = chip
        self.traffic = traffic
        self.software = software
        self.control_frame = control_frame
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
        self.control_out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(self.dev.ports)}
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
            elif self.control_frame is not None and self.control_frame(data):
                self.control_out[port].append((t, data))
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
                "generated": sum(len(v) for v in self.control_out.values()),
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
                for t, data in sorted([*frames, *self.control_out[p]], key=lambda f: f[0]):
                    w.write(t, data)
        rep = report if report is not None else self.report()
        disp = {"offered": self.pushed,
                "drops": [{"id": i, "reason": r} for i, r in rep["fates"]["drops"]],
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


__all__ = ["MsfError", "Traffic", "TrafficError", "TrafficRun", "load_traffic_source", "format_report",
           "EmulatorError"]  # fmt: skip
