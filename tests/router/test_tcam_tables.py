"""A TCAM's contents as an application table (tables.yaml `memory: tcam`, docs/tcam.md):
the schema's located errors, the packed key, mask and result, the header, `npk link --app`
putting the rows into the TCAM window of the app's chip config (`chip:`), the model's rows
and `tcam_match`, and the chip loaded from the image answering as the model says."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given

from npkit.emulator.binding import Chip
from npkit.emulator.loader import LoadError, load_image
from npkit.emulator.traffic.model import Prefix, Ternary, tcam_match
from npkit.toolchain.system.app import AppError, load_app
from npkit.toolchain.system.app_tables import TablesError, load_tables, model_rows
from npkit.toolchain.system.errors import LinkError
from npkit.toolchain.system.link import link

from ..formats.test_fuzz_formats import FUZZ, load_or_refuse, mutated

ROOT = Path(__file__).resolve().parents[2]
SPP = ROOT / "examples" / "chips" / "ixp2850_spp.yaml"

TABLES = """\
filters:
  memory: tcam
  first_entry: 4
  fields:
    dst: {type: prefix}
    dport: {bits: 16}
    proto: {bits: 8}
  result:
    qid: {bits: 16}
    port: {bits: 4}
  rows:
    - {dst: 10.1.0.0/16, dport: 80, proto: 6, qid: 3, port: 1}
    - {dst: 10.0.0.0/8, dport: "*", proto: {value: 16, mask: 0xF0}, qid: 9, port: 2}
    - {dst: "*", dport: any, proto: "*", qid: 0xFFFF, port: 15}
