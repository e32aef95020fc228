// qm_drr.uc -- the deficit round robin queue manager (docs/schedulers.md; layout
// parameter qm: drr).  qm_dfq.uc is the same engine with Panama's discretized fair
// queuing parameters (a queue per real-time connection, quantum = rate x T).
//
// Queues.  A packet's key is its class (DRR) or connection (DFQ): the input port
// (packet word bits 30..28) or, with QM_CLASS_MSG, bits 8.. of the input message's
// second longword (bits 7..0 are the output port), masked with QM_KEY_MASK.  Its queue
// is the SRAM queue-array queue at QX_BASE + (key << 7) + (port << 4); the queue
// descriptor's fourth longword (+12) counts the packets enqueued and not yet claimed by
// a visit (below).
//
// Active lists, so that the cost of a packet does not depend on the number of queues.
// Each output port has an SRAM ring (descriptor QR_BASE + 32 * port) of the queues that
// hold unclaimed packets, two longwords an entry: (queue address, carried deficit).
// Context 0 enqueues: sram[enqueue], then sram[test_and_incr] of the count; the packet
// that takes it from 0 puts the queue on its port's ring (carried deficit 0).
// A visit (schedulers, under tok_get): take the next entry of the port's ring, claim
// the queue's packets (sram[test_and_clr] of the count: the claims), credit = carried
// deficit + the key's quantum (bytes, local memory 256 + 4 * (key & 7)); then, one
// decision a packet, dequeue while credit > 0 and claims are left.  The dequeuing
// context charges the frame's length (descriptor LW2) to the credit once it has read it
// (a decision made meanwhile sees the credit before that charge: a visit may overrun
// its quantum by up to the frames in flight; the overrun is carried, so long-run shares
// are the quanta's).  A visit ends when its credit is spent (unused claims are given
// back with sram[test_and_add]; the context that brings the count from 0 puts the queue
// back at the ring's tail with its deficit) or its claims are (packets enqueued since
// have put the queue on the ring again: a queue that empties loses its deficit, as in
// DRR).  Order: one context enqueues, dequeues are issued under tok_get and all of it
// goes to one SRAM channel, so a queue is first in, first out.
//
// Ports: round robin, one decision a port, skipping ports with nothing enqueued or not
// ready (the port-ready flow control of qm.uc, microcode/README.md §4.5: qm_refresh.h).
//
// Local memory, 32 bytes a port at 32 * port: +0 enqueued (ctx 0) +4 dequeued
// (schedulers) +8 elements out of the TBUF (poller) +12 queue in service (0: none)
// +16 elements dequeued +20 elements in the PHY FIFO +24 credit (signed bytes)
// +28 claims left; quanta at QM_LM_QUANTA + 4 * (key & 7).
#include "npk_sys.h"
#include "npk_block.h"
#include "qm_refresh.h"
#include "npk_sched.h"

#define QM_LM_QUANTA    256
// With QM_QLIMIT_QUEUE (a layout flag of the qm block: the SPP's per-slice queues), each
// queue may also hold at most QM_QLIMIT_QUEUE packets, so that one class's backlog cannot
// take the port's QM_QLIMIT from the others (without it, the drops of an overloaded port
// go by arrival, not by share).  Counters in local memory, 8 bytes a queue at
// QM_LM_Q + 8 * (key * 8 + port): +0 enqueued (context 0), +4 dequeued (schedulers).
#define QM_LM_Q         512
#define QM_MAX_ELEMS    24          // a 1,514-byte frame
#ifndef QM_POLL_TICKS
#define QM_POLL_TICKS   32
#endif

// DRR (qm: drr) or DFQ (qm: dfq, qm_dfq.uc defines QM_DFQ): their parameters
#ifdef QM_DFQ
#define QX_BASE         QM_DFQ_QX_BASE
#define QM_KEY_MASK     QM_DFQ_KEY_MASK
#else
#define QX_BASE         QM_DRR_QX_BASE
#define QM_KEY_MASK     QM_DRR_KEY_MASK
#endif

