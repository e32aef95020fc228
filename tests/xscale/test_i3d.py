"""The I3 daemon (xscale/i3d): its C unit tests under ASan/UBSan, its configuration as
npkit writes it from the SPP's slice file, and its control socket -- the protocol and
limits of npkd's, driven by `npk slice`, `npk filter` and `npk finger` -- on a daemon run
with no chip (`i3d --dry`)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic.router_config import RouterConfig
from npkit.toolchain.cli import main
from npkit.toolchain.system.control import ControlSocketError
from npkit.toolchain.system.i3d import i3d_conf, load_substrate, parse_filter, parse_slice, request

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "xscale" / "build"
SPP = ROOT / "examples" / "apps" / "spp"
TCAM = {"base": 0x80600000, "entries": 1024}


def test_unit_tests_under_asan(xscale_built: Path) -> None:
    res = subprocess.run([str(BUILD / "test_i3d_asan")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ", 0 failed" in res.stdout and "ERROR: AddressSanitizer" not in res.stderr


def _conf(tmp_path: Path, sock: Path | None) -> Path:
    sub = load_substrate(SPP)
    router = RouterConfig.load(ROOT / "examples" / "traffic" / "router.yaml")
    conf = tmp_path / "i3d.conf"
    conf.write_text(i3d_conf(sub, router, TCAM, rings=(11, 12), socket=sock))
    return conf


def _i3a_entries() -> list[int]:
    """The TCAM entries of i3a's filters: the slice file's filters go in file order."""
    sub = load_substrate(SPP)
    return [k for k, f in enumerate(sub.filters()) if sub.slices[f.slice_index].name == "i3a"]


def test_the_configuration_carries_the_slice_file(tmp_path: Path) -> None:
    sub = load_substrate(SPP)
    lines = _conf(tmp_path, None).read_text().splitlines()
    i3a = sub.by_name("i3a")
    assert f"slice {i3a.index} {i3a.id} i3a i3 {round(i3a.share * 1e6)}" in lines
    assert f"ring {i3a.id} 0x4000000000000000 0x2000000000000000 0xc0011000" in lines
    assert f"finger {i3a.id} 60 c3 10.0.3.2:34001" in lines
    # the slice file's filters in their TCAM entries, in order; the daemon's own after them
    filters = [x for x in lines if x.startswith("filter ")]
    assert [int(x.split()[2]) for x in filters] == list(range(len(sub.filters())))
    assert filters[0] == ("filter 1 0 dst 172.16.1.0/24 src 192.168.0.0/16 proto 17 dport 53 out a2 "
                          "next_hop 10.0.2.3:40053")  # fmt: skip
    e = _i3a_entries()
    assert f"filter {i3a.id} {e[2]} trigger 0x3100000000000000/8 out c2 next_hop 10.0.2.2:40003" in filters
    assert f"filter {i3a.id} {e[4]} trigger 0x3200000000000000/8 action gpe" in filters
    n = len(sub.filters())
    assert f"tcam {0x80600000:#x} 1024 {n} {1024 - n}" in lines


@pytest.fixture()
def daemon(xscale_built: Path, tmp_path: Path) -> Iterator[Path]:
    sock = tmp_path / "i3d.sock"
    proc = subprocess.Popen([str(BUILD / "gpe" / "i3d"), "--dry", str(_conf(tmp_path, sock))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for _ in range(200):
            if sock.exists():
                break
            if proc.poll() is not None:
                pytest.fail(f"i3d --dry exited: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.02)
        yield sock
    finally:
        proc.kill()
        proc.wait()


def test_slices_and_filters_over_the_socket(daemon: Path) -> None:
    slices = [parse_slice(x) for x in request(daemon, "slice show")]
    sub = load_substrate(SPP)
    assert [(s["id"], s["name"], s["code_option"]) for s in slices] == [(x.id, x.name, x.option) for x in sub.slices]
    assert [m["name"] for m in slices[2]["meta_interfaces"]] == [m.name for m in load_substrate(SPP).by_name("i3a").meta_ifs]
    before = [parse_filter(x) for x in request(daemon, "filter show i3a")]
    assert [f["entry"] for f in before] == _i3a_entries()
    added = parse_filter(request(daemon, "filter add i3a trigger 0x3300000000000009 out c3 next_hop 10.0.3.2:40009")[0])
    assert added["entry"] == len(load_substrate(SPP).filters()) and added["fields"]["trigger"] == "0x3300000000000009"
    slow = parse_filter(request(daemon, f"filter slow {added['handle']}")[0])
    assert slow["entry"] is None and slow["slow"]
    with pytest.raises(ControlSocketError, match="no such filter"):
        request(daemon, "filter del 999")
    with pytest.raises(ControlSocketError, match="'dst' is not a field of an i3 filter"):
        request(daemon, "filter add i3a dst 10.0.0.0/8 out c3 next_hop 10.0.3.2:1")
    request(daemon, f"filter del {added['handle']}")
    assert [parse_filter(x)["handle"] for x in request(daemon, "filter show i3a")] == [f["handle"] for f in before]


def test_the_socket_keeps_npkd_limits(daemon: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(daemon))
    s.sendall(b"x" * 600 + b"\nstats\n")
    buf = b""
    while b"\nok\n" not in buf:
        buf += s.recv(65536)
    s.close()
    assert buf.startswith(b"error: line too long (at most 510 bytes)\n")
    assert b"control_requests 1\n" in buf     # the long line did not run


def _npk(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def test_npk_slice_filter_finger_commands(daemon: Path) -> None:
    code, out = _npk("slice", "show", "--socket", str(daemon), "--json")
    assert code == 0 and [s["name"] for s in json.loads(out)] == [x.name for x in load_substrate(SPP).slices]
    code, out = _npk("filter", "add", "i3a", "trigger", "0x3300000000000009", "out", "c3", "next_hop",
                     "10.0.3.2:40009", "--socket", str(daemon), "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["entry"] == len(load_substrate(SPP).filters())
    code, out = _npk("filter", "show", "i3a", "--socket", str(daemon))
    assert code == 0 and "trigger 0x3300000000000009 out c3 next_hop 10.0.3.2:40009" in out
    code, out = _npk("finger", "set", "i3a", "63", "c4", "10.0.4.3:34001", "--socket", str(daemon))
    assert code == 0
    code, out = _npk("finger", "show", "i3a", "--socket", str(daemon))
    assert "finger 63 out c4 next_hop 10.0.4.3:34001" in out
    code, out = _npk("slice", "add", "9", "i3b", "i3", "--node", "0x10", "--pred", "0x1", "--mi", "d4:4:10.0.4.1:35001",
                     "--socket", str(daemon))  # fmt: skip
    assert code == 0 and "slice 9 name i3b" in out
    code, out = _npk("slice", "del", "i3b", "--socket", str(daemon))
    assert code == 0
    code, out = _npk("filter", "del", "999", "--socket", str(daemon))
    assert code == 1 and "Error: no such filter" in out and "Traceback" not in out
    code, out = _npk("filter", "show", "--socket", str(daemon.parent / "none.sock"))
    assert code == 1 and "no control daemon listening" in out


def test_the_gpe_layout_is_generated_from_the_spp_layout() -> None:
    from npkit.toolchain.system.i3d import gpe_layout

    assert (SPP / "spp_gpe.yaml").read_text() == gpe_layout((SPP / "spp.yaml").read_text()), (
        "examples/apps/spp/spp_gpe.yaml is stale: python -m npkit.toolchain.system.i3d examples/apps/spp")


def test_control_at_is_checked_before_anything_runs() -> None:
    code, out = _npk("demo", "--control-at", "soon filter fast 3")
    assert code == 2 and "MS COMMAND" in out and "Traceback" not in out
    code, out = _npk("demo", "--control-at", "0.5")
    assert code == 2 and "MS COMMAND" in out


def test_npk_filter_slow_and_fast_a_whole_slice(daemon: Path) -> None:
    code, out = _npk("filter", "slow", "--slice", "i3a", "--socket", str(daemon))
    assert code == 0 and out.count(" slow ") == len(_i3a_entries())
    code, out = _npk("filter", "show", "i3a", "--socket", str(daemon), "--json")
    assert all(f["entry"] is None for f in json.loads(out))
    code, out = _npk("filter", "fast", "--slice", "i3a", "--socket", str(daemon))
    assert code == 0 and " slow " not in out
    code, out = _npk("filter", "fast", "--socket", str(daemon))
    assert code == 2 and "HANDLE or --slice" in out
