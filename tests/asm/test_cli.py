"""`npk asm` / `npk disasm` through click's CliRunner."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from npkit.asm.image import read_image
from npkit.toolchain.cli import main
from npkit.toolchain.commands.asm import asm_cmd, disasm_cmd

GOOD = ".reg x\nloop#: alu[x, x, +, 1]\n bne[loop#]\n"


def _run(cmd: object, args: list[str]) -> object:
    return CliRunner().invoke(cmd, args)  # type: ignore[arg-type]


def test_assemble_writes_image_and_listing(tmp_path: Path) -> None:
    src = tmp_path / "p.uc"
    src.write_text(GOOD)
    out, lst = tmp_path / "p.elf", tmp_path / "p.lst"
    r = _run(asm_cmd, [str(src), "-o", str(out), "--list", str(lst)])
    assert r.exit_code == 0, r.output
    prog = read_image(out).programs[0]
    assert len(prog.words) == 2 and prog.labels() == {0: "loop"}
    text = lst.read_text()
    assert f"{prog.words[0]:010x}" in text  # 40-bit word, 10 hex digits
    assert "p.uc:2" in text and "bne[loop#]" in text and "alu[x, x, +, 1]" in text
    assert "; symbols" in text and "loop" in text.split("; symbols")[1]


def test_listing_marks_npkit_own_encodings(tmp_path: Path) -> None:
    src = tmp_path / "f.uc"
    src.write_text(".reg x y z\n immed[y, 0x100]\n ffs[x, y]\n find_bset_with_mask[z, x, y]\n halt\n")
    lst = tmp_path / "f.lst"
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "f.elf"), "--list", str(lst)])
    assert r.exit_code == 0, r.output
    rows = {line.split("|")[1].split(";")[0].strip(): line for line in lst.read_text().splitlines() if "|" in line}
    assert "find_bset[" in rows["ffs[x, y]"] and "npkit encoding" not in rows["ffs[x, y]"]
    assert "npkit encoding, no public source: ALU operation 10" in rows["find_bset_with_mask[z, x, y]"]


def test_error_exit_1_located_and_no_output(tmp_path: Path) -> None:
    src = tmp_path / "bad.uc"
    src.write_text(".reg x\n alu[x, x, +, 0x999]\n")
    out, lst = tmp_path / "bad.elf", tmp_path / "bad.lst"
    r = _run(asm_cmd, [str(src), "-o", str(out), "--list", str(lst)])
    assert r.exit_code == 1
    assert f"{src}:2:15: error: constant 0x999 does not fit" in r.output
    assert "^" in r.output and "Traceback" not in r.output
    assert not out.exists() and not lst.exists()
    assert list(tmp_path.iterdir()) == [src]  # no temporary left behind


def test_missing_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    r = _run(asm_cmd, [str(tmp_path / "nope.uc"), "-o", str(tmp_path / "x.elf")])
    assert r.exit_code == 1 and "cannot read" in r.output and "Traceback" not in r.output


def test_garbage_input_never_tracebacks(tmp_path: Path) -> None:
    src = tmp_path / "g.uc"
    src.write_bytes(bytes(range(256)) * 4 + b"\n]]][[[ alu[,,,,,]\n.if ((((\n#define\n")
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "g.elf")])
    assert r.exit_code == 1 and "error" in r.output and "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_internal_errors_are_reported_with_location(tmp_path: Path, monkeypatch: object) -> None:
    import npkit.asm.assembler as assembler

    def boom(*a: object, **k: object) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(assembler, "assemble", boom)  # type: ignore[attr-defined]
    src = tmp_path / "p.uc"
    src.write_text(GOOD)
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "p.elf")])
    assert r.exit_code == 1 and "internal error" in r.output and f"{src}:1:1" in r.output
    assert not (tmp_path / "p.elf").exists()


def test_werror_turns_warnings_into_failure(tmp_path: Path) -> None:
    src = tmp_path / "w.uc"
    src.write_text(".reg x y\n alu[x, y, +, y]\n")
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "w.elf")])
    assert r.exit_code == 0 and "warning" in r.output and "w.uc:2:" in r.output
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "w2.elf"), "--Werror"])
    assert r.exit_code == 1 and not (tmp_path / "w2.elf").exists()


def test_defines_includes_contexts_and_json(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "c.h").write_text("#define STEP 3\n")
    src = tmp_path / "d.uc"
    src.write_text('#include "c.h"\n.reg x\n alu[x, x, +, STEP]\n alu[x, x, +, EXTRA]\n')
    out = tmp_path / "d.elf"
    r = _run(
        asm_cmd,
        [str(src), "-o", str(out), "-I", str(inc), "-D", "EXTRA=7", "--contexts", "4", "--json"],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output[r.output.index("{") :])
    assert summary["words"] == 2 and summary["ctx_mode"] == 4
    assert read_image(out).programs[0].ctx_mode == 4


def test_disasm_command_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "p.uc"
    src.write_text(GOOD)
    out = tmp_path / "p.elf"
    assert _run(asm_cmd, [str(src), "-o", str(out)]).exit_code == 0
    r = _run(disasm_cmd, [str(out), "--addr"])
    assert r.exit_code == 0 and "loop#:" in r.output and "; " in r.output
    back = tmp_path / "back.uc"
    back.write_text(r.output)
    assert _run(asm_cmd, [str(back), "-o", str(tmp_path / "b.elf")]).exit_code == 0
    assert read_image(tmp_path / "b.elf").programs[0].words == read_image(out).programs[0].words


def test_disasm_bad_file(tmp_path: Path) -> None:
    f = tmp_path / "x.hex"
    f.write_text("zzz\n")
    r = _run(disasm_cmd, [str(f)])
    assert r.exit_code == 1 and "x.hex:1:1" in r.output


def test_npk_group_has_asm_and_disasm() -> None:
    r = CliRunner().invoke(main, ["asm", "--help"])
    assert r.exit_code == 0 and "--contexts" in r.output
    r = CliRunner().invoke(main, ["disasm", "--help"])
    assert r.exit_code == 0 and "--addr" in r.output


def test_disasm_json(tmp_path: Path) -> None:
    f = tmp_path / "w.hex"
    f.write_text("e000020000\n")
    r = _run(disasm_cmd, [str(f), "--json", "--contexts", "4"])
    assert r.exit_code == 0
    (prog,) = json.loads(r.output)["programs"]
    assert prog["words"] == ["e000020000"] and prog["ctx_mode"] == 4 and "halt" in prog["text"]


def test_listing_names_macro_calls(tmp_path: Path) -> None:
    src = tmp_path / "m.uc"
    src.write_text("#macro bump[r]\n alu[r, r, +, 1]\n#endm\n.reg x\n bump[x]\n")
    lst = tmp_path / "m.lst"
    assert (
        _run(asm_cmd, [str(src), "-o", str(tmp_path / "m.elf"), "--list", str(lst)]).exit_code == 0
    )
    row = next(line for line in lst.read_text().splitlines() if "m.uc:2" in line)
    assert "in bump[] called at m.uc:5" in row


def test_unwritable_listing_leaves_no_image(tmp_path: Path) -> None:
    src = tmp_path / "p.uc"
    src.write_text(GOOD)
    out = tmp_path / "p.elf"
    lst = tmp_path / "no" / "such" / "p.lst"
    r = _run(asm_cmd, [str(src), "-o", str(out), "--list", str(lst)])
    assert r.exit_code == 1 and f"error: cannot write {lst}: No such file or directory" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.uc"]  # neither file, no temporaries
    assert _run(asm_cmd, [str(src), "-o", str(out)]).exit_code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # like any new file, not mkstemp's 0600


def test_disasm_picks_one_program_of_a_linked_image(tmp_path: Path) -> None:
    from npkit.asm.image import write_image
    from npkit.toolchain.system.link import link

    router = tmp_path / "router.elf"
    write_image(router, link("pipelined"))
    r = _run(disasm_cmd, [str(router)])  # one source per program: which one?
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output == (f"error: {router} holds 6 programs; pick one with --program "
                        "(rx, parse, lookup, hdr_format, qm, tx)\n")  # fmt: skip
    src, back = tmp_path / "p.uc", tmp_path / "p.elf"
    assert _run(disasm_cmd, [str(router), "--program", "parse", "-o", str(src)]).exit_code == 0
    assert _run(asm_cmd, [str(src), "-o", str(back)]).exit_code == 0
    parse = next(p for p in read_image(router).programs if p.name == "parse")
    assert read_image(back).programs[0].words == parse.words
    r = _run(disasm_cmd, [str(router), "--program", "nope"])
    assert r.exit_code == 1 and "no program 'nope'" in r.output
    r = _run(disasm_cmd, [str(router), "--json"])  # JSON keeps the programs apart: all of them
    assert r.exit_code == 0 and len(json.loads(r.output)["programs"]) == 6


def test_disasm_unwritable_output_and_binary_input_are_one_line(tmp_path: Path) -> None:
    f = tmp_path / "w.hex"
    f.write_text("e000020000\n")
    out = tmp_path / "no" / "x.uc"
    r = _run(disasm_cmd, [str(f), "-o", str(out)])
    assert r.exit_code == 1 and r.output == f"error: cannot write {out}: No such file or directory\n"
    z = tmp_path / "zeros.bin"
    z.write_bytes(b"\0" * 3_000_000)
    r = _run(disasm_cmd, [str(z)])
    assert r.exit_code == 1 and len(r.output.splitlines()) == 1 and "NUL byte" in r.output


def test_malformed_define_is_a_usage_error(tmp_path: Path) -> None:
    src = tmp_path / "dd.uc"
    src.write_text(GOOD)
    for bad in ("=5", "a b=3", "1x=2"):
        r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "dd.elf"), "-D", bad])
        assert r.exit_code == 2, r.output
        assert f"Invalid value for '-D': expected NAME or NAME=VALUE, got '{bad}'" in r.output
        assert "internal error" not in r.output and "dd.uc:" not in r.output
    assert not (tmp_path / "dd.elf").exists()
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "dd.elf"), "-D", "X", "-D", "F(x)=x+1"])
    assert r.exit_code == 0, r.output


def test_binary_input_gives_one_line_and_no_bytes(tmp_path: Path) -> None:
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(bytes(3_000_000))
    r = _run(asm_cmd, [str(zeros), "-o", str(tmp_path / "z.elf")])
    assert r.exit_code == 1
    assert r.output == f"{zeros}:1:1: error: a NUL byte: a binary file, not assembler source\n"


def test_a_very_long_source_line_is_echoed_cut(tmp_path: Path) -> None:
    src = tmp_path / "long.uc"
    src.write_text("    alu[a0, --, b, 1]\n    " + "a" * 100_000 + "[a0]\n")
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "l.elf")])
    assert r.exit_code == 1 and f"{src}:2:5: error: unknown instruction 'aaa" in r.output
    assert len(r.output) < 1000 and "\u2026" in r.output


def test_an_output_naming_the_source_is_refused_and_the_source_kept(tmp_path: Path) -> None:
    src = tmp_path / "p.uc"
    src.write_text(GOOD)
    for args in (["-o", str(src)], ["--list", str(src)], ["-o", str(tmp_path / "p.elf"), "--list", str(src)]):
        r = _run(asm_cmd, [str(src), *args])
        assert r.exit_code == 2 and "is also the input SOURCE: writing it would destroy it" in r.output, r.output
        assert src.read_text() == GOOD
    r = _run(asm_cmd, [str(src), "-o", str(tmp_path / "x.elf"), "--list", str(tmp_path / "." / "x.elf")])
    assert r.exit_code == 2 and "-o and --list name the same file" in r.output and not (tmp_path / "x.elf").exists()
    assert _run(asm_cmd, [str(src), "-o", str(tmp_path / "p.elf")]).exit_code == 0
    image = (tmp_path / "p.elf").read_bytes()
    r = _run(disasm_cmd, [str(tmp_path / "p.elf"), "-o", str(tmp_path / "p.elf")])
    assert r.exit_code == 2 and "-o is also the input SOURCE" in r.output
    assert (tmp_path / "p.elf").read_bytes() == image


def test_an_include_directory_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    """`-I typo` was accepted and searched as if empty; it names the directory, exit 2."""
    src = tmp_path / "g.uc"
    src.write_text(GOOD)
    inc = tmp_path / "inc"
    inc.mkdir()
    r = _run(asm_cmd, [str(src), "-I", str(inc), "-I", str(tmp_path / "typo"), "-o", str(tmp_path / "g.elf")])
    assert r.exit_code == 2 and f"Directory '{tmp_path / 'typo'}' does not exist" in r.output, r.output
    assert not (tmp_path / "g.elf").exists()
    (tmp_path / "file").write_text("")
    r = _run(asm_cmd, [str(src), "-I", str(tmp_path / "file")])
    assert r.exit_code == 2 and "is a file" in r.output, r.output
    assert _run(asm_cmd, [str(src), "-I", str(inc), "-o", str(tmp_path / "g.elf")]).exit_code == 0
