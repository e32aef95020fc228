// A small macro library in the style of the IXA SDK.
#macro add_const(dst, src, val)
    #if (is_ct_const(val))
        alu[dst, src, +, val]
    #else
        alu[dst, src, +, val]   // register operand
    #endif
#endm

#macro wait_loop(count)
.begin
    .reg cnt
    immed[cnt, count]
spin#:
    alu[cnt, cnt, -, 1]
    bne[spin#]
.end
#endm
