"""The SPP's slice file (docs/spp.md §3): it loads, compiles into the tables the
microcode reads, and every mistake is a located error (file:line: field: what), never a
traceback; the generated tables.yaml and traffic specs are current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spp.spp_files import SPP, module

slices = module("slices")
ROUTER = str((SPP / "../../traffic/router.yaml").resolve())


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "slices.yaml"
    p.write_text(text.replace("ROUTER", ROUTER))
    return p


def test_the_example_compiles_into_meta_interfaces_filters_and_fingers() -> None:
    sub = slices.load_slices(SPP / "slices.yaml")
    assert [(s.name, s.option) for s in sub.slices] == [("v4a", "ipv4"), ("v4b", "ipv4"), ("i3a", "i3"),
                                                        ("i3ping", "i3")]
    assert len(sub.meta_ifs) == 17 and len(sub.filters()) == 27  # with the experiments' (Figure 11, latency)
    rows = sub.meta_if_rows()
    assert rows[0] == {"ip": 0x0A000001, "udp": 33001, "port": 0, "option": 1, "slice": 1, "slice_index": 0, "valid": 1}
    (addr, words), (addr2, _) = sub.finger_blocks()
    assert addr2 == addr + slices.FINGER_BLOCK
    assert addr == slices.FINGER_BASE and len(words) == 4 * (2 + 64)
    i3 = sub.by_name("i3a")
    assert words[0] == 3 << 16 | 3 and words[2:4] == [0x40000000, 0]           # slice 3, 3 fingers; node id
    f62 = words[4 * (2 + 62) : 4 * (2 + 62) + 2]
    assert f62[0] >> 31 == 1 and f62[1] == 0x0A000402                            # finger 62 -> 10.0.4.2
    assert i3.in_range(0x3000000000000001) and not i3.in_range(0x2000000000000000)
    assert i3.in_range(0x4000000000000000) and not i3.in_range(0x4000000000000001)
    assert i3.finger_for(0x5000000000000000) == 60 and i3.finger_for(0x1000000000000000) == 63


def test_the_first_filter_key_is_docs_spp_md_section_5() -> None:
    sub = slices.load_slices(SPP / "slices.yaml")
    f = sub.filters()[0]  # {dst: 172.16.1.0/24, src: 192.168.0.0/16, proto: udp, dport: 53}
    assert slices.key_words(f.key) == [1 << 16 | 1 << 8, 0xAC100100, 0xC0A80000, 53 << 16, 17 << 24]
    assert slices.key_words(f.mask) == [0xFFFFFF00, 0xFFFFFF00, 0xFFFF0000, 0xFFFF0000, 0xFF000000]


def test_the_generated_files_are_current(tmp_path: Path) -> None:
    assert slices.main(["--check"]) == 0, "examples/apps/spp/tables.yaml is stale: python slices.py"
    make = module("make_traffic")
    for name, (fn, _) in make.SPECS.items():
        assert yaml.safe_load((SPP / name).read_text()) == fn(), f"{name} is stale: python make_traffic.py"


def test_the_layout_quanta_are_the_slices_shares() -> None:
    sub = slices.load_slices(SPP / "slices.yaml")
    quanta = yaml.safe_load((SPP / "spp.yaml").read_text())["qm"]["drr_quanta"]
    assert [quanta[s.index] for s in sub.slices] == [round(s.share * 10000) for s in sub.slices]


GOOD = """version: 1
router: ROUTER
slices:
  - id: 1
    name: a
    code_option: ipv4
    share: 0.5
    meta_interfaces:
      - {name: m0, port: 0, ip: 10.0.0.1, udp: 33001}
      - {name: m1, port: 1, ip: 10.0.1.1, udp: 33001}
    filters:
      - {dst: 172.16.0.0/16, out: m1, next_hop: 10.0.1.2:33001}
  - id: 2
    name: b
    code_option: i3
    share: 0.5
    meta_interfaces:
      - {name: n0, port: 2, ip: 10.0.2.1, udp: 34001}
    i3:
      node_id: 0x40
      predecessor: 0x20
      fingers:
        - {k: 3, next_hop: 10.0.2.2:34001, out: n0}
    filters:
      - {trigger: 0x30, out: n0, next_hop: 10.0.2.3:1}
