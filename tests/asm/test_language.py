"""One test per language feature of the assembler (directives, scopes, structured flow)."""

from __future__ import annotations

import pytest

from npkit.asm.errors import AsmError

from .helpers import asm, sym, texts, warnings


def test_labels_and_branch_targets() -> None:
    a = asm("start#: alu[a0, --, b, 1]\n br[start#]\n later#: nop\n beq[later#]\n")
    assert texts(a) == ["alu[a0, --, B, 1]", "br[0]", "nop", "beq[2]"]
    assert sym(a, "start") == 0 and sym(a, "later") == 2


def test_two_labels_on_one_line() -> None:
    a = asm("a#: b#: nop\n br[b#]\n")
    assert sym(a, "a") == sym(a, "b") == 0


def test_duplicate_label_is_located_error() -> None:
    with pytest.raises(AsmError) as e:
        asm("x#: nop\nx#: nop\n")
    assert (
        e.value.loc is not None and e.value.loc.line == 2 and "already defined" in e.value.message
    )


def test_reg_allocates_virtual_names() -> None:
    a = asm(".reg x y\n alu[x, x, +, y]\n")
    x, y = sym(a, "x"), sym(a, "y")
    assert isinstance(x, str) and isinstance(y, str) and x[0] != y[0]  # opposite banks
    assert texts(a) == [f"alu[{x}, {x}, +, {y}]"]


def test_lowercase_ops_and_five_operand_alu() -> None:
    a = asm(".reg x\n alu[--, 1, and, x, >>15]\n alu[x, x, or, 3]\n")
    t = texts(a)
    assert t[0].startswith("alu_shf[--, 1, AND, ") and t[0].endswith(">>15]")
    assert "OR" in t[1]


def test_undeclared_names_become_globals_with_a_warning() -> None:
    # Intel's assembler takes an undeclared name as a global register; so do we, and say so
    a = asm(
        "    alu[x, --, b, 1]\n.begin\n.reg y\n alu[y, x, +, $t]\n ctx_arb[sg]\n.end\n alu[x, x, +, 2]\n"
    )
    assert (
        str(sym(a, "x"))[0] in "ab"
        and str(sym(a, "$t")).startswith("$")
        and isinstance(sym(a, "sg"), int)
    )
    (m, loc), *_ = a.diags.warnings
    assert "'x' is not declared" in m and loc is not None and (loc.line, loc.col) == (1, 9)
    assert len(a.diags.warnings) == 3


def test_gpr_arrays_and_xfer_order_of_array() -> None:
    a = asm(
        "#define N 3\n.reg v[N]\n.reg read $in[(N + 1)]\n.xfer_order $in\n"
        " sram[read, $in[0], v[0], 0, 4], ctx_swap[s1]\n alu[v[1], v[2], +, $in[3]]\n"
    )
    assert sym(a, "v[1]") != sym(a, "v[2]")
    assert int(str(sym(a, "$in[3]"))[1:]) == int(str(sym(a, "$in[0]"))[1:]) + 3


def test_xfer_order_declares_names() -> None:
    a = asm(".xfer_order $p $q\n alu[$p, --, b, 1]\n alu[$q, --, b, 2]\n")
    assert int(str(sym(a, "$q"))[1:]) == int(str(sym(a, "$p"))[1:]) + 1


def test_unknown_instruction() -> None:
    with pytest.raises(AsmError) as e:
        asm("  frobnicate[a0]\n")
    assert (
        e.value.loc is not None
        and e.value.loc.col == 3
        and "unknown instruction" in e.value.message
    )


def test_constant_expressions_and_too_large_constant() -> None:
    a = asm("#define N 4\n.reg x\n alu[x, --, b, (N * 3 - 1)]\n")
    assert texts(a)[0].endswith(", 0xb]")
    with pytest.raises(AsmError) as e:
        asm(".reg x\n alu[x, --, b, 0x1234]\n")
    assert "immed" in e.value.message and e.value.loc is not None and e.value.loc.col == 16


