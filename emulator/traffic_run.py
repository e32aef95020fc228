"""A traffic run: packets in and out of the emulated chip through the MSF device, and
the account of every packet offered, kept as the packets go so that memory stays flat
however long the run.

    from npkit.emulator.binding import Chip
    from npkit.emulator.traffic_run import TrafficRun, load_traffic_source
    chip = Chip("ixp2800"); load_path(chip, "passthrough.elf")
    run = TrafficRun(chip, load_traffic_source("examples/passthrough/min64.yaml"), capture="out/")
    run.run(1_000_000)                       # ns of emulated time
    report = run.report(); run.write_captures("out/")

The device itself is C (emulator/src/units/msf_dev.c; model and register map in
the "MSF device" section of emulator/include/npk_emu.h and in
examples/passthrough/README.md).  Python reads the traffic source in windows of arrival
time (npkit.emulator.traffic.source), hands packets over in bulk (slices of emulated
time ahead of the chip), drains transmitted frames in bulk, and for each frame that
leaves: matches it to its input packet, counts it, writes it to OUT/port<N>.pcap
(`capture`; nanosecond timestamps = first wire byte), gives it to the departure hooks,
and forgets it.  Frames whose tag names a packet still held are matched and accounted in
C (the ledger, npk_depart in emulator/pkt/pkt_ledger.c: and compared with the oracle's
verdicts where the window has them, timed, checked for flow order); the rest (no tag,
a forgotten packet) go through `departed` and `compare` in Python.  A window of input packets is forgotten once every packet in it has a
fate.  OUT/dispositions.json (drops and exceptions by id) is spooled to disk as fates
come and written sorted at the end.

Accounting (per input port): offered = forwarded + dropped (by reason) +
excepted + in flight.  Forwarded packets are found by matching each
transmitted frame to an input packet (the generator's b"NPK1"+id tag, else the
exact bytes, else the bytes a router does not rewrite, else -- for a packet whose IP
options the control plane processed -- the bytes predicted for it, `expect`); drops come
from the MSF (rbuf_full, no_rx_thread, tbuf_underrun, oversize_frame) and from whoever
knows the software's fates (`mark`: the router harness marks microcode drops and
exceptions).  The run is *balanced* when no frame is unmatched or duplicated, no packet
has two fates, and in flight is not negative.

Frames the router makes itself (a control plane's ICMP and ARP: ARP, or IPv4 from one
of the router's own addresses, `router_addresses`) are not matched to input packets:
they are counted apart (`generated`), captured with the rest and given to the
`on_generated(port, t, frame)` hooks.

Hooks (for harnesses and experiments; the run keeps no per-packet record itself):
`on_window(chunk)` when a window of packets is read, `on_push(chunk, lo, hi)` when packets
lo..hi-1 of it go to the MSF, `on_advance()` after the chip ran a slice and before what
left in it is accounted, `on_departure(dep)` for every transmitted frame (a
`Departure`), `on_slice()` after every slice, `on_forget(chunk)` when a window is let
go, `on_drop(id, reason)` for every drop accounted, `on_exception(id, reason)` for every
exception.  `TxBins` counts what leaves per
time bin; `record=True` keeps every transmitted frame in `out` (and the router's own in
`generated_out`) (tests, small runs).
"""

from __future__ import annotations

import bisect
import heapq
import json
import mmap
import os
import tempfile
import time
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npkit.asm.base.writing import make_dir

from .binding import Chip, EmulatorError
from .msf_device import DROP_NAMES, MsfDevice, MsfError
from .pktlib import lib as pktlib
from .pktlib import port_load
from .traffic.dataset import DISPOSITIONS, write_dispositions_json
from .traffic.feed import WindowFeed
from .traffic.histogram import LatencyHistogram
from .traffic.pcap import PcapWriter
from .traffic.readahead import read_ahead
from .traffic.source import TAG, Traffic, TrafficError, TrafficSource, load_traffic_source
from .traffic.window import Window, offsets

FORWARDED, DROPPED, EXCEPTED = 1, 2, 4
READ_AHEAD_NS = 100_000  # how far ahead of the chip the source is read (one window)
NO_WIRE = array("I", bytes(4 * 256))  # port_load's wire overhead by port: frames' own bytes only


def _loose_key(frame: bytes) -> bytes:
    """What a router leaves alone in a forwarded IPv4 frame: the length and everything
    from the IP source address on (the MACs, TTL and header checksum change)."""
    return b"L" + len(frame).to_bytes(2, "big") + frame[26:]


def _rewritten_key(frame: bytes) -> bytes | None:
    """An IPv4 frame with options, but for what option processing may still change in
    bytes predicted for it (the TTL, header checksum and the options: IP timestamps
    are the control plane's clock): the key of a frame `TrafficRun.expect`s."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[14] & 0xF <= 5:
        return None
    hl = 4 * (frame[14] & 0xF)
    return b"O" + len(frame).to_bytes(2, "big") + frame[:22] + frame[23:24] + frame[26:34] + frame[14 + hl :]


def _predicted_key(frame: bytes) -> bytes | None:
    """An IPv4 frame with options as the control plane forwards it, but for what only the
    daemon decides: the contents of a Timestamp option past its 4-byte head (its clock)
    and so the header checksum.  Everything its option processing changes otherwise (the
    pointers, an overflow count, recorded addresses, a source-routed destination) stays
    in: the key names the frame predicted for one input, which another input's bytes
    cannot stand in for (`TrafficRun.expect`)."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[14] & 0xF <= 5:
        return None
    end = 14 + 4 * (frame[14] & 0xF)
    if len(frame) < end:
        return None
    f = bytearray(frame)
    f[24:26] = b"\0\0"
    i = 34
    while i < end and f[i] != 0:
        if f[i] == 1:
            i += 1
            continue
        ln = f[i + 1] if i + 1 < end else 0
        if ln < 2 or i + ln > end:
            break
        if f[i] == 68 and ln > 4:
            f[i + 4 : i + ln] = bytes(ln - 4)
        i += ln
    return b"P" + bytes(f)


