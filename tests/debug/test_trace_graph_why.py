"""npk trace (structure vs the run's statistics), npk graph (rendered with dot), npk why."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.toolchain.cli import main
from npkit.toolchain.debug.target import open_target
from npkit.toolchain.debug.trace import BufferMap, record_trace
from npkit.toolchain.graph import build_cfg, cfg_dot

ROOT = Path(__file__).resolve().parents[2]
TTL = ROOT / "examples" / "debug" / "ttl.uc"
PING = ROOT / "examples" / "ring_ping.uc"
PIPELINED = ROOT / "microcode" / "layouts" / "pipelined.yaml"


def test_trace_tracks_spans_and_flows_match_the_run(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    t = open_target(TTL)
    summary = record_trace(t, 5000, 0, None, out, BufferMap(0, 64))
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev if e["ph"] == "M" and "name" in e["args"]}
    assert names[(0, None)] == "ME 0x00 (ttl)"
    assert {names[(0, c)] for c in range(8)} == {f"ctx {c}" for c in range(8)}
    spans: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            spans[(e["pid"], e["tid"])].append((e["args"]["c0"], e["args"]["c1"], e["name"]))
            assert e["dur"] >= 0 and abs(e["ts"] - e["args"]["c0"] / 1400) < 1e-6
    assert set(spans) == {(0, c) for c in range(8)}
    for track in spans.values():
        track.sort()
        for (_a0, a1, _), (b0, _, _) in zip(track, track[1:], strict=False):
            assert a1 <= b0, "spans on one track overlap"
    stats = t.chip.stats()["mes"][0]
    for c in range(8):
        tot = defaultdict(int)
        for a, b, name in spans[(0, c)]:
            tot[name] += b - a
        assert tot["sleeping"] == stats["ctx"][c]["sleep_cycles"]
        assert tot["ready"] == stats["ctx"][c]["ready_cycles"]
        assert tot["executing"] >= stats["ctx"][c]["instructions"]
    # per ME: instructions issued and taken-branch bubbles happen while a context runs; the
    # context-swap stalls partly while the incoming context is still "ready"
    ex_me = sum(b - a for c in range(8) for a, b, name in spans[(0, c)] if name == "executing")
    assert stats["executing_cycles"] + stats["aborted_cycles"] <= ex_me
    assert ex_me <= stats["executing_cycles"] + stats["aborted_cycles"] + stats["stalled_cycles"]
    flows = defaultdict(list)
    for e in ev:
        if e["ph"] in ("s", "f") and e.get("cat") == "mem":
            flows[e["id"]].append(e)
    assert len(flows) == summary["flows"] == 2  # dram read and dram write of context 0
    for pair in flows.values():
        assert [e["ph"] for e in pair] == ["s", "f"] and pair[0]["ts"] <= pair[1]["ts"]
    packet = [e for e in ev if e.get("cat") == "packet"]
    assert [e["ph"] for e in packet] == ["s", "f"] and packet[0]["id"] == "b0.0"
    assert summary["packets"] == 1


def test_trace_window_clips(tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    r = CliRunner().invoke(main, ["trace", str(TTL), "--cycles", "2000", "--from", "100", "--to", "200",
                                  "-o", str(out), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["from"], s["to"]) == (100, 200)
    for e in json.loads(out.read_text())["traceEvents"]:
        if e["ph"] == "X":
            assert 100 <= e["args"]["c0"] <= e["args"]["c1"] <= 200


def _svg(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return root


def _titles(root: ET.Element) -> set[str]:
    return {t.text or "" for t in root.iter() if t.tag.endswith("title")}


def test_graph_cfg_renders_blocks_edges_and_wait_points(tmp_path: Path) -> None:
    from npkit.asm.assembler import assemble

    prog = assemble(PING).program
    _, blocks = build_cfg(prog, [ROOT / "examples"])
    by_start = {b.start: b for b in blocks}
    assert (14, "taken") in by_start[0].succ and (1, "fall") in by_start[0].succ  # br!=ctx[0, idle#]
    assert ("end", "end") in by_start[14].succ  # ctx_arb[kill]
    assert any(dst == 7 and kind == "taken" for dst, kind in by_start[7].succ)  # .repeat loop
    dot = cfg_dot(prog, [ROOT / "examples"])
    assert "(may swap)" in dot and 'label="fall"' in dot
    out = tmp_path / "ping.svg"
    r = CliRunner().invoke(main, ["graph", "cfg", str(PING), "-o", str(out)])
    assert r.exit_code == 0, r.output
    titles = _titles(_svg(out))
    assert {"b0", "b14", "end", "b0->b14", "b0->b1", "b7->b7"} <= titles


def test_graph_cfg_defer_slots_and_jump_targets_hint(tmp_path: Path) -> None:
    src = tmp_path / "j.uc"
    src.write_text(
        ".reg x\n"
        "    immed[x, 0]\n"
        "    beq[two#], defer[1]\n"
        "    alu[x, x, +, 1]\n"
        "    jump[x, one#], targets[one#, two#]\n"
        "one#:\n"
        "    halt\n"
        "two#:\n"
        "    ctx_arb[kill]\n"
    )
    from npkit.asm.assembler import assemble

    prog = assemble(src).program
    _, blocks = build_cfg(prog, [tmp_path])
    by_start = {b.start: b for b in blocks}
    assert by_start[0].end == 2  # the defer slot stays in the branch's block
    assert set(by_start[0].succ) == {(5, "taken"), (3, "fall")}
    assert set(by_start[3].succ) == {(4, "taken"), (5, "taken")}  # from targets[]
    assert "(defer)" in cfg_dot(prog, [tmp_path])


def test_graph_layout_of_the_router(tmp_path: Path) -> None:
    out = tmp_path / "pipelined.svg"
    r = CliRunner().invoke(main, ["graph", "layout", str(PIPELINED), "-o", str(out)])
    assert r.exit_code == 0, r.output
    titles = _titles(_svg(out))
    assert {"blk_parse", "blk_lookup", "ring_exceptions", "xscale", "blk_parse->ring_parse_to_lookup",
            "ring_rx_to_parse->blk_parse", "ring_exceptions->xscale"} <= titles  # fmt: skip


def test_why_reports_reads_writes_and_changed_fields() -> None:
    r = CliRunner().invoke(main, ["why", "0", "--image", str(TTL), "--buffer", "0:64", "--cycles", "5000", "--json"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)
    ops = [(t["op"], t["me"], t["ctx"], t["offset"], t["bytes"]) for t in rep["touches"]]
    assert ops == [("read", 0, 0, 0, 32), ("write", 0, 0, 16, 16)]
    write = rep["touches"][1]
    assert write["changed"] == [[22, 0x40, 0x3F], [24, 0x9C, 0x9D]]
    assert write["fields"] == ["ip ttl", "ip header checksum"]
    assert "ttl.uc:50" in write["at"]
    assert any("ttl 63" in ln and "(ok)" in ln for ln in rep["after"])


def test_why_needs_to_know_where_packets_live() -> None:
    r = CliRunner().invoke(main, ["why", "0", "--image", str(TTL)])
    assert r.exit_code != 0 and "--buffer BASE:SIZE" in r.output


@pytest.mark.parametrize("bad", ["0x10", "a:b"])
def test_trace_rejects_bad_buffer_spec(tmp_path: Path, bad: str) -> None:
    r = CliRunner().invoke(main, ["trace", str(TTL), "--packets", bad, "-o", str(tmp_path / "x.json")])
    assert r.exit_code != 0 and "BASE:SIZE" in r.output


def test_why_in_the_router_parse_reads_and_hdr_format_rewrites() -> None:
    """A linked router (buffers from its system map): parse reads the headers, header format
    rewrites the MACs, the TTL and the checksum of the same buffer."""
    r = CliRunner().invoke(main, ["why", "3", "--image", str(PIPELINED), "--traffic",
                                  str(ROOT / "examples" / "traffic" / "min64.yaml"), "--cycles", "20000",
                                  "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    blocks = [(t["block"], t["op"]) for t in rep["touches"]]
    assert ("parse", "read") in blocks and ("hdr_format", "write") in blocks
    assert blocks.index(("parse", "read")) < blocks.index(("hdr_format", "write"))
    write = next(t for t in rep["touches"] if t["op"] == "write")
    assert {"ip ttl", "ip header checksum", "eth dst", "eth src"} <= set(write["fields"])
    assert any("(ok)" in ln for ln in rep["after"] if ln.strip().startswith("ipv4"))


def test_trace_follows_router_packets_through_the_blocks(tmp_path: Path) -> None:
    """In the router on the MSF, a packet's flow starts where rx receives it into its
    buffer and passes through parse (ME 1) and header format (ME 3) to tx (ME 5)."""
    out = tmp_path / "router.json"
    r = CliRunner().invoke(main, ["trace", str(PIPELINED), "--traffic", str(ROOT / "examples" / "traffic" / "min64.yaml"),
                                  "--cycles", "20000", "-o", str(out), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["packet_buffers"]["size"] == 2048 and summary["packets"] > 10
    flows: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for e in json.loads(out.read_text())["traceEvents"]:
        if e.get("cat") == "packet":
            flows[e["id"]].append((e["ph"], e["pid"]))
    assert len(flows) == summary["packets"]
    for steps in flows.values():
        assert steps[0][0] == "s" and steps[-1][0] == "f" and all(ph == "t" for ph, _ in steps[1:-1])
    full = [steps for steps in flows.values() if [pid for _, pid in steps][0] == 0 and steps[-1][1] == 5]
    assert full, "no packet went from rx to tx"
    assert {1, 3} <= {pid for _, pid in full[0]}


def test_why_by_traffic_id_in_a_reused_buffer() -> None:
    """The pass-through example reuses 8 buffers of 256 bytes; `pkt:20` finds the buffer the
    frame tagged 20 was received into and reports that packet only, up to the next receive
    into the same buffer."""
    r = CliRunner().invoke(main, ["why", "pkt:20", "--image", str(ROOT / "examples" / "passthrough" / "passthrough.uc"),
                                  "--traffic", str(ROOT / "examples" / "traffic" / "min64.yaml"),
                                  "--buffer", "0x100000:256", "--cycles", "100000", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["traffic_id"] == 20 and rep["cycles"] < 100000
    ops = [t["op"].split()[0] for t in rep["touches"]]
    assert ops == ["rbuf_rd", "tbuf_wr"]
    assert len({(t["me"], t["ctx"]) for t in rep["touches"]}) == 1
    assert len({t["gen"] for t in rep["touches"]}) == 1 and rep["touches"][0]["gen"] > 1  # a reused buffer
    assert rep["received"] == rep["after"] and any("ipv4" in ln for ln in rep["after"])


def test_trace_to_a_missing_directory_fails_before_the_run(tmp_path: Path) -> None:
    from npkit.asm.base.writing import OutputError

    out = tmp_path / "no" / "t.json"
    t = open_target(TTL)
    start = t.chip.cycle
    with pytest.raises(OutputError, match=f"cannot write {out}: No such file or directory"):
        record_trace(t, 5000, 0, None, out, BufferMap(0, 64))
    assert t.chip.cycle == start  # checked before the emulation, not after it
    r = CliRunner().invoke(main, ["trace", str(TTL), "--cycles", "100", "-o", str(out)])
    assert r.exit_code == 1 and r.output == f"Error: cannot write {out}: No such file or directory\n"


@pytest.mark.parametrize("name", ["x.dot", "x.svg"])
def test_graph_cfg_to_a_missing_directory_is_one_clean_error(tmp_path: Path, name: str) -> None:
    out = tmp_path / "no" / name
    r = CliRunner().invoke(main, ["graph", "cfg", str(PING), "-o", str(out)])
    assert r.exit_code == 1 and r.output == f"Error: cannot write {out}: No such file or directory\n"
    assert not out.parent.exists()


@pytest.mark.parametrize(("buffer", "message"), [
    ("0:0", "Invalid value for '--buffer': SIZE must be >= 1 byte, got 0"),
    ("0x3fffff0:64", "--buffer: [0x3fffff0, +64) is outside DRAM (0x0..0x3ffffff)"),
    ("1:2:3", "Invalid value for '--buffer': expected BASE:SIZE (two integers), got '1:2:3'"),
])  # fmt: skip
def test_why_checks_the_buffer_range_before_running(buffer: str, message: str) -> None:
    """A --buffer the chip cannot hold is the command's usage error (exit 2), as in
    run.json it is the file's (exit 1, below)."""
    r = CliRunner().invoke(main, ["why", "0", "--image", str(TTL), "--buffer", buffer])
    assert r.exit_code == 2 and r.exception is not None and isinstance(r.exception, SystemExit), r.output
    assert f"Error: {message}" in r.stderr and "Traceback" not in r.output


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "run.json:1: (top level): expected a mapping (key: value ...), got a list"),
    ('{"image": "ttl.uc",\n "cycles": "abc"}', "run.json:2: cycles: expected an integer, got 'abc'"),
    ('{"image": "ttl.uc",\n "cycles": -100}', "run.json:2: cycles: must be in 0..2^40, got -100"),
    ('{"image": "ttl.uc",\n\n "colour": 1}', "run.json:3: colour: unknown key (allowed: image, config,"),
    ('{"image": "ttl.uc",\n "buffer": "0:0"}', "run.json:2: buffer: SIZE must be >= 1 byte, got 0"),
    ('{"cycles": 5}', "run.json:1: image: missing (required)"),
])  # fmt: skip
def test_why_checks_run_json_against_its_schema(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "run.json").write_text(text)
    r = CliRunner().invoke(main, ["why", "0", "--run", str(tmp_path)])
    assert r.exit_code == 1 and f"{tmp_path}/{message}" in r.stderr, r.output
    assert "Traceback" not in r.output


