"""Traffic generation: a spec (npkit.emulator.traffic.spec) in, timed frames out.

Why the work is split in two passes: each port first draws its *schedule* (arrival
time, size, kind) from its own random stream, then the ports are merged in time order,
which fixes the global packet ids, and only then are the frame bytes built, each port
again from its own stream. So a port's traffic does not change when another port's
settings do, the whole output is a function of the spec and the seed, and the payload
can carry the packet id.

Packet ids: the rank of a packet in (arrival time, port, per-port index) order,
starting at 0. `dataset.load_traffic` gives the same ids to any directory of pcaps, so
ids mean the same thing for generated and replayed traffic.

Timestamps: the instant the packet's first byte on the wire (preamble, if the wire
model counts one) begins to arrive, in nanoseconds from 0. Its last frame byte arrives
(preamble + pcap length + FCS) * 8 / link_bps seconds later; the IFG follows.

Payload: every generated frame with room for it carries b"NPK1" + the 32-bit packet id
at the start of its (innermost) payload, then zeros, so a frame found anywhere can be
traced to its input.

Output (`write_traffic`): DIR/port<N>.pcap (nanosecond pcap, one per enabled port) and
DIR/manifest.json::

    {"format": "npkit-traffic/1", "seed": ..., "spec": {...as given...},
     "link_bps": ..., "ports": [{"port", "pcap", "packets", "bytes", "wire": {...}}],
     "kinds": ["normal", ...],
     "packets": {"port": [...], "time_ns": [...], "len": [...], "kind": [...]}}

`packets` is columnar, indexed by packet id; `kind` indexes `kinds`.
"""

from __future__ import annotations

import json
import random
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.asm.base.writing import make_dir

from .frames import (
    MIN_TAGGED_WITH_OPTIONS,
    OPTION_KINDS,
    FrameBuilder,
)
from .packet import (
    pad_frame,
)
from .pcap import PcapReader, PcapWriter
from .spec import KINDS, PortSpec, SpecError, TrafficSpec
from .spec_forms import MAX_PACKETS
from .window import Window, offsets

KIND_INDEX = {k: i for i, k in enumerate(KINDS)}
MANIFEST = "manifest.json"


@dataclass
class GenPacket:
    id: int
    port: int
    time_ns: int
    data: bytes
    kind: str


# ---------------------------------------------------------------------------- arrivals


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Clock:
    """Arrival process: `next(wire_bits)` gives the start time of the next frame.

    Integer arithmetic where the process is deterministic (constant, burst, on-off), so
    a 672-ns spacing stays exactly 672 ns over millions of packets."""

    def __init__(self, port: PortSpec, link_bps: int, rng: random.Random) -> None:
        self.arr = port.arrivals
        self.rate = port.rate_bps
        self.link = link_bps
        self.rng = rng
        self.start = port.start_ns
        self.bits = 0  # wire bits offered so far (constant, burst)
        self.now = float(port.start_ns)  # poisson
        self.in_burst = self.arr.burst  # burst: frames sent in the current burst
        self.burst_start = port.start_ns
        self.burst_bits = 0
        self.period = port.start_ns  # on-off: start of the current ON period
        self.on_end = port.start_ns + self._draw(self.arr.on_ns)
        self.last_end = port.start_ns

    def _draw(self, mean_ns: int) -> int:
        if not self.arr.exponential or mean_ns == 0:
            return mean_ns
        return max(1, round(self.rng.expovariate(1.0 / mean_ns)))

    def next(self, wbits: int) -> int:
        kind = self.arr.kind
        ns = 1_000_000_000
        if kind == "constant":
            t = self.start + self.bits * ns // self.rate
            self.bits += wbits
            return t
        if kind == "poisson":
            # Poisson offers queue at the sender; a frame starts when it has been offered
            # and the link is free, so the long-run rate is the offered rate (for load < 1)
            t = max(int(self.now), self.last_end)
            self.now += self.rng.expovariate(1.0) * wbits * 1e9 / self.rate
            self.last_end = t + _ceil_div(wbits * ns, self.link)
            return t
        if kind == "burst":
            if self.in_burst >= self.arr.burst:
                self.burst_start = self.start + self.bits * ns // self.rate
                self.in_burst, self.burst_bits = 0, 0
            t = self.burst_start + self.burst_bits * ns // self.link
            self.in_burst += 1
            self.burst_bits += wbits
            self.bits += wbits
            return t
        # on_off
        t = self.period + self.bits * ns // self.rate
        if t >= self.on_end:
            self.period = max(self.on_end + self._draw(self.arr.off_ns), self.last_end)
            self.on_end = self.period + self._draw(self.arr.on_ns)
            self.bits = 0
            t = self.period
        self.bits += wbits
        self.last_end = t + _ceil_div(wbits * ns, self.link)
        return t