class Chunk:
    """A window of input packets while the run still needs it: how far it has been
    pushed, each packet's fate bits, its tag ids, and what hooks attach (`extra`)."""

    __slots__ = ("w", "first", "end", "pushed", "fate", "left", "tags", "untagged", "extra", "scan", "verdicts")

    def __init__(self, w: Window, tags: array[int], untagged: list[int]) -> None:
        self.w = w
        self.first, self.end = w.first, w.end  # ids first .. end-1
        self.pushed = 0
        self.fate = bytearray(len(w))
        self.left = len(w)  # packets without a fate
        self.tags = tags  # the tag id each input frame carries (-1: none)
        self.untagged = untagged  # the packets whose tag is not their own id (known by bytes)
        self.extra: dict[str, Any] = {}
        self.scan = 0  # packets before this have a fate or were looked at by `unresolved`
        self.verdicts: Any = None  # the oracle's (npkit.emulator.traffic.cpkt.Verdicts), if judged


@dataclass(slots=True)
class Departure:
    """A transmitted frame: output port, departure ns (first wire byte), bytes, and the
    input packet it came from (pid -1: none; chunk None: that window is gone, or none);
    `by_tag`: found by the generator's tag (else by bytes)."""

    port: int
    t: int
    data: bytes
    pid: int
    chunk: Chunk | None
    i: int
    by_tag: bool


@dataclass
class _InPort:
    forwarded: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    exceptions: Counter[str] = field(default_factory=Counter)


@dataclass
class _OutPort:
    frames: int = 0
    nbytes: int = 0


class TxBins:
    """What leaves, per bin of departure time: frames and wire bits, in total and per
    output port (`run.on_departure.append(bins.add)`)."""

    def __init__(self, bin_ns: int, wire: dict[int, tuple[int, int, int]]) -> None:
        self.bin_ns = bin_ns
        self.over = {p: sum(w) for p, w in wire.items()}
        self.frames: Counter[int] = Counter()
        self.bits: Counter[int] = Counter()
        self.port_bits: dict[int, Counter[int]] = {}

    def add(self, d: Departure) -> None:
        b = d.t // self.bin_ns
        bits = (len(d.data) + self.over.get(d.port, 24)) * 8
        self.frames[b] += 1
        self.bits[b] += bits
        self.port_bits.setdefault(d.port, Counter())[b] += bits


class _FateSpool:
    """(id, reason) of every drop or exception, spooled to a file as they come, read back
    in id order at the end (the fates come in nearly id order: a merge of sorted runs)."""

    def __init__(self, directory: Path) -> None:
        fd, name = tempfile.mkstemp(prefix=".fates-", dir=directory)
        self.f = os.fdopen(fd, "w+b")
        os.unlink(name)
        self.buf = array("Q")
        self.reasons: list[str] = []
        self._code: dict[str, int] = {}

    def add(self, pid: int, reason: str) -> None:
        code = self._code.get(reason)
        if code is None:
            code = self._code[reason] = len(self.reasons)
            self.reasons.append(reason)
        self.buf.append(pid << 16 | code)
        if len(self.buf) >= 65536:
            self.flush()

    def flush(self) -> None:
        self.buf.tofile(self.f)
        del self.buf[:]

    def sorted(self) -> Iterator[tuple[int, str]]:
        self.flush()
        self.f.flush()
        size = self.f.seek(0, os.SEEK_END)
        if not size:
            return iter(())
        mm = mmap.mmap(self.f.fileno(), size, access=mmap.ACCESS_READ)
        recs = memoryview(mm).cast("Q")
        runs: list[tuple[int, int]] = []
        start = 0
        for k in range(1, len(recs)):
            if recs[k] < recs[k - 1]:
                runs.append((start, k))
                start = k
        runs.append((start, len(recs)))
        reasons = self.reasons
        merged = heapq.merge(*(recs[a:b] for a, b in runs))
        return ((r >> 16, reasons[r & 0xFFFF]) for r in merged)


