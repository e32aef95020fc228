// npk_block.h -- the skeleton every router microblock shares (microcode/README.md §5).
//
// A block is a loop run by every context of its ME(s).  Input and output stay in
// arrival order through two token signals passed from context to context with
// SAME_ME_SIGNAL: `tok_get` (whoever holds it takes the next message from the input
// ring, retrying while the ring is empty) and `tok_put` (whoever holds it emits its
// result: output ring, drop or exception).  Between the two a context works on its
// packet while the others overlap their memory references with it.
//
// Needs from the build (npk_sys.h, written by `npk link`): NUM_CONTEXTS (4 or 8),
// the memory map and reasons.h.  Registers every block uses:
//   zero        0
//   nget, nput  SAME_ME_SIGNAL values that hand tok_get / tok_put to the next context
//   pw          packet word of the current packet (README §3.1)
//   ow1         second longword of the output message
//   kind        OUT_FORWARD / OUT_DROP / OUT_EXCEPTION
//   code        reason code (reasons.h) when kind is not OUT_FORWARD
#ifndef NPK_BLOCK_H
#define NPK_BLOCK_H

#define OUT_FORWARD     0
#define OUT_DROP        1
#define OUT_EXCEPTION   2

// ME numbers: ACTIVE_CTX_STS[7:3] is the hardware ME number, cluster << 4 | ME in the
// cluster (emulator/me_names.py).  `npk link` defines ME_PER_CLUSTER (and its log2) for
// the chip it links for, and ME_CLUSTER_1 when the block has an ME in cluster 1; in
// cluster 0 the number is the flat index the layout uses.
#ifndef ME_PER_CLUSTER
#define ME_PER_CLUSTER 8
#define ME_PER_CLUSTER_LOG2 3
#endif

#if (NUM_CONTEXTS == 8)
#define CTX_STEP 1
#else
#define CTX_STEP 2
#endif

.sig volatile tok_get
.sig volatile tok_put
.sig s_timer
.reg zero nget nput pw ow1 kind code
.reg read $i0 $i1
.xfer_order $i0 $i1
#ifdef RING_IN_SPLIT
// a split input ring (README §3.4): this ME reads ring number `split[ME - FIRST_ME]`
.reg rin
#endif

// Batching (layout parameter batch=N, README §3.5; seed 001's forwarding processes took up
// to 16 packets before yielding): with NPK_BATCH > 1 a context that holds tok_get takes
// up to NPK_BATCH messages off its input ring, one get after another, into its slots in
// local memory (NPK_BATCH_LM + 8 * NPK_BATCH * context: two longwords a message), then
// passes tok_get on and works through them; each result goes back into its message's
// slot, and when the batch is done the context takes tok_put once and emits the whole
// batch in order.  A block's second input longword is NPK_IN1 ($i1 unbatched).
#ifndef NPK_BATCH
#define NPK_BATCH 1
#endif
#if (NPK_BATCH > 1)
#ifndef NPK_BATCH_LM
#define NPK_BATCH_LM 0x100      // above the port records (16 B a port) and the lookup's CAM cache
#endif
.reg in1 bleft bptr bbase
#define NPK_IN1 in1
#else
#define NPK_IN1 $i1
#endif

// Work out this context's token hand-off values; context 0 runs INIT_MACRO's code
// (the caller puts it right after this macro, guarded by `.if (npk_first)`) and then
// hands both tokens to itself.
#macro npk_thread_setup()
.begin
    .reg t
    immed[zero, 0]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t, 0]
    alu[t, t, and, 7]
    alu[t, t, +, CTX_STEP]
    alu[t, t, and, 7]
    alu[nget, t, or, (&tok_get << 3)]
    alu[nput, t, or, (&tok_put << 3)]
    local_csr_wr[ACTIVE_FUTURE_COUNT_SIGNAL, &s_timer]
#if (NPK_BATCH > 1)
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t, 0]
    alu[t, t, and, 7]
    immed[bbase, NPK_BATCH_LM]
npk_bbase#:                         // bbase = NPK_BATCH_LM + 8 * NPK_BATCH * context
    .if (t != 0)
        alu[bbase, bbase, +, (8 * NPK_BATCH)]
        alu[t, t, -, 1]
        br[npk_bbase#]
    .endif
    immed[bleft, 0]
#endif
#ifdef RING_IN_SPLIT
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t, 0]
#ifdef ME_CLUSTER_1
    .reg cl
    alu_shf[cl, ME_PER_CLUSTER, and, t, >>(7 - ME_PER_CLUSTER_LOG2)]  // cluster 1: + ME_PER_CLUSTER
    alu_shf[t, (ME_PER_CLUSTER - 1), and, t, >>3]                    // ME in the cluster
    alu[t, t, or, cl]                                                 // the layout's (flat) index
