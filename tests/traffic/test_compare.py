"""The comparator finds each kind of disagreement, and only those."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from npkit.emulator.traffic.compare import Report, compare, diff_bytes, field_name, predict
from npkit.emulator.traffic.control import KILLED
from npkit.emulator.traffic.dataset import (
    DISPOSITIONS,
    DatasetError,
    Disposition,
    InputPacket,
    load_control_plane,
    parse_control_plane,
    parse_dispositions,
    write_dispositions_json,
)
from npkit.emulator.traffic.generator import generate
from npkit.emulator.traffic.oracle import Forward, Outcome
from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.spec import spec_from_dict

from .conftest import EXAMPLES, ROUTER_YAML

Outputs = dict[int, list[bytes]]
Records = dict[int, list[Disposition]]
World = tuple[list[InputPacket], list[Outcome]]


@pytest.fixture(scope="module")
def world(config: RouterConfig) -> World:
    spec = spec_from_dict({"seed": 5, "router": str(ROUTER_YAML), "count": 60, "defaults": {
        "size": {"uniform": [64, 200]}, "mix": {"miss": 0.1, "bad_checksum": 0.1,
                                                "ttl_expiring": 0.05}}}, EXAMPLES)
    inputs = [InputPacket(p.id, p.port, i, p.time_ns, p.data, p.kind)
              for i, p in enumerate(generate(spec))]
    return inputs, predict(config, inputs)


def _data(outcome: Outcome) -> bytes:
    assert isinstance(outcome, Forward)
    return outcome.data


def ideal(world: World) -> tuple[Outputs, Records]:
    """What a correct emulator produces: forwards in arrival order, every disposition."""
    inputs, outcomes = world
    outputs: Outputs = {p: [] for p in range(5)}
    records: Records = {}
    for pkt, out in zip(inputs, outcomes, strict=True):
        if isinstance(out, Forward):
            outputs[out.port].append(out.data)
        else:
            records[pkt.id] = [(out.kind, out.reason)]
    return outputs, records


def run(world: World, outputs: Outputs, records: Records, **kw: bool) -> Report:
    return compare(world[0], world[1], outputs, records, **kw)


def test_a_correct_run_matches_everything(world: World) -> None:
    outputs, records = ideal(world)
    report = run(world, outputs, records)
    t = report.totals
    assert report.ok and report.issues == []
    assert t["matched_forward"] == t["predicted_forward"] > 100
    assert t["matched_drop"] == t["predicted_drop"] > 10
    assert t["matched_exception"] == t["predicted_exception"] > 10


def test_interleaving_between_flows_is_allowed(world: World) -> None:
    outputs, records = ideal(world)
    inputs, outcomes = world
    port = 1
    # reverse the order of flows: all of input port 4's packets first, then 3's, ...
    order = sorted((-inputs[i].port, i) for i, o in enumerate(outcomes)
                   if isinstance(o, Forward) and o.port == port)
    outputs[port] = [_data(outcomes[i]) for _, i in order]
    assert run(world, outputs, records).ok


def test_corrupted_ttl_is_wrong_bytes_at_the_ttl(world: World) -> None:
    outputs, records = ideal(world)
    bad = bytearray(outputs[2][3])
    bad[22] -= 1
    outputs[2][3] = bytes(bad)
    report = run(world, outputs, records)
    assert not report.ok and report.totals["wrong_bytes"] == 1 and report.mismatches == 1
    issue = report.issues[0]
    assert (issue.category, issue.out_port, issue.out_index, issue.offset) == (
        "wrong_bytes", 2, 3, 22)
    assert issue.fields == ["IPv4 TTL"]
    assert "IPv4 TTL" in report.render()


def test_missing_packet(world: World) -> None:
    outputs, records = ideal(world)
    inputs, outcomes = world
    gone = outputs[3].pop(5)
    pid = next(i for i, o in enumerate(outcomes) if isinstance(o, Forward) and o.data == gone)
    report = run(world, outputs, records)
    assert report.totals["missing"] == 1 and report.mismatches == 1
    assert report.issues[0].id == pid and report.issues[0].expected == "forward port 3"


def test_wrong_port(world: World) -> None:
    outputs, records = ideal(world)
    moved = outputs[0].pop(2)
    outputs[4].insert(0, moved)
    report = run(world, outputs, records)
    assert report.totals["wrong_port"] == 1 and report.mismatches == 1
    issue = report.issues[0]
    assert (issue.expected, issue.got) == ("forward port 0", "forward port 4")


def test_wrong_port_with_rewritten_macs(world: World) -> None:
    """A lookup bug sends a packet out of the wrong port with that port's MACs."""
    outputs, records = ideal(world)
    moved = bytearray(outputs[0].pop(2))
    moved[0:12] = b"\x02" * 12
    outputs[4].append(bytes(moved))
    report = run(world, outputs, records)
    assert report.totals["wrong_port"] == 1 and report.mismatches == 1


