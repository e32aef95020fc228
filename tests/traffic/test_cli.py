"""`npk traffic ...` end to end through Click: gen, show, predict, compare, routes, reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic.pcap import read_pcap, write_pcap
from npkit.emulator.traffic.routes import MAX_RANDOM_ROUTES, RouteError, load_routes, random_routes
from npkit.toolchain.cli import main

from .conftest import EXAMPLES, ROUTER_YAML


def npk(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["traffic", *map(str, args)])
    return result.exit_code, result.output


def test_gen_show_predict_compare_round_trip(tmp_path: Path) -> None:
    gen_dir, out_dir = tmp_path / "in", tmp_path / "out"
    code, out = npk("gen", EXAMPLES / "errors.yaml", "-o", gen_dir, "--count", "100", "--json")
    assert code == 0, out
    summary = json.loads(out)
    # 5 ports x 100, and the neighbour 10.0.2.77 answering the router's ARP request once
    assert summary["packets"] == 501 and summary["seed"] == 11

    code, out = npk("show", gen_dir, "--config", ROUTER_YAML, "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["packets"] == 501 and sum(shown["kinds"].values()) == 501
    oracle = shown["oracle"]
    assert oracle["forward"] + sum(oracle["drop"].values()) + sum(
        oracle["exception"].values()) == 501

    code, out = npk("predict", gen_dir, "--config", ROUTER_YAML, "-o", out_dir, "--json")
    assert code == 0, out
    assert json.loads(out)["forward"] == oracle["forward"]

    code, out = npk("compare", gen_dir, out_dir, "--config", ROUTER_YAML)
    assert code == 0 and out.rstrip().endswith("OK"), out

    # break one forwarded frame's TTL: compare fails and names the field
    port_file = next(p for p in sorted(out_dir.glob("port*.pcap")) if read_pcap(p))
    recs = read_pcap(port_file)
    data = bytearray(recs[0].data)
    data[22] ^= 0x10
    write_pcap(port_file, [(recs[0].timestamp_ns, bytes(data)), *recs[1:]])
    code, out = npk("compare", gen_dir, out_dir, "--config", ROUTER_YAML, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["totals"]["wrong_bytes"] == 1 and report["issues"][0]["offset"] == 22


def test_show_single_pcap(tmp_path: Path) -> None:
    path = tmp_path / "x.pcap"
    write_pcap(path, [(0, b"\x00" * 60), (672, b"\x00" * 60)])
    code, out = npk("show", path, "--json")
    assert code == 0
    s = json.loads(out)
    assert s["packets"] == 2 and s["wire_bps"] == 1_000_000_000 and s["pps"] == 1488095


def test_routes_command(tmp_path: Path) -> None:
    dest = tmp_path / "routes.txt"
    code, out = npk("routes", "--count", "10000", "--seed", "1", "--config", ROUTER_YAML,
                    "-o", dest, "--json")
    assert code == 0, out
    assert json.loads(out)["routes"] == 10_000
    routes = load_routes(dest)
    assert len(routes) == 10_000
    again = tmp_path / "again.txt"
    npk("routes", "--count", "10000", "--seed", "1", "--config", ROUTER_YAML, "-o", again)
    assert again.read_text() == dest.read_text()


@pytest.mark.parametrize("args", [
    ["--count", "-1"], ["--count", "10", "--ports", "0"], ["--count", "10", "--ports", "-3"],
    ["--count", "10", "--ports", "300"], ["--count", "100000000000"], ["--count", "3", "--seed", "-1"],
])  # fmt: skip
def test_routes_command_bounds_its_options(tmp_path: Path, args: list[str]) -> None:
    """Tracebacks before (count -1, ports 0), or a run that never ended (count 1e11)."""
    res = CliRunner().invoke(main, ["traffic", "routes", *args, "-o", str(tmp_path / "r.txt")])
    assert res.exit_code == 2 and "is not in the range" in res.output, (res.output, res.exception)
    assert not (tmp_path / "r.txt").exists()


def test_routes_and_gen_refuse_the_same_seeds(tmp_path: Path) -> None:
    code, out = npk("gen", EXAMPLES / "min64.yaml", "--seed", "-1", "-o", tmp_path / "g")
    assert code == 2 and "--seed" in out, out


def test_random_routes_bounds_the_count() -> None:
    hops = [(0x0A000002, 0)]
    with pytest.raises(RouteError, match="count must be in 0..5,000,000"):
        random_routes(MAX_RANDOM_ROUTES + 1, 1, hops)
    with pytest.raises(RouteError, match="count must be"):
        random_routes(-1, 1, hops)
    with pytest.raises(RouteError, match="no ARP entry"):
        random_routes(1, 1, [])


def test_routes_with_a_config_without_next_hops_is_a_clean_error(tmp_path: Path) -> None:
    cfg = tmp_path / "r.yaml"
    cfg.write_text("ports:\n  - {address: 10.0.0.1/24, mac: '02:00:00:00:00:00'}\n")
    code, out = npk("routes", "--count", "3", "--config", cfg, "-o", tmp_path / "r.txt")
    assert code == 1 and "no ARP entry" in out, out


def test_reasons_command() -> None:
    code, out = npk("reasons", "--header")
    assert code == 0 and "#define EXC_NO_ROUTE" in out
    code, out = npk("reasons", "--json")
    assert json.loads(out)["drops"]["bad_checksum"]["code"] == 9


def test_errors_are_one_line_messages(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"router: {ROUTER_YAML}\ncount: 1\ndefaults: {{size: 12}}\n")
    code, out = npk("gen", spec, "-o", tmp_path / "o")
    assert code == 1 and "Error:" in out and "too small" in out and "Traceback" not in out


def test_outputs_never_overwrite_inputs_and_bad_directories_say_why(tmp_path: Path) -> None:
    gen_dir = tmp_path / "in"
    assert npk("gen", EXAMPLES / "min64.yaml", "-o", gen_dir, "--count", "3")[0] == 0
    before = {p.name: p.read_bytes() for p in gen_dir.iterdir()}
    code, out = npk("predict", gen_dir, "--config", ROUTER_YAML, "-o", gen_dir)
    assert code == 2 and "-o is also the input IN_DIR" in out, out
    assert {p.name: p.read_bytes() for p in gen_dir.iterdir()} == before
    cfg = tmp_path / "router.yaml"
    cfg.write_text(ROUTER_YAML.read_text())
    code, out = npk("routes", "--count", "3", "--config", cfg, "-o", cfg)
    assert code == 2 and "-o is also the input --config" in out and cfg.read_text() == ROUTER_YAML.read_text()
    code, out = npk("routes", "--count", "3", "-o", tmp_path / "nowhere" / "r.txt")
    assert code == 1 and f"cannot write {tmp_path / 'nowhere' / 'r.txt'}: No such file or directory" in out, out
    code, out = npk("gen", EXAMPLES / "min64.yaml", "-o", cfg)
    assert code == 1 and f"cannot write {cfg}: a file is there, not a directory" in out, out
    (tmp_path / "empty").mkdir()
    code, out = npk("show", tmp_path / "empty")
    assert code == 1 and "empty: no port<N>.pcap files (not a traffic directory)" in out, out


def test_demo_reports_a_bad_capture_directory_without_a_traceback(tmp_path: Path) -> None:
    gen_dir = tmp_path / "in"
    assert npk("gen", EXAMPLES / "min64.yaml", "-o", gen_dir, "--count", "3")[0] == 0
    (gen_dir / "port1.pcap").write_bytes(b"\0" * 64)
    res = CliRunner().invoke(main, ["demo", "--ms", "0.01", "--traffic", str(gen_dir), "--routes",
                                    str(EXAMPLES / "routes.txt")])  # fmt: skip
    assert res.exit_code == 1 and "port1.pcap: bad magic 0x00000000, not a pcap file" in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    res = CliRunner().invoke(main, ["demo", "--ms", "0.01", "--traffic", str(gen_dir), "--seed", "3"])
    assert res.exit_code == 2 and "--seed goes with a traffic spec" in res.output, res.output
