"""Per-packet comparison of what the emulator did against what the oracle predicts.

Inputs: the input packets (ids, ports, bytes), the oracle's outcome for each, the
frames the emulator transmitted per port (in transmit order), and the emulator's
drop/exception records (see `dataset` for the file format).

Matching outputs to inputs. The router may interleave packets from different input
ports on an output port, but packets of one flow (input port, IP protocol, source and
destination address: `oracle.flow_of`) must leave in arrival order. Outputs are matched in passes, each pass taking only what the
earlier ones left:

1. exact: an output equal, byte for byte, to a predicted forward on that port (the
   earliest unmatched one with those bytes). A match that goes back in its flow's
   order is reported as `reordered`.
2. same port, damaged: an output equal to one already matched is a `duplicate`;
   otherwise the closest of the next few unmatched predicted forwards of each flow to
   that port, if close enough (same length, at most 12 of the first 64 bytes differ,
   the rest equal): `wrong_bytes`, with the first differing offset and the header
   fields that differ (Ethernet dst/src, TTL, checksum, ...).
3. other port: the IP part (from byte 14) equals a predicted forward to another port:
   `wrong_port`.
4. not predicted to be forwarded: the IP part equals an input that the oracle drops or
   excepts (as received, or with the TTL decremented): `wrong_outcome`.
5. anything left: `unexpected`.

Then every input is accounted for: a predicted forward never transmitted is `lost` if
the emulator recorded a resource drop for it (rbuf_full, queue_full, ...), and
`wrong_outcome` if it recorded another drop or an exception, else `missing`. A
predicted drop or exception must be recorded with the same kind and reason
(`wrong_reason` if the reason differs, `wrong_outcome` if the kind does, `missing` if
nothing was recorded). Packets with more than one disposition are `conflict`.

Categories that are not mismatches: matched_forward, matched_drop, matched_exception;
`lost` is reported apart (a capacity problem, not a correctness one).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .dataset import Disposition, InputPacket, load_dispositions, load_outputs, load_traffic
from .oracle import Drop, Except, Forward, Outcome, RefRouter, flow_of, rewrite
from .packet import ETHERTYPE_IPV4
from .reasons import load_reasons
from .router_config import RouterConfig

OK = ("matched_forward", "matched_drop", "matched_exception")
MISMATCHES = (
    "missing", "wrong_port", "wrong_bytes", "reordered", "duplicate", "unexpected",
    "wrong_outcome", "wrong_reason", "conflict",
)  # fmt: skip
CATEGORIES = OK + ("lost",) + MISMATCHES
FUZZY_CANDIDATES = 8  # unmatched predictions per flow considered in pass 2
HEAD = 64
FUZZY_MAX_DIFF = 12  # differing bytes in the first HEAD for a 'damaged' match


@dataclass
class Issue:
    category: str
    id: int | None = None  # input packet id
    in_port: int | None = None
    expected: str = ""
    got: str = ""
    out_port: int | None = None
    out_index: int | None = None  # position in the output pcap of out_port
    offset: int | None = None  # first differing byte
    fields: list[str] = field(default_factory=list)
    detail: str = ""

    def line(self) -> str:
        who = f"packet {self.id} (in port {self.in_port})" if self.id is not None else "output"
        where = (f" [out port {self.out_port} #{self.out_index}]"
                 if self.out_port is not None else "")
        text = f"{self.category:<15} {who}{where}: expected {self.expected or '-'}, got {self.got or '-'}"
        if self.detail:
            text += f"; {self.detail}"
        return text


@dataclass
class Report:
    totals: dict[str, int]
    issues: list[Issue]
    allow_loss: bool = False

    @property
    def mismatches(self) -> int:
        return sum(self.totals.get(c, 0) for c in MISMATCHES)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and (self.allow_loss or self.totals.get("lost", 0) == 0)

    def to_json(self, max_issues: int | None = None) -> dict[str, Any]:
        issues = self.issues if max_issues is None else self.issues[:max_issues]
        return {
            "ok": self.ok,
            "mismatches": self.mismatches,
            "totals": self.totals,
            "issues": [{k: v for k, v in asdict(i).items() if v not in (None, "", [])}
                       for i in issues],
            "issues_shown": len(issues),
        }

    def render(self, max_issues: int = 50) -> str:
        t = self.totals
        lines = [
            f"inputs {t['inputs']}: predicted {t['predicted_forward']} forward, "
            f"{t['predicted_drop']} drop, {t['predicted_exception']} exception; "
            f"outputs {t['outputs']}",
        ]
        lines.append("  " + ", ".join(f"{c} {t[c]}" for c in CATEGORIES if t.get(c)))
        for issue in self.issues[:max_issues]:
            lines.append("  " + issue.line())
        if len(self.issues) > max_issues:
            lines.append(f"  ... {len(self.issues) - max_issues} more (use --json or --max)")
        lines.append("OK" if self.ok else f"FAIL: {self.mismatches} mismatches"
                     + (f", {t.get('lost', 0)} lost" if t.get("lost") and not self.allow_loss
                        else ""))
        return "\n".join(lines)


# ---------------------------------------------------------------------------- field names

_ETH_FIELDS = [(0, 6, "Ethernet dst"), (6, 12, "Ethernet src"), (12, 14, "EtherType")]
_IP_FIELDS = [
    (0, 1, "IPv4 version/IHL"), (1, 2, "IPv4 TOS"), (2, 4, "IPv4 total length"),
    (4, 6, "IPv4 identification"), (6, 8, "IPv4 flags/fragment"), (8, 9, "IPv4 TTL"),
    (9, 10, "IPv4 protocol"), (10, 12, "IPv4 header checksum"), (12, 16, "IPv4 source"),
    (16, 20, "IPv4 destination"),
]  # fmt: skip
_L4_FIELDS = {
    17: [(0, 2, "UDP source port"), (2, 4, "UDP destination port"), (4, 6, "UDP length"),
         (6, 8, "UDP checksum")],
    6: [(0, 2, "TCP source port"), (2, 4, "TCP destination port"), (4, 8, "TCP sequence"),
        (8, 12, "TCP acknowledgment"), (12, 14, "TCP offset/flags"), (14, 16, "TCP window"),
        (16, 18, "TCP checksum"), (18, 20, "TCP urgent pointer")],
    1: [(0, 1, "ICMP type"), (1, 2, "ICMP code"), (2, 4, "ICMP checksum"), (4, 8, "ICMP rest")],
}  # fmt: skip


def field_name(frame: bytes, offset: int) -> str:
    """Which header field byte `offset` of an Ethernet frame belongs to."""
    for lo, hi, name in _ETH_FIELDS:
        if lo <= offset < hi:
            return name
    if len(frame) < 34 or (frame[12] << 8 | frame[13]) != ETHERTYPE_IPV4:
        return "Ethernet payload"
    rel = offset - 14
    hlen = max((frame[14] & 0xF) * 4, 20)
    for lo, hi, name in _IP_FIELDS:
        if lo <= rel < hi:
            return name
    if rel < hlen:
        return "IPv4 options"
    rel -= hlen
    for lo, hi, name in _L4_FIELDS.get(frame[23], []):
        if lo <= rel < hi:
            return name
    return "payload"


def diff_bytes(expected: bytes, got: bytes) -> tuple[int | None, list[str]]:
    """First differing offset and the distinct fields that differ (in frame order)."""
    first = None
    fields: list[str] = []
    for i in range(max(len(expected), len(got))):
        a = expected[i] if i < len(expected) else None
        b = got[i] if i < len(got) else None
        if a != b:
            if first is None:
                first = i
            name = field_name(expected, i) if i < len(expected) else "beyond expected length"
            if name not in fields:
                fields.append(name)
    return first, fields


def _diff_detail(expected: bytes, got: bytes) -> tuple[int | None, list[str], str]:
    first, fields = diff_bytes(expected, got)
    detail = ""
    if len(expected) != len(got):
        detail = f"length {len(expected)} expected, {len(got)}; "
    if first is not None:
        exp = f"0x{expected[first]:02x}" if first < len(expected) else "(end)"
        gotb = f"0x{got[first]:02x}" if first < len(got) else "(end)"
        detail += (f"first difference at byte {first} ({field_name(expected, first)}): "
                   f"expected {exp}, got {gotb}; fields: {', '.join(fields)}")
    return first, fields, detail


def _score(a: bytes, b: bytes) -> int:
    if len(a) != len(b):
        return 1 << 30
    head = sum(x != y for x, y in zip(a[:HEAD], b[:HEAD], strict=False))
    return head if a[HEAD:] == b[HEAD:] else head + 1000


def _describe(outcome: Outcome) -> str:
    if isinstance(outcome, Forward):
        return f"forward port {outcome.port}"
    return f"{outcome.kind} {outcome.reason}"


# ---------------------------------------------------------------------------- comparison


def compare(
    inputs: list[InputPacket],
    predictions: list[Outcome],
    outputs: dict[int, list[bytes]],
    records: dict[int, list[Disposition]],
    allow_loss: bool = False,
) -> Report:
    if len(inputs) != len(predictions):
        raise ValueError("one prediction per input packet")
    issues: list[Issue] = []
    matched: dict[int, tuple[int, int]] = {}  # packet id -> (out port, out index)
    by_id = {p.id: p for p in inputs}

    # expected forwards, by out port and by (in port, out port) flow, in id order
    exact: dict[tuple[int, bytes], deque[int]] = defaultdict(deque)
    flows: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pkt, out in zip(inputs, predictions, strict=True):
        if isinstance(out, Forward):
            exact[(out.port, out.data)].append(pkt.id)
            flows[(pkt.port, out.port)].append(pkt.id)
    flow_pos = {f: 0 for f in flows}  # first possibly-unmatched index per flow

    def expected_of(pid: int) -> Forward:
        out = predictions[pid]
        assert isinstance(out, Forward)
        return out

    def take(pid: int, port: int, index: int) -> None:
        matched[pid] = (port, index)

    # pass 1: exact
    leftovers: list[tuple[int, int, bytes]] = []
    for port in sorted(outputs):
        for index, data in enumerate(outputs[port]):
            queue = exact.get((port, data))
            while queue and queue[0] in matched:
                queue.popleft()
            if queue:
                take(queue.popleft(), port, index)
            else:
                leftovers.append((port, index, data))

    # pass 2: damaged on the right port
    def candidates(port: int) -> list[int]:
        found = []
        for (inp, outp), ids in flows.items():
            if outp != port:
                continue
            pos = flow_pos[(inp, outp)]
            while pos < len(ids) and ids[pos] in matched:
                pos += 1
            flow_pos[(inp, outp)] = pos
            n = 0
            for pid in ids[pos:]:
                if pid not in matched:
                    found.append(pid)
                    n += 1
                    if n == FUZZY_CANDIDATES:
                        break
        return found

    sent = {(port, expected_of(pid).data) for pid, (port, _) in matched.items()}
    still: list[tuple[int, int, bytes]] = []
    duplicates: list[tuple[int, int, bytes]] = []
    for port, index, data in leftovers:
        if (port, data) in sent:
            duplicates.append((port, index, data))
            continue
        best, best_score = None, 1 << 30
        for pid in candidates(port):
            score = _score(expected_of(pid).data, data)
            if score < best_score:
                best, best_score = pid, score
        if best is not None and best_score <= FUZZY_MAX_DIFF:
            first, fields, detail = _diff_detail(expected_of(best).data, data)
            take(best, port, index)
            issues.append(Issue("wrong_bytes", best, by_id[best].port, f"forward port {port}",
                                f"forward port {port}", port, index, first, fields, detail))
        else:
            still.append((port, index, data))

    # pass 3: right packet, wrong port
    ip_part: dict[bytes, deque[int]] = defaultdict(deque)
    for pkt, out in zip(inputs, predictions, strict=True):
        if isinstance(out, Forward) and pkt.id not in matched:
            ip_part[out.data[14:]].append(pkt.id)
    rest: list[tuple[int, int, bytes]] = []
    for port, index, data in still:
        queue = ip_part.get(data[14:])
        while queue and queue[0] in matched:
            queue.popleft()
        if queue:
            pid = queue.popleft()
            exp = expected_of(pid)
            matched[pid] = (port, index)
            kind = "wrong_port" if exp.port != port else "wrong_bytes"
            first, fields, detail = _diff_detail(exp.data, data)
            issues.append(Issue(kind, pid, by_id[pid].port, f"forward port {exp.port}",
                                f"forward port {port}", port, index, first, fields,
                                detail if kind == "wrong_bytes" else ""))
        else:
            rest.append((port, index, data))

    # pass 4: forwarded although the oracle drops or excepts it
    not_fwd: dict[bytes, int] = {}
    for pkt, out in zip(inputs, predictions, strict=True):
        if not isinstance(out, Forward) and len(pkt.data) > 34:
            not_fwd.setdefault(pkt.data[14:], pkt.id)
            if (pkt.data[12] << 8 | pkt.data[13]) == ETHERTYPE_IPV4 and pkt.data[22] > 0:
                not_fwd.setdefault(rewrite(pkt.data, b"\0" * 6, b"\0" * 6)[14:], pkt.id)
    forwarded_wrongly: dict[int, tuple[int, int]] = {}
    for port, index, data in rest:
        pid = not_fwd.get(data[14:])
        if pid is not None and pid not in forwarded_wrongly:
            forwarded_wrongly[pid] = (port, index)
            issues.append(Issue("wrong_outcome", pid, by_id[pid].port,
                                _describe(predictions[pid]), f"forward port {port}", port, index))
        else:
            issues.append(Issue("unexpected", None, None, "no output",
                                f"forward port {port}", port, index,
                                detail=f"{len(data)} bytes matching no input"))
    for port, index, _data in duplicates:
        issues.append(Issue("duplicate", None, None, "", f"forward port {port}", port, index,
                            detail="a second copy of an output already matched"))

    # order within each flow, in transmit order
    sent_order = sorted((port, index, pid) for pid, (port, index) in matched.items())
    last_in_flow: dict[tuple[bytes, int], int] = {}
    for port, index, pid in sent_order:
        if expected_of(pid).port != port:
            continue  # already a wrong_port
        key = (flow_of(by_id[pid].data, by_id[pid].port), port)
        if pid < last_in_flow.get(key, -1):
            issues.append(Issue("reordered", pid, by_id[pid].port, f"forward port {port}",
                                f"forward port {port}", port, index,
                                detail=f"sent after packet {last_in_flow[key]} of the same flow"))
        last_in_flow[key] = max(pid, last_in_flow.get(key, -1))

    # account for every input
    reasons = load_reasons()
    totals = dict.fromkeys(CATEGORIES, 0)
    for pkt, out in zip(inputs, predictions, strict=True):
        recs = records.get(pkt.id, [])
        transmitted = pkt.id in matched or pkt.id in forwarded_wrongly
        if len(recs) > 1 or (recs and transmitted):
            got = ", ".join(f"{k} {r}" for k, r in recs)
            if transmitted:
                got = "forwarded and " + got
            issues.append(Issue("conflict", pkt.id, pkt.port, _describe(out), got,
                                detail="more than one disposition"))
            continue
        if pkt.id in forwarded_wrongly:
            continue
        if isinstance(out, Forward):
            if pkt.id in matched:
                continue
            if not recs:
                issues.append(Issue("missing", pkt.id, pkt.port, _describe(out), "nothing"))
            else:
                kind, reason = recs[0]
                lost = kind == "drop" and not reasons.drop(reason).predicted
                issues.append(Issue("lost" if lost else "wrong_outcome", pkt.id, pkt.port,
                                    _describe(out), f"{kind} {reason}"))
            continue
        if not recs:
            issues.append(Issue("missing", pkt.id, pkt.port, _describe(out), "nothing"))
            continue
        kind, reason = recs[0]
        if kind == "drop" and not reasons.drop(reason).predicted:
            issues.append(Issue("lost", pkt.id, pkt.port, _describe(out), f"{kind} {reason}"))
        elif kind != out.kind:
            issues.append(Issue("wrong_outcome", pkt.id, pkt.port, _describe(out),
                                f"{kind} {reason}"))
        elif reason != out.reason:
            issues.append(Issue("wrong_reason", pkt.id, pkt.port, _describe(out),
                                f"{kind} {reason}"))
        else:
            totals["matched_drop" if isinstance(out, Drop) else "matched_exception"] += 1

    flagged = {i.id for i in issues if i.id is not None and i.category != "reordered"}
    for pid in matched:
        if pid not in flagged:
            totals["matched_forward"] += 1
    for issue in issues:
        totals[issue.category] += 1
    issues.sort(key=lambda i: (i.id if i.id is not None else 1 << 62, i.out_port or 0,
                               i.out_index or 0))
    summary = {
        "inputs": len(inputs),
        "outputs": sum(len(v) for v in outputs.values()),
        "predicted_forward": sum(isinstance(o, Forward) for o in predictions),
        "predicted_drop": sum(isinstance(o, Drop) for o in predictions),
        "predicted_exception": sum(isinstance(o, Except) for o in predictions),
        **totals,
    }
    return Report(summary, issues, allow_loss)


def predict(config: RouterConfig, inputs: list[InputPacket]) -> list[Outcome]:
    router = RefRouter(config)
    return [router.process(p.data, p.port) for p in inputs]


def compare_dirs(in_dir: str | Path, out_dir: str | Path, config: RouterConfig,
                 allow_loss: bool = False) -> Report:
    inputs = load_traffic(in_dir)
    return compare(inputs, predict(config, inputs), load_outputs(out_dir),
                   load_dispositions(out_dir, inputs), allow_loss)
