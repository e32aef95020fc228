"""npk trace and npk why with several images, loaded as npk run and npk debug load them
(IMAGE@MES, one loader, the same refusals); -D read alike by run, debug, trace and why: a
preprocessor define for .uc sources, a parameter for a layout, a usage error with ELF
images only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from npkit.asm.image import write_image
from npkit.toolchain.cli import main

ROOT = Path(__file__).resolve().parents[2]
PIPELINED = ROOT / "microcode" / "layouts" / "pipelined.yaml"

# context 0 writes VAL (a -D define) twice into the 8 bytes at OFFSET of DRAM, then halts
WRITER = """.reg buf v
.reg write $$o0 $$o1
.xfer_order $$o0 $$o1
.sig wr_sig
    br!=ctx[0, idle#]
    immed[buf, 0]
    immed[v, VAL]
    alu[$$o0, --, b, v]
    alu[$$o1, --, b, v]
    dram[write, $$o0, buf, OFFSET, 1], ctx_swap[wr_sig]
    halt
idle#:
    ctx_arb[kill]
"""


@pytest.fixture
def writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """a.uc writes DRAM bytes 0..7, b.uc bytes 8..15 (VAL left to -D); c.elf is a.uc
    assembled with VAL=9."""
    from npkit.asm.assembler import assemble

    monkeypatch.chdir(tmp_path)
    Path("a.uc").write_text(WRITER.replace("OFFSET", "0"))
    Path("b.uc").write_text(WRITER.replace("OFFSET", "8"))
    write_image(Path("c.elf"), assemble("a.uc", defines={"VAL": "9"}).image)
    return tmp_path


def npk(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_trace_two_sources_on_two_mes_writes_events_for_both(writers: Path) -> None:
    r = npk("trace", "a.uc@0", "b.uc@0x10", "-D", "VAL=5", "--cycles", "300", "-o", "t.json", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(Path("t.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names[0] == "ME 0x00 (a)" and names[8] == "ME 0x10 (b)"
    # each ME's spans carry its own program's lines, and the DRAM write of each is a flow
    at = {(e["pid"], e["args"]["at"]) for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "executing"}
    assert {pid for pid, _ in at} == {0, 8}
    assert all(where.startswith("a.uc:" if pid == 0 else "b.uc:") for pid, where in at), at
    assert json.loads(r.stdout)["flows"] == 2 and json.loads(r.stdout)["tracks"] == 16
    assert doc["metadata"]["image"] == "a.uc@0x00 b.uc@0x10"


def test_trace_refuses_several_images_as_npk_run_does(writers: Path) -> None:
    r = npk("trace", "a.uc@0", "c.elf@0", "-D", "VAL=5", "-o", "t.json")
    assert r.exit_code == 1 and "ME 0x00 is assigned to both" in r.output and "Traceback" not in r.output
    r = npk("trace", "a.uc", "c.elf", "--me", "0", "-D", "VAL=5", "-o", "t.json")
    assert r.exit_code == 2 and "--me goes with a single image; give several as IMAGE@MES" in r.output, r.output
    r = npk("trace", str(PIPELINED), "a.uc@15", "-o", "t.json")
    assert r.exit_code == 2 and "a layout runs alone" in r.output, r.output
    r = npk("trace", "a.uc@0", "missing.uc@1", "-o", "t.json")
    assert r.exit_code == 2 and "'missing.uc': no such file" in r.output, r.output
    r = npk("trace", "a.uc@0", "c.elf@1", "-o", "c.elf")
    assert r.exit_code == 2 and "-o is also the input IMAGE" in r.output, r.output
    assert not Path("t.json").exists()


def test_trace_and_why_take_npk_runs_rings_and_refuse_them_alike(writers: Path) -> None:
    ping, pong = ROOT / "examples" / "ring_ping.uc", ROOT / "examples" / "ring_pong.uc"
    rings = str(ROOT / "examples" / "ring_pingpong.rings.yaml")
    r = npk("trace", f"{ping}@0", f"{pong}@1", "--ring", rings, "--cycles", "2000", "-o", "t.json")
    assert r.exit_code == 0, r.output
    names = {e["args"]["name"] for e in json.loads(Path("t.json").read_text())["traceEvents"]
             if e.get("name") == "process_name"}  # fmt: skip
    assert {"ME 0x00 (ring_ping)", "ME 0x01 (ring_pong)"} <= names
    again = "scratch:1:base=0x2000,size=256"
    r = npk("trace", f"{ping}@0", f"{pong}@1", "--ring", rings, "--ring", again, "-o", "u.json")
    assert r.exit_code == 1 and "ring 1 is configured twice" in r.output and not Path("u.json").exists()
    r = npk("why", "0", "--image", f"{ping}@0", "--image", f"{pong}@1", "--ring", rings, "--ring", again,
            "--buffer", "0:64")  # fmt: skip
    assert r.exit_code == 1 and "ring 1 is configured twice" in r.output, r.output
    r = npk("trace", str(PIPELINED), "--ring", rings, "-o", "u.json")
    assert r.exit_code == 2 and "--ring: a layout configures its own rings" in r.output, r.output


def test_why_with_two_images_credits_each_write_to_its_me_and_line(writers: Path) -> None:
    r = npk("why", "0", "--image", "a.uc@0", "--image", "b.uc@0x10", "-D", "VAL=0x1234",
            "--buffer", "0:16", "--cycles", "300", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    touches = [(t["me_name"], t["block"], t["at"], t["offset"], t["changed"]) for t in rep["touches"]]
    assert touches == [
        ("0x00", "a", "a.uc:10", 0, [[2, 0, 0x12], [3, 0, 0x34], [6, 0, 0x12], [7, 0, 0x34]]),
        ("0x10", "b", "b.uc:10", 8, [[10, 0, 0x12], [11, 0, 0x34], [14, 0, 0x12], [15, 0, 0x34]]),
    ]
    assert rep["image"] == "a.uc@0, b.uc@0x10"
    # an ELF image beside a source: -D is the source's, the image was assembled with VAL=9
    r = npk("why", "0", "--image", "c.elf@0", "--image", "b.uc@1", "-D", "VAL=4", "--buffer", "0:16", "--json")
    assert r.exit_code == 0, r.output
    assert [t["changed"][0] for t in json.loads(r.stdout)["touches"]] == [[3, 0, 9], [11, 0, 4]]
    r = npk("why", "0", "--image", "a.uc@0", "--image", "b.uc@0", "-D", "VAL=1", "--buffer", "0:16")
    assert r.exit_code == 1 and "ME 0x00 is assigned to both" in r.output and "Traceback" not in r.output
    r = npk("why", "0", "--image", "a.uc", "--image", "b.uc", "--me", "0", "-D", "VAL=1", "--buffer", "0:16")
    assert r.exit_code == 2 and "--me goes with a single image" in r.output, r.output
    r = npk("why", "0", "--image", "a.uc@0", "--image", "nope.uc@1", "--buffer", "0:16")
    assert r.exit_code == 2 and "Invalid value for '--image': 'nope.uc': no such file" in r.output, r.output


def test_why_run_dir_replays_several_images(writers: Path) -> None:
    """run.json names several images as `images` (each IMAGE@MES, relative to DIR) and the
    sources' `defines`; a run.json naming one `image` reads as before."""
    run = Path("run")
    run.mkdir()
    for name in ("a.uc", "b.uc"):
        (run / name).write_text(Path(name).read_text())
    (run / "run.json").write_text(json.dumps({"images": ["a.uc@0", "b.uc@0x10"], "defines": {"VAL": "0x1234"},
                                              "buffer": "0:16", "cycles": 300}))  # fmt: skip
    r = npk("why", "0", "--run", "run", "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert [(t["me_name"], t["at"]) for t in rep["touches"]] == [("0x00", "run/a.uc:10"), ("0x10", "run/b.uc:10")]
    assert rep["touches"][1]["changed"][0] == [10, 0, 0x12]
    (run / "run.json").write_text(json.dumps({"image": "a.uc", "mes": "0x10", "buffer": "0:16"}))
    r = npk("why", "0", "--run", "run", "-D", "VAL=3", "--json")  # -D on the command line: the source's define
    assert r.exit_code == 0, r.output
    assert [(t["me_name"], t["changed"][0]) for t in json.loads(r.stdout)["touches"]] == [("0x10", [3, 0, 3])]
    r = npk("why", "0", "--run", "run", "--image", "a.uc")
    assert r.exit_code == 2 and "--run DIR names the images (run.json); leave out --image" in r.output, r.output


@pytest.mark.parametrize(("data", "message"), [
    ({"image": "a.uc", "images": ["b.uc"]}, "run.json:1: images: give `image` or `images`, not both"),
    ({"images": ["a.uc", "b.uc"], "mes": "0"}, "run.json:1: mes: names the MEs of a single image"),
    ({"images": []}, "run.json:1: images: list should have at least 1 item"),
    ({"images": ["a.uc@0", "missing.uc@1"], "defines": {"VAL": "1"}}, "missing.uc: no such file"),
    ({"image": "a.uc@0", "mes": "1"}, "run.json: mes: a.uc@0 names its MEs and mes names them again"),
    ({"image": "c.elf", "defines": {"VAL": "1"}}, "run.json: defines: preprocessor defines for .uc sources, and "
                                                  "the run names none"),
])  # fmt: skip
def test_why_run_dir_with_images_wrong_is_the_files_error(writers: Path, data: dict[str, object],
                                                          message: str) -> None:  # fmt: skip
    run = Path("run")
    run.mkdir()
    (run / "a.uc").write_text(Path("a.uc").read_text())
    (run / "run.json").write_text(json.dumps(data))
    r = npk("why", "0", "--run", "run", "--buffer", "0:16")
    assert r.exit_code == 1 and message in r.stderr and "Traceback" not in r.output, r.output


# the four commands on one target: the arguments each needs besides it
COMMANDS = {
    "run": lambda t: ["run", *t, "--cycles", "300"],
    "debug": lambda t: ["debug", *t, "--batch", "/dev/null"],
    "trace": lambda t: ["trace", *t, "--cycles", "300", "-o", "t.json"],
    "why": lambda t: ["why", "0", *[a for x in t for a in ("--image", x)], "--buffer", "0:16", "--cycles", "300"],
}


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_d_is_a_preprocessor_define_for_a_source_on_every_command(writers: Path, cmd: str) -> None:
    r = npk(*COMMANDS[cmd](["a.uc"]), "-D", "VAL=7")
    assert r.exit_code == 0, r.output
    r = npk(*COMMANDS[cmd](["a.uc"]))
    assert r.exit_code == 1 and "a.uc:7:14: error: undefined symbol 'VAL'" in r.output, r.output
    r = npk(*COMMANDS[cmd](["a.uc"]), "-D", "qm.qlimit=4")
    assert r.exit_code == 2 and "-D qm.qlimit=4: expected NAME or NAME=VALUE (a preprocessor define" in r.output


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_d_with_elf_images_only_is_a_usage_error_on_every_command(writers: Path, cmd: str) -> None:
    r = npk(*COMMANDS[cmd](["c.elf"]), "-D", "VAL=7")
    assert r.exit_code == 2, r.output
    assert "-D VAL=7: nothing to apply it to" in r.output and "c.elf is an assembled image" in r.output
    r = npk(*COMMANDS[cmd](["c.elf"]))
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("cmd", ["debug", "trace", "why"])
def test_d_is_a_layout_parameter_for_a_layout(writers: Path, cmd: str) -> None:
    r = npk(*COMMANDS[cmd]([str(PIPELINED)]), "-D", "nosuch=4")
    assert r.exit_code == 1 and "-D nosuch: the layout has no such parameter" in r.output, r.output
    r = npk(*COMMANDS[cmd]([str(PIPELINED)]), "-D", "io")
    assert r.exit_code == 2 and "-D io: expected NAME=VALUE (a layout parameter)" in r.output, r.output


def test_run_refuses_a_layout_saying_how_to_run_it(writers: Path) -> None:
    r = npk("run", str(PIPELINED), "-D", "io=host")
    assert r.exit_code == 2 and "a layout is linked before it runs (npk link" in r.output, r.output


def test_d_is_documented_alike_on_every_command() -> None:
    helps = [npk(cmd, "--help").output for cmd in COMMANDS]
    for text in helps:
        flat = " ".join(text.split())
        assert "-D NAME[=VALUE] For .uc sources: define NAME for the preprocessor, as npk asm -D." in flat, flat
        assert "For a layout: set a layout parameter NAME=VALUE" in flat and "With ELF images only: an error." in flat
