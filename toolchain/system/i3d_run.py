"""The I3 daemon in a run (npkit.toolchain.system.router_run): started as the image's
control program (`control: {program: i3d}`), and judged.

`I3dPlane` starts xscale/i3d on the chip's control processor (placement xscale) or as a
host process (gpe), with its configuration written from the application's slice file
(npkit.toolchain.system.i3d.i3d_conf).

`GpeJudge` is the run's account of the GPE path.  The application's model (the SPP's)
says which packets the fast path sends to the exception path; the daemon takes every
record off the ring, so the judge ties its exception log (digest, length, port, code,
action) to those packets:

- consumed, dropped or relayed: the packet is EXCEPTED with the record's reason, as the
  model says;
- forwarded: the packet's frame(s) leave the router.  Each is compared, byte for byte,
  with what the daemon must make of the packet (the I3 semantics of xscale/i3d/exc.c
  over the filters the daemon published in its mirror and the finger table in SRAM):
  `matched_control`, else `unexpected_control`; a packet the daemon says it forwarded
  whose frame never left is `missing_control`.

A packet the model excepts but whose frame leaves with no record of the daemon's was
forwarded by the fast path after the daemon installed a filter for it: judged the same
way (the daemon and the fast path must make the same bytes: nothing is misforwarded when
a trigger moves between the paths) and counted as `fast_path_after_install`.

The GPE path's delay is measured on the wire for each packet the daemon forwarded (its
arrival to its frame's departure: `gpe_latency_ns`), and by the daemon itself (receive
timestamp to its hand-over to the queue manager: `gpe_delay_ns`).
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import tempfile
from collections import Counter, deque
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

from npkit.emulator.traffic.control import frame_digest
from npkit.emulator.traffic.cpkt import DROP, EXCEPTION, FORWARD, PYTHON
from npkit.emulator.traffic.oracle import Drop, Forward
from npkit.emulator.traffic_run import DROPPED, EXCEPTED, Chunk, Departure

from .control import start_daemon
from .errors import LinkError
from .i3d import (
    I3D_STATS_BASE,
    I3LogReader,
    MirroredFilter,
    i3d_conf,
    load_substrate,
    mirror_offset,
    read_mirror,
    read_stats,
    stat_names,
)
from .undeclared import reason_name

TO_PYTHON = bytes.maketrans(bytes([EXCEPTION]), bytes([PYTHON]))
ALL_TO_PYTHON = bytes.maketrans(bytes([EXCEPTION, FORWARD]), bytes([PYTHON, PYTHON]))
# ... and the drops too, once the daemon changed the meta-interface table (`slice add|del`)
EVERY_TO_PYTHON = bytes.maketrans(bytes([EXCEPTION, FORWARD, DROP]), bytes([PYTHON, PYTHON, PYTHON]))
OUTER = 42  # Ethernet + IPv4 + UDP (docs/spp.md §2)
I3_HEADER = 27
ACT_CONSUMED, ACT_FORWARDED, ACT_DROPPED, ACT_RELAYED = 1, 2, 3, 5


def _app_module(folder: Path, name: str) -> Any:
    """A module of the application's folder, loaded by path (the application is no package)."""
    key = f"npk_i3d_{name}_{abs(hash(str(folder.resolve())))}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, folder / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod


def app_folder(image: Any) -> Path:
    """The folder of the application an image was linked from (where its slice file is)."""
    app = image.meta.get("app") or {}
    model = app.get("model")
    folder = Path(model).parent if model else Path(app.get("folder", "."))
    return folder


