"""Per-packet comparison of what the emulator did against what the oracle predicts.

Inputs: the input packets (ids, ports, bytes), the oracle's outcome for each, the
frames the emulator transmitted per port (in transmit order), and the emulator's
drop/exception records (see `dataset` for the file format).

Matching outputs to inputs. The router may interleave packets from different input
ports on an output port, but packets of one flow (input port, IP protocol, source and
destination address: `oracle.flow_of`) must leave in arrival order. Outputs are matched
in passes, each pass taking only what the
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

Then every input is accounted for: one never transmitted with nothing recorded is
`missing`; one recorded as dropped or excepted is judged by `fate.judge_disposition`,
the policy the router run (`npk run`) shares:

    oracle says   resource drop recorded   any other drop or exception recorded
    forward       lost                     wrong_outcome
    exception     lost                     matched_exception / wrong_reason / wrong_outcome
    drop          dropped_early            matched_drop / wrong_reason / wrong_outcome

(a resource drop: a reason the oracle never gives, such as rbuf_full or queue_full;
matched: the same kind and reason, wrong_reason: the same kind, another reason,
wrong_outcome: another kind).  Packets with more than one disposition are `conflict`.

Categories that are not mismatches: matched_forward, matched_drop, matched_exception,
and `dropped_early` (dropped as the oracle says, but for want of a resource before its
reason could be counted: listed among the issues so it can be seen, never a failure);
`lost` (a packet the oracle forwards or sends to the exception path, dropped for want
of a resource) is reported apart: a capacity problem, not a correctness one, which fails
the comparison unless loss is allowed.

The oracle here is the fast path's alone: it predicts an exception as a record, never
what answers it.  Captures of a run whose control daemon answered exceptions (npkd on
the XScale: its ICMP and ARP frames, the packets it forwards, its control_killed drops;
dispositions.json's `control_plane`, see `dataset`) are not compared: `compare_dirs`
raises `ControlPlaneAnswered`, and `npk run`, which judged that run with the control
plane's model (its `comparison`, `control_plane` and `verdict`), is the judge of them.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .control import KILLED
from .dataset import (
    ControlPlaneRecord,
    Disposition,
    InputPacket,
    load_outputs,
    load_traffic,
    read_dispositions,
)
from .fate import DROPPED_EARLY, LOST, MATCHED_DROP, MATCHED_EXCEPTION, judge_disposition
from .oracle import Drop, Except, Forward, Outcome, RefRouter, flow_of, rewrite
from .packet import ETHERTYPE_IPV4
from .router_config import RouterConfig

OK = ("matched_forward", "matched_drop", "matched_exception")
MISMATCHES = (
    "missing", "wrong_port", "wrong_bytes", "reordered", "duplicate", "unexpected",
    "wrong_outcome", "wrong_reason", "conflict",
)  # fmt: skip
CATEGORIES = OK + (DROPPED_EARLY, LOST) + MISMATCHES
FUZZY_CANDIDATES = 8  # unmatched predictions per flow considered in pass 2
HEAD = 64
FUZZY_MAX_DIFF = 12  # differing bytes in the first HEAD for a 'damaged' match


class ControlPlaneAnswered(Exception):
    """The captures are of a run whose control daemon answered the exception path: the
    fast path's oracle cannot judge them (the module docstring).  `record`: the file's
    control_plane (None when only a control_killed drop shows the daemon)."""

    def __init__(self, out_dir: str | Path, record: ControlPlaneRecord | None) -> None:
        self.out_dir, self.record = Path(out_dir), record
        who = (record.describe() if record is not None
               else f"a control daemon (its dispositions.json records {KILLED} drops)")  # fmt: skip
        super().__init__(
            f"{self.out_dir}: {who} answered the exceptions of the run these captures are from: its ICMP "
            "and ARP frames and the packets it forwarded or dropped are in them. `npk traffic compare` "
            "models the fast path only; `npk run` judged that run with the control plane's model (its "
            "--json: comparison, control_plane, verdict). A router linked with the host stand-in "
            "(npk link ... -D control=host) leaves exceptions to a counter: its captures compare here."
        )


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
        return self.mismatches == 0 and (self.allow_loss or self.totals.get(LOST, 0) == 0)

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
    """Match every output to its input in the passes of the module docstring, then
    account for every input; returns the Report (categories counted, issues listed)."""
    if len(inputs) != len(predictions):
        raise ValueError("one prediction per input packet")
    m = _Matcher(inputs, predictions)
    leftovers = m.match_exact(outputs)
    still, duplicates = m.match_damaged(leftovers)
    rest = m.match_wrong_port(still)
    m.match_not_forwarded(rest, duplicates)
    m.check_order()
    totals = m.account(records)
    m.issues.sort(key=lambda i: (i.id if i.id is not None else 1 << 62, i.out_port or 0,
                                 i.out_index or 0))
    summary = {
        "inputs": len(inputs),
        "outputs": sum(len(v) for v in outputs.values()),
        "predicted_forward": sum(isinstance(o, Forward) for o in predictions),
        "predicted_drop": sum(isinstance(o, Drop) for o in predictions),
        "predicted_exception": sum(isinstance(o, Except) for o in predictions),
        **totals,
    }
    return Report(summary, m.issues, allow_loss)


Output = tuple[int, int, bytes]  # (out port, index on that port, frame)


class _Matcher:
    """The state the comparison passes share: predictions indexed for matching, which
    input each output was matched to, and the issues found."""

    def __init__(self, inputs: list[InputPacket], predictions: list[Outcome]) -> None:
        self.inputs = inputs
        self.predictions = predictions
        self.by_id = {p.id: p for p in inputs}
        self.issues: list[Issue] = []
        self.matched: dict[int, tuple[int, int]] = {}  # packet id -> (out port, out index)
        self.forwarded_wrongly: dict[int, tuple[int, int]] = {}
        # expected forwards, by out port and bytes, and by (in port, out port) flow, in id order
        self.exact: dict[tuple[int, bytes], deque[int]] = defaultdict(deque)
        self.flows: dict[tuple[int, int], list[int]] = defaultdict(list)
        for pkt, out in zip(inputs, predictions, strict=True):
            if isinstance(out, Forward):
                self.exact[(out.port, out.data)].append(pkt.id)
                self.flows[(pkt.port, out.port)].append(pkt.id)
        self.flow_pos = {f: 0 for f in self.flows}  # first possibly-unmatched index per flow

    def expected_of(self, pid: int) -> Forward:
        out = self.predictions[pid]
        assert isinstance(out, Forward)
        return out

    def match_exact(self, outputs: dict[int, list[bytes]]) -> list[Output]:
        """Pass 1: outputs equal to a predicted forward on their port."""
        leftovers: list[Output] = []
        for port in sorted(outputs):
            for index, data in enumerate(outputs[port]):
                queue = self.exact.get((port, data))
                while queue and queue[0] in self.matched:
                    queue.popleft()
                if queue:
                    self.matched[queue.popleft()] = (port, index)
                else:
                    leftovers.append((port, index, data))
        return leftovers

    def _candidates(self, port: int) -> list[int]:
        """The next few unmatched predicted forwards of each flow to `port`."""
        found = []
        for (inp, outp), ids in self.flows.items():
            if outp != port:
                continue
            pos = self.flow_pos[(inp, outp)]
            while pos < len(ids) and ids[pos] in self.matched:
                pos += 1
            self.flow_pos[(inp, outp)] = pos
            n = 0
            for pid in ids[pos:]:
                if pid not in self.matched:
                    found.append(pid)
                    n += 1
                    if n == FUZZY_CANDIDATES:
                        break
        return found

    def match_damaged(self, leftovers: list[Output]) -> tuple[list[Output], list[Output]]:
        """Pass 2: duplicates of matched outputs, and damaged frames on the right port."""
        sent = {(port, self.expected_of(pid).data) for pid, (port, _) in self.matched.items()}
        still: list[Output] = []
        duplicates: list[Output] = []
        for port, index, data in leftovers:
            if (port, data) in sent:
                duplicates.append((port, index, data))
                continue
            best, best_score = None, 1 << 30
            for pid in self._candidates(port):
                score = _score(self.expected_of(pid).data, data)
                if score < best_score:
                    best, best_score = pid, score
            if best is not None and best_score <= FUZZY_MAX_DIFF:
                first, fields, detail = _diff_detail(self.expected_of(best).data, data)
                self.matched[best] = (port, index)
                self.issues.append(Issue("wrong_bytes", best, self.by_id[best].port, f"forward port {port}",
                                         f"forward port {port}", port, index, first, fields, detail))
            else:
                still.append((port, index, data))
        return still, duplicates

    def match_wrong_port(self, still: list[Output]) -> list[Output]:
        """Pass 3: the right packet (IP part) on another port."""
        ip_part: dict[bytes, deque[int]] = defaultdict(deque)
        for pkt, out in zip(self.inputs, self.predictions, strict=True):
            if isinstance(out, Forward) and pkt.id not in self.matched:
                ip_part[out.data[14:]].append(pkt.id)
        rest: list[Output] = []
        for port, index, data in still:
            queue = ip_part.get(data[14:])
            while queue and queue[0] in self.matched:
                queue.popleft()
            if not queue:
                rest.append((port, index, data))
                continue
            pid = queue.popleft()
            exp = self.expected_of(pid)
            self.matched[pid] = (port, index)
            kind = "wrong_port" if exp.port != port else "wrong_bytes"
            first, fields, detail = _diff_detail(exp.data, data)
            self.issues.append(Issue(kind, pid, self.by_id[pid].port, f"forward port {exp.port}",
                                     f"forward port {port}", port, index, first, fields,
                                     detail if kind == "wrong_bytes" else ""))
        return rest

    def match_not_forwarded(self, rest: list[Output], duplicates: list[Output]) -> None:
        """Pass 4: forwarded although the oracle drops or excepts it; then the rest."""
        not_fwd: dict[bytes, int] = {}
        for pkt, out in zip(self.inputs, self.predictions, strict=True):
            if not isinstance(out, Forward) and len(pkt.data) > 34:
                not_fwd.setdefault(pkt.data[14:], pkt.id)
                if (pkt.data[12] << 8 | pkt.data[13]) == ETHERTYPE_IPV4 and pkt.data[22] > 0:
                    not_fwd.setdefault(rewrite(pkt.data, b"\0" * 6, b"\0" * 6)[14:], pkt.id)
        for port, index, data in rest:
            pid = not_fwd.get(data[14:])
            if pid is not None and pid not in self.forwarded_wrongly:
                self.forwarded_wrongly[pid] = (port, index)
                self.issues.append(Issue("wrong_outcome", pid, self.by_id[pid].port,
                                         _describe(self.predictions[pid]), f"forward port {port}", port, index))
            else:
                self.issues.append(Issue("unexpected", None, None, "no output", f"forward port {port}",
                                         port, index, detail=f"{len(data)} bytes matching no input"))
        for port, index, _data in duplicates:
            self.issues.append(Issue("duplicate", None, None, "", f"forward port {port}", port, index,
                                     detail="a second copy of an output already matched"))

    def check_order(self) -> None:
        """Order within each flow, in transmit order."""
        sent_order = sorted((port, index, pid) for pid, (port, index) in self.matched.items())
        last_in_flow: dict[tuple[bytes, int], int] = {}
        for port, index, pid in sent_order:
            if self.expected_of(pid).port != port:
                continue  # already a wrong_port
            key = (flow_of(self.by_id[pid].data, self.by_id[pid].port), port)
            if pid < last_in_flow.get(key, -1):
                self.issues.append(Issue("reordered", pid, self.by_id[pid].port, f"forward port {port}",
                                         f"forward port {port}", port, index,
                                         detail=f"sent after packet {last_in_flow[key]} of the same flow"))
            last_in_flow[key] = max(pid, last_in_flow.get(key, -1))

    def account(self, records: dict[int, list[Disposition]]) -> dict[str, int]:
        """Every input: transmitted, or recorded with the predicted kind and reason."""
        totals = dict.fromkeys(CATEGORIES, 0)
        for pkt, out in zip(self.inputs, self.predictions, strict=True):
            issue = self._account_one(pkt, out, records.get(pkt.id, []))
            if issue is None:
                continue
            if isinstance(issue, str):
                totals[issue] += 1
            else:
                self.issues.append(issue)
        flagged = {i.id for i in self.issues if i.id is not None and i.category != "reordered"}
        totals["matched_forward"] += sum(1 for pid in self.matched if pid not in flagged)
        for issue in self.issues:
            totals[issue.category] += 1
        return totals

    def _account_one(self, pkt: InputPacket, out: Outcome, recs: list[Disposition]) -> Issue | str | None:
        """The issue for one input, a matched category name, or None (nothing to add)."""
        transmitted = pkt.id in self.matched or pkt.id in self.forwarded_wrongly
        if len(recs) > 1 or (recs and transmitted):
            got = ", ".join(f"{k} {r}" for k, r in recs)
            if transmitted:
                got = "forwarded and " + got
            return Issue("conflict", pkt.id, pkt.port, _describe(out), got, detail="more than one disposition")
        if pkt.id in self.forwarded_wrongly or (isinstance(out, Forward) and pkt.id in self.matched):
            return None
        if not recs:
            return Issue("missing", pkt.id, pkt.port, _describe(out), "nothing")
        kind, reason = recs[0]
        category = judge_disposition(out, kind, reason)
        if category in (MATCHED_DROP, MATCHED_EXCEPTION):
            return category
        return Issue(category, pkt.id, pkt.port, _describe(out), f"{kind} {reason}")


def predict(config: RouterConfig, inputs: list[InputPacket]) -> list[Outcome]:
    router = RefRouter(config)
    return [router.process(p.data, p.port) for p in inputs]


def compare_dirs(in_dir: str | Path, out_dir: str | Path, config: RouterConfig,
                 allow_loss: bool = False) -> Report:
    """Compare an emulator run's OUT_DIR with the oracle's predictions for IN_DIR's
    packets, those the run offered (dispositions.json's `offered`: a run shorter than its
    traffic offered only the first).  ControlPlaneAnswered when a control daemon answered
    the run's exceptions (the module docstring); DatasetError for files that do not fit."""
    run = read_dispositions(out_dir)
    record = run.control_plane()
    if record is not None and record.answered:
        raise ControlPlaneAnswered(out_dir, record)
    inputs = load_traffic(in_dir)
    offered = run.offered()
    if offered is not None:
        inputs = inputs[:offered]
    records = run.records(inputs)
    if any(d == ("drop", KILLED) for recs in records.values() for d in recs):
        raise ControlPlaneAnswered(out_dir, record)
    return compare(inputs, predict(config, inputs), load_outputs(out_dir), records, allow_loss)