#macro immed32(REG, V)
    immed_w0[REG, ((V) & 0xFFFF)]
    immed_w1[REG, (((V) >> 16) & 0xFFFF)]
#endm

.reg p tries t u blocked ln key qa qcur
.reg @qm_enq @qm_deq @qm_port

    npk_thread_setup()
    br!=ctx[0, qm_not_first#]
    immed[@qm_enq, 0]
    immed[@qm_deq, 0]
    immed[@qm_port, 0]
.begin
    .reg write $w0 $w1 $w2 $w3 $w4
    .xfer_order $w0 $w1 $w2 $w3 $w4
    .sig s_w
    immed[p, 0]
qm_init_port#:
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    nop
    nop
    nop
    alu[*l$index0[0], --, b, 0]
    alu[*l$index0[1], --, b, 0]
    alu[*l$index0[2], --, b, 0]
    alu[*l$index0[3], --, b, 0]
    alu[*l$index0[4], --, b, 0]
    alu[*l$index0[5], --, b, 0]
    alu[*l$index0[6], --, b, 0]
    alu[*l$index0[7], --, b, 0]
    // the port's active ring: head, tail, count, storage, size (longwords)
    immed[$w0, 0]
    immed[$w1, 0]
    immed[$w2, 0]
    immed32(u, QR_STORE)
    alu_shf[t, --, b, p, <<QR_STORE_SHIFT]
    alu[$w3, u, +, t]
    immed32(u, QR_WORDS)
    alu[$w4, --, b, u]
    immed32(u, QR_BASE)
    alu_shf[t, --, b, p, <<5]
    alu[u, u, +, t]
    sram[write, $w0, u, 0, 5], ctx_swap[s_w]
    alu[p, p, +, 1]
    .if (p < NPORTS)
        br[qm_init_port#]
    .endif
.end
#ifdef QM_QLIMIT_QUEUE
    immed[p, 0]
qm_init_queue#:
    alu_shf[t, --, b, p, <<3]
    immed[u, QM_LM_Q]
    alu[t, t, +, u]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
    alu[*l$index1[0], --, b, 0]
    alu[*l$index1[1], --, b, 0]
    alu[p, p, +, 1]
    .if (p < 64)
        br[qm_init_queue#]
    .endif
#endif
    immed[t, QM_LM_QUANTA]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
#ifdef QM_DFQ
    npk_qm_dfq_quanta()
#else
    npk_qm_drr_quanta()
#endif
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_get << 3))]
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_put << 3))]

// The queue of packet word PW with message longword W1: port -> p, key -> key, queue
// descriptor address -> qa.
#macro qm_queue_of(PW, W1)
    alu[p, W1, and, 0xFF]
#ifdef QM_CLASS_MSG
    alu_shf[key, --, b, W1, >>8]
#else
    alu_shf[key, --, b, PW, >>28]
    alu[key, key, and, 7]
#endif
    immed32(t, QM_KEY_MASK)
    alu[key, key, and, t]
    immed32(qa, QX_BASE)
    alu_shf[t, --, b, key, <<7]
    alu[qa, qa, +, t]
    alu_shf[t, --, b, p, <<4]
    alu[qa, qa, +, t]
#endm

// local memory index1 -> the counters of queue QA (QM_LM_Q + 8 * (key * 8 + port):
// QA - QX_BASE is key << 7 | port << 4, so the offset is (QA - QX_BASE) >> 1)
#macro qm_queue_lm(QA)
    immed32(t, QX_BASE)
    alu[t, QA, -, t]
    alu_shf[t, --, b, t, >>1]
    immed[u, QM_LM_Q]
    alu[t, t, +, u]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
#endm

// local memory index1 -> the quantum of queue QA's key
#macro qm_quantum_of(QA)
    immed32(t, QX_BASE)
    alu[t, QA, -, t]
    alu_shf[t, --, b, t, >>7]
    alu[t, t, and, 7]
    alu_shf[t, --, b, t, <<2]
    immed[u, QM_LM_QUANTA]
    alu[t, t, +, u]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
