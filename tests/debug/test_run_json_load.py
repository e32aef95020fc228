"""run.json records everything the loader takes (open_targets): besides the images, MEs,
config, traffic, -D and layout parameters, the sources' include directories (-I) and the
scratch rings of plain images (--ring), so a run made with them replays from its run.json;
and `npk trace` names each image with the MEs it ran on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
PIPELINED = ROOT / "microcode" / "layouts" / "pipelined.yaml"

# both include inc/val.h: assembling either needs -I inc
HEADER = "#define VAL  0x1234\n#define RING (3 << 2)\n"
# context 0 puts VAL on scratch ring 3, then halts
PUT = """#include "val.h"
.reg zero v
.reg write $o
.sig s
    br!=ctx[0, idle#]
    immed[zero, 0]
    immed[v, VAL]
    alu[$o, --, b, v]
    scratch[put, $o, zero, RING, 1], ctx_swap[s]
    halt
idle#:
    ctx_arb[kill]
"""
# context 0 waits for a word on scratch ring 3 (an unconfigured ring gives none) and
# writes it twice into DRAM bytes 0..7
GET = """#include "val.h"
.reg zero v
.reg read $i
.reg write $o0 $o1
.xfer_order $o0 $o1
.sig s
    br!=ctx[0, idle#]
    immed[zero, 0]
wait#:
    scratch[get, $i, zero, RING, 1], ctx_swap[s]
    alu[v, --, b, $i]
    beq[wait#]
    alu[$o0, --, b, v]
    alu[$o1, --, b, v]
    dram[write, $o0, zero, 0, 1], ctx_swap[s]
    halt
idle#:
    ctx_arb[kill]
"""
RING = "scratch:3:base=0x2000,size=128"
WRITTEN = [[2, 0, 0x12], [3, 0, 0x34], [6, 0, 0x12], [7, 0, 0x34]]  # VAL, twice, big-endian


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """run/put.uc and run/get.uc, which include run/inc/val.h."""
    monkeypatch.chdir(tmp_path)
    d = Path("run")
    (d / "inc").mkdir(parents=True)
    (d / "inc" / "val.h").write_text(HEADER)
    (d / "put.uc").write_text(PUT)
    (d / "get.uc").write_text(GET)
    return d


def npk(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def write_run(d: Path, data: dict[str, Any]) -> None:
    """DIR/run.json, one key a line (the first on line 2)."""
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()]
    (d / "run.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")


def touches(r: Result) -> list[tuple[str, str, list[list[int]]]]:
    assert r.exit_code == 0, r.output
    return [(t["me_name"], t["at"], t["changed"]) for t in json.loads(r.stdout)["touches"]]


def test_a_run_with_include_dirs_and_rings_replays_from_its_run_json(run: Path) -> None:
    by_options = npk("why", "0", "--image", "run/put.uc@0", "--image", "run/get.uc@1", "-I", "run/inc",
                     "--ring", RING, "--buffer", "0:8", "--cycles", "2000", "--json")  # fmt: skip
    assert touches(by_options) == [("0x01", "run/get.uc:15", WRITTEN)]
    write_run(run, {"images": ["put.uc@0", "get.uc@1"], "include_dirs": ["inc"], "rings": [RING],
                    "buffer": "0:8", "cycles": 2000})  # fmt: skip
    assert touches(npk("why", "0", "--run", "run", "--json")) == touches(by_options)
    # the ring as a ring file, relative to the run directory, loads the same
    (run / "rings.yaml").write_text("rings:\n  - {ring: 3, base: 0x2000, size: 128}\n")
    write_run(run, {"images": ["put.uc@0", "get.uc@1"], "include_dirs": ["inc"], "rings": ["rings.yaml"],
                    "buffer": "0:8", "cycles": 2000})  # fmt: skip
    assert touches(npk("why", "0", "--run", "run", "--json")) == touches(by_options)


def test_what_run_json_leaves_out_is_not_loaded(run: Path) -> None:
    """Without include_dirs the sources do not assemble; without rings the getter waits."""
    write_run(run, {"images": ["put.uc@0", "get.uc@1"], "buffer": "0:8", "cycles": 2000})
    r = npk("why", "0", "--run", "run")
    assert r.exit_code == 1 and "cannot find include file 'val.h'" in r.stderr, r.output
    write_run(run, {"images": ["put.uc@0", "get.uc@1"], "include_dirs": ["inc"], "buffer": "0:8", "cycles": 2000})
    assert touches(npk("why", "0", "--run", "run", "--json")) == []
    # -I and --ring on the command line add to run.json's
    assert touches(npk("why", "0", "--run", "run", "--ring", RING, "--json")) == [("0x01", "run/get.uc:15", WRITTEN)]


def test_an_old_run_json_still_reads(run: Path) -> None:
    """A run.json written before include_dirs and rings (the header beside the sources)."""
    (run / "val.h").write_text(HEADER.replace("0x1234", "0x5678"))
    (run / "w.uc").write_text(GET.replace("wait#:\n    scratch[get, $i, zero, RING, 1], ctx_swap[s]\n"
                                          "    alu[v, --, b, $i]\n    beq[wait#]\n", "    immed[v, VAL]\n"))  # fmt: skip
    write_run(run, {"image": "w.uc", "mes": "0x10", "buffer": "0:8", "cycles": 300})
    assert touches(npk("why", "0", "--run", "run", "--json")) == [
        ("0x10", "run/w.uc:12", [[2, 0, 0x56], [3, 0, 0x78], [6, 0, 0x56], [7, 0, 0x78]])]


@pytest.mark.parametrize(("data", "message"), [
    ({"rings": ["scratch:3:base=0x2000,size=100"]},
     "run.json:4: rings[0]: 'scratch:3:base=0x2000,size=100': size: expected 128, 256, 512 or 1024, got 100"),
    ({"rings": [RING, "scratch:3:base=0x2000"]},
     "run.json:4: rings[1]: 'scratch:3:base=0x2000': give base= and size= (and optionally margin=)"),
    ({"rings": ["ring3"]}, "run.json:4: rings[0]: 'ring3': expected scratch:N:base=ADDR,size=WORDS"),
    ({"rings": [{"ring": 3}]}, "run.json:4: rings[0]: expected a string, got a mapping"),
    ({"rings": []}, "run.json:4: rings: list should have at least 1 item"),
    ({"rings": ["missing.yaml"]}, "run.json:4: rings[0]: run/missing.yaml: cannot read ring file"),
    ({"rings": [RING, "scratch:3:base=0x2200,size=128"]},
     "run.json:4: rings[1] (ring 3, scratch 0x2200..0x23ff): ring 3 is configured twice"),
    ({"include_dirs": ["inc", "nowhere"]}, "run.json:3: include_dirs[1]: run/nowhere: no such directory"),
    ({"include_dirs": "inc"}, "run.json:3: include_dirs: expected a list, got 'inc'"),
])  # fmt: skip
def test_a_bad_ring_or_include_dir_in_run_json_is_the_files_error(run: Path, data: dict[str, Any],
                                                                  message: str) -> None:  # fmt: skip
    """The file's error, as every other bad value of run.json is: exit 1, its line and key."""
    write_run(run, {"images": ["put.uc@0", "get.uc@1"], **{"include_dirs": ["inc"], **data}, "buffer": "0:8"})
    r = npk("why", "0", "--run", "run")
    assert r.exit_code == 1 and message in r.stderr and "Traceback" not in r.output, r.output


def test_rings_and_include_dirs_need_something_in_run_json_to_apply_to(run: Path) -> None:
    write_run(run, {"image": str(PIPELINED), "rings": [RING]})
    r = npk("why", "0", "--run", "run")
    assert r.exit_code == 1 and "run.json:3: rings: scratch rings for plain images; a layout configures its own" \
        in r.stderr, r.output  # fmt: skip
    r = npk("asm", "run/put.uc", "-I", "run/inc", "-o", "run/put.elf")
    assert r.exit_code == 0, r.output
    write_run(run, {"image": "put.elf", "include_dirs": ["inc"]})
    r = npk("why", "0", "--run", "run", "--buffer", "0:8")
    assert r.exit_code == 1 and "include directories for .uc sources, and the run names none" in r.stderr, r.output


def test_trace_metadata_names_each_image_with_its_mes(run: Path) -> None:
    r = npk("trace", "run/put.uc@0,1", "run/get.uc@0x10", "-I", "run/inc", "--ring", RING,
            "--cycles", "300", "-o", "t.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    meta = json.loads(Path("t.json").read_text())["metadata"]
    assert meta["images"] == ["run/put.uc@0x00,0x01", "run/get.uc@0x10"]
    assert meta["image"] == "run/put.uc@0x00,0x01 run/get.uc@0x10"
    # one image on the MEs the user named, in ranges as --me takes them; its own ME when none
    r = npk("trace", "run/put.uc", "--me", "0-3,5,7", "-I", "run/inc", "--cycles", "50", "-o", "u.json")
    assert r.exit_code == 0, r.output
    assert json.loads(Path("u.json").read_text())["metadata"]["images"] == ["run/put.uc@0x00-0x03,0x05,0x07"]
    r = npk("trace", "run/put.uc", "-I", "run/inc", "--cycles", "50", "-o", "v.json")
    assert r.exit_code == 0, r.output
    assert json.loads(Path("v.json").read_text())["metadata"]["image"] == "run/put.uc@0x00"


def test_trace_metadata_spells_mes_so_the_command_line_loads_them_again(run: Path) -> None:
    r = npk("trace", "run/put.uc@0x06-0x11", "-I", "run/inc", "--cycles", "50", "-o", "t.json")
    assert r.exit_code == 0, r.output
    (again,) = json.loads(Path("t.json").read_text())["metadata"]["images"]
    assert again == "run/put.uc@0x06,0x07,0x10,0x11"  # a range does not cross a cluster
    r = npk("trace", again, "-I", "run/inc", "--cycles", "50", "-o", "u.json")
    assert r.exit_code == 0, r.output
    names = {e["args"]["name"] for e in json.loads(Path("u.json").read_text())["traceEvents"]
             if e.get("name") == "process_name"}  # fmt: skip
    assert {"ME 0x06 (put)", "ME 0x07 (put)", "ME 0x10 (put)", "ME 0x11 (put)"} <= names
    assert json.loads(Path("u.json").read_text())["metadata"]["images"] == [again]
