"""Hazard warnings and --Werror-able diagnostics."""

from __future__ import annotations

from .helpers import asm, warnings


def test_read_xfer_before_signal_wait() -> None:
    src = ".reg read $r\n.reg x\n.sig s\n sram[read, $r, x, 0, 1], sig_done[s]\n alu[x, --, b, $r]\n ctx_arb[s]\n"
    a = asm(src)
    assert any(
        "before the memory command at address 0 has filled it (ctx_arb[s" in w for w in warnings(a)
    )
    loc = a.diags.warnings[0][1]
    assert loc is not None and loc.line == 5


def test_no_warning_after_wait_or_with_ctx_swap() -> None:
    a = asm(
        ".reg read $r\n.reg x\n.sig s\n sram[read, $r, x, 0, 1], sig_done[s]\n ctx_arb[s]\n alu[x, --, b, $r]\n"
    )
    b = asm(
        ".reg read $r\n.reg x\n.sig s\n sram[read, $r, x, 0, 1], ctx_swap[s]\n alu[x, --, b, $r]\n"
    )
    assert warnings(a) == [] and warnings(b) == []


def test_count_covers_following_xfers() -> None:
    a = asm(
        ".reg read $a $b\n.xfer_order $a $b\n.reg x\n.sig s\n"
        " sram[read, $a, x, 0, 2], sig_done[s]\n alu[x, --, b, $b]\n ctx_arb[s]\n"
    )
    assert len(warnings(a)) == 1


def test_local_csr_write_to_use_distance() -> None:
    near = ".reg x\n local_csr_wr[ACTIVE_LM_ADDR_0, x]\n nop\n alu[x, --, b, *l$index0]\n"
    far = (
        ".reg x\n local_csr_wr[ACTIVE_LM_ADDR_0, x]\n nop\n nop\n nop\n alu[x, --, b, *l$index0]\n"
    )
    assert any("after local_csr_wr" in w for w in warnings(asm(near)))
    assert warnings(asm(far)) == []


def test_branch_into_defer_shadow() -> None:
    a = asm(".reg x\n br[end#], defer[1]\nshadow#: alu[x, x, +, 1]\n beq[shadow#]\nend#: nop\n")
    assert any("defer shadow" in w for w in warnings(a))
    b = asm(".reg x\n br[end#], defer[1]\n alu[x, x, +, 1]\nend#: nop\n")
    assert warnings(b) == []


def test_instruction_growing_inside_defer_shadow() -> None:
    a = asm(".reg x\n br[end#], defer[1]\n immed[x, 0x12345678]\nend#: nop\n")
    assert any("defer shadow" in w and "2 words" in w for w in warnings(a))
    b = asm(".reg x\n br[end#], defer[1]\n immed[x, 0x1234]\nend#: nop\n")
    assert warnings(b) == []


def test_deeply_nested_condition_is_located_error() -> None:
    import pytest

    from npkit.asm.errors import AsmError

    with pytest.raises(AsmError) as e:
        asm(".reg x\n.if (" + "!" * 500 + "(x == 1))\n nop\n.endif\n")
    assert e.value.loc is not None and e.value.loc.line == 2


def test_ctx_swap_with_defer_shadow_read() -> None:
    a = asm(".reg read $r\n.reg x y\n.sig s\n sram[read, $r, x, 0, 1], ctx_swap[s], defer[1]\n"
            " alu[y, --, b, $r]\n alu[y, --, b, $r]\n")  # fmt: skip
    assert len(warnings(a)) == 1 and a.diags.warnings[0][1].line == 5  # type: ignore[union-attr]


def test_overwriting_write_xfer_before_command_sent_it() -> None:
    a = asm(".reg write $w\n.reg x\n.sig s\n alu[$w, --, b, 1]\n sram[write, $w, x, 0, 1], sig_done[s]\n"
            " alu[$w, --, b, 2]\n ctx_arb[s]\n alu[$w, --, b, 3]\n")  # fmt: skip
    ws = warnings(a)
    assert len(ws) == 1 and "overwrites $" in ws[0] and a.diags.warnings[0][1].line == 6  # type: ignore[union-attr]
