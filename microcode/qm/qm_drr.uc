// qm_drr.uc -- the deficit round robin queue manager (docs/schedulers.md; layout
// parameter qm: drr).  qm_dfq.uc is the same engine with Panama's discretized fair
// queuing parameters (a queue per real-time connection, quantum = rate x T).
//
// Queues.  A packet's key is its class (DRR) or connection (DFQ): the input port
// (packet word bits 30..28) or, with QM_CLASS_MSG, bits 8.. of the input message's
// second longword (bits 7..0 are the output port), masked with QM_KEY_MASK.  Its queue
// is the SRAM queue-array queue at QX_BASE + (key << 8) + (port << 5), 32 bytes: the
// queue descriptor (+0 head, +4 tail, +8 count), +12 the count word (bit 31: held by
// a visit or its ring entry; bits 30..0: packets enqueued and not yet claimed), +16 the
// late charges (lengths of frames dequeued after their visit ended).
//
// Active lists, so that the cost of a packet does not depend on the number of queues.
// Each output port has an SRAM ring (descriptor QR_BASE + 32 * port) of the queues that
// wait for a visit, three longwords an entry: (queue address, carried deficit, carried
// claims).  Context 0 enqueues: sram[enqueue], then sram[test_and_incr] of the count
// word; the packet that takes it from 0 puts the queue on its port's ring.
// A visit (schedulers, under tok_get): take the next entry of the port's ring, claim
// the queue's packets (sram[swap] of the count word for the held bit: the claims, with
// the carried ones; the late charges are swapped for 0 at the same time), credit =
// carried deficit + the key's quantum (bytes, local memory 256 + 4 * (key & 7)) - late
// charges; then, one
// decision a packet, dequeue while credit > 0 and claims are left.  The dequeuing
// context charges the frame's length (descriptor LW2) to the credit once it has read it
// (a decision made meanwhile sees the credit before that charge: a visit may overrun
// its quantum by up to the frames in flight; the overrun is carried, so long-run shares
// are the quanta's; frames charged after their visit ended go to the queue's late-charge
// word, read at its next visit).  A visit whose credit is spent goes to the ring's tail
// with its deficit and unused claims; one whose claims are spent claims what came
// meanwhile and goes on while credit lasts, else releases the queue (clears the held
// bit; if packets came, puts it back): a queue that empties loses its deficit, as in
// DRR.  Order: one context enqueues, dequeues are issued under tok_get and all of it
// goes to one SRAM channel, so a queue is first in, first out.
//
// Ports: round robin, one decision a port, skipping ports with nothing enqueued or not
// ready (the port-ready flow control of qm.uc, microcode/README.md §4.5: qm_refresh.h).
//
// Local memory, 32 bytes a port at 32 * port: +0 enqueued (ctx 0) +4 dequeued
// (schedulers) +8 elements out of the TBUF (poller) +12 queue in service (0: none)
// +16 elements dequeued +20 elements in the PHY FIFO +24 credit (signed bytes)
// +28 claims left; quanta at QM_LM_QUANTA + 4 * (key & 7).  With eight keys or fewer
// (QM_LM_STATE, below: DRR, and DFQ by input port) the queues' words and the active
// rings described above are in local memory too (QM_LM_Q, QM_LM_RING), not SRAM.
#include "npk_sys.h"
#include "npk_block.h"
#include "qm_refresh.h"
#include "npk_sched.h"

#define QM_LM_QUANTA    256
#define QM_LM_ROUND     288         // paced DFQ: a port's next round start (timestamp ticks) at +4 * port
#define QM_MARK         1           // paced DFQ: the round marker's entry on a port's ring
#if defined(QM_DFQ) && defined(QM_DFQ_PACED)
#define QM_PACED
#endif
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