def test_immed_too_wide_becomes_w0_w1() -> None:
    a = asm(".reg x\n immed[x, 0x12345678]\n immed[x, 0xffff0000]\n")
    t = texts(a)
    assert t[0].startswith("immed_w0[") and t[0].endswith("0x5678]")
    assert t[1].startswith("immed_w1[") and t[1].endswith("0x1234]")
    assert len(t) == 3  # 0xffff0000 fits one immed (16 bits shifted by 2 bytes)


def test_address_of_signal_and_xfer() -> None:
    a = asm(
        ".sig s_a s_b\n.reg read $r\n.reg x\n local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&s_b << 3))]\n"
        " immed_w1[x, (&$r | (&s_a << 12))]\n ctx_arb[s_a]\n ctx_arb[s_b]\n alu[x, --, b, $r]\n"
    )
    sa, sb, r = sym(a, "s_a"), sym(a, "s_b"), int(str(sym(a, "$r"))[1:])
    t = texts(a)
    assert t[0] == f"local_csr_wr[SAME_ME_SIGNAL, 0x{0x80 | sb << 3:x}]"
    assert t[1].endswith(f"0x{r | sa << 12:x}]")


def test_scope_registers_are_local() -> None:
    a = asm(".begin\n.reg t\n alu[t, --, b, 1]\n.end\n alu[t, --, b, 2]\n")
    # outside its scope `t` is unknown: a new global register, with a warning at line 5
    ((m, loc),) = a.diags.warnings
    assert "'t' is not declared" in m and loc is not None and loc.line == 5
    inner, outer = (s.value for s in a.program.symbols if s.name == "t")
    assert [s.scope for s in a.program.symbols if s.name == "t"][0] == "t.uc:1:1"
    assert inner != outer  # the implicit global lives over the whole program


def test_sibling_scopes_share_registers() -> None:
    src = "".join(f".begin\n.reg t{i} u{i}\n alu[t{i}, t{i}, +, u{i}]\n.end\n" for i in range(40))
    a = asm(src)  # 80 names, but only two live at a time
    used = {sym(a, f"t{i}") for i in range(40)} | {sym(a, f"u{i}") for i in range(40)}
    assert len(used) == 2


def test_unbalanced_begin_end() -> None:
    with pytest.raises(AsmError, match=".begin without"):
        asm(".begin\n nop\n")
    with pytest.raises(AsmError, match=".end without"):
        asm(" nop\n.end\n")


def test_global_qualifier_escapes_scope() -> None:
    a = asm(".begin\n.reg global g\n immed[g, 1]\n.end\n alu[g, g, +, 1]\n")
    assert len(texts(a)) == 2


def test_xfer_order_gives_consecutive_indices() -> None:
    a = asm(
        ".reg read $c $a $b\n.xfer_order $a $b $c\n.reg x\n"
        " sram[read, $a, x, 0, 3], ctx_swap[s1]\n alu[x, $a, +, $b]\n alu[x, x, +, $c]\n"
    )
    ia, ib, ic = (int(str(sym(a, n))[1:]) for n in ("$a", "$b", "$c"))
    assert (ib, ic) == (ia + 1, ia + 2)


def test_xfer_array() -> None:
    a = asm(
        ".reg read $buf[4]\n.reg x\n sram[read, $buf[0], x, 0, 4], ctx_swap[s1]\n alu[x, --, b, $buf[3]]\n"
    )
    assert texts(a)[1].endswith(f"${int(str(sym(a, '$buf[0]'))[1:]) + 3}]")


def test_count_reserves_consecutive_xfers() -> None:
    # $blk needs 4 registers for the read; $other must not land inside them
    a = asm(
        ".reg read $blk $other\n.reg x\n sram[read, $blk, x, 0, 4], ctx_swap[s1]\n"
        " alu[x, $blk, +, $other]\n"
    )
    blk, other = int(str(sym(a, "$blk"))[1:]), int(str(sym(a, "$other"))[1:])
    assert not blk <= other < blk + 4


