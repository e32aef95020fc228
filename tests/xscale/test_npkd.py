"""The control daemon's C code natively: the unit tests under ASan/UBSan, and the route
table it lays out in SRAM against the Python builder's (toolchain/router), word for word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from npkit.emulator.traffic.router_config import RouterConfig
from npkit.emulator.traffic.routes import format_routes, random_routes
from npkit.toolchain.router import sramfile
from npkit.toolchain.router.loader import build_tables, load_config, load_routes
from npkit.toolchain.system.control import daemon_conf

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "xscale" / "build"
ROUTER = ROOT / "examples" / "traffic" / "router.yaml"


def test_packet_builders_tables_and_engine_under_asan(xscale_built: Path) -> None:
    res = subprocess.run([str(BUILD / "test_npkd_asan")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ", 0 failed" in res.stdout and "ERROR: AddressSanitizer" not in res.stderr


@pytest.mark.parametrize("table", ["example", "random10k"])
def test_c_builder_image_equals_the_python_builders(xscale_built: Path, tmp_path: Path, table: str) -> None:
    cfg = RouterConfig.load(ROUTER)
    routes = ROOT / "examples" / "traffic" / "routes.txt"
    if table == "random10k":
        routes = tmp_path / "routes.txt"
        routes.write_text(format_routes(random_routes(10_000, 3, cfg.next_hops())))
    conf = tmp_path / "npkd.conf"
    conf.write_text(daemon_conf(cfg, routes, sram_channel_bytes=16 << 20))
    out = tmp_path / "c.bin"
    res = subprocess.run([str(BUILD / "gpe" / "npkd"), "--build-image", str(out), str(conf)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    c_image = sramfile.load(out)
    py_image = build_tables(load_routes(routes), load_config(ROUTER)).image
    assert len(c_image) == len(py_image) > 65_536
    assert c_image.words == py_image.words


def test_bad_configuration_is_a_clear_error(xscale_built: Path, tmp_path: Path) -> None:
    conf = tmp_path / "npkd.conf"
    conf.write_text("port 0 10.0.0.1 24 02:4e:50:00:00:00\nbogus 1\n")
    res = subprocess.run([str(BUILD / "gpe" / "npkd"), "--build-image", str(tmp_path / "x"), str(conf)],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert res.returncode == 1 and f"{conf}:2: unknown directive 'bogus'" in res.stderr


def test_owned_table_where_the_system_map_puts_it(xscale_built: Path, tmp_path: Path) -> None:
    """The daemon's table of the buffers it owns comes from the system map (sysmap.py), as
    its other SRAM areas: in its configuration, a bit for every buffer -- then the records
    of its send backlog (a slot of 8 bytes a buffer) and of its ARP cache (a count, 16
    bytes an entry, cp.h NPKD_ARP_MIRROR of them) -- and among the allocations the linker
    checks for overlaps; one too small for the buffers is a clear error, not a table
    that cannot mark them all."""
    from npkit.toolchain.system.control import arp_mirror_cap, control_allocations
    from npkit.toolchain.system.sysmap import CP_OWNED_BASE, SYS

    text = daemon_conf(RouterConfig.load(ROUTER), ROOT / "examples" / "traffic" / "routes.txt")
    assert f"owned {CP_OWNED_BASE:#x} {SYS.n_bufs}\n" in text
    spans = sorted(control_allocations())
    end = CP_OWNED_BASE + 16 + SYS.n_bufs // 8 + 8 * SYS.n_bufs + 16 + 16 * arp_mirror_cap()
    assert arp_mirror_cap() == 1024 and (CP_OWNED_BASE, end) in [(a, b) for a, b, _ in spans]
    assert all(b <= c for (_, b, _w), (c, _d, _v) in zip(spans, spans[1:], strict=False))
    conf = tmp_path / "npkd.conf"
    conf.write_text(text.replace(f"owned {CP_OWNED_BASE:#x} {SYS.n_bufs}", f"owned {CP_OWNED_BASE:#x} 16"))
    res = subprocess.run([str(BUILD / "gpe" / "npkd"), "--build-image", str(tmp_path / "x"), str(conf)],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert res.returncode == 1 and f"the owned table has room for 16 buffers, sys has {SYS.n_bufs}" in res.stderr
