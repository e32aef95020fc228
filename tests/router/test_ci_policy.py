"""What CI relies on (issue: trustworthy in CI): a linked router image runs the same under
`npk run` as under `npk demo`; its captures pass `npk traffic compare`; runs that lose,
corrupt or strand packets exit 1 and say why in their JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
MIN64 = ROOT / "examples" / "traffic" / "min64.yaml"
ROUTER = ROOT / "examples" / "traffic" / "router.yaml"


def npk(*args: object) -> tuple[int, str]:
    """Exit code and standard output (the JSON, with --json) of an npk command."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout if "--json" in args else res.output


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
def test_linked_router_runs_under_npk_run_and_matches_the_oracle(tmp_path: Path, layout: str) -> None:
    elf, inp, out = tmp_path / "router.elf", tmp_path / "in", tmp_path / "out"
    assert npk("link", layout, "-o", elf)[0] == 0
    assert npk("traffic", "gen", MIN64, "-o", inp)[0] == 0
    code, text = npk("run", elf, "--traffic", inp, "--duration-ms", "0.2", "--capture", out, "--json")
    assert code == 0, text
    s = json.loads(text)
    t = s["totals"]
    # before one loader: 0 of 1,490 forwarded, all "in flight", and still exit 0
    assert t["offered"] == 1490 and t["forwarded"] == 1490 == t["predicted_forward"], t
    assert s["in_flight"]["count"] == 0 and s["drain"]["idle"], s["in_flight"]
    assert s["verdict"] == {"ok": True, "reasons": []}
    assert s["comparison"]["matched_forward"] == 1490
    # npkd ran beside the fast path, which sent it nothing to answer: compare judges these
    # captures (tests/router/test_compare_control_plane.py: one that had something to answer)
    cp = json.loads((out / "dispositions.json").read_text())["control_plane"]
    assert cp == {"program": "npkd", "placement": "xscale", "exceptions": 0, "events": []}
    code, text = npk("traffic", "compare", inp, out, "--config", ROUTER)
    assert code == 0 and "OK" in text, text


def test_two_block_layout_halts_under_npk_run(tmp_path: Path) -> None:
    """ring_ping / ring_pong as a layout: they halted under `npk debug` but spun forever
    under `npk run`, whose loader did not configure the layout's rings."""
    elf = tmp_path / "pp.elf"
    assert npk("link", ROOT / "examples" / "ring_pingpong.yaml", "-o", elf)[0] == 0
    code, text = npk("run", elf, "--cycles", "100000", "--json")
    assert code == 0, text
    status = {m["program"]: m["status"] for m in json.loads(text)["mes"]}
    assert status["ping"] == "halt" and status["pong"] == "halt", status


def test_no_drain_reports_packets_in_flight_and_fails(tmp_path: Path) -> None:
    elf = tmp_path / "router.elf"
    assert npk("link", "pipelined", "-o", elf)[0] == 0
    code, text = npk("run", elf, "--traffic", MIN64, "--duration-ms", "0.05", "--no-drain", "--json")
    s = json.loads(text)
    flight = s["in_flight"]
    assert code == 1 and flight["count"] > 0, flight
    assert "without a drain" in flight["why"] and "where" in flight
    where = flight["where"]
    assert where["buffers_in_use"] + sum(where["msf"].values()) > 0
    assert any("in flight" in r for r in s["verdict"]["reasons"])


def _demo(*args: str) -> tuple[int, dict]:
    code, text = npk("demo", "--ms", "1", "--json", *args)
    return code, json.loads(text)


def test_demo_exits_1_when_the_pool_is_too_small() -> None:
    code, s = _demo("--layout", "parallel", "-D", "pool_mes=1")
    assert code == 1
    assert s["verdict"]["ok"] is False and s["totals"]["loss_pct"] > 5
    assert any(r.startswith("loss ") for r in s["verdict"]["reasons"]), s["verdict"]
    # the same run passes when loss is allowed: only correctness is judged then
    code, s = _demo("--layout", "parallel", "-D", "pool_mes=1", "--max-loss", "100")
    assert code == 0 and s["verdict"]["ok"], s["verdict"]


