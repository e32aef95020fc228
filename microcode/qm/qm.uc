// qm.uc -- the queue manager (microcode/README.md §4.5).
//
// Context 0 enqueues: it takes (packet word, output port) from RING_IN and links the
// packet's descriptor onto the port's queue with the SRAM queue-array command
// `enqueue` (queue descriptor QD_BASE + 16 * port), or drops it with queue_full when
// the port already holds QM_QLIMIT packets; after a message it takes two a swap until
// the ring runs dry (README §4.5).  The other contexts dequeue, in turn
// (tok_get orders the scheduling decisions and so the dequeue commands; tok_put the
// puts to RING_OUT): weighted round robin over the ports, QM_QUANTUM_<p> packets per
// visit, skipping ports whose queue is empty or that are not ready.
// Port-ready flow control, in 64-byte TBUF elements: a port is ready while
// (elements dequeued - elements out of the TBUF) + elements in its PHY transmit FIFO
// < QM_TX_WINDOW, so that everything the qm has let go for a port fits its FIFO and
// no port can block the TBUF's strict sequence for the others.  A dequeue reserves
// QM_MAX_ELEMS elements and corrects the reservation once it has read the frame's
// length from its descriptor.  Context CTX_STEP polls (qm_refresh), every
// QM_POLL_TICKS x 16 cycles, the elements tx has seen leave the TBUF (scratch
// TXDONE_BASE + 4 * port) and then the FIFO fill of every port (TX_PORT_STATUS_p, free
// bytes); a scheduler that found a port blocked by its window refreshes the same way.
// With RING_CP the polling context also enqueues the control plane's frames, one a
// round (without waiting when there was one), off the enqueue context's path.
//
// Local memory (shared by the contexts of the ME), 32 bytes a port at 32 * port:
//   +0 enqueued (ctx 0 writes)   +4 dequeued (schedulers write)
//   +8 elements out of the TBUF (poller)   +12 quantum
//   +16 elements dequeued (schedulers)      +20 elements in the PHY FIFO (poller)
// and the scheduler's state at QM_LM_SCHED: +0 current port, +4 credit left.
#include "npk_sys.h"
#include "npk_block.h"

#define QM_LM_SCHED     (32 * 8)
#define QM_MAX_ELEMS    24          // a 1,514-byte frame
#ifndef QM_POLL_TICKS
#define QM_POLL_TICKS   32
#endif

// Refresh the flow-control view of every port into local memory: the elements tx has
// seen leave the TBUF (scratch TXDONE_BASE + 4 * port -> LM +8), THEN the PHY FIFO fill
// (TX_PORT_STATUS_p free bytes -> elements, LM +20).  The order matters: a frame that
// leaves the TBUF between the two reads is counted twice (in flight and in the FIFO:
// conservative), never missed, so the window can never admit a frame that does not fit
// its port's FIFO and stall the TBUF's strict sequence for the other ports.
#if (NPORTS > 5)
#error "qm_refresh: at most 5 ports (the parse CAM's limit too)"
#endif
#macro qm_refresh()
.begin
    .reg qa qv qs
    .reg read $qd0 $qd1 $qd2 $qd3 $qd4
    .xfer_order $qd0 $qd1 $qd2 $qd3 $qd4
    .reg read $qp0 $qp1 $qp2 $qp3 $qp4
    .xfer_order $qp0 $qp1 $qp2 $qp3 $qp4
    .sig s_qp s_qd
    immed[qa, TXDONE_BASE]
    scratch[read, $qd0, qa, 0, NPORTS], ctx_swap[s_qd]
#ifdef MSF_TX
    immed[qa, 0x400]
    msf[read, $qp0, qa, 0, NPORTS], ctx_swap[s_qp]
#endif
    qm_refresh_port(0, $qd0, $qp0)
#if (NPORTS > 1)
    qm_refresh_port(1, $qd1, $qp1)
#endif
#if (NPORTS > 2)
    qm_refresh_port(2, $qd2, $qp2)
#endif
#if (NPORTS > 3)
    qm_refresh_port(3, $qd3, $qp3)
#endif
#if (NPORTS > 4)
    qm_refresh_port(4, $qd4, $qp4)
#endif
.end
#endm

#macro qm_refresh_port(P, TD, PS)
    immed[qa, (32 * P)]
    local_csr_wr[ACTIVE_LM_ADDR_0, qa]
