"""Pass or fail for a run with traffic: the one policy behind the exit codes of
`npk demo`, `npk run --traffic` and the router benchmarks (README, "Using npkit in CI").

A run fails when
- no packet was offered (an empty capture, or a duration before the first arrival: a run
  that tested nothing must not pass CI),
- the oracle disagrees with any output (wrong bytes, wrong port, wrong outcome or
  exception reason, a frame matching no input, a packet sent twice, flow order broken,
  a frame of the control plane's (ICMP, ARP) it does not predict or one it predicts
  missing),
- conservation does not balance (a packet with two fates, counters that add up wrong),
- packets are still in flight at the end (`in_flight.why` says where),
- microcode drop counters name drops no packet accounts for,
- the microcode dropped or excepted packets with a code no reason declares
  (`undeclared_codes`: the code, how many, and the ME, context and PC that counted the
  first: npkit.toolchain.system.undeclared),
- the chip faulted (`faults`: microcode did what the hardware leaves undefined, such as
  an address outside a memory, a PC outside the control store, a put to a full ring or
  a transmit control word naming bytes past its element), even if every packet came
  out right,
- loss exceeds `max_loss_pct` (loss: packets the oracle forwards or sends to the
  exception path that were dropped for want of a resource, rbuf_full, queue_full, ...:
  `lost` as `npk traffic compare` counts it, npkit.emulator.traffic.fate; less the
  queue_full drops the offered load itself forces on an oversubscribed port: all of a
  port's but those, smallest first, that its wire's idle time between the first of them and
  the last could have carried, npkit.toolchain.system.wire_idle; in % of the packets the oracle
  forwards or sends to the exception path),
- the output rate is below `min_line_rate_pct` of the ports' line rate.

A packet the oracle drops that a resource drop took first (`dropped_early`) is neither
loss nor a mismatch: dropped as predicted, only sooner.

`judge` returns {"ok": bool, "reasons": [str, ...]}; the JSON of a run carries it as
"verdict", and the command exits 1 when ok is false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MISMATCHES = ("wrong_bytes", "wrong_port", "wrong_outcome", "wrong_reason", "unmatched",
              "duplicates", "reordered", "unmatched_exception",
              "unexpected_control", "missing_control")  # fmt: skip


@dataclass(frozen=True)
class Policy:
    max_loss_pct: float | None = 0.0  # None: loss does not fail the run
    min_line_rate_pct: float | None = None


def fault_kinds(faults: dict[str, Any]) -> str:
    """Chip.faults()' counts by kind, as text: "sram 8, msf 1"."""
    return ", ".join(f"{k} {n}" for k, n in faults.get("counts", {}).items())


def judge(summary: dict[str, Any], policy: Policy) -> dict[str, Any]:
    """The verdict on a router summary (npkit.toolchain.system.router_run) or a plain
    traffic run's summary (npkit.toolchain.commands.run)."""
    reasons: list[str] = []
    if summary.get("totals", {}).get("offered") == 0:
        reasons.append("no packets offered: the run tested nothing (no packet in the traffic arrives "
                       "before the end of its duration)")
    cmp_ = summary.get("comparison") or {}
    forwarded = summary.get("totals", {}).get("forwarded", 0)
    for key in MISMATCHES:
        if cmp_.get(key):
            reasons.append(f"oracle: {key} {cmp_[key]} (of {forwarded} forwarded)")
    cons = summary.get("conservation") or {}
    if not cons.get("balanced", True):
        reasons.append("conservation does not balance: " + "; ".join(cons.get("problems", [])))
    if cons.get("unattributed_drops"):
        reasons.append(f"drop counters with no packet to account for: {cons['unattributed_drops']}")
    for u in summary.get("undeclared_codes") or []:
        reasons.append(u["why"])
    sched = summary.get("scheduler") or {}
    reasons += [f"scheduler: {p}" for p in sched.get("problems", [])]  # qm drr / dfq (sched_judge)
    faults = summary.get("faults") or {}
    if faults.get("total"):
        reasons.append(f"chip faults: {faults['total']} ({fault_kinds(faults)}); the last are in faults.last")
    for m in summary.get("me_faults") or []:  # an ME stopped on an illegal word or a bad PC
        reasons.append(f"ME {m['me_name']} ({m['program']}) stopped at pc {m['pc']}: {m['reason']}")
    flight = summary.get("in_flight") or {}
    if flight.get("count", 0) > 0:
        reasons.append(f"{flight['count']} packets in flight at the end: {flight.get('why', '')}")
    loss = summary.get("totals", {}).get("loss_pct")
    if policy.max_loss_pct is not None and loss is not None and loss > policy.max_loss_pct:
        reasons.append(f"loss {loss} % > {policy.max_loss_pct} % allowed ({_lost(summary['totals'])})")
    rate = (summary.get("throughput") or {}).get("pct_line_rate")
    if policy.min_line_rate_pct is not None and rate is not None and rate < policy.min_line_rate_pct:
        reasons.append(f"output {rate} % of line rate < {policy.min_line_rate_pct} % required")
    return {"ok": not reasons, "reasons": reasons}


def _lost(t: dict[str, Any]) -> str:
    """The lost packets, by what the oracle does with them."""
    text = f"{t.get('lost')} packets lost"
    by = t.get("lost_by_outcome")
    if not by:
        return text
    text += (f": dropped for want of a resource, {by.get('forward', 0)} the oracle forwards, "
             f"{by.get('exception', 0)} it sends to the exception path")
    overload = t.get("expected_overload_drops", 0)
    return text + (f", less {overload} queue_full drops the offered load forces" if overload else "")
