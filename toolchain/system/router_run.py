"""The whole router on the emulator: a linked system image, traffic through the MSF, its
control plane (the daemon on the XScale: npkit.toolchain.system.control), the oracle,
and the account of every packet.

    rr = RouterRun.link("pipelined", {"qm": "stub"}, traffic)     # or RouterRun(image, traffic)
    rr.run_traffic(duration_ns)        # offer the traffic
    rr.drain()                         # until nothing is in flight (or the cap)
    s = rr.summary()                   # ports, loss, latency, oracle comparison, conservation

Every packet ends forwarded (matched to its input by the generator's tag; by the fast
path, or by the control plane: a redirect, a held packet), dropped by the MSF or by the
microcode, or consumed by the control plane (its exception log in SRAM names each packet
it handled: a digest of the frame, the reason, what it did), or it is still in flight,
and then `census` says where.  Microcode drops are counted per reason, not per packet:
they are attributed to the packets the oracle says are dropped for that reason among
those with no other fate.  Every drop is judged against the oracle by the policy `npk
traffic compare` shares (npkit.emulator.traffic.fate): a resource drop (rbuf_full,
queue_full, ...) of a packet the oracle forwards or sends to the exception path is
`lost`, of one it drops `dropped_early` (neither loss nor a mismatch); a drop for
another reason the oracle gives, or of a packet it does not drop, is a mismatch.
Frames the router makes itself (ICMP, ARP) are kept apart and compared with those the
oracle's control plane predicts
(npkit.toolchain.system.control_run, npkit.emulator.traffic.control), byte for byte.
A run that went idle has its packet buffers audited too (npkit.toolchain.system.buffers):
each on the free list or held at rest by rx or the control daemon, else conservation
fails.
A layout without a control program (or `control: host`) keeps the host's stand-in
reader of the exception ring (`ExceptionReader`).

`run_router` is the one-call form used by `npk demo`, `npk run` on a router image, the
benchmarks and the tests; `verdict.judge` turns its summary into CI's pass/fail.
"""

from __future__ import annotations

import gc
import ipaddress
import time
from array import array
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.loader import load_image
from npkit.emulator.pktlib import port_load
from npkit.emulator.traffic.cpkt import (
    DROP,
    EXCEPTION,
    FORWARD,
    PYTHON,
    c_router,
    oracle_window,
)
from npkit.emulator.traffic.dataset import ControlEvent, ControlPlaneRecord
from npkit.emulator.traffic.fate import (
    DROPPED_EARLY,
    LOST,
    MATCHED_DROP,
    WRONG_REASON,
    is_resource_drop,
    judge_disposition,
)
from npkit.emulator.traffic.histogram import LatencyHistogram
from npkit.emulator.traffic.oracle import Drop, Forward, Outcome
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic.source import TAG, Traffic, TrafficSource
from npkit.emulator.traffic.window import Window
from npkit.emulator.traffic_run import DROPPED, EXCEPTED, Chunk, Departure, TrafficRun
from npkit.toolchain.debug.profile import fault_site_lines, image_placement, locate_faults

from .app import model_of_image, reasons_of_image
from .buffers import audit
from .errors import LinkError
from .mismatches import MismatchLog, forwarded
from .router_image import check_msf_io, router_config_of
from .sched_judge import attach_sched_judge
from .sysmap import HOST_EXC_BASE, SYS, read_counters
from .undeclared import arm_guard, is_undeclared, reason_name, undeclared_counts, undeclared_name
from .undeclared import report as undeclared_report
from .verdict import MISMATCHES
from .wire_idle import WireIdle

SLICE_NS = 20_000  # emulated time between the host's looks at the chip (exceptions, progress)
DRAIN_CAP_NS = 5_000_000  # the longest a drain may take: a stuck packet shows within it
HORIZON_NS = 5_000_000  # a packet with no fate this long after arriving was dropped by the microcode
UNDECLARED = "undeclared_reason"  # a drop or exception of a code no reason declares (undeclared.py)
RESOURCE_DROPS = ("buffer_exhausted", "queue_full", "exception_ring_full")
COMPARISON_KEYS = ("matched_forward", "untagged", "wrong_outcome", "wrong_port", "wrong_bytes", "reordered",
                   "forgotten", "matched_exception", "wrong_reason", "unmatched_exception", "unmatched",
                   "duplicates", "matched_control", "unexpected_control", "missing_control",
                   UNDECLARED)  # fmt: skip
CONTROL_KEYS = ("matched_control", "unexpected_control", "missing_control")


def tag_id(frame: bytes) -> int:
    """The generator's packet id carried in a frame, -1 if none."""
    k = frame.find(TAG)
    return int.from_bytes(frame[k + 4 : k + 8], "big") if 0 <= k and k + 8 <= len(frame) else -1


Identify = Callable[[bytes, int], int]
"""(frame taken off the exception ring, its input port) -> input packet id, -1 if unknown."""


def traffic_identifier(tr: Traffic) -> Identify:
    """Identify excepted frames among packets in memory: by the generator's tag (with
    equal bytes), else the earliest packet from that port with these bytes not identified
    before (frames the generator could not tag: ARP)."""
    taken: set[int] = set()
    index: dict[tuple[int, bytes], list[int]] = {}

    def identify(frame: bytes, port: int) -> int:
        pid = tag_id(frame)
        if not (0 <= pid < len(tr) and tr.frames[pid] == frame):
            if not index:
                for j in range(len(tr)):
                    index.setdefault((tr.ports[j], tr.frames[j]), []).append(j)
            pid = next((j for j in index.get((port, frame), []) if j not in taken), -1)
        taken.add(pid)
        return pid

    return identify


class ExceptionReader:
    """The exception path's host side, standing in for the XScale daemon: reads the log
    the stand-in ME (microcode/host/host_sink.uc) keeps of the exception ring, finds each
    record's packet, and gives the buffer back to the free list.  A chip service: it runs
    every SLICE_NS of emulated time in every command that runs the router.

    `identify` names each record's input packet; `on_record(pid, reason)` gets every
    record as it is read (without it the reader keeps them in `records`)."""

    def __init__(self, chip: Chip, identify: Identify | None = None,
                 on_record: Callable[[int, str], None] | None = None, reasons: Any = None) -> None:  # fmt: skip
        self.chip = chip
        self.identify = identify
        self.reasons = reasons if reasons is not None else load_reasons()
        self.records: list[tuple[int, str]] = []  # (packet id or -1, reason), without on_record
        self.on_record = on_record if on_record is not None else lambda pid, r: self.records.append((pid, r))
        self.count = 0
        self._read = 0

    def service(self) -> None:
        chip = self.chip
        n = chip.read32("sram", HOST_EXC_BASE)
        for k in range(self._read, n):
            pw = chip.read32("sram", HOST_EXC_BASE + 16 + 8 * k)
            rec = chip.read32("sram", HOST_EXC_BASE + 20 + 8 * k)
            i = pw & 0xFFFF
            length = chip.read32("sram", SYS.desc_addr(i) + 8) >> 16
            frame = chip.mem_read("dram", SYS.buf_addr(i), max(length, 1))
            pid = -1 if self.identify is None else self.identify(frame, (rec >> 16) & 0xFF)
            self.count += 1
            self.on_record(pid, reason_name(self.reasons, "exception", rec & 0xFF))
            free_buffer(chip, i)
        self._read = n

    @property
    def unread(self) -> int:
        return self.chip.read32("sram", HOST_EXC_BASE) - self._read