#ifdef MSF_TX
    alu_shf[qv, --, b, PS, >>16]
    immed[qs, QM_FIFO_BYTES]
    alu[qs, qs, -, qv]
    alu_shf[qs, --, b, qs, >>6]
    alu[*l$index0[5], --, b, qs]
#else
    nop
    nop
    nop
#endif
    alu[*l$index0[2], --, b, TD]
#endm

.reg p r tries t u blocked ln
// packets enqueued and dequeued on all ports (absolute: every context's view): equal,
// the schedulers have nothing to look for and skip the scan of the ports
.reg @qm_enq @qm_deq

    npk_thread_setup()
    br!=ctx[0, qm_not_first#]
    // one-time: counters 0, quanta, scheduler at port 0 with its quantum
    immed[@qm_enq, 0]
    immed[@qm_deq, 0]
    immed[p, 0]
qm_init_port#:
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    npk_qm_quantum(u, p)
    nop
    alu[*l$index0[0], --, b, 0]
    alu[*l$index0[1], --, b, 0]
    alu[*l$index0[2], --, b, 0]
    alu[*l$index0[3], --, b, u]
    alu[*l$index0[4], --, b, 0]
    alu[*l$index0[5], --, b, 0]
    alu[p, p, +, 1]
    .if (p < NPORTS)
        br[qm_init_port#]
    .endif
    immed[t, QM_LM_SCHED]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    immed[p, 0]
    npk_qm_quantum(u, p)
    nop
    alu[*l$index1[0], --, b, 0]
    alu[*l$index1[1], --, b, u]
    // the first scheduler context gets both tokens
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_get << 3))]
    local_csr_wr[SAME_ME_SIGNAL, ((2 * CTX_STEP) | (&tok_put << 3))]

// Link the descriptor of packet word `pw` onto port `p`'s queue, or drop it (DROPCODE)
// when the port already holds QM_QLIMIT packets.
#macro qm_enqueue(DROPCODE)
.begin
    .reg eq ed
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    alu_shf[t, --, b, p, <<4]
    immed[eq, QD_BASE]
    alu[eq, eq, +, t]
    immed[ed, DESC_BASE]
    alu_shf[t, --, b, pw, <<16]
    alu_shf[t, --, b, t, >>(16 - DESC_SHIFT)]
    alu[ed, ed, +, t]
    alu[t, --, b, *l$index0[0]]
    alu[t, t, -, *l$index0[1]]
    immed[u, QM_QLIMIT]
    .if (t < u)
        sram[enqueue, --, eq, ed]
        alu[t, --, b, *l$index0[0]]
        alu[*l$index0[0], t, +, 1]
        alu[@qm_enq, @qm_enq, +, 1]
    .else
        immed[code, DROPCODE]
        npk_free_buffer(pw)
        npk_count((STAT_DROP_BASE + 4 * DROPCODE))
    .endif
.end
#endm

// ---- context 0: enqueue ------------------------------------------------------------
.begin
    .reg read $e0 $e1 $e2 $e3
    .xfer_order $e0 $e1 $e2 $e3
    .sig s_e s_e2