class I3dPlane:
    """xscale/i3d started on a chip for an image whose layout names it as its control program."""

    def __init__(self, chip: Any, image: Any, *, placement: str | None = None, socket: str | Path | None = None,
                 echo: Any = None, workdir: str | Path | None = None, options: dict[str, int] | None = None,
                 router: Any = None, timed: list[tuple[int, str]] | None = None, gdb_port: int | str | None = None,
                 kill_at_ns: int | None = None, restart_at_ns: int | None = None, **_ignored: Any) -> None:  # fmt: skip
        """`timed`: (emulated ns, command) the daemon makes at those times, as if they came on
        its control socket (`filter fast 13`: a deterministic install while traffic runs)."""

        from .router_image import router_config_of

        meta = image.meta["control"]
        self.chip = chip
        self.placement = placement or meta["placement"]
        if self.placement not in ("xscale", "gpe"):
            raise LinkError(f"control placement {self.placement!r}: i3d runs on xscale or gpe")
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="i3d-")
        self.dir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = str(socket) if socket else None
        self.folder = app_folder(image)
        self.sub = load_substrate(self.folder)
        router = router if router is not None else router_config_of(image)
        opts = {"clock_mhz": int(float(chip.config["clock_mhz"])), **meta.get("options", {}), **(options or {})}
        # gpe_ipv4: npkd beside i3d answers the IPv4 slices' records (npkd_spp)
        self.ipv4 = bool(int(opts.pop("ipv4", 0)))
        rings: tuple[int, ...] = (int(meta["exceptions_ring"]), int(meta["ring_number"]))
        if self.ipv4:
            if self.placement != "gpe":
                raise LinkError("gpe_ipv4=1: npkd runs beside i3d as a second host process (control=gpe only)")
            from .npkd_spp import host_rings

            rings += host_rings(chip, image.meta.get("rings") or {})
        conf = i3d_conf(self.sub, router, chip.tcam_info(), rings=rings, socket=self.socket,
                        options=opts, timed=timed)  # fmt: skip
        self.conf = self.dir / "i3d.conf"
        self.conf.write_text(conf)
        # killed (fault injection) and started again: it reads its configuration afresh,
        # clears the filters its predecessor left and makes the timed commands due again
        self.system, self.host, self.program = start_daemon(chip, meta, self.placement, self.dir, self.conf,
                                                            kill_at_ns, restart_at_ns, gdb_port, echo)  # fmt: skip
        self.npkd: Any = None
        if self.ipv4:
            from .npkd_spp import start_beside

            self.npkd = start_beside(self.system, chip, router, self.sub, self.folder, self.dir,
                                     (rings[2], rings[3]), echo)  # fmt: skip

    def stats(self) -> dict[str, Any] | None:
        """The daemon's statistics (i3d.read_stats), with the keys a run asks every control
        plane for (nothing held for ARP, no send backlog, no frames of its own making)."""
        st = read_stats(self.chip)
        if st is None:
            return None
        st["counters"] = {"holding": 0, "tx_backlog": 0, "frames_sent": 0, **st["counters"]}
        st["state"] = "ready"
        return st

    def summary(self) -> dict[str, Any]:
        st = read_stats(self.chip)
        status = self.system.status() or {}
        out: dict[str, Any] = {"program": "i3d", "running": st is not None,
                               "xscale": {k: status.get(k) for k in ("placement", "state", "instructions", "interrupts",
                                                                     "wait_cycles", "exit_code", "fault", "starts")}}  # fmt: skip
        if st is not None:
            out["counters"] = st["counters"]
            out["gpe_delay_ns"] = st["gpe_delay_ns"]
        if self.npkd is not None:
            out["npkd"] = self._npkd_summary()
        err = self.host.stderr.decode(errors="replace").strip() if self.system.xscale is not None else ""
        if err:
            out["stderr"] = err[-2000:]
        return out

    def _npkd_summary(self) -> dict[str, Any]:
        """npkd beside i3d: its process and the counters of its answers."""
        from .control import read_stats

        st = read_stats(self.chip)
        c = st["counters"] if st else {}
        keys = ("local_echo_requests", "icmp_echo_reply", "local_udp", "icmp_port_unreachable",
                "icmp_protocol_unreachable", "icmp_time_exceeded", "icmp_net_unreachable",
                "icmp_suppressed_rules", "local_counted", "exc_unknown", "log_records")  # fmt: skip
        status = self.npkd.status()
        return {"placement": "gpe", "state": status.get("state"), "exit_code": status.get("exit_code"),
                "counters": {k: int(c.get(k, 0)) for k in keys}}  # fmt: skip

    def failed(self) -> str | None:
        if self.npkd is not None and self.npkd.state in ("crashed", "exited"):
            err = self.npkd.stderr.decode(errors="replace").strip()
            return f"npkd beside i3d {self.npkd.state} (exit code {self.npkd.exit_code})" + (f": stderr: {err[-300:]}" if err else "")
        st = self.system.status() or {}
        if st.get("state") in ("crashed", "exited"):
            err = self.host.stderr.decode(errors="replace").strip()
            return f"the i3 daemon {st['state']} (exit code {st.get('exit_code')})" + (f": stderr: {err[-300:]}" if err else "")
        return None

    def whereabouts(self) -> str:
        st = self.system.status() or {}
        return str(st.get("state", "not started"))

    def close(self) -> None:
        self.system.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def control_plane(chip: Any, image: Any, **kw: Any) -> Any:
    """The image's control program started on `chip`: I3dPlane for the I3 daemon, else
    npkd's ControlPlane (with the same keywords)."""
    if (image.meta.get("control") or {}).get("program") == "i3d":
        return I3dPlane(chip, image, **kw)
    from .control import ControlPlane

    return ControlPlane(chip, image, **kw)


