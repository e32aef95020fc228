"""The control plane in a router run (npkit.toolchain.system.router_run): the oracle's
model of the whole router (npkit.emulator.traffic.control.RouterModel) run alongside
the chip, the daemon's exception log tied to the input packets, and the frames the
router makes itself (ICMP, ARP) compared with the model's -- as the run goes, in memory
that does not grow with it.

How the work is split with the C oracle and ledger.  Every window of input packets gets
the C oracle's verdicts (what the fast path alone does) when it is read; the C ledger
judges every frame whose packet the fast path forwards.  A packet the fast path
excepts, and every packet near or after a route change (the C oracle knows the initial
table only), goes through the model, in arrival order, as the chip's clock passes its
arrival (`advance`, after each slice and before what left in it is accounted): what
the router does with it in the end (forwarded by the fast path or by the control plane,
dropped, consumed there) and the frames the control plane sends.  Where the model's
verdict is not the C oracle's, the packet's verdict kind becomes PYTHON and the ledger
leaves its frame to `judge`.  Route changes made through the daemon's control socket
reach the model from the daemon's change log before the packets that arrive after them;
so do, after a kill, the timed changes the dead daemon had not made, which the restarted
daemon makes once it has its route table (RouterModel.owe, timed_made, caught_up): which
timed changes a daemon made before it died is read the instant it dies.

The daemon's exception log (npkit.toolchain.system.control.LogReader) names each packet
it handled by its input port, length and a digest of its frame; packets the fast path
excepts are indexed by those when the model sees them.  A record ties the packet to
its fate: consumed (EXCEPTED, with the record's reason) or forwarded by the control
plane (its frame then leaves; packets the control plane forwards keep their order among
themselves, not with the fast path's).  The frames the model sends about a packet are
expected once the daemon has handled that packet (a packet dropped at a full exception
ring gets none); expected and seen frames are two multisets whose common part is
`matched_control` (an echo reply's IP timestamps are the daemon's clock: such a frame
matches its expected one as forwarded frames do, by same_but_timestamps).

A daemon killed (or exiting to be started again) takes with it what only it had: the
packets it held for ARP, the messages in its send backlog (waiting for room on the
control ring: packets it forwarded, frames it made), and its ARP timers.  The model has
no clock of the daemon's and no model of the ring's occupancy, so what it had is not
predicted but read, exactly, the instant it dies (System.on_stop): the daemon keeps a
record of its send backlog and of its ARP cache in SRAM beside its owned table
(xscale/npkd/cp.h), written as they change, never later than its next system call --
where a kill is taken.  The packets in the backlog become counted drops (KILLED), its
frames there are expected no more (`killed_own`); the ARP retries and give-ups due by
the kill are done in the model only as far as the record says the daemon had done them
(RouterModel.kill).  While the daemon runs, the model takes the time each resolution
began from the same record (RouterModel.follow_arp), so that its retries fall at the
daemon's instants, not microseconds before them.  An ARP packet the model learnt a MAC
from teaches it nothing after all if the daemon never took it: dropped at a full
exception ring (`_untaught_by_drops`), or still on the ring when the daemon died -- the
one started again takes it then (`_untaught_by_the_dead`).

Behind the ring (an exception overload), the daemon takes a packet up to a millisecond
after the model handled it, so its log, not the model's clock, decides what depends on
the order it took them in: which packet began a resolution (`_joined`), which packets a
full hold queue dropped (`_daemons_hold`), which of the model's resolutions the daemon
never made (RouterModel.follow_arp); and at a kill, packets the model had finished with
that were still on the ring wait for the daemon started again (`_left_on_the_ring`).
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from dataclasses import replace as dc_replace
from typing import TYPE_CHECKING, Any, Protocol

from npkit.emulator.traffic.control import (
    CHANGE_WINDOW_NS,
    KILLED,
    PLUGIN,
    DaemonArp,
    Emitted,
    RouterModel,
    frame_digest,
    is_arp_request_for,
    same_but_timestamps,
)
from npkit.emulator.traffic.cpkt import EXCEPTION, PYTHON, Verdicts
from npkit.emulator.traffic.oracle import Drop, Except, Forward, Outcome, flow_of
from npkit.emulator.traffic.reasons import load_reasons
from npkit.emulator.traffic_run import DROPPED, EXCEPTED, FORWARDED, Chunk, Departure

from .app_reasons import app_only, exception_actions
from .control import (
    CHG_SOCKET,
    CHG_TIMED,
    CHG_TIMED_FAILED,
    CHG_WITHDRAWN,
    BacklogEntry,
    LogReader,
    LogRecord,
    arp_record,
    change_log,
    change_log_count,
    owned_packets,
    read_stats,
    send_backlog,
)
from .undeclared import is_undeclared, reason_name

if TYPE_CHECKING:
    from npkit.emulator.binding import Chip
    from npkit.emulator.traffic.router_config import RouterConfig
    from npkit.emulator.traffic.source import TrafficSource
    from npkit.emulator.traffic_run import TrafficRun


class RouterRun(Protocol):
    """What the control plane's account uses of a run (npkit.toolchain.system.router_run's
    RouterRun, which owns this account and hands itself over)."""

    chip: Chip
    config: RouterConfig
    traffic: TrafficSource
    run: TrafficRun
    control: Any  # its ControlPlane
    comparison: Counter[str]

    def add_demand(self, port: int, nbytes: int, sign: int = 1, packet: bool = True) -> None: ...

    def name_mismatch(self, pid: int, category: str, got: dict[str, Any], expected: Any = None) -> None: ...

NEVER = 1 << 63
TO_PYTHON = bytes.maketrans(bytes([EXCEPTION]), bytes([PYTHON]))
ACT_CONSUMED, ACT_FORWARDED, ACT_DROPPED = 1, 2, 3  # xscale/npkd/cp.h
ACTION_NAMES = {ACT_CONSUMED: "consumed", ACT_FORWARDED: "forwarded", ACT_DROPPED: "dropped"}


FLOW_CHANGE_WINDOW_NS = 250_000  # around a flow change (-D classify=flows) a packet may have met either table


class ControlJudge:
    """The control plane's part of a RouterRun's account (see the module docstring)."""

    def __init__(self, rr: RouterRun, options: dict[str, int], slice_ns: int) -> None:
        self.rr = rr
        self.run = rr.run
        tr = rr.traffic
        # an application's reasons (its exceptions' `control:` actions) beside npkit's
        self.reasons = getattr(rr, "reasons", None) or load_reasons()
        self.app_reasons = app_only(self.reasons)
        self.app_handled: dict[str, Counter[str]] = {}  # the application's reasons in the daemon's log, by action
        self.model = RouterModel(rr.config, options=options, neighbours=tr.neighbours,
                                 route_changes=list(tr.route_changes),
                                 app_actions=exception_actions(self.reasons))  # fmt: skip
        self.model.defer_tokens = True  # (_sent)
        self.model.flows = rr.flows  # -D classify=flows: the flow table and its plugins
        self._plugins_seen = 0
        self._plugin_last: dict[Any, int] = {}  # flow key -> the last packet that left round a plugin
        self.log = LogReader(rr.chip)
        self._raw: list[LogRecord] = []
        self.next_pid = 0  # packets below this have been through the model (or needed nothing)
        self.full_from = NEVER  # arrivals from here on all go through the model (route changes)
        self._note_changes(tr.route_changes)
        self._changes_seen = 0  # records of the daemon's change log taken (_take_changes)
        self.index: dict[tuple[int, int, int], deque[int]] = {}  # (in port, length, digest) -> ids
        self.indexed: dict[int, tuple[int, int, int]] = {}
        self.handled: set[int] = set()  # packets the daemon's log names
        self.late: set[int] = set()  # ... whose window is gone but the model may still send frames about
        self.cp_forwarded: set[int] = set()  # ... of those, forwarded by it, frame not yet seen
        self.provisional: dict[int, list[Emitted]] = {}  # frames about packets not yet handled
        self.held: set[int] = set()  # packets the model holds for ARP (no final verdict yet)
        self.want: Counter[tuple[int, bytes]] = Counter()
        self.want_stamped: list[tuple[int, bytes, tuple[int, ...]]] = []  # ... with IP timestamps (offsets)
        self.got: Counter[tuple[int, bytes]] = Counter()
        self.matched = 0
        self.records = 0
        self.forwarded_by_it = 0
        self._cp_last: dict[bytes, int] = {}  # flow -> last id the control plane forwarded
        self._events = 0  # the daemon's kills and restarts the model has been told of
        self._withdraw_at_start = 0  # a restarted daemon (this start) still to withdraw what was learnt
        self._start = 1  # the daemon's start whose ARP record is followed (_follow)
        self._withdrawn_by = 0  # the last start whose withdrawal the change log gave (its time: the model's)
        self._first_load = bool(tr.route_changes) and rr.control is not None  # the first daemon loads its table
        if self._first_load:
            self.model.starting()
        # what each daemon left when it died: its send backlog, ARP record, the packets in its
        # buffers, the records of the change log by then (the changes it made)
        self._stops: list[tuple[list[BacklogEntry], dict[int, DaemonArp], list[tuple[int, int, int]], int]] = []
        self.killed_own = 0  # frames the daemon made that died in its send backlog
        self.killed_forwarded = 0  # packets it forwarded that died there (dropped: KILLED)
        self.killed_in_hand = 0  # packets it had taken from the exception ring and not logged (dropped: KILLED)
        self.unlogged: set[int] = set()  # packets it forwarded whose frame left, window gone, before it logged them
        self._hold_end: tuple[int, int, int, int] | None = None  # the last record's (next hop held for, action, us, CpResult.held_in)
        if rr.control is not None:
            rr.control.system.on_stop.append(self._on_stop)
        self.run.router_addresses(list(rr.config.addresses))
        self.run.on_advance.append(self.advance)
        self.run.on_forget.append(self.forget)
        self.run.on_generated.append(self.generated)
        rr.chip.add_service(self.service, int(slice_ns * float(rr.chip.config["clock_mhz"]) // 1000))

    # -- the model, as the chip's clock passes the packets' arrivals
    def _note_changes(self, changes: list[Any]) -> None:
        if changes:
            self.full_from = min(self.full_from, min(c.at_ns for c in changes) - CHANGE_WINDOW_NS // 5)

    def window(self, c: Chunk) -> None:
        """A new window with the C oracle's verdicts in c.extra["v"]: the ledger's copy
        leaves what the fast path excepts to Python."""
        v = c.extra["v"]
        c.verdicts = Verdicts(v.kind.translate(TO_PYTHON), v.reason, v.port, v.out)

    def advance(self) -> None:
        """After a slice: route changes made through the socket, the model up to now,
        then what the daemon logged (before the frames that left are accounted)."""
        now = self.run.now_ns
        self._take_changes(self._made_by_the_dead())
        self._take_plugin_changes()
        self._daemon_events()
        self._model_to(now)
        if self.model.untaken:
            self._untaught_by_drops()
        self._follow()
        self.model.advance(now)
        self._settle()
        self.service()
        self._resolve()

    def _daemon_arp(self) -> dict[int, DaemonArp]:
        return {ip: DaemonArp(r.state, r.tries, r.start_ns) for ip, r in arp_record(self.rr.chip).items()}

    def _on_stop(self, _cycle: int, _why: str) -> None:
        """The daemon is gone (System.on_stop): what it had, from its records in SRAM,
        before the one started after it empties them."""
        chip = self.rr.chip
        self._stops.append((send_backlog(chip), self._daemon_arp(), owned_packets(chip), change_log_count(chip)))

    def _follow(self) -> None:
        """The daemon's start times of the ARP resolutions the model has under way, and
        those it began that the model did not (RouterModel.follow_arp): the requests the
        model sent about a packet are expected once the daemon confirms that packet's
        resolution, whether or not the packet itself reached the daemon, and not at all
        if the daemon made another in its place.  After a restart, not before the daemon
        started again has published its start (it empties the record first)."""
        ctl = self.rr.control
        if self.model.down or not self.model.follows() or ctl is None or ctl.system.killed:
            return
        st = read_stats(self.rr.chip)
        if self._start > 1 and (st is None or st["starts"] < self._start):
            return  # the record in SRAM is still the dead daemon's: the new one clears it as it starts
        self._tell(self.model.follow_arp(self._daemon_arp(), self._late_resolutions()))

    def _tell(self, told: list[tuple[int, int, bool]]) -> None:
        """What RouterModel.follow_arp said: the requests about those packets expected now,
        or not at all."""
        if not told:
            return
        self._settle()
        for pid, ip, sent in told:
            frames = self.provisional.get(pid, [])
            for em in [em for em in frames if is_arp_request_for(em.frame, ip)]:
                frames.remove(em)
                if sent:
                    self._sent(em, self.model.now)

    def _late_resolutions(self, keys: list[tuple[int, int, int]] | None = None) -> dict[int, bool]:
        """The addresses whose resolution the daemon has under way for a packet of the
        model's last, unconfirmed one rather than for one of the model's current: the
        daemon holds one of the first and none of the second (RouterModel.follow_arp);
        for each, whether it holds the packet that one was begun for.  `keys`: the
        packets in its hands (default: as its owned table in SRAM has them now)."""
        maybe = [e for e in self.model.cache.values() if e.state == "incomplete" and not e.confirmed and e.unconfirmed_hold]
        if not maybe:
            return {}
        keys = owned_packets(self.rr.chip) if keys is None else keys
        owned = {pid for key in keys for pid in self.index.get(key, ())}
        return {e.ip: bool(e.unconfirmed) and e.unconfirmed[-1] in owned for e in maybe
                if owned.intersection(e.unconfirmed_hold) and not owned.intersection(h.pid for h in e.hold)}  # fmt: skip

    def _made_by_the_dead(self) -> int | None:
        """The change log's records made before the death the model is still to be told of
        (None: no such death, all of them)."""
        return self._stops[0][3] if self._stops else None

    def _early_ns(self) -> int:
        """How long before the time a change log record gives the fast path may see the
        change: the XScale core runs a quantum of instructions at once, at the chip's
        time when it starts (its SRAM writes are there from then on), while the clock it
        reads advances through the quantum.  The daemon stamps the record as it writes
        it, just before it publishes the change (xscale/npkd/cp.c commit_change)."""
        host = self.rr.control.system.xscale if self.rr.control is not None else None
        quantum, mhz = getattr(host, "quantum", 0), getattr(host, "xs_mhz", 0)
        return -(-quantum * 1000 // mhz) if quantum and mhz else 0

    def _visible_ns(self, ns: int) -> int:
        """From when the fast path sees SRAM writes the daemon made at its time `ns`: its
        host says (XScaleHost.visible_from: the start of the core's quantum then)."""
        host = self.rr.control.system.xscale if self.rr.control is not None else None
        if host is None:
            return ns
        mhz = int(self.rr.chip.config["clock_mhz"])
        cycle = ((ns + 1) * mhz - 1) // 1000   # the last cycle whose time is ns (the daemon's clock truncates)
        return host.visible_from(cycle) * 1000 // mhz

    def _take_plugin_changes(self) -> None:
        """Plugin loads and unloads and flow entries the daemon made (its plugin log, -D
        classify=flows): the model's slots and table follow; packets of bound flows near a
        plugin change may have met either the plugin before it or the one after
        (RouterModel.plugin_changed), and packets near a flow change either table
        (FlowModel.compose's alternatives)."""
        if self.model.flows is None:
            return
        from .control import plugin_log

        new = plugin_log(self.rr.chip, self._plugins_seen)
        self._plugins_seen += len(new)
        early = self._early_ns()
        for at_ns, kind, what in new:
            if kind == "plugin":
                self.model.plugin_changed(at_ns, *what)
                continue
            # a flow's entry changed, about when the daemon's clock said: the chip has its
            # SRAM writes from the start of the XScale's quantum (`early` before), and a
            # command the socket brought in is stamped by a clock that may lag the chip's
            # by tens of us (measured: up to ~60 us).  From before then every packet goes
            # through the model, which has the table as it was at each one's arrival and
            # either table within FLOW_CHANGE_WINDOW_NS of the change
            self.model.flows.window_ns = early + FLOW_CHANGE_WINDOW_NS
            self.model.flows.flow_changed(at_ns, *what)
            self.full_from = min(self.full_from, at_ns - early - FLOW_CHANGE_WINDOW_NS)
            self._in_flight_of(what[0], self.full_from)

    def _in_flight_of(self, key: Any, since_ns: int) -> None:
        """Packets of flow `key` that came since `since_ns`, judged before the change was
        read and still inside the chip: the model takes those the ledger was left to
        judge by the C oracle (either table: FlowModel.compose's alternatives), and
        allows the outcomes by either table for those it judged already
        (RouterModel.flow_changed_near) -- one that may now have gone round a plugin
        is indexed, so that the daemon's record of it is found whenever it comes."""
        from npkit.emulator.traffic.cpkt import FORWARD
        from npkit.emulator.traffic.flows import key_of

        for c in self.run.chunks:
            w = c.w
            lo = bisect.bisect_left(w.times, since_ns, 0, c.pushed)
            hi = min(c.pushed, max(0, self.next_pid - c.first))
            kind = c.extra["v"].kind
            for j in range(lo, hi):
                if c.fate[j] or key_of(w.frame(j)) != key:
                    continue
                pid = c.first + j
                if pid in self.model.results:
                    if self.model.flow_changed_near(pid, w.frame(j), w.ports[j]):
                        self._index(c, j)
                elif kind[j] == FORWARD:
                    self._process(c, j)

    def _take_changes(self, upto: int | None = None) -> None:
        """The route changes the daemon made since the last look (up to record `upto`), in
        order: those through the socket from the time it made them; timed ones matched to
        the configured ones, which take effect then if owed (RouterModel.timed_made); one
        the daemon tried and failed is owed no more (RouterModel.timed_failed).
        The record of a change is in SRAM before the change is published, so the model,
        which has had the packets up to the last look, has none that came after it."""
        chip = self.rr.chip
        end = change_log_count(chip) if upto is None else upto
        if end <= self._changes_seen:
            return
        new = change_log(chip, self._changes_seen, end)
        self._changes_seen = end
        early = self._early_ns()
        for source, made in new:
            c = dc_replace(made, at_ns=max(0, made.at_ns - early))
            if source == CHG_SOCKET:
                self.model.add_changes([c])
                self._note_changes([c])
            elif source == CHG_TIMED and (now := self.model.timed_made(c)) is not None:
                self._note_changes([now])
            elif source == CHG_TIMED_FAILED:
                self.model.timed_failed(c)
            elif source == CHG_WITHDRAWN:
                self.model.withdraw_at(self._visible_ns(made.at_ns + made.next_hop))
                self._withdrawn_by = made.prefix

    def _model_to(self, now: int) -> None:
        for c in self.run.chunks:
            if c.end <= self.next_pid:
                continue
            w = c.w
            i = max(0, self.next_pid - c.first)
            hi = bisect.bisect_right(w.times, now, i, c.pushed)
            if hi > i:
                split = bisect.bisect_left(w.times, self.full_from, i, hi) if self.full_from < NEVER else hi
                kind = c.extra["v"].kind
                j = kind.find(EXCEPTION, i, split)
                while j >= 0:
                    self._process(c, j)
                    j = kind.find(EXCEPTION, j + 1, split)
                for j in range(split, hi):
                    self._process(c, j)
                self.next_pid = c.first + hi
            if hi < len(w):
                return

    def _daemon_events(self) -> None:
        """The daemon killed, started again or respawned (the System's events), told to
        the model at their time: the packets it held for ARP when it went are a counted
        drop (KILLED), the one started again begins ARP afresh."""
        ctl = self.rr.control
        events = ctl.system.events if ctl is not None else []
        mhz = float(self.rr.chip.config["clock_mhz"])
        for k, (cycle, what) in enumerate(events[self._events :], self._events):
            t = int(cycle * 1000 // mhz)
            if what in ("killed", "respawned"):
                self._first_load = False  # (the restarted daemon's load: _withdraw_at_start)
                backlog, arp, owned, made = self._stops.pop(0) if self._stops else ([], None, [], None)
                self._take_changes(made)        # what it made; the timed changes it had not are owed
                self.model.owe()
            self._model_to(t)
            if what in ("killed", "respawned"):
                if arp is not None:
                    self._untaught_by_the_dead(arp, owned)
                held = self.model.kill(t, arp, self._early_ns(), self._late_resolutions(owned))
                self._tell(self.model.told)
                self.model.told = []
                self._untell()
                lost = self._held_by_the_dead(held, owned)
                self._settle()
                for pid in lost:  # never logged (held): the ARP requests about them were sent
                    self.run.mark(pid, DROPPED, KILLED)
                    for em in self.provisional.pop(pid, []):
                        self._sent(em, t)
                for em in self.model.retracted:  # retries the model made, the daemon did not
                    if not self._unwant(em.port, em.frame) and self.matched:
                        self.matched -= 1  # (matched by an identical frame that left: that one is now extra)
                        self.got[(em.port, em.frame)] += 1
                self.model.retracted.clear()
                self.service()
                self._resolve()  # what it logged before it died: forwarded (cp_forwarded) or excepted
                self._lost_backlog(backlog)
                self._lost_in_hand(owned, set(lost), arp)
                self._left_on_the_ring()
            if what in ("restarted", "respawned"):
                self.model.restart(t)
                self._start = self._withdraw_at_start = 1 + sum(1 for _c, e in events[: k + 1] if e != "killed")
        self._events = len(events)
        self._take_changes(self._made_by_the_dead())    # the restarted daemon's
        if self._first_load:
            st = read_stats(self.rr.chip)
            if st is not None and st["state"] == "ready":
                self._model_to(self.run.now_ns)   # (seen at a slice's end: to within SLICE_NS)
                self.model.caught_up(self.run.now_ns)
                self._first_load = False
        if self._withdraw_at_start:
            st = read_stats(self.rr.chip)
            if st is not None and st["starts"] >= self._withdraw_at_start and st["state"] == "ready":
                self._model_to(self.run.now_ns)   # (seen at a slice's end: to within SLICE_NS)
                if self._withdrawn_by < self._withdraw_at_start:   # no record of when (no change log)
                    self.model.withdraw_learnt()
                self.model.caught_up(self.run.now_ns)
                self._withdraw_at_start = 0

    def _untaught_by_the_dead(self, arp: dict[int, DaemonArp], owned: list[tuple[int, int, int]]) -> None:
        """The ARP packets the model learnt a MAC from that the dying daemon had not: its ARP
        record (at the instant it died) does not have the address resolved, and it had not
        logged them.  The model takes back what they taught (RouterModel.unlearn); one still
        on the exception ring -- neither in the daemon's hands nor dropped at a full ring
        -- is the restarted daemon's, which learns from it (RouterModel.defer)."""
        self.service()
        logged = {(rec.in_port, rec.length, rec.digest) for rec in self._raw}
        for pid, taught in list(self.model.untaken.items()):
            d = arp.get(taught.before.ip)
            key = self.indexed.get(pid)
            if pid in self.handled or key in logged or (d is not None and d.state == "reachable"):
                continue
            self._unlearn(pid)
            c = self.run.chunk_of(pid)
            if c is None or key is None or key in owned or c.fate[pid - c.first] & DROPPED:
                continue
            i = pid - c.first
            self.model.defer(pid, c.w.frame(i), c.w.ports[i])
            self.provisional.pop(pid, None)
            self.model.emitted = [e for e in self.model.emitted if e.pid != pid]

    def _unlearn(self, pid: int) -> None:
        """ARP packet `pid` taught the model nothing after all (RouterModel.unlearn): the
        packets its answer let go of are held again, owed to no port."""
        taught = self.model.untaken.get(pid)
        was = {h.pid: r.final for h in (taught.released if taught else []) if (r := self.model.results.get(h.pid))}
        for p in self.model.unlearn(pid):
            self.held.add(p)
            c = self.run.chunk_of(p)
            if c is not None:
                self._demand(was.get(p), None, c.w.lens[p - c.first])
        for em in self.model.unsent:
            if em in self.model.emitted:
                self.model.emitted.remove(em)  # (not settled yet)
            elif self._unwant(em.port, em.frame):
                self.rr.add_demand(em.port, len(em.frame), sign=-1, packet=False)
        self.model.unsent.clear()

    def _untaught_by_drops(self, lo: int = 0, hi: int = NEVER) -> None:
        """ARP packets (ids in [lo, hi)) the model learnt from that the fast path dropped at
        a full exception ring: the daemon never saw them (`_unlearn`)."""
        for pid in [p for p in self.model.untaken if lo <= p < hi]:
            c = self.run.chunk_of(pid)
            if c is not None and c.fate[pid - c.first] & DROPPED:
                self._unlearn(pid)

    def _untell(self) -> None:
        """The errors the model sent about held packets whose give-up the dying daemon had
        not made (RouterModel.kill): expected no more.  The daemon logs a held packet when
        its hold ends, so they wait with the packet's other frames (provisional)."""
        for em in self.model.untold:
            frames = self.provisional.get(em.pid, [])
            k = next((i for i, f in enumerate(frames) if f.port == em.port and f.frame == em.frame), -1)
            if k >= 0:
                del frames[k]
                continue
            was = self._unwant(em.port, em.frame)
            if was == "expected" and em.token:
                self.model.give_back_token()  # (taken when it was expected: _sent)
            elif not was and em in self.model.emitted:
                self.model.emitted.remove(em)  # (not settled yet)
        self.model.untold.clear()

    def _held_by_the_dead(self, held: list[int], owned: list[tuple[int, int, int]]) -> list[int]:
        """Of the packets the model's daemon held for ARP at the kill (`held`), those the
        dead daemon had (its owned table marks their buffers: `owned`, by port, length
        and digest), lost with it.  The others it had not yet taken from the exception
        ring -- the model, which handles a packet as it arrives, is ahead of a busy
        daemon -- so the daemon started after it handles them: the model defers them
        to the restart, and what it made about them (an ARP request) is not expected."""
        had: set[int] = set()
        for key in owned:
            pid = next((p for p in self.index.get(key, ()) if p in held and p not in had), -1)
            if pid >= 0:
                had.add(pid)
        lost = []
        for pid in held:
            c = self.run.chunk_of(pid)
            if pid in had or c is None:
                lost.append(pid)
                continue
            i = pid - c.first
            self.model.defer(pid, c.w.frame(i), c.w.ports[i])
            self.provisional.pop(pid, None)
            self.model.emitted = [e for e in self.model.emitted if e.pid != pid]
        return lost

    def _lost_backlog(self, backlog: list[BacklogEntry]) -> None:
        """The messages in the dead daemon's send backlog never leave: its own frames are
        expected no more, the packets it forwarded are dropped (KILLED).  Its log is read
        first (_daemon_events), so every packet it forwarded is in cp_forwarded."""
        for m in backlog:
            if m.own:
                self.killed_own += 1
                if not self._unwant(m.port, m.frame):
                    self.got[(m.port, m.frame)] += 1  # a frame the model did not make: unexpected
                continue
            pid = self._forwarded_as(m)
            if pid < 0:
                self.rr.comparison["unmatched_exception"] += 1
                continue
            self.killed_forwarded += 1
            self.cp_forwarded.discard(pid)
            self._killed(pid)

    def _lost_in_hand(self, owned: list[tuple[int, int, int]], held: set[int], arp: dict[int, DaemonArp] | None) -> None:
        """The packets the dead daemon had taken from the exception ring but not logged
        (half handled: its buffers still marked as its own) are dropped (KILLED), and the
        frames the model made about them are expected no more.  Backlogged packets were
        logged, so the index no longer names them; those it `held` for ARP (not logged
        until released) the model's kill dropped already.  One it held for ARP that the
        model had given up already (the daemon behind) keeps the requests of the
        resolution the daemon made for it, as many as its ARP record (`arp`) counts."""
        for key in owned:
            pid = next((p for p in self.index.get(key, ()) if p not in held), -1)
            if pid < 0:
                continue
            q = self.index[key]
            q.remove(pid)
            if not q:
                del self.index[key]
            self.indexed.pop(pid, None)
            self.killed_in_hand += 1
            self._requests_made(pid, self.provisional.pop(pid, []), arp)
            self._killed(pid)

    def _requests_made(self, pid: int, frames: list[Emitted], arp: dict[int, DaemonArp] | None) -> None:
        """Of the frames the model made about packet `pid`, which the dead daemon held, the
        ARP requests its record says it sent (a resolution begun after the packet came)."""
        r = self.model.results.get(pid)
        c = self.run.chunk_of(pid)
        d = arp.get(r.held_for) if arp is not None and r is not None and r.held_for >= 0 else None
        if d is None or c is None or d.start_ns < c.w.times[pid - c.first]:
            return
        for em in [em for em in frames if is_arp_request_for(em.frame, r.held_for)][: d.tries]:
            self._sent(em, self.model.now)

    def _left_on_the_ring(self) -> None:
        """At a kill, the packets this model had finished with that the dead daemon had not
        taken: still on the exception ring (the daemon behind its backlog), never logged,
        not in its hands.  The daemon started again takes them with an empty ARP cache --
        a next hop to resolve afresh, an error or a reply to a host it has to ask for -- so
        they wait for it (RouterModel.defer), and what this model sent about them is
        expected no more.  Run after the dead daemon's log, backlog and buffers are
        accounted (`index` then holds only packets on the ring)."""
        for pid in sorted(self.indexed):
            r = self.model.results.get(pid)
            c = self.run.chunk_of(pid)
            if (r is None or c is None or not r.reason or r.final is None or isinstance(r.final, Drop)
                    or c.fate[pid - c.first] & (DROPPED | FORWARDED)):  # fmt: skip
                continue
            i = pid - c.first
            self._demand(r.final, None, c.w.lens[i])
            self.model.uninstall(pid)
            self.model.defer(pid, c.w.frame(i), c.w.ports[i])
            self.held.add(pid)
            for em in self.provisional.pop(pid, []):
                self.rr.add_demand(em.port, len(em.frame), sign=-1, packet=False)
            self.model.emitted = [e for e in self.model.emitted if e.pid != pid]

    def _killed(self, pid: int) -> None:
        """Packet `pid` died with the daemon: dropped (KILLED), no longer owed to a port."""
        r = self.model.results.get(pid)
        c = self.run.chunk_of(pid)
        if r is not None:
            if c is not None:
                self._demand(r.final, Drop(KILLED), c.w.lens[pid - c.first])
            r.final = Drop(KILLED)
        self.run.mark(pid, DROPPED, KILLED)

    def _forwarded_as(self, m: BacklogEntry) -> int:
        """The packet the daemon logged as forwarded whose frame is m's (-1: none)."""
        for pid in sorted(self.cp_forwarded):
            r = self.model.results.get(pid)
            o = r.final if r is not None else None
            if r is not None and isinstance(o, Forward) and o.port == m.port and (
                    o.data == m.frame or same_but_timestamps(o.data, r.timestamps, m.frame)):  # fmt: skip
                return pid
        return -1

    def _unwant(self, port: int, frame: bytes) -> str:
        """A frame the model expects that will not come: no longer expected.  Returns where
        it was: "expected", "provisional" (about a packet not yet handled), "" (nowhere)."""
        key = (port, frame)
        if self.want[key]:
            self.want[key] -= 1
            return "expected"
        for i, (p, want, st) in enumerate(self.want_stamped):
            if p == port and (want == frame or same_but_timestamps(want, list(st), frame)):
                del self.want_stamped[i]
                return "expected"
        for frames in self.provisional.values():
            for i, (p, want, _pid, st, _token) in enumerate(frames):
                if p == port and (want == frame or (st and same_but_timestamps(want, list(st), frame))):
                    del frames[i]
                    return "provisional"
        return ""

    def _process(self, c: Chunk, i: int) -> None:
        w = c.w
        pid = c.first + i
        frame = w.frame(i)
        v = c.extra["v"]
        ck = v.kind[i]
        own = v.outcome(i, w.off[i], w.lens[i])
        # an application's rule decided it (its drop or exception): the model's fast path is that
        app = own if isinstance(own, Drop | Except) and own.reason in self.app_reasons else None
        r = self.model.process(pid, frame, w.ports[i], w.times[i], fast=app)
        if ck == EXCEPTION or isinstance(r.fast, Except) or PLUGIN in r.alternatives:
            self._index(c, i)
        if ck != EXCEPTION and not r.alternatives and not r.by_daemon and r.fast == own:
            del self.model.results[pid]  # the C oracle's verdict, judged by the ledger
            return
        c.verdicts.kind[i] = PYTHON
        if r.final is None:
            self.held.add(pid)
        self._expect(pid, r.final)
        self._demand(own, r.final, w.lens[i])

    def _index(self, c: Chunk, i: int) -> None:
        """Packet i of window c may be excepted: the daemon's log will name it by its port,
        length and digest (`_identify`)."""
        w, pid = c.w, c.first + i
        if pid not in self.indexed:
            key = (w.ports[i], w.lens[i], frame_digest(w.frame(i)))
            self.index.setdefault(key, deque()).append(pid)
            self.indexed[pid] = key

    def _expect(self, pid: int, final: Outcome | None) -> None:
        """A packet the control plane forwards after processing its IP options: its frame
        is found by the bytes the model predicts (an untagged packet's own bytes changed)."""
        if isinstance(final, Forward) and self.model.results[pid].reason == "ip_options":
            self.run.expect(pid, final.data)

    def _demand(self, was: Outcome | None, now: Outcome | None, nbytes: int) -> None:
        """The model's verdict instead of the C oracle's in what each port must carry."""
        a = was.port if isinstance(was, Forward) else None
        b = now.port if isinstance(now, Forward) else None
        if a != b:
            if a is not None:
                self.rr.add_demand(a, nbytes, sign=-1)
            if b is not None:
                self.rr.add_demand(b, nbytes)

    def _settle(self) -> None:
        """Held packets the model has decided, and the frames it sent."""
        for pid in [p for p in self.held if (r := self.model.results.get(p)) is None or r.final is not None]:
            self.held.discard(pid)
            r = self.model.results.get(pid)
            c = self.run.chunk_of(pid)
            if r is not None and c is not None:
                self._expect(pid, r.final)
                self._demand(None, r.final, c.w.lens[pid - c.first])
        for em in self.model.emitted:
            self.rr.add_demand(em.port, len(em.frame), packet=False)
            if em.pid < 0 or em.pid in self.handled or em.pid in self.late:
                self._sent(em, self.model.now)
            else:
                self.provisional.setdefault(em.pid, []).append(em)
        self.model.emitted.clear()
        if self.late:
            self.late &= self.model.pending()

    def finish(self) -> None:
        """At the end: every packet through the model, its timers run out, the log read."""
        self._take_changes(self._made_by_the_dead())
        self._daemon_events()
        self._model_to(NEVER)
        self.model.finish()
        self._settle()
        self.service()
        self._resolve()
        self.provisional.clear()  # about packets the daemon never got (a full exception ring)

    # -- the daemon's log
    def service(self) -> None:
        """Take the new log records (a chip service, so the log does not wrap unread)."""
        self._raw.extend(self.log.take())

    def _resolve(self) -> None:
        comparison = self.rr.comparison
        for rec in self._raw:
            self.records += 1
            name = reason_name(self.reasons, "exception", rec.reason)  # the verdict names an undeclared one
            pid = self._identify(rec)
            if pid < 0:
                self._hold_end = None
                comparison["unmatched_exception"] += 1
                continue
            self.model.taken(pid)
            r = self.model.results.get(pid)
            self._joined(rec, pid, r)
            ok = r is not None and r.reason == name
            if not ok and r is not None and name == "arp_miss" and r.learnt_hop:
                self._handle_as(pid, r, Except("arp_miss"), late=True)  # (its window forgotten: nothing to redo)
                ok = True
            elif not ok and r is not None:
                ok = self._excepted_instead(pid, r, name)
            if r is not None:
                self._daemons_hold(rec, pid, r)
            category = "matched_exception" if ok else "undeclared_reason" if is_undeclared(name) else "wrong_reason"
            comparison[category] += 1
            if not ok:
                expected = None if r is None else r.final if r.final is not None else r.fast
                self.rr.name_mismatch(pid, category, {"outcome": "exception", "reason": name}, expected)
            self.handled.add(pid)
            for em in self.provisional.pop(pid, []):
                self._sent(em, rec.time_us * 1000)
            if name in self.app_reasons:
                self.app_handled.setdefault(name, Counter())[ACTION_NAMES.get(rec.action, "other")] += 1
            if rec.action == ACT_FORWARDED:
                self.cp_forwarded.add(pid)
                self.forwarded_by_it += 1
            else:
                self.run.mark(pid, EXCEPTED, name)
            if pid in self.unlogged:
                self._logged_late(pid)
        self._raw.clear()

    def _joined(self, rec: LogRecord, pid: int, r: Any) -> None:
        """The daemon logs a packet it held for ARP when its hold ends, and the packets one
        resolution held (given up, or answered) one after the other, the first held first:
        the resolution was begun for that one.  A packet logged after another held for the
        same next hop, with the same action, within a retry interval, was taken into a
        resolution under way, not one begun for it: the requests this model made about it
        (the first packet of a resolution this model began because the packet came after it
        had ended the daemon's -- a daemon behind its deadline still takes such a packet
        in -- and that the daemon never confirmed) are not expected, and one this model
        still holds there that the daemon gave up is given up here too
        (RouterModel.given_up_before).  Not so when this model held both packets in one
        resolution: the daemon began it for the other one (it took that from the exception
        ring first), so the requests this model made about this one are that
        resolution's, expected as before."""
        key = (r.held_for, rec.action, rec.time_us, r.held_in) if r is not None and r.held_for >= 0 else None
        prev, self._hold_end = self._hold_end, key
        if key is None or prev is None or prev[:2] != key[:2] or prev[3] == key[3]:
            return
        if not 0 <= key[2] - prev[2] <= self.model.opt["arp_retry_us"]:
            return
        if rec.action == ACT_CONSUMED and self.model.given_up_before(pid):
            self._settle()
        frames = self.provisional.get(pid)
        if frames:
            frames[:] = [em for em in frames if not is_arp_request_for(em.frame, r.held_for)]

    def _daemons_hold(self, rec: LogRecord, pid: int, r: Any) -> None:
        """The daemon's hold queue for a next hop, not this model's, decides which packets
        it drops when full: behind the exception ring, it takes them later than they came.
        A packet this model dropped there that the daemon held ends as the daemon's log
        says (RouterModel.held_after_all); one this model held that the daemon dropped
        has no ICMP error, and goes nowhere (RouterModel.dropped_from_hold)."""
        c = self.run.chunk_of(pid)
        if c is None:
            return
        i = pid - c.first
        if r.hold_full >= 0 and rec.action in (ACT_CONSUMED, ACT_FORWARDED):
            was = r.final
            self.model.held_after_all(pid, c.w.frame(i), rec.action == ACT_FORWARDED)
            self._demand(was, r.final, c.w.lens[i])
            self._settle()
        elif r.held_for >= 0 and r.hold_full < 0 and rec.action == ACT_DROPPED:
            was = self.model.dropped_from_hold(pid)
            self.held.discard(pid)
            self._demand(was, r.final, c.w.lens[i])
            frames = self.provisional.get(pid)
            if frames:
                frames[:] = [em for em in frames if is_arp_request_for(em.frame, r.held_for)]

    def _logged_late(self, pid: int) -> None:
        """A packet whose window went before its record came (`forget`: its frame left first)
        is let go of now; frames the model may still send about it are expected as they
        come (`late`)."""
        self.unlogged.discard(pid)
        self.cp_forwarded.discard(pid)  # (its frame was judged already)
        self.handled.discard(pid)
        if pid in self.model.pending():
            self.late.add(pid)
        self.model.results.pop(pid, None)

    def _excepted_instead(self, pid: int, r: Any, name: str) -> bool:
        """A packet the model forwarded by the table as it was after a route change, that
        the fast path excepted by the table before it (one of its `alternatives`: the
        change reached SRAM later, or never -- a timed change cut by a kill): the daemon
        logged it with that reason, so the model's control plane handles it now, as the
        daemon did, and the packet's fate is that (False: no such alternative)."""
        alt = next((o for o in r.alternatives if isinstance(o, Except) and o.reason == name), None)
        if alt is not None and alt == PLUGIN and pid in self.unlogged and self.run.chunk_of(pid) is None:
            return True  # its frame left, judged against the daemon's forwards round the plugin (`by_daemon`)
        return alt is not None and self._handle_as(pid, r, alt)

    def _handle_as(self, pid: int, r: Any, alt: Except, late: bool = False) -> bool:
        """The model's control plane handles packet `pid` as excepted for `alt`'s reason,
        as the daemon did; its fate and the frames expected follow (False: the packet's
        window is forgotten).  Also for a packet the model forwarded through a next hop
        the control plane had learnt, that the fast path excepted (arp_miss) because the
        MAC was not in it: not yet installed -- the daemon forwards it from its cache, as
        the model does -- or withdrawn by a restarted daemon before the model learnt that
        it had been (RouterModel.withdraw_at: up to a quantum of the XScale core late) --
        the daemon resolves the next hop afresh, and holds the packet meanwhile, as the
        model now does; `late`: it logs such a packet when the hold ends, so one whose
        resolution the model has given up since it arrived was given up with it."""
        c = self.run.chunk_of(pid)
        if c is None:
            return False
        i = pid - c.first
        was = r.final
        self.model.take_exception(pid, c.w.frame(i), c.w.ports[i], alt, c.w.times[i] if late else None)
        if r.final is None:
            self.held.add(pid)
        self._expect(pid, r.final)
        self._demand(was, r.final, c.w.lens[i])
        self._settle()  # its frames: expected once it is handled (the caller's next step)
        return True

    def _identify(self, rec: LogRecord) -> int:
        """The input packet a log record is about: by its port, length and digest among
        the packets the fast path excepts (the earliest not named yet); else among all
        packets held without a fate (the fast path excepted what the oracle did not)."""
        q = self.index.get((rec.in_port, rec.length, rec.digest))
        if q:
            pid = q.popleft()
            if not q:
                del self.index[(rec.in_port, rec.length, rec.digest)]
            self.indexed.pop(pid, None)
            return pid
        for c in self.run.chunks:
            w = c.w
            for i in range(c.pushed):
                pid = c.first + i
                if (not c.fate[i] and w.ports[i] == rec.in_port and w.lens[i] == rec.length
                        and pid not in self.handled and frame_digest(w.frame(i)) == rec.digest):  # fmt: skip
                    return pid
        return -1

    def forget(self, c: Chunk) -> None:
        """A window every packet of which has a fate: what is kept about its packets goes --
        but for packets the daemon forwarded whose frames left before it logged them
        (`_unlogged`), kept until it does."""
        lo, hi = c.first, c.end
        self._untaught_by_drops(lo, hi)
        for pid in [p for p in self.model.untaken if lo <= p < hi]:
            self.model.taken(pid)  # (every packet has a fate: one never logged nor dropped is no ARP the daemon missed)
        keep = self._unlogged(c)
        self.unlogged |= keep
        for pid in [p for p in self.indexed if lo <= p < hi and p not in keep]:
            key = self.indexed.pop(pid)
            q = self.index.get(key)
            if q is not None and pid in q:
                q.remove(pid)
                if not q:
                    del self.index[key]
        gone = [p for p in self.handled if lo <= p < hi]
        if gone:  # ARP retries and frames held for ARP about a handled packet come later
            self.late.update(set(gone) & self.model.pending())
        for s in (self.handled, self.cp_forwarded, self.held):
            for pid in [p for p in s if lo <= p < hi]:
                s.discard(pid)
        for d in (self.provisional, self.model.results):
            for pid in [p for p in d if lo <= p < hi and p not in keep]:
                del d[pid]

    def _unlogged(self, c: Chunk) -> set[int]:
        """Packets of window c the fast path excepted and the model's control plane forwards
        (only the daemon can have forwarded them) whose frames have left but whose log
        records are still to come: the daemon sends a packet, then logs it, and the XScale
        core may end its quantum between the two -- the chip runs on, the frame leaves, the
        record comes a quantum later."""
        out = set()
        for pid in [p for p in self.indexed if c.first <= p < c.end and p not in self.handled]:
            r = self.model.results.get(pid)
            if r is None or not c.fate[pid - c.first] & FORWARDED:
                continue
            if isinstance(r.fast, Except) and isinstance(r.final, Forward) and not any(isinstance(o, Forward) for o in r.alternatives):
                out.add(pid)
            elif self._round_a_plugin(r):
                out.add(pid)
        return out

    @staticmethod
    def _round_a_plugin(r: Any) -> bool:
        """Whether the daemon may have forwarded the packet round a plugin (-D
        classify=flows): the model's control plane did, or would have had the fast path
        met the flow's other entry near a change (`by_daemon`).  Near a change the fast
        path may have forwarded it itself: then no record comes, and what is kept about
        it here waits for nothing (only that packet's, by its own digest)."""
        return (r.fast == PLUGIN and isinstance(r.final, Forward)) or bool(r.by_daemon)

    # -- frames
    def _sent(self, em: Emitted, at_ns: int) -> None:
        """A frame the model made about a packet the daemon has now handled (at `at_ns`, its
        log says): expected -- an ICMP error only if the rate limit had a token then, taken
        in the daemon's order (RouterModel.defer_tokens)."""
        if em.token and not self.model.take_token(at_ns):
            self.rr.add_demand(em.port, len(em.frame), sign=-1, packet=False)
            return
        self._want(em.port, em.frame, em.timestamps)

    def _want(self, port: int, frame: bytes, stamps: tuple[int, ...] = ()) -> None:
        """A frame the model sent; `stamps`: offsets of IP timestamps in it, which the
        daemon writes with its own clock (same_but_timestamps)."""
        key = (port, frame)
        if self.got[key]:
            self.got[key] -= 1
            self.matched += 1
        elif stamps:
            seen = next((k for k, n in self.got.items() if n and k[0] == port
                         and same_but_timestamps(frame, list(stamps), k[1])), None)  # fmt: skip
            if seen is None:
                self.want_stamped.append((port, frame, stamps))
            else:
                self.got[seen] -= 1
                self.matched += 1
        else:
            self.want[key] += 1

    def generated(self, port: int, _t: int, frame: bytes) -> None:
        """A frame the router made itself left `port`."""
        key = (port, frame)
        if self.want[key]:
            self.want[key] -= 1
            self.matched += 1
            return
        for i, (p, want, stamps) in enumerate(self.want_stamped):
            if p == port and (want == frame or same_but_timestamps(want, list(stamps), frame)):
                del self.want_stamped[i]
                self.matched += 1
                return
        self.got[key] += 1

    def judge(self, d: Departure) -> str | None:
        """A frame of a packet the model judged (None: not one): the comparison key.
        Timed by the caller; flow order here (the control plane's forwards apart)."""
        r = self.model.results.get(d.pid)
        if r is None:
            return None
        candidates = [r.final if r.final is not None else r.fast, *r.alternatives, *r.by_daemon]
        key = "wrong_bytes"
        if not any(isinstance(o, Forward) for o in candidates):
            key = "wrong_outcome"
        elif not any(isinstance(o, Forward) and o.port == d.port for o in candidates):
            key = "wrong_port"
        else:
            for o in candidates:
                if isinstance(o, Forward) and o.port == d.port and (
                        o.data == d.data or same_but_timestamps(o.data, r.timestamps, d.data)):  # fmt: skip
                    key = "matched_forward"
                    break
        assert d.chunk is not None
        in_port = d.chunk.w.ports[d.i]
        if d.pid in self.cp_forwarded:
            self.cp_forwarded.discard(d.pid)
            flow = flow_of(d.data, in_port)
            reordered = self._cp_last.get(flow, -1) > d.pid
            self._cp_last[flow] = max(d.pid, self._cp_last.get(flow, -1))
        elif r.reason == "plugin":
            # round a plugin (its log maybe not read yet): in order with its own flow's
            # (the 5-tuple the entry binds), not with the host pair's other flows, which
            # did not wait for it
            reordered = self._plugin_order(d)
        else:
            reordered = self.run.flow_reordered(d.data, in_port, d.pid)
        if reordered and self._at_a_flow_change(d):
            # a flow moved between the fast path and a plugin (bound or unbound) while its
            # packets were in the daemon: those leave after later ones that did not go
            # round it -- what the change does, counted apart (docs/flows.md)
            self.rr.comparison["reordered_at_flow_change"] += 1
        elif reordered:
            self.rr.comparison["reordered"] += 1
        return key

    def _plugin_order(self, d: Departure) -> bool:
        from npkit.emulator.traffic.flows import key_of

        assert d.chunk is not None
        key = key_of(d.chunk.w.frame(d.i))
        last = self._plugin_last.get(key, -1)
        self._plugin_last[key] = max(last, d.pid)
        return last > d.pid

    def _at_a_flow_change(self, d: Departure) -> bool:
        flows = self.model.flows
        if flows is None or not flows.changes:
            return False
        from npkit.emulator.traffic.flows import key_of

        assert d.chunk is not None
        key = key_of(d.chunk.w.frame(d.i))
        t = d.chunk.w.times[d.i]
        return key is not None and any(abs(at - t) <= flows.window_ns for at, _ in flows.changes.get(key, ()))

    def fast_outcome(self, pid: int) -> Outcome | None:
        """What the fast path does with a packet the model judged (None: the C oracle's)."""
        r = self.model.results.get(pid)
        return None if r is None else r.fast

    def outcome(self, pid: int) -> Outcome | None:
        """The router's verdict on a packet the model judged (None: the C oracle's)."""
        r = self.model.results.get(pid)
        return None if r is None else (r.final if r.final is not None else r.fast)

    def timed_not_made(self) -> list[Any]:
        """Timed changes owed (by a dead daemon, or due before the first one had its table)
        that the daemon running with its table has not made (lost: the fast path never gets
        them)."""
        ctl = self.rr.control
        st = read_stats(self.rr.chip)
        if ctl is None or ctl.system.killed or st is None or st["state"] != "ready" or self.model.owing:
            return []
        return [self.model.timed[k] for k in sorted(self.model.owed)]

    # -- the account
    def comparison(self, control_queue_full: int) -> dict[str, int]:
        return {"matched_control": self.matched, "unexpected_control": sum(self.got.values()),
                "missing_control": max(0, sum(self.want.values()) + len(self.want_stamped) - control_queue_full)}  # fmt: skip

