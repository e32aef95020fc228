"""`npk why PACKET_ID`: replay a run and say who touched a packet and what each changed.

What the run must record, and how this gets it by replaying (the emulator is
deterministic: the same image, config, traffic and cycles give the same history):

* where the packet lives: its DRAM buffer.  PACKET_ID is a buffer index; the buffers are
  `--buffer BASE:SIZE` (buffer i = [BASE + i*SIZE, +SIZE)), or `--buffer ADDR:LEN` with
  PACKET_ID 0 for one range, or, for a linked router image, the system map in the image
  (buf_base, 1 << buf_shift, frame at +pkt_pad);
* who read or wrote it: thread history (level 2: every instruction's pc, and each memory
  command's issue and completion with unit, command, address and length), so every DRAM
  reference inside the buffer is attributed to ME, context, block and source line;
* which bytes each write changed: a DRAM write watchpoint on the buffer stops the run
  after each write lands; the buffer is compared with the previous snapshot and the
  changed bytes are credited to the write that completed over them.

* what became of it (`pkt:N` in a linked router: `Fate`): its frame among those the MSF
  sent (forwarded on a port); the thread that put its buffer back on the free list and
  counted a drop reason next (dropped by that block); the control daemon's exception log,
  which names the buffer, or the host's reader of the exception ring (excepted, and what
  the control plane did).  The replay runs on up to FATE_WAIT cycles for a frame on its
  way to the wire.

Not seen this way: a packet's descriptor and packet word moving through SRAM/scratch
rings (history events carry addresses, not the data words), so blocks that only pass the
handle on (lookup, qm) appear only if they touch the buffer.  A history event carrying
the first data word of ring puts/gets would let `why` follow the handle through rings.

Several images (`--image a.uc@0 --image b.elf@1`) are loaded as `npk run` and `npk debug`
load them (npkit.toolchain.debug.target.open_targets).  A run directory (`--run DIR`) holds
run.json: {"image": ... (or "images": [IMAGE@MES, ...]), "config": ..., "traffic": ...,
"cycles": N, "buffer": "BASE:SIZE", "params": {...layout parameters}, "defines": {...the
sources' preprocessor defines}, "include_dirs": [...their -I], "rings": [...each as --ring]},
paths relative to DIR (npkit.toolchain.debug.run_schema): everything open_targets takes to
load the run but the gdb port of an interactive session.  -I and --ring on the command line
add to run.json's (-I searched first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.asm.base.schema import load_yaml, validate
from npkit.emulator.binding import UNITS
from npkit.toolchain.system.control import ACTIONS

from . import events
from . import packet as pkt
from .ring_schema import is_ring_file, read_ring, read_ring_file
from .run_schema import RunFile, parse_buffer
from .source import where
from .target import (
    SOURCE_SUFFIXES,
    Items,
    Target,
    TargetUsage,
    is_layout,
    open_targets,
    split_image_arg,
)

DRAM = UNITS.index("dram")
WRITES_DRAM = ("write", "rbuf_rd")  # the DRAM commands that change a packet buffer
OPS = {"rbuf_rd": "rbuf_rd (receive into DRAM)", "tbuf_wr": "tbuf_wr (transmit from DRAM)"}
CHUNK = 1000
FIELDS = [(0, 6, "eth dst"), (6, 12, "eth src"), (12, 14, "ethertype"), (14, 15, "ip version/ihl"),
          (15, 16, "ip tos"), (16, 18, "ip total length"), (18, 20, "ip id"), (20, 22, "ip flags/fragment"),
          (22, 23, "ip ttl"), (23, 24, "ip protocol"), (24, 26, "ip header checksum"), (26, 30, "ip src"),
          (30, 34, "ip dst")]  # fmt: skip


class WhyError(ValueError):
    pass


@dataclass
class RunSpec:
    images: Items  # IMAGE[@MES] as (path, MES text or None)
    config: str | None = None  # None: the one the images were linked for
    traffic: str | None = None
    cycles: int = 1_000_000
    buffer: str | None = None
    params: dict[str, Any] | None = None  # layout parameters (-D for a layout)
    source: str = "--buffer"  # where `buffer` came from, for its errors
    include_dirs: tuple[str, ...] = ()  # -I: where a .uc image's #include looks
    defines: dict[str, str] | None = None  # -D for .uc sources: preprocessor defines
    rings: list[dict[str, Any]] | None = None  # --ring: scratch rings for plain images

    @property
    def label(self) -> str:
        """The images as the user named them."""
        return ", ".join(f"{path}@{mes}" if mes else path for path, mes in self.images)


def load_run_spec(run_dir: str | None, images: Items | None, config: str | None, mes: str | None,
                  traffic: str | None, cycles: int, buffer: str | None) -> RunSpec:  # fmt: skip
    """The run to replay: DIR/run.json's (the options fill in what it leaves out), or the
    options' (`images` split from --image IMAGE[@MES] and --me)."""
    if run_dir is not None:
        return _from_run_dir(Path(run_dir), config, mes, cycles, buffer)
    if not images:
        raise TargetUsage("name the run: --run DIR, or --image IMAGE[@MES] (repeatable; with --traffic, "
                          "--cycles, --buffer)")  # fmt: skip
    if cycles < 0:
        raise WhyError(f"--cycles must be >= 0, got {cycles}")
    return RunSpec(images, config, traffic, cycles, buffer)


