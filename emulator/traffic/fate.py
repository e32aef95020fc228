"""How a packet's recorded drop or exception is judged against the oracle's outcome for it:
the one policy behind `npk traffic compare` (compare._Matcher._account_one) and the router
run (npkit.toolchain.system.router_run.RouterRun._dropped and _exception).

A *resource drop* is one whose reason the oracle never gives (`predicted` false in
microcode/reasons.yaml: rbuf_full, no_rx_thread, buffer_exhausted, queue_full,
exception_ring_full, tbuf_underrun): the chip ran out of something, whatever the packet
was.  What it means depends on what the oracle does with the packet:

    oracle outcome   resource drop     drop for a reason the oracle gives
    forward          lost              wrong_outcome
    exception        lost              wrong_outcome
    drop             dropped_early     matched_drop, or wrong_reason

`lost`: a packet that had to leave (on a port, or to the control plane, which then owes
an ICMP error, a reply, an ARP request or the packet itself) did not; a run that does not
allow loss fails.  `dropped_early`: dropped, as the oracle says, but for want of a
resource before the reason the oracle gives could be counted; neither loss nor a
mismatch, reported so that it can be seen.  An exception recorded is matched_exception,
wrong_reason (another exception reason) or wrong_outcome (the oracle forwards or drops
the packet).
"""

from __future__ import annotations

from .oracle import Drop, Except, Forward, Outcome
from .reasons import Reasons, load_reasons

MATCHED_DROP = "matched_drop"
MATCHED_EXCEPTION = "matched_exception"
LOST = "lost"
DROPPED_EARLY = "dropped_early"
WRONG_OUTCOME = "wrong_outcome"
WRONG_REASON = "wrong_reason"

RESOURCE_DROP: dict[str, str] = {"forward": LOST, "exception": LOST, "drop": DROPPED_EARLY}
"""The category of a resource drop, by the kind of the oracle's outcome."""

CATEGORIES = (MATCHED_DROP, MATCHED_EXCEPTION, LOST, DROPPED_EARLY, WRONG_OUTCOME, WRONG_REASON)


def is_resource_drop(reason: str, reasons: Reasons | None = None) -> bool:
    """True for a drop reason the oracle never gives (a name reasons.yaml -- or `reasons`,
    an application's combined table -- does not know, such as a harness's own, counts as
    one unless the oracle's outcome names it)."""
    known = (reasons or load_reasons()).drops.get(reason)
    return known is None or not known.predicted


def judge_disposition(expected: Outcome, kind: str, reason: str, reasons: Reasons | None = None) -> str:
    """The category of a packet the emulator dropped or excepted (`kind` "drop" or
    "exception", `reason` its name) when the oracle's outcome for it is `expected`
    (the module docstring's table); `reasons`: the application's table (default npkit's)."""
    if isinstance(expected, Drop | Except) and (kind, reason) == (expected.kind, expected.reason):
        return MATCHED_DROP if kind == "drop" else MATCHED_EXCEPTION
    if kind == "drop" and is_resource_drop(reason, reasons):
        return RESOURCE_DROP[expected.kind]
    if isinstance(expected, Forward) or kind != expected.kind:
        return WRONG_OUTCOME
    return WRONG_REASON