// Eight keys or fewer a port (DRR; DFQ with class_by: inport): the queues' scheduler
// words and the ports' active rings live in local memory instead of SRAM (issue 47's
// minimum-size line rate: no SRAM round trip under the scheduler token).  A queue's
// record at QM_LM_Q + ((qa - QX_BASE) >> 1), 16 bytes: +0 count word (bit 31 held,
// as the SRAM count word), +4 late charges, +8 carried deficit, +12 carried claims (a
// queue is on its ring at most once, so what the SRAM ring entry carried is kept here).
// Port p's ring at QM_LM_RING + 128 * p: +0 head, +4 tail (free-running), +64 sixteen
// entries (a queue address, or paced DFQ's marker: eight keys and a marker at most).
// Contexts swap only at ctx_arb, so each sequence of local-memory steps is atomic.
#if (QM_KEY_MASK <= 7)
#define QM_LM_STATE
#endif
#define QM_LM_Q         512         // .. 1535
#define QM_LM_RING      1536        // .. 2559 (8 ports)

#macro immed32(REG, V)
    immed_w0[REG, ((V) & 0xFFFF)]
    immed_w1[REG, (((V) >> 16) & 0xFFFF)]
#endm

.reg p t u ln key qa
#ifdef QM_LM_STATE
.reg lt lv

// local memory index1 -> the record of queue QA (lt, lv changed)
#macro qm_lm_at(QA)
    alu_shf[lt, --, b, QA, <<21]
    alu_shf[lt, --, b, lt, >>22]
    immed[lv, QM_LM_Q]
    alu[lt, lt, +, lv]
    local_csr_wr[ACTIVE_LM_ADDR_1, lt]
    nop
    nop
    nop
#endm

// Append QA to port P's ring (index1 left at the entry)
#macro qm_lm_push(QA, P)
    immed[lv, QM_LM_RING]
    alu_shf[lt, --, b, P, <<7]
    alu[lt, lt, +, lv]                  // (QM_LM_RING + 128 * P: the bits overlap)
    local_csr_wr[ACTIVE_LM_ADDR_1, lt]
    nop
    nop
    nop
    alu[lv, --, b, *l$index1[1]]
    alu[*l$index1[1], lv, +, 1]
    alu[lv, lv, and, 15]
    alu_shf[lt, lt, or, lv, <<2]
    alu[lt, lt, or, 64]
    local_csr_wr[ACTIVE_LM_ADDR_1, lt]
    nop
    nop
    nop
    alu[*l$index1[0], --, b, QA]
#endm

#endif
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
    immed[u, QR_STORE]
    alu_shf[t, --, b, p, <<QR_STORE_SHIFT]
    alu[$w3, u, +, t]
    immed32(u, QR_WORDS)
    alu[$w4, --, b, u]
    immed[u, QR_BASE]
    alu_shf[t, --, b, p, <<5]
    alu[u, u, +, t]
    sram[write, $w0, u, 0, 5], ctx_swap[s_w]
    alu[p, p, +, 1]
    .if (p < NPORTS)
        br[qm_init_port#]
    .endif
.end
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
#ifdef QM_LM_STATE
    // the queues' records and the ports' rings: all zero
    immed[t, QM_LM_Q]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    immed[u, 0]
    nop
    nop
qm_init_lm#:
    alu[*l$index0++, --, b, 0]
    alu[*l$index0++, --, b, 0]
    alu[*l$index0++, --, b, 0]
    alu[*l$index0++, --, b, 0]
    alu[u, u, +, 1]
    .if (u < 128)
        br[qm_init_lm#]
    .endif
#endif
#ifdef QM_PACED
    // Panama's cycles: each port's ring holds a marker; a round starts when the marker
    // comes round and its time (QM_LM_ROUND) has come, the next QM_DFQ_T_TICKS later
.begin
    .reg write $m0 $m1 $m2
    .xfer_order $m0 $m1 $m2
    .sig s_m
    immed[p, 0]
qm_init_round#:
    alu_shf[t, --, b, p, <<2]
    immed[u, QM_LM_ROUND]
    alu[t, t, +, u]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    immed[$m0, QM_MARK]
    immed[$m1, 0]
    immed[$m2, 0]
    alu[*l$index1[0], --, b, 0]
    immed[u, QR_BASE]
    alu_shf[t, --, b, p, <<5]
    alu[u, u, +, t]
#ifdef QM_LM_STATE
    immed[u, QM_MARK]
    qm_lm_push(u, p)
#else
    sram[put, $m0, u, 0, 3], ctx_swap[s_m]
#endif
    alu[p, p, +, 1]
    .if (p < NPORTS)
        br[qm_init_round#]
    .endif
.end
#endif
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_get << 3))]
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_put << 3))]