#endm

// ---- context 0: enqueue, two messages a swap ----------------------------------------
// Link the descriptor of PW on its queue and count it (test_and_incr into XC, signal
// SIG), or drop it with queue_full when its port holds QM_QLIMIT packets; OK -> 1 when
// enqueued.  QA_SAVE keeps the queue's address for the ring put.
#macro qm_enq_one(PW, W1, XC, SIG, OK, QA_SAVE, P_SAVE)
.begin
    .reg ed
    qm_queue_of(PW, W1)
#ifdef QM_QLIMIT_QUEUE
    qm_queue_lm(qa)
#endif
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    immed[ed, DESC_BASE]
    alu_shf[t, --, b, PW, <<16]
    alu_shf[t, --, b, t, >>(16 - DESC_SHIFT)]
    alu[ed, ed, +, t]
    alu[t, --, b, *l$index0[0]]
    alu[t, t, -, *l$index0[1]]
    immed[u, QM_QLIMIT]
#ifdef QM_QLIMIT_QUEUE
    .if (t < u)
        alu[t, --, b, *l$index1[0]]
        alu[t, t, -, *l$index1[1]]
        immed[u, QM_QLIMIT_QUEUE]
    .endif
#endif
    immed[OK, 0]
    .if (t < u)
#ifdef QM_QLIMIT_QUEUE
        alu[t, --, b, *l$index1[0]]
        alu[*l$index1[0], t, +, 1]
#endif
        sram[enqueue, --, qa, ed]
        sram[test_and_incr, XC, qa, 12], sig_done[SIG]
        alu[t, --, b, *l$index0[0]]
        alu[*l$index0[0], t, +, 1]
        alu[@qm_enq, @qm_enq, +, 1]
        immed[OK, 1]
        alu[QA_SAVE, --, b, qa]
        alu[P_SAVE, --, b, p]
    .else
        immed[code, DROP_QUEUE_FULL]
        npk_free_buffer(PW)
        npk_count((STAT_DROP_BASE + 4 * DROP_QUEUE_FULL))
    .endif
.end
#endm

// Put queue QA (deficit DEF) on port P's active ring.
#macro qm_ring_put(QA, DEF, P)
.begin
    .reg write $r0 $r1
    .xfer_order $r0 $r1
    .reg ra rt
    .sig s_r
    alu[$r0, --, b, QA]
    alu[$r1, --, b, DEF]
    immed32(ra, QR_BASE)
    alu_shf[rt, --, b, P, <<5]
    alu[ra, ra, +, rt]
    sram[put, $r0, ra, 0, 2], ctx_swap[s_r]
.end
#endm

.begin
    .reg read $e0 $e1 $e2 $e3 $x1 $x2
    .xfer_order $e0 $e1 $e2 $e3
    .reg ok1 ok2 qa1 qa2 p1 p2
    .sig s_e s_e2 s_x1 s_x2
