// tx.uc -- the transmit block (microcode/README.md §4.6).
//
// Each context loops, in token order (npk_block.h tokens; tx passes them to the next
// context that is not filling a frame, see tx_loop#):
//   tok_get    take (packet word, output port | frame length << 16) from RING_IN (the
//              queue manager; from the stub qm the length is 0: descriptor LW2);
//   tok_put    allocate the frame's TBUF elements (64 bytes each) in sequence, waiting
//              while TBUF_LIMIT elements are in flight (TX_SEQUENCE_0 counts the
//              elements the MSF has sent);
//   --         copy the frame into its elements in batches of up to six: the
//              batch's 64-byte chunks DRAM -> TBUF (dram[tbuf_wr]) issued together,
//              then msf[write]s of their transmit control words (length, SOP/EOP,
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
// frames of more than 6 elements (384 bytes) that fill at once (see tx_fill_wait#)
#ifndef TX_FILLING
#define TX_FILLING              2
#endif

.reg @tx_next @in_flight @old_seq @alloc_seq @fr_wr @fr_rd @busy @fr_alloc @fr_filled
.reg t0 mybit above inc indf
.reg write $tcw0 $tcw1 $tcw2 $tcw3 $tcw4 $tcw5 $tcw6 $tcw7 $tcw8 $tcw9 $tcw10 $tcw11
.xfer_order $tcw0 $tcw1 $tcw2 $tcw3 $tcw4 $tcw5 $tcw6 $tcw7 $tcw8 $tcw9 $tcw10 $tcw11
#if (NUM_CONTEXTS == 8)
#define TX_POLL_CTX 7
#define TX_CTX_MASK 0xFF
#else
#define TX_POLL_CTX 6
#define TX_CTX_MASK 0x55            // contexts 0, 2, 4, 6
#endif
#ifndef TX_POLL_TICKS
#define TX_POLL_TICKS 32
#endif

// The indirect reference of a 64-byte dram[tbuf_wr] into TBUF element e:
// IND_FULL | e << 11 ([25] + [24:21] quadwords - 1 = 7, [4] + [20:5] MSF address
// 0x2000 + 64 * e); the last chunk of a frame replaces the quadword count.
#define IND_FULL    ((1 << 25) | (7 << 21) | (1 << 18) | (1 << 4))
#define IND_ELEM    (1 << 11)

// One element of a batch: the next 64 bytes (DRAM da -> the TBUF element of ind, signal
// SIG) and their transmit control word ([31:24] payload length, [9] SOP, [8] EOP,
// [7:0] port) into W0 (its second word, reserved, is 0 in every $tcw register).  While
// more than 64 bytes are left in the batch (bl: up to the frame's end or the TBUF's
// wrap) that is 8 instructions with no taken branch; the batch's last element (LAST,
// out of line) sizes the chunk and ends the batch.
#macro tx_dma(SIG, W0, LAST)
    alu[--, bl, -, 64]
    ble[LAST]
    alu[--, --, b, ind]
    dram[tbuf_wr, --, da, 0, max_8], indirect_ref, sig_done[SIG]
    alu[W0, tcw, or, sop]
    alu[bl, bl, -, 64]
    alu[da, da, +, 64]
    alu[ind, ind, +, inc]
#endm

// The batch's last element: bl (1..64) bytes; EOP when the batch ends the frame (eop),
// else the TBUF wraps after it (a whole element) and the frame goes on from element 0
#macro tx_dma_last(SIG, W0)
    alu[t, bl, -, 1]
    alu_shf[t, --, b, t, >>3]
    alu_shf[ind, ind, and~, 7, <<21]
    alu_shf[--, ind, or, t, <<21]
    dram[tbuf_wr, --, da, 0, max_8], indirect_ref, sig_done[SIG]
    alu_shf[t, port, or, bl, <<24]
    alu[t, t, or, eop]
    alu[W0, t, or, sop]
    alu[da, da, +, 64]                       // on after the TBUF's wrap
#endm

    npk_thread_setup()
    // the token rings skip the poller
    alu[t0, nget, and, 7]
    .if (t0 == TX_POLL_CTX)
        alu[nget, nget, and~, 7]
        alu[nput, nput, and~, 7]
    .endif
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t0, 0]
    alu[t0, t0, and, 7]
    // this context's bit, and the bits of the contexts after it (token successor)
    immed[mybit, 1]