# ---------------------------------------------------------------------------- schedules


def synthetic_arrivals(spec: TrafficSpec, port: PortSpec, count: int, end: int) -> Iterator[tuple[int, int, int]]:
    """A synthetic port's arrivals, lazily: (time, pcap length, kind index), drawn from the
    port's schedule stream until `count` packets or time `end`."""
    rng = random.Random(f"npkit-traffic:{spec.seed}:{port.index}:schedule")
    clock = _Clock(port, spec.link_bps, rng)
    wire = port.wire
    overhead = wire.fcs + wire.preamble + wire.ifg
    normal = KIND_INDEX["normal"]
    runt = KIND_INDEX["runt"]
    long_kinds = {KIND_INDEX[k] for k in OPTION_KINDS}
    kind_ids = [KIND_INDEX[k] for k in port.mix] + [normal]
    cum = []
    acc = 0.0
    for w in [*port.mix.values(), max(0.0, 1.0 - sum(port.mix.values()))]:
        acc += w
        cum.append(acc)
    sizes = port.size
    fixed = sizes.values[0] if len(sizes.values) == 1 and sizes.uniform is None else None
    random_ = rng.random
    clock_next = clock.next
    mix = bool(port.mix)
    fcs = wire.fcs
    n = 0
    while n < count:
        size = fixed if fixed is not None else sizes.sample(rng)
        plen = size - fcs
        kind = normal
        if mix:
            r = random_() * acc
            for i, c in enumerate(cum):
                if r < c:
                    kind = kind_ids[i]
                    break
            if kind == runt:
                plen = rng.randint(42, 59)
            elif kind in long_kinds:
                plen = max(plen, MIN_TAGGED_WITH_OPTIONS)
        t = clock_next((plen + overhead) * 8)
        if t >= end:
            return
        if n >= MAX_PACKETS:
            raise SpecError(f"ports.{port.index}: more than {MAX_PACKETS:,} packets: lower count or duration_ns")
        yield t, plen, kind
        n += 1


class Schedule:
    """One port's arrivals: parallel arrays of time, pcap length and kind index.

    Synthetic ports draw sizes and kinds from the port's schedule stream; replay ports
    take both from the capture (kind "replay") and keep the frames in `frames`."""

    def __init__(self, spec: TrafficSpec, port: PortSpec) -> None:
        self.port = port
        self.times = array("q")
        self.lens = array("H")
        self.kinds = array("B")
        self.frames: list[bytes] | None = None
        self.delayed = 0  # replayed frames moved later because the link was busy
        if not port.enabled:
            return
        count = spec.count if spec.count is not None else 1 << 62
        end = spec.duration_ns if spec.duration_ns is not None else 1 << 62
        if port.replay is not None:
            self._replay(spec, port, count, end)
        else:
            self._synthetic(spec, port, count, end)

    def __len__(self) -> int:
        return len(self.times)

    def _synthetic(self, spec: TrafficSpec, port: PortSpec, count: int, end: int) -> None:
        times, lens, kinds = self.times, self.lens, self.kinds
        for t, plen, kind in synthetic_arrivals(spec, port, count, end):
            times.append(t)
            lens.append(plen)
            kinds.append(kind)

    def _replay(self, spec: TrafficSpec, port: PortSpec, count: int, end: int) -> None:
        assert port.replay is not None
        replay = port.replay
        try:
            with PcapReader(replay.path) as reader:
                records = list(reader)
        except (OSError, ValueError) as exc:
            raise SpecError(f"ports.{port.index}.source: {exc}") from None
        frames_in = [pad_frame(r.data) if replay.pad else r.data for r in records]
        if not frames_in:
            self.frames = []
            return
        wire = port.wire
        ns = 1_000_000_000
        ser = [_ceil_div(wire.wire_bytes(len(f)) * 8 * ns, spec.link_bps) for f in frames_in]
        clock = _Clock(port, spec.link_bps, random.Random(0))
        base = records[0].timestamp_ns
        span = records[-1].timestamp_ns - base + ser[-1]
        frames: list[bytes] = []
        busy_until = port.start_ns
        replay_kind = KIND_INDEX["replay"]
        self.frames = frames
        for loop in range(replay.loop):
            for rec, frame, s in zip(records, frames_in, ser, strict=True):
                if len(frames) >= count:
                    return
                if replay.timing == "original":
                    t = port.start_ns + rec.timestamp_ns - base + loop * span
                    if t < busy_until:
                        self.delayed += 1
                        t = busy_until
                else:
                    t = clock.next(wire.wire_bytes(len(frame)) * 8)
                if t >= end:  # every later frame, of this loop and the next, is later still
                    return
                if len(frames) >= MAX_PACKETS:
                    raise SpecError(f"ports.{port.index}.source: the replay would make more than "
                                    f"{MAX_PACKETS:,} packets: lower loop, or set count or duration_ns")  # fmt: skip
                busy_until = t + s
                self.times.append(t)
                self.lens.append(len(frame))
                self.kinds.append(replay_kind)
                frames.append(frame)