// The queue of packet word PW with message longword W1: port -> p, key -> key, queue
// descriptor address -> qa.
#macro qm_queue_of(PW, W1)
    alu[p, W1, and, 0xFF]
    immed[qa, QX_BASE]
#ifdef QM_CLASS_MSG
    immed[t, QM_KEY_MASK]
    alu_shf[key, t, and, W1, >>8]
#else
    alu_shf[key, (QM_KEY_MASK & 7), and, PW, >>28]
#endif
    alu_shf[qa, qa, or, key, <<8]      // (the fields do not overlap)
    alu_shf[qa, qa, or, p, <<5]
#endm

// local memory index1 -> the quantum of queue QA's key
#macro qm_quantum_of(QA)
    immed[t, QX_BASE]
    alu[t, QA, -, t]
    alu_shf[t, --, b, t, >>8]
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
// Phase A: the queue of message (PW, W1) -> QA_SAVE, its port -> P_SAVE, local memory
// LMCSR (ACTIVE_LM_ADDR_0 or _1: one a message of the batch) at the port's record
// and the port's backlog -> BL; when that is QM_KEY_QLIMIT or more (only then can the
// queue be full), the read of the queue's length (queue-array count, +8) into XQ.
#macro qm_enq_a(PW, W1, XQ, SIGQ, QA_SAVE, P_SAVE, LMCSR, LM0, LM1, BL)
    qm_queue_of(PW, W1)
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[LMCSR, t]
    alu[QA_SAVE, --, b, qa]
    alu[P_SAVE, --, b, p]
    immed[u, QM_KEY_QLIMIT]
    alu[BL, --, b, LM0]
    alu[BL, BL, -, LM1]
    .if (BL >= u)
        sram[read, XQ, qa, 8, 1], sig_done[SIGQ]
    .endif
#endm