#else
    alu_shf[t, --, b, t, >>3]
    alu[t, t, and, 0xF]
#endif
    alu[t, t, -, FIRST_ME]
    npk_ring_select(rin, t)
    alu_shf[rin, --, b, rin, <<2]
#endif
.end
#endm

// Context 0 only, after its one-time initialisation: start the token rings.
#macro npk_start_tokens()
    local_csr_wr[SAME_ME_SIGNAL, (&tok_get << 3)]
    local_csr_wr[SAME_ME_SIGNAL, (&tok_put << 3)]
#endm

// Count one event at a scratch counter address held in a register or constant.
#macro npk_count(ADDR)
.begin
    .reg ca
    immed[ca, ADDR]
    scratch[incr, --, ca, 0]
.end
#endm

// Free the buffer of packet word PW: its descriptor goes back on the free list
// (an SRAM queue array, README §2).  sram[enqueue] keeps its operand order: queue
// first, element second (the assembler places them in the A and B banks).
#macro npk_free_buffer(PW)
.begin
    .reg fq fd ft
    immed[fq, FREELIST_Q]
    immed[fd, DESC_BASE]
    alu_shf[ft, --, b, PW, <<16]
    alu_shf[ft, --, b, ft, >>(16 - DESC_SHIFT)]
    alu[fd, fd, +, ft]
    sram[enqueue, --, fq, fd]
.end
#endm

// Take the input token, issue the get of the next message from ring RING_IN and hand
// the token on at once: gets leave in context order and the scratch unit completes
// them in order, so the order of messages is the order of contexts.  A get that finds
// the ring empty reads zeros (a packet word is never 0): that context then only takes
// its turn of tok_put, passes it, sleeps NPK_IDLE_TICKS timestamp ticks so that idle
// blocks do not flood the scratch unit with gets, and starts again at LOOP.
#ifndef NPK_IDLE_TICKS
#define NPK_IDLE_TICKS 16
#endif
#if (NPK_BATCH > 1)
.reg read $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7
.xfer_order $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7
#macro npk_bget(N, NEXT, DONE)
#ifdef RING_IN_SPLIT
    scratch[get, $b0, rin, 0, N], ctx_swap[s_in]
#else
    scratch[get, $b0, zero, (RING_IN << 2), N], ctx_swap[s_in]
#endif
    alu[--, --, b, $b0]
    beq[NEXT]
#endm
#macro npk_get_input(LOOP)
.begin
    .sig s_in
    .reg bn
    .reg write $bc
    .if (bleft == 0)
        // a new batch, into this context's slots (index1 walks them): four messages a
        // get while four more fit and the ring has them, then one at a time; a get that
        // finds too few messages takes none (HRM: the ring reads as zeros)
        ctx_arb[tok_get]
        local_csr_wr[ACTIVE_LM_ADDR_1, bbase]
        immed[bn, 0]
        nop
        nop
