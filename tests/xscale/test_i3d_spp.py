"""The SPP with its GPE (examples/apps/spp, layout spp_gpe): the I3 daemon takes the I3
slices' exceptions and forwards them itself, and installs a trigger filter in the TCAM
while traffic runs -- the packets of that trigger move from the GPE path to the fast path
at the install, none misforwarded (issue 46, "Must show")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.app import load_app
from npkit.toolchain.system.i3d import load_substrate, mirror_changed_us
from npkit.toolchain.system.link import link
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

ROOT = Path(__file__).resolve().parents[2]
SPP = ROOT / "examples" / "apps" / "spp"
CHIP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
TRIGGER = 0x3300000000000009  # in i3a's range (0x2000.., 0x4000..], no filter of the slice file's
INSTALL_NS = 500_000


def _spec(tmp_path: Path, load: float = 0.3) -> Path:
    """I3 packets of slice i3a for TRIGGER, on port 2 (meta-interface c2), 30 % load."""
    header = f"10200000{TRIGGER:016x}0a07070713880123456789abcdef00"  # version 1, hop limit 32, length 0
    p = tmp_path / "i3.yaml"
    p.write_text(f"""seed: 7
duration_ns: 1000000
router: {ROOT / "examples" / "traffic" / "router.yaml"}
defaults: {{size: {{uniform: [96, 160]}}, enabled: false}}
ports:
  2:
    enabled: true
    load: {load}
    fields:
      ip_proto: udp
      dst: 10.0.2.1
      dst_port: 34001
      payload: {{header: "{header}"}}
