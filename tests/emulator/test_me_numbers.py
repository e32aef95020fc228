"""Microengine numbers: the hardware's cluster numbering where microcode sees an ME number,
the flat index inside, and every way a user names an ME (npkit.emulator.me_names)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.image import Image, Program, write_image
from npkit.asm.isa import encode
from npkit.emulator.binding import Chip
from npkit.emulator.loader import LoadError, MeListError, parse_me_list
from npkit.emulator.me_names import MeNameError, parse_me
from npkit.toolchain.commands.run import run_cmd

from .util import chip_with

# IXP2800 HRM p.35 Table 3; IXP2400: Linux uengine.c ME mask 0x000f000f
NUMBERS = {
    "ixp2800": [*range(0x00, 0x08), *range(0x10, 0x18)],
    "ixp2400": [*range(0x00, 0x04), *range(0x10, 0x14)],
}


@pytest.mark.parametrize("config", sorted(NUMBERS))
def test_flat_index_to_hardware_number_and_back(config: str) -> None:
    chip = Chip(config)
    assert [chip.me_number(i) for i in range(chip.num_me)] == NUMBERS[config]
    for i, hw in enumerate(NUMBERS[config]):
        assert chip.lib.npk_me_index(chip._chip, hw) == i
        assert chip.me_name(i) == f"0x{hw:02x}"
        assert chip.me_index(f"0x{hw:02x}") == chip.me_index(f"{hw >> 4}:{hw & 0xF}") == chip.me_index(str(i)) == i
    assert chip.lib.npk_me_index(chip._chip, 0x08) < 0  # between the clusters: no ME


@pytest.mark.parametrize("config", sorted(NUMBERS))
def test_active_ctx_sts_reports_the_hardware_number_on_every_me(config: str) -> None:
    # [7:3] ME number (cluster in bit 7), [2:0] context; the Linux rx code reads
    # [4:0] and [7] of it (ixp2400_rx.uc), Netronome's tests "ME_NUM is in bits [7:3]"
    prog = ["local_csr_rd[ACTIVE_CTX_STS]", "immed[a1, 0]", "ctx_arb[kill]"]
    n = len(NUMBERS[config])
    chip = chip_with(dict.fromkeys(range(n), prog), config=config, ctx_mask=0x88)
    chip.run(500)
    for me, hw in enumerate(NUMBERS[config]):
        for ctx in (3, 7):
            assert chip.reg(me, "a1", ctx=ctx) & 0xFF == hw << 3 | ctx, (config, me, ctx)


def test_interthread_signal_names_the_target_by_hardware_number() -> None:
    # ME 0x00 signals ME 0x11 (flat 9) ctx 2 signal 5: [3:0] sig, [6:4] ctx, [11:7] ME number
    val = 5 | (2 << 4) | (0x11 << 7)
    wait = ["br!=ctx[2, k#]", "ctx_arb[s5]", "immed[a1, 0x5a]", "halt", "k#: ctx_arb[kill]"]
    chip = chip_with({0: [f"immed[$0, 0x{val:x}]", "cap[write, $0, INTERTHREAD_SIG, 1], ctx_swap[s1]", "halt"],
                      9: wait, 1: wait}, ctx_mask=0x5)  # fmt: skip
    chip.run(5000)
    assert chip.reg(9, "a1", ctx=2) == 0x5A
    assert chip.reg(1, "a1", ctx=2) == 0  # flat 1 is ME 0x01: not signalled


def test_names_a_user_may_type() -> None:
    k, n = 8, 16
    assert parse_me("0x10", k, n) == parse_me("1:0", k, n) == parse_me("8", k, n) == 8
    assert parse_me("0x17", k, n) == parse_me("1:7", k, n) == 15
    assert parse_me_list("0x06-0x11", "ixp2800") == [6, 7, 8, 9]
    assert parse_me_list("1:0-1:3,0", "ixp2400") == [4, 5, 6, 7, 0]
    for bad in ("0x08", "2:0", "16", "1:8", "me3"):
        with pytest.raises(MeNameError):
            parse_me(bad, k, n)
    with pytest.raises(LoadError, match="0x10-0x13"):
        parse_me_list("0x14", "ixp2400")


def test_npk_run_names_the_me_the_hardware_way(tmp_path: Path) -> None:
    path = tmp_path / "p.elf"
    write_image(path, Image(programs=[Program(name="p", words=[encode("nop"), encode("halt")])]))
    outs = []
    for spec in ("0x10", "1:0", "8"):
        res = CliRunner().invoke(run_cmd, [str(path), "--me", spec, "--cycles", "100"])
        assert res.exit_code == 0, res.output
        outs.append([line for line in res.output.splitlines() if line.strip().startswith("ME ")])
    assert outs[0] == outs[1] == outs[2] and outs[0][0].split()[:3] == ["ME", "0x10", "p"]
    res = CliRunner().invoke(run_cmd, [f"{path}@0x13", "--config", "ixp2400", "--cycles", "100"])
    assert res.exit_code == 0 and " ME 0x13 p " in res.output
    res = CliRunner().invoke(run_cmd, [str(path), "--me", "0x08", "--cycles", "100"])
    # a usage error (exit 2): the option names an ME the chip does not have
    assert res.exit_code == 2 and "0x00-0x07, 0x10-0x17" in res.output and "Traceback" not in res.output


def test_an_me_named_twice_or_a_dangling_dash_is_refused_with_what_is_wrong() -> None:
    for text, message in (("0,0", "ME list '0,0' names ME 0x00 twice"), ("0-3,2", "names ME 0x02 twice"),
                          ("1:0,0x10", "names ME 0x10 twice"),
                          ("-1", "ME '-1': expected an ME (0x10, 1:0, 8) or a range FIRST-LAST")):  # fmt: skip
        with pytest.raises(MeListError, match=re.escape(message)):
            parse_me_list(text, "ixp2800")
