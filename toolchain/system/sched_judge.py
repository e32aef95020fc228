"""The reference model's part for the scheduler variants (`qm: drr`, `qm: dfq`;
docs/schedulers.md "How a scheduler is judged").

A scheduler's exact interleaving is timing, so it is judged by its properties, on top of
the IPv4 model (which still decides every packet's port, bytes, drop or exception, and
flow order):

- **per-queue order**: the packets of a queue (output port, key) leave in arrival order
  (pipelined layout; in the parallel layout the pool MEs may reorder different flows of
  one input port before the qm, so there it is per flow within the queue);
- **work conservation**: an output wire does not idle while a packet for it has been in
  the router longer than `transit_ns` (the pipeline's own latency, default 20 us);
  idle spells of 8 us or more (shorter ones are the transmit path's own) adding up to
  more than `idle_tolerance` (0.5 %) of a port's time fail;
- **shares**: on a port offered more than it can carry, each key's frame bytes (what
  DRR and DFQ count; the wire's preamble, FCS and gap are not theirs) are its weighted
  max-min fair share (weights: the quanta; demands: what the oracle routes to the port
  for that key) within `share_tolerance` (5 %) of the port's bytes, measured from a
  quarter of the traffic's duration to its end; Jain's index of served / fair share is
  reported;
- paced DFQ (`qm.dfq_paced`, Panama's fixed cycles) is not work conserving by design:
  there each connection's share is min(its demand, its reservation) and idle time is
  reported, not judged;
- **DFQ's delay bound** (Panama, seed 000: DFQ's bound differs from fluid fair
  queueing's by an amount proportional to T, independent of the number of connections):
  every packet of connection f leaves by F + 2 T + transit_ns, where F is its finish
  time in a fluid server of the connection's reserved rate r_f (F_k = max(F_{k-1}, a_k) +
  frame bits_k / r_f, a_k the end of its arrival), on ports whose connections reserve
  no more than the link (admission; paced, also the sum of quantum + largest frame of
  the port's connections within one cycle, C x T: whole frames must fit the cycles).

Keys: with `class_by: inport` the judge knows every packet's key (its input port);
with `class_by: msg` a block upstream sets it, so the judge keys by flow and does not
judge shares or the delay bound (it says so in `not_judged`)."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from npkit.emulator.traffic.cpkt import FORWARD

from .sched import SchedParams

TRANSIT_NS = 20_000
# from the qm's decision to the wire, a 1518-byte frame takes up to ~5 us (tx fills 24
# TBUF elements, the SPI moves them; microcode/README.md §6), and a port whose transmit
# window is shut waits for its FIFO to drain: idle spells shorter than this are the
# transmit path's, not the scheduler's (the default qm leaves 0.5-5 us ones under IMIX)
MIN_SPELL_NS = 8_000
IDLE_TOLERANCE = 0.005
SHARE_TOLERANCE = 0.05
GAP_HORIZON_NS = 2_000_000


BIN_NS = 100_000  # offered and served bits are kept by 100 us bins (shares: steady state)


@dataclass
class _Queue:
    last_arrival: int = -1
    fifo_violations: int = 0
    offered: Counter[int] = field(default_factory=Counter)  # bits by arrival bin
    served: Counter[int] = field(default_factory=Counter)  # bits by departure bin
    fluid_finish: float = 0.0
    worst_excess_ns: float = float("-inf")  # delay less the bound, worst packet
    bound_violations: int = 0
    packets: int = 0
    max_len: int = 0  # the largest frame that left (paced DFQ's admission)
    min_len: int = 0  # the smallest (its reservation's cost on the wire: admission)


@dataclass
class _Port:
    wire_end: int = -1
    gaps: deque[list[int]] = field(
        default_factory=deque
    )  # [start, end, earliest ready] idle spells
    idle_backlogged_ns: int = 0
    first_t: int = -1
    last_t: int = 0


def _backlogged(gap: list[int]) -> int:
    """The part of an idle spell [start, end) after the earliest frame was ready, when it
    is MIN_SPELL_NS or longer (shorter ones are the transmit path's own: qm.uc leaves
    them too)."""
    start, end, avail = gap
    idle = end - max(start, avail)
    return idle if idle >= MIN_SPELL_NS else 0


def weighted_max_min(
    capacity: float, demands: dict[Any, float], weights: dict[Any, float]
) -> dict[Any, float]:
    """Weighted max-min fair allocation (water filling) of `capacity` among `demands`."""
    alloc = {k: 0.0 for k in demands}
    active = {k for k, d in demands.items() if d > 0}
    left = capacity
    while active and left > 1e-9:
        wsum = sum(weights[k] for k in active)
        step = min((demands[k] - alloc[k]) / weights[k] for k in active)
        give = min(step, left / wsum)
        for k in active:
            alloc[k] += give * weights[k]
        left -= give * wsum
        active = {k for k in active if demands[k] - alloc[k] > 1e-9}
    return alloc


def jain(xs: list[float]) -> float:
    """Jain's fairness index of xs (1: all equal)."""
    if not xs or not any(xs):
        return 1.0
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


