// tx.uc -- the transmit block (microcode/README.md §4.6).
//
// Each context loops, in context order (npk_block.h tokens):
//   tok_get    take (packet word, output port | frame length << 16) from RING_IN (the
//              queue manager; from the stub qm the length is 0: descriptor LW2);
//   tok_put    allocate the frame's TBUF elements (64 bytes each) in sequence, waiting
//              while TBUF_LIMIT elements are in flight (TX_SEQUENCE_0 counts the
//              elements the MSF has sent);
//   --         copy the frame into its elements in batches of up to four: the
//              batch's 64-byte chunks DRAM -> TBUF (dram[tbuf_wr]) issued together,
//              then one msf[write] of their transmit control words (length, SOP/EOP,
//              port: valid); count tx packets / bytes, give the buffer back to the
//              free list.
// The last context (TX_POLL_CTX) does not take frames: it reads TX_SEQUENCE_0 every
// TX_POLL_TICKS x 16 cycles, returns the elements the MSF has moved out of the TBUF
// (@in_flight), and for every frame whose last element has left adds its elements to
// TXDONE_BASE + 4 * port, which the queue manager's port-ready flow control reads.
// Frames are recorded at allocation, in sequence order, in a ring of 128 longwords
// of local memory: end sequence number << 16 | elements << 8 | port.
// Elements are taken by the MSF in strict sequence, so frames leave in the order the
// queue manager sent them.
#include "npk_sys.h"
#include "npk_block.h"

#define TX_SEQUENCE_0           0x0060
#define TBUF_ELEMENT_CONTROL    0x1800
#define TBUF_ELEMENTS           128
#define TBUF_LIMIT              96

.reg @tx_next @in_flight @old_seq @alloc_seq @fr_wr @fr_rd
.reg t0
#if (NUM_CONTEXTS == 8)
#define TX_POLL_CTX 7
#else
#define TX_POLL_CTX 6
#endif
#ifndef TX_POLL_TICKS
#define TX_POLL_TICKS 32
#endif

// one element's DMA: chunk k of the frame (min(left, 64) bytes) from the buffer into
// TBUF element (first + k) mod TBUF_ELEMENTS, signal SIG; its transmit control word
// ([31:24] payload length, [9] SOP, [8] EOP, [7:0] port; word 1 reserved) into W0, W1;
// advances k and left
#macro tx_dma(SIG, W0, W1)
    alu[elem, first, +, k]
    alu[elem, elem, and, (TBUF_ELEMENTS - 1)]
    alu[bytes, --, b, left]
    .if (bytes > 64)
        immed[bytes, 64]
    .endif
    alu_shf[da, --, b, k, <<6]
    alu[da, da, +, buf]
    alu[t, bytes, -, 1]
    alu_shf[t, 0x10, or, t, >>3]
    alu_shf[ind, 0x10, or, t, <<21]
    alu_shf[t, ind, or, elem, <<11]
    alu_shf[--, t, or, 1, <<18]
    dram[tbuf_wr, --, da, 0, max_8], indirect_ref, sig_done[SIG]
    alu_shf[t, port, or, bytes, <<24]
    .if (k == 0)
        alu_shf[t, t, or, 1, <<9]
    .endif
    alu[left, left, -, bytes]
    .if (left == 0)
        alu_shf[t, t, or, 1, <<8]
    .endif
    alu[W0, --, b, t]
    immed[W1, 0]
    alu[k, k, +, 1]
