"""`npk trace`: thread history as Perfetto / Chrome trace-event JSON.

Open the file at https://ui.perfetto.dev (or chrome://tracing).  What is in it:

* one process per loaded ME ("ME 0x03 (parse)"), one thread track per context; on each
  track complete events ("ph": "X") named `executing`, `ready` or `sleeping` that tile
  the context's time without overlap (args: cycles, pc and source line at the start);
* memory references: an async span ("b"/"e", process "memory", one name per unit) from
  issue to completion, and a flow ("s" -> "f", category "mem") from the issuing
  context's track to the same track at completion, so clicking an `executing` slice
  shows where its reference landed;
* packets, when the DRAM packet buffers are known (`--packets BASE:SIZE[:COUNT]`,
  image.meta["packet_buffers"] = {"base", "size", "count"}, or a linked router's system
  map: buf_base, 1 << buf_shift, n_bufs): every DRAM reference inside
  a buffer is a step of that packet's flow (category "packet", "s"/"t"/"f"), and a
  receive into the start of a buffer (dram[rbuf_rd]) begins a new packet there
  (id = buffer index and generation: "b5.2");
* TCAM lookups (docs/tcam.md): an instant event ("ph": "i", category "tcam") on the
  context's track when the lookup completes, named `tcam hit` / `tcam miss`, args: its
  slot, key longwords, hit, match count, index of the best match and its result;
* process/thread names as "M" metadata events;
* the file's "metadata": the tool, the images with the MEs each ran on ("image": the
  IMAGE@MES words of the command line, `a.uc@0x00,0x01 b.elf@0x10`, and "images": the
  same as a list; Target.placements) and the run's summary.

Timestamps ("ts", "dur") are microseconds as the format defines, computed from the
emulated cycle and the config clock with nanosecond precision ("displayTimeUnit": "ns");
every event also carries its cycles in args.  Only events inside the window
[--from, --to] are written, clipped to it, so a long run gives a bounded file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.asm.base.writing import check_writable, write_output
from npkit.asm.image import Image
from npkit.emulator.binding import CTX_STATES, UNITS, HistEvent

from .events import command_name, is_command
from .source import where
from .target import Target

STATE_NAMES = {"running": "executing", "ready": "ready", "sleep": "sleeping", "inactive": "inactive"}
CHUNK = 2000
DRAM = UNITS.index("dram")


class TraceError(ValueError):
    pass


@dataclass
class BufferMap:
    """DRAM packet buffers: `count` buffers of `size` bytes from `base` (count 0 = unbounded)."""

    base: int
    size: int
    count: int = 0

    @classmethod
    def parse(cls, text: str) -> BufferMap:
        parts = text.split(":")
        try:
            vals = [int(p, 0) for p in parts]
        except ValueError:
            raise TraceError(f"expected BASE:SIZE[:COUNT], got '{text}'") from None
        if len(vals) not in (2, 3) or vals[1] <= 0:
            raise TraceError(f"expected BASE:SIZE[:COUNT] with SIZE > 0, got '{text}'")
        if vals[0] < 0 or (len(vals) == 3 and vals[2] < 1):
            raise TraceError(f"expected BASE:SIZE[:COUNT] with BASE >= 0 and COUNT >= 1, got '{text}'")
        return cls(*vals)

    def check(self, dram_bytes: int) -> None:
        """TraceError unless the first buffer (and the last, when counted) lies in DRAM."""
        end = self.base + self.size * max(self.count, 1)
        if end > dram_bytes:
            raise TraceError(f"--packets: buffers [0x{self.base:x}, 0x{end:x}) run past DRAM "
                             f"(0x0..0x{dram_bytes - 1:x})")  # fmt: skip

    @classmethod
    def from_image(cls, image: Image) -> BufferMap | None:
        pb = image.meta.get("packet_buffers")
        if isinstance(pb, dict):
            return cls(int(pb["base"]), int(pb["size"]), int(pb.get("count", 0)))
        sm = image.meta.get("sysmap")  # a linked router: buffer i at buf_base + (i << buf_shift)
        if isinstance(sm, dict) and "buf_shift" in sm:
            return cls(int(sm.get("buf_base", 0)), 1 << int(sm["buf_shift"]), int(sm.get("n_bufs", 0)))
        return None

    def index(self, addr: int) -> int | None:
        if addr < self.base:
            return None
        i = (addr - self.base) // self.size
        if self.count and i >= self.count:
            return None
        return i


def collect(target: Target, cycles: int, stop_at: int | None = None,
            progress: Any = None) -> list[HistEvent]:  # fmt: skip
    """Run `cycles` cycles (or until stop_at) with history on; every event, in order.
    `progress(cycles_done)` is called after each chunk when given."""
    chip = target.chip
    chip.history_enable(1)
    events: list[HistEvent] = []
    end = chip.cycle + cycles if stop_at is None else min(chip.cycle + cycles, stop_at)
    while chip.cycle < end:
        before = int(chip.lib.npk_history_dropped(chip._chip))
        reason = chip.run(min(CHUNK, end - chip.cycle))
        events.extend(chip.history())
        if int(chip.lib.npk_history_dropped(chip._chip)) != before:
            raise TraceError("the emulator's history buffer overflowed; raise history_capacity in the config")
        if progress is not None:
            progress(chip.cycle)
        if reason == "halted":
            break
    return events


def check_window(cycles: int, t_from: int, t_to: int | None) -> None:
    """The run's length and the window written, checked before anything runs."""
    if cycles < 0:
        raise TraceError(f"--cycles must be >= 0, got {cycles}")
    for name, v in (("--from", t_from), ("--to", t_to)):
        if v is not None and v < 0:
            raise TraceError(f"{name} must be >= 0, got {v}")
    if t_to is not None and t_from > t_to:
        raise TraceError(f"empty window: --from {t_from} must not be after --to {t_to}")