def flow_model_of_image(meta: dict[str, Any], config: Any) -> Any:
    """The flow table's model (npkit.emulator.traffic.flows.FlowModel) of an image linked
    with `-D classify=flows`, else None."""
    rec = meta.get("flows")
    if not rec:
        return None
    from npkit.emulator.traffic.flows import FlowModel, FlowTable

    return FlowModel(FlowTable.from_record(rec), config)


def attach_exception_reader(chip: Chip, traffic: Traffic | Identify | None = None,
                            on_record: Callable[[int, str], None] | None = None,
                            reasons: Any = None) -> ExceptionReader:  # fmt: skip
    """Service the exception path of a router image on `chip` in every run from now on.
    `traffic`: packets in memory to identify records by, or an identify function;
    `reasons`: the image's (npkit.toolchain.system.app.reasons_of_image; default npkit's)."""
    identify = traffic_identifier(traffic) if isinstance(traffic, Traffic) else traffic
    reader = ExceptionReader(chip, identify, on_record, reasons)
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
    """A linked router image on a chip with the MSF device, traffic and the exception
    reader; every packet is judged by the oracle and accounted for as it goes.

    Per packet nothing outlives its fate: each window of input packets gets the oracle's
    verdicts (C) when it is read; a frame that leaves is compared with them, timed
    (`latency`, a streaming histogram) and counted; exception records are compared as
    they are read; microcode drops, counted per reason, are attributed to the packets
    the oracle drops for that reason (then resource drops to the earliest packets with no
    other fate) once those are HORIZON_NS old, and at the end; every drop, and every
    exception record the host's reader takes, is judged (`on_judged(id, category)`
    hooks see each: npkit.emulator.traffic.fate).  `run.on_departure` takes
    hooks that see every frame that leaves (npkit.emulator.traffic_run.TxBins: throughput
    per time bin); `record=True` keeps every transmitted frame in `run.out` as before
    ({port: [(t_ns, bytes)]}: memory grows with the run)."""

    def __init__(self, image: Any, traffic: TrafficSource, chip_config: str | Path = "ixp2800",
                 chip: Chip | None = None, capture: str | Path | None = None, record: bool = False,
                 control: dict[str, Any] | None = None, ahead: bool | None = None) -> None:  # fmt: skip
        """`control`: how to start the image's control program (ControlPlane's keywords:
        placement, gdb_port, socket, kill_at_ns, restart_at_ns, options, echo); `ahead`:
        whether the traffic is read ahead in a child process (TrafficRun's; None: where safe)."""
        self.image = image
        self.reasons = reasons_of_image(image.meta)  # an application's codes too
        check_msf_io(image)
        self.config = router_config_of(image)
        self.model = model_of_image(image.meta, self.reasons, self.config)  # an application's model, or None
        self.router = c_router(self.config)
        self.flows = flow_model_of_image(image.meta, self.config)  # -D classify=flows, or None
        self.chip = chip if chip is not None else Chip(chip_config)
        if chip is None:
            load_image(self.chip, image)
        self.traffic = traffic
        self.run = TrafficRun(self.chip, traffic, capture=capture, record=record, ahead=ahead)
        arm_guard(self.chip, self.reasons)  # a drop or exception code no reason declares: who counted it
        self.comparison: Counter[str] = Counter()  # the frames the C ledger leaves to Python
        self.lost: Counter[tuple[str, str]] = Counter()  # (oracle's outcome kind, drop reason)
        self.dropped_early: Counter[str] = Counter()  # drop reason
        self.on_judged: list[Callable[[int, str], None]] = []  # (id, fate.judge_disposition's category)
        self.control: Any = None  # npkit.toolchain.system.control.ControlPlane
        self.cp: Any = None  # npkit.toolchain.system.control_run.ControlJudge
        self.reader: ExceptionReader | None = None
        self.run.on_drop.append(self._dropped)
        self.groups = _group_tally(self.run, self.model, self.reasons)  # the model's groups (slices), or None
        self.mismatches = MismatchLog()  # the packets judged wrong, named (the first MAX_NAMED)
        self.run.on_mismatch.append(self._ledger_mismatch)
        meta = image.meta.get("control") or {}
        placement = (control or {}).get("placement") or meta.get("placement")
        if meta and placement != "host" and meta.get("program") == "i3d":   # the SPP's GPE (i3d_run)
            from .i3d_run import GpeJudge, I3dPlane

            self.control = I3dPlane(self.chip, image, router=self.config, **(control or {}))
            self.cp = GpeJudge(self, SLICE_NS)
        elif (control or {}).get("timed"):
            raise LinkError("timed control commands (--control-at) are for the I3 daemon (control: {program: i3d}: "
                            f"the SPP's spp_gpe layout); this image's control program is {meta.get('program', 'none')}"
                            + ("" if placement != "host" else " (placement host)"))  # fmt: skip
        elif meta and placement != "host":
            from .control import ControlPlane
            from .control_run import ControlJudge

            self.control = ControlPlane(self.chip, image, changes=list(traffic.route_changes), router=self.config,
                                        **(control or {}))  # fmt: skip
            options = {**meta.get("options", {}), **(control or {}).get("options", {})}
            self.cp = ControlJudge(self, options, SLICE_NS)
        else:
            self.reader = attach_exception_reader(self.chip, self.run.find_input, self._exception, self.reasons)
        self.layout = str(image.meta.get("layout", "?"))
        self.params = dict(image.meta.get("params") or {})
        self.unattributed_drops: dict[str, int] = {}
        self.undeclared: list[dict[str, Any]] = []  # codes no reason declares (undeclared.report)
        self.traffic_ns = 0
        self.me_busy: dict[int, float] = {}
        self.drain_info: dict[str, Any] = {"enabled": False}
        # bytes the wire adds to a frame (preamble, FCS, gap), by port: 24 where the traffic
        # does not say (port_load takes the array as it is)
        self.over = array("I", (sum(traffic.wire[p]) if p in traffic.wire else 24 for p in range(256)))
        self.offered_bits: Counter[int] = Counter()
        self.demand_bits: Counter[int] = Counter()
        self.demand_pkts: Counter[int] = Counter()
        self.predicted_exc = 0  # packets the oracle's fast path sends to the exception path
        self.must_leave = 0  # ... and those it forwards: lost is out of these
        self.tx_bits: Counter[int] = Counter()
        # packets the oracle forwards that a queue_full drop took: by port, their count by
        # wire bits; against the idle time of the port's wire (`_expected_overload_drops`)
        self.queue_full_bits: dict[int, Counter[int]] = {}
        self.wire = WireIdle(int(self.run.dev.cfg["rate_bps"]), self.over, HORIZON_NS + 4 * SLICE_NS)
        self.run.on_tx.append(self.wire.departed)
        self._tx_until = 0
        self._assigned: Counter[str] = Counter()
        self.oracle_s = 0.0
        led = self.run.ledger
        for p in range(64):
            led.over[p] = self.over[p]
        self.run.feed.prepare("verdicts", self._verdicts)  # (as each window is read)
        self.run.on_window.append(self._window)
        self.run.on_push.append(self._pushed)
        self.run.compare = self._departed
        self.run.on_slice.append(self._sweep)
        self.sched = attach_sched_judge(self)  # qm: drr / dfq: the scheduler's properties (sched_judge)

    @property
    def latency(self) -> LatencyHistogram:
        """First wire byte in to first wire byte out, ns, of every frame that left."""
        return self.run.latency

    @classmethod
    def link(cls, layout: str | Path = "pipelined", params: dict[str, Any] | None = None,
             traffic: TrafficSource | None = None, routes: str | Path | None = None,
             router_config: str | Path | None = None, chip_config: str | Path | None = None,
             capture: str | Path | None = None, record: bool = False,
             control: dict[str, Any] | None = None, app: Any = None) -> RouterRun:  # fmt: skip
        """`chip_config` None: the application's (`chip:`), else ixp2800."""
        from .link import chip_config_of, link

        params = dict(params or {})
        params.setdefault("io", "msf")
        chip_config = chip_config_of(None if chip_config is None else str(chip_config), app)
        image = link(layout, params, routes, router_config, config=chip_config, app=app)
        return cls(image, traffic if traffic is not None else Traffic(), chip_config, capture=capture, record=record,
                   control=control)  # fmt: skip

    # -- the oracle, as packets come
    def _verdicts(self, w: Window) -> Any:
        """The oracle on a window (cpkt.Verdicts), as the feed reads it: on its thread
        while the core runs, when it reads ahead (then not in oracle_s, the run loop's
        own time in the oracle)."""
        if self.model is not None and self.model.standalone:  # an application without a base: its own model
            return self.model.verdicts(w.data, w.off, w.lens, w.ports)
        v = oracle_window(self.router, w.data, w.off, w.lens, w.ports)
        if self.flows is not None:
            v = self.flows.apply(v, w.data, w.off, w.lens, w.ports)
        return v if self.model is None else self.model.apply(v, w.data, w.off, w.lens)

    def _window(self, c: Chunk) -> None:
        t0 = time.perf_counter()
        w = c.w
        c.verdicts = c.extra["v"] = w.prepared["verdicts"] if w.prepared else self._verdicts(w)
        if self.cp is not None:
            self.cp.window(c)
        self._offered(w)
        self.oracle_s += time.perf_counter() - t0

    def _offered(self, w: Window) -> None:
        for p, (bits, _) in port_load(w.ports, w.lens, self.over).items():
            self.offered_bits[p] += bits

    def _pushed(self, c: Chunk, lo: int, hi: int) -> None:
        v = c.extra["v"]
        self.predicted_exc += v.kind.count(EXCEPTION, lo, hi)
        self.must_leave += hi - lo - v.kind.count(DROP, lo, hi)
        load = port_load(memoryview(v.port)[lo:hi], c.w.lens[lo:hi], self.over, memoryview(v.kind)[lo:hi], FORWARD)
        for p, (bits, pkts) in load.items():
            self.demand_bits[p] += bits
            self.demand_pkts[p] += pkts

    def add_demand(self, port: int, nbytes: int, sign: int = 1, packet: bool = True) -> None:
        """What port `port` must carry: a frame of `nbytes` more (sign -1: less); a frame
        the router makes itself is not a packet."""
        self.demand_bits[port] += sign * (nbytes + self.over[port]) * 8
        if packet:
            self.demand_pkts[port] += sign

    def outcome(self, pid: int) -> Outcome | None:
        """The oracle's verdict on input packet `pid` while its window is held (with a
        control plane: what the whole router does with it)."""
        c = self.run.chunk_of(pid)
        if c is None:
            return None
        o = self.cp.outcome(pid) if self.cp is not None else None
        i = pid - c.w.first
        return o if o is not None else c.extra["v"].outcome(i, c.w.off[i], c.w.lens[i])

    def _departed(self, d: Departure) -> None:
        """A frame the C ledger (npk_depart, which does the same for every frame whose tag
        names a held packet) left to Python: against the oracle, timed, in flow order."""
        port, data = d.port, d.data
        if d.t < self._tx_until:
            self.tx_bits[port] += (len(data) + self.over[port]) * 8
        res = self.comparison
        if not d.by_tag:
            # too short for the whole tag: identified by its bytes (the earliest held
            # packet with the bytes a router leaves alone), then judged like the rest
            res["untagged"] += 1
            if d.pid < 0:
                return  # matches no input: the run counts it unmatched
        c = d.chunk
        if c is None:
            late = getattr(self.cp, "late_copy", None)     # the I3 daemon's multicast copies
            key = late(d) if late is not None else None
            res[key or "forgotten"] += 1  # else a copy of a packet finished with long ago
            return
        i, w = d.i, c.w
        v = c.extra["v"]
        self.latency.add(d.t - w.times[i])
        if self.cp is not None:
            key = self.cp.judge(d)
            if key is not None:
                res[key] += 1
                if key in MISMATCHES:
                    self.name_mismatch(d.pid, key, forwarded(port, data, self.outcome(d.pid)))
                return
            if c.verdicts.kind[i] == PYTHON:  # left to the model, which has let it go: a copy
                res["forgotten"] += 1
                return
        if v.kind[i] != FORWARD:
            key = "wrong_outcome"
        elif v.port[i] != port:
            key = "wrong_port"
        else:
            o = w.off[i]
            key = "wrong_bytes" if v.out[o : o + w.lens[i]] != data else "matched_forward"
        res[key] += 1
        if key != "matched_forward":
            self.name_mismatch(d.pid, key, forwarded(port, data, self.outcome(d.pid)))
        # per-flow order (RFC 1812): input port, protocol, source and destination address
        o = w.off[i]
        if self.run.flow_reordered(bytes(w.data[o : o + w.lens[i]]), w.ports[i], d.pid):  # the input's flow
            res["reordered"] += 1

    def _dropped(self, pid: int, reason: str) -> None:
        """Every drop (by the MSF, the microcode, the control plane) against the oracle's
        outcome for its packet, as `npk traffic compare` judges it (fate.judge_disposition):
        lost and dropped_early are counted for the summary, mismatches in `comparison`.
        A resource drop is judged against what the fast path does with the packet unless
        the control plane's model names this very drop: a packet the fast path excepts
        was the control plane's, whatever that would have done with it."""
        o = self.outcome(pid)
        if o is None:
            return
        during = getattr(self.cp, "drop_outcome", None)   # a drop a change of the control plane's explains
        if during is not None:
            o = during(pid, reason, o)
        if is_undeclared(reason):  # the verdict names the code and who counted it
            self._judged(pid, UNDECLARED, {"outcome": "drop", "reason": reason})
            return
        if self.cp is not None and is_resource_drop(reason, self.reasons) and not (isinstance(o, Drop) and o.reason == reason):
            fast = self.cp.fast_outcome(pid)
            o = fast if fast is not None else o
        category = judge_disposition(o, "drop", reason, self.reasons)
        if category == LOST:
            self.lost[(o.kind, reason)] += 1
            if reason == "queue_full" and isinstance(o, Forward):
                self._note_queue_full(pid, o)
        elif category == DROPPED_EARLY:
            self.dropped_early[reason] += 1
        elif category != MATCHED_DROP:
            self.comparison[category] += 1
            self.name_mismatch(pid, category, {"outcome": "drop", "reason": reason}, o)
        for fn in self.on_judged:
            fn(pid, category)

    def _judged(self, pid: int, category: str, got: dict[str, Any] | None = None) -> None:
        self.comparison[category] += 1
        self.name_mismatch(pid, category, got or {"outcome": category})
        for fn in self.on_judged:
            fn(pid, category)

    def _ledger_mismatch(self, pid: int, port: int, frame: bytes) -> None:
        """A frame the C ledger compared and found wrong (TrafficRun.on_mismatch)."""
        o = self.outcome(pid)
        key = "wrong_outcome" if not isinstance(o, Forward) else "wrong_port" if o.port != port else "wrong_bytes"
        self.name_mismatch(pid, key, forwarded(port, frame, o), o)

    def name_mismatch(self, pid: int, category: str, got: dict[str, Any], expected: Any = None) -> None:
        """Name packet `pid` among the run's mismatches (MismatchLog), and count a forwarded
        packet's wrong port or bytes against its group (the kinds, the groups judge themselves)."""
        if self.groups is not None and category in ("wrong_port", "wrong_bytes"):
            self.groups.wrong(pid)
        c = self.run.chunk_of(pid) if pid >= 0 else None
        port_in = int(c.w.ports[pid - c.w.first]) if c is not None else None
        self.mismatches.add(pid, port_in, category, expected if expected is not None else self.outcome(pid), got)

    def _note_queue_full(self, pid: int, o: Forward) -> None:
        """A packet bound for port o.port that the queue manager dropped: from when it had
        wholly arrived the router had something for that wire."""
        c = self.run.chunk_of(pid)
        if c is None:
            return
        p = o.port
        end = c.w.times[pid - c.w.first] + self.wire.wire_ns(p, c.w.lens[pid - c.w.first])
        self.queue_full_bits.setdefault(p, Counter())[(len(o.data) + self.over[p]) * 8] += 1
        self.wire.owed_from(p, end)

    def _exception(self, pid: int, reason: str) -> None:
        """An exception record the host's reader took, against the oracle (as `_dropped`)."""
        if pid < 0:
            self.comparison["unmatched_exception"] += 1
            return
        if is_undeclared(reason):
            self._judged(pid, UNDECLARED, {"outcome": "exception", "reason": reason})
            self.run.mark(pid, EXCEPTED, reason)
            return
        o = self.outcome(pid)
        category = WRONG_REASON if o is None else judge_disposition(o, "exception", reason, self.reasons)
        self.comparison[category] += 1
        if category in MISMATCHES:
            self.name_mismatch(pid, category, {"outcome": "exception", "reason": reason}, o)
        for fn in self.on_judged:
            fn(pid, category)
        self.run.mark(pid, EXCEPTED, reason)

    def _sweep(self, final: bool = False) -> None:
        """Attribute the microcode's drop counters to packets HORIZON_NS old (all, when
        final) with no other fate: those the oracle drops for that reason first, then
        resource drops (timing, not the packet) to the earliest left."""
        before = 1 << 63 if final else self.run.now_ns - HORIZON_NS
        todo = self.run.unresolved(before)
        first = next(todo, None)
        if first is None:
            return
        counters = self.drop_counters()
        avail = {r: n - self._assigned[r] for r, n in counters.items()}
        # then drops of codes no reason declares (the verdict names them), to the earliest left
        undeclared = [r for r in counters if is_undeclared(r)]
        resource = [r for r in (*RESOURCE_DROPS, *undeclared) if avail.get(r, 0) > 0]
        cp = self.cp
        for c, i in _chain(first, todo):
            v = c.extra["v"]
            fast = cp.fast_outcome(c.first + i) if cp is not None else None
            if fast is not None:
                reason = fast.reason if isinstance(fast, Drop) else ""
            else:
                reason = v.names[v.reason[i]] if v.kind[i] == DROP else ""
            if not (reason and avail.get(reason, 0) > 0):
                while resource and avail[resource[0]] <= 0:
                    resource.pop(0)
                if not resource:
                    continue
                reason = resource[0]
            avail[reason] -= 1
            self._assigned[reason] += 1
            self.run.mark(c.w.first + i, DROPPED, reason)

    def _leftover_drops(self) -> None:
        """At the end of a run that went idle: drops the microcode counted for one reason
        that no packet the model drops for it took (a wrong model, or wrong microcode),
        when the packets left with no fate are exactly as many: each of them was dropped
        so, and is judged as such (a mismatch, named) rather than left "stuck"."""
        if not self.drain_info.get("idle"):
            return
        left = {r: n - self._assigned[r] for r, n in self.drop_counters().items()
                if n > self._assigned[r] and r not in RESOURCE_DROPS and not is_undeclared(r)}  # fmt: skip
        if len(left) != 1:
            return
        todo = list(self.run.unresolved(1 << 63))
        (reason, n), = left.items()
        if len(todo) != n:
            return
        for c, i in todo:
            self._assigned[reason] += 1
            self.run.mark(c.w.first + i, DROPPED, reason)

    def _finish(self) -> None:
        """Read what the exception path holds and attribute every drop counted."""
        if self.reader is not None:
            self.reader.service()
        if self.cp is not None:
            self.cp.finish()
        self._sweep(final=True)
        self._leftover_drops()
        counters = self.drop_counters()
        self.unattributed_drops = {k: n - self._assigned[k] for k, n in counters.items() if n - self._assigned[k]}
        self.undeclared = undeclared_report(self.chip, undeclared_counts(self.chip, self.reasons),
                                            list(getattr(self.image, "programs", [])))
        # the rest of a source the run did not get to still counts as offered
        for w in self.run.feed.rest():
            self._offered(w)

    # -- running
    def run_traffic(self, duration_ns: int, progress: Callable[[int], None] | None = None) -> str:
        """Offer the traffic for `duration_ns`; ME use is measured over this period."""
        self._tx_until = self.run.ledger.tx_until = self.run.now_ns + duration_ns
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
        came or went.  (Buffers still off the free list then are the ones kept at rest:
        rx's spare buffer per context, microcode/README.md §4.6, and what the control
        daemon holds; the summary audits them, npkit.toolchain.system.buffers.)"""
        start = self.run.now_ns
        quiet = 0
        last: tuple[int, int] | None = None
        while self.run.now_ns - start < cap_ns:
            self.run.run(SLICE_NS, progress=progress)
            c = self.census()
            state = (self.run.transmitted, c["buffers_in_use"])
            empty = (self.run.all_pushed and not c["rings"] and not c["queues"]
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
        if self.sched is not None:  # qm drr / dfq: their queues are their own (sched_judge)
            queues = self.sched.queued()
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

    def write_captures(self, outdir: str | Path) -> None:
        """Finish the captures (TrafficRun.write_captures), dispositions.json naming the
        control daemon that answered the exceptions (`control_record`)."""
        self.run.write_captures(outdir, control_plane=self.control_record())

    def control_record(self) -> dict[str, Any] | None:
        """dispositions.json's `control_plane` (npkit.emulator.traffic.dataset): the daemon's
        program and placement, the packets the fast path sent to the exception path, and
        its kills and restarts in emulated ns; None with the host's stand-in reader."""
        if self.control is None:
            return None
        mhz = float(self.chip.config["clock_mhz"])
        events = tuple(ControlEvent(int(c * 1000 // mhz), e) for c, e in self.control.system.events)
        return ControlPlaneRecord(str(self.image.meta["control"]["program"]), self.control.placement,
                                  sum(read_counters(self.chip, reasons=self.reasons)["exceptions"].values()), events).to_json()  # fmt: skip

    def close(self) -> None:
        """Stop the control program (its process, socket and files) and the traffic's
        reader (its child process); the chip and what was run stay."""
        self.run.close()
        if self.control is not None:
            self.control.close()

    # -- accounting
    def drop_counters(self) -> dict[str, int]:
        """The microcode's drop counters by reason, the control plane's own frames
        (control_queue_full: not input packets) left out; a code no reason declares by
        its `undeclared_name`."""
        drops = read_counters(self.chip, reasons=self.reasons)["drops"]
        drops.pop("control_queue_full", None)
        for (kind, code), n in undeclared_counts(self.chip, self.reasons).items():
            if kind == "drop":
                drops[undeclared_name(code)] = n
        return drops

    def control_queue_full(self) -> int:
        """Frames of the control plane's the queue manager dropped (its queue was full)."""
        return int(read_counters(self.chip, reasons=self.reasons)["drops"].get("control_queue_full", 0))

    def compare(self) -> dict[str, Any]:
        """Every transmitted frame and exception record against the oracle's prediction
        for its input, in a fixed order of keys."""
        led = self.run.ledger
        res = Counter(self.comparison)
        res.update({"matched_forward": led.matched, "wrong_outcome": led.wrong_outcome, "wrong_port": led.wrong_port,
                    "wrong_bytes": led.wrong_bytes, "reordered": led.reordered})  # fmt: skip
        res["unmatched"] = self.run.unmatched
        res["duplicates"] = self.run.duplicates_total
        always = ("unmatched", "duplicates")
        if self.cp is not None:
            res.update(self.cp.comparison(self.control_queue_full()))
            always += CONTROL_KEYS
        out: dict[str, Any] = {k: res[k] for k in COMPARISON_KEYS if res[k] or k in always}
        if self.mismatches.total:  # the packets, named (none: the key is left out)
            out["mismatches"] = self.mismatches.first
            out["mismatches_total"] = self.mismatches.total
        return out

    # -- the summary
    def summary(self, host_s: float = 0.0) -> dict[str, Any]:
        """Per-port throughput, loss, latency, ME use, oracle comparison, conservation.

        Loss (`totals`): `lost_by_outcome` counts the packets resource drops took, by what
        the oracle's fast path does with them (forward, exception: fate's `lost`, as `npk
        traffic compare` counts them); `lost` is their sum less the queue_full drops the
        offered load forces on oversubscribed ports (`expected_overload_drops`: all but
        those the wire's idle time could have carried, `_expected_overload_drops`), and
        `loss_pct` is `lost` in % of the packets the fast path forwards or excepts
        (`predicted_exception`: those it excepts, as compare predicts them).
        `dropped_early`: packets the oracle drops that a resource drop took first."""
        self._finish()
        rep = self.run.report()
        tot = rep["totals"]
        demand, demand_pkts = self.demand_bits, self.demand_pkts
        ports = [self._port_row(row, demand) for row in rep["ports"]]
        predicted_fwd = sum(demand_pkts.values())
        lost_fwd = sum(n for (kind, _), n in self.lost.items() if kind == "forward")
        lost_exc = sum(n for (kind, _), n in self.lost.items() if kind == "exception")
        overload = self._expected_overload_drops()
        not_fwd = predicted_fwd - tot["forwarded"]
        loss = max(0, lost_fwd - overload) + lost_exc
        seconds = max(1e-12, self.traffic_ns / 1e9)
        tx_bits = sum(p["tx_mbps"] for p in ports) * 1e6 * seconds
        line_bits = self.run.dev.cfg["rate_bps"] * self.run.dev.ports * seconds
        emulated_ms = self.run.now_ns / 1e6
        census = self.census()
        cp_problems = self._control_problems(tot)
        buffers, buffer_problems = self._buffer_audit()
        cp_problems += buffer_problems
        flows = self._flow_counts(tot)
        cp_problems += flows.get("problems", [])
        return {
            "layout": self.layout, "params": self.params, "duration_ms": self.traffic_ns / 1e6,
            "emulated_ms": round(emulated_ms, 3), "emulated_cycles": self.chip.cycle,
            "host_s": round(host_s, 2),
            "emulated_ms_per_host_s": round(emulated_ms / host_s, 2) if host_s else None,
            "ports": ports,
            "throughput": {"tx_mbps": round(tx_bits / seconds / 1e6, 1),
                           "offered_mbps": round(sum(p["offered_mbps"] for p in ports), 1),
                           "pct_line_rate": round(100 * tx_bits / line_bits, 3) if line_bits else 0.0},
            "totals": {**tot, "predicted_forward": predicted_fwd, "predicted_exception": self.predicted_exc,
                       "not_forwarded": not_fwd, "expected_overload_drops": overload, "lost": loss,
                       "lost_by_outcome": {"forward": lost_fwd, "exception": lost_exc},
                       "dropped_early": sum(self.dropped_early.values()),
                       "loss_pct": round(100 * loss / max(1, self.must_leave), 3)},
            "latency_us": self.latency.summary_us(),
            "me_utilisation": self._block_use(),
            "comparison": self.compare(),
            "conservation": {"balanced": rep["balanced"] and not cp_problems, "problems": rep["problems"] + cp_problems,
                             "in_flight": tot["in_flight"], "unattributed_drops": self.unattributed_drops,
                             "buffers": buffers},
            "in_flight": self._in_flight(tot["in_flight"], census),
            **({"undeclared_codes": self.undeclared} if self.undeclared else {}),  # codes no reason declares
            "drain": self.drain_info,
            **({self.groups.grouper.key: self.groups.report(), "group_keys": [self.groups.grouper.key]}
               if self.groups is not None else {}),
            "faults": locate_faults(self.chip.faults(), image_placement(self.image), self.chip.me_name),
            **({"control_plane": self.control_summary()} if self.control is not None else {}),
            **({"range_cache": self.range_cache()} if "range_cache" in self.image.meta else {}),
            **({"batching": self.batching()} if int((self.params or {}).get("batch", 1) or 1) > 1 else {}),
            **({"tcam": self.chip.tcam_stats()} if self.chip.tcam_info() is not None else {}),  # docs/tcam.md
            **({"scheduler": self.sched.summary()} if self.sched is not None else {}),
            **({"flows": flows} if self.flows is not None else {}),
        }  # fmt: skip

    def batching(self) -> dict[str, Any]:
        """Layout parameter batch=N (npk_block.h): the batches the batched blocks took and
        the messages in them (scratch counters at sysmap `batch_count`), over all of them."""
        at = int(self.image.meta.get("sysmap", {}).get("batch_count", SYS.batch_count))
        batches, messages = self.chip.read32("scratch", at), self.chip.read32("scratch", at + 4)
        return {"batch": int(self.params["batch"]), "batches": batches, "messages": messages,
                "mean_batch": round(messages / batches, 2) if batches else 0.0}

    def range_cache(self) -> dict[str, Any]:
        """Panama's aggregate route cache (layout parameter lookup=range_cache): its
        shape as the link built it, the fast path's hits and misses (scratch counters) and
        the sets the control plane invalidated on route changes."""
        m = self.image.meta["range_cache"]
        hits = self.chip.read32("scratch", m["hits_addr"])
        misses = self.chip.read32("scratch", m["misses_addr"])
        inval = self.chip.read32("scratch", m["invalidated_addr"])
        narrowed = self.chip.read32("scratch", m["narrowed_addr"]) if "narrowed_addr" in m else 0
        out = {k: m[k] for k in ("bits", "index_bits", "choice", "sets", "sets_filled", "ranges_total", "ranges_max")}
        return {**out, "hits": hits, "misses": misses, "hit_rate": round(hits / max(1, hits + misses), 4),
                "sets_invalidated": inval, "sets_narrowed": narrowed}

    def _flow_counts(self, tot: dict[str, Any]) -> dict[str, Any]:
        """The flow table's counters in SRAM against the model's (`-D classify=flows`):
        equal when no resource drop took a packet before the classify step could count it."""
        if self.flows is None:
            return {}
        t = self.flows.table
        rows, bad = [], []
        for f in t.flows:
            e = t.slots[f.key]
            chip = [self.chip.read32("sram", t.aux_base + 32 * e + 4 * k) for k in range(2)]
            want = self.flows.counts[f.key]
            rows.append({"flow": str(f.key), "action": f.action, "packets": chip[0], "bytes": chip[1],
                         "model_packets": want[0], "model_bytes": want[1],
                         **({"via": str(ipaddress.IPv4Address(f.via)), "port": f.port} if f.action == "route" else {}),
                         **({"plugin": f.plugin} if f.action == "plugin" else {})})
            if chip != want and f.key not in self.flows.changes:  # (one the daemon changed: its own count)
                bad.append(str(f.key))
        resource = sum(n for r, n in tot.get("dropped", {}).items() if r in RESOURCE_DROPS)
        problems = ([f"flow counters differ from the model's for {len(bad)} flows ({bad[0]} ...)"]
                    if bad and not resource else [])  # fmt: skip
        return {"entries": len(t.flows), "buckets": t.buckets, "hits": sum(r["packets"] for r in rows),
                "model_hits": self.flows.hits, "table": rows, "problems": problems}

    def _in_flight(self, count: int, census: dict[str, Any]) -> dict[str, Any]:
        """in_flight_report, and when exception records wait unread on the control plane's
        ring, where its daemon is (a daemon that hangs leaves them there)."""
        rep = in_flight_report(count, census, self.drain_info)
        unread = census.get("control", {}).get("exception_ring_records", 0)
        cp = self.control
        if cp is None or not rep["count"] or not unread:
            return rep
        if (cp.system.status() or {}).get("state") in ("running", "waiting"):     # crashed: failed() says it
            rep["why"] += f"; the control daemon is {cp.whereabouts()} with {unread} exception records unread"
        return rep

    def control_summary(self) -> dict[str, Any]:
        """The daemon's statistics (keys that say what they count) and the run's view."""
        assert self.control is not None and self.cp is not None
        out = self.control.summary()
        out["generated_frames_on_the_wire"] = sum(self.run.generated)
        out["packets_forwarded_by_it"] = self.cp.forwarded_by_it
        # what the run found in the send backlog of a daemon that died (read the instant it did)
        out["lost_in_send_backlog"] = {"own_frames": self.cp.killed_own, "forwarded_packets": self.cp.killed_forwarded}
        # ... and the packets it had taken from the exception ring but not logged (half handled)
        out["lost_half_handled"] = self.cp.killed_in_hand
        out["log_overrun"] = self.cp.log.overrun
        if getattr(self.cp, "app_handled", None):  # an application's exception reasons, by what npkd did (its log)
            out["app_exceptions"] = {r: dict(sorted(n.items())) for r, n in sorted(self.cp.app_handled.items())}
        if hasattr(self.cp, "summary"):      # the GPE's i3d: its path's latency on the wire
            out.update(self.cp.summary())
        if not out["running"]:
            out["exception_records_unread"] = self._control_census()["exception_ring_records"]
        return out

    def _control_problems(self, tot: dict[str, Any]) -> list[str]:
        """Frames the control plane made, counted: on the wire, or dropped by a full queue."""
        if self.control is None or self.cp is None:
            return []
        out = []
        if self.cp.log.overrun:
            out.append(f"the control plane's exception log wrapped before the host read it ({self.cp.log.overrun} records)")
        why = self.control.failed()
        if why:
            out.append(why)
        st = self.control.stats()
        if st and self.drain_info.get("idle"):
            made = st["counters"]["frames_sent"]
            seen = tot.get("generated", 0) + self.run.generated_aborted + self.control_queue_full() + self.cp.killed_own
            if made != seen:
                out.append(f"the control plane sent {made} frames; {seen} left the router, were dropped "
                           f"(control_queue_full) or died in its send backlog")  # fmt: skip
        for c in self.cp.timed_not_made():
            out.append(f"the timed route change at {c.at_ns} ns ({c.op} {c.route_text}) was never made by the daemon "
                       f"(due while no daemon ran or before it had its route table)")  # fmt: skip
        if st and not self.control.system.killed:   # the daemon started last counted its predecessors' backlogs
            c = st["counters"]
            daemon = (c.get("killed_backlog_own", 0), c.get("killed_backlog_forwarded", 0))
            if daemon != (self.cp.killed_own, self.cp.killed_forwarded):
                out.append(f"the daemon counts {daemon[0]} frames and {daemon[1]} packets lost in a send backlog at "
                           f"a kill; the run found {self.cp.killed_own} and {self.cp.killed_forwarded}")  # fmt: skip
        return out

    def _buffer_audit(self) -> tuple[dict[str, Any] | None, list[str]]:
        """Every buffer on the free list or held at rest (npkit.toolchain.system.buffers),
        once the run has gone idle (None: it did not, buffers may be anywhere)."""
        if not self.drain_info.get("idle"):
            return None, []
        owned = claimed = None
        if self.control is not None:
            from .control import owned_buffers

            owned = owned_buffers(self.chip)
            st = self.control.stats()
            if st is not None and not self.control.system.killed:
                claimed = st["counters"]["holding"] + st["counters"]["tx_backlog"]
        return audit(self.chip, self.image, owned, claimed)

    def _expected_overload_drops(self) -> int:
        """queue_full drops of packets the oracle forwards that the router could not have
        avoided: on each port, all those dropped but the most (smallest first) that the
        time its wire stood idle between the first of them and the last could have carried
        (npkit.toolchain.system.wire_idle).  A router that keeps the wire busy is charged
        none, whatever sizes its tail drop happened to take; one that leaves it idle
        while packets for it were dropped is charged every dropped packet the idle time
        could have carried (less than the smallest dropped: none).  These are
        predicted, not lost."""
        rate = int(self.run.dev.cfg["rate_bps"])
        forced = 0
        for p, sizes in self.queue_full_bits.items():
            idle = self.wire.idle_ns(p, self.run.now_ns) * rate // 10**9
            for bits in sorted(sizes):
                could = min(sizes[bits], idle // bits)
                forced += sizes[bits] - could
                idle -= could * bits
        return forced

    def _port_row(self, row: dict[str, Any], demand: Counter[int]) -> dict[str, Any]:
        p = row["port"]
        seconds = max(1e-12, self.traffic_ns / 1e9)
        tx_bits, offered_bits = self.tx_bits[p] + self.run.ledger.tx_bits[p], self.offered_bits[p]
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


def run_router(layout: str | Path, params: dict[str, Any] | None, traffic: TrafficSource, duration_ns: int,
               drain_ns: int | None = None, routes: str | Path | None = None,
               router_config: str | Path | None = None, progress: bool = False,
               chip_config: str | Path | None = None, image: Any = None, drain: bool = True,
               capture: str | Path | None = None, control: dict[str, Any] | None = None,
               on_start: Callable[[RouterRun], None] | None = None, app: Any = None) -> dict[str, Any]:  # fmt: skip
    """Link (or take `image`; `app`: the application `layout` belongs to, npkit.toolchain.system.app), offer `traffic` for `duration_ns`, drain, summarise.
    `on_start` is given the RouterRun before it runs (its chip stays usable after).

    `drain` runs on until the router is idle, capped by `drain_ns` (default DRAIN_CAP_NS);
    with drain=False the run stops when the traffic's `duration_ns` ends (`drain_ns` is
    only the drain's cap: it does not lengthen a run without one).  `capture`:
    a directory for port<N>.pcap and dispositions.json, written as the run goes.
    `control`: how to start the image's control program (RouterRun)."""
    if image is None:
        rr = RouterRun.link(layout, params, traffic, routes, router_config, chip_config, capture=capture,
                            control=control, app=app)  # fmt: skip
    else:
        rr = RouterRun(image, traffic, chip_config or "ixp2800", capture=capture, control=control)
    if on_start is not None:
        on_start(rr)
    # what set-up built (image, tables, modules) lives through the run: frozen, the
    # collector's full passes do not walk it again and again (about 2 % of a demo)
    gc.freeze()
    try:
        return _run(rr, duration_ns, drain, drain_ns, progress, capture)
    finally:
        gc.unfreeze()
        rr.close()


def _run(rr: RouterRun, duration_ns: int, drain: bool, drain_ns: int | None, progress: bool,
         capture: str | Path | None) -> dict[str, Any]:  # fmt: skip
    import sys

    t0 = time.perf_counter()

    def show(now: int) -> None:
        if progress and now % 500_000 < SLICE_NS:
            print(f"\r  {now / 1e6:6.2f} ms emulated", end="", file=sys.stderr, flush=True)

    rr.run_traffic(duration_ns, progress=show)
    if drain:
        rr.drain(drain_ns if drain_ns is not None else DRAIN_CAP_NS, progress=show)
    if progress:
        print(file=sys.stderr)
    s = rr.summary(time.perf_counter() - t0)
    if capture is not None:
        rr.write_captures(capture)
    return s


def _mismatch_lines(cmp_: dict[str, Any]) -> list[str]:
    """The mismatching packets a comparison names (MismatchLog.text)."""
    log = MismatchLog()
    log.first, log.total = list(cmp_.get("mismatches") or []), int(cmp_.get("mismatches_total") or 0)
    return log.text()


def _i3d_line(cp: dict[str, Any]) -> str:
    """The I3 daemon's line of a run's text: what it did with the exceptions, the GPE path's delay."""
    if not cp.get("running"):
        return f"control plane: i3d on the {cp['xscale']['placement']} never started serving: {cp['xscale']['state']}"
    c, d, w = cp["counters"], cp["gpe_delay_ns"], cp["gpe_latency_ns"]
    dropped = {k[8:]: v for k, v in c.items() if k.startswith("dropped_") and v}
    return (f"control plane: i3d on the {cp['xscale']['placement']}: exceptions {c['exceptions']}, delivered to "
            f"triggers {c['delivered']} (copies {c['copies']}), by a finger {c['finger_forwarded']}, consumed "
            f"{c['gpe_consumed']}, dropped {dropped or '{}'}, not I3 {c['exc_other'] + c['relayed']}; GPE path "
            f"delay us (daemon) mean {d['mean'] / 1000:.1f} p50 {d['p50'] / 1000:.1f} p99 {d['p99'] / 1000:.1f}, "
            f"(wire) p50 {w['p50'] / 1000:.1f} p99 {w['p99'] / 1000:.1f}; filters installed {c['filters_installed']}, "
            f"removed {c['filters_removed']}; packets on the fast path after their filter's install "
            f"{cp['fast_path_after_install']}"
            + (f"; forwarded by slices added at run time {cp['forwarded_by_slices_added']}"
               if cp.get("forwarded_by_slices_added") else "")
            + _npkd_beside(cp))  # fmt: skip


def _npkd_beside(cp: dict[str, Any]) -> str:
    """npkd beside i3d (spp_gpe -D gpe_ipv4=1): what it answered of the IPv4 slices' records."""
    n, a = cp.get("npkd"), cp.get("npkd_answers")
    if not n or not a:
        return ""
    c = n["counters"]
    return (f"\ncontrol plane: npkd beside it on the gpe ({n['state']}): relayed to it {cp['counters']['relayed']}, "
            f"answers {a['sent']} (matched {a['matched']}: echo replies {c['icmp_echo_reply']}, port unreachable "
            f"{c['icmp_port_unreachable']}, net unreachable {c['icmp_net_unreachable']}, time exceeded "
            f"{c['icmp_time_exceeded']}), handed back to i3d {cp['counters']['relayed_back']}")


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
              *_resource_drops_line(t),
              f"throughput {th['tx_mbps']} Mb/s out ({th['pct_line_rate']} % of line rate), "
              f"{th['offered_mbps']} Mb/s offered",
              f"latency us: mean {lat['mean']} p50 {lat['p50']} p99 {lat['p99']} max {lat['max']}",
              "ME utilisation: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in s["me_utilisation"].items()),
              f"comparison with the oracle: { {k: v for k, v in s['comparison'].items() if k != 'mismatches'} }",
              *_mismatch_lines(s["comparison"]),
              f"conservation: {'balanced' if s['conservation']['balanced'] else 'NOT balanced'}"
              + (f" {s['conservation']['problems']}" if s["conservation"]["problems"] else "")]  # fmt: skip
    bt = s.get("batching")
    if bt:
        lines.append(f"batching: up to {bt['batch']} messages a batch; {bt['batches']} batches of "
                     f"{bt['mean_batch']} messages on average (every batched block)")  # fmt: skip
    rc = s.get("range_cache")
    if rc:
        lines.append(f"range cache: {rc['sets']} sets on address bits {rc['index_bits']} ({rc['choice']}): "
                     f"hits {rc['hits']}, misses {rc['misses']} (hit rate {100 * rc['hit_rate']:.1f} %), "
                     f"sets invalidated by route changes {rc['sets_invalidated']} (narrowed and cached again "
                     f"{rc['sets_narrowed']})")  # fmt: skip
    fl = s.get("flows")
    if fl:
        by = ", ".join(f"{r['action']} {r['packets']}" for r in fl["table"])
        lines.append(f"flow table: {fl['entries']} declared flows in {fl['buckets']} buckets, {fl['hits']} packets "
                     f"counted (the model: {fl['model_hits']}): {by}")  # fmt: skip
    if s["faults"]["total"]:
        lines.append(f"chip faults: {s['faults']['total']} {s['faults']['counts']}")
        lines += fault_site_lines(s["faults"])
    cp = s.get("control_plane")
    if cp and cp.get("program") == "i3d":   # the SPP's GPE (npkit.toolchain.system.i3d_run)
        lines.append(_i3d_line(cp))
    elif cp and cp.get("running"):
        icmp = {k: v for k, v in cp["icmp_sent"].items() if v}
        lines.append(f"control plane: npkd on the {cp['xscale']['placement']} ({cp['state']}, "
                     f"{cp['xscale']['instructions']} instructions): exceptions {cp['exceptions_handled'] or '{}'}; "
                     f"ICMP sent {icmp or '{}'}, {cp['icmp_suppressed_by_rate_limit']} suppressed by the rate limit; "
                     f"ARP replies {cp['arp_replies_sent']}, requests {cp['arp_requests_sent']}; held for ARP "
                     f"{cp['packets_held_for_arp']} (sent {cp['held_packets_sent']}, dropped {cp['held_packets_dropped']}), "
                     f"its own frames dropped for want of ARP {cp['own_frames_dropped_no_arp']}; "
                     f"forwarded by it {cp['packets_forwarded_by_it']}, its frames on the wire {cp['generated_frames_on_the_wire']}"
                     + (f"; buffers its predecessor held, given back {cp['buffers_reclaimed']}" if cp.get("buffers_reclaimed") else "")
                     + (f"; route pool units its predecessor left, recovered {cp['route_pool_units_recovered']}"
                        if cp.get("route_pool_units_recovered") else "")
                     + (f"; timed route changes made late after a restart {cp['timed_changes_late']}"
                        if cp.get("timed_changes_late") else "")
                     + (f"; restarts {[e['event'] for e in cp['restarts']]}" if cp["restarts"] else "")
                     + (f"; the application's exceptions {cp['app_exceptions']}" if cp.get("app_exceptions") else ""))  # fmt: skip
    elif cp:    # no statistics block: the daemon never came up (crashed first, or hangs before serving)
        lines.append(f"control plane: npkd on the {cp['xscale']['placement']} never started serving (no statistics "
                     f"block): {cp['process']}, {cp['exception_records_unread']} exception records unread")  # fmt: skip
    for key in s.get("group_keys", []):
        lines.append(f"{key}:")
        for g in s.get(key, []):
            lat = g["latency_us"] or {}
            lines.append(f"  {g['name']:<12} {g.get('code_option', ''):<6} offered {g['offered']:>7} forwarded "
                         f"{g['forwarded']:>7}  dropped {g['dropped'] or '{}'} excepted {g['excepted'] or '{}'} "
                         f"latency p50/p99 us {lat.get('p50', '-')}/{lat.get('p99', '-')}  {g['verdict']}")  # fmt: skip
    v = s.get("verdict")
    if v is not None:
        lines.append("verdict: ok" if v["ok"] else "verdict: FAILED\n" + "\n".join(f"  - {r}" for r in v["reasons"]))
    return "\n".join(lines)


def _resource_drops_line(t: dict[str, Any]) -> list[str]:
    """What resource drops (rbuf_full, queue_full, ...) did, judged by the oracle: the
    packets lost, and those dropped early (dropped as the oracle says, for want of a
    resource before its reason); nothing when there were none."""
    by = t.get("lost_by_outcome") or {}
    fwd, exc, early = by.get("forward", 0), by.get("exception", 0), t.get("dropped_early", 0)
    if not (fwd or exc or early):
        return []
    overload = t.get("expected_overload_drops", 0)
    return [f"resource drops: lost {fwd} the oracle forwards"
            + (f" ({overload} of them queue_full the offered load forces: not loss)" if overload else "")
            + f", lost {exc} it sends to the exception path; dropped early {early} it drops too "
            f"(not loss, not a mismatch)"]


def _chain(first: Any, rest: Any) -> Any:
    yield first
    yield from rest


def _group_tally(run: Any, model: Any, reasons: Any) -> Any:
    """The per-group account of the model's `@group` classifier (emulator/traffic/groups.py), or None."""
    grouper = getattr(model, "grouper", None)
    if grouper is None:
        return None
    from npkit.emulator.traffic.groups import GroupTally

    return GroupTally(run, grouper, getattr(model, "ctx", None), reasons)