class SchedJudge:
    """Attached to a RouterRun (its run's on_push and on_departure hooks)."""

    def __init__(
        self, rr: Any, variant: str, params: SchedParams, per_flow_order: bool = False
    ) -> None:
        self.rr = rr
        self.variant = variant
        self.params = params
        self.per_flow_order = per_flow_order
        self.rate = int(rr.run.dev.cfg["rate_bps"])
        self.over = rr.over
        self.queues: dict[tuple[int, int], _Queue] = defaultdict(_Queue)
        self.order: dict[tuple[int, ...], int] = {}
        self.ports: dict[int, _Port] = defaultdict(_Port)
        self.unjudged = 0
        self.control = 0  # frames of packets the control plane sent on (not the fast path's)
        self.by_key = params.class_by == "inport"
        rr.run.on_push.append(self._pushed)
        rr.run.on_departure.append(self._departed)

    def queued(self) -> dict[int, int]:
        """Packets in the qm's queues by output port, from its local memory's port records
        (enqueued - dequeued; the router run's census: the default qm's port queue
        descriptors do not hold these)."""
        chip = self.rr.chip
        me = next((p.mes[0] for p in self.rr.image.programs if p.name == "qm" and p.mes), None)
        if me is None:
            return {}
        from npkit.emulator.binding import K_LM

        out = chip.ffi.new("uint32_t *")

        def lm(word: int) -> int:
            chip.lib.npk_reg_read(chip._chip, me, 0, K_LM, word, out)
            return int(out[0])

        counts = {
            p: (lm(8 * p) - lm(8 * p + 1)) & 0xFFFFFFFF for p in range(len(self.rr.config.ports))
        }
        return {p: n for p, n in counts.items() if n}

    def key_of(self, in_port: int) -> int:
        return in_port & self.params.key_mask(self.variant)

    def wire_bits(self, port: int, nbytes: int) -> int:
        return (nbytes + self.over[port]) * 8

    def _pushed(self, c: Any, lo: int, hi: int) -> None:
        v, w = c.extra["v"], c.w
        for i in range(lo, hi):
            if v.kind[i] == FORWARD:
                port = v.port[i]
                q = self.queues[(port, self.key_of(w.ports[i]))]
                q.offered[w.times[i] // BIN_NS] += 8 * w.lens[i]  # frame bits: what DRR / DFQ count

    def _departed(self, d: Any) -> None:
        c = d.chunk
        port = d.port
        pt = self.ports[port]
        wire = -(-self.wire_bits(port, len(d.data)) * 10**9 // self.rate)
        if pt.first_t < 0:
            pt.first_t = d.t
        pt.last_t = d.t + wire
        if c is None:
            self.unjudged += 1
            pt.wire_end = d.t + wire
            return
        w, i = c.w, d.i
        v = c.extra.get("v")
        if v is None or v.kind[i] != FORWARD:
            # not the fast path's: a packet the control plane sent on (it waited in the
            # daemon, e.g. for ARP, and came back through its own ring) is the control
            # plane judge's; the wire was busy meanwhile all the same
            self.control += 1
            pt.wire_end = d.t + wire
            return
        in_port = w.ports[i]
        arrived = w.times[i]
        ready = arrived + -(-self.wire_bits(in_port, w.lens[i]) * 10**9 // self.rate)
        self._conserve(pt, d.t, ready)
        pt.wire_end = d.t + wire
        key = self.key_of(in_port)
        q = self.queues[(port, key)]
        q.packets += 1
        q.max_len = max(q.max_len, len(d.data))
        q.min_len = min(q.min_len or len(d.data), len(d.data))
        q.served[d.t // BIN_NS] += 8 * len(d.data)
        flow = _flow(w, i, d.data)
        okey = (port, key, flow) if self.per_flow_order or not self.by_key else (port, key)
        last = self.order.get(okey, -1)
        if arrived < last:
            q.fifo_violations += 1
        self.order[okey] = max(last, arrived)
        if self.variant == "dfq" and self.by_key:
            self._delay(q, port, key, ready, d.t, len(d.data))

    def _conserve(self, pt: _Port, t: int, ready: int) -> None:
        """The wire's idle spells while a frame was ready to leave (transit included):
        each spell counts from the earliest `ready + transit` of a frame that left after
        it (once, however many such frames there are)."""
        if pt.wire_end >= 0 and t > pt.wire_end:
            pt.gaps.append([pt.wire_end, t, t])  # start, end, earliest availability seen
        while pt.gaps and pt.gaps[0][1] < t - GAP_HORIZON_NS:
            pt.idle_backlogged_ns += _backlogged(pt.gaps.popleft())
        avail = ready + TRANSIT_NS
        for gap in reversed(pt.gaps):
            if gap[1] <= avail:
                break
            if gap[1] <= t:
                gap[2] = min(gap[2], avail)

    def _delay(self, q: _Queue, port: int, key: int, ready: int, t: int, nbytes: int) -> None:
        rate = self.reserved_bps(key)
        q.fluid_finish = max(q.fluid_finish, float(ready)) + 8 * nbytes * 1e9 / rate
        bound = q.fluid_finish + 2 * self.params.dfq_t_ns + TRANSIT_NS
        excess = t - bound
        q.worst_excess_ns = max(q.worst_excess_ns, excess)
        if excess > 0:
            q.bound_violations += 1

    # -- the verdict's part
    def window(self) -> tuple[int, int]:
        """The bins the shares are measured over: from a quarter of the traffic's
        duration (queues have filled) to its end (the drain serves what was queued)."""
        end = (
            self.rr.traffic_ns
            or max((t for q in self.queues.values() for t in q.served), default=0) * BIN_NS
        )
        return end // 4 // BIN_NS, max(end // 4 // BIN_NS + 1, end // BIN_NS)

    def _shares(self, problems: list[str]) -> list[dict[str, Any]]:
        rows = []
        lo, hi = self.window()
        by_port: dict[int, dict[int, tuple[int, int]]] = defaultdict(dict)
        for (port, key), q in self.queues.items():
            offered = sum(b for t, b in q.offered.items() if lo <= t < hi)
            served = sum(b for t, b in q.served.items() if lo <= t < hi)
            by_port[port][key] = (offered, served)
        paced = self.variant == "dfq" and self.params.dfq_paced
        secs = (hi - lo) * BIN_NS / 1e9
        for port, qs in sorted(by_port.items()):
            offered = sum(o for o, _ in qs.values())
            served = sum(s for _, s in qs.values())
            if paced:
                # Panama's cycles: each connection gets at most its reservation, whatever
                # the link has left (errors in % of what the link could carry meanwhile)
                fair = {k: min(float(o), self.reserved_bps(k) * secs) for k, (o, _) in qs.items()}
                if not served or all(
                    o <= f * 1.02 for (o, _), f in zip(qs.values(), fair.values(), strict=True)
                ):
                    continue
                served = max(served, int(self.rate * secs))
            else:
                if not served or offered <= 1.02 * served:
                    continue  # not overloaded: every key gets what it asks (loss judges the rest)
                weights = {k: float(self.params.quantum(self.variant, k)) for k in qs}
                fair = weighted_max_min(served, {k: float(o) for k, (o, _) in qs.items()}, weights)
            err = {k: (qs[k][1] - fair[k]) / served for k in qs}
            worst = max(err, key=lambda k: abs(err[k]))
            ratio = [qs[k][1] / fair[k] for k in qs if fair[k] > 0]
            row = {"port": port, "keys": len(qs), "jain": round(jain(ratio), 4),
                   "worst_key": worst, "worst_error_pct": round(100 * err[worst], 2),
                   "served_mbps": {k: round(v[1] / ((hi - lo) * BIN_NS / 1e3), 1) for k, v in sorted(qs.items())},
                   "fair_mbps": {k: round(fair[k] / ((hi - lo) * BIN_NS / 1e3), 1) for k in sorted(qs)}}  # fmt: skip
            rows.append(row)
            if abs(err[worst]) > SHARE_TOLERANCE:
                problems.append(f"share: port {port} key {worst} got {100 * err[worst]:+.1f} % of the port's bytes "
                                f"off its weighted fair share (tolerance {100 * SHARE_TOLERANCE:.0f} %)")  # fmt: skip
        return rows

    def reserved_bps(self, key: int) -> float:
        return self.params.dfq_rates_mbps[key % 8] * 1e6

    def reserved_wire_bps(self, port: int, key: int) -> float:
        """A reservation counts frame bits (as DRR / DFQ's quanta); the wire also carries
        each frame's preamble and gap, so in the connection's smallest frames it takes
        rate x (frame + overhead) / frame of the link."""
        n = self.queues[(port, key)].min_len
        return self.reserved_bps(key) * ((n + self.over[port]) / n if n else 1.0)

    def _admitted(self, port: int) -> bool:
        """Admission: the port's connections' reservations, counted on the wire, at most
        its link (Panama: the quanta of a cycle fit the link's C x T; at 64-byte frames
        five 200 Mb/s reservations need 1.3 Gb/s of wire); paced, whole frames must also
        fit the cycles: the sum of (quantum + largest frame) at most C x T."""
        keys = [k for (p, k) in self.queues if p == port]
        if sum(self.reserved_wire_bps(port, k) for k in keys) > self.rate * 1.0001:
            return False
        if not self.params.dfq_paced:
            return True
        cycle_bits = self.rate * self.params.dfq_t_ns / 1e9
        need = sum(8 * (self.params.quantum("dfq", k) + self.queues[(port, k)].max_len) for k in keys)
        return need <= cycle_bits

    def summary(self) -> dict[str, Any]:
        problems: list[str] = []
        fifo = sum(q.fifo_violations for q in self.queues.values())
        if fifo:
            problems.append(
                f"per-queue order: {fifo} packets left before an earlier arrival of their queue"
            )
        conserve = {}
        for port, pt in sorted(self.ports.items()):
            span = max(1, pt.last_t - pt.first_t)
            frac = (pt.idle_backlogged_ns + sum(_backlogged(g) for g in pt.gaps)) / span
            conserve[port] = round(100 * frac, 4)
            if frac > IDLE_TOLERANCE and not self.params.dfq_paced:  # paced DFQ idles by design
                problems.append(f"work conservation: port {port}'s wire idled {100 * frac:.2f} % of the time with a "
                                f"packet ready for it (tolerance {100 * IDLE_TOLERANCE:.1f} %): the scheduler held it "
                                "back, or the qm did not keep up")  # fmt: skip
        out: dict[str, Any] = {
            "variant": self.variant, "class_by": self.params.class_by, "paced": self.params.dfq_paced,
            "fifo_violations": fifo, "idle_while_backlogged_pct": conserve,
            "transit_ns": TRANSIT_NS, "unjudged": self.unjudged, "control_plane_frames": self.control,
        }  # fmt: skip
        if self.by_key:
            out["shares"] = self._shares(problems)
            out["share_tolerance_pct"] = 100 * SHARE_TOLERANCE
        else:
            out["not_judged"] = ["shares", "delay bound"]
        if self.variant == "dfq" and self.by_key:
            out["delay_bound"] = self._bound_summary(problems)
        out["ok"] = not problems
        out["problems"] = problems
        return out

    def _bound_summary(self, problems: list[str]) -> dict[str, Any]:
        rows = []
        for (port, key), q in sorted(self.queues.items()):
            if not q.packets:
                continue
            admitted = self._admitted(port)
            rows.append({"port": port, "connection": key, "packets": q.packets, "admitted": admitted,
                         "worst_margin_us": round(-q.worst_excess_ns / 1e3, 2), "violations": q.bound_violations})  # fmt: skip
            if admitted and q.bound_violations:
                problems.append(f"dfq delay bound: port {port} connection {key}: {q.bound_violations} packets later "
                                f"than fluid + 2T + transit (worst by {q.worst_excess_ns / 1e3:.1f} us)")  # fmt: skip
        return {"bound": "fluid finish at the reserved rate + 2 T + transit", "t_ns": self.params.dfq_t_ns,
                "connections": rows}  # fmt: skip


def _flow(w: Any, i: int, out: bytes) -> int:
    """The flow of input packet i of window w: its frame's protocol, source and
    destination, whatever the router rewrote (the SPP's tunnels rewrite the outer
    addresses); the departing frame's when the window keeps no frames."""
    data = getattr(w, "data", None)
    f = out if data is None else bytes(data[w.off[i] : w.off[i] + 34])
    return hash(f[23:24] + f[26:34])


def attach_sched_judge(rr: Any) -> SchedJudge | None:
    """The judge of a run whose qm is a scheduler variant (the image's `params.qm`:
    drr or dfq), with the image's qm section; None for the other queue managers."""
    from .sched import sched_params

    variant = str((rr.image.meta.get("params") or {}).get("qm", ""))
    if variant not in ("drr", "dfq"):
        return None
    params = sched_params(dict(rr.image.meta.get("qm") or {}))
    # the parallel layout's pool MEs may reorder an input port's flows before the qm
    parallel = "pool_mes" in (rr.image.meta.get("params") or {})
    return SchedJudge(rr, variant, params, per_flow_order=parallel)


def sched_responses(summary: dict[str, Any]) -> dict[str, float]:
    """An experiment's responses from the judge's summary (toolchain/experiment/execute.py):
    sched_jain (lowest over the overloaded ports), sched_share_err_pct (largest |error|),
    sched_idle_backlogged_pct (largest), sched_fifo_violations, and for DFQ
    sched_bound_violations and sched_bound_margin_us (the smallest margin of an admitted
    connection: bound - delay of its worst packet), sched_bound_unadmitted (connections
    on ports that fail admission) and sched_bound_margin_all_us (every connection's)."""
    shares = summary.get("shares") or []
    idle = summary.get("idle_while_backlogged_pct") or {}
    out = {
        "sched_ok": float(bool(summary.get("ok"))),
        "sched_jain": min((r["jain"] for r in shares), default=1.0),
        "sched_share_err_pct": max((abs(r["worst_error_pct"]) for r in shares), default=0.0),
        "sched_idle_backlogged_pct": max(idle.values(), default=0.0),
        "sched_fifo_violations": float(summary.get("fifo_violations", 0)),
    }  # fmt: skip
    every = (summary.get("delay_bound") or {}).get("connections", [])
    conns = [c for c in every if c["admitted"]]
    if every:
        out["sched_bound_unadmitted"] = float(len(every) - len(conns))
        out["sched_bound_margin_all_us"] = min(c["worst_margin_us"] for c in every)
    if conns:
        out["sched_bound_violations"] = float(sum(c["violations"] for c in conns))
        out["sched_bound_margin_us"] = min(c["worst_margin_us"] for c in conns)
    return out
