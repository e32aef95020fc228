"""npk debug with several images, as npk run loads them (IMAGE@MES, one loader, the same
refusals): a context of each stepped, the registers of each by their own .reg names, and
breakpoints by line or label on every ME whose program has it, or on the MEs named."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.image import write_image
from npkit.toolchain.cli import main
from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import TargetError, TargetUsage, open_targets

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# two programs with a label of the same name at different addresses, and .reg names of their own
# (context 0 keeps its ME in the spin loop: a step runs the chip a cycle, every ME with it)
A_SRC = ".reg x\n    immed[x, 1]\ndone#:\n    alu[x, x, +, 1]\nspin#:\n    br[spin#]\n"
B_SRC = ".reg y\n    immed[y, 5]\n    alu[y, y, +, 2]\ndone#:\n    alu[y, y, +, 3]\nspin#:\n    br[spin#]\n"


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """a.uc as a source and b.uc assembled into b.elf: one of each kind of IMAGE."""
    from npkit.asm.assembler import assemble

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.uc").write_text(A_SRC)
    (tmp_path / "b.uc").write_text(B_SRC)
    write_image(tmp_path / "b.elf", assemble("b.uc").image)
    return Path("a.uc"), Path("b.elf")


def debug(args: list[str], script: str) -> tuple[int, str, str]:
    f = Path("script.npkdbg")
    f.write_text(script)
    r = CliRunner().invoke(main, ["debug", *args, "--batch", str(f)])
    return r.exit_code, r.stdout, r.stderr


def section(out: str, cmd: str) -> str:
    return out.split(f"(npk) {cmd}\n", 1)[1].split("(npk) ", 1)[0]


def test_two_images_step_a_context_of_each_and_show_its_registers(two: tuple[Path, Path]) -> None:
    a, b = two
    code, out, err = debug([f"{a}@0", f"{b}@0x10"], """
        threads
        step 0x00:0
        step
        print x
        regs
        threads
        step 0x10:0
        print y
        regs
        thread 0x00:0
        print x
    """)
    assert code == 0, err
    first, second = out.split("(npk) threads\n")[1:]
    assert "* 0x00:0   running     0  a.uc:2" in first and "  0x10:0   running     0  b.uc:2" in first
    assert section(out, "step 0x00:0").startswith("ME 0x00 ctx 0 pc 1 (running) at a.uc:4 <done>")
    assert section(out, "print x") == "x = 2 (0x2)\n"
    regs_a, regs_b = [r.split("(npk) ", 1)[0] for r in out.split("(npk) regs\n")[1:]]
    assert regs_a.startswith("ME 0x00 ctx 0  pc 2") and "  x                a0     0x00000002 = 2" in regs_a
    assert "\n  y " not in regs_a
    # the chip ran two cycles: ME 0x10 went with ME 0x00, to the line after its done#
    assert "* 0x00:0   running     2  a.uc:6 <spin>" in second and "  0x10:0   running     2  b.uc:5 <done>" in second
    assert section(out, "step 0x10:0").startswith("ME 0x10 ctx 0 pc 3 (running) at b.uc:7 <spin>")
    assert section(out, "print y") == "y = 10 (0xa)\n"
    assert regs_b.startswith("ME 0x10 ctx 0  pc 3") and "  y                a0     0x0000000a = 10" in regs_b
    assert "\n  x " not in regs_b
    assert out.rstrip().endswith("x = 2 (0x2)")  # back on ME 0x00: its own registers


def test_a_label_in_both_images_breaks_on_each_me_at_its_own_address(two: tuple[Path, Path]) -> None:
    a, b = two
    code, out, err = debug([f"{a}@0", f"{b}@1"], """
        break done
        info
        run
        print x
        run
        print y
    """)
    assert code == 0, err
    assert section(out, "break done") == ("breakpoint 1 at done in 2 places:\n"
                                          "  ME 0x00: a.uc:4 <done>, address 1\n"
                                          "  ME 0x01: b.uc:5 <done>, address 2\n")  # fmt: skip
    assert section(out, "info") == ("  1 break done                     2 places  hits 0\n"
                                    "      ME 0x00: a.uc:4 <done>, address 1\n"
                                    "      ME 0x01: b.uc:5 <done>, address 2\n")  # fmt: skip
    first, second = out.split("(npk) run\n")[1:]
    assert "ME 0x00 ctx 0 pc 1 (running) at a.uc:4 <done>" in first and "x = 1 (0x1)" in first
    assert "ME 0x01 ctx 0 pc 2 (running) at b.uc:5 <done>" in second and "y = 7 (0x7)" in second


def test_break_me_narrows_a_breakpoint_to_the_mes_named(two: tuple[Path, Path]) -> None:
    a, b = two
    code, out, err = debug([f"{a}@0", f"{b}@1"], """
        break done me 0x01
        break b.uc:3 me 1
        info
        run
    """)
    assert code == 0, err
    assert "breakpoint 1 at b.uc:5 <done>, address 2 on ME 0x01\n" in out
    assert "breakpoint 2 at b.uc:3, address 1 on ME 0x01\n" in out
    assert "  1 break done me 0x01" in out and "ME 0x00:" not in section(out, "info")
    assert "breakpoint 2 (b.uc:3 me 0x01) hit" in section(out, "run")
    # a line the named ME's program does not have, an ME with nothing loaded, a stray word
    for script, message in [("break a.uc:4 me 0x01\n", "no code from a file named 'a.uc' (files: b.uc)"),
                            ("break done me 0x05\n", "ME 0x05 has nothing loaded (loaded: 0x00, 0x01)"),
                            ("break done on 1\n", "column 12: unexpected 'on'")]:  # fmt: skip
        code, _, err = debug([f"{a}@0", f"{b}@1"], script)
        assert code == 1 and message in err, err


def test_several_images_are_refused_as_npk_run_refuses_them(two: tuple[Path, Path]) -> None:
    a, b = two
    r = CliRunner().invoke(main, ["debug", f"{a}@0", f"{b}@0", "--batch", "/dev/null"])
    assert r.exit_code == 1 and "ME 0x00 is assigned to both" in r.output, r.output
    r = CliRunner().invoke(main, ["debug", str(a), str(b), "--me", "0", "--batch", "/dev/null"])
    assert r.exit_code == 2 and "--me goes with a single image; give several as IMAGE@MES" in r.output, r.output
    layout = ROOT / "microcode" / "layouts" / "pipelined.yaml"
    r = CliRunner().invoke(main, ["debug", str(layout), f"{a}@15", "--batch", "/dev/null"])
    assert r.exit_code == 2 and "a layout runs alone" in r.output, r.output
    r = CliRunner().invoke(main, ["debug", f"{a}@0", "missing.uc@1", "--batch", "/dev/null"])
    assert r.exit_code == 2 and "'missing.uc': no such file" in r.output and "Traceback" not in r.output
    # the rings of ring_ping and ring_pong, and a --ring that configures one of them otherwise
    ping, pong = EXAMPLES / "ring_ping.uc", EXAMPLES / "ring_pong.uc"
    rings = str(EXAMPLES / "ring_pingpong.rings.yaml")
    r = CliRunner().invoke(main, ["debug", f"{ping}@0", f"{pong}@1", "--ring", rings, "--batch", "/dev/null"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["debug", f"{ping}@0", f"{pong}@1", "--ring", rings, "--ring",
                                  "scratch:1:base=0x2000,size=256", "--batch", "/dev/null"])  # fmt: skip
    assert r.exit_code == 1 and "ring 1 is configured twice" in r.output, r.output


def test_open_targets_loads_each_image_with_its_own_source_map(two: tuple[Path, Path]) -> None:
    a, b = two
    t = open_targets([(str(a), "0"), (str(b), "1:0")])
    assert t.loaded == {0: "a", 8: "b"} and [p.label for p in t.parts] == ["a.uc", "b.elf"]
    assert t.smap(0).labels["done"] == 1 and t.smap(8).labels["done"] == 2
    assert len(t.program(8).words) == 4 and len(t.program(0).words) == 3
    s = Session(t)
    s.execute("step 8:0")
    s.execute("step 8:0")
    assert s.execute("print y") == "y = 7 (0x7)"
    with pytest.raises(DebugError, match="unknown name 'x'"):
        s.execute("print x")
    with pytest.raises(TargetUsage, match="names ME 0x00 twice"):
        open_targets([(str(a), "0,0"), (str(b), "1")])
    bad = Path("bad.uc")
    bad.write_text("immed[a0, 1]\nfoo[a1]\n")
    with pytest.raises(TargetError, match=r"bad.uc:2:1: error: unknown instruction 'foo'"):
        open_targets([(str(a), "0"), (str(bad), "1")])


def test_debug_trace_and_why_assemble_a_source_with_include_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-I as npk asm takes it (a directory that does not exist is a usage error)."""
    monkeypatch.chdir(tmp_path)
    Path("inc").mkdir()
    Path("inc/step.h").write_text("#define STEP 3\n")
    Path("s.uc").write_text('#include "step.h"\n.reg x\n    immed[x, STEP]\n    halt\n')
    Path("script").write_text("step\nprint x\n")
    r = CliRunner().invoke(main, ["debug", "s.uc", "-I", "inc", "--batch", "script"])
    assert r.exit_code == 0 and "x = 3 (0x3)" in r.stdout, r.output
    r = CliRunner().invoke(main, ["debug", "s.uc", "--batch", "script"])
    assert r.exit_code == 1 and "s.uc:1:" in r.output and "step.h" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["debug", "s.uc", "-I", "nope", "--batch", "script"])
    assert r.exit_code == 2 and "Directory 'nope' does not exist" in r.output, r.output
    r = CliRunner().invoke(main, ["trace", "s.uc", "-I", "inc", "--cycles", "100", "-o", "t.json"])
    assert r.exit_code == 0 and Path("t.json").exists(), r.output
    r = CliRunner().invoke(main, ["why", "0", "--image", "s.uc", "-I", "inc", "--buffer", "0:64", "--cycles", "100"])
    assert r.exit_code == 0 and "packet 0: dram 0x0..0x3f" in r.output, r.output
