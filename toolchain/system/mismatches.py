"""The packets a router run judged wrong, named: the first MAX_NAMED of them with what the
model expected and what the router did, and how many there were in all.

    log = MismatchLog()
    log.add(17, 0, "wrong_outcome", Drop("acl_deny"), {"outcome": "forward", "port": 1})
    log.record()     # {"total": 1, "first": [{"packet": 17, "port_in": 0, ...}]}

A run's JSON carries it as `comparison.mismatches` (with `comparison.mismatches_total`);
`npk why pkt:N` replays packet N.  The record is kept only for packets that mismatch, so a
run that matches pays nothing.
"""

from __future__ import annotations

from typing import Any

MAX_NAMED = 20  # mismatching packets a run names (the total counts them all)


def describe(outcome: Any) -> dict[str, Any]:
    """An outcome (npkit.emulator.traffic.oracle: Forward, Drop, Except; None: unknown) as
    the JSON names it."""
    if outcome is None:
        return {"outcome": "unknown"}
    kind = str(getattr(outcome, "kind", "?"))
    if kind == "forward":
        return {"outcome": "forward", "port": int(outcome.port), "length": len(outcome.data)}
    return {"outcome": kind, "reason": str(outcome.reason)}


def forwarded(port: int, frame: bytes, expected: Any = None) -> dict[str, Any]:
    """A frame that left on `port`, as the JSON names it (with the first byte that differs
    from the expected frame's, when it was expected on that port)."""
    got: dict[str, Any] = {"outcome": "forward", "port": port, "length": len(frame)}
    data = getattr(expected, "data", None)
    if isinstance(data, bytes | bytearray) and getattr(expected, "port", None) == port:
        diff = next((i for i, (a, b) in enumerate(zip(data, frame, strict=False)) if a != b), None)
        got["first_difference"] = diff if diff is not None else min(len(data), len(frame))
    return got


class MismatchLog:
    """The first MAX_NAMED mismatching packets and the count of all."""

    def __init__(self) -> None:
        self.total = 0
        self.first: list[dict[str, Any]] = []

    def add(self, pid: int, port_in: int | None, category: str, expected: Any, got: dict[str, Any]) -> None:
        self.total += 1
        if len(self.first) < MAX_NAMED:
            self.first.append({"packet": pid, "port_in": port_in, "category": category,
                               "expected": describe(expected), "got": got})  # fmt: skip

    def text(self) -> list[str]:
        """One line per named packet, for the run's text summary."""
        if not self.total:
            return []
        more = f" (the first {len(self.first)})" if self.total > len(self.first) else ""
        out = [f"mismatching packets: {self.total}{more}; `npk why pkt:N` replays one"]
        for m in self.first:
            out.append(f"  pkt:{m['packet']} in port {m['port_in']}: {m['category']}: expected "
                       f"{_outcome_text(m['expected'])}, got {_outcome_text(m['got'])}")  # fmt: skip
        return out


def _outcome_text(o: dict[str, Any]) -> str:
    if o.get("outcome") == "forward":
        diff = f", bytes differ from byte {o['first_difference']}" if "first_difference" in o else ""
        return f"forwarded on port {o.get('port')}{diff}"
    if o.get("outcome") in ("drop", "exception"):
        return f"{'dropped' if o['outcome'] == 'drop' else 'excepted'} with {o.get('reason')}"
    return str(o.get("outcome"))