def test_read_and_write_xfers_share_an_index() -> None:
    a = asm(
        ".reg read $in\n.reg write $out\n.reg x\n scratch[get, $in, x, 0, 1], ctx_swap[s1]\n"
        " alu[$out, $in, +, 1]\n scratch[put, $out, x, 4, 1], ctx_swap[s1]\n"
    )
    assert sym(a, "$in") == sym(a, "$out")


def test_dram_xfers() -> None:
    a = asm(".reg $$d\n.reg x\n dram[read, $$d, x, 0, 1], ctx_swap[s2]\n alu[x, --, b, $$d]\n")
    assert str(sym(a, "$$d")).startswith("$$")


def test_addr_pins_register_and_signal() -> None:
    a = asm(
        ".reg x\n.addr x 7 b\n.sig q\n.addr q 9\n alu[x, --, b, 1], no_cc\n ctx_arb[q]\n".replace(
            ", no_cc", ""
        )
    )
    assert sym(a, "x") == "b7" and sym(a, "q") == 9


def test_areg_breg() -> None:
    a = asm(".areg p 5\n.breg q 6\n alu[p, p, +, q]\n")
    assert (sym(a, "p"), sym(a, "q")) == ("a5", "b6")


def test_set_sig_recorded_in_image() -> None:
    a = asm(".sig go\n.set_sig go\n ctx_arb[go]\n")
    assert a.program.set_sigs == [sym(a, "go")]


def test_set_marks_registers() -> None:
    asm(".reg read $r\n.set $r\n alu[--, --, b, $r]\n")
    with pytest.raises(AsmError, match="not a declared register"):
        asm(".set nothere\n nop\n")


def test_init_register_and_memory() -> None:
    a = asm(".reg x\n.init x 0x1234\n.alloc_mem tbl sram 16\n.init tbl 1 2\n alu[x, x, +, 1]\n")
    assert a.program.init_regs == [(sym(a, "x"), None, 0x1234)]
    assert a.program.init_mem == [("sram", 0, bytes([0, 0, 0, 1, 0, 0, 0, 2]))]


def test_alloc_mem_addresses_usable_in_expressions() -> None:
    a = asm(
        ".alloc_mem a lmem 12\n.local_mem b 8 16\n.alloc_mem c scratch 4\n.reg x\n"
        " immed[x, b]\n immed[x, (&c + 4)]\n"
    )
    assert (sym(a, "a"), sym(a, "b"), sym(a, "c")) == (0, 16, 0)
    assert texts(a)[0].endswith(", 0x10]") and texts(a)[1].endswith(", 0x4]")


def test_operand_synonym() -> None:
    a = asm(".reg count\n.operand_synonym n count\n alu[n, n, +, 1]\n")
    assert texts(a)[0] == f"alu[{sym(a, 'count')}, {sym(a, 'count')}, +, 1]"


def test_num_contexts_directive_and_flag() -> None:
    a = asm(".num_contexts 4\n.reg x\n alu[x, --, b, $20]\n")
    assert a.program.ctx_mode == 4
    with pytest.raises(AsmError, match="out of range"):
        asm(".reg x\n alu[x, --, b, 1]\n sram[read, $20, x, 0, 1], ctx_swap[s1]\n")
    assert (
        asm(".reg x\n sram[read, $20, x, 0, 1], ctx_swap[s1]\n", ctx_mode=4).program.ctx_mode == 4
    )
    with pytest.raises(AsmError, match="contradicts"):
        asm(".num_contexts 8\n nop\n", ctx_mode=4)


