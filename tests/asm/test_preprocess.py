"""Preprocessor: directives, expansion, locations and robustness."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npkit.asm.preprocess as pp_mod
from npkit.asm.errors import AsmError, Diagnostics
from npkit.asm.preprocess import LogicalLine, preprocess

DATA = Path(__file__).parent / "data" / "pp"


def run(src: str, **kw) -> list[LogicalLine]:
    """Preprocess ``src`` as if it were the file t.uc in the fixture dir."""
    return preprocess(DATA / "t.uc", source_text=textwrap.dedent(src), **kw)


def texts(src: str, **kw) -> list[str]:
    return [line.text for line in run(src, **kw)]


def error_of(src: str, **kw) -> AsmError:
    with pytest.raises(AsmError) as info:
        run(src, **kw)
    assert info.value.loc is not None, "every error must carry a location"
    return info.value


# --------------------------------------------------------------------------
# Logical lines and locations


def test_logical_lines_carry_file_line_col_and_physical_text() -> None:
    lines = run("\n\n   alu[a, b, +, c]\n\t.reg x\n")
    assert [ln.text for ln in lines] == ["alu[a, b, +, c]", ".reg x"]
    first, second = lines
    assert first.loc.file == str(DATA / "t.uc")
    assert (first.loc.line, first.loc.col) == (3, 4)
    assert first.loc.text == "   alu[a, b, +, c]"
    assert (second.loc.line, second.loc.col) == (4, 2)
    assert first.loc.expansion == ()


def test_only_newlines_end_lines() -> None:
    lines = run("a\r\n\x0cb\x0bc\r\nd\n")
    assert [(ln.text, ln.loc.line) for ln in lines] == [
        ("a", 1),
        ("\x0cb\x0bc".strip(), 2),
        ("d", 3),
    ]


def test_preprocess_reads_the_file_when_no_text_is_given() -> None:
    out = preprocess(DATA / "which.h")
    assert [ln.text for ln in out] == ["which_local"]
    assert out[0].loc.line == 1


def test_unreadable_main_file_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(AsmError, match="cannot read") as info:
        preprocess(tmp_path / "absent.uc")
    assert info.value.loc is not None


# --------------------------------------------------------------------------
# Comments


def test_line_comments_both_styles() -> None:
    assert texts("immed[a, 1] // one\nimmed[b, 2] ; two\n; whole line\n// whole\n") == [
        "immed[a, 1]",
        "immed[b, 2]",
    ]


def test_block_comments_span_lines_and_keep_columns() -> None:
    lines = run("/* start\n still comment\n end */ immed[a, 1] /* x */ ; y\nimmed[b, 2]\n")
    assert [ln.text for ln in lines] == ["immed[a, 1]", "immed[b, 2]"]
    assert (lines[0].loc.line, lines[0].loc.col) == (3, 9)


def test_comment_markers_inside_strings_are_text() -> None:
    out = texts('#warning "a ; b // c /* d"\n.init x "semi;colon" // gone\n', diags=Diagnostics())
    assert out == ['.init x "semi;colon"']


# --------------------------------------------------------------------------
# Continuation


def test_trailing_comma_continues_the_line() -> None:
    lines = run(
        """\
        sram[read, $stemp, _buffer_handle, 0, 2],
                ctx_swap[zzz]
        next
        """
    )
    assert [ln.text for ln in lines] == [
        "sram[read, $stemp, _buffer_handle, 0, 2], ctx_swap[zzz]",
        "next",
    ]
    assert lines[0].loc.line == 1
    assert lines[1].loc.line == 3


def test_backslash_and_open_brackets_continue_the_line() -> None:
    out = texts(
        """\
        alu[a, b, \\
            +, c]
        dram[rbuf_rd, --, start, offset,   // comment inside
            // a comment-only line does not end it
            max_8]
        move(x, ((1 << 24) |
            (2 << 16)))
        """
    )
    assert out == [
        "alu[a, b, +, c]",
        "dram[rbuf_rd, --, start, offset, max_8]",
        "move(x, ((1 << 24) | (2 << 16)))",
    ]


def test_continuation_never_swallows_a_directive() -> None:
    out = texts("#if 0\nalu[broken,\n#endif\nok\n")
    assert out == ["ok"]


def test_backslash_continues_a_directive() -> None:
    out = texts("#define LONG 1 + \\\n   2\nimmed[a, LONG]\n")
    assert out == ["immed[a, 1 + 2]"]


def test_trailing_comma_does_not_continue_a_directive() -> None:
    out = texts("#define LIST a, b,\nimmed[x, 1]\nLIST\n")
    assert out == ["immed[x, 1]", "a, b,"]


# --------------------------------------------------------------------------
# #define, #undef, substitution


def test_object_and_empty_defines() -> None:
    out = texts(
        """\
        #define SHIFT 5
        #define EMPTY
        alu_shf[addr, --, b, t, <<SHIFT]
        a EMPTY b
        """
    )
    assert out == ["alu_shf[addr, --, b, t, <<5]", "a  b"]


def test_function_like_defines_with_nested_arguments() -> None:
    out = texts(
        """\
        #define BF_A(a, w) a[w]
        #define MASK(w) ((1 << (w)) - 1)
        alu[BF_A(vec, (1 + 2)), --, b, MASK(4)]
        #define PAIR(x, y) x, y
        f(PAIR([a, b], g(c, d)))
        """
    )
    assert out == ["alu[vec[(1 + 2)], --, b, ((1 << (4)) - 1)]", "f([a, b], g(c, d))"]


def test_function_like_name_without_arguments_is_left_alone() -> None:
    assert texts("#define F(x) x+1\nimmed[F, 2]\n") == ["immed[F, 2]"]


def test_function_like_define_argument_count_is_checked() -> None:
    err = error_of("#define F(a, b) a+b\nimmed[x, F(1)]\n")
    assert "'F' takes 2 argument(s), 1 given" in err.message
    assert err.loc is not None and err.loc.line == 2


def test_undef_removes_a_define() -> None:
    assert texts("#define X 1\nX\n#undef X\nX\n") == ["1", "X"]


def test_substitution_only_replaces_whole_identifiers() -> None:
    out = texts(
        """\
        #define x foo
        #define reg R
        #define abs A
        x xx x_1 $x $$x @abs .reg x#: "x" 0x1f
        """
    )
    assert out == ['foo xx x_1 $x $$x @abs .reg foo#: "x" 0x1f']


def test_expansion_is_rescanned_but_not_recursive() -> None:
    out = texts(
        """\
        #define A B + 1
        #define B C * 2
        #define C 7
        #define SELF SELF + 1
        #define P Q
        #define Q P
        A
        SELF
        P
        """
    )
    assert out == ["7 * 2 + 1", "SELF + 1", "P"]


def test_redefinition_with_a_different_value_warns() -> None:
    diags = Diagnostics()
    out = texts("#define X 1\n#define X 1\n#define X 2\nX\n", diags=diags)
    assert out == ["2"]
    assert len(diags.warnings) == 1
    message, loc = diags.warnings[0]
    assert "'X' redefined" in message
    assert loc is not None and loc.line == 3


def test_define_name_errors_are_located() -> None:
    err = error_of("\n#define 3abc 1\n")
    assert "expected a name after #define" in err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 9)
    assert "expected a name after #undef" in error_of("#undef\n").message
    assert "missing ')'" in error_of("#define F(a, b x\n").message
    assert "invalid parameter name" in error_of("#define F(a, 2) x\n").message


# --------------------------------------------------------------------------
# Token pasting


def test_paste_happens_after_substitution() -> None:
    out = texts("#define N 3\nalu[reg/**/N, --, b, 0]\n")
    assert out == ["alu[reg3, --, b, 0]"]


def test_pasted_name_is_expanded_again() -> None:
    out = texts(
        """\
        #define OPS COPY
        #define COPY_INSTRUCTIONS 2
        #if (OPS/**/_INSTRUCTIONS > 1)
        two
        #endif
        immed[n, OPS/**/_INSTRUCTIONS]
        """
    )
    assert out == ["two", "immed[n, 2]"]


def test_paste_builds_labels_with_hash() -> None:
    out = texts("#define IDX 3\nlanding/**/IDX#:\n", unique_macro_labels=False)
    assert out == ["landing3#:"]


def test_non_terminating_paste_is_an_error() -> None:
    err = error_of("#define A A/**/\nA\n")
    assert "does not terminate" in err.message


# --------------------------------------------------------------------------
# #define_eval


def test_define_eval_stores_the_value_now() -> None:
    out = texts(
        """\
        #define Y 4
        #define_eval X (Y * 2 + 1)
        #define LAZY (Y * 2 + 1)
        #undef Y
        #define Y 100
        immed[a, X]
        immed[b, LAZY]
        #define_eval NEG (0 - 3)
        immed[c, NEG]
        """
    )
    assert out == ["immed[a, 9]", "immed[b, (100 * 2 + 1)]", "immed[c, -3]"]


def test_define_eval_counter_does_not_warn() -> None:
    diags = Diagnostics()
    texts("#define_eval I 0\n#define_eval I (I + 1)\n#define_eval I (I + 1)\n", diags=diags)
    assert diags.warnings == []


def test_define_eval_keeps_non_constant_text_and_quoted_text() -> None:
    out = texts(
        """\
        #define_eval DST $pkt_rd
        #define N 2
        #define_eval LIST 'a/**/N,b'
        alu[DST[0], --, b, 1]
        LIST
        """
    )
    assert out == ["alu[$pkt_rd[0], --, b, 1]", "a2,b"]


def test_define_eval_arithmetic_fault_is_an_error() -> None:
    err = error_of("#define Z 0\n#define_eval Q (4 / Z)\n")
    assert "division by zero" in err.message
    assert err.loc is not None and err.loc.line == 2
    assert "needs an expression" in error_of("#define_eval Q\n").message


# --------------------------------------------------------------------------
# Conditionals


def test_if_elif_else_chain() -> None:
    src = """\
        #if V == 1
        one
        #elif V == 2
        two
        #elif V == 3
        three
        #else
        other
        #endif
        """
    for v, expected in [("1", "one"), ("2", "two"), ("3", "three"), ("9", "other")]:
        assert texts(src, defines={"V": v}) == [expected]


def test_nested_conditionals_and_ifdef() -> None:
    out = texts(
        """\
        #define A
        #ifdef A
          #ifndef B
            a_not_b
          #else
            a_and_b
          #endif
          #if 0
            #if 1
              never
            #endif
          #endif
        #else
          not_a
        #endif
        """
    )
    assert out == ["a_not_b"]


def test_skipped_regions_are_not_evaluated() -> None:
    out = texts(
        """\
        #if 1
        taken
        #elif 1 / 0
        #error never reached
        #else
        #bogus directive in a skipped region
        #endif
        #ifdef __LINE__
        #elif undefined_name_is_fine_here
        #else
        #endif
        """
    )
    assert out == ["taken"]


def test_defined_operand_is_not_expanded_and_short_circuits() -> None:
    out = texts(
        """\
        #define X Y
        #if defined(X) && !defined Y
        x_only
        #endif
        #if defined(NOPE) && NOPE > 3
        bad
        #else
        guarded
        #endif
        """
    )
    assert out == ["x_only", "guarded"]


def test_undefined_name_in_if_is_a_located_error() -> None:
    err = error_of("\n#if FOO > 1\n#endif\n")
    assert "undefined symbol 'FOO'" in err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 5)


def test_expression_error_after_expansion_mentions_the_expanded_text() -> None:
    err = error_of("#define E (1 +)\n#if E\n#endif\n")
    assert "after expansion" in err.message and "(1 +)" in err.message


@pytest.mark.parametrize(
    ("src", "message", "line"),
    [
        ("#if 1\nx\n", "unterminated #if", 1),
        ("x\n#endif\n", "#endif without #if", 2),
        ("#else\n", "#else without #if", 1),
        ("#elif 1\n", "#elif without #if", 1),
        ("#if 0\n#else\n#else\n#endif\n", "#else after #else", 3),
        ("#if 1\n#else\n#elif 1\n#endif\n", "#elif after #else", 3),
        ("#if 0\n#else\n#elif 1\n#endif\n", "#elif after #else", 3),
        ("#if\n#endif\n", "#if needs an expression", 1),
        ("#ifdef\n#endif\n", "expected a name after #ifdef", 1),
        ("#if 0\n#if 1\n#endif\n", "unterminated #if", 1),
    ],
)
def test_unbalanced_conditionals_are_located_errors(src: str, message: str, line: int) -> None:
    err = error_of(src)
    assert message in err.message
    assert err.loc is not None and err.loc.line == line


# --------------------------------------------------------------------------
# #while


def test_while_reevaluates_its_condition() -> None:
    out = texts(
        """\
        #define_eval I 0
        #while (I < 3)
            immed[r/**/I, I]
            #define_eval I (I + 1)
        #endloop
        done
        """
    )
    assert out == ["immed[r0, 0]", "immed[r1, 1]", "immed[r2, 2]", "done"]


def test_nested_while_loops() -> None:
    out = texts(
        """\
        #define_eval I 0
        #while I < 2
          #define_eval J 0
          #while J < 2
            p I J
            #define_eval J (J + 1)
          #endloop
          #define_eval I (I + 1)
        #endloop
        """
    )
    assert out == ["p 0 0", "p 0 1", "p 1 0", "p 1 1"]


def test_runaway_while_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pp_mod, "MAX_WHILE_ITERATIONS", 50)
    err = error_of("x\n#while 1\n#endloop\n")
    assert "did not finish after 50 iterations" in err.message
    assert err.loc is not None and err.loc.line == 2


def test_while_structure_errors() -> None:
    assert "unterminated #while" in error_of("#while 0\nx\n").message
    assert "#endloop without #while" in error_of("#endloop\n").message


# --------------------------------------------------------------------------
# #error, #warning, unknown directives


def test_error_directive_stops_with_its_message() -> None:
    err = error_of(
        """\
        #define FLAG 2
        #if FLAG != 1
        #error FLAG is not 1
        #endif
        """
    )
    assert err.message == "FLAG is not 1"
    assert err.loc is not None and err.loc.line == 3
    assert error_of('#error "quoted message"\n').message == "quoted message"


def test_warning_directive_goes_to_diagnostics() -> None:
    diags = Diagnostics()
    out = texts('a\n  #warning "check this"\nb\n', diags=diags)
    assert out == ["a", "b"]
    assert [(m, loc.line, loc.col) for m, loc in diags.warnings if loc] == [("check this", 2, 3)]


def test_unknown_directive_is_a_located_error() -> None:
    err = error_of("ok\n   #foo bar\n")
    assert err.message == "unknown preprocessor directive '#foo'"
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 4)


def test_hash_inside_text_is_not_a_directive() -> None:
    out = texts("loop#:\n    br[loop#]\n#\n", unique_macro_labels=False)
    assert out == ["loop#:", "br[loop#]", "#"]


def test_error_renders_with_file_line_and_caret() -> None:
    with pytest.raises(AsmError) as info:
        preprocess(DATA / "t.uc", source_text="\n\t#nope\n")
    rendered = str(info.value)
    assert rendered.startswith(f"{DATA / 't.uc'}:2:2: error: unknown preprocessor directive")
    assert "Traceback" not in rendered
    assert rendered.splitlines()[-1].strip() == "^"


# --------------------------------------------------------------------------
# #include


def test_include_search_order_guards_and_relative_nesting() -> None:
    out = preprocess(DATA / "main.uc", include_dirs=[DATA / "incdir"])
    assert [ln.text for ln in out] == [
        "which_local",
        "angle_incdir",
        "guarded_body",
        "sibling_of_nested",
        "main_done#:",
        "ctx_arb[kill]",
    ]
    assert Path(out[0].loc.file) == DATA / "which.h"
    assert Path(out[1].loc.file) == DATA / "incdir" / "which_angle.h"
    assert Path(out[3].loc.file) == DATA / "sub" / "sibling.h"


def test_angle_include_falls_back_to_the_including_directory() -> None:
    out = preprocess(DATA / "main.uc")
    assert [ln.text for ln in out][:2] == ["which_local", "angle_local"]


def test_include_dirs_are_searched_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "x.h").write_text("from_first\n")
    (second / "x.h").write_text("from_second\n")
    (second / "y.h").write_text("only_second\n")
    out = preprocess(
        tmp_path / "m.uc",
        include_dirs=[first, str(second)],
        source_text='#include "x.h"\n#include <y.h>\n',
    )
    assert [ln.text for ln in out] == ["from_first", "only_second"]


def test_include_name_may_come_from_a_define() -> None:
    out = texts('#define HDR "guarded.h"\n#include HDR\n')
    assert out == ["guarded_body"]


def test_missing_include_is_a_located_error() -> None:
    with pytest.raises(AsmError) as info:
        preprocess(DATA / "missing_include.uc")
    err = info.value
    assert "cannot find include file 'does_not_exist.h'" in err.message
    assert err.loc is not None
    assert Path(err.loc.file) == DATA / "missing_include.uc"
    assert err.loc.line == 2


def test_recursive_include_hits_the_depth_limit() -> None:
    with pytest.raises(AsmError, match="#include nested too deeply") as info:
        preprocess(DATA / "self_include.uc")
    assert info.value.loc is not None and info.value.loc.line == 1


def test_bad_include_syntax() -> None:
    assert 'expects "file" or <file>' in error_of("#include nothing_quoted\n").message
    assert "empty file name" in error_of('#include ""\n').message


# --------------------------------------------------------------------------
# #macro


def test_macro_parameters_are_substituted() -> None:
    out = texts(
        """\
        #macro swap(a, b)
            alu[a, a, xor, b]
            alu[b, a, xor, b]
        #endm
        swap(r1, r2)
        """
    )
    assert out == ["alu[r1, r1, xor, r2]", "alu[r2, r1, xor, r2]"]


def test_macro_substitution_is_simultaneous() -> None:
    out = texts("#macro m(a, b)\n  x a b\n#endm\nm(b, a)\n")
    assert out == ["x b a"]


def test_macro_arguments_split_on_top_level_commas_only() -> None:
    out = texts(
        """\
        #macro show(p, q, r)
            [p] [q] [r]
        #endm
        show(a[1, 2], (b, c), "d, e")
        show[x, y, z]
        """
    )
    assert out == ['[a[1, 2]] [(b, c)] ["d, e"]', "[x] [y] [z]"]


def test_macro_arguments_may_span_lines() -> None:
    out = texts("#macro m(a, b)\n  a+b\n#endm\nm(1,\n  2)\n")
    assert out == ["1+2"]


def test_zero_parameter_macros_and_bracket_headers() -> None:
    out = texts(
        """\
        #macro fail_path
            br[fail#]
        #endm
        #macro pair[a, b]
            a b
        #endm
        fail_path
        fail_path()
        pair(1, 2)
        """,
        unique_macro_labels=False,
    )
    assert out == ["br[fail#]", "br[fail#]", "1 2"]


def test_macros_overload_on_argument_count() -> None:
    out = texts(
        """\
        #macro put(a)
            put(a, 0)
        #endm
        #macro put(a, b)
            immed[a, b]
        #endm
        put(x)
        put(y, 7)
        """
    )
    assert out == ["immed[x, 0]", "immed[y, 7]"]


def test_macro_argument_count_mismatch_is_an_error() -> None:
    err = error_of("#macro m(a, b)\n x\n#endm\nm(1, 2, 3)\n")
    assert "macro 'm' takes 2 argument(s), 3 given" in err.message
    assert err.loc is not None and err.loc.line == 4


def test_macro_name_not_followed_by_arguments_is_plain_text() -> None:
    assert texts("#macro m(a)\n x\n#endm\nm = 3\n") == ["m = 3"]


def test_directives_in_macro_bodies_see_the_arguments() -> None:
    out = texts(
        """\
        #macro add(dst, val)
            #if (is_ct_const(val))
                alu[dst, dst, +, val]
            #else
                alu[dst, dst, +, val]  ; register
                .set val
            #endif
        #endm
        add(r0, 4)
        add(r0, r9)
        """
    )
    assert out == ["alu[r0, r0, +, 4]", "alu[r0, r0, +, r9]", ".set r9"]


def test_while_inside_a_macro_unrolls() -> None:
    out = texts(
        """\
        #macro unroll(n, base)
            #define_eval _K 0
            #while (_K < n)
                alu[base[_K], --, b, 0]
                #define_eval _K (_K + 1)
            #endloop
            #undef _K
        #endm
        unroll(3, $x)
        """
    )
    assert out == ["alu[$x[0], --, b, 0]", "alu[$x[1], --, b, 0]", "alu[$x[2], --, b, 0]"]


def test_nested_macro_calls_record_the_expansion_chain() -> None:
    lines = run(
        """\
        #macro inner(x)
            immed[x, 1]
        #endm
        #macro outer(y)
            inner(y)
        #endm
        outer(r5)
        """
    )
    assert [ln.text for ln in lines] == ["immed[r5, 1]"]
    loc = lines[0].loc
    where = str(DATA / "t.uc")
    assert (loc.line, loc.col) == (2, 5)  # the body line of inner
    assert loc.expansion == (("outer", where, 7), ("inner", where, 5))


def test_errors_inside_macros_carry_the_expansion_chain() -> None:
    err = error_of("#macro m(v)\n  #if v > 1\n  #error too big\n  #endif\n#endm\nm(1)\nm(5)\n")
    assert err.message == "too big"
    assert err.loc is not None
    assert err.loc.line == 3
    assert err.loc.expansion == (("m", str(DATA / "t.uc"), 7),)
    assert "in expansion of macro 'm' called at" in str(err)


def test_recursive_macro_hits_the_depth_limit() -> None:
    err = error_of("#macro r(x)\n  r(x)\n#endm\nr(1)\n")
    assert "macro expansion nested too deeply" in err.message


def test_macro_structure_errors() -> None:
    assert "unterminated #macro" in error_of("#macro m(a)\n x\n").message
    assert "#endm without #macro" in error_of("#endm\n").message
    assert "expected a macro name" in error_of("#macro (a)\n#endm\n").message
    assert "expected '(parameters)'" in error_of("#macro m(a\n#endm\n").message
    assert "duplicate parameter" in error_of("#macro m(a, a)\n#endm\n").message
    assert "unterminated argument list" in error_of("#macro m(a)\n#endm\nm(1\n").message
    assert "unexpected text after" in error_of("#macro m(a)\n#endm\nm(1) junk\n").message


def test_nested_macro_definitions_are_kept_whole() -> None:
    out = texts(
        """\
        #macro maker(n)
            #macro made_/**/n()
                made n
            #endm
        #endm
        maker(7)
        made_7()
        """
    )
    assert out == ["made 7"]


def test_macro_redefinition_with_a_different_body_warns() -> None:
    diags = Diagnostics()
    texts("#macro m(a)\n x\n#endm\n#macro m(a)\n y\n#endm\n", diags=diags)
    assert len(diags.warnings) == 1 and "macro 'm' redefined" in diags.warnings[0][0]


# --------------------------------------------------------------------------
# Labels in macros


def test_labels_defined_in_a_macro_are_unique_per_expansion() -> None:
    out = preprocess(DATA / "uses_macros.uc")
    text = [ln.text for ln in out]
    assert text[0] == "alu[r0, r1, +, 4]"
    labels = [t for t in text if t.endswith("#:")]
    branches = [t for t in text if t.startswith("bne[")]
    assert len(labels) == 2 and len(set(labels)) == 2
    assert branches == [f"bne[{label[:-1]}]" for label in labels]
    assert all(label.startswith("spin__") for label in labels)


def test_labels_passed_as_arguments_belong_to_the_caller() -> None:
    out = texts(
        """\
        #macro guard(target)
            beq[target]
        target:
        skip#:
            br[skip#]
        #endm
        guard(out#)
        """
    )
    assert out[0] == "beq[out#]"
    assert out[1] == "out#:"
    assert out[2].startswith("skip__") and out[2] != "skip#:"
    assert out[3] == f"br[{out[2][:-1]}]"


def test_label_renaming_can_be_turned_off() -> None:
    src = "#macro m()\nl#:\n br[l#]\n#endm\nm()\nm()\n"
    assert texts(src, unique_macro_labels=False) == ["l#:", "br[l#]", "l#:", "br[l#]"]


def test_labels_built_by_a_loop_inside_a_macro_stay_consistent() -> None:
    out = texts(
        """\
        #macro strip(n)
            jump[idx, landing0#], targets[landing0#, landing1#]
            #define_eval _I 0
            #while (_I < n)
        landing/**/_I#:
                nop
                #define_eval _I (_I + 1)
            #endloop
        #endm
        strip(2)
        """
    )
    jump, l0, _, l1, _ = out
    assert l0.endswith("#:") and l1.endswith("#:")
    assert jump == f"jump[idx, {l0[:-1]}], targets[{l0[:-1]}, {l1[:-1]}]"


# --------------------------------------------------------------------------
# Predefined names and command-line defines


def test_line_and_file_are_predefined() -> None:
    out = texts("\nimmed[a, __LINE__]\n.note __FILE__\n")
    assert out == ["immed[a, 2]", f'.note "{DATA / "t.uc"}"']


def test_command_line_defines() -> None:
    out = texts(
        "#ifdef DEBUG\ndebug\n#endif\nimmed[a, SIZE]\nimmed[b, TWICE(3)]\n",
        defines={"DEBUG": "", "SIZE": "64", "TWICE(x)": "((x) * 2)"},
    )
    assert out == ["debug", "immed[a, 64]", "immed[b, ((3) * 2)]"]


def test_bad_command_line_define_is_an_error() -> None:
    with pytest.raises(AsmError) as info:
        run("x\n", defines={"1bad": "2"})
    assert info.value.loc is not None and info.value.loc.file == "<command line>"


# --------------------------------------------------------------------------
# A realistic fragment, and scale


def test_realistic_receive_fragment() -> None:
    out = texts(
        """\
        #define STATE_SHIFT      5    // log2 of state size
        #define FLAG_RECEIVING   1
        #define FLAGS            *l$index0[0]
            .sig volatile s1
            .reg read $w0, $w1
            .xfer_order $w0 $w1
            immed_w1[add_fl, (&$w0 | (&s1 << 12))]
        #if FLAG_RECEIVING != 1
        #error FLAG_RECEIVING must be 1
        #endif
            alu_shf[addr, --, b, chan, <<STATE_SHIFT]
            alu[--, FLAGS, and, FLAG_RECEIVING]
            scratch[get, $w0, zero, 0, 1],
                ctx_swap[s1]
        """
    )
    assert out == [
        ".sig volatile s1",
        ".reg read $w0, $w1",
        ".xfer_order $w0 $w1",
        "immed_w1[add_fl, (&$w0 | (&s1 << 12))]",
        "alu_shf[addr, --, b, chan, <<5]",
        "alu[--, *l$index0[0], and, 1]",
        "scratch[get, $w0, zero, 0, 1], ctx_swap[s1]",
    ]


def test_large_generated_file() -> None:
    parts = ["#define K 4", "#macro inc(r)\n    alu[r, r, +, K]\n#endm"]
    for i in range(5000):
        parts.append(f"l{i}#:\n    immed[a, {i}]  ; c\n    inc(b)\n    br[l{i}#]")
    out = run("\n".join(parts) + "\n")
    assert len(out) == 4 * 5000
    assert out[-2].text == "alu[b, b, +, 4]"
    assert out[-2].loc.expansion[0][2] == 5 + 4 * 4999 + 2  # line of the last inc(b)


# --------------------------------------------------------------------------
# Robustness: any input gives lines or a located AsmError

_FRAGMENTS = [
    "#define A 1",
    "#define F(x) x+A",
    "#define A A",
    "#undef A",
    "#define_eval A (A+1)",
    "#define_eval B 1/0",
    "#if A",
    "#if defined(A) && A > 0",
    "#ifdef A",
    "#ifndef B",
    "#elif 1",
    "#else",
    "#endif",
    "#while A < 3",
    "#while 0",
    "#endloop",
    "#macro m(a, b)",
    "#macro n",
    "#endm",
    "m(1, 2)",
    "m(1)",
    "n",
    "n()",
    "#error boom",
    '#warning "w"',
    '#include "x.h"',
    "#include <guarded.h>",
    "#bogus",
    "#",
    "loop#:",
    "br[loop#]",
    "alu[a, b,",
    "(",
    ")",
    "[",
    "]",
    ",",
    "\\",
    "/*",
    "*/",
    "/**/",
    "//",
    ";",
    '"',
    "F(",
    "F(2)",
    "reg/**/A",
    "a",
    "b",
    "$x",
    "&y",
    "__LINE__",
    "'q'",
]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(
        st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=8)),
        max_size=25,
    ),
    st.lists(st.sampled_from(["\n", " ", "\t", ""]), min_size=1, max_size=25),
)
def test_fuzz_never_raises_anything_but_located_errors(
    fragments: list[str], seps: list[str]
) -> None:
    src = "".join(frag + seps[i % len(seps)] for i, frag in enumerate(fragments))
    try:
        out = preprocess(DATA / "fuzz.uc", source_text=src, diags=Diagnostics())
    except AsmError as exc:
        assert exc.loc is not None
        str(exc)  # rendering must not fail either
    else:
        assert all(isinstance(ln, LogicalLine) and ln.text == ln.text.strip() for ln in out)
        assert all(ln.text for ln in out)


def test_a_macro_whose_argument_doubles_each_call_is_stopped_by_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # m(x) calls m(x x): the argument doubles with every nested call, so the size of the
    # expansion (not the nesting limit, 2^64 characters away) has to stop it
    monkeypatch.setattr(pp_mod, "MAX_MACRO_DEPTH", 24)  # main reached this at 2^24 characters a line
    e = error_of("""\
        #macro m(a)
        m(a a)
        #endm
        m(x)
        """)
    assert f"macro expansion too large (a line of more than {pp_mod.MAX_EXPANDED_LENGTH} characters) in 'm'" in e.message