def _from_run_dir(d: Path, config: str | None, mes: str | None, cycles: int, buffer: str | None) -> RunSpec:
    f = d / "run.json"
    located = load_yaml(f, error=WhyError, what="run file")  # JSON is YAML: the line of each key
    raw = validate(RunFile, located.data, str(f), located=located, error=WhyError)

    def rel(v: str) -> str:
        return v if Path(v).is_absolute() else str(d / v)

    def at(*path: str | int) -> str:  # the file and line of a key, as the schema's errors name it
        line = located.line(path)
        shown = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        return f"{f}:{line}: {shown}" if line is not None else f"{f}: {shown}"

    items = _run_images(raw, d, f, mes, rel)
    sources = any(Path(path).suffix in SOURCE_SUFFIXES for path, _ in items)
    if raw.defines and not sources:
        raise WhyError(f"{f}: defines: preprocessor defines for .uc sources, and the run names none")
    if raw.include_dirs and not sources:
        raise WhyError(f"{at('include_dirs')}: include directories for .uc sources, and the run names none")
    if raw.rings and any(is_layout(path) for path, _ in items):
        raise WhyError(f"{at('rings')}: scratch rings for plain images; a layout configures its own")
    return RunSpec(items, raw.config or config, None if not raw.traffic else rel(raw.traffic),
                   cycles if raw.cycles is None else raw.cycles, raw.buffer if raw.buffer is not None else buffer,
                   raw.params, source=f"{f}: buffer", defines=raw.defines,
                   include_dirs=tuple(_include_dir(rel(v), at("include_dirs", n))
                                      for n, v in enumerate(raw.include_dirs or ())),
                   rings=[r for n, v in enumerate(raw.rings or ()) for r in _rings(v, rel, at("rings", n))])  # fmt: skip


def _run_images(raw: RunFile, d: Path, f: Path, mes: str | None, rel: Callable[[str], str]) -> Items:
    """run.json's images as (path, MES text or None), paths relative to the run directory;
    `mes` (run.json's, else --me) goes with a single image that names no MEs itself."""
    texts = raw.images if raw.images is not None else [str(raw.image)]
    items: Items = []
    for text in texts:
        path, named = split_image_arg(text, d)
        items.append((rel(path), named))
    me_text = raw.mes if raw.mes is not None else mes
    if me_text is not None:
        if len(items) > 1:
            raise TargetUsage(f"--me goes with a single image; {f} names several (each IMAGE@MES)")
        if items[0][1] is not None:
            raise WhyError(f"{f}: mes: {texts[0]} names its MEs and mes names them again: give one")
        items = [(items[0][0], me_text)]
    return items


def _include_dir(path: str, where: str) -> str:
    """A run.json include directory (relative to the run directory), there."""
    if not Path(path).is_dir():
        raise WhyError(f"{where}: {path}: no such directory")
    return path


def _rings(text: str, rel: Callable[[str], str], where: str) -> list[dict[str, Any]]:
    """A run.json ring as --ring takes it: one ring (checked by the schema already) or a
    ring file, relative to the run directory; the loader's errors name `where`."""
    if not is_ring_file(text):
        return [read_ring(text, where, WhyError)]
    try:
        return read_ring_file(rel(text), WhyError)  # each named by the ring file's line
    except WhyError as e:
        raise WhyError(f"{where}: {e}") from None