def schedules(spec: TrafficSpec) -> list[Schedule]:
    return [Schedule(spec, port) for port in spec.ports]


class _Port:
    """One port's arrivals as the reader pulls them, with one packet of look-ahead; and
    `extra` arrivals merged in (the neighbours' ARP replies: (time, length, kind), after
    an arrival of the same time)."""

    def __init__(self, spec: TrafficSpec, port: PortSpec, extra: list[tuple[int, int, int]] | None = None) -> None:
        self.port = port
        self.frames: list[bytes] | None = None
        self.index = 0  # per-port index of the next arrival
        self.fidx = 0  # index of the next replayed frame
        self.extra = deque(sorted(extra or []))
        if not port.enabled:
            self.it: Iterator[tuple[int, int, int]] = iter(())
        elif port.replay is not None:
            sched = Schedule(spec, port)
            self.frames = sched.frames
            self.it = zip(sched.times, sched.lens, sched.kinds, strict=True)
        else:
            count = spec.count if spec.count is not None else 1 << 62
            end = spec.duration_ns if spec.duration_ns is not None else 1 << 62
            self.it = synthetic_arrivals(spec, port, count, end)
        self.head = next(self.it, None)

    @property
    def next_time(self) -> int | None:
        t = self.head[0] if self.head is not None else None
        if self.extra and (t is None or self.extra[0][0] < t):
            t = self.extra[0][0]
        return t

    def until(self, t_ns: int) -> list[tuple[int, int, int, int, int]]:
        """(time, per-port index, length, kind, replayed frame index or -1) of the arrivals
        before t_ns."""
        out = []
        head, it, i, extra = self.head, self.it, self.index, self.extra
        while True:
            if extra and extra[0][0] < t_ns and (head is None or extra[0][0] < head[0]):
                t, n, kind = extra.popleft()
                out.append((t, i, n, kind, -1))
            elif head is not None and head[0] < t_ns:
                out.append((head[0], i, head[1], head[2], self.fidx if self.frames is not None else -1))
                self.fidx += self.frames is not None
                head = next(it, None)
            else:
                break
            i += 1
        self.head, self.index = head, i
        return out