def test_why_blames_a_bad_buffer_in_run_json_on_the_file(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"image": str(TTL), "buffer": "0x3fffff0:64"}))
    r = CliRunner().invoke(main, ["why", "0", "--run", str(tmp_path)])
    assert r.exit_code == 1 and f"{tmp_path}/run.json: buffer: [0x3fffff0, +64) is outside DRAM" in r.stderr
    assert "--buffer" not in r.stderr


def test_why_by_traffic_id_of_a_frame_loaded_with_the_image() -> None:
    """ttl.uc's .init frame carries the traffic tag of packet 7: it was in the buffer from
    the load, not received, so `before` is the buffer as loaded (TTL 64), not empty."""
    r = CliRunner().invoke(main, ["why", "pkt:7", "--image", str(TTL), "--buffer", "0:64", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["traffic_id"] == 7 and rep["packet_id"] == 0
    assert any("ttl 64" in ln for ln in rep["before"]) and any("ttl 63" in ln for ln in rep["after"])
    r = CliRunner().invoke(main, ["why", "pkt:-1", "--image", str(TTL), "--buffer", "0:64"])
    assert r.exit_code == 1 and "a traffic packet id is 0..0xffffffff, got -1" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--cycles", "1000", "--from", "100", "--to", "50"], "empty window: --from 100 must not be after --to 50"),
    (["--cycles", "-5"], "Invalid value for '--cycles': -5 is not in the range 0<=x<=1000000000000000"),
    (["--from", "-1"], "Invalid value for '--from': -1 is not in the range 0<=x<=1000000000000000"),
])  # fmt: skip
def test_trace_checks_its_window_before_running(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "t.json"
    r = CliRunner().invoke(main, ["trace", str(TTL), *args, "-o", str(out)])
    assert r.exit_code == 2 and message in r.stderr, r.output
    assert not out.exists()


def test_trace_window_api_checks() -> None:
    from npkit.toolchain.debug.trace import TraceError, check_window

    check_window(0, 5, 5)  # one cycle
    with pytest.raises(TraceError, match="--cycles must be >= 0, got -5"):
        check_window(-5, 0, None)
    with pytest.raises(TraceError, match="--from 100 must not be after --to 50"):
        check_window(1000, 100, 50)


@pytest.mark.parametrize(("packets", "message"), [
    ("0x100000:2048:0", "expected BASE:SIZE[:COUNT] with BASE >= 0 and COUNT >= 1, got '0x100000:2048:0'"),
    ("-1:2048", "with BASE >= 0 and COUNT >= 1, got '-1:2048'"),
    ("0xffffffff:2048:4", "--packets: buffers [0xffffffff, 0x100001fff) run past DRAM (0x0..0x3ffffff)"),
])  # fmt: skip
def test_trace_refuses_packet_buffers_it_cannot_follow(tmp_path: Path, packets: str, message: str) -> None:
    """They were taken as given: a trace that follows no packet, and says nothing."""
    r = CliRunner().invoke(main, ["trace", str(TTL), "--cycles", "100", "--packets", packets,
                                  "-o", str(tmp_path / "t.json")])  # fmt: skip
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["trace", str(TTL), "--cycles", str(10**20), "-o", "t.json"], "is not in the range 0<=x<=1000000000000000"),
    (["trace", str(TTL), "--me", "0,0", "-o", "t.json"], "ME list '0,0' names ME 0x00 twice"),
    (["debug", str(PIPELINED), "-D", "=4", "--batch", "/dev/null"], "-D =4: expected NAME=VALUE (a layout parameter)"),
    (["debug", str(TTL), "-D", "=4", "--batch", "/dev/null"], "-D =4: expected NAME or NAME=VALUE (a preprocessor"),
    (["debug", str(PIPELINED), "--me", "0", "--batch", "/dev/null"], "--me: a layout names its blocks' MEs"),
    (["why", "0"], "name the run: --run DIR, or --image IMAGE"),
    (["why", "0", "--image", str(TTL), "--cycles", str(10**20)], "is not in the range"),
])  # fmt: skip
def test_debug_trace_why_usage_errors_exit_2(args: list[str], message: str) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and message in r.output, r.output


def test_trace_does_not_write_over_its_image(tmp_path: Path) -> None:
    src = tmp_path / "ttl.uc"
    src.write_bytes(TTL.read_bytes())
    r = CliRunner().invoke(main, ["trace", str(src), "--cycles", "100", "-o", str(src)])
    assert r.exit_code == 2 and "-o is also the input IMAGE: writing it would destroy it" in r.output, r.output
    assert src.read_bytes() == TTL.read_bytes()