#endm

    npk_thread_setup()
    // the token rings skip the poller
    alu[t0, nget, and, 7]
    .if (t0 == TX_POLL_CTX)
        alu[nget, nget, and~, 7]
        alu[nput, nput, and~, 7]
    .endif
    br=ctx[TX_POLL_CTX, tx_poll#]
    br!=ctx[0, tx_loop#]
.begin
    .reg read $seq
    .sig seq_done
tx_idle#:
    msf[read, $seq, zero, TX_SEQUENCE_0, 1], ctx_swap[seq_done]
    alu_shf[--, --, b, $seq, >>31]
    beq[tx_idle#]
    alu[@old_seq, --, b, $seq]
    alu[@tx_next, @old_seq, and, (TBUF_ELEMENTS - 1)]
    immed[@in_flight, 0]
    alu[t0, --, b, @old_seq]
    alu_shf[t0, --, b, t0, <<16]
    alu_shf[t0, --, b, t0, >>16]
    alu[@alloc_seq, --, b, t0]
    immed[@fr_wr, 0]
    immed[@fr_rd, 0]
    .begin
        .reg e
        immed[e, 0]
tx_clear#:
        local_csr_wr[ACTIVE_LM_ADDR_1, e]
        nop
        nop
        nop
        alu[*l$index1[0], --, b, 0]
        alu[e, e, +, 4]
        alu_shf[--, --, b, e, >>9]
        beq[tx_clear#]
    .end
    npk_start_tokens()
.end

tx_loop#:
    npk_get_input(tx_loop#)
.begin
    .reg port buf da len n first k elem bytes left t ind d first_e tcwa
    .reg read $l
    .sig s_l dma0 dma1 dma2 dma3 s_tcw
    .reg write $tcw0 $tcw1 $tcw2 $tcw3 $tcw4 $tcw5 $tcw6 $tcw7
    .xfer_order $tcw0 $tcw1 $tcw2 $tcw3 $tcw4 $tcw5 $tcw6 $tcw7
    // (port, length << 16) from the qm; the stub qm passes no length: descriptor LW2
    alu[t, --, b, $i1]
    alu[port, t, and, 0xFF]
    alu_shf[len, --, b, t, >>16]
    bne[tx_have_len#]
    alu_shf[d, --, b, pw, <<16]
    alu_shf[d, --, b, d, >>(16 - DESC_SHIFT)]
    immed[t, DESC_BASE]
    alu[d, d, +, t]
    sram[read, $l, d, 8, 1], ctx_swap[s_l]
    alu_shf[len, --, b, $l, >>16]
tx_have_len#:
    alu[n, len, +, 63]
    alu_shf[n, --, b, n, >>6]
    // TBUF elements, in order (the poller gives them back)
    ctx_arb[tok_put]
tx_have_room#:
    alu[t, @in_flight, +, n]
    alu[--, TBUF_LIMIT, -, t]
    bcs[tx_room#]
    ctx_arb[voluntary]
    br[tx_have_room#]
tx_room#:
    alu[@in_flight, @in_flight, +, n]
    alu[first, --, b, @tx_next]
    alu[@tx_next, @tx_next, +, n]
    alu[@tx_next, @tx_next, and, (TBUF_ELEMENTS - 1)]
    // record the frame for the poller: end sequence number, elements, port
    alu[d, --, b, @fr_wr]
    alu_shf[t, --, b, d, <<2]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    alu[@alloc_seq, @alloc_seq, +, n]
    alu[d, --, b, @alloc_seq]
    alu_shf[t, port, or, n, <<8]
    alu_shf[t, t, or, d, <<16]
    alu[*l$index1[0], --, b, t]
    alu[@fr_wr, @fr_wr, +, 1]
    alu[@fr_wr, @fr_wr, and, (TBUF_ELEMENTS - 1)]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    // copy in batches of up to four elements (a batch ends at the frame's end and at
    // the TBUF's wrap): the batch's dram[tbuf_wr]s are issued together (one signal pair
    // each) and waited for together, then one msf[write] of consecutive
    // TBUF_ELEMENT_CONTROL registers validates them all.  A 1,514-byte frame is in the
    // TBUF ~3x sooner than with one DMA round trip + one control write per element
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    immed[k, 0]
    alu[left, --, b, len]
tx_batch#:
    alu[first_e, first, +, k]
    alu[first_e, first_e, and, (TBUF_ELEMENTS - 1)]
    immed[tcwa, TBUF_ELEMENT_CONTROL]
    alu_shf[tcwa, tcwa, or, first_e, <<3]
    tx_dma(dma0, $tcw0, $tcw1)
    alu[--, left, -, 0]
    beq[tx_wait1#]
    alu[--, elem, -, (TBUF_ELEMENTS - 1)]
    beq[tx_wait1#]
    tx_dma(dma1, $tcw2, $tcw3)
    alu[--, left, -, 0]
    beq[tx_wait2#]
    alu[--, elem, -, (TBUF_ELEMENTS - 1)]
    beq[tx_wait2#]
    tx_dma(dma2, $tcw4, $tcw5)
    alu[--, left, -, 0]
    beq[tx_wait3#]
    alu[--, elem, -, (TBUF_ELEMENTS - 1)]
    beq[tx_wait3#]
    tx_dma(dma3, $tcw6, $tcw7)
    ctx_arb[dma0, dma1, dma2, dma3]
    msf[write, $tcw0, tcwa, 0, 8], ctx_swap[s_tcw]
    br[tx_batch_end#]
tx_wait3#:
    ctx_arb[dma0, dma1, dma2]
    msf[write, $tcw0, tcwa, 0, 6], ctx_swap[s_tcw]
    br[tx_batch_end#]
tx_wait2#:
    ctx_arb[dma0, dma1]
    msf[write, $tcw0, tcwa, 0, 4], ctx_swap[s_tcw]
    br[tx_batch_end#]
tx_wait1#:
    ctx_arb[dma0]
    msf[write, $tcw0, tcwa, 0, 2], ctx_swap[s_tcw]
tx_batch_end#:
    alu[--, left, -, 0]
    bne[tx_batch#]
    // in the TBUF: statistics, buffer back
    .begin
        .reg write $bytes
        .sig s_b
        alu_shf[t, --, b, port, <<4]
        alu[d, t, +, (STAT_PORT_BASE + 12)]
        scratch[incr, --, t, (STAT_PORT_BASE + 8)]
        alu[$bytes, --, b, len]
        scratch[add, $bytes, d, 0], ctx_swap[s_b]
    .end
    npk_free_buffer(pw)
.end
    br[tx_loop#]

// ---- the poller: elements out of the TBUF, frames done per port --------------------
tx_poll#:
.begin
    .reg read $seq
    .sig seq_done
    .reg cnt v c cn a sq
    immed[a, TX_SEQUENCE_0]
    immed[c, TXDONE_BASE]
tx_poll_loop#:
    npk_sleep(TX_POLL_TICKS)
    alu[--, --, b, @in_flight]
    beq[tx_poll_loop#]
    msf[read, $seq, a, 0, 1], ctx_swap[seq_done]
    alu[sq, --, b, $seq]
    alu[cnt, sq, -, @old_seq]
    alu_shf[cnt, --, b, cnt, <<16]
    alu_shf[cnt, --, b, cnt, >>16]
    alu[@old_seq, --, b, sq]
    alu[@in_flight, @in_flight, -, cnt]
tx_poll_frame#:
    alu[--, @fr_rd, -, @fr_wr]
    beq[tx_poll_loop#]
    alu[v, --, b, @fr_rd]
    alu_shf[v, --, b, v, <<2]
    local_csr_wr[ACTIVE_LM_ADDR_1, v]
    alu_shf[cnt, --, b, sq, <<16]
    nop
    nop
    alu[v, --, b, *l$index1[0]]
    // done when (sequence now - end of the frame) mod 2^16 is not negative: the end's
    // 16 bits alone (with v's elements and port below them, a frame whose last element
    // had just left, sequence = end, looked 1 short and waited for the next element to
    // leave: the last frame of a burst until the next burst, holding its port's window)
    alu_shf[cn, --, b, v, >>16]
    alu_shf[cn, --, b, cn, <<16]
    alu[cn, cnt, -, cn]
    br_bset[cn, 31, tx_poll_loop#]
    alu[@fr_rd, @fr_rd, +, 1]
    alu[@fr_rd, @fr_rd, and, (TBUF_ELEMENTS - 1)]
    alu_shf[cn, --, b, v, >>8]
    alu[cn, cn, and, 0xFF]
    alu[v, v, and, 0xFF]
    alu_shf[v, --, b, v, <<2]
tx_poll_credit#:
    scratch[incr, --, c, v]
    alu[cn, cn, -, 1]
    bne[tx_poll_credit#]
    br[tx_poll_frame#]
.end