qm_enq_loop#:
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
    ctx_arb[s_e, s_e2]
    immed[ok1, 0]
    immed[ok2, 0]
    alu[pw, --, b, $e0]
    beq[qm_enq_second#]
    qm_enq_one(pw, $e1, $x1, s_x1, ok1, qa1, p1)
qm_enq_second#:
    // the second get may bring a message although the first found the ring empty
    alu[pw, --, b, $e2]
    beq[qm_enq_wait#]
    qm_enq_one(pw, $e3, $x2, s_x2, ok2, qa2, p2)
qm_enq_wait#:
    .if (ok1 != 0)
        ctx_arb[s_x1]
        alu[--, --, b, $x1]
        bne[qm_enq_w2#]
        qm_ring_put(qa1, 0, p1)
    .endif
qm_enq_w2#:
    .if (ok2 != 0)
        ctx_arb[s_x2]
        alu[--, --, b, $x2]
        bne[qm_enq_loop#]
        qm_ring_put(qa2, 0, p2)
    .endif
    alu[--, $e0, or, $e2]
    bne[qm_enq_loop#]
    ctx_arb[voluntary]              // both empty: let the others run
    br[qm_enq_loop#]
.end

// ---- the polling context and the schedulers -----------------------------------------
qm_not_first#:
    br!=ctx[CTX_STEP, qm_scheduler#]
qm_poll#:
    qm_refresh()
#ifdef RING_CP
    // the control plane's frames (README §3.2), one a round, as qm.uc
.begin
    .reg read $c0 $c1 $cx
    .xfer_order $c0 $c1
    .reg cok cqa cp
    .sig s_c s_cx
    scratch[get, $c0, zero, (RING_CP << 2), 2], sig_done[s_c]
    npk_timer_start(QM_POLL_TICKS)
    ctx_arb[s_c, s_timer]
    alu[pw, --, b, $c0]
    beq[qm_poll#]
    alu[ln, --, b, $c1]
    alu[ln, ln, and, 0xFF]          // the control plane's frames: key from the packet word
    qm_enq_one(pw, ln, $cx, s_cx, cok, cqa, cp)
    .if (cok != 0)
        ctx_arb[s_cx]
        alu[--, --, b, $cx]
        bne[qm_poll#]
        qm_ring_put(cqa, 0, cp)
    .endif
    br[qm_poll#]
.end
#else
    npk_sleep(QM_POLL_TICKS)
    br[qm_poll#]
#endif

qm_scheduler#:
    alu[t, nget, and, 7]
    .if (t == 0)
        alu[nget, nget, or, (2 * CTX_STEP)]
        alu[nput, nput, or, (2 * CTX_STEP)]
    .endif
qm_deq_loop#:
.begin
    .reg read $q0 $ln $g0 $g1
    .xfer_order $g0 $g1
    .reg $k
    .reg write $o0 $o1
    .xfer_order $o0 $o1
    .reg cred claims
    .sig s_q s_o s_ln s_g s_k
    ctx_arb[tok_get]
    alu[--, @qm_enq, -, @qm_deq]
    beq[qm_idle#]
    alu[p, --, b, @qm_port]
    immed[tries, 0]
    immed[blocked, 0]
qm_try#:
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    alu[tries, tries, +, 1]
    nop
    nop
    alu[t, --, b, *l$index0[0]]
    alu[t, t, -, *l$index0[1]]
    .if (t == 0)
        br[qm_next_port#]
    .endif
    alu[t, --, b, *l$index0[4]]
    alu[u, t, -, *l$index0[2]]
    alu[u, u, +, *l$index0[5]]
    .if (u >= QM_TX_WINDOW)
        immed[blocked, 1]
        br[qm_next_port#]
    .endif
    // the visit in service: go on while credit and claims last
    alu[qcur, --, b, *l$index0[3]]
    .if (qcur != 0)
        alu[claims, --, b, *l$index0[7]]
        alu[cred, --, b, *l$index0[6]]
        .if (claims != 0)
            alu[--, cred, -, 1]
            bge[qm_serve#]          // signed: credit > 0
            // credit spent.  No other queue of the port waiting (its ring empty): the
            // next round is this queue's again, at once (one SRAM read, not four)
            immed32(u, QR_BASE)
            alu_shf[t, --, b, p, <<5]
            alu[u, u, +, t]
            sram[read, $g0, u, 8, 1], ctx_swap[s_g]
            alu[--, --, b, $g0]
            bne[qm_give_back#]
            qm_quantum_of(qcur)
            alu[cred, cred, +, *l$index1[0]]
            alu[*l$index0[6], --, b, cred]
            alu[--, cred, -, 1]
            bge[qm_serve#]
qm_give_back#:
            // give the claims back; from 0, the queue goes back on the ring
            alu[$k, --, b, claims]
            sram[test_and_add, $k, qcur, 12], ctx_swap[s_k]
            alu[--, --, b, $k]
            bne[qm_visit_end#]
            qm_ring_put(qcur, cred, p)
        .endif
qm_visit_end#:
        alu[*l$index0[3], --, b, 0]
        alu[*l$index0[7], --, b, 0]
    .endif
    // next visit: the head of the port's ring
    immed32(u, QR_BASE)
    alu_shf[t, --, b, p, <<5]
    alu[u, u, +, t]
    sram[get, $g0, u, 0, 2], ctx_swap[s_g]
    alu[qcur, --, b, $g0]
    .if (qcur == 0)
        br[qm_next_port#]           // counted, not yet on the ring (its put is in flight)
    .endif
    immed[t, 0]
    alu[$k, t, -, 1]
    sram[test_and_clr, $k, qcur, 12], ctx_swap[s_k]
    alu[claims, --, b, $k]
    // credit: the carried deficit + the key's quantum
    alu[cred, --, b, $g1]
    qm_quantum_of(qcur)
    alu[cred, cred, +, *l$index1[0]]
    alu[*l$index0[3], --, b, qcur]
    alu[*l$index0[6], --, b, cred]
    alu[*l$index0[7], --, b, claims]
    .if (claims == 0)
        alu[*l$index0[3], --, b, 0]
        br[qm_next_port#]
    .endif
    alu[--, cred, -, 1]
    bge[qm_serve#]
    // a debt larger than the quantum: back to the tail with it, claims returned
    alu[$k, --, b, claims]
    sram[test_and_add, $k, qcur, 12], ctx_swap[s_k]
    alu[*l$index0[3], --, b, 0]
    alu[*l$index0[7], --, b, 0]
    alu[--, --, b, $k]
    bne[qm_next_port#]
    qm_ring_put(qcur, cred, p)
qm_next_port#:
    alu[p, p, +, 1]
    .if (p == NPORTS)
        immed[p, 0]
    .endif
    .if (tries < NPORTS)
        br[qm_try#]
    .endif
    .if (blocked != 0)
        qm_refresh()
    .endif
qm_idle#:
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[tok_put]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    ctx_arb[voluntary]
    br[qm_deq_loop#]
qm_serve#:
    alu[claims, claims, -, 1]
    alu[*l$index0[7], --, b, claims]
    alu[t, --, b, *l$index0[1]]
    alu[*l$index0[1], t, +, 1]
#ifdef QM_QLIMIT_QUEUE
    qm_queue_lm(qcur)
    alu[t, --, b, *l$index1[1]]
    alu[*l$index1[1], t, +, 1]
#endif
    alu[@qm_deq, @qm_deq, +, 1]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, +, QM_MAX_ELEMS]
    alu[t, p, +, 1]
    .if (t == NPORTS)
        immed[t, 0]
    .endif
    alu[@qm_port, --, b, t]
    sram[dequeue, $q0, qcur, 0], sig_done[s_q]
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[s_q]
    alu[u, --, b, $q0]
    sram[read, $ln, u, 8, 1], sig_done[s_ln]
    immed[t, DESC_BASE]
    alu[t, u, -, t]
    alu_shf[pw, --, b, t, >>DESC_SHIFT]
    alu_shf[pw, pw, or, 1, <<31]
    ctx_arb[s_ln]
    alu_shf[ln, --, b, $ln, >>16]
    // charge the visit (if it is still this queue's) and correct the reservation
    alu[t, --, b, *l$index0[3]]
    .if (t == qcur)
        alu[t, --, b, *l$index0[6]]
        alu[*l$index0[6], t, -, ln]
    .endif
    alu[u, ln, +, 63]
    alu_shf[u, --, b, u, >>6]
    alu[u, QM_MAX_ELEMS, -, u]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, -, u]
    br_signal[tok_put, qm_out_full#]
    ctx_arb[tok_put]
qm_out_full#:
    br_inp_state[RING_OUT_STATUS, qm_out_wait#]
    br[qm_out_put#]
qm_out_wait#:
    ctx_arb[voluntary]
    br[qm_out_full#]
qm_out_put#:
    alu[$o0, --, b, pw]
    alu_shf[$o1, p, or, ln, <<16]
    scratch[put, $o0, zero, (RING_OUT << 2), 2], sig_done[s_o]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    ctx_arb[s_o]
    br[qm_deq_loop#]
.end
