"""An application's tables declared once (npkit.toolchain.system.app_tables,
docs/applications.md "Tables"): the schema and its located errors, the packed entries and
the generated header, `npk link --app` putting them into the image's memory and metadata,
the overlap check against npkit's memory, and the model's rows from the image."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npkit.emulator.traffic.model import Prefix
from npkit.toolchain.system.app import load_app, model_of_image, reasons_of_image
from npkit.toolchain.system.app_tables import TablesError, load_tables
from npkit.toolchain.system.errors import LinkError
from npkit.toolchain.system.link import link

ROOT = Path(__file__).resolve().parents[2]

TABLES = """\
acl:
  memory: sram
  base: 0xC0010000
  fields:
    src: {type: prefix}
    port: {bits: 16}
    proto: {bits: 8}
  rows:
    - {src: 10.1.0.0/16, port: 23, proto: 6}
    - {src: 192.168.0.0/24, port: 53, proto: 17}
"""

MODEL = '''\
from npkit.emulator.traffic.model import rule


@rule(after="no_route", drop="acl_deny")
def deny(frame, tables):
    return False
'''

REASONS = "drops:\n  acl_deny: {code: 40, step: 30, rule: an ACL rule matched}\n"


def _tables(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "tables.yaml"
    p.write_text(text)
    return p


def _app(tmp_path: Path, tables: str = TABLES, check: str = "") -> Path:
    """An application extending ipv4 with tables, a model, and a copy of hdr_format that
    includes acl_table.h (and `check`: preprocessor tests on its defines)."""
    d = tmp_path / "app"
    (d / "hdr_format").mkdir(parents=True)
    src = (ROOT / "microcode" / "hdr_format" / "hdr_format.uc").read_text()
    marker = '#include "npk_block.h"'
    (d / "hdr_format" / "hdr_format.uc").write_text(src.replace(marker, f'{marker}\n#include "acl_table.h"\n{check}', 1))
    (d / "tables.yaml").write_text(tables)
    (d / "reasons.yaml").write_text(REASONS)
    (d / "model.py").write_text(MODEL)
    (d / "app.yaml").write_text(yaml.safe_dump({"name": "t", "extends": "ipv4", "tables": "tables.yaml",
                                                "reasons": "reasons.yaml", "model": "model.py"}))  # fmt: skip
    return d


def test_entries_are_packed_big_endian_and_the_header_places_each_field(tmp_path: Path) -> None:
    (t,) = load_tables(_tables(tmp_path, TABLES))
    assert (t.name, t.memory, t.base, t.entry_words) == ("acl", "sram", 0xC0010000, 3)
    # row 0: 10.1.0.0, mask /16, then port 23 in bits 31..16 and proto 6 in bits 15..8
    assert t.data() == bytes.fromhex("0a010000" "ffff0000" "00170600" "c0a80000" "ffffff00" "00351100")
    h = t.header()
    for line in ("#define ACL_BASE 0xc0010000", "#define ACL_ENTRY_WORDS 3", "#define ACL_ROWS 2",
                 "#define ACL_SRC_WORD 0", "#define ACL_SRC_NETMASK_WORD 1", "#define ACL_PORT_WORD 2",
                 "#define ACL_PORT_SHIFT 16", "#define ACL_PORT_MASK 0xffff", "#define ACL_PROTO_SHIFT 8",
                 "#define ACL_PROTO_MASK 0xff"):  # fmt: skip
        assert line in h.splitlines(), line
    assert t.rows[0] == {"src": Prefix(0x0A010000, 16), "port": 23, "proto": 6}
    assert t.rows[0]["src"].matches(0x0A01FF01) and not t.rows[0]["src"].matches(0x0A020001)


@pytest.mark.parametrize(("text", "expect"), [
    (TABLES.replace("port: 23", "port: 70000"), ":9: acl.rows[0].port: 70000: a 16-bit unsigned integer"),
    (TABLES.replace("10.1.0.0/16", "10.1.0.1/16"), ":9: acl.rows[0].src: '10.1.0.1/16': an IPv4 prefix"),
    (TABLES.replace("port: 23, ", ""), ":9: acl.rows[0]: row 0 lacks field port"),
    (TABLES.replace("proto: 6}", "proto: 6, colour: 1}"), ":9: acl.rows[0].colour: 'colour': not a field"),
    (TABLES.replace("0xC0010000", "0xC0010002"), ":3: acl.base: 0xc0010002: a table starts on a longword"),
    (TABLES.replace("memory: sram", "memory: dram"), ":2: acl.memory: "),
    (TABLES.replace("{bits: 16}", "{type: uint}"), ":6: acl.fields.port.bits: a uint field needs its width"),
    (TABLES.replace("memory: sram\n  base: 0xC0010000", "memory: scratch\n  base: 0x3ff0"), ":3: acl.base: "),
    (TABLES + TABLES.replace("acl:", "acl2:").replace("0xC0010000", "0xC0010008"),
     ":13: acl2.base: table acl2 overlaps table acl"),
])  # fmt: skip
def test_table_errors_are_located(tmp_path: Path, text: str, expect: str) -> None:
    p = _tables(tmp_path, text)
    with pytest.raises(TablesError) as e:
        load_tables(p)
    assert str(e.value).startswith(f"{p}{expect}"), str(e.value)


def test_link_puts_the_tables_in_memory_a_header_beside_reasons_h_and_rows_in_meta(tmp_path: Path) -> None:
    check = "#if (ACL_ROWS != 2) || (ACL_PORT_WORD != 2) || (DROP_ACL_DENY != 40)\n#error acl_table.h\n#endif\n"
    app = load_app(_app(tmp_path, check=check))
    image = link("pipelined", app=app)
    init = [(s, a, d) for p in image.programs for s, a, d in p.init_mem]
    (t,) = load_tables(app.file("tables"))
    assert ("sram", 0xC0010000, t.data()) in init
    assert image.meta["app"]["tables"]["acl"]["rows"][1] == {"src": [0xC0A80000, 24], "port": 53, "proto": 17}
    model = model_of_image(image.meta, reasons_of_image(image.meta))
    assert model is not None and model.tables == {"acl": t.rows}
    assert not (ROOT / "microcode" / "include" / "acl_table.h").exists()


def test_link_refuses_a_table_over_npkits_memory(tmp_path: Path) -> None:
    over = TABLES.replace("0xC0010000", "0x40010000")  # the packet descriptors (sysmap)
    with pytest.raises(LinkError, match=r"sram 0x40010000\.\.0x40010017 is claimed twice: by .*table acl"):
        link("pipelined", app=load_app(_app(tmp_path, tables=over)))


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 1 << 33), st.floats(allow_nan=True),
                     st.sampled_from(["sram", "scratch", "prefix", "ipv4", "uint", "10.0.0.0/8", "10.0.0.1",
                                      "1.2.3.4/33", ""]), st.text(max_size=6))  # fmt: skip
_ANY = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                    max_leaves=6)  # fmt: skip
_FIELD = st.fixed_dictionaries({}, optional={"type": _SCALARS, "bits": st.integers(-1, 40) | _SCALARS})
_FIELDS = st.dictionaries(st.sampled_from(["src", "port", "9x", "p"]), _FIELD | _ANY, max_size=3)
_ROW = st.dictionaries(st.sampled_from(["src", "port", "p", "q"]), _SCALARS, max_size=3)
_TABLE = st.fixed_dictionaries({}, optional={"memory": _SCALARS, "base": st.integers(-4, 1 << 32) | _SCALARS,
                                             "fields": _FIELDS | _ANY, "rows": st.lists(_ROW, max_size=3) | _ANY,
                                             "other": _SCALARS})  # fmt: skip
_FILES = st.dictionaries(st.sampled_from(["acl", "b", "1bad"]), _TABLE | _ANY, max_size=2) | _ANY
_LOCATED = re.compile(r"^/\S+(:\d+)?: ")


@settings(max_examples=200, deadline=10_000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(_FILES)
def test_any_tables_file_gives_tables_or_a_located_error(tmp_path: Path, data: Any) -> None:
    folder = tmp_path / "tz"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    p = _tables(folder, yaml.safe_dump(data))
    try:
        tables = load_tables(p)
    except TablesError as e:
        assert _LOCATED.match(str(e)) and str(e).startswith(str(p)), str(e)
        return
    for t in tables:
        assert len(t.data()) == 4 * t.entry_words * len(t.rows)
        assert f"#define {t.name.upper()}_ROWS {len(t.rows)}" in t.header()
