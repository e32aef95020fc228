// host_src.uc -- test and demo stand-in for a block that is not microcode yet (rx in
// phase 1): context 0 copies 2-longword messages, in order, from an SRAM mailbox the
// host fills to ring RING_OUT, four at a time while at least four are waiting (so
// that it can feed a block faster than line rate), else one by one.
// Mailbox at HOST_BASE: +0 number of messages written by the host (it only grows),
// messages from +16, 8 bytes each.
#include "npk_sys.h"

.reg zero base idx cnt t
.reg read $c
.reg read $m0 $m1 $m2 $m3 $m4 $m5 $m6 $m7
.xfer_order $m0 $m1 $m2 $m3 $m4 $m5 $m6 $m7
.reg write $o0 $o1 $o2 $o3 $o4 $o5 $o6 $o7
.xfer_order $o0 $o1 $o2 $o3 $o4 $o5 $o6 $o7
.sig s1 s2

#macro copy_out(N)
    alu[$o/**/N, --, b, $m/**/N]
#endm

    br!=ctx[0, src_idle#]
    immed[zero, 0]
    immed[base, HOST_BASE]
    immed[idx, 0]
src_poll#:
    sram[read, $c, base, 0, 1], ctx_swap[s1]
    alu[cnt, --, b, $c]
    alu[--, idx, -, cnt]
    bne[src_next#]
    ctx_arb[voluntary]
    br[src_poll#]
src_next#:
    alu[t, cnt, -, idx]
#ifdef RING_OUT_SPLIT
    // a split ring: steer each message by the input port in its packet word
    .begin
        .reg rr port
        alu_shf[t, --, b, idx, <<3]
        alu[t, t, +, 16]
        sram[read, $m0, base, t, 2], ctx_swap[s1]
        alu_shf[port, --, b, $m0, >>28]
        alu[port, port, and, 7]
        npk_ring_select(rr, port)
src_full_s#:
        npk_ring_full(rr, src_wait_s#)
        alu_shf[rr, --, b, rr, <<2]
        alu[$o0, --, b, $m0]
        alu[$o1, --, b, $m1]
        scratch[put, $o0, rr, 0, 2], ctx_swap[s2]
        alu[idx, idx, +, 1]
        br[src_more#]
src_wait_s#:
        ctx_arb[voluntary]
        br[src_full_s#]
    .end
#endif
    .if (t >= 4)
        alu_shf[t, --, b, idx, <<3]
        alu[t, t, +, 16]
        sram[read, $m0, base, t, 8], ctx_swap[s1]
src_full8#:
        br_inp_state[RING_OUT_STATUS, src_wait8#]
        br[src_put8#]
src_wait8#:
        ctx_arb[voluntary]
        br[src_full8#]
src_put8#:
        copy_out(0)
        copy_out(1)
        copy_out(2)
        copy_out(3)
        copy_out(4)
        copy_out(5)
        copy_out(6)
        copy_out(7)
        scratch[put, $o0, zero, (RING_OUT << 2), 8], ctx_swap[s2]
        alu[idx, idx, +, 4]
    .else
        alu_shf[t, --, b, idx, <<3]
        alu[t, t, +, 16]
        sram[read, $m0, base, t, 2], ctx_swap[s1]
src_full#:
        br_inp_state[RING_OUT_STATUS, src_wait#]
        br[src_put#]
src_wait#:
        ctx_arb[voluntary]
        br[src_full#]
src_put#:
        alu[$o0, --, b, $m0]
        alu[$o1, --, b, $m1]
        scratch[put, $o0, zero, (RING_OUT << 2), 2], ctx_swap[s2]
        alu[idx, idx, +, 1]
    .endif
src_more#:
    alu[--, idx, -, cnt]
    bne[src_next#]
    br[src_poll#]
src_idle#:
    halt