class TrafficRun:
    """Feed a traffic source through the MSF of `chip` and account for every packet."""

    def __init__(self, chip: Chip, traffic: TrafficSource, capture: str | Path | None = None,
                 record: bool = False, ahead: bool | None = None, **msf: int) -> None:  # fmt: skip
        if traffic.link_bps and "rate_bps" not in msf:
            msf["rate_bps"] = traffic.link_bps
        self.chip = chip
        self.traffic = traffic
        self.dev = MsfDevice(chip, **msf)
        bad = sorted(p for p in traffic.port_set() if p >= self.dev.ports)
        if bad:
            raise MsfError(f"traffic uses port(s) {bad} but the MSF has {self.dev.ports} ports")
        for p, (pre, fcs, ifg) in traffic.wire.items():
            if p < self.dev.ports:
                self.dev.set_wire(p, pre, fcs, ifg)
        self.clock_mhz = float(chip.config["clock_mhz"])
        # the source is read in a second process while the core runs (traffic/readahead.py;
        # ahead: None where that is safe, True always, False never)
        reader = read_ahead(traffic.reader(), READ_AHEAD_NS, ahead)
        # ... in windows, the next one read while the core runs (traffic/feed.py), each
        # with its packets' tags and what hooks `feed.prepare` (the oracle's verdicts)
        self.feed = WindowFeed(reader, READ_AHEAD_NS)
        self.feed.prepare("tags", self._tag_ids)
        self.chunks: list[Chunk] = []  # read and not yet forgotten, in id order
        self._firsts: list[int] = []
        self._last: Chunk | None = None  # the chunk chunk_of found last
        self.pushed = 0  # packets handed to the MSF (ids 0 .. pushed-1)
        self.read = 0  # packets read from the source
        self.now_ns = 0
        self.host_s = 0.0
        # host seconds by part: core (Chip.run and its services), traffic (reading the
        # source and handing packets to the MSF), accounting (what leaves, fates)
        self.times: dict[str, float] = {"core": 0.0, "traffic": 0.0, "accounting": 0.0}
        self.ports_in = [_InPort() for _ in range(self.dev.ports)]
        self.ports_out = [_OutPort() for _ in range(self.dev.ports)]
        self.unmatched = 0
        self.first_unmatched: tuple[int, int] | None = None
        self.duplicates = 0
        self.first_duplicate = -1
        self.conflicts = 0
        self.first_conflict = -1
        self._untagged: dict[bytes, deque[int]] = {}
        self._expected: dict[int, tuple[bytes, bytes]] = {}  # untagged packets whose output bytes were
        # predicted (`expect`): their keys (_predicted_key, _rewritten_key)
        self.on_window: list[Callable[[Chunk], None]] = []
        self.on_push: list[Callable[[Chunk, int, int], None]] = []
        self.on_departure: list[Callable[[Departure], None]] = []
        self.on_slice: list[Callable[[], None]] = []
        self.on_advance: list[Callable[[], None]] = []
        self.on_forget: list[Callable[[Chunk], None]] = []
        self.on_generated: list[Callable[[int, int, bytes], None]] = []
        self.on_drop: list[Callable[[int, str], None]] = []  # (id, reason) of each drop accounted
        self.on_exception: list[Callable[[int, str], None]] = []  # (id, reason) of each exception accounted
        # (id, port, frame) of each frame the C ledger compared and found wrong (outcome, port
        # or bytes): looked for only in a batch whose mismatch counts grew
        self.on_mismatch: list[Callable[[int, int, bytes], None]] = []
        self.on_tx: list[Callable[[Any], None]] = []  # each batch of departures (msf_device.Drained)
        self.own: frozenset[bytes] = frozenset()  # the router's addresses (router_addresses)
        self.generated = [0] * self.dev.ports  # frames the router made itself, by output port
        self.generated_aborted = 0  # ... of those, cut short by a transmit underrun
        self.ffi, self.lib = pktlib()
        # the C ledger accounts every frame whose tag names a held packet (and, where the
        # window has verdicts, compares it); `compare` gets the frames it leaves to Python
        self.ledger = self.ffi.gc(self.lib.npk_ledger_new(), self.lib.npk_ledger_free)
        if self.ledger == self.ffi.NULL:
            raise MemoryError("no memory for the departure ledger")
        self.compare: Callable[[Departure], None] | None = None
        self.latency = LatencyHistogram()
        self._flow_limit = 4096
        self.out: dict[int, list[tuple[int, bytes]]] | None = None
        self.generated_out: dict[int, list[tuple[int, bytes]]] | None = None
        if record:
            self.out = {p: [] for p in range(self.dev.ports)}
            self.generated_out = {p: [] for p in range(self.dev.ports)}
        self.capture_dir: Path | None = None
        self._writers: dict[int, PcapWriter] = {}
        self._spools: dict[str, _FateSpool] | None = None
        self._mem_fates: dict[str, list[tuple[int, str]]] | None = {"drop": [], "exception": []} if record else None
        if capture is not None:
            self.capture(capture)

    def router_addresses(self, addresses: list[int]) -> None:
        """The router's own IPv4 addresses: frames from them (and ARP) are its own."""
        if len(addresses) > len(self.ledger.own):
            raise MsfError(f"{len(addresses)} router addresses: the ledger knows at most {len(self.ledger.own)}")
        self.own = frozenset(a.to_bytes(4, "big") for a in addresses)
        for i, a in enumerate(addresses):
            self.ledger.own[i] = a
        self.ledger.n_own = len(addresses)

    def is_generated(self, frame: bytes) -> bool:
        """A frame the router made itself (with router_addresses): ARP, or IPv4 from one
        of its addresses (npk_depart decides the same in C)."""
        kind = frame[12:14]
        return bool(self.own) and (kind == b"\x08\x06" or (kind == b"\x08\x00" and frame[26:30] in self.own))

    # -- captures
    def capture(self, outdir: str | Path) -> None:
        """Write OUT/port<N>.pcap as frames leave, and spool the fates for
        OUT/dispositions.json (`write_captures` finishes both).  Call before running."""
        if self.chunks or self.now_ns:
            raise MsfError("captures are written as frames leave: ask for them before the run starts")
        outdir = make_dir(outdir)
        self.capture_dir = outdir
        self._writers = {p: PcapWriter(outdir / f"port{p}.pcap") for p in range(self.dev.ports)}
        self._spools = {"drop": _FateSpool(outdir), "exception": _FateSpool(outdir)}

    def write_captures(self, outdir: str | Path, report: dict[str, Any] | None = None,
                       control_plane: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """Finish OUT/port<N>.pcap and write OUT/dispositions.json; returns the report.
        `control_plane`: what answered the run's exceptions, for the file's key of that
        name (npkit.emulator.traffic.dataset; a router run gives it: RouterRun.write_captures)."""
        outdir = Path(outdir)
        rep = report if report is not None else self.report()
        if self.capture_dir is not None and outdir.resolve() == self.capture_dir.resolve():
            for w in self._writers.values():
                w.close()
            assert self._spools is not None
            drops, excs = self._spools["drop"].sorted(), self._spools["exception"].sorted()
        elif self.out is not None and self._mem_fates is not None:
            make_dir(outdir)
            gen = self.generated_out or {}
            for p, frames in self.out.items():
                with PcapWriter(outdir / f"port{p}.pcap") as w:
                    for t, data in sorted([*frames, *gen.get(p, [])], key=lambda f: f[0]):
                        w.write(t, data)
            drops, excs = iter(sorted(self._mem_fates["drop"])), iter(sorted(self._mem_fates["exception"]))
        else:
            raise MsfError(f"no captures for {outdir}: frames are written as they leave, so ask for them "
                           "before the run (TrafficRun(..., capture=DIR))")  # fmt: skip
        with open(outdir / DISPOSITIONS, "w") as f:
            write_dispositions_json(f, self.pushed, drops, excs, control_plane)
        return rep

    # -- feeding the MSF
    def _ns_to_cycle(self, ns: int) -> int:
        return int(ns * self.clock_mhz // 1000)

    def _read_to(self, t_ns: int) -> None:
        """Read the source up to t_ns (in READ_AHEAD_NS windows)."""
        while self.feed.until < t_ns and not self.feed.done:
            w = self.feed.next()
            if w is not None:
                self._add_window(w)

    def _tag_ids(self, w: Window) -> tuple[array[int], list[int]]:
        """The id each packet's payload tag names (-1: none), C; and the packets (indices)
        whose tag is not their own id."""
        n = len(w)
        tags = array("q", bytes(8 * n))
        ffi = self.ffi
        if n:
            self.lib.npk_tag_ids(n, ffi.from_buffer("uint8_t[]", w.data), ffi.from_buffer("uint64_t[]", w.off),
                                 ffi.from_buffer("uint16_t[]", w.lens), ffi.from_buffer("int64_t[]", tags))  # fmt: skip
        first = w.first
        if tags == array("q", range(first, first + n)):  # (compared in C: generated traffic)
            return tags, []
        return tags, [i for i, t in enumerate(tags) if t != first + i]

    def _add_window(self, w: Window) -> None:
        bad = [p for p in set(w.ports) if p >= self.dev.ports]
        if bad:
            raise MsfError(f"traffic uses port(s) {sorted(bad)} but the MSF has {self.dev.ports} ports")
        c = Chunk(w, *(w.prepared["tags"] if w.prepared else self._tag_ids(w)))
        self.chunks.append(c)
        self._firsts.append(w.first)
        self.read = w.end
        for fn in self.on_window:
            fn(c)

    def _push_until(self, t_ns: int) -> None:
        self._read_to(t_ns)
        for c in self.chunks:
            w = c.w
            if c.pushed == len(w) or w.first + c.pushed != self.pushed:
                continue
            lo = c.pushed
            n = len(w)
            times = w.times
            hi = bisect.bisect_left(times, t_ns, lo)  # arrival times are in order
            if hi == lo:
                break
            self.dev.push(times[lo:hi], w.ports[lo:hi], array("I", range(w.first + lo, w.first + hi)),
                          w.lens[lo:hi], w.span(lo, hi))  # fmt: skip
            self._index_untagged(c, lo, hi)
            c.pushed = hi
            self.pushed = w.first + hi
            for fn in self.on_push:
                fn(c, lo, hi)
            if hi < n:
                break

    @property
    def all_pushed(self) -> bool:
        """Every packet of the source is with the MSF."""
        return self.feed.done and self.pushed == self.read

    def close(self) -> None:
        """Stop reading the traffic (the read-ahead child ends); what was run stays readable."""
        self.feed.close()

    def run(self, duration_ns: int, slice_ns: int = 20_000, progress: Callable[[int], None] | None = None) -> str:
        """Run the chip for `duration_ns` more nanoseconds of emulated time."""
        clock = time.perf_counter
        t0 = clock()
        times = self.times
        end = self.now_ns + duration_ns
        reason = "budget"
        try:
            while self.now_ns < end:
                step = min(slice_ns, end - self.now_ns)
                a = clock()
                self._push_until(self.now_ns + step + slice_ns)
                b = clock()
                target = self._ns_to_cycle(self.now_ns + step)
                reason = self.chip.run(max(0, target - self.chip.cycle))
                c = clock()
                self.now_ns += step
                for fn in self.on_advance:
                    fn()
                self._collect()
                for fn in self.on_slice:
                    fn()
                self._forget()
                d = clock()
                times["traffic"] += b - a
                times["core"] += c - b
                times["accounting"] += d - c
                if progress is not None:
                    progress(self.now_ns)
                if reason not in ("budget", "halted"):
                    break
        finally:
            self.feed.settle()  # no thread runs between stretches of running (forks, exits)
        self.host_s += clock() - t0
        return reason

    # -- what comes out
    def _collect(self) -> None:
        d = self.dev.drain_raw()
        if d is not None:
            for fn in self.on_tx:
                fn(d)
            if any(d.aborted):  # cut-through underruns: rare, frame by frame
                off = 0
                for port, t, n, ab in zip(d.port, d.t, d.len, d.aborted, strict=True):
                    data = bytes(d.data[off : off + n])
                    off += n
                    if ab:
                        if self.own and self.is_generated(data):
                            self.generated_aborted += 1  # the router's own frame, cut short
                            continue
                        pid = self.identify(data)
                        if pid is not None and 0 <= pid < self.pushed:
                            self.mark(pid, DROPPED, "tbuf_underrun")
                    else:
                        self.departed(port, t, data)
            else:
                self._depart_batch(d)
        for pid, _port, code in self.dev.drops():
            self.mark(pid, DROPPED, DROP_NAMES.get(code, str(code)))

    def _views(self) -> Any:
        """The held chunks as the C ledger sees them (npk_chunkv[]), and what keeps their
        buffers alive."""
        ffi = self.ffi
        views = ffi.new("npk_chunkv[]", max(1, len(self.chunks)))
        keep = []
        for v, c in zip(views, self.chunks, strict=False):
            w = c.w
            bufs = [ffi.from_buffer("uint8_t[]", c.fate), ffi.from_buffer("int64_t[]", c.tags),
                    ffi.from_buffer("uint64_t[]", w.times), ffi.from_buffer("uint8_t[]", w.ports),
                    ffi.from_buffer("uint64_t[]", w.off), ffi.from_buffer("uint16_t[]", w.lens)]  # fmt: skip
            v.first, v.end, v.pushed, v.left = c.first, c.end, c.first + c.pushed, c.left
            v.fate, v.tags, v.times, v.ports, v.off, v.lens = bufs
            v.data = ffi.from_buffer("uint8_t[]", w.data)  # the flow key is the input frame's
            bufs.append(v.data)
            vd = c.verdicts
            if vd is not None:
                vb = [ffi.from_buffer("uint8_t[]", vd.kind), ffi.from_buffer("uint8_t[]", vd.port),
                      ffi.from_buffer("uint8_t[]", vd.out)]  # fmt: skip
                v.vkind, v.vport, v.vout = vb
                bufs += vb
            keep.append(bufs)
        return views, keep

    def _depart_batch(self, d: Any) -> None:
        """Frames that left, the C ledger first; Python for what it leaves and for captures,
        `record` and hooks."""
        ffi, lib = self.ffi, self.lib
        n = len(d.port)
        off, _ = offsets(d.len)
        slow = bytearray(n)
        pids = array("q", bytes(8 * n))
        lats = array("q", bytes(8 * n))
        views, keep = self._views()
        led = self.ledger
        wrong = led.wrong_outcome + led.wrong_port + led.wrong_bytes
        got = lib.npk_depart(self.ledger, views, len(self.chunks), self.pushed, n, ffi.from_buffer("uint8_t[]", d.port),
                             ffi.from_buffer("uint64_t[]", d.t), ffi.from_buffer("uint16_t[]", d.len),
                             ffi.from_buffer("uint64_t[]", off), ffi.from_buffer("uint8_t[]", d.data),
                             ffi.from_buffer("uint8_t[]", slow), ffi.from_buffer("int64_t[]", pids),
                             ffi.from_buffer("int64_t[]", lats))  # fmt: skip
        del keep
        if got < 0:
            raise MemoryError("no memory for the departure ledger's flow table")
        for v, c in zip(views, self.chunks, strict=False):
            c.left = v.left
        if self.on_mismatch and led.wrong_outcome + led.wrong_port + led.wrong_bytes != wrong:
            self._mismatched(d, off, slow, pids)
        self.latency.add_many(lats if not n or min(lats) >= 0 else [x for x in lats if x >= 0])
        frames_needed = got or self._writers or self.out is not None or self.on_departure
        ports_out = self.ports_out
        if not frames_needed:
            for p, (bits, frames) in port_load(d.port, d.len, NO_WIRE).items():
                po = ports_out[p]
                po.frames += frames
                po.nbytes += bits // 8
        else:
            data = d.data
            for i in range(n):
                o = off[i]
                frame = bytes(data[o : o + d.len[i]])
                if slow[i] == 2:
                    self._generated(d.port[i], d.t[i], frame)
                    continue
                if slow[i]:
                    self.departed(d.port[i], d.t[i], frame)
                    continue
                port = d.port[i]
                po = ports_out[port]
                po.frames += 1
                po.nbytes += len(frame)
                self._keep_frame(port, d.t[i], frame)
                if self.on_departure:
                    pid = pids[i]
                    c = self.chunk_of(pid)
                    dep = Departure(port, d.t[i], frame, pid, c, pid - c.first if c else -1, True)
                    for fn in self.on_departure:
                        fn(dep)
        if self.ledger.used > self._flow_limit:
            used = lib.npk_flow_evict(self.ledger, self.oldest_open())
            self._flow_limit = max(4096, 2 * used)

    def _generated(self, port: int, t: int, data: bytes) -> None:
        """A frame the router made itself left `port` at `t`."""
        self.generated[port] += 1
        if self._writers:
            self._writers[port].write(t, data)
        if self.generated_out is not None:
            self.generated_out[port].append((t, data))
        for fn in self.on_generated:
            fn(port, t, data)

    def _keep_frame(self, port: int, t: int, data: bytes) -> None:
        if self._writers:
            self._writers[port].write(t, data)
        if self.out is not None:
            self.out[port].append((t, data))

    def flow_reordered(self, frame: bytes, in_port: int, pid: int) -> bool:
        """Per-flow order (oracle.flow_of): whether a later packet of this frame's flow left
        before it (the ledger's flow table, shared with the C path).  `frame`: the input
        packet's (its addresses name the flow, whatever the router rewrote)."""
        r = self.lib.npk_flow_check(self.ledger, frame, len(frame), in_port, pid)
        if r < 0:
            raise MemoryError("no memory for the departure ledger's flow table")
        return bool(r)

    def chunk_of(self, pid: int) -> Chunk | None:
        c = self._last
        if c is not None and c.first <= pid < c.end:
            return c
        k = bisect.bisect_right(self._firsts, pid) - 1
        if k < 0:
            return None
        c = self.chunks[k]
        if pid < c.end:
            self._last = c
            return c
        return None

    def _by_tag(self, data: bytes) -> tuple[int, Chunk | None, int]:
        """(id, chunk, index) from the generator's tag when the input frame carries that
        tag; (-1, None, -1) otherwise; (id, None, -1) for a packet already forgotten."""
        k = data.find(TAG)
        if k < 0 or k + 8 > len(data):
            return -1, None, -1
        cand = int.from_bytes(data[k + 4 : k + 8], "big")
        if cand >= self.pushed:
            return -1, None, -1
        c = self._last
        if c is None or not c.first <= cand < c.end:
            c = self.chunk_of(cand)
            if c is None:
                return cand, None, -1
        i = cand - c.first
        return (cand, c, i) if c.tags[i] == cand else (-1, None, -1)

    def _mismatched(self, d: Any, off: Any, slow: bytearray, pids: Any) -> None:
        """The frames of a batch the C ledger found wrong (npk_depart's test, again), to
        the on_mismatch hooks."""
        for i in range(len(d.port)):
            c = self.chunk_of(pids[i]) if not slow[i] else None
            if c is None or c.verdicts is None:
                continue
            k, w, v = pids[i] - c.first, c.w, c.verdicts
            frame = bytes(d.data[off[i] : off[i] + d.len[i]])
            o = w.off[k]
            if v.kind[k] != 0 or v.port[k] != d.port[i] or bytes(v.out[o : o + w.lens[k]]) != frame:
                for fn in self.on_mismatch:
                    fn(pids[i], d.port[i], frame)

    def departed(self, port: int, t: int, data: bytes) -> None:
        """Account for a frame that left `port` at `t` (what every drained frame goes through)."""
        if self.own and self.is_generated(data):
            self._generated(port, t, data)
            return
        po = self.ports_out[port]
        index = po.frames
        po.frames += 1
        po.nbytes += len(data)
        self._keep_frame(port, t, data)
        # a frame the control plane forwarded after processing its options is its own
        # input's: the one it was predicted for, whatever input its bytes now resemble
        pid, c, i = self._by_prediction(data) if self._expected else (-1, None, -1)
        by_tag = False
        if pid < 0:
            pid, c, i, by_tag = self._by_tag_or_bytes(data)
        if pid < 0:
            self.unmatched += 1
            if self.first_unmatched is None:
                self.first_unmatched = (port, index)
        elif c is None:
            self._duplicate(pid)  # its window is gone: it had a fate already
        else:
            st = c.fate[i]
            if st & FORWARDED:
                self._duplicate(pid)
            else:
                if st:
                    self._conflict(pid)
                else:
                    c.left -= 1
                c.fate[i] = st | FORWARDED
                self.ports_in[c.w.ports[i]].forwarded += 1
        hooks = self.on_departure
        if hooks or self.compare is not None:
            d = Departure(port, t, data, pid, c, i, by_tag)
            if self.compare is not None:
                self.compare(d)
            for fn in hooks:
                fn(d)

    def _by_tag_or_bytes(self, data: bytes) -> tuple[int, Chunk | None, int, bool]:
        """(id, chunk, index, found by the tag) of a departing frame's input packet."""
        pid, c, i = self._by_tag(data)
        if pid >= 0 and c is not None and not c.fate[i]:
            return pid, c, i, True
        # no tag, or its packet has a fate already: a copy of a tagged frame (a pcap
        # with a frame repeated or edited) is on the untagged list, known by its bytes
        bpid, bc, bi = self._by_bytes(data)
        if bpid >= 0 or pid < 0:
            return bpid, bc, bi, False
        return pid, c, i, True

    def _duplicate(self, pid: int) -> None:
        self.duplicates += 1
        if self.first_duplicate < 0:
            self.first_duplicate = pid

    def _conflict(self, pid: int) -> None:
        self.conflicts += 1
        if self.first_conflict < 0:
            self.first_conflict = pid

    # -- frames without a tag: matched by their bytes
    def _index_untagged(self, c: Chunk, lo: int, hi: int) -> None:
        w, untagged = c.w, c.untagged
        first = w.first
        for i in untagged[bisect.bisect_left(untagged, lo) : bisect.bisect_left(untagged, hi)]:
            f = w.frame(i)
            for key in (f, _loose_key(f)):
                self._untagged.setdefault(key, deque()).append(first + i)

    def expect(self, pid: int, frame: bytes) -> None:
        """Packet `pid` (no tag of its own) leaves as `frame` but for its IP timestamps:
        the control plane forwards it after processing its options (a changed
        destination, recorded addresses, an overflow count, timestamps), which neither its
        bytes nor the loose key find -- and which may make it look like another input
        (a Timestamp option's overflow raised to that of the next packet's).  A frame
        that leaves is looked up by this prediction first (`_by_prediction`), then by
        the rewritten key, which leaves the options out.  A new prediction for the
        packet replaces the one before.  The caller judges the frame's bytes."""
        key, loose = _predicted_key(frame), _rewritten_key(frame)
        c = self.chunk_of(pid)
        if key is None or loose is None or c is None or c.tags[pid - c.first] == pid:
            return
        was = self._expected.get(pid)
        if was is not None:
            if was[0] == key:
                return
            self._unqueue(was[0], pid)
        else:
            self._untagged.setdefault(loose, deque()).append(pid)
        self._expected[pid] = (key, loose if was is None else was[1])
        self._untagged.setdefault(key, deque()).append(pid)

    def expect_exact(self, pid: int, frame: bytes) -> None:
        """Packet `pid` (no tag of its own) leaves as exactly `frame`, whose bytes are not
        its own: an answer a control program made of it in its own buffer (npkd's to an
        SPP slice's packet, npkit.toolchain.system.npkd_spp).  Found by those bytes."""
        c = self.chunk_of(pid)
        if c is None or c.tags[pid - c.first] == pid or pid in self._expected:
            return
        key = bytes(frame)
        self._expected[pid] = (key, key)  # forgotten with its window (_unindex)
        self._untagged.setdefault(key, deque()).append(pid)

    def _unqueue(self, key: bytes, pid: int) -> None:
        q = self._untagged.get(key)
        if q is not None and pid in q:
            q.remove(pid)
            if not q:
                del self._untagged[key]

    def _by_prediction(self, data: bytes) -> tuple[int, Chunk | None, int]:
        """The packet whose predicted frame (`expect`) `data` is, the earliest first."""
        key = _predicted_key(data)
        q = self._untagged.get(key) if key is not None else None
        while q and not self._available(q[0]):
            q.popleft()
        if not q:
            return -1, None, -1
        pid = q.popleft()
        c = self.chunk_of(pid)
        assert c is not None
        return pid, c, pid - c.w.first

    def _keys(self, data: bytes) -> list[bytes]:
        """The keys an untagged frame is looked up by: its bytes, the loose key, and the
        keys of frames predicted with options rewritten (when there are any; the exact
        prediction first)."""
        keys = [data, _loose_key(data)]
        if self._expected:
            k = _rewritten_key(data)
            if k is not None:
                keys.append(k)
                p = _predicted_key(data)
                if p is not None:
                    keys.insert(0, p)
        return keys

    def _unindex(self, c: Chunk) -> None:
        w = c.w
        first = w.first
        for pid in [p for p in self._expected if c.first <= p < c.end]:
            for key in self._expected.pop(pid):
                self._unqueue(key, pid)
        for i in c.untagged[: bisect.bisect_left(c.untagged, c.pushed)]:
            pid = first + i
            f = w.frame(i)
            for key in (f, _loose_key(f)):
                q = self._untagged.get(key)
                if q:
                    if q[0] == pid:
                        q.popleft()
                    elif pid in q:
                        q.remove(pid)
                    if not q:
                        del self._untagged[key]

    def _available(self, pid: int) -> bool:
        c = self.chunk_of(pid)
        return c is not None and not c.fate[pid - c.w.first] & FORWARDED

    def _by_bytes(self, data: bytes) -> tuple[int, Chunk | None, int]:
        for key in self._keys(data):
            q = self._untagged.get(key)
            while q and not self._available(q[0]):
                q.popleft()
            if q:
                pid = q.popleft()
                c = self.chunk_of(pid)
                assert c is not None
                return pid, c, pid - c.w.first
        return -1, None, -1

    def identify(self, data: bytes) -> int | None:
        """The id of the offered packet `data` came from: the generator's tag, else the
        earliest packet still held with exactly these bytes, else with the bytes a router
        does not rewrite; None when nothing matches."""
        pid, _, _ = self._by_tag(data)
        if pid >= 0:
            return pid
        for key in self._keys(data):
            q = self._untagged.get(key)
            if q:
                return q[0]
        return None

    def input_frame(self, pid: int) -> bytes | None:
        """The bytes of input packet `pid` while its window is held."""
        c = self.chunk_of(pid)
        return None if c is None else c.w.frame(pid - c.w.first)

    def find_input(self, frame: bytes, port: int) -> int:
        """The input packet a frame taken from inside the chip is: by its tag (the bytes
        equal), else the earliest held packet from `port` with exactly these bytes that is
        not excepted already; -1 if none."""
        pid, c, i = self._by_tag(frame)
        if c is not None and c.w.frame(i) == frame:
            return pid
        for j in self._untagged.get(frame) or ():
            cj = self.chunk_of(j)
            if cj is not None and cj.w.ports[j - cj.w.first] == port and not cj.fate[j - cj.w.first] & EXCEPTED:
                return j
        return -1

    # -- fates
    def mark(self, pid: int, kind: int, reason: str) -> None:
        """Packet `pid` was dropped (DROPPED) or sent to the exception path (EXCEPTED)."""
        c = self.chunk_of(pid)
        if c is None:
            if pid < self.pushed:
                self._conflict(pid)  # its window is gone: it had a fate already
            return
        i = pid - c.w.first
        st = c.fate[i]
        if st:
            self._conflict(pid)
            if st & (DROPPED | EXCEPTED):
                return
        else:
            c.left -= 1
        c.fate[i] = st | kind
        tally = self.ports_in[c.w.ports[i]]
        (tally.drops if kind == DROPPED else tally.exceptions)[reason] += 1
        name = "drop" if kind == DROPPED else "exception"
        if self._spools is not None:
            self._spools[name].add(pid, reason)
        if self._mem_fates is not None:
            self._mem_fates[name].append((pid, reason))
        for fn in self.on_drop if kind == DROPPED else self.on_exception:
            fn(pid, reason)

    def unresolved(self, before_ns: int) -> Iterator[tuple[Chunk, int]]:
        """Pushed packets with no fate that arrived before `before_ns`, in id order (the
        caller may mark them as it goes); those still without a fate come again next time."""
        for c in self.chunks:
            fate, times = c.fate, c.w.times
            i = fate.find(0, c.scan, c.pushed)
            while i >= 0 and times[i] < before_ns:
                yield c, i
                i = fate.find(0, i + 1, c.pushed)
            first = fate.find(0, c.scan, c.pushed)
            c.scan = first if first >= 0 else c.pushed
            if i >= 0 or c.pushed < len(c.w):
                return

    def oldest_open(self) -> int:
        """The lowest id without a fate (or the next id to push)."""
        for c in self.chunks:
            i = c.fate.find(0, 0, c.pushed)
            if i >= 0:
                return c.w.first + i
            if c.pushed < len(c.w):
                return c.w.first + c.pushed
        return self.pushed

    def _forget(self) -> None:
        """Drop the windows whose every packet has a fate."""
        if not any(c.left == 0 and c.pushed == len(c.w) for c in self.chunks):
            return
        keep = []
        for c in self.chunks:
            if c.left == 0 and c.pushed == len(c.w):
                self._unindex(c)
                for fn in self.on_forget:
                    fn(c)
            else:
                keep.append(c)
        self.chunks = keep
        self._firsts = [c.w.first for c in keep]
        self._last = None

    # -- accounting
    @property
    def duplicates_total(self) -> int:
        return self.duplicates + int(self.ledger.duplicates)

    @property
    def transmitted(self) -> int:
        return sum(p.frames for p in self.ports_out)

    def report(self) -> dict[str, Any]:
        """Per-port table and conservation totals."""
        nports = self.dev.ports
        led = self.ledger
        rows = []
        for p in range(nports):
            st = self.dev.port_stats(p)
            tally, out = self.ports_in[p], self.ports_out[p]
            offered = st["rx_offered"]
            drops, exc = dict(tally.drops), dict(tally.exceptions)
            ndrop, nexc = sum(drops.values()), sum(exc.values())
            forwarded = tally.forwarded + led.forwarded[p]
            rows.append({
                "port": p, "offered": offered, "received": st["rx_received"],
                "transmitted": out.frames, "forwarded": forwarded,
                "dropped": drops, "exceptions": exc,
                "in_flight": offered - forwarded - ndrop - nexc,
                "rx_bytes": st["rx_bytes"], "tx_bytes": out.nbytes,
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
        if self.unmatched:
            assert self.first_unmatched is not None
            problems.append(f"{self.unmatched} transmitted frame(s) match no input packet (first: port "
                            f"{self.first_unmatched[0]} frame {self.first_unmatched[1]})")  # fmt: skip
        if self.duplicates_total:
            problems.append(f"{self.duplicates_total} input packet(s) transmitted more than once (first id "
                            f"{_first(self.first_duplicate, led.first_duplicate)})")  # fmt: skip
        if self.conflicts + led.conflicts:
            problems.append(f"{self.conflicts + led.conflicts} packet(s) with two fates (first id "
                            f"{_first(self.first_conflict, led.first_conflict)})")  # fmt: skip
        for r in rows:
            if r["in_flight"] < 0:
                problems.append(f"port {r['port']}: in flight is negative ({r['in_flight']})")
        tx_total = sum(r["transmitted"] for r in rows)
        if tx_total != tot_fwd + self.unmatched + self.duplicates_total:
            problems.append(f"transmitted {tx_total} != forwarded {tot_fwd} + unmatched + duplicates")
        return {
            "time_ns": self.now_ns,
            "cycle": self.chip.cycle,
            "host_s": round(self.host_s, 3),
            "ports": rows,
            "totals": {"offered": tot_off, "forwarded": tot_fwd, "transmitted": tx_total,
                       "dropped": tot_drop, "exceptions": tot_exc, "in_flight": in_flight,
                       **({"generated": sum(self.generated)} if self.own else {})},
            "msf": self.dev.stats(),
            "balanced": not problems,
            "problems": problems,
        }  # fmt: skip


def _first(a: int, b: int) -> int:
    """The lower of two first ids, -1 meaning none."""
    return min(x for x in (a, b) if x >= 0) if max(a, b) >= 0 else -1


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


__all__ = ["Departure", "EmulatorError", "MsfError", "Traffic", "TrafficError", "TrafficRun", "TxBins",
           "load_traffic_source", "format_report", "json"]  # fmt: skip