def field_name(off: int) -> str:
    for lo, hi, name in FIELDS:
        if lo <= off < hi:
            return name
    return "payload"


def _range(target: Target, spec: RunSpec, packet_id: int) -> tuple[int, int, int]:
    """(address, length, frame pad) of the packet's buffer."""
    if spec.buffer:
        try:
            base, size = parse_buffer(spec.buffer)
        except ValueError as e:
            raise WhyError(f"{spec.source}: {e}") from None
        addr = base + packet_id * size
        dram = int(target.chip.config["dram_bytes"])
        if addr + size > dram:
            what = f"buffer {packet_id} [0x{addr:x}, +{size})" if packet_id else f"[0x{addr:x}, +{size})"
            message = f"{spec.source}: {what} is outside DRAM (0x0..0x{dram - 1:x})"
            raise TargetUsage(message) if spec.source == "--buffer" else WhyError(message)
        return addr, size, -1
    sysmap = target.image.meta.get("sysmap")
    if isinstance(sysmap, dict):
        size = 1 << int(sysmap["buf_shift"])
        return int(sysmap["buf_base"]) + packet_id * size, size, int(sysmap.get("pkt_pad", 0))
    raise WhyError("where do packets live? give --buffer BASE:SIZE (buffer PACKET_ID is "
                   "[BASE + PACKET_ID*SIZE, +SIZE))")  # fmt: skip


def _open(spec: RunSpec) -> Target:
    """The chip with the run's images loaded as npk run and npk debug load them."""
    return open_targets(spec.images, spec.config, traffic=spec.traffic, params=spec.params,
                        include_dirs=spec.include_dirs, defines=spec.defines, rings=spec.rings)  # fmt: skip


def _tag(tag_id: int) -> bytes:
    """The bytes the traffic generator puts in the payload of packet `tag_id`."""
    return pkt.TAG + tag_id.to_bytes(4, "big")