def test_demo_min_line_rate() -> None:
    code, s = _demo("--min-line-rate", "99.99")
    # 1 ms holds the pipeline's fill time: the output is below 99.99 % of line rate
    assert code == 1 and s["throughput"]["pct_line_rate"] < 99.99
    assert any("line rate" in r for r in s["verdict"]["reasons"])


def test_demo_imix_frames_too_short_for_the_tag_are_judged() -> None:
    """IMIX's 40-byte packets cannot carry the whole tag: they are identified by their
    bytes and judged by the oracle like the others (counted as untagged, not failed)."""
    code, s = _demo("--traffic", str(ROOT / "examples" / "traffic" / "imix.yaml"))
    cmp_ = s["comparison"]
    assert code == 0, s["verdict"]
    assert cmp_["untagged"] > 50 and cmp_["matched_forward"] == s["totals"]["forwarded"]


HDR_FORMAT = ROOT / "microcode" / "hdr_format"


def _layout_with_hdr_format(tmp_path: Path, uc: str, h: str) -> Path:
    """The pipelined layout with hdr_format built from these sources (in tmp_path)."""
    (tmp_path / "hdr_format.uc").write_text(uc)
    (tmp_path / "hdr_format.h").write_text(h)
    lay = yaml.safe_load((ROOT / "microcode" / "layouts" / "pipelined.yaml").read_text())
    lay["blocks"]["hdr_format"]["source"] = str(tmp_path / "hdr_format.uc")
    (tmp_path / "layout.yaml").write_text(yaml.safe_dump(lay))
    return tmp_path / "layout.yaml"


def _broken_ttl_layout(tmp_path: Path) -> Path:
    """A hdr_format that takes 2 off the TTL."""
    h = (HDR_FORMAT / "hdr_format.h").read_text()
    assert h.count("immed[u, 0x100]") == 1  # the TTL - 1 of the rewrite
    return _layout_with_hdr_format(tmp_path, (HDR_FORMAT / "hdr_format.uc").read_text(),
                                   h.replace("immed[u, 0x100]", "immed[u, 0x200]"))  # fmt: skip


def test_demo_exits_1_on_wrong_bytes(tmp_path: Path) -> None:
    """Every frame the fast path forwards has its bytes wrong, and the run fails."""
    code, s = _demo("--layout", str(_broken_ttl_layout(tmp_path)))
    assert code == 1
    cmp_ = s["comparison"]
    assert cmp_["wrong_bytes"] == s["totals"]["forwarded"] > 0 and not cmp_.get("matched_forward")
    assert any(r.startswith("oracle: wrong_bytes") for r in s["verdict"]["reasons"]), s["verdict"]


def test_wrong_bytes_in_frames_too_short_for_the_tag_fail_the_run(tmp_path: Path) -> None:
    code, s = _demo("--layout", str(_broken_ttl_layout(tmp_path)), "--traffic",
                    str(ROOT / "examples" / "traffic" / "imix.yaml"))  # fmt: skip
    cmp_ = s["comparison"]
    assert code == 1 and cmp_["untagged"] > 50
    # all the fast path's frames wrong, those too short for the tag included; the
    # control plane's (IP options) leave through the qm, past hdr_format
    assert cmp_["wrong_bytes"] >= cmp_["untagged"]
    assert cmp_["wrong_bytes"] + cmp_.get("matched_forward", 0) == s["totals"]["forwarded"]
    assert s["control_plane"]["packets_forwarded_by_it"] == cmp_.get("matched_forward", 0)