#if (NPK_BATCH >= 4)
npk_bget4#:
        alu[--, bn, -, (NPK_BATCH - 3)]
        bhs[npk_bget1#]
        npk_bget(8, npk_bget1#, npk_bgot#)
        alu[*l$index1++, --, b, $b0]
        alu[*l$index1++, --, b, $b1]
        alu[*l$index1++, --, b, $b2]
        alu[*l$index1++, --, b, $b3]
        alu[*l$index1++, --, b, $b4]
        alu[*l$index1++, --, b, $b5]
        alu[*l$index1++, --, b, $b6]
        alu[*l$index1++, --, b, $b7]
        alu[bn, bn, +, 4]
        br[npk_bget4#]
#endif
npk_bget1#:
        alu[--, bn, -, NPK_BATCH]
        bhs[npk_bgot#]
        npk_bget(2, npk_bgot#, npk_bgot#)
        alu[*l$index1++, --, b, $b0]
        alu[*l$index1++, --, b, $b1]
        alu[bn, bn, +, 1]
        br[npk_bget1#]
npk_bgot#:
        local_csr_wr[SAME_ME_SIGNAL, nget]
        .if (bn == 0)
            ctx_arb[tok_put]
            local_csr_wr[SAME_ME_SIGNAL, nput]
            npk_sleep(NPK_IDLE_TICKS)
            br[LOOP]
        .endif
        local_csr_wr[ACTIVE_LM_ADDR_1, bbase]
        alu[bleft, --, b, bn]
        alu[bptr, --, b, bbase]
        // count the batch and its messages (BATCH_COUNT: batches, +4 messages) for the run's JSON
        alu[$bc, --, b, bn]
        immed[bn, BATCH_COUNT]
        scratch[incr, --, bn, 0]
        scratch[add, $bc, bn, 4]
    .endif
#ifdef LOOKUP_CAM_CACHE
    // (the lookup's CAM cache moves index1: point it at the next message again)
    local_csr_wr[ACTIVE_LM_ADDR_1, bptr]
    nop
    nop
    nop
#endif
    // the next message of the batch
    alu[pw, --, b, *l$index1++]
    alu[in1, --, b, *l$index1++]
.end
#endm
#else
#macro npk_get_input(LOOP)
.begin
    .sig s_in
    ctx_arb[tok_get]
#ifdef RING_IN_SPLIT
    scratch[get, $i0, rin, 0, 2], sig_done[s_in]
#else
    scratch[get, $i0, zero, (RING_IN << 2), 2], sig_done[s_in]
#endif
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[s_in]
    alu[pw, --, b, $i0]
    bne[npk_got#]
    ctx_arb[tok_put]
#ifdef RING_CP
    npk_serve_control()
#endif
    local_csr_wr[SAME_ME_SIGNAL, nput]
    npk_sleep(NPK_IDLE_TICKS)
    br[LOOP]
npk_got#:
.end
#endm
#endif

#ifdef RING_CP
// A block whose input ring was empty, holding tok_put, passes one message of the
// control plane's ring RING_CP (frames the XScale sends, README §3.2) on to RING_OUT
// unchanged: the stub queue manager serves the control plane when it is idle.
#macro npk_serve_control()
.begin
    .reg read $c0 $c1
    .xfer_order $c0 $c1
    .reg write $d0 $d1
    .xfer_order $d0 $d1
    .sig s_c s_d
    scratch[get, $c0, zero, (RING_CP << 2), 2], ctx_swap[s_c]
    alu[--, --, b, $c0]
    beq[npk_sc_done#]
npk_sc_full#:
    br_inp_state[RING_OUT_STATUS, npk_sc_wait#]
    br[npk_sc_put#]
npk_sc_wait#:
    ctx_arb[voluntary]
    br[npk_sc_full#]
npk_sc_put#:
    alu[$d0, --, b, $c0]
    alu[$d1, --, b, $c1]
    scratch[put, $d0, zero, (RING_OUT << 2), 2], ctx_swap[s_d]
npk_sc_done#:
.end
#endm
#endif

// Sleep about TICKS * 16 cycles (the ME's future-count timer; npk_thread_setup
// points this context's FUTURE_COUNT_SIGNAL at s_timer).
#macro npk_sleep(TICKS)
    npk_timer_start(TICKS)
    ctx_arb[s_timer]
#endm

// Start the timer of npk_sleep without waiting for it: s_timer comes TICKS timestamp
// ticks from now (work done meanwhile overlaps the sleep).
#macro npk_timer_start(TICKS)
.begin
    .reg ts
    local_csr_rd[TIMESTAMP_LOW]
    immed[ts, 0]
    alu[ts, ts, +, TICKS]
    local_csr_wr[ACTIVE_CTX_FUTURE_COUNT, ts]
.end
#endm

// Emit the current packet's outcome in arrival order, then hand tok_put on:
//   OUT_FORWARD    message (pw, ow1) on ring RING_OUT (waits while it is full)
//   OUT_DROP       buffer freed, drop counter `code` incremented
//   OUT_EXCEPTION  record (pw, EXC_RECORD | in_port << 16 | code) on the exception
//                  ring, exception counter incremented, the XScale interrupted
//                  (cap[fast_wr, 0, XSCALE_INT_A]: one CAP write on the exception path
//                  only; the control plane takes every record there is when it wakes);
//                  a full exception ring turns it into the drop exception_ring_full.
#if (NPK_BATCH > 1)
#macro npk_emit(LOOP)
.begin
    .reg write $o0 $o1
    .xfer_order $o0 $o1
    .sig s_out
    .reg t u
    // the result into the message's slot (index0: parse points it at its port record
    // afresh for every packet): packet word with the kind in bits 17..16 (reserved,
    // README §3.1), and ow1 (forward) or the reason code
    local_csr_wr[ACTIVE_LM_ADDR_0, bptr]
    alu[bptr, bptr, +, 8]
    alu[bleft, bleft, -, 1]
    nop
    alu_shf[*l$index0[0], pw, or, kind, <<16]
    .if (kind == OUT_FORWARD)
        alu[*l$index0[1], --, b, ow1]
    .else
        alu[*l$index0[1], --, b, code]
    .endif
    .if (bleft != 0)
        br[LOOP]
    .endif
    // the batch is done: emit it in order under tok_put
    br_signal[tok_put, npk_bemit_tok#]
    ctx_arb[tok_put]
npk_bemit_tok#:
    local_csr_wr[ACTIVE_LM_ADDR_0, bbase]
    alu[u, --, b, bbase]
    alu_shf[t, --, b, 3, <<16]
    nop
npk_bemit_next#:
    alu[pw, --, b, *l$index0++]
    alu[ow1, --, b, *l$index0++]
    alu[u, u, +, 8]
    alu_shf[kind, 3, and, pw, >>16]
    alu[pw, pw, and~, t]
    .if (kind == OUT_FORWARD)
npk_bemit_full#:
        br_inp_state[RING_OUT_STATUS, npk_bemit_wait#]
        br[npk_bemit_put#]
npk_bemit_wait#:
        ctx_arb[voluntary]
        br[npk_bemit_full#]
npk_bemit_put#:
        alu[$o0, --, b, pw]
        alu[$o1, --, b, ow1]
        scratch[put, $o0, zero, (RING_OUT << 2), 2], ctx_swap[s_out]
    .else
        alu[code, --, b, ow1]
        .if (kind == OUT_EXCEPTION)
            br_inp_state[EXC_RING_STATUS, npk_bemit_exc_full#]
            alu_shf[ow1, --, b, pw, >>28]
            alu[ow1, ow1, and, 7]
            alu_shf[ow1, code, or, ow1, <<16]
            alu_shf[$o1, ow1, or, EXC_RECORD, <<24]
            alu[$o0, --, b, pw]
            scratch[put, $o0, zero, (EXC_RING << 2), 2], ctx_swap[s_out]
            alu_shf[code, --, b, code, <<2]
            immed[ow1, STAT_EXC_BASE]
            scratch[incr, --, ow1, code]
            cap[fast_wr, 0, XSCALE_INT_A]       // the record is on the ring: wake the control plane
            br[npk_bemit_done#]
npk_bemit_exc_full#:
            immed[code, DROP_EXCEPTION_RING_FULL]
        .endif
        npk_free_buffer(pw)
        alu_shf[code, --, b, code, <<2]
        immed[ow1, STAT_DROP_BASE]
        scratch[incr, --, ow1, code]
    .endif
npk_bemit_done#:
    alu[--, u, -, bptr]
    blo[npk_bemit_next#]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    br[LOOP]
.end
#endm
#else
#macro npk_emit(LOOP)
.begin
    .reg write $o0 $o1
    .xfer_order $o0 $o1
    .sig s_out
    .reg t u
    // the token may be here already (the contexts before this one have emitted): take
    // it without a swap, which would put this context behind every other ready one --
    // with five frames at once, behind their work (~100 cycles each) before its put
    br_signal[tok_put, npk_emit_tok#]
    ctx_arb[tok_put]
npk_emit_tok#:
    .if (kind == OUT_FORWARD)
npk_emit_full#:
        br_inp_state[RING_OUT_STATUS, npk_emit_wait#]
        br[npk_emit_put#]
npk_emit_wait#:
        ctx_arb[voluntary]
        br[npk_emit_full#]
npk_emit_put#:
        alu[$o0, --, b, pw]
        alu[$o1, --, b, ow1]
        scratch[put, $o0, zero, (RING_OUT << 2), 2], sig_done[s_out]
        local_csr_wr[SAME_ME_SIGNAL, nput]
        ctx_arb[s_out]
        br[LOOP]
    .else
        .if (kind == OUT_EXCEPTION)
            br_inp_state[EXC_RING_STATUS, npk_emit_exc_full#]
            alu_shf[t, --, b, pw, >>28]
            alu[t, t, and, 7]
            alu_shf[t, code, or, t, <<16]
            alu_shf[$o1, t, or, EXC_RECORD, <<24]
            alu[$o0, --, b, pw]
            scratch[put, $o0, zero, (EXC_RING << 2), 2], sig_done[s_out]
            alu_shf[t, --, b, code, <<2]
            immed[u, STAT_EXC_BASE]
            scratch[incr, --, u, t]
            local_csr_wr[SAME_ME_SIGNAL, nput]
            ctx_arb[s_out]
            cap[fast_wr, 0, XSCALE_INT_A]       // the record is on the ring: wake the control plane
        br[LOOP]
npk_emit_exc_full#:
            immed[code, DROP_EXCEPTION_RING_FULL]
        .endif
        npk_free_buffer(pw)
        alu_shf[t, --, b, code, <<2]
        immed[u, STAT_DROP_BASE]
        scratch[incr, --, u, t]
        local_csr_wr[SAME_ME_SIGNAL, nput]
        br[LOOP]
    .endif
.end
#endm
#endif

#endif // NPK_BLOCK_H