// Phase B: link the descriptor of PW on queue QA and count it (test_and_incr into XC,
// signal SIG; LM0: its port's enqueued counter), OK -> 1; or drop it with queue_full
// (DROPCODE: control_queue_full for the control plane's frames) when its port holds
// QM_QLIMIT packets (BL) or its queue QM_KEY_QLIMIT (XQ + EXTRA, EXTRA: a message of
// this batch for the same queue).
#macro qm_enq_b(PW, QA, BL, XQ, SIGQ, EXTRA, XC, SIG, OK, LM0, DROPCODE)
.begin
    .reg ed
    immed[u, QM_KEY_QLIMIT]         // (BL may be OK's register: it is read first)
    .if (BL >= u)
        ctx_arb[SIGQ]
        alu[t, XQ, +, EXTRA]
        .if (t >= u)
            br[drop#]
        .endif
        immed[u, QM_QLIMIT]
        .if (BL >= u)
            br[drop#]
        .endif
    .endif
    immed[ed, DESC_BASE]
    alu_shf[t, --, b, PW, <<16]
    alu_shf[t, --, b, t, >>(16 - DESC_SHIFT)]
    alu[ed, ed, +, t]
    sram[enqueue, --, QA, ed]
#ifndef QM_LM_STATE
    sram[test_and_incr, XC, QA, 12], sig_done[SIG]
#endif
    alu[t, --, b, LM0]
    alu[LM0, t, +, 1]
    alu[@qm_enq, @qm_enq, +, 1]
    immed[OK, 1]
    br[done#]
drop#:
    immed[OK, 0]
    immed[code, DROPCODE]
    npk_free_buffer(PW)
    npk_count((STAT_DROP_BASE + 4 * DROPCODE))
done#:
.end
#endm

#ifdef QM_LM_STATE
// The head of port P's ring -> QA (0: the ring is empty)
#macro qm_lm_pop(QA, P)
.begin
    immed[lv, QM_LM_RING]
    alu_shf[lt, --, b, P, <<7]
    alu[lt, lt, +, lv]                  // (QM_LM_RING + 128 * P: the bits overlap)
    local_csr_wr[ACTIVE_LM_ADDR_1, lt]
    immed[QA, 0]
    nop
    nop
    alu[lv, --, b, *l$index1[0]]
    alu[--, lv, -, *l$index1[1]]
    beq[empty#]
    alu[*l$index1[0], lv, +, 1]
    alu[lv, lv, and, 15]
    alu_shf[lt, lt, or, lv, <<2]
    alu[lt, lt, or, 64]
    local_csr_wr[ACTIVE_LM_ADDR_1, lt]
    nop
    nop
    nop
    alu[QA, --, b, *l$index1[0]]
empty#:
.end
#endm

// One message (PW, W1), all of it, without waiting: its queue; the port's limit and,
// when the port holds QM_KEY_QLIMIT packets or more, the queue's (its length: the
// packets not yet claimed, the claims its ring entry carries and, when it is its port's
// visit in service (port record +12), the visit's claims left (+28)); enqueue; count,
// and put the queue on its port's ring when the count word was 0.  PCSR and P0..P7:
// the port's record; RCSR and R0..R3: the queue's (the other index); OK -> 1, or 0
// when dropped with DROPCODE.  (Index1 is left anywhere.)
#macro qm_enq_lm(PW, W1, PCSR, P0, P1, P3, P7, RCSR, R0, R2, R3, DROPCODE, OK)
.begin
    .reg bl ql ed
    qm_queue_of(PW, W1)
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[PCSR, t]
    alu_shf[lt, --, b, qa, <<21]
    alu_shf[lt, --, b, lt, >>22]
    immed[lv, QM_LM_Q]
    alu[lt, lt, +, lv]
    local_csr_wr[RCSR, lt]
    immed[u, QM_KEY_QLIMIT]
    alu[bl, --, b, P0]
    alu[bl, bl, -, P1]
    .if (bl >= u)
        alu[ql, --, b, R0]
        alu_shf[ql, --, b, ql, <<1]
        alu_shf[ql, --, b, ql, >>1]
        alu[ql, ql, +, R3]
        alu[t, --, b, P3]
        .if (t == qa)
            alu[ql, ql, +, P7]
        .endif
        .if (ql >= u)
            br[drop#]
        .endif
        immed[u, QM_QLIMIT]
        .if (bl >= u)
            br[drop#]
        .endif
    .endif
    immed[ed, DESC_BASE]
    alu_shf[t, --, b, PW, <<16]
    alu_shf[t, --, b, t, >>(16 - DESC_SHIFT)]
    alu[ed, ed, +, t]
    sram[enqueue, --, qa, ed]
    alu[t, --, b, P0]
    alu[P0, t, +, 1]
    alu[@qm_enq, @qm_enq, +, 1]
    alu[lv, --, b, R0]
    alu[R0, lv, +, 1]
    .if (lv == 0)
        alu[R2, --, b, 0]
        alu[R3, --, b, 0]
        qm_lm_push(qa, p)
    .endif
    br[done#], defer[1]
    immed[OK, 1]
drop#:
    immed[OK, 0]
    immed[code, DROPCODE]
    npk_free_buffer(PW)
    npk_count((STAT_DROP_BASE + 4 * DROPCODE))
done#:
.end
#endm

// Put queue QA (deficit DEF, claims carried CL) on port P's active ring.
#macro qm_ring_put(QA, DEF, CL, P)
.begin
#ifdef QM_PACED
    .if (QA != QM_MARK)
#endif
        qm_lm_at(QA)
        alu[*l$index1[2], --, b, DEF]
        alu[*l$index1[3], --, b, CL]
#ifdef QM_PACED
    .endif
#endif
    qm_lm_push(QA, P)
.end
#endm
#else
// Put queue QA (deficit DEF, claims carried CL) on port P's active ring.
#macro qm_ring_put(QA, DEF, CL, P)
.begin
    .reg write $r0 $r1 $r2
    .xfer_order $r0 $r1 $r2
    .reg ra rt
    .sig s_r
    alu[$r0, --, b, QA]
    alu[$r1, --, b, DEF]
    alu[$r2, --, b, CL]
    immed[ra, QR_BASE]
    alu_shf[rt, --, b, P, <<5]
    alu[ra, ra, +, rt]
    sram[put, $r0, ra, 0, 3], ctx_swap[s_r]
.end
#endm
#endif

// Put queue QA on port P's active ring without waiting: XR0..XR2 (deficit 0, no claims)
// are free again at SIG, which the loop waits for before it writes them next (PENDING).
#macro qm_ring_put_async(QA, P, XR0, XR1, XR2, SIG, PENDING)
.begin
    .reg ra rt
    .if (PENDING != 0)
        ctx_arb[SIG]
    .endif
    alu[XR0, --, b, QA]
    alu[XR1, --, b, 0]
    alu[XR2, --, b, 0]
    immed[ra, QR_BASE]
    alu_shf[rt, --, b, P, <<5]
    alu[ra, ra, +, rt]
    sram[put, XR0, ra, 0, 3], sig_done[SIG]
    immed[PENDING, 1]
.end
#endm

// The loop is software-pipelined: the next two gets are issued with this batch's
// enqueues, and ring puts are not waited for (the enqueuer's chain: get, length read,
// enqueue + count; ~2 SRAM round trips a batch of two).
.begin
    .reg read $e0 $e1 $e2 $e3 $x1 $x2 $l1 $l2
    .xfer_order $e0 $e1 $e2 $e3
    .reg write $p0 $p1 $p2 $p3 $p4 $p5
    .xfer_order $p0 $p1 $p2
    .xfer_order $p3 $p4 $p5
    .reg ok1 ok2 qa1 qa2 p1 p2 pend1 pend2
    // the two packet words: ow1 and pw (the block skeleton's, unused otherwise here)
#define pw1 ow1
#define pw2 pw
    .sig s_e s_e2 s_x1 s_x2 s_l1 s_l2 s_p1 s_p2
    immed[pend1, 0]
    immed[pend2, 0]
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
qm_enq_loop#:
    ctx_arb[s_e, s_e2]
    immed[ok1, 0]
    immed[ok2, 0]
    alu[pw1, --, b, $e0]
    alu[pw2, --, b, $e2]
    alu[--, pw1, or, pw2]
    bne[qm_enq_some#]
    // nothing: ask again after a swap
    ctx_arb[voluntary]
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
    br[qm_enq_loop#]
qm_enq_some#:
    // (the second get may bring a message although the first found the ring empty)
#ifdef QM_LM_STATE
    .if (pw1 != 0)
        qm_enq_lm(pw1, $e1, ACTIVE_LM_ADDR_0, *l$index0[0], *l$index0[1], *l$index0[3], *l$index0[7], ACTIVE_LM_ADDR_1, *l$index1[0], *l$index1[2], *l$index1[3], DROP_QUEUE_FULL, ok1)
    .endif
    .if (pw2 != 0)
        qm_enq_lm(pw2, $e3, ACTIVE_LM_ADDR_0, *l$index0[0], *l$index0[1], *l$index0[3], *l$index0[7], ACTIVE_LM_ADDR_1, *l$index1[0], *l$index1[2], *l$index1[3], DROP_QUEUE_FULL, ok2)
    .endif
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
    br[qm_enq_loop#]
#endif
    .if (pw1 != 0)
        qm_enq_a(pw1, $e1, $l1, s_l1, qa1, p1, ACTIVE_LM_ADDR_0, *l$index0[0], *l$index0[1], ok1)
    .endif
    .if (pw2 != 0)
        qm_enq_a(pw2, $e3, $l2, s_l2, qa2, p2, ACTIVE_LM_ADDR_1, *l$index1[0], *l$index1[1], ok2)
    .endif
    .if (pw1 != 0)
        qm_enq_b(pw1, qa1, ok1, $l1, s_l1, 0, $x1, s_x1, ok1, *l$index0[0], DROP_QUEUE_FULL)
    .endif
    .if (pw2 != 0)
        immed[ln, 0]
        .if (qa1 == qa2)
            alu[ln, --, b, ok1]
        .endif
        alu[qa, --, b, qa2]             // (the enqueue wants its queue in bank A)
        qm_enq_b(pw2, qa, ok2, $l2, s_l2, ln, $x2, s_x2, ok2, *l$index1[0], DROP_QUEUE_FULL)
    .endif
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
    .if (ok1 != 0)
        ctx_arb[s_x1]
        alu[--, --, b, $x1]
        bne[qm_enq_w2#]
        qm_ring_put_async(qa1, p1, $p0, $p1, $p2, s_p1, pend1)
    .endif
qm_enq_w2#:
    .if (ok2 != 0)
        ctx_arb[s_x2]
        alu[--, --, b, $x2]
        bne[qm_enq_loop#]
        qm_ring_put_async(qa2, p2, $p3, $p4, $p5, s_p2, pend2)
    .endif
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
    .reg read $c0 $c1 $cx $cl
    .xfer_order $c0 $c1
    .reg cok cqa cp
    .sig s_c s_cx s_cl
    scratch[get, $c0, zero, (RING_CP << 2), 2], sig_done[s_c]
    npk_timer_start(QM_POLL_TICKS)
    ctx_arb[s_c, s_timer]
    alu[pw, --, b, $c0]
    beq[qm_poll#]
    alu[ln, --, b, $c1]
    alu[ln, ln, and, 0xFF]          // the control plane's frames: key from the packet word
#ifdef QM_LM_STATE
    qm_enq_lm(pw, ln, ACTIVE_LM_ADDR_0, *l$index0[0], *l$index0[1], *l$index0[3], *l$index0[7], ACTIVE_LM_ADDR_1, *l$index1[0], *l$index1[2], *l$index1[3], DROP_CONTROL_QUEUE_FULL, cok)
    br[qm_poll#]
#endif
    qm_enq_a(pw, ln, $cl, s_cl, cqa, cp, ACTIVE_LM_ADDR_0, *l$index0[0], *l$index0[1], cok)
    qm_enq_b(pw, cqa, cok, $cl, s_cl, 0, $cx, s_cx, cok, *l$index0[0], DROP_CONTROL_QUEUE_FULL)
    .if (cok != 0)
        ctx_arb[s_cx]
        alu[--, --, b, $cx]
        bne[qm_poll#]
        qm_ring_put(cqa, 0, 0, cp)
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
    .reg read $q0 $g0 $g1 $g2
    .xfer_order $g0 $g1 $g2
    .reg $k $d
    .reg write $o0 $o1
    .xfer_order $o0 $o1
    .reg cred claims tries blocked qcur late
    .sig s_q s_o s_ln s_g s_k s_d
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
    // (the common path falls through: a taken branch costs 3 cycles)
    alu[t, --, b, *l$index0[0]]
    alu[t, t, -, *l$index0[1]]
    beq[qm_next_port#]
    alu[t, --, b, *l$index0[4]]
    alu[u, t, -, *l$index0[2]]
    alu[u, u, +, *l$index0[5]]
    alu[--, u, -, QM_TX_WINDOW]
    bhs[qm_blocked#]
    // the visit in service: go on while credit and claims last
    alu[qcur, --, b, *l$index0[3]]
#ifdef QM_PACED
qm_mark#:
    .if (qcur == QM_MARK)
        // the round's marker in hand: the port's next round waits for its time
        alu_shf[t, --, b, p, <<2]
        immed[u, QM_LM_ROUND]
        alu[t, t, +, u]
        local_csr_wr[ACTIVE_LM_ADDR_1, t]
        local_csr_rd[TIMESTAMP_LOW]
        immed[t, 0]
        nop
        alu[--, t, -, *l$index1[0]]
        blt[qm_next_port#]          // not yet: the port waits (not blocked by tx)
        alu[u, *l$index1[0], +, 0]
        immed[cred, QM_DFQ_T_TICKS]
        alu[u, u, +, cred]          // the next round, T after this one's
        alu[--, u, -, t]
        bge[qm_mark_ahead#]
        alu[u, --, b, t]            // late by more than a round: the next one from now
qm_mark_ahead#:
        alu[*l$index1[0], --, b, u]
        immed[u, QM_MARK]
        qm_ring_put(u, 0, 0, p)     // behind the round's queues
        alu[*l$index0[3], --, b, 0]
        immed[qcur, 0]
    .endif
#endif
    .if (qcur != 0)
        alu[claims, --, b, *l$index0[7]]
        alu[cred, --, b, *l$index0[6]]
        .if (claims != 0)
            alu[--, cred, -, 1]
            bge[qm_serve2#], defer[2]   // signed: credit > 0
            alu[claims, claims, -, 1]       // (qm_serve#'s first two steps)
            alu[*l$index0[7], --, b, claims]
            // credit spent: to the ring's tail with its deficit and its claims
            alu[claims, claims, +, 1]
            qm_ring_put(qcur, cred, claims, p)
        .else
            // claims spent, credit left: claim what came meanwhile and go on (DRR serves
            // a queue while it has packets and credit)
            alu[--, cred, -, 1]
            blt[qm_release#]
#ifdef QM_LM_STATE
            qm_lm_at(qcur)
            immed[t, 0x8000, <<16]
            alu[claims, --, b, *l$index1[0]]
            alu[*l$index1[0], --, b, t]
            alu_shf[claims, --, b, claims, <<1]
#else
            immed[t, 0x8000, <<16]
            alu[$k, --, b, t]
            sram[swap, $k, qcur, 12], ctx_swap[s_k]
            alu_shf[claims, --, b, $k, <<1]
#endif
            alu_shf[claims, --, b, claims, >>1]
            .if (claims != 0)
                alu[*l$index0[7], --, b, claims]
                br[qm_serve#]
            .endif
qm_release#:
            // nothing came, or the credit is spent: the queue is released (held bit
            // cleared) unless packets came meanwhile; then it goes back on the ring, and
            // its next visit claims them
#ifdef QM_LM_STATE
            qm_lm_at(qcur)
            alu[t, --, b, *l$index1[0]]
            alu_shf[t, --, b, t, <<1]
            alu_shf[*l$index1[0], --, b, t, >>1]
#else
            immed[t, 0x8000, <<16]
            alu[$k, --, b, t]
            sram[test_and_clr, $k, qcur, 12], ctx_swap[s_k]
            alu_shf[t, --, b, $k, <<1]
#endif
            .if (t != 0)
                qm_ring_put(qcur, cred, 0, p)
            .endif
        .endif
        alu[*l$index0[3], --, b, 0]
    .endif
    // next visit: the head of the port's ring; claim its queue's packets (swap the count
    // for the held bit: arrivals then count without putting the queue on the ring again)
#ifdef QM_LM_STATE
    qm_lm_pop(qcur, p)
#else
    immed[u, QR_BASE]
    alu_shf[t, --, b, p, <<5]
    alu[u, u, +, t]
    sram[get, $g0, u, 0, 3], ctx_swap[s_g]
    alu[qcur, --, b, $g0]
#endif
    .if (qcur == 0)
        br[qm_next_port#]           // counted, not yet on the ring (its put is in flight)
    .endif
#ifdef QM_PACED
    .if (qcur == QM_MARK)
        alu[*l$index0[3], --, b, qcur]
        br[qm_mark#]
    .endif
#endif
#ifdef QM_LM_STATE
    qm_lm_at(qcur)
    immed[t, 0x8000, <<16]
    alu[claims, --, b, *l$index1[0]]
    alu[*l$index1[0], --, b, t]
    alu_shf[claims, --, b, claims, <<1]
    alu_shf[claims, --, b, claims, >>1]
    alu[claims, claims, +, *l$index1[3]]
    alu[*l$index1[3], --, b, 0]     // (the record's claims count in the queue's length)
    // credit: the carried deficit + the key's quantum - the late charges
    alu[cred, --, b, *l$index1[2]]
    alu[cred, cred, -, *l$index1[1]]
    alu[*l$index1[1], --, b, 0]
#else
    immed[t, 0x8000, <<16]
    alu[$k, --, b, t]
    alu[$d, --, b, 0]
    sram[swap, $k, qcur, 12], sig_done[s_k]
    sram[swap, $d, qcur, 16], sig_done[s_d]       // the charges that came after its last visit
    ctx_arb[s_k, s_d]
    alu_shf[claims, --, b, $k, <<1]
    alu_shf[claims, --, b, claims, >>1]
    alu[claims, claims, +, $g2]
    // credit: the carried deficit + the key's quantum - the late charges
    alu[cred, $g1, -, $d]
#endif
    qm_quantum_of(qcur)
    alu[cred, cred, +, *l$index1[0]]
    alu[*l$index0[3], --, b, qcur]
    alu[*l$index0[6], --, b, cred]
    alu[*l$index0[7], --, b, claims]
    alu[--, cred, -, 1]
    bge[qm_serve#]
    // a debt larger than the quantum: back to the tail, where it gains a quantum a round
    alu[*l$index0[3], --, b, 0]
    qm_ring_put(qcur, cred, claims, p)
    br[qm_next_port#]
qm_blocked#:
    immed[blocked, 1]
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
qm_serve2#:
    alu[t, --, b, *l$index0[1]]
    alu[*l$index0[1], t, +, 1]
    alu[@qm_deq, @qm_deq, +, 1]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, +, QM_MAX_ELEMS]
    alu[t, p, +, 1]
    alu[--, t, -, NPORTS]
    bne[qm_port_set#], defer[1]
    alu[@qm_port, --, b, t]
    alu[@qm_port, --, b, 0]
qm_port_set#:
    sram[dequeue, $q0, qcur, 0], sig_done[s_q]
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[s_q]
    alu[u, --, b, $q0]
    sram[read, $q0, u, 8, 1], sig_done[s_ln]   // (reused: the dequeue's result is in u)
    immed[t, DESC_BASE]
    alu[t, u, -, t]
    alu_shf[pw, --, b, t, >>DESC_SHIFT]
    alu_shf[pw, pw, or, 1, <<31]
    ctx_arb[s_ln]
    alu_shf[ln, --, b, $q0, >>16]
    // charge the visit (if it is still this queue's) and correct the reservation
#ifndef QM_LM_STATE
    immed[late, 0]
#endif
    alu[t, --, b, *l$index0[3]]
    alu[--, t, -, qcur]
    bne[qm_late#]
    alu[t, --, b, *l$index0[6]]
    alu[*l$index0[6], t, -, ln]
qm_charged#:
    alu[u, ln, +, 63]
    alu_shf[u, --, b, u, >>6]
    alu[u, QM_MAX_ELEMS, -, u]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, -, u]
    br_!signal[tok_put, qm_tok_wait#]
qm_out_full#:
    br_inp_state[RING_OUT_STATUS, qm_out_wait#]
    alu[$o0, --, b, pw]
    alu_shf[t, --, b, ln, <<16]
    alu[$o1, t, or, p]
    scratch[put, $o0, zero, (RING_OUT << 2), 2], sig_done[s_o]
    local_csr_wr[SAME_ME_SIGNAL, nput]
#ifdef QM_LM_STATE
    ctx_arb[s_o]
#else
    .if (late != 0)
        ctx_arb[s_o, s_d]
    .else
        ctx_arb[s_o]
    .endif
#endif
    br[qm_deq_loop#]
    // (off the common path)
qm_tok_wait#:
    ctx_arb[tok_put]
    br[qm_out_full#]
qm_out_wait#:
    ctx_arb[voluntary]
    br[qm_out_full#]
qm_late#:
    // its visit has ended: the queue's late-charge word (+16), read at its next visit
#ifdef QM_LM_STATE
    qm_lm_at(qcur)
    alu[t, --, b, *l$index1[1]]
    alu[*l$index1[1], t, +, ln]
#else
    alu[$d, --, b, ln]
    sram[add, $d, qcur, 16], sig_done[s_d]
    immed[late, 1]
#endif
    br[qm_charged#]
.end