def test_demo_knobs_seed_config_and_dotted_defines() -> None:
    code, a = _demo("--seed", "7", "-D", "qm.qlimit=64", "-D", "qm.quanta=2", "-D", "parse.threads=4")
    assert code == 0, a["verdict"]
    assert a["traffic"]["seed"] == 7 and a["throughput"]["tx_mbps"] > 4000
    code, b = _demo("--seed", "8")
    assert code == 0
    assert a["totals"]["offered"] != b["totals"]["offered"] or a["latency_us"] != b["latency_us"]
    code, text = npk("demo", "--ms", "1", "-D", "qm.nonsense=1")
    assert code == 1 and "qm has no key 'nonsense'" in text


def test_demo_chip_config_file(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ROOT / "emulator" / "configs" / "ixp2800.yaml").read_text())
    cfg["units"]["sram"]["read_latency"] = 2 * int(cfg["units"]["sram"]["read_latency"])
    path = tmp_path / "slow_sram.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, slow = _demo("--config", str(path))
    code2, fast = _demo()
    assert code == 0 == code2
    assert slow["latency_us"]["mean"] > fast["latency_us"]["mean"]


def test_files_written_by_one_npk_process_are_whole_for_the_next(tmp_path: Path) -> None:
    """CI chains separate `npk` processes: each ends with its objects frozen (no last
    collection), so whatever it writes must be closed before it exits -- the image, the
    generated traffic, the captures and dispositions that `npk traffic compare` reads."""
    elf, inp, out = tmp_path / "router.elf", tmp_path / "in", tmp_path / "out"
    cmd = [sys.executable, "-c", "from npkit.toolchain.cli import main; main()"]

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, timeout=300, check=False)

    assert run("link", "pipelined", "-o", elf).returncode == 0
    assert run("traffic", "gen", MIN64, "-o", inp).returncode == 0
    res = run("run", elf, "--traffic", inp, "--duration-ms", "0.2", "--capture", out, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["comparison"]["matched_forward"] == 1490
    res = run("traffic", "compare", inp, out, "--config", ROUTER)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


def test_demo_exits_1_when_the_microcode_faults_though_every_packet_is_right(tmp_path: Path) -> None:
    """hdr_format's contexts each read SRAM once past the memory at start-up: the packets
    are all right, but the run fails and names the faults."""
    uc = (HDR_FORMAT / "hdr_format.uc").read_text()
    assert uc.count("    npk_thread_setup()\n") == 1 and uc.count(".reg nhi\n") == 1
    uc = uc.replace(".reg nhi\n", ".reg nhi fault_at\n.reg read $fault_x\n.sig fault_sig\n")
    uc = uc.replace("    npk_thread_setup()\n", "    npk_thread_setup()\n    immed[fault_at, 0]\n"
                    "    immed_w1[fault_at, 0xffff]\n    sram[read, $fault_x, fault_at, 0, 1], ctx_swap[fault_sig]\n")  # fmt: skip
    layout = _layout_with_hdr_format(tmp_path, uc, (HDR_FORMAT / "hdr_format.h").read_text())
    code, s = _demo("--layout", str(layout))
    assert code == 1
    assert s["comparison"]["matched_forward"] == s["totals"]["forwarded"] == s["totals"]["predicted_forward"]
    faults = s["faults"]
    assert faults["total"] == 8 and faults["counts"] == {"sram": 8}  # one a context
    assert {(f["me"], f["address"]) for f in faults["last"]} == {(3, 0xFFFF0000)}  # hdr_format is ME 3
    assert s["verdict"]["reasons"] == ["chip faults: 8 (sram 8); the last are in faults.last"]


def test_an_output_port_oversubscribed_at_line_rate_loses_nothing(tmp_path: Path) -> None:
    """All five ports send minimum frames at line rate to port 0, which carries one port's
    worth at line rate: the rest are queue_full drops the load forces, not loss.  The
    prediction counted the drain's idle time after port 0's last frame as time the wire
    could have carried more (89 of 5,659 drops called loss, a correct router failed);
    what it leaves is the ~3 us the first frames take to cross the router."""
    spec = {"seed": 3, "router": str(ROUTER), "defaults": {"size": 64, "load": 1.0, "destinations": {"via_port": 0}}}
    (tmp_path / "to0.yaml").write_text(yaml.safe_dump(spec))
    code, text = npk("demo", "--ms", "1", "--json", "--traffic", tmp_path / "to0.yaml", "--max-loss", "100")
    s = json.loads(text)
    t = s["totals"]
    assert code == 0 and t["dropped"] == {"queue_full": t["expected_overload_drops"] + t["lost"]}, t
    spec["defaults"]["load"] = 0.1  # the same uncongested: how long a frame takes to cross the router
    (tmp_path / "light.yaml").write_text(yaml.safe_dump(spec))
    light = json.loads(npk("demo", "--ms", "0.2", "--json", "--traffic", tmp_path / "light.yaml")[1])
    first_frames = (light["latency_us"]["max"] * 1000 + 672) / 672 + 1  # frames due before the first can leave
    assert 0 <= t["lost"] <= first_frames and t["dropped"]["queue_full"] > 5000, (t, first_frames)
    assert s["ports"][0]["tx_mbps"] > 995  # line rate but for the first frames' crossing


def _mixed_to_port_0(tmp_path: Path) -> Path:
    """Three ports at line rate to port 0, in mixed sizes: IMIX on one, 64 and 1518-byte
    frames half and half on two."""
    spec = {"seed": 5, "router": str(ROUTER),
            "defaults": {"size": {"choice": {64: 1, 1518: 1}}, "load": 1.0, "destinations": {"via_port": 0}},
            "ports": {0: {"size": "imix"}, 3: {"enabled": False}, 4: {"enabled": False}}}  # fmt: skip
    (tmp_path / "mixed_to0.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "mixed_to0.yaml"


@pytest.mark.parametrize("layout", ["pipelined", "parallel"])
def test_mixed_sizes_oversubscribing_a_port_lose_nothing_while_its_wire_is_busy(tmp_path: Path, layout: str) -> None:
    """The tail drop takes more small packets than the excess bits at the mean size (it
    admits a packet when a slot frees, and the next arrival is more often a large one):
    judged in packets of the mean size, 65 to 122 of a 2 ms run's drops were called
    loss and a correct router failed.  Judged by the wire's idle time, none are."""
    code, text = npk("demo", "--ms", "1", "--json", "--layout", layout, "--traffic", _mixed_to_port_0(tmp_path))
    s = json.loads(text)
    t = s["totals"]
    assert code == 0 and s["verdict"]["ok"], s["verdict"]
    assert t["lost"] == 0 and t["dropped"] == {"queue_full": t["expected_overload_drops"]} and t["dropped"]["queue_full"] > 100
    assert s["ports"][0]["tx_mbps"] > 990


def test_a_transmit_that_leaves_the_wire_idle_loses_the_packets_it_could_have_sent(tmp_path: Path) -> None:
    """The queue manager lets a port have 4 TBUF elements in flight instead of 40: too
    few to cover the time transmit takes, so the wire idles between frames while the
    queue is full and drops.  Every dropped packet the idle time could have carried is
    loss, and the run fails."""
    code, text = npk("demo", "--ms", "1", "--json", "-D", "qm.tx_window=4", "--traffic", _mixed_to_port_0(tmp_path))
    s = json.loads(text)
    t = s["totals"]
    assert code == 1 and s["ports"][0]["tx_mbps"] < 950
    idle_bits = (1000 - s["ports"][0]["tx_mbps"]) * 1e6 * s["duration_ms"] / 1e3  # (roughly: the traffic's time)
    assert t["lost"] > 0.5 * idle_bits / ((1518 + 24) * 8), (t, idle_bits)
    assert t["lost"] + t["expected_overload_drops"] == t["dropped"]["queue_full"]
    assert [r for r in s["verdict"]["reasons"] if r.startswith("loss ")] == s["verdict"]["reasons"]