def find_tagged(spec: RunSpec, tag_id: int) -> tuple[int, int]:
    """(buffer index, cycle) where the frame tagged b"NPK1" + tag_id first lands in a
    packet buffer: replay, and after each chunk look into the buffers written in it."""
    target = _open(spec)
    chip = target.chip
    base, size, _ = _range(target, spec, 0)
    needle = _tag(tag_id)
    chip.history_enable(1)
    end = chip.cycle + spec.cycles
    while chip.cycle < end:
        reason = chip.run(min(CHUNK, end - chip.cycle))
        written: dict[int, int] = {}
        for ev in chip.history():
            if ev.kind == "mem_done" and ev.unit == DRAM and events.is_command(ev, *WRITES_DRAM) and ev.a1 >= base:
                written.setdefault((ev.a1 - base) // size, ev.cycle)
        for idx, cyc in sorted(written.items(), key=lambda kv: kv[1]):
            if needle in chip.mem_read("dram", base + idx * size, min(size, 256)):
                return idx, cyc
        if reason not in ("budget", "watchpoint", "breakpoint"):
            break
    raise WhyError(f"no frame tagged with traffic packet id {tag_id} reached a packet buffer "
                   f"in {spec.cycles} cycles (dropped before rx, or run longer with --cycles)")  # fmt: skip


SRAM, SCRATCH = UNITS.index("sram"), UNITS.index("scratch")
COUNTERS = 256  # drop (then exception) counters a table in scratch (toolchain/system/sysmap.py)
FATE_WAIT = 200_000  # cycles a replay may run on after the buffer's last use to see the frame leave


class Fate:
    """What became of a traffic packet in a linked router (the image's system map):
    forwarded on a port (its frame, by the generator's tag, among those the MSF sent),
    dropped by a block (the thread that put the packet's buffer back on the free list
    and then counted a drop reason: microcode/include/npk_block.h, npk_emit), or sent to
    the exception path (the control daemon's log names the buffer, the reason and what
    it did; without a daemon, the host's reader of the exception ring)."""

    def __init__(self, target: Target, tag_id: int, index: int) -> None:
        sysmap = target.image.meta["sysmap"]
        self.target, self.tag, self.index = target, _tag(tag_id), index
        desc = int(sysmap["desc_base"]) + (index << int(sysmap["desc_shift"]))
        self.free_addr = (int(sysmap["freelist_q"]) + desc) & 0xFFFFFFFF  # sram[enqueue] records a + b
        self.drop_base = int(sysmap["stat_drop_base"])
        self.freeing: dict[tuple[int, int], int] = {}  # threads that freed the buffer: their next count says why
        self.drop: dict[str, Any] | None = None
        self.sent: tuple[int, int] | None = None  # (port, ns) of the frame on the wire
        self.records: list[Any] = []  # the daemon's log records about this buffer, from the packet's receive on
        self.log: Any = None
        if target.control is not None:
            from npkit.toolchain.system.control import LogReader

            self.log = LogReader(target.chip)

    def event(self, ev: Any) -> None:
        """A history event while the buffer holds the packet."""
        if ev.kind != "mem_issue":
            return
        key = (ev.me, ev.ctx)
        if ev.unit == SRAM and ev.a1 == self.free_addr and events.is_command(ev, "enqueue"):
            self.freeing[key] = ev.cycle
        elif ev.unit == SCRATCH and key in self.freeing:
            cycle = self.freeing.pop(key)
            code = (ev.a1 - self.drop_base) >> 2
            if self.drop is None and 0 <= code < COUNTERS and ev.a1 & 3 == 0:
                self.drop = {"me": ev.me, "me_name": self.target.chip.me_name(ev.me), "ctx": ev.ctx,
                             "block": self.target.loaded.get(ev.me, "?"), "code": code, "cycle": cycle}  # fmt: skip

    def collect(self, live: bool) -> None:
        """After a chunk of the replay: frames sent, and (`live`: the packet is in the
        buffer) the daemon's new log records about the buffer."""
        run = self.target.traffic
        d = run.dev.drain_raw() if run is not None else None
        if d is not None and self.sent is None:
            off = 0
            for port, t, n in zip(d.port, d.t, d.len, strict=True):
                if self.tag in bytes(d.data[off : off + n]):
                    self.sent = (port, t)
                    break
                off += n
        if self.log is not None:
            got = [r for r in self.log.take() if r.handle == self.index]
            if live:
                self.records += got

    def settled(self) -> bool:
        """Nothing more to wait for: a drop, the frame on a wire, or an exception the
        control plane did not forward (one it forwarded waits for its frame too)."""
        if self.sent is not None or self.drop is not None or self._host_record() is not None:
            return True
        return bool(self.records) and ACTIONS.get(self.records[0].action) != "forwarded"

    def _host_record(self) -> str | None:
        reader = self.target.exceptions
        tag_id = int.from_bytes(self.tag[-4:], "big")
        return next((reason for pid, reason in (reader.records if reader is not None else []) if pid == tag_id), None)

    def report(self, frame: bytes) -> dict[str, Any]:
        """{"outcome": forwarded | dropped | exception | unknown, ...the details, "text"}."""
        from npkit.emulator.traffic.control import frame_digest
        from npkit.emulator.traffic.reasons import ReasonError
        from npkit.toolchain.system.app import reasons_of_image

        reasons = reasons_of_image(self.target.image.meta)  # an application's codes too

        def name(kind: str, code: int) -> str:
            try:
                return reasons.get(kind, code).name  # type: ignore[arg-type]
            except ReasonError:
                return f"undeclared_code_{code}"

        on_wire = f" on port {self.sent[0]}" if self.sent is not None else ""
        if self.drop is not None:
            d = self.drop
            reason = name("drop", d["code"])
            return {"outcome": "dropped", **d, "reason": reason,
                    "text": f"dropped by {d['block']} (ME {d['me_name']} ctx {d['ctx']}, cycle {d['cycle']}) "
                            f"with {reason}"}  # fmt: skip
        recs = [r for r in self.records if r.digest == frame_digest(frame)] or self.records
        if recs:
            r = recs[0]
            reason, action = name("exception", r.reason), ACTIONS.get(r.action, f"action {r.action}")
            did = f"{action} it" + (on_wire if action == "forwarded" else "")
            if r.sent:
                did += f", sending {r.sent} frame{'s' if r.sent > 1 else ''} of its own about it (ICMP, ARP)"
            return {"outcome": "exception", "reason": reason, "control_plane": action, "frames_sent": r.sent,
                    **({"port": self.sent[0]} if self.sent is not None and action == "forwarded" else {}),
                    "text": f"excepted with {reason}; the control plane {did}"}  # fmt: skip
        host = self._host_record()
        if host is not None:
            return {"outcome": "exception", "reason": host, "control_plane": "none (the host's reader)",
                    "text": f"excepted with {host}; no control program: the host's reader of the "
                            "exception ring took the record and freed the buffer"}  # fmt: skip
        if self.sent is not None:
            return {"outcome": "forwarded", "port": self.sent[0], "ns": self.sent[1],
                    "text": f"forwarded on port {self.sent[0]}"}  # fmt: skip
        return {"outcome": "unknown", "text": "no fate within the replay: still in the router, or it left "
                                              "unseen (run longer with --cycles)"}  # fmt: skip


def explain(spec: RunSpec, packet_id_text: str) -> dict[str, Any]:
    """Report for a buffer index (`5`), or for a traffic packet id (`pkt:17`: the buffer its
    frame was received into, from that receive to the next receive into the same buffer)."""
    tag_id: int | None = None
    recv_cycle = -1
    try:
        if packet_id_text.startswith(("pkt:", "id:")):
            tag_id = int(packet_id_text.split(":", 1)[1], 0)
        else:
            packet_id = int(packet_id_text, 0)
    except ValueError:
        raise WhyError(f"PACKET_ID is a buffer index (5) or a traffic packet id (pkt:5), "
                       f"got '{packet_id_text}'") from None  # fmt: skip
    if tag_id is not None:
        if not 0 <= tag_id <= 0xFFFFFFFF:
            raise WhyError(f"a traffic packet id is 0..0xffffffff, got {tag_id}")
        packet_id, recv_cycle = find_tagged(spec, tag_id)
    target = _open(spec)
    chip = target.chip
    addr, length, pad = _range(target, spec, packet_id)
    before = chip.mem_read("dram", addr, length)
    initial = before
    # a tagged frame already in the buffer when the image is loaded (.init) was not received:
    # its `before` is the buffer as loaded; else what was there belongs to an earlier packet
    preloaded = tag_id is not None and _tag(tag_id) in before[:256]
    chip.history_enable(2)
    wp = chip.add_watchpoint(f"dram:{addr}", length=length)
    last_pc: dict[tuple[int, int], int] = {}
    issues: dict[tuple[int, int, int], list[dict[str, Any]]] = {}  # (me, ctx, addr) -> pending touches
    touches: list[dict[str, Any]] = []
    done_writes: list[dict[str, Any]] = []
    end = chip.cycle + spec.cycles
    received: bytes | None = None  # the buffer after the first receive into it
    gen = 0  # receives into the start of the buffer so far (a new packet each)
    chosen: int | None = None  # the generation of the tagged packet, once received
    stop_next = False
    fate = Fate(target, tag_id, packet_id) if tag_id is not None and isinstance(target.image.meta.get("sysmap"), dict) \
        and not spec.buffer else None  # fmt: skip

    def loc(me: int, pc: int) -> str:
        return where(target.smap(me).entry(pc)) if me in target.loaded else "?"

    while chip.cycle < end:
        reason = chip.run(min(CHUNK, end - chip.cycle))
        for ev in chip.history():
            if fate is not None and chosen is not None and not stop_next:
                fate.event(ev)
            if ev.kind == "instr":
                last_pc[(ev.me, ev.ctx)] = ev.a0
            elif ev.unit == DRAM and ev.kind in ("mem_issue", "mem_done"):
                if ev.kind == "mem_issue":
                    nbytes = ((ev.a0 >> 16) & 0xFFFF) * 4
                    lo = ev.a1 & ~7
                    if lo < addr + length and addr < lo + nbytes:
                        if events.is_command(ev, "rbuf_rd") and lo - addr < 64 and tag_id is not None:
                            gen += 1
                            if chosen is not None and gen > chosen:
                                stop_next = True  # the next packet is coming into this buffer
                        pc = last_pc.get((ev.me, ev.ctx), 0)
                        t = {"cycle": ev.cycle, "me": ev.me, "me_name": target.chip.me_name(ev.me), "ctx": ev.ctx,
                             "block": target.loaded.get(ev.me, "?"), "pc": pc, "at": loc(ev.me, pc),
                             "op": OPS.get(events.command_name(ev), events.command_name(ev)),
                             "offset": lo - addr, "bytes": nbytes, "changed": [], "gen": gen}  # fmt: skip
                        touches.append(t)
                        issues.setdefault((ev.me, ev.ctx, ev.a1), []).append(t)
                else:
                    q = issues.get((ev.me, ev.ctx, ev.a1))
                    if q:
                        t = q.pop(0)
                        t["done"] = ev.cycle
                        if events.is_command(ev, *WRITES_DRAM):
                            done_writes.append(t)
                        if ev.cycle == recv_cycle and chosen is None:
                            chosen = t["gen"]
        if fate is not None:
            fate.collect(chosen is not None and not stop_next)
        if stop_next:
            break  # `before` is the buffer as the tagged packet left it
        if reason == "watchpoint":
            now = chip.mem_read("dram", addr, length)
            changed = [i for i in range(length) if now[i] != before[i]]
            for i in changed:
                w = next((t for t in reversed(done_writes)
                          if t["offset"] <= i < t["offset"] + t["bytes"]), None)  # fmt: skip
                if w is not None:
                    w["changed"].append([i, before[i], now[i]])
                    if w["op"].startswith("rbuf_rd") and (tag_id is None or w["gen"] == chosen) \
                            and (received is None or received == b"" or tag_id is not None):
                        received = b""  # filled in below, once this stop's changes are credited
            if received == b"":
                received = now
            before = now
        elif reason != "budget":
            break
    chip.del_watchpoint(wp)
    final = before if stop_next else chip.mem_read("dram", addr, length)
    ran = chip.cycle
    if fate is not None:  # a frame sent may still be on its way to the wire: run on a little
        live = chosen is not None and not stop_next
        wait_end = chip.cycle + FATE_WAIT
        while not fate.settled() and chip.cycle < wait_end and chip.run(CHUNK) == "budget":
            for ev in chip.history():
                if live:
                    fate.event(ev)
            fate.collect(live)
    if tag_id is not None:
        touches = [t for t in touches if t["gen"] == chosen]
        initial = initial if preloaded else bytes(length)
    if pad < 0:
        pad = pkt.guess_pad(final[:64])
    for t in touches:
        t["fields"] = list(dict.fromkeys(field_name(i - pad) for i, _, _ in t["changed"] if i >= pad))
    flen = pkt.frame_length(final[pad : pad + 64])
    frame = received[pad : pad + pkt.frame_length(received[pad : pad + 64])] if received else b""
    return {"packet_id": packet_id, "traffic_id": tag_id, "image": spec.label, "buffer": {"addr": addr, "len": length, "pad": pad},
            "cycles": ran, "touches": touches,
            **({"fate": fate.report(frame)} if fate is not None else {}),
            "before": pkt.decode(initial[pad : pad + flen]) if any(initial) else [],
            "received": pkt.decode(received[pad : pad + flen]) if received else [],
            "after": pkt.decode(final[pad : pad + flen])}  # fmt: skip


def render(report: dict[str, Any]) -> str:
    b = report["buffer"]
    tid = report.get("traffic_id")
    out = [(f"traffic packet {tid} in buffer {report['packet_id']}" if tid is not None else
            f"packet {report['packet_id']}") + f": dram 0x{b['addr']:x}..0x{b['addr'] + b['len'] - 1:x}"
           + (f" (frame at +{b['pad']})" if b["pad"] else "") + f", run of {report['cycles']} cycles"]  # fmt: skip
    if not report["touches"]:
        out.append("  no thread read or wrote this buffer")
    for t in report["touches"]:
        out.append(f"  cycle {t['cycle']:>7}  ME {t['me_name']} ctx {t['ctx']} ({t['block']})  {t['op']} "
                   f"+{t['offset']}..+{t['offset'] + t['bytes'] - 1}  at {t['at']}")  # fmt: skip
        if len(t["changed"]) > 16 or t["op"].startswith("rbuf_rd"):  # a receive: which fields, not every byte
            out.append(f"      {len(t['changed'])} bytes changed: {', '.join(t['fields'])}")
            continue
        for i, old, new in t["changed"]:
            out.append(f"      byte +{i} ({field_name(i - b['pad']) if i >= b['pad'] else 'pad'}): "
                       f"{old:02x} -> {new:02x}")  # fmt: skip
    out.append("before:" if report["before"] else "before: (empty buffer)")
    out += report["before"]
    if report.get("received"):
        out.append("as received:")
        out += report["received"]
    out.append("after:")
    out += report["after"]
    if report.get("fate"):
        out.append(f"fate: {report['fate']['text']}")
    return "\n".join(out)