qm_enq_loop#:
    scratch[get, $e0, zero, (RING_IN << 2), 2], ctx_swap[s_e]
    alu[pw, --, b, $e0]
    bne[qm_enq_got#]
    ctx_arb[voluntary]
    br[qm_enq_loop#]
qm_enq_got#:
    alu[p, --, b, $e1]
    qm_enqueue(DROP_QUEUE_FULL)
    // a message came: more may follow (a backlog, or a burst from the blocks before),
    // so take two a swap -- the scratch unit serves the gets in order, each returns a
    // message or zeros -- until the second comes back empty
qm_enq_two#:
    scratch[get, $e0, zero, (RING_IN << 2), 2], sig_done[s_e]
    scratch[get, $e2, zero, (RING_IN << 2), 2], sig_done[s_e2]
    ctx_arb[s_e, s_e2]
    alu[pw, --, b, $e0]
    beq[qm_enq_second#]
    alu[p, --, b, $e1]
    qm_enqueue(DROP_QUEUE_FULL)
qm_enq_second#:
    alu[pw, --, b, $e2]
    beq[qm_enq_loop#]
    alu[p, --, b, $e3]
    qm_enqueue(DROP_QUEUE_FULL)
    br[qm_enq_two#]
.end

// ---- contexts 1..: schedule and dequeue ---------------------------------------------
qm_not_first#:
    br!=ctx[CTX_STEP, qm_scheduler#]
qm_poll#:
    qm_refresh()
#ifdef RING_CP
    // the control plane's frames (README §3.2), one a round, off the enqueue context's
    // path: (packet word, output port) as from RING_IN; a full queue drops them as
    // control_queue_full.  The ring is read during the round's sleep, so that the
    // refresh keeps its period (a longer one leaves the schedulers a staler view of
    // the ports: at 64 B in the parallel layout, when the enqueuer still took one
    // message a swap, p99 went from 24 to 40 us)
.begin
    .reg read $c0 $c1
    .xfer_order $c0 $c1
    .sig s_c
    scratch[get, $c0, zero, (RING_CP << 2), 2], sig_done[s_c]
    npk_timer_start(QM_POLL_TICKS)
    ctx_arb[s_c, s_timer]
    alu[pw, --, b, $c0]
    beq[qm_poll#]
    alu[p, --, b, $c1]
    qm_enqueue(DROP_CONTROL_QUEUE_FULL)
    br[qm_poll#]
.end
#else
    npk_sleep(QM_POLL_TICKS)
    br[qm_poll#]
#endif
qm_scheduler#:
    // the token ring of the schedulers skips contexts 0 (enqueue) and CTX_STEP (poll)
    alu[t, nget, and, 7]
    .if (t == 0)
        alu[nget, nget, or, (2 * CTX_STEP)]
        alu[nput, nput, or, (2 * CTX_STEP)]
    .endif
    immed[t, QM_LM_SCHED]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
qm_deq_loop#:
.begin
    .reg read $q0 $ln
    .reg write $o0 $o1
    .xfer_order $o0 $o1
    .sig s_q s_o s_ln
    ctx_arb[tok_get]
    // no packet on any queue: pass the turn without scanning the ports (a scan of five
    // empty ports held the ME ~200 cycles, and with six schedulers in turn the
    // enqueuer, woken by its get, waited one or two scans: ~0.3-0.5 us a frame)
    alu[--, @qm_enq, -, @qm_deq]
    beq[qm_idle#]
    alu[p, --, b, *l$index1[0]]
    alu[r, --, b, *l$index1[1]]
    immed[tries, 0]
    immed[blocked, 0]
qm_try#:
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    alu[tries, tries, +, 1]
    nop
    nop
    .if (r != 0)
        alu[t, --, b, *l$index0[0]]
        alu[t, t, -, *l$index0[1]]
        .if (t != 0)
            alu[t, --, b, *l$index0[4]]
            alu[u, t, -, *l$index0[2]]
            alu[u, u, +, *l$index0[5]]
            .if (u < QM_TX_WINDOW)
                br[qm_serve#]
            .endif
            immed[blocked, 1]
        .endif
    .endif
    // next port, with a fresh quantum
    alu[p, p, +, 1]
    .if (p == NPORTS)
        immed[p, 0]
    .endif
    alu_shf[t, --, b, p, <<5]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    nop
    nop
    nop
    alu[r, --, b, *l$index0[3]]
    .if (tries <= NPORTS)
        br[qm_try#]
    .endif
    // nothing to send: remember where we are, refresh tx progress if a port waited
    alu[*l$index1[0], --, b, p]
    alu[*l$index1[1], --, b, r]
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
    alu[t, --, b, *l$index0[1]]
    alu[*l$index0[1], t, +, 1]
    alu[@qm_deq, @qm_deq, +, 1]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, +, QM_MAX_ELEMS]
    alu[r, r, -, 1]
    alu[*l$index1[0], --, b, p]
    alu[*l$index1[1], --, b, r]
    immed[t, QD_BASE]
    alu_shf[u, --, b, p, <<4]
    sram[dequeue, $q0, t, u], sig_done[s_q]
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[s_q]
    // descriptor address -> packet word; its length corrects the reservation
    alu[u, --, b, $q0]
    sram[read, $ln, u, 8, 1], sig_done[s_ln]
    immed[t, DESC_BASE]
    alu[t, u, -, t]
    alu_shf[pw, --, b, t, >>DESC_SHIFT]
    alu_shf[pw, pw, or, 1, <<31]
    ctx_arb[s_ln]
    alu_shf[ln, --, b, $ln, >>16]
    alu[u, ln, +, 63]
    alu_shf[u, --, b, u, >>6]
    alu[u, QM_MAX_ELEMS, -, u]
    alu[t, --, b, *l$index0[4]]
    alu[*l$index0[4], t, -, u]
    br_signal[tok_put, qm_out_full#]          // no swap when the token is here (npk_emit)
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