"""


def _tables(tmp_path: Path, text: str = TABLES) -> Path:
    p = tmp_path / "tables.yaml"
    p.write_text(text)
    return p


def test_rows_pack_into_entries_and_the_header(tmp_path: Path) -> None:
    (t,) = load_tables(_tables(tmp_path))
    assert (t.memory, t.first_entry, t.entry_words) == ("tcam", 4, 2)
    assert t.rows[1]["proto"] == Ternary(16, 0xF0, 8) and t.rows[0]["dst"] == Prefix(0x0A010000, 16)
    dst = t.rows[0]["dst"]
    assert (dst.value, dst.mask) == (0x0A010000, 0xFFFF0000)  # every key field has value and mask
    raw = t.tcam_entries()
    assert len(raw) == 3 * 128
    words = [int.from_bytes(raw[128 + 4 * i: 128 + 4 * i + 4], "big") for i in range(21)]
    # row 1: key dst | dport, proto; mask /8 | 0 dport, 0xF0 proto; result qid 9, port 2
    assert words[:2] == [0x0A000000, 0x00001000] and words[9:11] == [0xFF000000, 0x0000F000]
    assert words[18:21] == [0x00092000, 0, 0x80000000]
    h = t.header().splitlines()
    for line in ("#define FILTERS_FIRST_ENTRY 4", "#define FILTERS_ROWS 3", "#define FILTERS_KEY_LW 2",
                 "#define FILTERS_DPORT_WORD 1", "#define FILTERS_DPORT_SHIFT 16", "#define FILTERS_PROTO_SHIFT 8",
                 "#define FILTERS_QID_RES_WORD 0", "#define FILTERS_QID_RES_SHIFT 16",
                 "#define FILTERS_PORT_RES_SHIFT 12", "#define FILTERS_PORT_RES_MASK 0xf"):  # fmt: skip
        assert line in h, line


@pytest.mark.parametrize(("old", "new", "expect"), [
    ("first_entry: 4", "base: 0x80600000", ":3: filters.base: a tcam table has no base"),
    ("dport: 80,", "dport: 70000,", ":12: filters.rows[0].dport: 70000: a 16-bit unsigned integer"),
    ("{value: 16, mask: 0xF0}", "{value: 17, mask: 0xF0}", ":13: filters.rows[1].proto.value: 0x11 has bits"),
    ("{value: 16, mask: 0xF0}", "{value: 16}", ":13: filters.rows[1].proto: {'value': 16}: a ternary value"),
    ("dport: any, ", "", ":14: filters.rows[2]: row 2 lacks field dport (\"*\": any value)"),
    ("qid: 3, ", "", ":12: filters.rows[0]: row 0 lacks field qid"),
    ("port: {bits: 4}", "port: {bits: 32}\n    more: {bits: 32}", ":8: filters.result: the result fields take more"),
    ("first_entry: 4", "first_entry: 8190", ":11: filters.rows: 3 rows from entry 8190"),
    ("qid: {bits: 16}", "dport: {bits: 16}", ":9: filters.result.dport: 'dport' is a key field too"),
])  # fmt: skip
def test_errors_are_located(tmp_path: Path, old: str, new: str, expect: str) -> None:
    assert old in TABLES
    p = _tables(tmp_path, TABLES.replace(old, new, 1))
    with pytest.raises(TablesError) as e:
        load_tables(p)
    assert str(e.value).startswith(f"{p}{expect}"), str(e.value)


def test_model_rows_and_tcam_match(tmp_path: Path) -> None:
    (t,) = load_tables(_tables(tmp_path))
    rows = model_rows({"filters": t.record()})["filters"]
    assert [r["_entry"] for r in rows] == [4, 5, 6]
    hits = tcam_match(rows, {"dst": 0x0A010203, "dport": 80, "proto": 6})
    assert [r["qid"] for r in hits] == [3, 0xFFFF]  # row 1: proto 6 is not 0x1_
    hits = tcam_match(rows, {"dst": 0x0A020304, "dport": 22, "proto": 17})
    assert [r["_entry"] for r in hits] == [5, 6]
    assert [r["port"] for r in tcam_match(rows, {"dst": 1, "dport": 1, "proto": 1})] == [15]


def _app(tmp_path: Path, chip: str | None = str(SPP), tables: str = TABLES) -> Path:
    d = tmp_path / "app"
    d.mkdir()
    (d / "tables.yaml").write_text(tables)
    manifest = {"name": "t", "extends": "ipv4", "tables": "tables.yaml"}
    if chip is not None:
        manifest["chip"] = chip
    (d / "app.yaml").write_text(yaml.safe_dump(manifest))
    return d


def test_link_fills_the_tcam_of_the_apps_chip(tmp_path: Path) -> None:
    app = load_app(_app(tmp_path))
    assert app.chip == str(SPP)
    image = link("pipelined", app=app)
    (t,) = load_tables(app.file("tables"))
    init = [(s, a, d) for p in image.programs for s, a, d in p.init_mem]
    assert ("sram", 0x80600000 + 4 * 128, t.tcam_entries()) in init
    rows = model_rows(image.meta["app"]["tables"])["filters"]  # what the model gets as tables["filters"]
    assert [r["_entry"] for r in rows] == [4, 5, 6]
    # the chip loaded from the image answers as the model's rows say
    chip = Chip(SPP)
    load_image(chip, image)
    assert t.key_of({"dst": 0x0A020304, "dport": 22, "proto": 17}) == [0x0A020304, 22 << 16 | 17 << 8]
    got = chip.tcam_lookup(t.key_of({"dst": 0x0A020304, "dport": 22, "proto": 17}))
    want = tcam_match(rows, {"dst": 0x0A020304, "dport": 22, "proto": 17})
    assert got["hit"] and got["count"] == len(want) and got["index"] == want[0]["_entry"]
    assert got["result"] >> 48 == want[0]["qid"] and (got["result"] >> 44) & 0xF == want[0]["port"]


def test_link_refuses_a_tcam_table_without_a_tcam(tmp_path: Path) -> None:
    with pytest.raises(LinkError, match=r"tables.yaml:1: filters: a tcam table, and chip config ixp2800 has no TCAM"):
        link("pipelined", app=load_app(_app(tmp_path, chip=None)))


def test_link_refuses_a_key_wider_than_the_chips(tmp_path: Path) -> None:
    wide = TABLES.replace("    proto: {bits: 8}\n", "    proto: {bits: 8}\n    a: {bits: 32}\n    b: {bits: 32}\n"
                          "    c: {bits: 32}\n").replace("proto: 6,", "proto: 6, a: 1, b: 2, c: 3,")
    wide = wide.replace('proto: {value', 'a: 1, b: 2, c: 3, proto: {value').replace('proto: "*",', 'proto: "*", a: 1, b: 2, c: 3,')
    with pytest.raises(LinkError, match=r"the key's fields take 160 bits as packed; the TCAM of chip config .* has 144-bit keys"):
        link("pipelined", app=load_app(_app(tmp_path, tables=wide)))


def test_app_chip_must_exist(tmp_path: Path) -> None:
    d = _app(tmp_path, chip="nosuch.yaml")
    with pytest.raises(AppError, match=r"app.yaml:1: chip: nosuch.yaml: no such file"):
        load_app(d)
    (d / "app.yaml").write_text(yaml.safe_dump({"name": "t", "extends": "ipv4", "chip": "ixp9999"}))
    with pytest.raises(AppError, match=r"app.yaml:1: chip: unknown chip config 'ixp9999'"):
        load_app(d)


def test_an_image_with_tcam_entries_needs_its_tcam(tmp_path: Path) -> None:
    image = link("pipelined", app=load_app(_app(tmp_path)))
    assert image.meta["tcam"]["base"] == 0x80600000
    with pytest.raises(LoadError, match=r"linked for a TCAM at 0x80600000 with 144-bit keys .*this chip \(ixp2800\) has no TCAM"):
        load_image(Chip("ixp2800"), image)


def test_a_router_run_of_the_app_gets_its_chip(tmp_path: Path) -> None:
    from npkit.toolchain.system.router_run import RouterRun

    app = load_app(_app(tmp_path))
    rr = RouterRun.link(app.layout_file(None), app=app)
    info = rr.chip.tcam_info()
    assert info is not None and info["base"] == 0x80600000
    # the image's rows are in the chip's TCAM before anything runs
    assert rr.chip.tcam_read(4)["valid"] and not rr.chip.tcam_read(3)["valid"]


TABLE_KEYS = ["filters", "memory", "tcam", "first_entry", "fields", "result", "rows", "type", "bits", "prefix",
              "value", "mask", "dst", "dport", "proto", "qid", "port", "base"]  # fmt: skip


@FUZZ
@given(data=mutated(TABLES, TABLE_KEYS))
def test_fuzz_tcam_tables(tmp_path: Path, data: bytes) -> None:
    """A mutated tcam table: compiled, or a TablesError naming the file (never another exception)."""
    tables = load_or_refuse(tmp_path / "tables.yaml", data, load_tables, TablesError)
    for t in tables or []:
        if t.is_tcam:
            assert len(t.tcam_entries()) == 128 * len(t.rows)
            rows = model_rows({t.name: t.record()})[t.name]
            assert [r["_entry"] for r in rows] == list(range(t.first_entry, t.first_entry + len(rows)))


def test_npk_link_uses_the_apps_chip(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from npkit.asm.image import read_image
    from npkit.toolchain.cli import main

    out = tmp_path / "spp.elf"
    run = CliRunner().invoke(main, ["link", "--app", str(_app(tmp_path)), "-o", str(out)])
    assert run.exit_code == 0, run.output
    image = read_image(out)
    assert image.meta["tcam"]["base"] == 0x80600000 and "ixp2850_spp" in image.config