def record_trace(target: Target, cycles: int, t_from: int, t_to: int | None, out: Path,
                 buffers: BufferMap | None = None, progress: Any = None) -> dict[str, Any]:  # fmt: skip
    check_window(cycles, t_from, t_to)
    if buffers is not None:
        buffers.check(int(target.chip.config["dram_bytes"]))
    check_writable(out)  # before the run, not after it
    chip = target.chip
    mhz = target.clock_mhz
    start_cycle = chip.cycle
    initial = {(me, ctx): (chip.reg(me, "state", ctx), chip.reg(me, "pc", ctx))
               for me in target.mes for ctx in target.ctxs(me)}  # fmt: skip
    events = collect(target, cycles, None if t_to is None else t_to + 1, progress)
    end_cycle = chip.cycle
    lo = max(t_from, start_cycle)
    hi = end_cycle if t_to is None else min(t_to, end_cycle)
    if hi < lo:
        raise TraceError(f"empty window: --from {t_from} is after the end of the run (cycle {end_cycle})")
    doc = build_events(target, events, initial, start_cycle, end_cycle, lo, hi, mhz, buffers)
    write_output(out, json.dumps(doc, separators=(",", ":")))
    return doc["metadata"]["summary"]


def build_events(target: Target, events: list[HistEvent], initial: dict[tuple[int, int], tuple[int, int]],
                 start: int, end: int, lo: int, hi: int, mhz: float,
                 buffers: BufferMap | None) -> dict[str, Any]:  # fmt: skip
    out: list[dict[str, Any]] = []
    ts = _us_fn(mhz)

    # ---- names
    for me in target.mes:
        out.append({"ph": "M", "pid": me, "name": "process_name", "args": {"name": f"ME {target.chip.me_name(me)} ({target.loaded[me]})"}})
        out.append({"ph": "M", "pid": me, "name": "process_sort_index", "args": {"sort_index": me}})
        for ctx in target.ctxs(me):
            out.append({"ph": "M", "pid": me, "tid": ctx, "name": "thread_name", "args": {"name": f"ctx {ctx}"}})
    mem_pid = 1000
    out.append({"ph": "M", "pid": mem_pid, "name": "process_name", "args": {"name": "memory"}})

    # ---- state spans
    cur: dict[tuple[int, int], tuple[str, int, int]] = {}  # -> (state, since, pc)
    for key, (st, pc) in initial.items():
        cur[key] = (CTX_STATES[st], start, pc)
    spans = 0

    def close(key: tuple[int, int], until: int) -> None:
        nonlocal spans
        state, since, pc = cur[key]
        a, b = max(since, lo), min(until, hi)
        if state == "inactive" or b <= a:
            return
        me, ctx = key
        sm = target.smap(me)
        out.append({"ph": "X", "pid": me, "tid": ctx, "name": STATE_NAMES[state], "cat": "thread",
                    "ts": ts(a), "dur": round(ts(b) - ts(a), 6),
                    "args": {"c0": a, "c1": b, "pc": pc, "at": where(sm.entry(pc))}})  # fmt: skip
        spans += 1

    # ---- memory and packets
    pending: dict[tuple[int, int, int], list[tuple[int, int, int, int]]] = {}  # (me,ctx,unit) -> [(id, cycle, cmd, addr)]
    flows = 0
    mem_id = 0
    pkt_gen: dict[int, int] = {}
    pkt_last: dict[str, tuple[int, int, int]] = {}  # packet id -> (cycle, me, ctx) of its last step
    pkt_steps: dict[str, int] = {}
    packet_events: list[dict[str, Any]] = []

    lookup: dict[str, Any] | None = None  # the TCAM lookup whose key and result come next
    lookups = 0
    for ev in events:
        key = (ev.me, ev.ctx)
        if ev.kind in ("tcam", "tcam_data"):
            lookup = _tcam_event(ev, lookup, ts)
            if ev.kind == "tcam" and lo <= ev.cycle <= hi:
                out.append(lookup)
                lookups += 1
            continue
        if ev.kind == "state" and key in cur:
            close(key, ev.cycle)
            cur[key] = (CTX_STATES.get(ev.a0, "inactive"), ev.cycle, ev.a1)
        elif ev.kind == "mem_issue":
            mem_id += 1
            cmd = ev.a0 & 0xFF
            pending.setdefault((ev.me, ev.ctx, ev.unit), []).append((mem_id, ev.cycle, cmd, ev.a1))
            if buffers is not None and ev.unit == DRAM:
                idx = buffers.index(ev.a1)
                if idx is not None:
                    if is_command(ev, "rbuf_rd") and (ev.a1 - buffers.base) % buffers.size < 64 and \
                            (ev.me, ev.ctx, ev.cycle) != pkt_last.get(f"b{idx}.{pkt_gen.get(idx, 0)}", (0, 0, -1)):  # fmt: skip
                        pkt_gen[idx] = pkt_gen.get(idx, 0) + 1
                    pid = f"b{idx}.{pkt_gen.get(idx, 0)}"
                    if lo <= ev.cycle <= hi:
                        ph = "s" if pid not in pkt_steps else "t"
                        packet_events.append({"ph": ph, "pid": ev.me, "tid": ev.ctx, "id": pid, "cat": "packet",
                                              "name": f"packet {pid}", "ts": ts(ev.cycle),
                                              "args": {"cycle": ev.cycle, "addr": ev.a1, "cmd": cmd}})  # fmt: skip
                        pkt_steps[pid] = pkt_steps.get(pid, 0) + 1
                    pkt_last[pid] = (ev.cycle, ev.me, ev.ctx)
        elif ev.kind == "mem_done":
            q = pending.get((ev.me, ev.ctx, ev.unit), [])
            pick = next((i for i, p in enumerate(q) if p[2] == ev.a0 and p[3] == ev.a1), None)
            if pick is None:
                pick = next((i for i, p in enumerate(q) if p[2] == ev.a0), 0 if q else None)
            if pick is None:
                continue
            mid, c0, cmd, addr = q.pop(pick)
            if c0 < lo or ev.cycle > hi:
                continue
            unit = UNITS[ev.unit] if ev.unit < len(UNITS) else str(ev.unit)
            name = f"{unit}[{command_name(ev)}] 0x{addr:x}"
            args = {"c0": c0, "c1": ev.cycle, "me": ev.me, "ctx": ev.ctx, "cmd": cmd, "addr": addr}
            out.append({"ph": "b", "pid": mem_pid, "tid": ev.unit, "id": mid, "cat": unit, "name": name,
                        "ts": ts(c0), "args": args})  # fmt: skip
            out.append({"ph": "e", "pid": mem_pid, "tid": ev.unit, "id": mid, "cat": unit, "name": name,
                        "ts": ts(ev.cycle)})  # fmt: skip
            out.append({"ph": "s", "pid": ev.me, "tid": ev.ctx, "id": mid, "cat": "mem", "name": name, "ts": ts(c0)})
            out.append({"ph": "f", "bp": "e", "pid": ev.me, "tid": ev.ctx, "id": mid, "cat": "mem", "name": name,
                        "ts": ts(ev.cycle)})  # fmt: skip
            flows += 1
    for key in cur:
        close(key, end)
    # a packet's last step ends its flow
    last_idx: dict[str, int] = {}
    for i, e in enumerate(packet_events):
        last_idx[e["id"]] = i
    packets = 0
    for pid, i in last_idx.items():
        if pkt_steps[pid] > 1:
            packet_events[i]["ph"] = "f"
            packet_events[i]["bp"] = "e"
            packets += 1
    out += [e for e in packet_events if pkt_steps[e["id"]] > 1]
    xs_tracks = xscale_track(target, out, lo, hi, end, ts)
    summary = {"from": lo, "to": hi, "events": len(out),
               "tracks": sum(len(target.ctxs(m)) for m in target.mes) + xs_tracks,
               "spans": spans, "flows": flows, "packets": packets, "tcam_lookups": lookups, "clock_mhz": mhz,
               "packet_buffers": None if buffers is None else vars(buffers)}  # fmt: skip
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "metadata": {"tool": "npk trace", "image": " ".join(target.placements),
                         "images": target.placements, "summary": summary}}  # fmt: skip


