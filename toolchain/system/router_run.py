"""The whole router on the emulator: a linked system image, traffic through the MSF, its
control plane (the daemon on the XScale: npkit.toolchain.system.control), the oracle,
and the account of every packet.

    rr = RouterRun.link("pipelined", {"qm": "stub"}, traffic)     # or RouterRun(image, traffic)
    rr.run_traffic(duration_ns)        # offer the traffic
    rr.drain()                         # until nothing is in flight (or the cap)
    s = rr.summary()                   # ports, loss, latency, oracle comparison, conservation

Every packet ends forwarded (matched to its input by the generator's tag; by the fast
path, or by the control plane: a redirect, a held packet), dropped by the MSF or by the
microcode, or consumed by the control plane (its exception log in SRAM names each
packet it handled: a digest of the frame, the reason, what it did), or it is still in
flight, and then `census` says where.  Microcode drops are counted per reason, not per
packet: they are attributed to the packets the oracle says are dropped for that reason
among those with no other fate.  Frames the router makes itself (ICMP, ARP) are kept
apart and compared with those the oracle's control plane predicts
(npkit.emulator.traffic.control), byte for byte.  A layout without a control program
keeps the host's stand-in reader of the exception ring (`ExceptionReader`).

`run_router` is the one-call form used by `npk demo`, `npk run` on a router image, the
benchmarks and the tests; `verdict.judge` turns its summary into CI's pass/fail.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.loader import load_image
from npkit.emulator.traffic.control import RouterModel
from npkit.emulator.traffic.oracle import Drop, Except, Forward, Outcome
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.source import TAG, Traffic
from npkit.emulator.traffic_run import TrafficRun

from .sysmap import HOST_EXC_BASE, SYS, read_counters

TS_TOLERANCE_MS = 20  # IP timestamps the control plane writes: its clock, up to this much after arrival

SLICE_NS = 20_000  # emulated time between the host's looks at the chip (exceptions, progress)
DRAIN_CAP_NS = 5_000_000  # the longest a drain may take: a stuck packet shows within it


class RouterImageError(ValueError):
    """A system image the router harness cannot run (no router config, routes changed)."""


def tag_id(frame: bytes) -> int:
    """The generator's packet id carried in a frame, -1 if none."""
    k = frame.find(TAG)
    return int.from_bytes(frame[k + 4 : k + 8], "big") if 0 <= k and k + 8 <= len(frame) else -1


def routes_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
    try:
        return RouterConfig.from_dict(cfg, source=Path(str(image.meta.get("router_config") or "<image>")))
    except ConfigError as e:
        raise RouterImageError(f"the image's router configuration: {e}") from None


class ExceptionReader:
    """The exception path's host side, standing in for the XScale daemon: reads the log
    the stand-in ME (microcode/host/host_sink.uc) keeps of the exception ring, finds each
    record's packet, and gives the buffer back to the free list.  A chip service: it runs
    every SLICE_NS of emulated time in every command that runs the router."""

    def __init__(self, chip: Chip, traffic: Traffic | None) -> None:
        self.chip = chip
        self.traffic = traffic
        self.reasons = load_reasons()
        self.records: list[tuple[int, str]] = []  # (packet id or -1, reason)
        self._read = 0
        self._taken: set[int] = set()
        self._index: dict[tuple[int, bytes], list[int]] | None = None

    def service(self) -> None:
        chip = self.chip
        n = chip.read32("sram", HOST_EXC_BASE)
        for k in range(self._read, n):
            pw = chip.read32("sram", HOST_EXC_BASE + 16 + 8 * k)
            rec = chip.read32("sram", HOST_EXC_BASE + 20 + 8 * k)
            i = pw & 0xFFFF
            length = chip.read32("sram", SYS.desc_addr(i) + 8) >> 16
            frame = chip.mem_read("dram", SYS.buf_addr(i), max(length, 1))
            pid = self._identify(frame, (rec >> 16) & 0xFF)
            self._taken.add(pid)
            self.records.append((pid, self.reasons.exception(rec & 0xFF).name))
            free_buffer(chip, i)
        self._read = n

    @property
    def unread(self) -> int:
        return self.chip.read32("sram", HOST_EXC_BASE) - self._read

    def _identify(self, frame: bytes, port: int) -> int:
        tr = self.traffic
        if tr is None:
            return -1
        pid = tag_id(frame)
        if 0 <= pid < len(tr) and tr.frames[pid] == frame:
            return pid
        # frames the generator could not tag (ARP): the earliest untaken input with these bytes
        if self._index is None:
            self._index = {}
            for j in range(len(tr)):
                self._index.setdefault((tr.ports[j], tr.frames[j]), []).append(j)
        return next((j for j in self._index.get((port, frame), []) if j not in self._taken), -1)