def _needs(spec: TrafficSpec, frame: bytes | memoryview) -> int | None:
    """The next hop the router must resolve to forward `frame`, if it has no ARP entry."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return None
    dst = int.from_bytes(frame[30:34], "big")
    route = spec.router.lookup(dst)
    if route is None:
        return None
    hop = dst if route.direct else route.next_hop
    return hop if hop not in spec.router.arp else None


def neighbour_replies(spec: TrafficSpec, use_c: bool = True) -> dict[int, list[tuple[int, int]]]:
    """The generator acting as the neighbours of `spec.neighbours`: each answers the
    router's ARP request `neighbour_delay_ns` after the first packet that needs it
    arrives.  {port: [(time, neighbour), ...]}: a reply from its MAC on its port.  (A
    pass over the spec's packets, without keeping them, until every neighbour is found.)"""
    first: dict[int, int] = {}
    reader = SpecReader(spec, use_c, replies=False)
    t = 0
    while not reader.done and len(first) < len(spec.neighbours):
        t = max(t + 100_000, reader.next_time + 1)
        w = reader.take(t)
        if w is None:
            continue
        for i in range(len(w)):
            hop = _needs(spec, w.frame(i))
            if hop in spec.neighbours and hop not in first:
                first[hop] = w.times[i]
    out: dict[int, list[tuple[int, int]]] = {}
    for hop, t0 in sorted(first.items(), key=lambda kv: kv[1]):
        port = spec.router.port_for_subnet(hop)
        assert port is not None  # the spec checked it
        out.setdefault(port.index, []).append((t0 + spec.neighbour_delay_ns, hop))
    return out


ARP_REPLY_LEN = 60


class SpecReader:
    """A spec's packets in windows of arrival time, in packet-id order: each port's
    arrivals up to the window's end, merged by (time, port, per-port index), then the
    frame bytes, each port from its own content stream (in C where the C builder does the
    kind, see npkit.emulator.traffic.cpkt; `use_c=False`: the Python builder only).
    With `spec.neighbours`, their ARP replies are arrivals of their ports (kind
    arp_reply; `replies=False`: left out)."""

    def __init__(self, spec: TrafficSpec, use_c: bool = True, replies: bool = True) -> None:
        self.spec = spec
        self.use_c = use_c
        answers = neighbour_replies(spec, use_c) if replies and spec.neighbours else {}
        reply = KIND_INDEX["arp_reply"]
        self.ports = [_Port(spec, p, [(t, ARP_REPLY_LEN, reply) for t, _hop in answers.get(p.index, [])])
                      for p in spec.ports if p.enabled or p.index in answers]  # fmt: skip
        self.answers = answers
        self.builders: dict[int, Any] = {}
        self.next_id = 0

    @property
    def done(self) -> bool:
        return all(p.next_time is None for p in self.ports)

    @property
    def next_time(self) -> int:
        """Arrival time of the next packet (done: -1)."""
        return min((t for p in self.ports if (t := p.next_time) is not None), default=-1)

    def _builder(self, port: PortSpec) -> Any:
        b = self.builders.get(port.index)
        if b is None:
            b = FrameBuilder(self.spec, port)
            b.replies.extend(hop for _t, hop in self.answers.get(port.index, []))
            if self.use_c:
                from .cpkt import CFrameBuilder

                b = CFrameBuilder(b)
            self.builders[port.index] = b
        return b

    def take(self, until_ns: int) -> Window | None:
        """The packets arriving before `until_ns` not taken yet (None: none)."""
        keyed: list[tuple[int, int, int, int, int, int, int]] = []
        for k, p in enumerate(self.ports):
            pi = p.port.index
            keyed.extend((t, pi, i, n, kind, k, f) for t, i, n, kind, f in p.until(until_ns))
        if not keyed:
            return None
        keyed.sort()
        first = self.next_id
        self.next_id += len(keyed)
        w = Window(first, array("Q", [x[0] for x in keyed]), array("B", [x[1] for x in keyed]),
                   array("H", [x[3] for x in keyed]), kinds=bytes(x[4] for x in keyed))  # fmt: skip
        w.off, total = offsets(w.lens)
        w.data = bytearray(total)
        per_port: dict[int, list[int]] = {}
        for j, x in enumerate(keyed):
            if x[6] >= 0:  # a replayed frame
                f = self.ports[x[5]].frames[x[6]]  # type: ignore[index]
                w.data[w.off[j] : w.off[j] + len(f)] = f
            else:
                per_port.setdefault(x[5], []).append(j)
        for k, rows in per_port.items():
            p = self.ports[k]
            b = self._builder(p.port)
            pids = array("I", [first + j for j in rows])
            kinds = bytes(w.kinds[j] for j in rows)
            lens = array("H", [w.lens[j] for j in rows])
            if self.use_c:  # the frames straight into the window, at their places
                b.build(kinds, lens, pids, w.data, array("Q", [w.off[j] for j in rows]))
            else:
                for j, pid in zip(rows, pids, strict=True):
                    f = b.build[KINDS[w.kinds[j]]](w.lens[j], pid)
                    w.data[w.off[j] : w.off[j] + len(f)] = f
        return w


def iter_packets(spec: TrafficSpec, use_c: bool = True, window_ns: int = 100_000) -> Iterator[GenPacket]:
    """All packets of all ports, in packet-id (arrival) order."""
    reader = SpecReader(spec, use_c)
    t = 0
    while not reader.done:
        t = max(t + window_ns, reader.next_time + 1)
        w = reader.take(t)
        if w is None:
            continue
        for i in range(len(w)):
            yield GenPacket(w.first + i, w.ports[i], w.times[i], w.frame(i), KINDS[w.kinds[i]])


def generate(spec: TrafficSpec) -> list[GenPacket]:
    """Everything in memory (tests, small runs); `write_traffic` streams to disk."""
    return list(iter_packets(spec))


def write_traffic(
    spec: TrafficSpec,
    outdir: str | Path,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write DIR/port<N>.pcap and DIR/manifest.json; returns a summary."""
    outdir = make_dir(outdir)
    started = time.perf_counter()
    scheds = schedules(spec)
    total = sum(len(s) for s in scheds)
    writers = {
        s.port.index: PcapWriter(outdir / f"port{s.port.index}.pcap")
        for s in scheds if s.port.enabled
    }
    ports_of = {p.index: p for p in spec.ports}
    col_port = array("B")
    col_time = array("q")
    col_len = array("H")
    col_kind = array("B")
    byte_count = dict.fromkeys(writers, 0)
    try:
        for pkt in iter_packets(spec):
            if pkt.port not in writers:  # a neighbour's ARP reply on a port that sends nothing else
                writers[pkt.port] = PcapWriter(outdir / f"port{pkt.port}.pcap")
                byte_count[pkt.port] = 0
            writers[pkt.port].write(pkt.time_ns, pkt.data)
            col_port.append(pkt.port)
            col_time.append(pkt.time_ns)
            col_len.append(len(pkt.data))
            col_kind.append(KIND_INDEX[pkt.kind])
            byte_count[pkt.port] += len(pkt.data)
            if progress is not None and pkt.id % 65536 == 0:
                progress(pkt.id, total)
    finally:
        for w in writers.values():
            w.close()
    elapsed = time.perf_counter() - started
    ports = []
    per_port: dict[int, tuple[array[int], array[int]]] = {p: (array("q"), array("H")) for p in writers}
    for port, t, n in zip(col_port, col_time, col_len, strict=True):
        per_port[port][0].append(t)
        per_port[port][1].append(n)
    delayed = {s.port.index: s.delayed for s in scheds}
    for index in sorted(writers):
        port = ports_of[index]
        times, lens = per_port[index]
        w = port.wire
        wire_bytes = sum(w.wire_bytes(n) for n in lens)
        span = (times[-1] - times[0]) if len(times) > 1 else 0
        entry: dict[str, Any] = {
            "port": index,
            "pcap": f"port{index}.pcap",
            "packets": len(times),
            "bytes": byte_count[index],
            "wire_bytes": wire_bytes,
            "wire": {"fcs": w.fcs, "preamble": w.preamble, "ifg": w.ifg},
            "offered_bps": port.rate_bps,
            "first_ns": times[0] if len(times) else None,
            "last_ns": times[-1] if len(times) else None,
        }
        if span:
            entry["mean_gap_ns"] = span / (len(times) - 1)
        if port.replay is not None:
            entry["replay"] = str(port.replay.path)
            entry["delayed"] = delayed[index]
        ports.append(entry)
    manifest = {
        "format": "npkit-traffic/1",
        "seed": spec.seed,
        "spec": _jsonable(spec.raw),
        "link_bps": spec.link_bps,
        "ports": ports,
        "kinds": list(KINDS),
        "packets": {
            "port": col_port.tolist(),
            "time_ns": col_time.tolist(),
            "len": col_len.tolist(),
            "kind": col_kind.tolist(),
        },
    }
    # dumps, not dump: only the one-shot encoder is the fast C one
    (outdir / MANIFEST).write_text(json.dumps(manifest, separators=(",", ":")))
    kinds_count: dict[str, int] = {}
    for k in col_kind:
        kinds_count[KINDS[k]] = kinds_count.get(KINDS[k], 0) + 1
    return {
        "dir": str(outdir),
        "seed": spec.seed,
        "packets": len(col_port),
        "ports": [{k: v for k, v in p.items() if k != "wire"} for p in ports],
        "kinds": kinds_count,
        "elapsed_s": round(elapsed, 3),
        "packets_per_s": round(len(col_port) / elapsed) if elapsed > 0 else None,
    }


def _jsonable(value: Any) -> Any:
    """The spec echo: YAML scalars that JSON cannot hold become strings."""
    return json.loads(json.dumps(value, default=str))