def test_physical_registers_are_reserved() -> None:
    a = asm(
        ".reg x y\n alu[a0, --, b, 1]\n alu[b0, --, b, 1]\n alu[x, x, +, y]\n alu[a0, a0, +, b0]\n"
    )
    assert "a0" not in (sym(a, "x"), sym(a, "y")) and "b0" not in (sym(a, "x"), sym(a, "y"))


def test_absolute_registers_avoid_every_context() -> None:
    a = asm(".reg @g @h\n.reg x\n immed[@g, 1]\n immed[@h, 2]\n alu[x, @g, +, @h]\n")
    g, h = str(sym(a, "@g")), str(sym(a, "@h"))
    assert g.startswith("@") and h.startswith("@")
    rel_x = int(str(sym(a, "x"))[1:])
    for v in (g, h):
        assert int(v[2:]) % 16 != rel_x or v[1] != str(sym(a, "x"))[0]
    # all eight contexts' copies of the chosen relative index are off limits for relative registers
    assert int(g[2:]) % 16 == 15


def test_absolute_register_in_restricted_field_is_error() -> None:
    with pytest.raises(AsmError, match="absolute register"):
        asm(".reg @g x\n alu_shf[x, --, b, @g, <<1]\n")


def test_signal_pair_for_dram() -> None:
    a = asm(".sig d\n.reg $$x\n.reg y\n dram[read, $$x, y, 0, 1], sig_done[d]\n ctx_arb[d]\n")
    n = sym(a, "d")
    assert isinstance(n, int) and n % 2 == 0
    assert texts(a)[1] == f"ctx_arb[s{n}, s{n + 1}]"


def test_explicit_signals_are_reserved() -> None:
    a = asm(".sig q\n ctx_arb[s1]\n ctx_arb[q]\n")
    assert sym(a, "q") != 1


def test_four_vs_eight_context_register_limits() -> None:
    names = " ".join(f"r{i}" for i in range(40))
    uses = "".join(f" immed[r{i}, {i}]\n" for i in range(40))
    with pytest.raises(AsmError, match="out of general-purpose registers"):
        asm(f".reg {names}\n{uses}")
    a = asm(f".num_contexts 4\n.reg {names}\n{uses}")
    assert len({sym(a, f"r{i}") for i in range(40)}) == 40


def test_too_many_registers_names_the_scope() -> None:
    names = " ".join(f"r{i}" for i in range(33))
    with pytest.raises(AsmError) as e:
        asm(
            f" nop\n.begin\n.reg {names}\n"
            + "".join(f" immed[r{i}, 1]\n" for i in range(33))
            + ".end\n"
        )
    assert ".begin scope at t.uc:2" in e.value.message


def test_ctx_swap_and_defer_tokens() -> None:
    a = asm(".sig s\n.reg x\n sram[read, $0, x, 0, 1], ctx_swap[s], defer[1]\n nop\n")
    assert texts(a)[0].endswith(f"ctx_swap[s{sym(a, 's')}], defer[1]")


def test_halt_nop_and_csr_names_case_insensitive() -> None:
    a = asm(" local_csr_rd[active_ctx_sts]\n nop\n halt\n")
    assert texts(a) == ["local_csr_rd[ACTIVE_CTX_STS]", "nop", "halt"]


def test_macros_and_line_table() -> None:
    a = asm("#macro inc[r]\n alu[r, r, +, 1]\n#endm\n.reg x\n inc[x]\n inc[x]\n")
    assert len(a.program.lines) == 2
    assert a.program.lines[0].line == 2 and "inc" in a.program.lines[0].macro


def test_empty_program_is_error() -> None:
    with pytest.raises(AsmError, match="no instructions"):
        asm("; nothing\n.reg x\n")


def test_warnings_for_bank_move() -> None:
    a = asm(".reg x y\n alu[x, y, +, y]\n")
    assert len(a.program.words) == 2
    assert any("temporary" in w for w in warnings(a))


