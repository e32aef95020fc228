"""Issue 10 parts 4 and 5, each as it was seen: every input file is validated with a located,
clear error (never a traceback), nonsense is refused instead of accepted silently, hostile
inputs are bounded, and the toolchain no longer gives silent wrong results."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from npkit.asm.image import Image, ImageError, Program, read_image, to_bytes
from npkit.emulator.binding import Chip, EmulatorError
from npkit.emulator.traffic.router_config import ConfigError, RouterConfig
from npkit.emulator.traffic.routes import RouteError, load_routes
from npkit.emulator.traffic.spec import SpecError, load_spec
from npkit.toolchain.cli import main
from npkit.toolchain.system.layout import LinkError, load_layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "traffic"
CHIP = ROOT / "emulator" / "configs" / "ixp2800.yaml"
NPK = [sys.executable, "-c", "from npkit.toolchain.cli import main; main()"]


def _line_of(text: str, key: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith(key))


def _no_traceback(result: Any) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return str(result.output)


def _limited() -> None:
    """A child process that cannot take the machine's memory (what main did with these inputs)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


# ---- router configs given to npk link --router-config ---------------------------------------

ROUTER = (EXAMPLES / "router.yaml").read_text()
P0 = '  - {address: 10.0.0.1/24, mac: "02:4e:50:00:00:00"}'


@pytest.mark.parametrize(("old", "new", "delta", "where"), [
    (P0, '  - {address: 10.0.0.1/24, mac: "zz:4e:50:00:00:00"}', 0, "ports[0].mac: not a MAC address"),
    (P0, '  - {address: 10.0.0.1/40, mac: "02:4e:50:00:00:00"}', 0, "ports[0].address: prefix length '40'"),
    (P0, '  - {address: 10.0.0.1/24, mac: "02:4e:50:00:00:01"}', 1,
     "ports[1].mac: MAC 02:4e:50:00:00:01 is used by another port (port 0)"),
    ("send_redirects: true", "send_redirects: maybe", 0, "send_redirects: expected true or false, got 'maybe'"),
    ("routes: routes.txt", "routes: nowhere.txt", 0, "routes: route file"),
    ("routes: routes.txt", 'routes: ["10.0.0.1/32 0.0.0.0 0"]', 0,
     "routes[0]: route 10.0.0.1/32 0.0.0.0 0: 10.0.0.1 is port 0's own address"),
    ("routes: routes.txt", 'routes: ["1.0.0.0/8 10.0.3.2 1"]', 0,
     "routes[0]: route 1.0.0.0/8 10.0.3.2 1: next hop 10.0.3.2 is not on port 1's subnet"),
])  # fmt: skip
def test_link_reports_router_config_errors_at_their_line(tmp_path: Path, old: str, new: str, delta: int,
                                                         where: str) -> None:  # fmt: skip
    shutil.copy(EXAMPLES / "routes.txt", tmp_path / "routes.txt")
    text = ROUTER.replace(old, new, 1)
    cfg = tmp_path / "r.yaml"
    cfg.write_text(text)
    r = CliRunner().invoke(main, ["link", "pipelined", "-o", str(tmp_path / "x.elf"), "--router-config", str(cfg)])
    out = _no_traceback(r)
    assert r.exit_code == 1
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln == new) + delta
    assert f"{cfg}:{line}: {where}" in out, (line, out)


@pytest.mark.parametrize(("text", "where"), [
    ("ports: []\n", "ports: List should have at least 1 item"),
    ("ports:\n  - {address: 10.0.0.1/24, mac: \"02:00:00:00:00:00\"}\narp: [1, 2]\n", "arp: expected a mapping"),
])  # fmt: skip
def test_router_config_structure(tmp_path: Path, text: str, where: str) -> None:
    cfg = tmp_path / "r.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as info:
        RouterConfig.load(cfg)
    assert str(info.value).startswith(f"{cfg}:") and where.lower() in str(info.value).lower(), str(info.value)