def _tcam_event(ev: HistEvent, lookup: dict[str, Any] | None, ts: Any) -> dict[str, Any] | None:
    """A TCAM lookup's trace event (history `tcam`), or the last one with a key longword
    or result half added (`tcam_data`: a0 0..8 key longword, 9 / 10 result bits 63:32 / 31:0)."""
    if ev.kind == "tcam":
        hit = bool(ev.a0 >> 31)
        args = {"cycle": ev.cycle, "slot": ev.a0 & 0xFF, "hit": hit, "count": (ev.a0 >> 16) & 0xFF,
                "index": ev.a1, "key": [], "result": 0}  # fmt: skip
        return {"ph": "i", "s": "t", "pid": ev.me, "tid": ev.ctx, "cat": "tcam",
                "name": "tcam hit" if hit else "tcam miss", "ts": ts(ev.cycle), "args": args}  # fmt: skip
    if lookup is None:
        return None
    args = lookup["args"]
    if ev.a0 < 9:
        args["key"].append(f"0x{ev.a1:08x}")
    else:
        args["result"] |= ev.a1 << (32 if ev.a0 == 9 else 0)
    return lookup


XSCALE_PID = 2000


def xscale_track(target: Target, out: list[dict[str, Any]], lo: int, hi: int, end: int, ts: Any) -> int:
    """The control processor's track: `running`, `waiting for interrupt` (asleep on the
    device) or `in a system call` (asleep in another call: a sleep, a poll without the
    device), from the XScale host's timeline of state changes.  Returns 1 (a track) or 0."""
    control = getattr(target, "control", None)
    if control is None or control.system.xscale is None:
        return 0
    timeline = control.system.xscale.timeline
    out.append({"ph": "M", "pid": XSCALE_PID, "name": "process_name",
                "args": {"name": f"XScale ({control.program.name}, {control.placement})"}})  # fmt: skip
    out.append({"ph": "M", "pid": XSCALE_PID, "tid": 0, "name": "thread_name", "args": {"name": "core"}})
    for k, (cycle, state, what) in enumerate(timeline):
        stop = timeline[k + 1][0] if k + 1 < len(timeline) else end
        a, b = max(cycle, lo), min(stop, hi)
        if b <= a or state in ("exited", "crashed", "killed"):
            continue
        if state == "waiting":
            name = "waiting for interrupt" if "interrupt" in what or what.startswith("poll") else "in a system call"
        else:
            name = state
        out.append({"ph": "X", "pid": XSCALE_PID, "tid": 0, "name": name, "cat": "xscale", "ts": ts(a),
                    "dur": round(ts(b) - ts(a), 6), "args": {"call": what} if what else {}})  # fmt: skip
    return 1


def _us_fn(mhz: float) -> Any:
    def f(cycle: int) -> float:
        return round(cycle / mhz, 6)

    return f