def test_unused_declarations_take_no_register() -> None:
    names = " ".join(f"r{i}" for i in range(100))  # far more than a bank holds, but only two used
    a = asm(
        f".reg {names}\n.sig {' '.join(f'q{i}' for i in range(20))}\n alu[r0, r0, +, r1]\n ctx_arb[q3]\n"
    )
    assert {s.name for s in a.program.symbols if s.kind in ("reg", "signal")} == {"r0", "r1", "q3"}


def test_address_of_counts_as_a_use() -> None:
    a = asm(".sig only_addr\n local_csr_wr[SAME_ME_SIGNAL, (&only_addr << 3)]\n")
    n = sym(a, "only_addr")
    assert isinstance(n, int) and 1 <= n <= 15
    assert int(texts(a)[0].split(", ")[1].rstrip("]"), 0) == n << 3


def test_jump_table_targets_hint_and_label_values() -> None:
    a = asm(
        ".reg ret\n immed[ret, back#]\n jump[ret, back#], targets[back#, other#]\nback#: nop\nother#: rtn[ret]\n"
    )
    t = texts(a)
    assert t[0].endswith(", 0x2]") and t[1].startswith("jump[")
    with pytest.raises(AsmError) as e:
        asm(".reg r\n jump[r, l#], targets[l#, nowhere#]\nl#: nop\n")
    assert "nowhere#" in e.value.message and e.value.loc is not None and e.value.loc.col == 15


def test_bad_optional_token_points_at_the_token() -> None:
    with pytest.raises(AsmError) as e:
        asm(".reg x\n alu[x, x, +, 1], bogus_token\n")
    assert e.value.loc is not None and e.value.loc.col == 19 and "bogus_token" in e.value.message


def test_init_per_context_values() -> None:
    a = asm(".reg x\n.init x 0 1 2 3 4 5 6 7\n alu[x, x, +, 1]\n")
    assert a.program.init_regs == [(sym(a, "x"), c, c) for c in range(8)]
    with pytest.raises(AsmError, match="one per context"):
        asm(".reg x\n.init x 1 2\n alu[x, x, +, 1]\n")


def test_dot_word_emits_raw_words() -> None:
    a = asm(" nop\n.word 0x123456789a\n.word (1 << 39)\n")
    assert a.program.words[1:] == [0x123456789A, 1 << 39]
    with pytest.raises(AsmError, match="40 bits"):
        asm(".word 0x10000000000\n")


def test_two_word_immed_into_transfer_register_is_refused() -> None:
    # immed_w1 keeps the low half by reading the destination back; a write transfer register
    # reads back its read half, so the split would load garbage
    with pytest.raises(AsmError) as e:
        asm(".reg write $w\n immed[$w, 0x12345678]\n")
    assert (
        "cannot be read back" in e.value.message
        and e.value.loc is not None
        and e.value.loc.col == 12
    )
    assert len(asm(".reg write $w\n immed[$w, 0x1234]\n").program.words) == 1
    assert len(asm(" immed[*l$index0[1], 0x12345678]\n").program.words) == 2


def test_encoder_errors_point_at_the_operand() -> None:
    with pytest.raises(AsmError) as e:
        asm(".reg x y\n alu[x, y, frob, 1]\n")
    assert e.value.loc is not None and (e.value.loc.line, e.value.loc.col) == (2, 12)
    with pytest.raises(AsmError) as e:
        asm(".reg x\n sram[read, $0, x, 0, 9], ctx_swap[s1]\n")
    assert "count" in e.value.message and e.value.loc is not None and e.value.loc.col == 23


def test_set_sig_after_code_is_a_note_not_an_initial_state() -> None:
    # Linux ixp2400_rx.uc writes `.set_sig mpacket_arrived` after the ctx_arb that
    # waits for it, as a note to the assembler; presetting it would wake the thread early.
    a = asm(".sig early late\n.set_sig early\n ctx_arb[early]\n .set_sig late\n ctx_arb[late]\n")
    assert a.program.set_sigs == [sym(a, "early")]