""")
    return p


@pytest.fixture(scope="module")
def image(xscale_built: Path) -> Any:
    app = load_app(SPP)
    return link(app.layout_file("spp_gpe"), {"io": "msf"}, None, None, config=CHIP, app=app)


def _run(image: Any, tmp_path: Path, timed: list[tuple[int, str]],
         placement: str = "gpe") -> tuple[RouterRun, dict[str, Any]]:  # fmt: skip
    rr = RouterRun(image, load_traffic_source(_spec(tmp_path), 1_000_000), CHIP, record=True,
                   control={"timed": timed, "placement": placement})  # fmt: skip
    rr.run_traffic(1_000_000)
    rr.drain()
    return rr, rr.summary()


@pytest.mark.parametrize("placement", ["gpe", "xscale"])
def test_a_trigger_moves_from_the_gpe_path_to_the_fast_path_at_its_install(image: Any, tmp_path: Path,
                                                                           placement: str) -> None:  # fmt: skip
    handle = 1 + len(load_substrate(SPP).filters())  # the daemon's handles: the slice file's first
    timed = [(0, f"filter add i3a trigger {TRIGGER:#018x} out c3 next_hop 10.0.3.2:40009 slow"),
             (INSTALL_NS, f"filter fast {handle}")]  # fmt: skip
    rr, s = _run(image, tmp_path, timed, placement)
    try:
        verdict = judge(s, Policy())
        assert verdict["ok"], verdict
        cmp = s["comparison"]
        assert cmp["unexpected_control"] == 0 and cmp["missing_control"] == 0 and cmp["unmatched"] == 0
        offered = s["totals"]["offered"]
        assert offered > 200 and s["totals"]["forwarded"] == offered      # every packet delivered
        # every frame went to the trigger's receiver: 10.0.3.2:40009 out of port 3
        frames = [f for port, fs in rr.run.out.items() for _, f in fs]
        assert len(frames) == offered and all(port == 3 for port, fs in rr.run.out.items() if fs)
        assert all(f[30:34] == bytes([10, 0, 3, 2]) and f[36:38] == (40009).to_bytes(2, "big") for f in frames)
        # the GPE path before the install, the fast path from it on
        installed_ns = mirror_changed_us(rr.chip) * 1000
        assert INSTALL_NS <= installed_ns < INSTALL_NS + 100_000 or placement == "xscale"   # (it boots slowly)
        paths = rr.cp.paths()
        gpe = [t for t, p in paths if p == "gpe"]
        fast = [t for t, p in paths if p == "fast"]
        assert len(gpe) > 50 and len(fast) > 50
        assert max(gpe) < min(fast)         # one switch: every packet before it GPE, every one after fast
        # installed_ns is the daemon's clock read just after the write: a lookup a few µs
        # before it may see the entry -- on the XScale up to a quantum before (its clock runs
        # a quantum ahead of the chip's: npkit.xscale.system.XScaleHost.visible_from)
        ahead = 0 if placement == "gpe" else 30_000
        assert max(gpe) <= installed_ns and min(fast) >= installed_ns - 20_000 - ahead, (max(gpe), min(fast), installed_ns)
        assert rr.chip.tcam_stats()["hits"] == len(fast)
        cp = s["control_plane"]
        assert cp["counters"]["delivered"] == len(gpe) and cp["fast_path_after_install"] == len(fast)
        # the GPE path's delay, in the run's JSON (the daemon's, and on the wire)
        assert cp["gpe_delay_ns"]["samples"] == len(gpe) and cp["gpe_latency_ns"]["count"] == len(gpe)
        # (the daemon's clock on the XScale runs up to a quantum ahead of the chip's)
        d, w = cp["gpe_delay_ns"]["p50"], cp["gpe_latency_ns"]["p50"]
        assert 0 < d and abs(w - d) <= 10_000, (d, w)
    finally:
        rr.close()


def test_without_the_trigger_the_gpe_drops_them_as_the_model_excepts_them(image: Any, tmp_path: Path) -> None:
    rr, s = _run(image, tmp_path, [])
    try:
        assert judge(s, Policy())["ok"]
        assert s["totals"]["forwarded"] == 0 and s["totals"]["exceptions"] == {"i3_no_trigger": s["totals"]["offered"]}
        assert s["control_plane"]["counters"]["dropped_no_trigger"] == s["totals"]["offered"]
    finally:
        rr.close()


def test_npk_filter_over_the_socket_while_the_run_goes(image: Any, tmp_path: Path) -> None:
    """The operator's way: `npk filter add` (its library call) on the run's control socket, at whatever
    emulated time the daemon reads it; the packets before it take the GPE path (the
    daemon drops them: no trigger yet), those after it the fast path, none misforwarded."""
    import threading

    from npkit.toolchain.system.i3d import request

    sock = tmp_path / "i3d.sock"
    rr = RouterRun(image, load_traffic_source(_spec(tmp_path), 3_000_000), CHIP, record=True,
                   control={"socket": str(sock)})  # fmt: skip
    answer: list[Any] = []

    def operator() -> None:
        answer.append(request(sock, f"filter add i3a trigger {TRIGGER:#018x} out c3 next_hop 10.0.3.2:40009"))

    t = threading.Thread(target=operator)
    try:
        rr.run_traffic(200_000)          # the daemon is up, its socket open
        t.start()
        rr.run_traffic(2_800_000)
        t.join(60)
        rr.drain()
        s = rr.summary()
        assert answer and " entry " in answer[0][0], answer
        assert judge(s, Policy())["ok"] and s["comparison"]["unexpected_control"] == 0
        installed_ns = mirror_changed_us(rr.chip) * 1000
        fast = [t for t, p in rr.cp.paths() if p == "fast"]
        assert fast and min(fast) >= installed_ns - 20_000
        dropped = s["control_plane"]["counters"]["dropped_no_trigger"]
        assert dropped > 0 and s["totals"]["forwarded"] + dropped == s["totals"]["offered"]
    finally:
        rr.close()


def test_two_triggers_of_one_identifier_get_a_copy_each(image: Any, tmp_path: Path) -> None:
    """I3's multicast, on the GPE path (the fast path forwards on a single match only)."""
    add = f"filter add i3a trigger {TRIGGER:#018x} next_hop"
    rr, s = _run(image, tmp_path, [(0, f"{add} 10.0.3.2:40009 out c3 slow"), (0, f"{add} 10.0.4.2:40010 out c4 slow")])
    try:
        assert judge(s, Policy())["ok"], judge(s, Policy())
        offered = s["totals"]["offered"]
        ports = {p: len(fs) for p, fs in rr.run.out.items() if fs}
        assert ports == {3: offered, 4: offered}            # every packet to both receivers
        cp = s["control_plane"]
        assert cp["multicast_copies"] == offered == cp["counters"]["copies"]
        assert s["comparison"]["duplicates"] == 0 and s["comparison"]["unexpected_control"] == 0
    finally:
        rr.close()