def test_reason_and_outcome_mismatches(world: World) -> None:
    outputs, records = ideal(world)
    inputs, outcomes = world
    drop_id = next(i for i, o in enumerate(outcomes) if o.kind == "drop")
    exc_id = next(i for i, o in enumerate(outcomes) if o.kind == "exception")
    records[drop_id] = [("drop", "bad_ihl")]
    records[exc_id] = [("drop", "bad_version")]
    report = run(world, outputs, records)
    cats = {i.id: i.category for i in report.issues}
    assert cats == {drop_id: "wrong_reason", exc_id: "wrong_outcome"}


def test_resource_drop_is_lost_not_a_mismatch(world: World) -> None:
    outputs, records = ideal(world)
    inputs, outcomes = world
    pid = next(i for i, o in enumerate(outcomes) if isinstance(o, Forward) and o.port == 1)
    outputs[1].remove(_data(outcomes[pid]))
    records[pid] = [("drop", "queue_full")]
    report = run(world, outputs, records)
    assert report.totals["lost"] == 1 and report.mismatches == 0
    assert not report.ok and run(world, outputs, records, allow_loss=True).ok


# the policy both judges follow (npkit.emulator.traffic.fate), written out: a resource
# drop of a packet the oracle forwards or excepts is loss, of one it drops is not
RESOURCE_ROWS = [("forward", "rbuf_full", "lost"), ("exception", "no_rx_thread", "lost"),
                 ("drop", "queue_full", "dropped_early")]  # fmt: skip


@pytest.mark.parametrize(("predicted", "reason", "category"), RESOURCE_ROWS)
def test_a_resource_drop_is_judged_by_what_the_oracle_does(world: World, predicted: str, reason: str,
                                                           category: str) -> None:  # fmt: skip
    """One row of the table a router run (`npk run`) follows too: `lost` fails the
    comparison unless loss is allowed; `dropped_early` (the oracle drops the packet
    anyway) is neither loss nor a mismatch, and is listed, in JSON and text."""
    outputs, records = ideal(world)
    inputs, outcomes = world
    pid = next(i for i, o in enumerate(outcomes) if o.kind == predicted)
    if predicted == "forward":
        outputs[_port(outcomes[pid])].remove(_data(outcomes[pid]))
    records[pid] = [("drop", reason)]
    report = run(world, outputs, records)
    assert [(i.category, i.id, i.got) for i in report.issues] == [(category, pid, f"drop {reason}")]
    t = report.totals
    assert t[category] == 1 and report.mismatches == 0
    assert t["lost" if category != "lost" else "dropped_early"] == 0
    assert t["matched_" + predicted] == t["predicted_" + predicted] - 1
    assert report.ok is (category != "lost")
    assert run(world, outputs, records, allow_loss=True).ok
    js = report.to_json()
    assert js["totals"][category] == 1 and js["ok"] is report.ok
    assert js["issues"][0]["category"] == category and js["issues"][0]["id"] == pid
    text = report.render()
    assert f"{category} 1" in text and f"packet {pid} " in text
    assert text.splitlines()[-1] == ("OK" if category != "lost" else "FAIL: 0 mismatches, 1 lost")


def _port(outcome: Outcome) -> int:
    assert isinstance(outcome, Forward)
    return outcome.port


def test_forwarding_a_packet_that_must_be_dropped(world: World) -> None:
    outputs, records = ideal(world)
    inputs, outcomes = world
    pid = next(i for i, o in enumerate(outcomes) if o.reason == "ttl_expired")
    del records[pid]
    outputs[0].append(inputs[pid].data)
    report = run(world, outputs, records)
    assert [(i.category, i.id) for i in report.issues] == [("wrong_outcome", pid)]


def test_unexpected_duplicate_reordered_conflict(world: World, config: RouterConfig) -> None:
    inputs, outcomes = world
    # a later packet of the same flow as a forwarded one (input port, protocol, addresses):
    # the same frame with the last payload byte changed
    x = next(i for i, o in enumerate(outcomes) if isinstance(o, Forward) and o.port == 3 and inputs[i].port == 1)
    data = inputs[x].data[:-1] + bytes([inputs[x].data[-1] ^ 0xFF])
    index = sum(1 for p in inputs if p.port == 1)
    twin = InputPacket(len(inputs), 1, index, inputs[-1].time_ns + 1000, data, "normal")
    world = ([*inputs, twin], predict(config, [*inputs, twin]))
    inputs, outcomes = world
    outputs, records = ideal(world)
    outputs[2].append(b"\x00" * 200)  # nothing like any input
    outputs[2].append(outputs[2][0])  # a second copy
    a, b = (outputs[3].index(_data(outcomes[i])) for i in (x, twin.id))
    outputs[3][a], outputs[3][b] = outputs[3][b], outputs[3][a]  # the flow leaves out of order
    drop_id = next(i for i, o in enumerate(outcomes) if o.kind == "drop")
    records[drop_id].append(("exception", "no_route"))
    report = run(world, outputs, records)
    t = report.totals
    assert (t["unexpected"], t["duplicate"], t["reordered"], t["conflict"]) == (1, 1, 1, 1)
    assert report.mismatches == 4


