// host_sink.uc -- test and demo stand-in for a consumer that is not microcode yet
// (tx in phase 1, the XScale's exception daemon): context 0 takes 2-longword messages
// from ring RING_IN and appends them to an SRAM log the host reads: HOST_BASE + 0 =
// number of messages logged, messages from +16, 8 bytes each.  With SINK_TXDONE it
// also counts each message's frame as sent on port LW1 (its 64-byte elements added to
// scratch TXDONE_BASE + 4 * port), the flow-control confirmation tx gives the qm.
#include "npk_sys.h"

.reg zero base n t n_tx n_el
.reg read $len
.reg read $m0 $m1
.xfer_order $m0 $m1
.reg write $o0 $o1
.xfer_order $o0 $o1
.reg write $c
.sig s1 s2 s3 s4

    br!=ctx[0, sink_idle#]
    immed[zero, 0]
    immed[base, HOST_BASE]
    immed[n, 0]
    // the log writes of the previous message overlap the next get: s2 / s3 stand
    // for "previous writes done" and start set
    local_csr_wr[SAME_ME_SIGNAL, (&s2 << 3)]
    local_csr_wr[SAME_ME_SIGNAL, (&s3 << 3)]
sink_get#:
    scratch[get, $m0, zero, (RING_IN << 2), 2], sig_done[s1]
    ctx_arb[s1, s2, s3]
    alu[t, --, b, $m0]
    bne[sink_got#]
    local_csr_wr[SAME_ME_SIGNAL, (&s2 << 3)]
    local_csr_wr[SAME_ME_SIGNAL, (&s3 << 3)]
    ctx_arb[voluntary]
    br[sink_get#]
sink_got#:
    alu[$o0, --, b, t]
    alu[$o1, --, b, $m1]
    alu_shf[t, --, b, n, <<3]
    alu[t, t, +, 16]
    sram[write, $o0, base, t, 2], sig_done[s2]
    alu[n, n, +, 1]
    alu[$c, --, b, n]
    sram[write, $c, base, 0, 1], sig_done[s3]
#ifdef SINK_TXDONE
    // the frame's 64-byte TBUF elements, as tx counts them (length from the message,
    // else from the descriptor)
    alu_shf[n_el, --, b, $m1, >>16]
    bne[sink_have_len#]
    alu_shf[t, --, b, $m0, <<16]
    alu_shf[t, --, b, t, >>(16 - DESC_SHIFT)]
    immed[n_tx, DESC_BASE]
    alu[t, t, +, n_tx]
    sram[read, $len, t, 8, 1], ctx_swap[s4]
    alu_shf[n_el, --, b, $len, >>16]
sink_have_len#:
    alu[n_el, n_el, +, 63]
    alu_shf[n_el, --, b, n_el, >>6]
    alu[t, --, b, $m1]
    alu[t, t, and, 0xFF]
    alu_shf[t, --, b, t, <<2]
    immed[n_tx, TXDONE_BASE]
    alu[--, --, b, n_el]
    beq[sink_get#]
sink_credit#:
    scratch[incr, --, n_tx, t]
    alu[n_el, n_el, -, 1]
    bne[sink_credit#]
#endif
    br[sink_get#]
sink_idle#:
    halt