class ControlAccount:
    """The host's account of what the control plane did: every record of its exception
    log (npkit.toolchain.system.control.LogReader) tied to the input packet it is about
    (the digest of its frame, among the packets the fast path excepts), a chip service
    like the stand-in reader it replaces."""

    def __init__(self, rr: RouterRun) -> None:
        from .control import LogReader

        self.rr = rr
        self.log = LogReader(rr.chip)
        self.reasons = load_reasons()
        self.records: list[tuple[int, str, int]] = []   # (packet id or -1, reason, action)
        self._raw: list[Any] = []                         # log records not yet tied to a packet
        self._index: dict[tuple[int, int, int], list[int]] = {}
        self._indexed = 0
        self._taken: set[int] = set()
        rr.chip.add_service(self.service, int(SLICE_NS * float(rr.chip.config["clock_mhz"]) // 1000))

    def service(self) -> None:
        """Take the new log records (before the log wraps); which packet each is about is
        worked out when asked (`handled`), when the oracle has seen the packets anyway."""
        self._raw.extend(self.log.take())

    def _resolve(self) -> None:
        self.service()
        for rec in self._raw:
            pid = self._identify(rec.in_port, rec.length, rec.digest)
            try:
                name = self.reasons.exception(rec.reason).name
            except ValueError:
                name = f"code {rec.reason}"
            self.records.append((pid, name, rec.action))
        self._raw.clear()

    def _identify(self, port: int, length: int, digest: int) -> int:
        from npkit.emulator.traffic.control import frame_digest

        tr = self.rr.traffic
        for pid in range(self._indexed, self.rr.run.pushed):
            if isinstance(self.rr.fast_outcome(pid), Except):
                key = (tr.ports[pid], tr.lens[pid], frame_digest(tr.frames[pid]))
                self._index.setdefault(key, []).append(pid)
        self._indexed = max(self._indexed, self.rr.run.pushed)
        for pid in self._index.get((port, length, digest), []):
            if pid not in self._taken:
                self._taken.add(pid)
                return pid
        for pid in range(self.rr.run.pushed):   # the fast path excepted what the oracle did not
            if pid not in self._taken and tr.ports[pid] == port and tr.lens[pid] == length \
                    and frame_digest(tr.frames[pid]) == digest:  # fmt: skip
                self._taken.add(pid)
                return pid
        return -1

    def handled(self) -> list[tuple[int, str]]:
        self._resolve()
        return [(pid, reason) for pid, reason, _a in self.records]

    def consumed(self) -> list[tuple[int, str]]:
        """Packets that ended in the control plane (answered, counted, dropped there)."""
        self._resolve()
        return [(pid, reason) for pid, reason, action in self.records if action != 2]

    def forwarded(self) -> set[int]:
        """Packets the control plane sent on (redirects, options, packets held for ARP)."""
        self._resolve()
        return {pid for pid, _r, action in self.records if action == 2}


def attach_exception_reader(chip: Chip, traffic: Traffic | None = None) -> ExceptionReader:
    """Service the exception path of a router image on `chip` in every run from now on."""
    reader = ExceptionReader(chip, traffic)
    chip.add_service(reader.service, int(SLICE_NS * float(chip.config["clock_mhz"]) // 1000))
    return reader


def free_buffer(chip: Chip, i: int) -> None:
    """Enqueue buffer i on the free list (the chip is paused between run slices)."""
    d = SYS.desc_addr(i)
    head, tail, count = (chip.read32("sram", SYS.freelist_q + 4 * j) for j in range(3))
    chip.write32("sram", d, 0)
    chip.write32("sram", SYS.freelist_q if count == 0 else tail, d)
    chip.write32("sram", SYS.freelist_q + 4, d)
    chip.write32("sram", SYS.freelist_q + 8, count + 1)


class RouterRun:
    """A linked router image on a chip with the MSF device, traffic and the exception reader."""

    def __init__(self, image: Any, traffic: Traffic, chip_config: str | Path = "ixp2800",
                 chip: Chip | None = None, control: dict[str, Any] | None = None) -> None:  # fmt: skip
        """`control`: options for the control plane (ControlPlane's keywords: placement,
        gdb_port, socket, kill_at_ns, restart_at_ns, options, echo)."""
        self.image = image
        self.config = router_config_of(image)
        self._own = {a.to_bytes(4, "big") for a in self.config.addresses}
        self.chip = chip if chip is not None else Chip(chip_config)
        if chip is None:
            load_image(self.chip, image)
        self.traffic = traffic
        self.control: Any = None
        self.reader: ExceptionReader | None = None
        self.account: ControlAccount | None = None
        meta = image.meta.get("control") or {}
        placement = (control or {}).get("placement") or meta.get("placement")
        if meta and placement != "host":
            from .control import ControlPlane

            self.control = ControlPlane(self.chip, image, changes=traffic.route_changes, router=self.config,
                                        **(control or {}))  # fmt: skip
            self.account = ControlAccount(self)
        else:
            self.reader = attach_exception_reader(self.chip, traffic)
        options = {**meta.get("options", {}), **(control or {}).get("options", {})}
        self.model = RouterModel(self.config, options=options, neighbours=traffic.neighbours,
                                 route_changes=traffic.route_changes)  # fmt: skip
        self._modelled = 0
        self._finished = False
        self.run = TrafficRun(self.chip, traffic, software=self._software,
                              control_frame=self._is_control_frame if self.control is not None else None)  # fmt: skip
        self.layout = str(image.meta.get("layout", "?"))
        self.params = dict(image.meta.get("params") or {})
        self.unattributed_drops: dict[str, int] = {}
        self.traffic_ns = 0
        self.me_busy: dict[int, float] = {}
        self.drain_info: dict[str, Any] = {"enabled": False}

    @classmethod
    def link(cls, layout: str | Path = "pipelined", params: dict[str, Any] | None = None,
             traffic: Traffic | None = None, routes: str | Path | None = None,
             router_config: str | Path | None = None, chip_config: str | Path = "ixp2800",
             control: dict[str, Any] | None = None) -> RouterRun:  # fmt: skip
        from .link import link

        params = dict(params or {})
        params.setdefault("io", "msf")
        image = link(layout, params, routes, router_config, config=str(chip_config))
        return cls(image, traffic if traffic is not None else Traffic(), chip_config, control=control)

    def _model_upto(self, pid: int) -> None:
        """The oracle (fast path + control plane) run over the packets up to `pid`, in order."""
        tr = self.traffic
        if self._modelled == 0 and self.control is not None and pid >= 0:
            # route changes made through the control socket, at the time the daemon made
            # them (read once the run is over: the oracle runs after it)
            from .control import changes_made

            self.model.add_changes(changes_made(self.chip))
        while self._modelled <= pid and self._modelled < len(tr):
            k = self._modelled
            self.model.process(k, tr.frames[k], tr.ports[k], tr.times[k])
            self._modelled += 1

    def _finish_model(self) -> None:
        """Every packet offered modelled and the control plane's timers run out (held
        packets resolved or given up): once, when the run is over."""
        if not self._finished:
            self._model_upto(self.run.pushed - 1)
            self.model.finish()
            self._finished = True

    def outcome(self, pid: int) -> Outcome:
        """The oracle's verdict on input packet `pid`: what the router does with it, the
        control plane included (forwarded, dropped, consumed: `Except`)."""
        self._model_upto(pid)
        r = self.model.results[pid]
        if self.control is None:  # no control plane: what the fast path does is all
            return r.fast
        return r.final if r.final is not None else r.fast

    def fast_outcome(self, pid: int) -> Outcome:
        """What the fast path alone does with packet `pid`."""
        self._model_upto(pid)
        return self.model.results[pid].fast

    def _is_control_frame(self, frame: bytes) -> bool:
        """A frame the router made itself: ARP, or IPv4 from one of its own addresses."""
        kind = frame[12:14]
        return kind == b"\x08\x06" or (kind == b"\x08\x00" and frame[26:30] in self._own)

    # -- running
    def run_traffic(self, duration_ns: int, progress: Callable[[int], None] | None = None) -> str:
        """Offer the traffic for `duration_ns`; ME use is measured over this period."""
        reason = self.run.run(duration_ns, progress=progress)
        self.traffic_ns = self.run.now_ns
        cycles = max(1, self.chip.cycle)
        self.me_busy = {m["me"]: (m["executing_cycles"] + m["aborted_cycles"]) / cycles
                        for m in self.chip.stats()["mes"]}  # fmt: skip
        return reason

    def drain(self, cap_ns: int = DRAIN_CAP_NS, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Run on after the traffic until the router is idle or `cap_ns` passes.  Idle: all
        traffic offered, no message on a ring, no packet in a queue or in the MSF, no
        exception record unread, and for two slices running no frame left and no buffer
        came or went.  (Buffers still off the free list then are the ones blocks keep at
        rest, such as tx's spare buffer per context, microcode/README.md §4.6.)"""
        start = self.run.now_ns
        quiet = 0
        last: tuple[int, int] | None = None
        while self.run.now_ns - start < cap_ns:
            self.run.run(SLICE_NS, progress=progress)
            c = self.census()
            state = (sum(len(v) for v in self.run.out.values()), c["buffers_in_use"])
            empty = (self.run.pushed == len(self.traffic) and not c["rings"] and not c["queues"]
                     and not any(c["msf"].values()) and c["exception_records_unread"] == 0
                     and not any((c.get("control") or {}).values()))  # fmt: skip
            quiet = quiet + 1 if empty and state == last else 0
            last = state
            if quiet >= 2:
                break
        self.drain_info = {"enabled": True, "ns": self.run.now_ns - start, "idle": quiet >= 2,
                           "cap_ns": cap_ns}  # fmt: skip
        return self.drain_info

    def census(self) -> dict[str, Any]:
        """Where packets are inside the chip now: messages on each ring, packets in each
        output queue, MSF elements, and buffers off the free list (each packet holds one)."""
        chip = self.chip
        rings = {}
        for name, r in (self.image.meta.get("rings") or {}).items():
            words = chip.scratch_ring_count(int(r["ring"]))
            if words:
                rings[name] = words // 2  # every router ring carries 2-longword messages
        queues = {}
        for p in range(len(self.config.ports)):
            n = chip.read32("sram", SYS.qd_addr(p) + 8)
            if n:
                queues[p] = n
        dev = self.run.dev
        st = dev.stats()
        pending = sum(dev.port_stats(p)["rx_pending"] for p in range(dev.ports))
        in_use = SYS.n_bufs - chip.read32("sram", SYS.freelist_q + 8)
        return {
            "rings": rings, "queues": queues,
            "msf": {"rx_pending": pending, "rbuf_held": st["rbuf_held"], "tbuf_valid": st["tbuf_valid"]},
            "buffers_in_use": in_use,
            "in_blocks": max(0, in_use - sum(rings.values()) - sum(queues.values()) - self._held()),
            "exception_records_unread": self.reader.unread if self.reader is not None else 0,
            **({"control": self._control_census()} if self.control is not None else {}),
        }  # fmt: skip

    def _held(self) -> int:
        st = self.control.stats() if self.control is not None else None
        return st["counters"]["holding"] if st else 0

    def _control_census(self) -> dict[str, int]:
        """What the control plane still has to do: records on the exception ring, frames
        it holds for ARP or has not yet got onto the queue manager's ring."""
        st = self.control.stats()
        c = st["counters"] if st else {}
        return {"exception_ring_records": self.chip.scratch_ring_count(int(self.image.meta["control"]["exceptions_ring"])) // 2,
                "held_for_arp": c.get("holding", 0), "send_backlog": c.get("tx_backlog", 0)}  # fmt: skip

    def close(self) -> None:
        """Stop the control program (its process, socket and files); the chip stays."""
        if self.control is not None:
            self.control.close()

    # -- accounting
    def exceptions(self) -> list[tuple[int, str]]:
        """(packet id, reason) of every packet the exception path consumed (the control
        plane's log; without one, the host reader's records)."""
        if self.account is not None:
            return self.account.consumed()
        assert self.reader is not None
        self.reader.service()
        return list(self.reader.records)

    def drop_counters(self) -> dict[str, int]:
        return read_counters(self.chip)["drops"]

    def _software(self, chip: Chip) -> dict[str, list[tuple[int, str]]]:
        exc = self.exceptions()
        seen = {pid for pid, _ in exc}
        fwd, _, _ = self.run._match()
        msf = {pid for pid, _, _ in self.run.msf_drops}
        counters = Counter(self.drop_counters())
        drops = []
        left: list[int] = []
        for pid in range(self.run.pushed):
            if pid in seen or pid in fwd or pid in msf:
                continue
            o = self.fast_outcome(pid)
            if isinstance(o, Drop) and counters[o.reason] > 0:
                counters[o.reason] -= 1
                drops.append((pid, o.reason))
            else:
                left.append(pid)
        # resource drops (no buffer, queue full, ...) depend on timing, not on the
        # packet: they go to the earliest packets with no other fate
        counters.pop("control_queue_full", None)  # frames the control plane made: not input packets
        for name in ("buffer_exhausted", "queue_full", "exception_ring_full"):
            while counters[name] > 0 and left:
                counters[name] -= 1
                drops.append((left.pop(0), name))
        self.unattributed_drops = {k: v for k, v in counters.items() if v}
        return {"drops": drops, "exceptions": exc}

    def compare(self) -> dict[str, int]:
        """Every transmitted frame against the oracle's prediction for its input, every
        exception against the reason the oracle gives, and the frames the control plane
        made against those the oracle's control plane makes."""
        self._finish_model()
        fwd, unmatched, dups = self.run._match()
        res: Counter[str] = Counter()
        last: dict[tuple[int, int, bool], int] = {}
        cp_forwarded = self.account.forwarded() if self.account is not None else set()
        for port, frames in self.run.out.items():
            for _t, data in frames:
                pid = tag_id(data)
                if pid < 0:      # a frame too short for the whole tag: the bytes a router keeps
                    found = self.run.identify(data)
                    pid = -1 if found is None else found
                if pid < 0:
                    res["untagged"] += 1
                    continue
                res[self._judge_forward(pid, port, data)] += 1
                # packets the control plane sent on keep their order among themselves
                flow = (self.traffic.ports[pid], port, pid in cp_forwarded)
                if last.get(flow, -1) > pid:
                    res["reordered"] += 1
                last[flow] = pid
        for pid, reason in self._all_exceptions():
            if pid < 0:
                res["unmatched_exception"] += 1
                continue
            r = self.model.results[pid]
            ok = r.reason == reason or (reason == "arp_miss" and r.learnt_hop)
            res["matched_exception" if ok else "wrong_reason"] += 1
        res["unmatched"] += len(unmatched)
        res["duplicates"] += len(dups)
        if self.control is not None:
            res.update(self._compare_control())
        return dict(res)

    def _all_exceptions(self) -> list[tuple[int, str]]:
        if self.account is not None:
            return self.account.handled()
        return self.exceptions()

    def _judge_forward(self, pid: int, port: int, data: bytes) -> str:
        o = self.outcome(pid)
        r = self.model.results.get(pid)
        candidates = [o, *(r.alternatives if r is not None else [])]
        for c in candidates:
            if isinstance(c, Forward) and c.port == port and (c.data == data or self._same_but_timestamps(c, r, data)):
                return "matched_forward"
        if not any(isinstance(c, Forward) for c in candidates):
            return "wrong_outcome"
        if not any(isinstance(c, Forward) and c.port == port for c in candidates):
            return "wrong_port"
        return "wrong_bytes"

    @staticmethod
    def _same_but_timestamps(o: Forward, r: Any, data: bytes) -> bool:
        """IP timestamps (RFC 791) are the control plane's clock when it handled the
        packet: within TS_TOLERANCE_MS of the oracle's (arrival) value; the header
        checksum must then be right for the bytes sent; everything else identical."""
        if r is None or not r.timestamps or len(data) != len(o.data):
            return False
        got, want = bytearray(data), bytearray(o.data)
        for off in r.timestamps:
            delta = (int.from_bytes(got[off : off + 4], "big") - int.from_bytes(want[off : off + 4], "big")) % 86_400_000
            if delta > TS_TOLERANCE_MS:
                return False
            got[off : off + 4] = want[off : off + 4]
        hl = 4 * (data[14] & 0xF)
        from npkit.emulator.traffic.packet import internet_checksum

        if internet_checksum(data[14 : 14 + hl]) != 0:
            return False
        got[24:26] = want[24:26]
        return got == want

    def _compare_control(self) -> dict[str, int]:
        """The control plane's own frames (ICMP, ARP), per port, as multisets of bytes:
        those the oracle's control plane makes for the packets the daemon handled."""
        assert self.account is not None
        handled = {pid for pid, _ in self.account.handled()}
        want: Counter[tuple[int, bytes]] = Counter(
            (port, frame) for port, frame, pid in self.model.emitted if pid < 0 or pid in handled)
        got: Counter[tuple[int, bytes]] = Counter(
            (port, data) for port, frames in self.run.control_out.items() for _t, data in frames)
        matched = sum((want & got).values())
        dropped = self.drop_counters().get("control_queue_full", 0)   # a full output queue took them
        return {"matched_control": matched, "unexpected_control": sum((got - want).values()),
                "missing_control": max(0, sum((want - got).values()) - dropped)}  # fmt: skip

    def latencies_us(self) -> list[float]:
        """Per forwarded packet: departure (first wire byte out) - arrival (first in), us."""
        tr = self.traffic
        out = []
        for _port, frames in self.run.out.items():
            for t, data in frames:
                pid = tag_id(data)
                if 0 <= pid < len(tr):
                    out.append((t - tr.times[pid]) / 1000.0)
        return out

    # -- the summary
    def summary(self, host_s: float = 0.0) -> dict[str, Any]:
        """Per-port throughput, loss, latency, ME use, oracle comparison, conservation."""
        rep = self.run.report()
        tot = rep["totals"]
        demand, demand_pkts = self._demand()
        ports = [self._port_row(row, demand) for row in rep["ports"]]
        lat = self.latencies_us()
        predicted_fwd = sum(demand_pkts.values())
        overload = self._expected_overload_drops(demand, demand_pkts, tot["dropped"].get("queue_full", 0))
        not_fwd = predicted_fwd - tot["forwarded"]
        loss = max(0, not_fwd - overload)
        seconds = max(1e-12, self.traffic_ns / 1e9)
        tx_bits = sum(p["tx_mbps"] for p in ports) * 1e6 * seconds
        line_bits = self.run.dev.cfg["rate_bps"] * self.run.dev.ports * seconds
        emulated_ms = self.run.now_ns / 1e6
        census = self.census()
        return {
            "layout": self.layout, "params": self.params, "duration_ms": self.traffic_ns / 1e6,
            "emulated_ms": round(emulated_ms, 3), "emulated_cycles": self.chip.cycle,
            "host_s": round(host_s, 2),
            "emulated_ms_per_host_s": round(emulated_ms / host_s, 2) if host_s else None,
            "ports": ports,
            "throughput": {"tx_mbps": round(tx_bits / seconds / 1e6, 1),
                           "offered_mbps": round(sum(p["offered_mbps"] for p in ports), 1),
                           "pct_line_rate": round(100 * tx_bits / line_bits, 3) if line_bits else 0.0},
            "totals": {**tot, "predicted_forward": predicted_fwd, "not_forwarded": not_fwd,
                       "expected_overload_drops": overload, "lost": loss,
                       "loss_pct": round(100 * loss / max(1, predicted_fwd), 3)},
            "latency_us": latency_summary(lat),
            "me_utilisation": self._block_use(),
            "comparison": self.compare(),
            "conservation": {"balanced": rep["balanced"] and not self._control_problems(tot),
                             "problems": rep["problems"] + self._control_problems(tot),
                             "in_flight": tot["in_flight"], "unattributed_drops": self.unattributed_drops},
            "in_flight": in_flight_report(tot["in_flight"], census, self.drain_info),
            "drain": self.drain_info,
            **({"control_plane": self.control_summary()} if self.control is not None else {}),
        }  # fmt: skip

    def control_summary(self) -> dict[str, Any]:
        """The daemon's statistics (keys that say what they count) and the run's view."""
        assert self.control is not None and self.account is not None
        out = self.control.summary()
        out["generated_frames_on_the_wire"] = sum(len(v) for v in self.run.control_out.values())
        out["packets_forwarded_by_it"] = len(self.account.forwarded())
        out["log_overrun"] = self.account.log.overrun
        return out

    def _control_problems(self, tot: dict[str, Any]) -> list[str]:
        """Frames the control plane made, counted: on the wire, or dropped by a full queue."""
        if self.control is None or self.account is None:
            return []
        out = []
        if self.account.log.overrun:
            out.append(f"the control plane's exception log wrapped before the host read it ({self.account.log.overrun} records)")
        why = self.control.failed()
        if why:
            out.append(why)
        st = self.control.stats()
        if st and self.drain_info.get("idle"):
            made = st["counters"]["frames_sent"]
            seen = tot.get("generated", 0) + self.drop_counters().get("control_queue_full", 0)
            if made != seen:
                out.append(f"the control plane sent {made} frames; {seen} left the router or were dropped (control_queue_full)")
        return out

    def _demand(self) -> tuple[Counter[int], Counter[int]]:
        """Wire bits and packets the oracle sends to each output port (the input packets it
        forwards; and the control plane's own frames, which share the ports' wires)."""
        bits: Counter[int] = Counter()
        pkts: Counter[int] = Counter()
        tr = self.traffic
        for i in range(self.run.pushed):
            o = self.outcome(i)
            if isinstance(o, Forward):
                pre, fcs, ifg = tr.wire.get(int(o.port), (8, 4, 12))
                bits[int(o.port)] += (tr.lens[i] + pre + fcs + ifg) * 8
                pkts[int(o.port)] += 1
        if self.control is not None:
            self._finish_model()
            for port, frame, _pid in self.model.emitted:
                pre, fcs, ifg = tr.wire.get(port, (8, 4, 12))
                bits[port] += (len(frame) + pre + fcs + ifg) * 8
        return bits, pkts

    def _expected_overload_drops(self, bits: Counter[int], pkts: Counter[int], queue_full: int) -> int:
        """queue_full drops the offered load itself forces: what the oracle sends to a port
        beyond what its wire carries in the whole run (traffic + drain), in packets of the
        port's mean size.  These are predicted, not lost."""
        capacity = self.run.dev.cfg["rate_bps"] * self.run.now_ns / 1e9
        excess = sum((b - capacity) / (b / pkts[p]) for p, b in bits.items() if b > capacity)
        return min(queue_full, int(excess))

    def _port_row(self, row: dict[str, Any], demand: Counter[int]) -> dict[str, Any]:
        tr = self.traffic
        p = row["port"]
        pre, fcs, ifg = tr.wire.get(p, (8, 4, 12))
        over = pre + fcs + ifg  # wire bytes a frame costs beyond its pcap bytes
        seconds = max(1e-12, self.traffic_ns / 1e9)
        tx_bits = sum((len(d) + over) * 8 for t, d in self.run.out[p] if t < self.traffic_ns)
        offered_bits = sum((tr.lens[i] + over) * 8 for i in range(len(tr)) if tr.ports[i] == p)
        return {
            "port": p, "offered": row["offered"], "forwarded": row["forwarded"],
            "transmitted": row["transmitted"], "dropped": row["dropped"],
            "exceptions": row["exceptions"], "in_flight": row["in_flight"],
            "tx_mbps": round(tx_bits / seconds / 1e6, 1),
            "offered_mbps": round(offered_bits / seconds / 1e6, 1),
            "demand_out_mbps": round(demand[p] / seconds / 1e6, 1),
        }  # fmt: skip

    def _block_use(self) -> dict[str, float]:
        out = {}
        for prog in self.image.programs:
            if prog.mes:
                out[prog.name] = round(sum(self.me_busy.get(m, 0.0) for m in prog.mes) / len(prog.mes), 3)
        return out


def latency_summary(lat: list[float]) -> dict[str, float]:
    return {"mean": round(sum(lat) / len(lat), 3) if lat else 0.0, "p50": round(pct(lat, 50), 3),
            "p99": round(pct(lat, 99), 3), "max": round(max(lat), 3) if lat else 0.0}  # fmt: skip


def in_flight_report(count: int, census: dict[str, Any], drain: dict[str, Any]) -> dict[str, Any]:
    """How many packets are unaccounted for at the end, where they are, and why."""
    if count <= 0:
        return {"count": max(0, count), "why": ""}
    queued = sum(census["rings"].values()) + sum(census["queues"].values()) + sum(census["msf"].values())
    if not drain.get("enabled"):
        why = "the run ended without a drain: packets were still on their way (run with --drain)"
    elif not drain.get("idle"):
        why = (f"the router did not go idle within the {drain.get('cap_ns', 0) / 1e6:g} ms drain: "
               f"{queued} still queued on rings/queues/MSF, {census['in_blocks']} buffers held by no "
               "ring or queue (a block holding or leaking them)")  # fmt: skip
    else:
        why = "stuck: the router went idle with these packets neither sent, dropped nor excepted"
    return {"count": count, "why": why, "where": census}


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def run_router(layout: str | Path, params: dict[str, Any] | None, traffic: Traffic, duration_ns: int,
               drain_ns: int | None = None, routes: str | Path | None = None,
               router_config: str | Path | None = None, progress: bool = False,
               chip_config: str | Path = "ixp2800", image: Any = None, drain: bool = True,
               control: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Link (or take `image`), offer `traffic` for `duration_ns`, drain, summarise.

    `drain` runs on until the router is idle, capped by `drain_ns` (default DRAIN_CAP_NS);
    with drain=False exactly `drain_ns` (default 0) more nanoseconds run."""
    import sys

    if image is None:
        rr = RouterRun.link(layout, params, traffic, routes, router_config, chip_config, control)
    else:
        rr = RouterRun(image, traffic, chip_config, control=control)
    t0 = time.perf_counter()

    def show(now: int) -> None:
        if progress and now % 500_000 < SLICE_NS:
            print(f"\r  {now / 1e6:6.2f} ms emulated", end="", file=sys.stderr, flush=True)

    rr.run_traffic(duration_ns, progress=show)
    if drain:
        rr.drain(drain_ns if drain_ns is not None else DRAIN_CAP_NS, progress=show)
    elif drain_ns:
        rr.run.run(drain_ns, progress=show)
    if progress:
        print(file=sys.stderr)
    try:
        return rr.summary(time.perf_counter() - t0)
    finally:
        rr.close()


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"router {s['layout']} {s['params']}: {s['duration_ms']} ms of traffic, {s['emulated_ms']} ms "
             f"emulated in {s['host_s']} s ({s['emulated_ms_per_host_s']} ms/s)", "",
             f"{'port':>4} {'offered':>8} {'fwd':>8} {'Mb/s in':>8} {'Mb/s out':>9} {'demand':>8}  drops / exceptions",
             "  (demand: what the oracle routes to the port, Mb/s on the wire; above 1000 it must queue and drop)"]  # fmt: skip
    for p in s["ports"]:
        lines.append(f"{p['port']:>4} {p['offered']:>8} {p['forwarded']:>8} {p['offered_mbps']:>8} "
                     f"{p['tx_mbps']:>9} {p['demand_out_mbps']:>8}  {p['dropped'] or ''} {p['exceptions'] or ''}")  # fmt: skip
    t = s["totals"]
    lat = s["latency_us"]
    th = s["throughput"]
    lines += ["", f"forwarded {t['forwarded']} of {t['predicted_forward']} the oracle forwards "
              f"(loss {t['loss_pct']} %), in flight {s['in_flight']['count']}"
              + (f": {s['in_flight']['why']}" if s["in_flight"]["count"] else ""),
              f"throughput {th['tx_mbps']} Mb/s out ({th['pct_line_rate']} % of line rate), "
              f"{th['offered_mbps']} Mb/s offered",
              f"latency us: mean {lat['mean']} p50 {lat['p50']} p99 {lat['p99']} max {lat['max']}",
              "ME utilisation: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in s["me_utilisation"].items()),
              f"comparison with the oracle: {s['comparison']}",
              f"conservation: {'balanced' if s['conservation']['balanced'] else 'NOT balanced'}"
              + (f" {s['conservation']['problems']}" if s["conservation"]["problems"] else "")]  # fmt: skip
    cp = s.get("control_plane")
    if cp and cp.get("running"):
        icmp = {k: v for k, v in cp["icmp_sent"].items() if v}
        lines.append(f"control plane: npkd on the {cp['xscale']['placement']} ({cp['state']}, "
                     f"{cp['xscale']['instructions']} instructions): exceptions {cp['exceptions_handled'] or '{}'}; "
                     f"ICMP sent {icmp or '{}'}, {cp['icmp_suppressed_by_rate_limit']} suppressed by the rate limit; "
                     f"ARP replies {cp['arp_replies_sent']}, requests {cp['arp_requests_sent']}; held for ARP "
                     f"{cp['packets_held_for_arp']} (sent {cp['held_packets_sent']}, dropped {cp['held_packets_dropped']}); "
                     f"forwarded by it {cp['packets_forwarded_by_it']}, its frames on the wire {cp['generated_frames_on_the_wire']}"
                     + (f"; restarts {[e['event'] for e in cp['restarts']]}" if cp["restarts"] else ""))  # fmt: skip
    v = s.get("verdict")
    if v is not None:
        lines.append("verdict: ok" if v["ok"] else "verdict: FAILED\n" + "\n".join(f"  - {r}" for r in v["reasons"]))
    return "\n".join(lines)
