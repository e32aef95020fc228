"""Image loader and the `npk run` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.image import Image, Program, write_image
from npkit.emulator.binding import Chip
from npkit.emulator.loader import LoadError, load_image
from npkit.toolchain.commands.run import run_cmd

from .util import assemble

PROG = ["br!=ctx[0, done#]", "alu[a2, a1, +, b1]", "sram[read, $0, a3, 0, 1], ctx_swap[s1]",
        "alu[@a100, --, B, $0]", "br_signal[s7, sig#]", "halt", "sig#: immed[@a101, 0x77]",
        "done#: ctx_arb[kill]"]  # fmt: skip


def _image(**kw: object) -> Image:
    prog = Program(name="t", words=assemble(PROG), **kw)  # type: ignore[arg-type]
    return Image(programs=[prog])


def test_load_image_applies_initial_state() -> None:
    img = _image(mes=[2], init_regs=[("a1", None, 5), ("b1", 0, 6), ("a3", None, 0x40)], set_sigs=[7],
                 init_mem=[("sram", 0x40, (0x1234).to_bytes(4, "big"))])  # fmt: skip
    chip = Chip("ixp2800")
    assert load_image(chip, img) == {2: "t"}
    assert chip.run(10_000) == "halted"
    assert chip.reg(2, "a2") == 11
    assert chip.reg(2, "a1", ctx=5) == 5
    assert chip.reg(2, "@a100") == 0x1234
    assert chip.reg(2, "@a101") == 0x77


def test_load_image_rejects_bad_images() -> None:
    chip = Chip("ixp2400")
    with pytest.raises(LoadError, match="ME 9"):
        load_image(chip, _image(mes=[9]))
    with pytest.raises(LoadError, match="control store"):
        load_image(chip, Image(programs=[Program(name="big", words=[0] * 5000)]))
    with pytest.raises(LoadError, match="40-bit"):
        load_image(chip, Image(programs=[Program(name="w", words=[1 << 41])]))
    with pytest.raises(LoadError, match="a99"):
        load_image(chip, _image(init_regs=[("a99", None, 1)]))
    with pytest.raises(LoadError, match="space"):
        load_image(chip, _image(init_mem=[("flash", 0, b"\0")]))
    with pytest.raises(LoadError, match="no programs"):
        load_image(chip, Image(programs=[]))


def test_npk_run_prints_statistics(tmp_path: Path) -> None:
    path = tmp_path / "t.elf"
    write_image(path, _image(init_regs=[("a3", None, 0x40)]))
    res = CliRunner().invoke(run_cmd, [str(path), "--cycles", "5000", "--me", "0-1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["stop"] == "halted" and [m["me"] for m in out["mes"]] == [0, 1]
    assert out["units"]["sram"][0]["commands"] == 2
    res = CliRunner().invoke(run_cmd, [str(path), "--config", "ixp2400"])
    assert res.exit_code == 0 and "ME 0x00" in res.output and "sram[0]" in res.output
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"not an image")
    res = CliRunner().invoke(run_cmd, [str(bad)])
    assert res.exit_code != 0 and "not an ELF" in res.output


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _asm_file(tmp_path: Path, name: str) -> Path:
    from npkit.asm.assembler import assemble as assemble_file

    out = tmp_path / f"{Path(name).stem}.elf"
    write_image(out, assemble_file(EXAMPLES / name).image)
    return out


def test_npk_run_two_images_on_chosen_mes_with_rings(tmp_path: Path) -> None:
    """examples/README: ring_ping and ring_pong on two MEs, with their rings configured."""
    ping, pong = _asm_file(tmp_path, "ring_ping.uc"), _asm_file(tmp_path, "ring_pong.uc")
    rings = EXAMPLES / "ring_pingpong.rings.yaml"
    res = CliRunner().invoke(run_cmd, [f"{ping}@0", f"{pong}@3", "--ring", str(rings), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["stop"] == "halted"
    assert {m["me"]: (m["program"], m["status"]) for m in out["mes"]} == {
        0: ("ring_ping", "halt"), 3: ("ring_pong", "halt")}
    # the same rings given inline
    res = CliRunner().invoke(run_cmd, [f"{ping}@0", f"{pong}@1", "--ring", "scratch:0:base=0x1000,size=128",
                                       "--ring", "scratch:1:base=0x1200,size=128", "--json"])  # fmt: skip
    assert json.loads(res.stdout)["stop"] == "halted"
    # two images on one ME, a bad ring: errors, not tracebacks
    res = CliRunner().invoke(run_cmd, [f"{ping}@0", f"{pong}@0"])
    assert res.exit_code == 1 and "ME 0x00 is assigned to both" in res.output
    res = CliRunner().invoke(run_cmd, [str(ping), "--ring", "scratch:0:base=0x1000"])
    assert res.exit_code == 2 and "base= and size=" in res.output


def test_npk_run_traffic_fails_a_program_that_loses_packets(tmp_path: Path) -> None:
    """A program that never receives: every packet lost.  It used to exit 0."""
    hello = _asm_file(tmp_path, "hello.uc")
    res = CliRunner().invoke(run_cmd, [str(hello), "--traffic", str(EXAMPLES / "passthrough" / "min64.yaml"),
                                       "--duration-ms", "0.02", "--drain-cap-ms", "0.1", "--json"])  # fmt: skip
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["totals"]["loss_pct"] == 100.0 and out["verdict"]["ok"] is False
    assert any(r.startswith("loss 100.0 %") for r in out["verdict"]["reasons"]), out["verdict"]


@pytest.mark.parametrize(("words", "pc"), [
    (["alu[a0, --, b, 1]"], 1),  # runs off the end of the program into an empty word
    (["immed[a0, 100]", "rtn[a0]", "halt"], 100),  # jumps to an empty control-store word
])  # fmt: skip
def test_npk_run_fails_when_an_me_stops_on_an_illegal_word(tmp_path: Path, words: list[str], pc: int) -> None:
    path = tmp_path / "bad.elf"
    write_image(path, Image(programs=[Program(name="bad", words=assemble(words))]))
    res = CliRunner().invoke(run_cmd, [str(path), "--cycles", "100"])
    assert res.exit_code == 1, res.output
    assert (f"warning: ME 0x00 (bad) stopped at pc {pc}: illegal instruction 0x0000000000 (sram) "
            "(an empty control-store word: the program ran past its end or jumped outside it?)") in res.stderr
    res = CliRunner().invoke(run_cmd, [str(path), "--cycles", "100", "--json"])
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["me_faults"] == [{"me": 0, "me_name": "0x00", "program": "bad", "status": "illegal", "pc": pc,
                                 "reason": "illegal instruction 0x0000000000 (sram)"}]  # fmt: skip


def test_npk_run_halt_is_a_normal_stop(tmp_path: Path) -> None:
    path = tmp_path / "t.elf"
    write_image(path, _image(init_regs=[("a3", None, 0x40)]))
    res = CliRunner().invoke(run_cmd, [str(path), "--cycles", "5000", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mes"][0]["status"] == "halt" and out["me_faults"] == [] and "warning" not in res.stderr


def test_npk_run_summary_of_mes_that_did_not_stop(tmp_path: Path) -> None:
    # an ME the budget cut short is at the PC of its running context (it printed "pc 0",
    # where no context was); one whose contexts all ran ctx_arb[kill] is idle, with no PC
    loop = tmp_path / "loop.elf"
    write_image(loop, Image(programs=[Program(name="loop", words=assemble(
        ["immed[a1, 0]", "top#: alu[a1, a1, +, 1]", "alu[a2, a1, +, 1]", "br[top#]"]))]))  # fmt: skip
    res = CliRunner().invoke(run_cmd, [str(loop), "--cycles", "40", "--json"])
    assert res.exit_code == 0, res.output
    me = json.loads(res.stdout)["mes"][0]
    assert me["status"] == "running" and me["pc"] in (1, 2, 3)
    with Chip() as chip:
        chip.load(0, assemble(["immed[a1, 0]", "top#: alu[a1, a1, +, 1]", "alu[a2, a1, +, 1]", "br[top#]"]))
        chip.enable(0, 0xFF)
        chip.run(40)
        assert me["pc"] == chip.reg(0, "pc", next(c for c in range(8) if chip.ctx_state(0, c) == "running"))
    ended = tmp_path / "ended.elf"
    write_image(ended, Image(programs=[Program(name="ended", words=assemble(["immed[a1, 1]", "ctx_arb[kill]"]))]))
    res = CliRunner().invoke(run_cmd, [str(ended), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["stop"] == "halted" and (out["mes"][0]["status"], out["mes"][0]["pc"]) == ("idle", None)
    res = CliRunner().invoke(run_cmd, [str(ended)])
    assert "ME 0x00 ended            idle " in res.stdout and res.stdout.splitlines()[1].endswith("pc -")


def test_a_traffic_verdict_fails_on_an_me_fault() -> None:
    from npkit.toolchain.system.verdict import Policy, judge

    m = {"me": 0, "me_name": "0x00", "program": "bad", "status": "bad_pc", "pc": 9, "reason": "pc outside"}
    v = judge({"me_faults": [m]}, Policy(None, None))
    assert v == {"ok": False, "reasons": ["ME 0x00 (bad) stopped at pc 9: pc outside"]}
    assert judge({"me_faults": []}, Policy(None, None))["ok"]


def test_npk_run_me_named_once(tmp_path: Path) -> None:
    path = tmp_path / "t.elf"
    write_image(path, _image())
    res = CliRunner().invoke(run_cmd, [f"{path}@0x10", "--me", "0x00"])
    assert res.exit_code == 2 and f"{path}@0x10 names its MEs and --me 0x00 names them again: give one" in res.output
    res = CliRunner().invoke(run_cmd, [str(path), "--me", ""])
    assert res.exit_code == 2 and "--me '': name the MEs (0x10, 1:0, 0-3), or leave --me out" in res.output
    res = CliRunner().invoke(run_cmd, [f"{path}@0x10", "--json"])
    assert res.exit_code == 0 and [m["me_name"] for m in json.loads(res.stdout)["mes"]] == ["0x10"]


@pytest.mark.parametrize(("rings", "code", "message"), [
    (["scratch:0:base=0x1000,size=96"], 2, "--ring 'scratch:0:base=0x1000,size=96': size: expected 128, 256, 512 or 1024, got 96"),
    (["scratch:0:base=0x1000,size=0"], 2, "size: expected 128, 256, 512 or 1024, got 0"),
    (["scratch:0:base=0x1000,size=2048"], 2, "size: expected 128, 256, 512 or 1024, got 2048"),
    (["scratch:16:base=0,size=128"], 2, "--ring 'scratch:16:base=0,size=128': ring: must be in 0..15, got 16"),
    (["scratch:0:base=0x1001,size=128"], 2, "base: must be in 0..4294967292, a multiple of 4, got 4097"),
    (["scratch:0:base=0x3f00,size=128"], 1,
     "--ring 'scratch:0:base=0x3f00,size=128' (ring 0, scratch 0x3f00..0x40ff): ends past the end of scratch (0x0..0x3fff)"),
    (["scratch:0:base=0x1000,size=128", "scratch:1:base=0x1100,size=128"], 1,
     "--ring 'scratch:1:base=0x1100,size=128' (ring 1, scratch 0x1100..0x12ff) overlaps "
     "--ring 'scratch:0:base=0x1000,size=128' (ring 0, scratch 0x1000..0x11ff)"),
    (["scratch:0:base=0x1000,size=128", "scratch:0:base=0x1800,size=128"], 1,
     "ring 0 is configured twice (also by --ring 'scratch:0:base=0x1000,size=128'"),
])  # fmt: skip
def test_npk_run_checks_rings(tmp_path: Path, rings: list[str], code: int, message: str) -> None:
    ping = _asm_file(tmp_path, "ring_ping.uc")
    res = CliRunner().invoke(run_cmd, [f"{ping}@0", *[a for r in rings for a in ("--ring", r)]])
    assert res.exit_code == code and message in res.output, res.output
    assert "scratch ring scratch ring" not in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(("text", "message"), [
    ("rings:\n  - {ring: 0, base: 0x1000, size: 128}\n  - {ring: 1, base: 0x1400,\n     size: 96}\n",
     "r.yaml:4: rings[1].size: expected 128, 256, 512 or 1024, got 96"),
    ("rings:\n  - {ring: 0, base: 0x1000, size: 128, colour: red}\n",
     "r.yaml:2: rings[0].colour: unknown key (allowed: ring, base, size, margin)"),
    ("rings: 3\n", "r.yaml:1: rings: expected a list, got 3"),
    ("rings:\n  - {ring: 0, base: 0x1000, size: 128}\n  - {ring: 1, base: 0x1000, size: 128}\n",
     "r.yaml:3 (rings[1]) (ring 1, scratch 0x1000..0x11ff) overlaps {dir}/r.yaml:2 (rings[0])"),
])  # fmt: skip
def test_npk_run_ring_file_is_checked_against_its_schema(tmp_path: Path, text: str, message: str) -> None:
    ping = _asm_file(tmp_path, "ring_ping.uc")
    (tmp_path / "r.yaml").write_text(text)
    res = CliRunner().invoke(run_cmd, [f"{ping}@0", "--ring", str(tmp_path / "r.yaml")])
    assert res.exit_code in (1, 2) and f"{tmp_path}/{message.format(dir=tmp_path)}" in res.output, res.output


LOCAL_MEM_SRC = """
.local_mem pad 8
.local_mem tbl 12 64
.init tbl 0x11 0x22 0x33
    immed[a0, tbl]
    local_csr_wr[ACTIVE_LM_ADDR_0, a0]
    nop
    nop
    nop
    alu[a1, --, b, *l$index0[2]]
    alu[a2, --, b, *l$index0[0]]
    ctx_arb[bpt]