def test_a_routes_file_next_hop_on_the_wrong_port_is_a_link_error(tmp_path: Path) -> None:
    routes = tmp_path / "routes.txt"
    routes.write_text("1.0.0.0/8 10.0.3.2 1\n")  # 10.0.3.2 is on port 3's subnet, not port 1's
    r = CliRunner().invoke(main, ["link", "pipelined", "-o", str(tmp_path / "x.elf"), "--routes", str(routes)])
    out = _no_traceback(r)
    assert r.exit_code == 1 and "next hop 10.0.3.2 is not on port 1's subnet" in out, out


def test_a_user_host_route_on_the_routers_own_address_is_an_error(tmp_path: Path) -> None:
    routes = tmp_path / "routes.txt"
    routes.write_text("10.0.2.1/32 10.0.2.2 2\n")  # the router's own address on port 2
    r = CliRunner().invoke(main, ["link", "pipelined", "-o", str(tmp_path / "x.elf"), "--routes", str(routes)])
    out = _no_traceback(r)
    assert r.exit_code == 1 and "is port 2's own address" in out, out


def test_route_files_that_are_not_text(tmp_path: Path) -> None:
    f = tmp_path / "routes.txt"
    f.write_bytes(b"10.0.0.0/8 10.0.0.2 0\n\xff\xfe\n")
    with pytest.raises(RouteError, match=rf"{f}:2: route file is not UTF-8 text"):
        load_routes(f)
    cfg = tmp_path / "r.yaml"
    cfg.write_text(ROUTER.replace("routes: routes.txt", "routes: /dev/zero"))
    with pytest.raises(ConfigError, match=r"routes: route file '/dev/zero' is not a regular file"):
        RouterConfig.load(cfg)