"""

BAD = [  # (replace this, with this, the error names this line, and says this)
    ("id: 2", "id: 1", 13, "slices[1].id: slice id 1 is slices[0]'s too"),
    ("share: 0.5\n    meta_interfaces:\n      - {name: n0", "share: 0.7\n    meta_interfaces:\n      - {name: n0",
     3, "the shares add up to 1.2: at most 1"),
    ("ip: 10.0.1.1", "ip: 10.0.1.9", 10, "10.0.1.9 is not port 1's address"),
    ("port: 2,", "port: 9,", 18, "port 9: the router has ports 0..4"),
    ("next_hop: 10.0.1.2:33001", "next_hop: 10.0.1.77:33001", 12, "no ARP entry"),
    ("next_hop: 10.0.1.2:33001", "next_hop: 10.0.0.2:33001", 12, "not on the subnet of port 1"),
    ("out: m1", "out: zz", 12, "'zz' is not a meta-interface of slice a"),
    ("dst: 172.16.0.0/16", "dst: 172.16.0.1/16", 12, "host bits set"),
    ("trigger: 0x30", "trigger: 0x31/2", 25, "bits set beyond the /2 prefix"),
    ("k: 3", "k: 64", 23, "must be in 0..63, got 64"),
    ("predecessor: 0x20", "predecessor: 0x40", 21, "equal to node_id"),
    ("code_option: i3", "code_option: i4", 15, "'ipv4' or 'i3'"),
    ("udp: 34001}", "udp: 33001}\n      - {name: n1, port: 0, ip: 10.0.0.1, udp: 33001}", 19,
     "port 0 10.0.0.1:33001 is already slice a's m0"),
    ("{dst: 172.16.0.0/16,", "{dst: 172.16.0.0/16, trigger: 0x1,", 12, "trigger: not a field of an ipv4 filter"),
    ("{trigger: 0x30,", "{trigger: 0x30, dport: 80,", 25, "dport: not a field of an i3 filter"),
    ("router: ROUTER", "router: nowhere.yaml", 2, "nowhere.yaml"),
    ("    filters:\n      - {dst", "    colour: red\n    filters:\n      - {dst", 11, "colour"),
]


def test_the_good_file_loads(tmp_path: Path) -> None:
    sub = slices.load_slices(_write(tmp_path, GOOD))
    assert [s.name for s in sub.slices] == ["a", "b"]


@pytest.mark.parametrize(("old", "new", "line", "says"), BAD, ids=[b[3][:40] for b in BAD])
def test_a_mistake_is_a_located_error(tmp_path: Path, old: str, new: str, line: int, says: str) -> None:
    assert old in GOOD
    p = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(slices.SliceError) as e:
        slices.load_slices(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: "), msg
    assert says in msg, msg


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="abcdefgilmnoprstuvxyz0123456789:.-_/{}[], \n*'\"", max_size=40),
       st.integers(min_value=0, max_value=len(GOOD)))
def test_fuzz_edits_give_a_located_error_or_a_good_file(tmp_path: Path, junk: str, at: int) -> None:
    p = _write(tmp_path, GOOD[:at] + junk + GOOD[at:])
    try:
        slices.load_slices(p)
    except slices.SliceError as e:
        assert re.match(rf"{re.escape(str(p))}(:\d+)?: ", str(e)), str(e)


def test_more_meta_interfaces_than_the_block_keeps_is_a_located_error(tmp_path: Path) -> None:
    def one(i: int, n: int) -> str:
        mis = "\n".join(f"      - {{name: m{k}, port: 0, ip: 10.0.0.1, udp: {1000 * i + k}}}" for k in range(n))
        return (f"  - id: {i}\n    name: s{i}\n    code_option: ipv4\n    share: 0.5\n"
                f"    meta_interfaces:\n{mis}\n")
    p = _write(tmp_path, "version: 1\nrouter: ROUTER\nslices:\n" + one(1, 17) + one(2, 17))
    with pytest.raises(slices.SliceError) as e:
        slices.load_slices(p)
    assert str(e.value).startswith(f"{p}:3: slices: 34 meta-interfaces: at most 32"), str(e.value)
