"""The assembler's warnings in `npk link` (printed with file:line, `--Werror` fails the
link) and `npk asm --layout L --block NAME` (one block assembled as the link assembles it)
-- issue 45.  The router's own microcode has warnings today (a register copied through a
temporary in qm.uc and hdr_format.h): they are what these tests look for."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.image import read_image
from npkit.toolchain.cli import main
from npkit.toolchain.system.layout import LinkError
from npkit.toolchain.system.link import link

LAYOUTS = Path(__file__).resolve().parents[2] / "microcode" / "layouts"
QM_WARNING = "microcode/qm/qm.uc:148:31: warning: 'ed' cannot be in bank B"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("NPK_CACHE_DIR", str(d))
    return d


def test_link_hands_every_blocks_warnings_over_once_with_their_blocks(cache: Path) -> None:
    # was: link() assembled each block without a Diagnostics, so the warnings were lost
    warnings: list[str] = []
    link("pipelined", warnings=warnings)
    qm = [w for w in warnings if QM_WARNING in w]
    assert len(qm) == 4 and all(w.splitlines()[0].endswith("[block qm]") for w in qm), warnings
    assert any("hdr_format.h:68:23: warning:" in w and "[block hdr_format]" in w for w in warnings), warnings
    assert all(w.splitlines()[1].strip() and w.splitlines()[2].strip() == "^" for w in warnings)  # line and caret
    again: list[str] = []
    link("pipelined", warnings=again)  # the cached image: its warnings come from the cache
    assert again == warnings
    with pytest.raises(LinkError, match=r"^5 assembler warning\(s\) treated as errors \(--Werror\)$"):
        link("pipelined", werror=True)


def test_npk_link_prints_the_warnings_and_werror_fails(tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "r.elf"
    res = CliRunner().invoke(main, ["link", "pipelined", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.count(QM_WARNING) == 4 and out.exists()
    res = CliRunner().invoke(main, ["link", "pipelined", "-o", str(tmp_path / "w.elf"), "--Werror"])
    assert res.exit_code == 1, res.output
    assert res.output.count(QM_WARNING) == 4
    assert "5 assembler warning(s) treated as errors (--Werror)" in res.output
    assert not (tmp_path / "w.elf").exists()


def test_npk_asm_builds_a_block_as_the_link_does(tmp_path: Path, cache: Path) -> None:
    image = link("pipelined", {"threads": 4})
    linked = {p.name: p for p in image.programs}
    elf, lst = tmp_path / "lookup.elf", tmp_path / "lookup.lst"
    res = CliRunner().invoke(main, ["asm", "--layout", str(LAYOUTS / "pipelined.yaml"), "--block", "lookup",
                                    "-D", "threads=4", "-o", str(elf), "--list", str(lst)])  # fmt: skip
    assert res.exit_code == 0, res.output
    [prog] = read_image(elf).programs
    assert (prog.name, prog.ctx_mode, prog.words) == ("lookup", 4, linked["lookup"].words)
    assert "program 'lookup'" in lst.read_text()
    # its warnings as npk asm gives every file's, and --Werror
    res = CliRunner().invoke(main, ["asm", "--layout", "pipelined", "--block", "qm", "-o", str(tmp_path / "qm.elf"),
                                    "--Werror"])  # fmt: skip
    assert res.exit_code == 1 and res.output.count(QM_WARNING) == 4, res.output


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--layout", "pipelined", "--block", "nope"], 1, "the layout has no block 'nope' (blocks with microcode: rx,"),
    (["--layout", "pipelined", "--block", "rx", "-D", "io=host"], 1, "runs no microcode of its own in block 'rx'"),
    (["--layout", "pipelined", "--block", "qm", "-D", "bogus=1"], 1, "-D bogus: the layout has no such parameter"),
    (["--layout", "pipelined", "--block", "qm", "-D", "qlimit"], 2, "-D qlimit: expected NAME=VALUE"),
    (["--layout", "pipelined"], 2, "--layout (or --app) and --block go together"),
    (["x.uc", "--layout", "pipelined", "--block", "qm"], 2, "--layout (or --app) and --block go together, and without SOURCE"),
    ([], 2, "missing SOURCE (or --layout L --block NAME)"),
])  # fmt: skip
def test_npk_asm_layout_block_errors(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    res = CliRunner().invoke(main, ["asm", *args, "-o", str(tmp_path / "b.elf")])
    assert res.exit_code == code and message in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "b.elf").exists()