def test_field_names() -> None:
    from npkit.emulator.traffic.packet import ETHERTYPE_IPV4, TCP, Ethernet, IPv4, ipv4_frame

    frame = ipv4_frame(Ethernet(b"\x02" * 6, b"\x04" * 6, ETHERTYPE_IPV4),
                       IPv4(1, 2, 6, options=b"\x01\x01\x01\x01"), TCP(1, 2), b"xyz")
    names = {off: field_name(frame, off) for off in (0, 6, 12, 14, 22, 24, 26, 30, 34, 38,
                                                     42, 50, 58, 60)}
    assert names == {0: "Ethernet dst", 6: "Ethernet src", 12: "EtherType",
                     14: "IPv4 version/IHL", 22: "IPv4 TTL", 24: "IPv4 header checksum",
                     26: "IPv4 source", 30: "IPv4 destination", 34: "IPv4 options",
                     38: "TCP source port", 42: "TCP sequence", 50: "TCP offset/flags",
                     58: "payload", 60: "payload"}
    assert diff_bytes(b"abc", b"abd") == (2, ["Ethernet dst"])


def test_dispositions_by_id_or_port_index(world: World) -> None:
    inputs, _ = world
    p = inputs[7]
    recs = parse_dispositions({"drops": [{"port": p.port, "index": p.index, "reason": 9}],
                               "exceptions": [{"id": 3, "reason": "no_route"}]}, inputs)
    assert recs == {7: [("drop", "bad_checksum")], 3: [("exception", "no_route")]}
    with pytest.raises(DatasetError, match="unknown drop"):
        parse_dispositions({"drops": [{"id": 1, "reason": "nope"}]}, inputs)
    with pytest.raises(DatasetError, match="no input packet"):
        parse_dispositions({"drops": [{"id": 10**6, "reason": 9}]}, inputs)


def test_dispositions_json_names_the_control_plane_that_answered(tmp_path: Path) -> None:
    """dispositions.json's `control_plane` as a run writes it and as compare reads it: a
    daemon with exceptions to answer is one compare refuses; none, or one that had none
    (the fast path sent it nothing), leaves the captures to compare."""
    cp = {"program": "npkd", "placement": "gpe", "exceptions": 3,
          "events": [{"t_ns": 250_000, "event": "killed"}, {"t_ns": 400_000, "event": "restarted"}]}  # fmt: skip
    drops, excs = [(1, "bad_checksum"), (4, KILLED)], [(2, "no_route")]
    for record in (cp, None):
        buf = io.StringIO()
        write_dispositions_json(buf, 6, iter(drops), iter(excs), record)
        want = {"offered": 6, **({"control_plane": record} if record else {}),
                "drops": [{"id": i, "reason": r} for i, r in drops],
                "exceptions": [{"id": i, "reason": r} for i, r in excs]}  # fmt: skip
        assert buf.getvalue() == json.dumps(want, indent=1) + "\n"
        (tmp_path / DISPOSITIONS).write_text(buf.getvalue())
        got = load_control_plane(tmp_path)
        assert (got.to_json() if got else None) == record
    rec = parse_control_plane({"control_plane": cp})
    assert rec is not None and rec.answered
    assert rec.describe() == "npkd on the gpe (3 exceptions sent to it; killed at 0.25 ms, restarted at 0.4 ms)"
    none = parse_control_plane({"control_plane": {**cp, "exceptions": 0}})
    assert none is not None and not none.answered
    assert parse_control_plane({"control_plane": None}) is None
    for bad, says in (("npkd", "expected an object"), ({**cp, "exceptions": -1}, "'exceptions' must be a count"),
                      ({**cp, "events": [{"t_ns": "soon"}]}, "events[0]: needs 't_ns'")):  # fmt: skip
        with pytest.raises(DatasetError, match=re.escape(says)):
            parse_control_plane({"control_plane": bad}, "out/dispositions.json")


def test_the_control_planes_drop_reason_is_known_only_as_a_drop(world: World) -> None:
    inputs, _ = world
    assert parse_dispositions({"drops": [{"id": 2, "reason": KILLED}]}, inputs) == {2: [("drop", KILLED)]}
    with pytest.raises(DatasetError, match="unknown exception reason 'control_killed'"):
        parse_dispositions({"exceptions": [{"id": 2, "reason": KILLED}]}, inputs)
    with pytest.raises(DatasetError, match="unknown drop reason 'made_up'"):
        parse_dispositions({"drops": [{"id": 2, "reason": "made_up"}]}, inputs)
