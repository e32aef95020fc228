"""Option and input checks of `npk demo`, `npk run` (traffic options), `npk link`,
`npk route` and `npk traffic routes`: bad input is a usage error or a one-line message,
never a traceback, and no value turns a check off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.emulator.traffic.source import TrafficError, load_traffic_source
from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
MIN64 = ROOT / "examples" / "traffic" / "min64.yaml"


def npk(*args: object) -> tuple[int, str]:
    """Exit code and output (stdout and stderr) of an npk command; a traceback fails the test."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def router_elf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    elf = tmp_path_factory.mktemp("elf") / "router.elf"
    code, text = npk("link", "pipelined", "-o", elf)
    assert code == 0, text
    return elf


@pytest.fixture(scope="module")
def in64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traffic") / "in64"
    code, text = npk("traffic", "gen", MIN64, "-o", out)
    assert code == 0, text
    return out


# ---------------------------------------------------------------- finite floats, bounds


@pytest.mark.parametrize("args", [
    ["--max-loss", "nan"], ["--max-loss", "inf"], ["--min-line-rate", "nan"], ["--min-line-rate", "-inf"],
    ["--ms", "nan"], ["--ms", "inf"], ["--ms", "1e9"], ["--ms", "1", "--drain-cap-ms", "nan"],
    ["--ms", "1", "--drain-cap-ms", "inf"],
])  # fmt: skip
def test_demo_refuses_nan_inf_and_huge_numbers(args: list[str]) -> None:
    code, text = npk("demo", *args)
    assert code == 2, text
    assert "range" in text and "Traceback" not in text, text


@pytest.mark.parametrize("args", [
    ["--traffic", MIN64, "--duration-ms", "inf"], ["--traffic", MIN64, "--duration-ms", "nan"],
    ["--traffic", MIN64, "--max-loss", "nan"], ["--cycles", "99999999999999999999999"],
    ["--traffic", MIN64, "--kill-control-at", "nan"],
])  # fmt: skip
def test_run_refuses_nan_inf_and_huge_numbers(router_elf: Path, args: list[object]) -> None:
    code, text = npk("run", router_elf, *args)
    assert code == 2 and "range" in text, text


def test_run_bounds_a_pcap_directory_as_a_spec(router_elf: Path, in64: Path) -> None:
    code, text = npk("run", router_elf, "--traffic", in64, "--duration-ms", "100000")
    assert code == 2 and "0<=x<=60000" in text, text
    with pytest.raises(TrafficError, match="60 s"):
        load_traffic_source(in64, 100_000 * 10**6)


def test_help_shows_percent_signs_once() -> None:
    for cmd in ("demo", "run"):
        code, text = npk(cmd, "--help")
        text = " ".join(text.split())
        assert code == 0 and "loss, % of what the oracle forwards" in text and "%%" not in text, text


# ---------------------------------------------------------------- runs that test nothing, --no-drain


def test_a_run_offering_no_packets_fails(router_elf: Path, in64: Path, tmp_path: Path) -> None:
    code, text = npk("run", router_elf, "--traffic", in64, "--duration-ms", "0", "--json")
    assert code == 1
    s = json.loads(text[text.index("{"):text.rindex("}") + 1])
    assert s["totals"]["offered"] == 0 and s["verdict"]["ok"] is False
    assert any(r.startswith("no packets offered") for r in s["verdict"]["reasons"]), s["verdict"]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "port0.pcap").write_bytes((in64 / "port0.pcap").read_bytes()[:24])  # the header alone
    code, text = npk("run", router_elf, "--traffic", empty, "--duration-ms", "0.01")
    assert code == 1 and "no packets offered" in text, text


def test_demo_no_drain_stops_at_once() -> None:
    code, text = npk("demo", "--ms", "0.05", "--no-drain", "--json")
    s = json.loads(text[text.index("{"):text.rindex("}") + 1])
    # it ran 0.05 ms, not 0.05 + the 5 ms drain cap, and so left packets on their way
    assert s["emulated_ms"] == 0.05 and s["drain"]["enabled"] is False, (s["emulated_ms"], s["drain"])
    assert s["in_flight"]["count"] > 0 and code == 1


# ---------------------------------------------------------------- outputs


def test_link_and_route_build_into_a_missing_directory(tmp_path: Path) -> None:
    elf, sram = tmp_path / "nodir" / "x.elf", tmp_path / "nodir" / "s.bin"
    code, text = npk("link", "pipelined", "-o", elf)
    assert code == 1 and f"cannot write {elf}: No such file or directory" in text, text
    code, text = npk("route", "build", ROOT / "examples" / "traffic" / "routes.txt", "-o", sram)
    assert code == 1 and f"cannot write {sram}: No such file or directory" in text, text