tx_bit#:
    .if (t0 != 0)
        alu_shf[mybit, --, b, mybit, <<1]
        alu[t0, t0, -, 1]
        br[tx_bit#]
    .endif
    alu_shf[above, --, b, mybit, <<1]
    alu[above, above, -, 1]
    alu[above, TX_CTX_MASK, and~, above]
    immed[inc, IND_ELEM]
    immed[indf, (IND_FULL & 0xFFFF)]
    immed_w1[indf, (IND_FULL >> 16)]
    // the transmit control words' second longwords (reserved): 0, written once
    immed[$tcw1, 0]
    immed[$tcw3, 0]
    immed[$tcw5, 0]
    immed[$tcw7, 0]
    immed[$tcw9, 0]
    immed[$tcw11, 0]
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
    immed[@busy, (1 << TX_POLL_CTX)]     // the poller never takes frames
    immed[@fr_alloc, 0]
    immed[@fr_filled, 0]
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

// Take the input token and pass it on at once, as npk_get_input does, but to the next
// context that is not filling a frame (@busy: one bit a context, the poller's always
// set) rather than to the next in order: filling a 1,514-byte frame takes a context
// ~1-2 us, and a token that came round to it waited that long while the other
// contexts were idle and the frames behind it waited in the ring (5 ports' frames
// arrive together at the large sizes). tok_put follows the same successor (nput is
// set here and used at this turn's put), so puts stay in the order of the gets.
tx_loop#:
.begin
    .sig s_in
    .reg ts tu
    ctx_arb[tok_get]
    alu[@busy, @busy, or, mybit]            // until the get comes back empty
    scratch[get, $i0, zero, (RING_IN << 2), 2], sig_done[s_in]
    alu[ts, TX_CTX_MASK, and~, @busy]
    find_bset_with_mask[tu, ts, above]       // the first idle context after this one
    bne[tx_pass#]
    find_bset[tu, ts]                        // ... or before it
    bne[tx_pass#]
    alu[tu, nget, and, 7]                    // none idle: the next in order
tx_pass#:
    alu[ts, tu, or, (&tok_get << 3)]
    local_csr_wr[SAME_ME_SIGNAL, ts]
    alu[nput, tu, or, (&tok_put << 3)]
    ctx_arb[s_in]
    alu[pw, --, b, $i0]
    bne[tx_got#]
    alu[@busy, @busy, and~, mybit]
    ctx_arb[tok_put]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    npk_sleep(NPK_IDLE_TICKS)
    br[tx_loop#]
tx_got#:
.end
.begin
    .reg port da len n first elem left bl t ind d tcwa tcw sop eop
    .reg read $l
    // six signal pairs for a batch's DMAs (all the context has besides its tokens and
    // timer); the descriptor read, control-word write and counter wait on dma0
    .sig dma0 dma1 dma2 dma3 dma4 dma5
    // (port, length << 16) from the qm; the stub qm passes no length: descriptor LW2
    alu[t, --, b, $i1]
    alu[port, t, and, 0xFF]
    alu_shf[len, --, b, t, >>16]
    bne[tx_have_len#]
    alu_shf[d, --, b, pw, <<16]
    alu_shf[d, --, b, d, >>(16 - DESC_SHIFT)]
    immed[t, DESC_BASE]
    alu[d, d, +, t]
    sram[read, $l, d, 8, 1], ctx_swap[dma0]
    alu_shf[len, --, b, $l, >>16]
tx_have_len#:
    alu[n, len, +, 63]
    alu_shf[n, --, b, n, >>6]
    // TBUF elements, in order (the poller gives them back); the token taken without a
    // swap when it is here already (npk_emit)
    br_signal[tok_put, tx_have_room#]
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
    alu[t, --, b, n]
    alu[n, --, b, @fr_alloc]                 // the frame's number, in TBUF order
    alu[@fr_alloc, @fr_alloc, +, 1]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    // A frame of more than one batch starts to fill only when fewer than TX_FILLING
    // frames allocated before it are still filling (@fr_filled counts the fills done):
    // the MSF sends the TBUF in order, so the oldest frame's fill is what the SPI waits
    // for, and five 1,514-byte frames filling at once shared the ME and DRAM five ways
    // (the first in the TBUF ~0.2 us later).  Frames of one batch never wait: with
    // them, two at a time cut 64-byte line rate to 70 %.
    alu[--, t, -, 6]
    ble[tx_fill_go#]
tx_fill_wait#:
    alu[t, n, -, @fr_filled]
    alu[--, t, -, TX_FILLING]
    blt[tx_fill_go#]
    ctx_arb[voluntary]
    br[tx_fill_wait#]
tx_fill_go#:
    // copy in batches of up to six elements (a batch ends at the frame's end and at
    // the TBUF's wrap): the batch's dram[tbuf_wr]s are issued together (one signal pair
    // each) and waited for together, then msf[write]s of 8 + 4 longwords to consecutive
    // TBUF_ELEMENT_CONTROL registers validate them all (the second's signal covers the
    // first: the MSF takes commands in order).  The element's chunk, TBUF
    // address and control word advance by one add each (8 instructions an element;
    // computed afresh for each it took ~20 and ~33 cycles: with five ports' 1,514-byte
    // frames to fill at once the ME's issue, not DRAM, limited how soon the MSF had
    // the first frame)
    alu_shf[da, --, b, pw, <<16]
    alu_shf[da, --, b, da, >>(16 - BUF_SHIFT)]
    alu[left, --, b, len]
    alu[elem, --, b, first]
    alu_shf[tcw, port, or, 64, <<24]
    immed[sop, 0x200]
tx_batch#:
    // bl: what the batch may move, up to the frame's end and the TBUF's wrap
    alu[t, TBUF_ELEMENTS, -, elem]
    alu_shf[t, --, b, t, <<6]
    alu[bl, --, b, left]
    .if (bl > t)
        alu[bl, --, b, t]
    .endif
    alu[left, left, -, bl]
    immed[eop, 0]
    .if (left == 0)
        immed[eop, 0x100]
    .endif
    alu_shf[ind, indf, or, elem, <<11]
    immed[tcwa, TBUF_ELEMENT_CONTROL]
    alu_shf[tcwa, tcwa, or, elem, <<3]
    tx_dma(dma0, $tcw0, tx_last0#)
    immed[sop, 0]
    tx_dma(dma1, $tcw2, tx_last1#)
    tx_dma(dma2, $tcw4, tx_last2#)
    tx_dma(dma3, $tcw6, tx_last3#)
    tx_dma(dma4, $tcw8, tx_last4#)
    tx_dma(dma5, $tcw10, tx_last5#)
    // six whole elements and more to come in this stretch
    ctx_arb[dma0, dma1, dma2, dma3, dma4, dma5]
    msf[write, $tcw0, tcwa, 0, 8]
    msf[write, $tcw8, tcwa, 32, 4], ctx_swap[dma0]
    alu[left, left, +, bl]
    alu[elem, elem, +, 6]
    br[tx_batch#]
tx_last0#:
    tx_dma_last(dma0, $tcw0)
    immed[sop, 0]
    ctx_arb[dma0]
    msf[write, $tcw0, tcwa, 0, 2], ctx_swap[dma0]
    alu[elem, elem, +, 1]
    br[tx_batch_end#]
tx_last1#:
    tx_dma_last(dma1, $tcw2)
    ctx_arb[dma0, dma1]
    msf[write, $tcw0, tcwa, 0, 4], ctx_swap[dma0]
    alu[elem, elem, +, 2]
    br[tx_batch_end#]
tx_last2#:
    tx_dma_last(dma2, $tcw4)
    ctx_arb[dma0, dma1, dma2]
    msf[write, $tcw0, tcwa, 0, 6], ctx_swap[dma0]
    alu[elem, elem, +, 3]
    br[tx_batch_end#]
tx_last3#:
    tx_dma_last(dma3, $tcw6)
    ctx_arb[dma0, dma1, dma2, dma3]
    msf[write, $tcw0, tcwa, 0, 8], ctx_swap[dma0]
    alu[elem, elem, +, 4]
    br[tx_batch_end#]
tx_last4#:
    tx_dma_last(dma4, $tcw8)
    ctx_arb[dma0, dma1, dma2, dma3, dma4]
    msf[write, $tcw0, tcwa, 0, 8]
    msf[write, $tcw8, tcwa, 32, 2], ctx_swap[dma0]
    alu[elem, elem, +, 5]
    br[tx_batch_end#]
tx_last5#:
    tx_dma_last(dma5, $tcw10)
    ctx_arb[dma0, dma1, dma2, dma3, dma4, dma5]
    msf[write, $tcw0, tcwa, 0, 8]
    msf[write, $tcw8, tcwa, 32, 4], ctx_swap[dma0]
    alu[elem, elem, +, 6]
tx_batch_end#:
    // the frame's end, or the TBUF's wrap: on from element 0
    alu[elem, elem, and, (TBUF_ELEMENTS - 1)]
    alu[--, left, -, 0]
    bne[tx_batch#]
    alu[@fr_filled, @fr_filled, +, 1]       // this frame is in the TBUF
    // in the TBUF: statistics, buffer back
    .begin
        .reg write $bytes
        alu_shf[t, --, b, port, <<4]
        alu[d, t, +, (STAT_PORT_BASE + 12)]
        scratch[incr, --, t, (STAT_PORT_BASE + 8)]
        alu[$bytes, --, b, len]
        scratch[add, $bytes, d, 0], ctx_swap[dma0]
    .end
    npk_free_buffer(pw)
    alu[@busy, @busy, and~, mybit]
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