def test_dev_zero_as_a_route_file_is_refused_in_bounded_memory() -> None:
    """Read until the machine ran out of memory before; now the first block says it is binary."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31));"
            "from npkit.emulator.traffic.routes import load_routes, RouteError\n"
            "try:\n    load_routes('/dev/zero')\nexcept RouteError as e:\n    print(e)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "/dev/zero: route file is a character device, not a regular file" in out.stdout, out.stderr[-500:]


# ---- chip configs ------------------------------------------------------------------------------

CHIP_TEXT = CHIP.read_text()


@pytest.mark.parametrize(("key", "value", "message"), [
    ("seed", "-1", "seed: must be in 0..2^64-1, got -1"),
    ("branch_taken_penalty", "4294967296", "branch_taken_penalty: must be in 0..2^32-1, got 4294967296"),
    ("num_me", "null", "num_me: expected an integer, got nothing (null)"),
    ("scratch_bytes", "7", "scratch_bytes: must be in 4..2^20, a multiple of 4, got 7"),
    ("ustore_words", "17", "ustore_words: must be in 256..8192, a power of two, got 17"),
])  # fmt: skip
def test_chip_config_fields_are_checked_at_their_line(tmp_path: Path, key: str, value: str, message: str) -> None:
    lines = [f"{key}: {value}" if line.startswith(f"{key}:") else line for line in CHIP_TEXT.splitlines()]
    f = tmp_path / "chip.yaml"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(EmulatorError) as info:
        Chip(str(f))
    assert str(info.value) == f"{f}:{_line_of(CHIP_TEXT, key + ':')}: {message}"


def test_scratch_must_hold_the_rings(tmp_path: Path) -> None:
    f = tmp_path / "chip.yaml"
    f.write_text(CHIP_TEXT.replace("scratch_bytes: 16384", "scratch_bytes: 4096"))
    with pytest.raises(EmulatorError, match=r"scratch_bytes: 4096 bytes cannot hold 16 scratch rings"):
        Chip(str(f))


def test_chip_config_that_is_not_text(tmp_path: Path) -> None:
    f = tmp_path / "chip.yaml"
    f.write_bytes(b"name: \xc3\x28\n")
    assert CliRunner().invoke(main, ["asm", str(ROOT / "examples" / "hello.uc"), "-o", str(tmp_path / "h.elf")]).exit_code == 0
    r = CliRunner().invoke(main, ["run", str(tmp_path / "h.elf"), "--config", str(f)])
    out = _no_traceback(r)
    assert r.exit_code != 0 and f"{f}:1: chip config is not UTF-8 text" in out


# ---- traffic specs --------------------------------------------------------------------------------


def _spec(tmp_path: Path, body: str) -> Path:
    """A spec in tmp_path with the example router; `body` after seed, router and count."""
    for name in ("router.yaml", "routes.txt"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    f = tmp_path / "spec.yaml"
    f.write_text("seed: 1\nrouter: router.yaml\ncount: 10\n" + body)
    return f


@pytest.mark.parametrize(("body", "line", "message"), [
    ("defaults:\n  size: {imix: []}\n", 5, "defaults.size.imix: a list of 1..10000 [size, weight] pairs, got []"),
    ("defaults:\n  load: 1.0e-12\n", 5, "defaults.load: 1e-12 is outside [1e-06, 1]"),
    ("defaults:\n  load: 1.2\n", 5, "defaults.load: 1.2 is outside [1e-06, 1]"),
    ("link_bps: .inf\n", 4, "link_bps: a finite rate in bits/s is needed, got inf"),
    ("ports:\n  2: {source: {pcap: x.pcap, loop: 1000000000}}\n", 5, "ports.2.source.loop: must be in 1..1000000"),
])  # fmt: skip
def test_traffic_spec_fields(tmp_path: Path, body: str, line: int, message: str) -> None:
    f = _spec(tmp_path, body)
    (tmp_path / "x.pcap").write_bytes(b"")
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert str(info.value).startswith(f"{f}:{line}: {message}"), str(info.value)


def test_traffic_count_is_bounded(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    _spec(tmp_path, "")
    f.write_text(f.read_text().replace("count: 10", "count: 2147483648"))
    with pytest.raises(SpecError, match=rf"{f}:3: count: must be in 0..10000000, got 2147483648"):
        load_spec(f)


def test_non_utf8_traffic_spec(tmp_path: Path) -> None:
    f = tmp_path / "spec.yaml"
    f.write_bytes(b"seed: 1\nrouter: \xff\n")
    with pytest.raises(SpecError, match=rf"{f}:2: traffic spec is not UTF-8 text"):
        load_spec(f)


def test_a_corrupt_pcap_record_length_is_an_error_not_a_4gb_read(tmp_path: Path) -> None:
    pcap = tmp_path / "x.pcap"
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    pcap.write_bytes(head + struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 60) + bytes(60))
    f = _spec(tmp_path, "ports:\n  0: {source: {pcap: x.pcap}}\n")
    from npkit.emulator.traffic.generator import generate

    with pytest.raises(SpecError, match=r"claims 4294967280 captured bytes \(at most 262144\)"):
        generate(load_spec(f))


def test_demo_names_the_users_traffic_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "mine.yaml"
    text = (EXAMPLES / "seed003_balanced.yaml").read_text().replace("  load: 1.0", "  load: 1.2")
    spec.write_text(text)
    shutil.copy(EXAMPLES / "router.yaml", tmp_path / "router.yaml")
    shutil.copy(EXAMPLES / "routes.txt", tmp_path / "routes.txt")
    r = CliRunner().invoke(main, ["demo", "--traffic", str(spec), "--ms", "0.01"])
    out = _no_traceback(r)
    assert r.exit_code == 1
    assert f"{spec}:{_line_of(text, 'load:')}: defaults.load: 1.2 is outside [1e-06, 1]" in out, out


def test_generation_is_capped_by_the_run(tmp_path: Path) -> None:
    """`count: 10000000` with no duration ran without end; a run's duration caps what is
    generated (traffic is generated as the run goes, window by window)."""
    from npkit.emulator.traffic.source import load_traffic_source

    f = _spec(tmp_path, "")
    f.write_text(f.read_text().replace("count: 10", "count: 10000000"))  # no duration: the run's caps it
    tr = load_traffic_source(f, duration_ns=50_000).collect()
    assert 0 < len(tr) < 500 and max(tr.times) < 50_000


def test_a_replay_loop_stops_at_the_run_end(tmp_path: Path) -> None:
    from npkit.emulator.traffic.generator import schedules
    from npkit.emulator.traffic.pcap import write_pcap

    write_pcap(tmp_path / "one.pcap", [(0, bytes(60))])
    f = _spec(tmp_path, "duration_ns: 1000000\nports:\n  0: {source: {pcap: one.pcap, loop: 1000000}}\n")
    f.write_text(f.read_text().replace("count: 10\n", ""))
    sched = schedules(load_spec(f))[0]
    assert 0 < len(sched) < 2000 and max(sched.times) < 1_000_000


# ---- image metadata -------------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "message"), [
    ({"init_regs": [("a0", None, 1 << 40)]}, "programs[0].init_regs[0][2]: must be in 0..2^32-1, got 1099511627776"),
    ({"init_mem": [("dram", (1 << 64) - 1, b"AAAA")]}, "programs[0].init_mem[0][1]: must be in 0..2^32-1"),
    ({"meta": 1.5}, "meta: expected a mapping (key: value ...), got 1.5"),
    # what `npk run` reads of a router image: a traceback (control) or taken as it was
    ({"meta": {"control": "npkd"}}, "meta.control: expected a mapping (key: value ...), got 'npkd'"),
    ({"meta": {"control": {"placement": "xscale", "program": "npkd", "exceptions_ring": 99}}},
     "meta.control.exceptions_ring: must be in 0..15, got 99"),
    ({"meta": {"sysmap": {"n_bufs": "many"}}}, "meta.sysmap.n_bufs: expected an integer, got 'many'"),
    ({"meta": {"router": [1]}}, "meta.router: expected a mapping (key: value ...), got a list"),
])  # fmt: skip
def test_image_metadata_is_checked(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    prog = Program("p", [0xF000000300], **{k: v for k, v in change.items() if k != "meta"})
    image = Image([prog])
    if "meta" in change:
        image.meta = change["meta"]
    f = tmp_path / "x.elf"
    f.write_bytes(to_bytes(image))
    with pytest.raises(ImageError) as info:
        read_image(f)
    assert str(info.value).startswith(f"{f}: .npk.meta: {message}"), str(info.value)
    r = CliRunner().invoke(main, ["run", str(f), "--cycles", "10"])
    assert r.exit_code == 1 and message in _no_traceback(r)


# ---- layouts ----------------------------------------------------------------------------------------

LAYOUT = (ROOT / "microcode" / "layouts" / "pipelined.yaml").read_text()


@pytest.mark.parametrize(("old", "new", "message"), [
    ("  qlimit: 256 ", "  qlimit: 0   ", "qm.qlimit: must be in 1..4096, got 0"),
    ("  tx_window: 40 ", "  tx_window: 0  ", "qm.tx_window: must be in 1..1024, got 0"),
    ("  quanta: 1 ", "  quanta: 256 ", "qm.quanta: a quantum is an integer in 1..255, got 256"),
])  # fmt: skip
def test_layout_qm_limits(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in LAYOUT
    text = LAYOUT.replace(old, new)
    f = tmp_path / "lay.yaml"
    f.write_text(text)
    with pytest.raises(LinkError) as info:
        load_layout(f)
    assert str(info.value) == f"{f}:{_line_of(text, new.strip().split(':')[0] + ':')}: {message}"


def test_layout_blocks_must_be_a_mapping_and_text(tmp_path: Path) -> None:
    f = tmp_path / "lay.yaml"
    f.write_text("rings: {}\nexceptions: x\nblocks: [1, 2]\n")
    with pytest.raises(LinkError, match=rf"{f}:3: blocks: expected a mapping of name -> settings, got a list"):
        load_layout(f)
    f.write_bytes(LAYOUT.encode().replace(b"# Pipelined", b"# Pipelin\xe9d"))
    with pytest.raises(LinkError, match=rf"{f}:1: layout is not UTF-8 text"):
        load_layout(f)


def test_a_minus_d_override_is_checked_too() -> None:
    with pytest.raises(LinkError, match=r"qm\.qlimit: must be in 1\.\.4096, got 0"):
        load_layout("pipelined", {"qm.qlimit": 0})


# ---- the debugger ---------------------------------------------------------------------------------


def test_binary_batch_files_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "batch.bin"
    f.write_bytes(b"print 1\n" + bytes(range(256)))
    r = CliRunner().invoke(main, ["debug", str(ROOT / "examples" / "debug" / "ttl.uc"), "--batch", str(f)])
    out = _no_traceback(r)
    assert r.exit_code == 1 and f"{f}:2: batch file holds a NUL byte" in out, out


def test_a_huge_shift_in_print_is_an_error_not_a_hang(tmp_path: Path) -> None:
    out = subprocess.run([*NPK, "debug", str(ROOT / "examples" / "debug" / "ttl.uc")], input="print 1 << 99999999999\n",
                         capture_output=True, text=True, timeout=120, preexec_fn=_limited)  # fmt: skip
    assert out.returncode == 1
    assert "<stdin>:1: error: shift count 99999999999 in '1 << 99999999999' is outside 0..64" in out.stderr


# ---- the assembler ----------------------------------------------------------------------------------


def test_a_doubling_macro_stops_at_the_control_store(tmp_path: Path) -> None:
    lines = ["#macro d0()", "    alu[a, a, +, 1]", "#endm"]
    for i in range(1, 31):
        lines += [f"#macro d{i}()", f"    d{i - 1}()", f"    d{i - 1}()", "#endm"]
    src = tmp_path / "dbl.uc"
    src.write_text("\n".join([*lines, "d30()", "ctx_arb[kill]"]) + "\n")
    out = subprocess.run([*NPK, "asm", str(src), "-o", str(tmp_path / "x.elf")], capture_output=True, text=True,
                         timeout=120, preexec_fn=_limited)  # fmt: skip
    assert out.returncode == 1
    assert "error: the expansion exceeds 32768 lines (4 x the 8192-instruction control store) while expanding " \
           f"macro d30 ({src}:124) > d29" in out.stderr  # fmt: skip
    assert not (tmp_path / "x.elf").exists()


@pytest.mark.parametrize("line", ["immed[a, 0x100000000]", "immed[c, -4294967297]", "immed[c, -2147483649]",
                                  "immed_w0[c, 0x100000005]"])  # fmt: skip
def test_immed_constants_beyond_32_bits_are_errors(line: str) -> None:
    from npkit.asm.assembler import assemble_text
    from npkit.asm.errors import AsmError

    with pytest.raises(AsmError, match="does not fit 32 bits"):
        assemble_text(f".reg a c\n{line}\nctx_arb[kill]\n")


def test_immed_accepts_both_readings_of_32_bits() -> None:
    """-1 and 0xFFFFFFFF are the same register value; -2^31 is 0x80000000."""
    assert read_image_words("immed[a, -1]") == read_image_words("immed[a, 0xFFFFFFFF]")
    assert read_image_words("immed[a, -2147483648]") == read_image_words("immed[a, 0x80000000]")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    src = tmp_path / "bom.uc"
    src.write_bytes("\ufeff.reg a\nimmed[a, 1]\nctx_arb[kill]\n".encode())
    r = CliRunner().invoke(main, ["asm", str(src), "-o", str(tmp_path / "bom.elf")])
    assert r.exit_code == 0, r.output
    assert read_image(tmp_path / "bom.elf").programs[0].words == read_image_words("immed[a, 1]")


def read_image_words(line: str) -> list[int]:
    from npkit.asm.assembler import assemble_text

    return assemble_text(f".reg a\n{line}\nctx_arb[kill]\n").program.words


def test_link_refuses_an_alloc_mem_the_route_table_would_overwrite(tmp_path: Path) -> None:
    from npkit.toolchain.system.link import link

    src = tmp_path / "b.uc"
    src.write_text(".alloc_mem tbl sram 64\n.reg x\nimmed[x, tbl]\nctx_arb[kill]\n")
    lay = {"rings": {"a": {"ring": 0, "size": 128}, "exceptions": {"ring": 11, "size": 128}},
           "exceptions": "exceptions",
           "blocks": {"feed": {"external": True, "mes": [0], "out": "a"},
                      "b": {"source": str(src), "mes": [1], "in": "a"}}}  # fmt: skip
    with pytest.raises(LinkError) as info:
        link(lay)
    assert "by block b's .alloc_mem tbl (sram 0x0..0x3f) and by the router's route table (lpm_ctl" in str(info.value)
    src.write_text(".alloc_mem tbl scratch 64\n.reg x\nimmed[x, tbl]\nctx_arb[kill]\n")
    with pytest.raises(LinkError, match=r"block b's \.alloc_mem tbl \(scratch 0x0\.\.0x3f\) and by the router's statistics counters"):
        link(lay)


def test_the_image_records_alloc_mem_sizes(tmp_path: Path) -> None:
    from npkit.asm.assembler import assemble_text

    prog = assemble_text(".alloc_mem t dram 100 8\n.reg x\nimmed[x, t]\nctx_arb[kill]\n").program
    f = tmp_path / "x.elf"
    f.write_bytes(to_bytes(Image([prog])))
    (sym,) = [s for s in read_image(f).programs[0].symbols if s.kind == "mem"]
    assert (sym.name, sym.scope, sym.size) == ("t", "dram", 100)


def test_docs_formats_md_is_current() -> None:
    from npkit.toolchain.commands.formats import DOCS_FILE, markdown

    assert DOCS_FILE.read_text(encoding="utf-8") == markdown(), "run: npk formats --markdown > docs/formats.md"
    r = CliRunner().invoke(main, ["formats", "--check", str(DOCS_FILE)])
    assert r.exit_code == 0 and "is current" in r.output


def test_experiment_designs_are_in_docs_formats_md() -> None:
    """README: every input format is in docs/formats.md; experiment designs were missing."""
    from npkit.toolchain.commands.formats import markdown
    from npkit.toolchain.experiment.design import MAX_REPLICATIONS, MAX_RUNS

    md = markdown()
    section = md.split("## Experiment design", 1)[1].split("\n## ", 1)[0]
    assert f"1..{MAX_REPLICATIONS}; points x replications <= {MAX_RUNS:,}" in section
    assert "`trial_ms` `1.0`" in section and "latency_p99_us" in section


def test_formats_check_of_a_binary_file_says_stale(tmp_path: Path) -> None:
    f = tmp_path / "formats.md"
    f.write_bytes(b"\xff\xfe\x00garbage")
    r = CliRunner().invoke(main, ["formats", "--check", str(f)])
    assert r.exit_code == 1 and f"{f} is stale" in _no_traceback(r)
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes((ROOT / "docs" / "formats.md").read_bytes().replace(b"\n", b"\r\n"))
    r = CliRunner().invoke(main, ["formats", "--check", str(crlf)])
    assert r.exit_code == 0 and "is current" in r.output


def test_refuse_overwrite_compares_files_not_spellings(tmp_path: Path) -> None:
    from npkit.asm.base.writing import SameFileError, refuse_overwrite

    src = tmp_path / "a.uc"
    src.write_text("x")
    (tmp_path / "link.uc").symlink_to(src)
    refuse_overwrite([("-o", tmp_path / "a.elf"), ("--list", None)], [("SOURCE", src), ("--config", None)])
    for out in (src, tmp_path / "." / "a.uc", tmp_path / "link.uc"):
        with pytest.raises(SameFileError, match="-o is also the input SOURCE"):
            refuse_overwrite([("-o", out)], [("SOURCE", src)])
    with pytest.raises(SameFileError, match="-o and --list name the same file"):
        refuse_overwrite([("-o", tmp_path / "new"), ("--list", tmp_path / "sub" / ".." / "new")], [])