def test_killed_and_started_again_it_rebuilds_its_filters(image: Any, tmp_path: Path) -> None:
    """Fault injection: i3d killed at 200 µs (taken at its next wait on the device) and
    started again at 300 µs.  The records meanwhile wait on the ring; the new daemon clears
    what its predecessor left in the TCAM, makes the timed commands due again (the trigger,
    `slow`) and the install at 500 µs: every packet reaches the trigger's receiver, none
    misforwarded, and from the install on the fast path has them."""
    handle = 1 + len(load_substrate(SPP).filters())
    timed = [(0, f"filter add i3a trigger {TRIGGER:#018x} out c3 next_hop 10.0.3.2:40009 slow"),
             (INSTALL_NS, f"filter fast {handle}")]  # fmt: skip
    rr = RouterRun(image, load_traffic_source(_spec(tmp_path, load=0.1), 1_000_000), CHIP, record=True,
                   control={"timed": timed, "kill_at_ns": 200_000, "restart_at_ns": 300_000})  # fmt: skip
    try:
        rr.run_traffic(1_000_000)
        rr.drain()
        s = rr.summary()
        assert judge(s, Policy())["ok"], judge(s, Policy())
        mhz = float(rr.chip.config["clock_mhz"])
        events = [(int(c * 1000 / mhz), e) for c, e in rr.control.system.events]
        # (a kill is taken at the daemon's next wait on the device: when it is idle)
        assert [e for _, e in events] == ["killed", "restarted"] and 200_000 <= events[0][0] < INSTALL_NS, events
        assert s["totals"]["forwarded"] == s["totals"]["offered"] and s["comparison"]["unexpected_control"] == 0
        assert s["control_plane"]["xscale"]["starts"] == 2
        installed_ns = mirror_changed_us(rr.chip) * 1000
        assert INSTALL_NS <= installed_ns < INSTALL_NS + 50_000
        paths = rr.cp.paths()
        assert all(p == "fast" for t, p in paths if t > installed_ns) and any(p == "gpe" for _, p in paths)
    finally:
        rr.close()


def test_npk_demo_control_at_installs_while_traffic_runs(xscale_built: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    res = CliRunner().invoke(main, ["demo", "--app", str(SPP), "--layout", "spp_gpe", "--traffic", str(_spec(tmp_path)),
                                    "--ms", "1", "--json", "--control-at",
                                    f"0 filter add i3a trigger {TRIGGER:#018x} out c3 next_hop 10.0.3.2:40009 slow",
                                    "--control-at", "0.5 filter fast slice i3a"])  # fmt: skip
    assert res.exit_code == 0, res.output[-2000:]
    s = json.loads(res.output)
    cp = s["control_plane"]
    assert s["verdict"]["ok"] and cp["counters"]["filters_installed"] == 1
    assert cp["counters"]["delivered"] > 50 and cp["fast_path_after_install"] > 50
    assert cp["counters"]["delivered"] + cp["fast_path_after_install"] == s["totals"]["offered"]


def test_fingers_change_while_traffic_runs(xscale_built: Path) -> None:
    """The daemon takes finger 62 out at 300 µs (its packets then go to the GPE, which
    sends them on by the highest valid finger below) and puts a finger 63 in at 500 µs
    (packets the fast path excepted for want of it, it forwards from then on): the SPP's
    default traffic, none misforwarded."""
    import json

    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    res = CliRunner().invoke(main, ["demo", "--app", str(SPP), "--layout", "spp_gpe", "--ms", "1", "--json",
                                    "--control-at", "0.3 finger del i3a 62",
                                    "--control-at", "0.5 finger set i3a 63 c4 10.0.4.3:34001"])  # fmt: skip
    assert res.exit_code == 0, res.output[-2000:]
    s = json.loads(res.output)
    cmp, cp = s["comparison"], s["control_plane"]
    assert s["verdict"]["ok"] and cmp["unexpected_control"] == 0 and cmp.get("wrong_port", 0) == 0
    assert cp["counters"]["fingers_written"] == 2
    assert cp["forwarded_by_it_the_model_forwards"] > 0      # finger 62's packets, by the GPE
    assert cp["fast_path_after_install"] > 0                 # finger 63's, by the fast path


def test_the_default_traffic_fits_the_gpe(xscale_built: Path) -> None:
    """The default `npk demo --app examples/apps/spp --layout spp_gpe`, 10 ms: the traffic's
    exception share (~4 %, most traffic on the fast path as in seed 004) is below what the
    daemon takes over the gpe link (~190,000 records/s): every exception reaches it, none
    dropped at the ring, verdict ok (docs/spp.md §12, "The GPE's capacity")."""
    import json

    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    res = CliRunner().invoke(main, ["demo", "--app", str(SPP), "--layout", "spp_gpe", "--ms", "10", "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    s = json.loads(res.output)
    tot, c = s["totals"], s["control_plane"]["counters"]
    assert s["verdict"]["ok"] and tot["lost"] == 0 and "exception_ring_full" not in tot["dropped"], tot
    excepted = sum(tot["exceptions"].values())
    assert c["exceptions"] > 500 and c["exceptions"] == excepted + c["delivered"] + c["finger_forwarded"], (c, tot)
    assert c["exceptions"] < 0.06 * tot["offered"]          # the fast path's share: > 94 %
    assert s["comparison"]["unexpected_control"] == 0 and s["comparison"]["matched_control"] > 400
