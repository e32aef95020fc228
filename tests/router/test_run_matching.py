"""`npk run` on hand-made pcaps: frames matched to their input packets and drop reasons
judged as `npk traffic compare` judges them (qa_ana items 4 and 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npkit.emulator.traffic.pcap import read_pcap, write_pcap

from .test_ci_policy import MIN64, ROUTER, npk


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A linked router and the first frame of a generated pcap (it carries tag id 0)."""
    d = tmp_path_factory.mktemp("run_matching")
    assert npk("link", "pipelined", "-o", d / "router.elf")[0] == 0
    assert npk("traffic", "gen", MIN64, "-o", d / "gen")[0] == 0
    return d / "router.elf", read_pcap(d / "gen" / "port0.pcap")[0].data


def _run(elf: Path, tmp: Path, frames: list[bytes]) -> tuple[int, dict, Path]:
    inp, out = tmp / "in", tmp / "out"
    inp.mkdir()
    write_pcap(inp / "port0.pcap", [(1000 + 4000 * k, f) for k, f in enumerate(frames)])
    code, text = npk("run", elf, "--traffic", inp, "--duration-ms", "0.05", "--capture", out, "--json")
    return code, json.loads(text), inp


@pytest.mark.parametrize("edit", [False, True])
def test_a_repeated_tagged_frame_is_matched_by_its_bytes(setup: tuple[Path, bytes], tmp_path: Path,
                                                         edit: bool) -> None:  # fmt: skip
    """The copy carries the first frame's tag: it was counted as a duplicate of packet 0,
    packet 1 as stuck in flight and 50 % loss, although both frames left."""
    elf, frame = setup
    copy = frame[:-1] + bytes([frame[-1] ^ 0xFF]) if edit else frame
    code, s, _ = _run(elf, tmp_path, [frame, copy])
    t = s["totals"]
    assert t["offered"] == 2 and t["forwarded"] == 2 and t["transmitted"] == 2, t
    assert s["comparison"]["duplicates"] == 0 and s["comparison"]["matched_forward"] == 2, s["comparison"]
    assert s["in_flight"]["count"] == 0 and t["lost"] == 0
    assert code == 0 and s["verdict"] == {"ok": True, "reasons": []}, s["verdict"]


@pytest.mark.parametrize("size", [1515, 8192, 8193, 9000])
def test_oversize_frames_are_dropped_as_the_oracle_says(setup: tuple[Path, bytes], tmp_path: Path,
                                                        size: int) -> None:  # fmt: skip
    """Over 8192 B the frame needs more RBUF elements than there are: it was dropped
    rbuf_full (and passed the run) while `traffic compare` expected oversize_frame."""
    elf, frame = setup
    big = frame + bytes(size - len(frame))
    code, s, inp = _run(elf, tmp_path, [big])
    assert s["totals"]["dropped"] == {"oversize_frame": 1}, s["totals"]
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    code, text = npk("traffic", "compare", inp, tmp_path / "out", "--config", ROUTER)
    assert code == 0 and "matched_drop 1" in text, text


def test_a_drop_for_a_reason_the_oracle_does_not_give_fails_the_run(setup: tuple[Path, bytes]) -> None:
    """The run judges a predicted drop reason against the oracle (wrong_reason /
    wrong_outcome), as `traffic compare` does."""
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.emulator.traffic_run import DROPPED
    from npkit.toolchain.system.router_run import RouterRun
    from npkit.toolchain.system.verdict import Policy, judge

    tr = load_traffic_source(MIN64, 20_000).collect()
    rr = RouterRun.link("pipelined", {}, tr)
    rr.run.run(5_000)  # every packet pushed and judged by the oracle, the last not yet arrived
    last = rr.run.pushed - 1
    rr.run.mark(last, DROPPED, "rbuf_full")  # a resource: loss, not a mismatch
    assert "wrong_outcome" not in rr.compare()
    rr.run.mark(last - 1, DROPPED, "bad_checksum")  # the oracle forwards it
    assert rr.compare()["wrong_outcome"] == 1
    rr.run_traffic(20_000)
    rr.drain()
    verdict = judge(rr.summary(), Policy(max_loss_pct=None))
    assert any(r.startswith("oracle: wrong_outcome") for r in verdict["reasons"]), verdict


def test_an_exception_record_is_judged_as_traffic_compare_judges_it() -> None:
    """The host's exception reader: a packet the oracle forwards, excepted, is a
    wrong_outcome (as in `traffic compare`, npkit.emulator.traffic.fate); it was counted
    a wrong_reason."""
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.router_run import RouterRun

    tr = load_traffic_source(MIN64, 20_000).collect()
    rr = RouterRun.link("pipelined", {"control": "host"}, tr)
    assert rr.reader is not None
    judged: list[tuple[int, str]] = []
    rr.on_judged.append(lambda pid, category: judged.append((pid, category)))
    rr.run.run(5_000)
    last = rr.run.pushed - 1  # forwarded by the oracle, not yet arrived
    rr.reader.on_record(last, "ttl_expired")
    assert judged == [(last, "wrong_outcome")]
    assert rr.compare()["wrong_outcome"] == 1 and "wrong_reason" not in rr.compare()
