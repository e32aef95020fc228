"""`npk slice add` reaching the SPP's fast path (issue 46): the GPE's daemon writes a new
slice's meta-interfaces into the table in SRAM and bumps its generation word; the spp
block, which reads that word beside every frame's header, copies the table into its local
memory again and demultiplexes the slice's frames from then on.  The run judges the frames
the link's model drops (no such meta-interface) by the table and the TCAM as they are
(spp_model.LiveSpp): nothing misforwarded."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.system.app import load_app
from npkit.toolchain.system.link import link
from npkit.toolchain.system.router_run import RouterRun
from npkit.toolchain.system.verdict import Policy, judge

ROOT = Path(__file__).resolve().parents[2]
SPP = ROOT / "examples" / "apps" / "spp"
CHIP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
ADD_NS, FILTER_NS = 300_000, 320_000
NEW_UDP = 36001          # the new slice's meta-interfaces: (port 2, 10.0.2.1:36001) in, (port 3, 10.0.3.1:36001) out
COMMANDS = [(ADD_NS, f"slice add 9 v4n ipv4 mi n2 2 10.0.2.1:{NEW_UDP} mi n3 3 10.0.3.1:{NEW_UDP}"),
            (FILTER_NS, f"filter add v4n dst 172.30.0.0/16 out n3 next_hop 10.0.3.2:{NEW_UDP}")]


def _inner(dst: str) -> str:
    spec = importlib.util.spec_from_file_location("npk_spp_make_traffic_test", SPP / "make_traffic.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return str(mod.inner_ipv4(dst))


def _spec(tmp_path: Path) -> Path:
    """Port 2 at 30 % load: every other frame to the new slice's meta-interface (inner
    destination 172.30.1.1), the others to v4a's (172.16.2.2: v4a's filter 1 -> a1)."""
    p = tmp_path / "new_slice.yaml"
    p.write_text(f"""seed: 11
duration_ns: 1000000
router: {ROOT / "examples" / "traffic" / "router.yaml"}
defaults: {{size: {{uniform: [96, 160]}}, enabled: false}}
ports:
  2:
    enabled: true
    load: 0.3
    fields:
      ip_proto: udp
      dst: 10.0.2.1
      src: {{cycle: [198.23.0.0/16, 198.18.0.0/16]}}
      dst_port: {{cycle: [{NEW_UDP}, 33001]}}
      payload: {{cycle: [{{header: "{_inner("172.30.1.1")}"}}, {{header: "{_inner("172.16.2.2")}"}}]}}
""")
    return p


@pytest.fixture(scope="module")
def image(xscale_built: Path) -> Any:
    app = load_app(SPP)
    return link(app.layout_file("spp_gpe"), {"io": "msf"}, None, None, config=CHIP, app=app)


@pytest.mark.parametrize("placement", ["gpe", "xscale"])
def test_a_slice_added_mid_run_is_forwarded_by_the_fast_path(image: Any, tmp_path: Path, placement: str) -> None:
    """(On the XScale the daemon boots in ~460 µs: it makes both commands then, fewer of the
    new slice's packets are forwarded.)"""
    rr = RouterRun(image, load_traffic_source(_spec(tmp_path), 1_000_000), CHIP, record=True,
                   control={"timed": COMMANDS, "placement": placement})  # fmt: skip
    try:
        rr.run_traffic(1_000_000)
        rr.drain()
        s = rr.summary()
        cmp, cp, tot = s["comparison"], s["control_plane"], s["totals"]
        assert judge(s, Policy())["ok"], (judge(s, Policy()), cmp)
        assert not any(cmp.get(k, 0) for k in ("wrong_outcome", "wrong_port", "wrong_bytes", "wrong_reason",
                                               "unexpected_control", "unmatched")), cmp  # fmt: skip
        # the new slice's packets: dropped for want of a meta-interface before the add (and
        # for want of a filter until the daemon made it), forwarded by the fast path after
        new_fwd = cp["forwarded_by_slices_added"]
        offered = tot["offered"]
        assert new_fwd > (0.25 if placement == "gpe" else 0.1) * offered, (new_fwd, offered)
        dropped = tot["dropped"]
        assert 0 < dropped.get("spp_no_meta_if", 0) < offered / 2 - new_fwd + 5, dropped
        assert tot["forwarded"] + sum(dropped.values()) == offered      # nothing lost, nothing excepted
        assert cp["counters"]["exc_other"] == 0 and cp["counters"]["control_errors"] == 0
        # its frames leave port 3 from the new output meta-interface to the filter's next hop
        mine = [(t, f) for port, fs in rr.run.out.items() for t, f in fs
                if f[26:30] == bytes([10, 0, 3, 1]) and f[34:36] == NEW_UDP.to_bytes(2, "big")]  # fmt: skip
        assert len(mine) == new_fwd
        assert all(f[30:34] == bytes([10, 0, 3, 2]) and f[36:38] == NEW_UDP.to_bytes(2, "big") for _, f in mine)
        assert all(port == 3 for port, fs in rr.run.out.items() for _, f in fs if f[34:36] == NEW_UDP.to_bytes(2, "big"))
        assert min(t for t, _ in mine) > FILTER_NS      # (the daemon makes a command between two records)
        # v4a's frames of the same port, through the same change: every one forwarded
        v4a = [g for g in s["slices"] if g["name"] == "v4a"][0]
        assert v4a["forwarded"] == v4a["offered"] > 0 and v4a["mismatches"] == 0
    finally:
        rr.close()