def test_write_output_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    from npkit.asm.base.writing import OutputError, write_output

    with pytest.raises(OutputError, match=r"cannot write .*/nodir/f: No such file"):
        write_output(tmp_path / "nodir" / "f", b"x")
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError, match="cannot write .*/d: Is a directory"):
        write_output(tmp_path / "d", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"] and not list((tmp_path / "d").iterdir())
    write_output(tmp_path / "f", b"abc")
    assert (tmp_path / "f").read_bytes() == b"abc" and sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"]


# ---------------------------------------------------------------- -D lookup_cache: a flag


def _words(params: dict[str, object]) -> list[tuple[str, list[int], dict[str, str]]]:
    from npkit.toolchain.system.layout import load_layout
    from npkit.toolchain.system.link import link

    image = link("pipelined", params)
    blocks = load_layout("pipelined", params).blocks
    return [(p.name, list(p.words), blocks[p.name].defines) for p in image.programs]


def test_lookup_cache_is_a_flag() -> None:
    """0, '' and 'maybe' turned the CAM cache on (the define was tested with #ifdef)."""
    from npkit.toolchain.system.layout import LinkError, parse_defines

    default = _words({})
    for off in ("false", "0", "no", "off"):
        assert _words(parse_defines([f"lookup_cache={off}"])) == default, off
    on = _words(parse_defines(["lookup_cache=1"]))
    assert on != default and dict((n, d) for n, _, d in on)["lookup"]["LOOKUP_CAM_CACHE"] == "1"
    assert "LOOKUP_CAM_CACHE" not in dict((n, d) for n, _, d in default)["lookup"]
    for on_word in ("true", "yes", "on"):
        assert _words(parse_defines([f"lookup_cache={on_word}"])) == on, on_word
    for bad in ("maybe", "7", ""):
        with pytest.raises(LinkError, match=r"pipelined.yaml:\d+: blocks.lookup.flags.LOOKUP_CAM_CACHE: "
                                            r"a flag is true or false"):
            _words(parse_defines([f"lookup_cache={bad}"]))
    code, text = npk("link", "pipelined", "-D", "lookup_cache=maybe", "-o", "/dev/null")
    assert code == 1 and "got 'maybe'" in text, text


# ---------------------------------------------------------------- the chip a router is linked for


def test_link_refuses_a_chip_the_router_does_not_fit() -> None:
    """`npk link --config ixp2400` wrote an image that failed only when run ("read sram:
    out of range"): the memory map needs SRAM channels 1 and 2, some layouts MEs past 8."""
    code, text = npk("link", "pipelined", "--config", "ixp2400", "-o", "/dev/null")
    assert code == 1 and "does not fit chip config ixp2400" in text, text
    assert "control plane's area" in text and "SRAM channel 2 (0x80300000), past the chip's 2 SRAM channel" in text
    code, text = npk("link", "parallel", "--config", "ixp2400", "-o", "/dev/null")
    assert code == 1 and "block qm is on ME 14" in text and "block tx is on ME 15" in text, text
    code, text = npk("link", "pipelined", "--config", "ixp2400", "-D", "control=host", "-o", "/dev/null")
    assert code == 1 and "mailbox of host_exceptions is in SRAM channel 2" in text, text
    code, text = npk("demo", "--config", "ixp2400", "--ms", "0.01")
    assert code == 1 and "does not fit chip config ixp2400" in text, text


# ---------------------------------------------------------------- route files: one set of checks


ROUTER = ROOT / "examples" / "traffic" / "router.yaml"
BAD_ROUTES = {  # file text, line, what the error says
    "nhoffsubnet": ("1.2.3.0/24 10.0.9.2 0\n", 1, "next hop 10.0.9.2 is not on port 0's subnet"),
    "ownaddr": ("10.0.0.1/32 10.0.0.2 0\n", 1, "10.0.0.1 is port 0's own address"),
    "connected": ("# a comment\n\n10.0.0.0/24 10.0.0.2 0\n", 3, "repeats the connected subnet of port 0"),
    "badport": ("1.2.3.0/24 10.0.0.2 0\n1.2.4.0/24 10.0.0.2 7\n", 2, "port 7 does not exist"),
}


@pytest.mark.parametrize("name", sorted(BAD_ROUTES))
def test_route_link_and_demo_check_a_route_file_alike(tmp_path: Path, name: str) -> None:
    """`npk route` let an off-subnet next hop and an own-address /32 through, said
    "duplicate route" for a connected subnet and gave a bad port no line."""
    text, line, why = BAD_ROUTES[name]
    f = tmp_path / f"{name}.txt"
    f.write_text(text)
    for args in (["route", "stats", f, "--config", ROUTER], ["route", "lookup", f, "1.2.3.4", "--config", ROUTER],
                 ["route", "build", f, "--config", ROUTER, "-o", tmp_path / "s.bin"],
                 ["link", "pipelined", "--routes", f, "-o", tmp_path / "r.elf"],
                 ["demo", "--routes", f, "--ms", "0.01"]):  # fmt: skip
        code, out = npk(*args)
        assert code == 1 and f"Error: {f}:{line}: route " in out and why in out, (args, out)
        assert out.count(str(f)) == 1, out  # named once, and no cache file named for it
    assert not (tmp_path / "s.bin").exists() and not (tmp_path / "r.elf").exists()


def test_a_byte_order_mark_before_the_first_route_is_ignored(tmp_path: Path) -> None:
    from npkit.emulator.traffic.routes import load_route_columns, parse_route_columns, parse_routes

    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbf1.0.0.0/8 10.0.0.2 0\n")
    cols = load_route_columns(f)
    assert [(r.prefix, r.length) for r in cols] == [(0x01000000, 8)]
    assert list(parse_route_columns("\ufeff1.0.0.0/8 10.0.0.2 0\n")) == list(cols)
    assert parse_routes("\ufeff1.0.0.0/8 10.0.0.2 0\n") == list(cols)
    code, out = npk("demo", "--routes", f, "--ms", "0.01", "--json")
    assert code == 0, out
    code, out = npk("route", "lookup", f, "1.2.3.4", "--config", ROUTER)
    assert code == 0 and "route 1.0.0.0/8" in out, out


def test_a_binary_route_file_is_refused_at_once(tmp_path: Path) -> None:
    """`npk link --routes /dev/zero` read on without end (the route file's digest came first)."""
    code, out = npk("link", "pipelined", "--routes", "/dev/zero", "-o", tmp_path / "r.elf")
    assert code == 1 and "/dev/zero: route file is a character device, not a regular file" in out, out


@pytest.mark.parametrize("command", [["link", "pipelined", "-o", "x.elf"], ["demo", "--ms", "0.01"]])
@pytest.mark.parametrize("define", ["=4", "qm", " =1"])
def test_a_malformed_minus_d_is_a_usage_error(command: list[str], define: str) -> None:
    """It was exit 1, as if the layout were wrong (npk asm's -D was already exit 2)."""
    r = CliRunner().invoke(main, [*command, "-D", define])
    assert r.exit_code == 2 and f"-D {define}: expected NAME=VALUE" in r.output, r.output


def test_link_refuses_to_write_over_its_inputs(tmp_path: Path) -> None:
    layout = tmp_path / "lay.yaml"
    layout.write_text((ROOT / "microcode" / "layouts" / "pipelined.yaml").read_text())
    routes = tmp_path / "routes.txt"
    routes.write_text((ROOT / "examples" / "traffic" / "routes.txt").read_text())
    for args, what in (([str(layout), "-o", str(layout)], "LAYOUT"),
                       (["pipelined", "--routes", str(routes), "-o", str(routes)], "--routes")):  # fmt: skip
        r = CliRunner().invoke(main, ["link", *args])
        assert r.exit_code == 2 and f"-o is also the input {what}" in r.output, r.output
    assert routes.read_text() == (ROOT / "examples" / "traffic" / "routes.txt").read_text()
    r = CliRunner().invoke(main, ["route", "build", str(routes), "-o", str(routes)])
    assert r.exit_code == 2 and "-o is also the input ROUTES" in r.output


def test_a_router_with_the_hosts_io_stand_ins_is_refused_for_traffic(tmp_path: Path) -> None:
    """io=host replaces rx and tx with the host's stand-ins: frames offered on the MSF were
    never read, and the run ended "stuck" with every packet in flight (before)."""
    elf = tmp_path / "host_io.elf"
    assert npk("link", "pipelined", "-D", "io=host", "-o", elf)[0] == 0
    code, text = npk("run", elf, "--traffic", MIN64, "--duration-ms", "0.02", "--json")
    assert code == 1 and "linked with io=host" in text and "stuck" not in text, text
    code, text = npk("demo", "-D", "io=host", "--ms", "0.02")
    assert code == 2 and "-D io" in text and "stuck" not in text, text