class GpeJudge:
    """The GPE path's account in a RouterRun (the module docstring)."""

    def __init__(self, rr: Any, slice_ns: int) -> None:
        self.rr = rr
        self.run = rr.run
        self.plane: I3dPlane = rr.control
        self.sub = self.plane.sub
        self.log = I3LogReader(rr.chip)
        self.index: dict[tuple[int, int, int], deque[int]] = {}
        self._all_indexed: set[int] = set()  # windows (first id) whose every packet is indexed
        self.indexed: dict[int, tuple[int, int, int]] = {}  # pid -> its key in index
        self._kept: deque[int] = deque()  # forgotten windows' packets whose record may still come
        self.gpe_forwarded: dict[int, int] = {}  # pid -> frames the daemon sent about it
        self.seen_frames: Counter[int] = Counter()
        self.forwarded_by_it = 0
        self.copies = 0  # frames beyond the first about one packet (several triggers)
        self._copies_expected: dict[int, list[tuple[int, bytes]]] = {}  # pid -> the frames its copies may be
        self.model_forwards = 0  # ... of those, packets the model forwards (their filter out of the TCAM)
        self.arrived: dict[int, int] = {}
        self.left_at: dict[int, int] = {}  # pid -> ns from its arrival to its (first) frame's departure
        self.by_action: Counter[str] = Counter()
        self.killed_own = self.killed_forwarded = self.killed_in_hand = 0
        self._mirror: tuple[int, list[MirroredFilter]] = (-1, [])
        # the filters before the last change: a frame judged just after a removal was made
        # by the state before it (the daemon publishes an install before it, a removal after)
        self._previous: list[MirroredFilter] = []
        self.changed = False  # the daemon changed the fast path: every frame judged here
        self.live_forwarded = 0  # frames of packets the link's model drops, forwarded by a slice added at run time
        self._fingers_written_at = I3D_STATS_BASE + 16 + 4 * stat_names().index("fingers_written")
        self._mirror_gen_at = I3D_STATS_BASE + mirror_offset() + 4
        mod = sys.modules[type(self.sub).__module__]  # the application's slices.py: its table addresses
        self._finger_base, self._finger_block = int(mod.FINGER_BASE), int(mod.FINGER_BLOCK)
        # the meta-interface table's generation word: the daemon bumps it at `slice add|del`;
        # from then on the frames the link's model drops are judged by the table and the TCAM
        # as they are (the application's spp_model.LiveSpp)
        self._mi_gen_at = int(getattr(mod, "META_IF_GEN", 0))
        self.mi_changed = False
        self._live: Any = None
        if self._mi_gen_at:
            live = _app_module(self.plane.folder, "spp_model")
            self._live = live.LiveSpp(self.sub, rr.chip, int(mod.META_IF_BASE), int(mod.MAX_META_IFS))
        # npkd beside i3d (gpe_ipv4): the records i3d relays wait for npkd's log, which says
        # whether it answered (its frame judged against npkd_spp.SppAnswers) or consumed them
        self._npkd_log: Any = None
        self._relayed: dict[tuple[int, int, int], deque[int]] = {}
        self.npkd_pids: set[int] = set()
        self.npkd_answers = self.npkd_matched = 0
        if self.plane.npkd is not None:
            from .control import LogReader
            from .npkd_spp import SppAnswers

            self._npkd_log = LogReader(rr.chip)
            self._spp_answers = SppAnswers(self.sub, self.plane.folder)
        rr.chip.add_service(self.service, int(slice_ns * float(rr.chip.config["clock_mhz"]) // 1000))
        self.run.on_forget.append(self.forget)

    # -- the RouterRun interface
    def window(self, c: Chunk) -> None:
        """Packets the model excepts: indexed by what the daemon's log names them by, and
        left to Python by the ledger (the daemon may forward them)."""
        v = c.extra["v"]
        w = c.w
        for i in range(len(w.lens)):
            if v.kind[i] == EXCEPTION:
                f = w.frame(i)
                self._index(w.first + i, (w.ports[i], len(f), frame_digest(f)))
        # once the daemon has changed the fast path (a filter or a finger, at run time), the
        # model's forwards are no longer the whole story: every frame is judged here
        self._note_changes()
        c.verdicts = dc_replace(v, kind=v.kind.translate(self._to_python() if self.changed else TO_PYTHON))

    def _to_python(self) -> bytes:
        return EVERY_TO_PYTHON if self.mi_changed else ALL_TO_PYTHON

    def _note_changes(self) -> None:
        if not self.mi_changed and self._mi_gen_at and self.rr.chip.read32("sram", self._mi_gen_at):
            self.mi_changed = True
            self.changed = False      # the held windows' drops go to Python too (below)
        if self.changed:
            return
        # the daemon publishes its mirror once as it starts (generation 1), then at each change
        gen = self.rr.chip.read32("sram", self._mirror_gen_at)
        self.changed = gen > 1 or self.rr.chip.read32("sram", self._fingers_written_at) != 0 or self.mi_changed
        if self.changed:    # the windows held already: their frames to come are judged here too
            for c in self.run.chunks:
                if c.verdicts is not None:
                    c.verdicts = dc_replace(c.verdicts, kind=c.verdicts.kind.translate(self._to_python()))

    def _index(self, pid: int, key: tuple[int, int, int]) -> None:
        self.index.setdefault(key, deque()).append(pid)
        self.indexed[pid] = key

    def forget(self, c: Chunk) -> None:
        """A window every packet of which has a fate: its packets leave the index -- but
        for those whose frame left before the daemon logged them (it logs a packet once it
        has sent all its copies), kept until it does."""
        for pid in range(c.first, c.end):
            if pid in self.left_at and pid not in self.gpe_forwarded and pid in self.indexed:
                self._kept.append(pid)
                continue
            self._unindex(pid)
        self._all_indexed.discard(c.first)
        # a record comes within microseconds of its frames: one not come in 2 ms never will
        # (the fast path forwarded the packet, after its filter's install)
        while self._kept and self.arrived.get(self._kept[0], 0) < self.run.now_ns - 2_000_000:
            self._unindex(self._kept.popleft())

    def _unindex(self, pid: int) -> None:
        key = self.indexed.pop(pid, None)
        if key is None:
            return
        q = self.index.get(key)
        if q is not None:
            try:
                q.remove(pid)
            except ValueError:
                pass
            if not q:
                del self.index[key]

    def _excepted_after_all(self, c: Chunk, i: int, code: int) -> None:
        """The model's verdict on packet i of window c becomes the exception its record
        names: what the fast path did (the scheduler's judge, for one, counts the wire's
        idle time against the fast path's packets only)."""
        v = c.extra["v"]
        v.kind[i] = EXCEPTION
        name = reason_name(self.rr.reasons, "exception", code)
        if name in v.names:
            v.reason[i] = v.names.index(name)

    def _index_the_rest(self) -> None:
        """Index the held packets the model does not except too (once a window): a record
        the daemon logged about one of them (its filter out of the TCAM: `filter slow`,
        the `slow_slice` option) names it as well."""
        for c in self.run.chunks:
            if c.first in self._all_indexed:
                continue
            self._all_indexed.add(c.first)
            v, w = c.extra["v"], c.w
            for i in range(len(w.lens)):
                if v.kind[i] != EXCEPTION and not c.fate[i]:
                    f = w.frame(i)
                    self._index(w.first + i, (w.ports[i], len(f), frame_digest(f)))

    def outcome(self, pid: int) -> Any:
        return None

    def fast_outcome(self, pid: int) -> Any:
        return None

    def timed_not_made(self) -> list[Any]:
        return []

    def finish(self) -> None:
        self.service()

    def comparison(self, control_queue_full: int) -> dict[str, int]:
        # matched_control and unexpected_control are counted as the frames leave (judge)
        missing = sum(1 for pid in self.gpe_forwarded if self.seen_frames[pid] == 0)
        return {"missing_control": max(0, missing - control_queue_full)}

    # -- the daemon's log
    def service(self) -> None:
        self._note_changes()
        for r in self.log.take():
            q = self.index.get((r.in_port, r.length, r.digest))
            if not q:       # a packet the model forwards that the fast path excepted (a filter taken out)
                self._index_the_rest()
                q = self.index.get((r.in_port, r.length, r.digest))
            pid = q.popleft() if q else -1
            if q is not None and not q:
                del self.index[(r.in_port, r.length, r.digest)]
            self.indexed.pop(pid, None)
            self.by_action[{1: "consumed", 2: "forwarded", 3: "dropped", 5: "relayed"}.get(r.action, "?")] += 1
            if pid < 0:
                self.rr.comparison["unmatched_exception"] += 1
                continue
            if r.action == ACT_RELAYED and self._npkd_log is not None:
                self._relayed.setdefault((r.in_port, r.length, r.digest), deque()).append(pid)
                continue
            if r.action == ACT_FORWARDED:
                self.forwarded_by_it += 1
                c = self.run.chunk_of(pid)
                if c is not None and c.extra["v"].kind[pid - c.first] != EXCEPTION:
                    # the model forwards it, the fast path excepted it (a filter or finger
                    # taken out): excepted after all, which the record proves
                    self.model_forwards += 1
                    self._excepted_after_all(c, pid - c.first, r.code)
                    if c.verdicts.kind[pid - c.first] == PYTHON:
                        self.gpe_forwarded[pid] = r.sent
                    # (else the ledger judges its frame against the model's: the same bytes)
                else:
                    self.gpe_forwarded[pid] = r.sent
                    if self.seen_frames[pid] >= r.sent:      # its frames have all left
                        self._copies_expected.pop(pid, None)
            else:
                self.run.mark(pid, EXCEPTED, reason_name(self.rr.reasons, "exception", r.code))
        if self._npkd_log is not None:
            self._npkd_service()

    def _npkd_service(self) -> None:
        """npkd's log: an answered packet's frame is judged as it leaves; one it consumed
        is excepted with its record's reason."""
        for r in self._npkd_log.take():
            key = (r.in_port, r.length, r.digest)
            q = self._relayed.get(key)
            pid = q.popleft() if q else -1
            if q is not None and not q:
                del self._relayed[key]
            if pid < 0:
                self.rr.comparison["unmatched_exception"] += 1
                continue
            if r.action == ACT_FORWARDED:
                self.npkd_answers += 1
                self.npkd_pids.add(pid)
                self.gpe_forwarded[pid] = 1
                # a packet without the generator's tag (a pcap's): its answer is found by
                # the bytes predicted for it (an echo reply, an ICMP error: nothing of the
                # input's own bytes but what the answer quotes)
                c = self.run.chunk_of(pid)
                if c is not None:
                    want = self._spp_answers.answer(c.w.frame(pid - c.first), c.w.ports[pid - c.first])
                    if want is not None:
                        self.run.expect_exact(pid, want)
            else:
                self.run.mark(pid, EXCEPTED, reason_name(self.rr.reasons, "exception", r.reason))

    # -- the frames
    def judge(self, d: Departure) -> str | None:
        c = d.chunk
        if c is None or d.pid < 0:
            return None
        i = d.i
        v = c.extra["v"]
        if v.kind[i] == FORWARD:
            return self._judge_forward(d, c, i) if c.verdicts.kind[i] == PYTHON else None
        if v.kind[i] != EXCEPTION:
            return self._judge_live(d, c, i) if c.verdicts.kind[i] == PYTHON else None
        if d.pid not in self.gpe_forwarded:
            self.service()
        w = c.w
        frame = w.frame(i)
        if d.pid in self.npkd_pids:
            return self._judge_npkd(d, frame, w.ports[i], w.times[i])
        expected = self.expect(frame, w.ports[i])
        if not any(port == d.port and data == d.data for port, data in expected):
            expected = self.expect(frame, w.ports[i], self._previous)
        if self.seen_frames[d.pid] == 0 and self.gpe_forwarded.get(d.pid, 2) > 1:
            # more copies may come (its record, read or not yet, says how many), maybe after
            # its window has gone: kept until they have
            self._copies_expected[d.pid] = expected
        self.seen_frames[d.pid] += 1
        if 1 < self.seen_frames[d.pid] <= self.gpe_forwarded.get(d.pid, 0):
            self._copy(d)
        self.left_at.setdefault(d.pid, d.t - w.times[i])   # the first frame about it: its latency
        self.arrived[d.pid] = w.times[i]
        if any(port == d.port and data == d.data for port, data in expected):
            return "matched_control"
        return "unexpected_control"

    def _judge_npkd(self, d: Departure, frame: bytes, port: int, arrived: int) -> str:
        """npkd's answer to an IPv4 slice's packet: what npkd_spp.SppAnswers makes of it
        (the IPv4 slow path over the inner packet, encapsulated back to the sender)."""
        self.seen_frames[d.pid] += 1
        self.left_at.setdefault(d.pid, d.t - arrived)
        self.arrived[d.pid] = arrived
        want = self._spp_answers.answer(frame, port)
        if want is not None and d.port == port and d.data[: len(want)] == want and not any(d.data[len(want) :]):
            self.npkd_matched += 1
            return "matched_control"
        return "unexpected_control"

    def _judge_forward(self, d: Departure, c: Chunk, i: int) -> str:
        """A frame of a packet the model forwards, after the daemon changed the fast path:
        the model's frame, or what the fast path and the daemon make of the packet now (its
        filters, the fingers in SRAM): the same check as the ledger's, with the change."""
        v, w = c.extra["v"], c.w
        o = w.off[i]
        if v.port[i] == d.port and v.out[o : o + w.lens[i]] == d.data:
            return "matched_forward"
        frame = w.frame(i)
        if self._fast_or_gpe_frame(frame, w.ports[i], d):
            return "matched_forward"
        return "wrong_port" if v.port[i] != d.port else "wrong_bytes"

    def _judge_live(self, d: Departure, c: Chunk, i: int) -> str:
        """A frame of a packet the link's model drops, after the daemon changed the
        meta-interface table (a slice added at run time): what the fast path makes of it
        with the table and the TCAM as they are now."""
        w = c.w
        o = self._live.decide(w.frame(i), w.ports[i]) if self._live is not None else None
        if not isinstance(o, Forward):
            return "wrong_outcome"
        if o.port != d.port:
            return "wrong_port"
        if o.data != d.data:
            return "wrong_bytes"
        self.live_forwarded += 1
        return "matched_forward"

    def drop_outcome(self, pid: int, reason: str, o: Any) -> Any:
        """The outcome a drop is judged against (RouterRun._dropped).  A packet to a
        meta-interface the daemon added at run time, which the link's model drops for want of
        one, may be dropped while the change goes: `spp_no_meta_if` until the spp block has
        copied the table again, `spp_no_filter` until the daemon has put the slice's filter
        in the TCAM -- the drop it got is what the state of the change gave."""
        if (not self.mi_changed or self._live is None or getattr(o, "reason", None) != "spp_no_meta_if"
                or reason not in ("spp_no_meta_if", "spp_no_filter")):  # fmt: skip
            return o
        c = self.run.chunk_of(pid)
        if c is None:
            return o
        i = pid - c.first
        return Drop(reason) if self._live.meta_if(c.w.frame(i), c.w.ports[i]) is not None else o

    def _fast_or_gpe_frame(self, frame: bytes, in_port: int, d: Departure) -> bool:
        for filters in (None, self._previous):
            if any(p == d.port and f == d.data for p, f in self.expect(frame, in_port, filters, fast=True)):
                return True
        return False

    def _copy(self, d: Departure) -> None:
        """I3's multicast: a copy for each trigger of the longest length, as many as the
        daemon's record says it sent.  The run counted it a duplicate of its packet; it is a
        frame the daemon made (bit 25 of its packet word): counted as generated instead."""
        run = self.run
        run.duplicates -= 1
        po = run.ports_out[d.port]
        po.frames -= 1
        po.nbytes -= len(d.data)
        run.generated[d.port] += 1
        self.copies += 1

    def late_copy(self, d: Departure) -> str | None:
        """A frame whose packet's window is gone: one of the daemon's multicast copies (its
        record says how many it sent) is judged against the frames expected for the packet;
        None: not one (the run counts it forgotten)."""
        if d.pid in self._copies_expected and d.pid not in self.gpe_forwarded:
            self.service()
        expected = self._copies_expected.get(d.pid)
        if expected is None or self.seen_frames[d.pid] >= self.gpe_forwarded.get(d.pid, 0):
            return None
        self.seen_frames[d.pid] += 1
        self._copy(d)
        if self.seen_frames[d.pid] >= self.gpe_forwarded[d.pid]:
            del self._copies_expected[d.pid]
        return "matched_control" if any(p == d.port and f == d.data for p, f in expected) else "unexpected_control"

    # -- what the daemon must make of a packet (xscale/i3d/exc.c)
    def _filters(self) -> list[MirroredFilter]:
        gen = self.rr.chip.read32("sram", self._mirror_gen_at)
        if gen != self._mirror[0]:
            filters = read_mirror(self.rr.chip)
            self._previous = self._mirror[1]
            # the generation is written last: the same after the read, the mirror was whole
            self._mirror = (gen if self.rr.chip.read32("sram", self._mirror_gen_at) == gen else -1, filters)
        return self._mirror[1]

    def _finger(self, sl: Any, ident: int, exact: bool = False) -> tuple[int, int, int] | None:
        """The finger the daemon routes `ident` by: k, else the highest valid below k
        (`exact`: finger k alone, as the fast path)."""
        base = self._finger_base + sl.i3_index * self._finger_block
        k = ((ident - sl.node_id) & (2**64 - 1)).bit_length() - 1
        for j in range(k, k - 1 if exact else -1, -1):
            w0, w1 = self.rr.chip.read32("sram", base + 0x20 + 16 * j), self.rr.chip.read32("sram", base + 0x24 + 16 * j)
            if w0 >> 31:
                return (w0 >> 16) & 0xFF, w1, w0 & 0xFFFF
        return None

    def _triggers(self, sl: Any, ident: int, filters: list[MirroredFilter] | None) -> list[MirroredFilter]:
        hits = [f for f in (self._filters() if filters is None else filters) if f.matches(sl.id, ident)]
        best = max((f.length for f in hits), default=0)
        return [f for f in hits if f.length == best]

    def _encapsulate(self, frame: bytes, body: bytes, out_mi: int, nh_ip: int, nh_port: int) -> tuple[int, bytes] | None:
        mi = self.sub.meta_ifs[out_mi]
        cfg = self.rr.config
        mac = cfg.arp.get(nh_ip)
        if mac is None:
            return None
        total, udp_len = struct.unpack_from("!H", frame, 16)[0], struct.unpack_from("!H", frame, 38)[0]
        ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, total, 0, 0, 64, 17, 0, mi.ip, nh_ip))
        s = sum(struct.unpack("!10H", bytes(ip)))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        ip[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
        udp = struct.pack("!HHHH", mi.udp, nh_port, udp_len, 0)
        return mi.port, mac + cfg.ports[mi.port].mac + b"\x08\x00" + bytes(ip) + udp + body

    def expect(self, frame: bytes, in_port: int, filters: list[MirroredFilter] | None = None,
               fast: bool = False) -> list[tuple[int, bytes]]:  # fmt: skip
        """The frames (port, bytes) the daemon may send about this packet: one of them (or
        each, for several triggers of the longest length), by its filters (default: as it
        published them last)."""
        if len(frame) < OUTER + I3_HEADER:
            return []
        mi = self.sub.demux(in_port, struct.unpack_from("!I", frame, 30)[0], struct.unpack_from("!H", frame, 36)[0])
        if mi is None:
            return []
        sl = self.sub.slices[mi.slice_index]
        if sl.option != "i3":
            return []
        body = bytearray(frame[OUTER:])
        if body[1] <= 1:
            return []
        body[1] -= 1
        ident = struct.unpack_from("!Q", body, 4)[0]
        hops: list[tuple[int, int, int]] = []
        if body[0] & 1:
            trig = self._triggers(sl, ident, filters) if sl.in_range(ident) else []
            if trig:
                hops = [(f.out_mi, f.nh_ip, f.nh_port) for f in trig if f.action == 1]
            else:
                body[4:12], body[18:26] = body[18:26], bytes(8)
                body[0] &= 0xF0
                ident = struct.unpack_from("!Q", body, 4)[0]
        if not hops:
            if sl.in_range(ident):
                hops = [(f.out_mi, f.nh_ip, f.nh_port) for f in self._triggers(sl, ident, filters) if f.action == 1]
                if fast:    # the fast path: the TCAM's one match, when there is exactly one
                    tcam = [f for f in (self._filters() if filters is None else filters)
                            if f.fast and f.matches(sl.id, ident)]  # fmt: skip
                    if len(tcam) == 1 and tcam[0].action == 1:
                        hops.append((tcam[0].out_mi, tcam[0].nh_ip, tcam[0].nh_port))
            else:
                g = self._finger(sl, ident, exact=fast)
                hops = [g] if g is not None else []
                if fast:
                    g = self._finger(sl, ident)
                    hops += [g] if g is not None else []
        out = []
        for out_mi, ip, port in hops:
            e = self._encapsulate(frame, bytes(body), out_mi, ip, port)
            if e is not None:
                out.append(e)
        return out

    def paths(self) -> list[tuple[int, str]]:
        """(arrival ns, "gpe" | "fast") of every packet the model excepts whose frame left:
        forwarded by the daemon, or by the fast path once the daemon installed its filter."""
        self.service()
        return sorted((self.arrived[pid], "gpe" if pid in self.gpe_forwarded else "fast") for pid in self.left_at)

    def summary(self) -> dict[str, Any]:
        """The GPE path on the wire: packets the daemon forwarded, their latency (arrival to
        departure), and the packets the model excepts that the fast path forwarded after the
        daemon installed their filter (no record of the daemon's by the end)."""
        self.service()
        lat = sorted(t for pid, t in self.left_at.items() if pid in self.gpe_forwarded)
        fast = sum(1 for pid in self.left_at if pid not in self.gpe_forwarded)

        def pct(p: int) -> int:
            return lat[min(len(lat) - 1, len(lat) * p // 100)] if lat else 0

        out = self._summary(lat, fast, pct)
        if self._npkd_log is not None:
            # npkd beside i3d: its answers to the IPv4 slices' packets, and how many matched
            nl = sorted(t for pid, t in self.left_at.items() if pid in self.npkd_pids)
            out["npkd_answers"] = {"sent": self.npkd_answers, "matched": self.npkd_matched,
                                   "awaiting_npkd": sum(len(q) for q in self._relayed.values()),
                                   # arrival to the answer's departure (i3d, the relay, npkd, back)
                                   "latency_ns": {"p50": nl[len(nl) // 2] if nl else 0,
                                                  "p99": nl[min(len(nl) - 1, len(nl) * 99 // 100)] if nl else 0}}  # fmt: skip
        return out

    def _summary(self, lat: list[int], fast: int, pct: Any) -> dict[str, Any]:
        return {"packets_forwarded_by_it": self.forwarded_by_it, "records": dict(self.by_action),
                "forwarded_by_it_the_model_forwards": self.model_forwards, "multicast_copies": self.copies,
                "fast_path_after_install": fast, "forwarded_by_slices_added": self.live_forwarded,
                "gpe_latency_ns": {"count": len(lat), "mean": round(sum(lat) / len(lat)) if lat else 0,
                                   "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": lat[-1] if lat else 0}}  # fmt: skip


__all__ = ["DROPPED", "GpeJudge", "I3dPlane"]