"""


def test_local_memory_data_is_loaded_on_every_me_of_the_program(tmp_path: Path) -> None:
    """`.local_mem` + `.init` data goes into each ME's own local memory at load (the
    image format says lmem data is written at load; the loader used to refuse it)."""
    from npkit.asm.assembler import assemble

    src = tmp_path / "lm.uc"
    src.write_text(LOCAL_MEM_SRC)
    prog = assemble(src).program
    # aligned to 16 words: the [n] offset is ORed into the index's low bits (HRM)
    assert ("lmem", 64, bytes.fromhex("000000110000002200000033")) in prog.init_mem
    prog.mes = [3, 9]
    chip = Chip("ixp2800")
    assert load_image(chip, Image(programs=[prog])) == {3: "lm", 9: "lm"}
    assert [chip.reg(3, f"lm{i}") for i in range(16, 19)] == [0x11, 0x22, 0x33]
    assert chip.reg(3, "lm15") == 0 and chip.reg(0, "lm16") == 0  # nothing beside it, no other ME
    assert chip.run(1000) == "halted"
    assert [chip.reg(me, r) for me in (3, 9) for r in ("a1", "a2")] == [0x33, 0x11] * 2


def test_local_memory_data_past_the_end_is_refused() -> None:
    chip = Chip("ixp2800")
    with pytest.raises(LoadError, match="outside the 640 words of local memory"):
        load_image(chip, _image(init_mem=[("lmem", 4 * 638, bytes(12))]))
    with pytest.raises(LoadError, match="whole longwords"):
        load_image(chip, _image(init_mem=[("lmem", 2, bytes(4))]))


@pytest.mark.parametrize(("args", "message"), [
    (["--me", "99"], "ME '99' does not exist on this chip"),
    (["--me", "0,0"], "ME list '0,0' names ME 0x00 twice"),
    (["--me", "abc"], "ME 'abc': expected a hardware number"),
    (["--xscale-gdb", "5555"], "--xscale-gdb needs an XScale program"),
    (["--xscale-placement", "gpe"], "--xscale-placement needs an XScale program"),
    (["--xscale-arg", "x"], "--xscale-arg is an argument of the --xscale PROGRAM"),
    (["--xscale-gdb", "70000"], "70000 is not in the range 1<=x<=65535"),
])  # fmt: skip
def test_npk_run_options_that_name_nothing_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    """MEs the chip lacks and XScale options without a program were exit 1 or ignored."""
    hello = _asm_file(tmp_path, "hello.uc")
    res = CliRunner().invoke(run_cmd, [str(hello), *args])
    assert res.exit_code == 2 and message in res.output, res.output


def test_npk_run_refuses_captures_over_its_traffic_and_a_pcap_given_as_a_spec(tmp_path: Path) -> None:
    from npkit.toolchain.cli import main

    pt = _asm_file(tmp_path, "passthrough/passthrough.uc")
    traffic = tmp_path / "in"
    assert CliRunner().invoke(main, ["traffic", "gen", str(EXAMPLES / "passthrough" / "min64.yaml"), "-o",
                                     str(traffic), "--count", "4"]).exit_code == 0  # fmt: skip
    before = (traffic / "port0.pcap").read_bytes()
    res = CliRunner().invoke(run_cmd, [str(pt), "--traffic", str(traffic), "--capture", str(traffic / "."),
                                       "--duration-ms", "0.01"])  # fmt: skip
    assert res.exit_code == 2 and "--capture is also the input --traffic" in res.output, res.output
    assert (traffic / "port0.pcap").read_bytes() == before
    res = CliRunner().invoke(run_cmd, [str(pt), "--traffic", str(traffic / "port0.pcap"), "--duration-ms", "0.01"])
    assert res.exit_code == 1 and "port0.pcap: a pcap file, not a traffic spec" in res.output, res.output
    res = CliRunner().invoke(run_cmd, [str(pt), "--traffic", str(traffic), "--capture", str(traffic / "port0.pcap" / "x"),
                                       "--duration-ms", "0.01"])  # fmt: skip
    assert res.exit_code == 1 and res.output.strip().endswith("port0.pcap/x: Not a directory"), res.output


def _me_rows(out: dict[str, object]) -> list[tuple[object, ...]]:
    return [(m["me"], m["program"], m["status"], m["instructions"], m["pc"]) for m in out["mes"]]  # type: ignore[index, union-attr]


def test_npk_run_takes_a_uc_source_as_it_takes_the_image(tmp_path: Path) -> None:
    """`npk run prog.uc` was 'not an ELF file': a source is assembled in memory as npk asm
    assembles it, in every place an image goes (alone, --me, IMAGE@MES beside an ELF)."""
    src = EXAMPLES / "hello.uc"
    elf = _asm_file(tmp_path, "hello.uc")
    runs = {}
    for path in (src, elf):
        res = CliRunner().invoke(run_cmd, [str(path), "--me", "0x10", "--cycles", "5000", "--json"])
        assert res.exit_code == 0, res.output
        runs[path.suffix] = json.loads(res.stdout)
    assert _me_rows(runs[".uc"]) == _me_rows(runs[".elf"]) and runs[".uc"]["cycle"] == runs[".elf"]["cycle"]
    assert _me_rows(runs[".uc"])[0][:3] == (8, "hello", "halt")
    pong = _asm_file(tmp_path, "ring_pong.uc")
    res = CliRunner().invoke(run_cmd, [f"{EXAMPLES / 'ring_ping.uc'}@0", f"{pong}@3", "--ring",
                                       str(EXAMPLES / "ring_pingpong.rings.yaml"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert {m["me"]: (m["program"], m["status"]) for m in json.loads(res.stdout)["mes"]} == {
        0: ("ring_ping", "halt"), 3: ("ring_pong", "halt")}


INC_SRC = '#include "step.h"\n.reg x\n    immed[x, STEP]\n    alu[x, x, +, EXTRA]\n    halt\n'


def test_npk_run_assembles_with_npk_asms_include_dirs_and_defines(tmp_path: Path) -> None:
    from npkit.asm.assembler import assemble as assemble_file
    from npkit.toolchain.commands.run import chip_for

    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "step.h").write_text("#define STEP 3\n")
    src = tmp_path / "d.uc"
    src.write_text(INC_SRC)
    chip, named = chip_for((str(src),), None, None, (str(inc),), {"EXTRA": "7"})
    chip.close()
    want = assemble_file(src, [inc], {"EXTRA": "7"}).program
    assert named[0][1].programs[0].words == want.words and named[0][1].programs[0].lines == want.lines
    res = CliRunner().invoke(run_cmd, [str(src), "-I", str(inc), "-D", "EXTRA=7", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mes"][0]["status"] == "halt"
    # without the include directory: the assembler's located error, exit 1 as npk asm
    res = CliRunner().invoke(run_cmd, [str(src), "-D", "EXTRA=7"])
    assert res.exit_code == 1 and f"{src}:1:" in res.output and "step.h" in res.output, res.output
    assert '#include "step.h"' in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(run_cmd, [str(src), "-I", str(tmp_path / "nope")])
    assert res.exit_code == 2 and f"Directory '{tmp_path / 'nope'}' does not exist" in res.output, res.output
    res = CliRunner().invoke(run_cmd, [str(src), "-I", str(inc), "-D", "=7"])
    assert res.exit_code == 2 and "-D =7: expected NAME or NAME=VALUE" in res.output, res.output


def test_npk_run_reports_assembler_errors_and_warnings_as_npk_asm(tmp_path: Path) -> None:
    bad = tmp_path / "bad.uc"
    bad.write_text("immed[a0, 1]\nfoo[a1]\nhalt\n")
    res = CliRunner().invoke(run_cmd, [f"{bad}@0x10"])
    assert res.exit_code == 1, res.output
    assert f"{bad}:2:1: error: unknown instruction 'foo'" in res.stderr
    assert "\n    foo[a1]\n    ^" in res.stderr and "Traceback" not in res.output
    warned = tmp_path / "w.uc"
    warned.write_text(".reg x\nlocal_csr_wr[ACTIVE_LM_ADDR_0, x]\nalu[a1, --, b, *l$index0]\nhalt\n")
    res = CliRunner().invoke(run_cmd, [str(warned), "--json"])
    assert res.exit_code == 0, res.output
    assert f"{warned}:3:1: warning: uses *l$index0 0 instruction(s) after local_csr_wr" in res.stderr
    assert json.loads(res.stdout)["mes"][0]["status"] == "halt"
