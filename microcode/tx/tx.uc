// tx.uc -- the transmit block (microcode/README.md §4.6).
//
// Each context loops, in context order (npk_block.h tokens):
//   tok_get    take (packet word, output port) from RING_IN (the queue manager);
//   --         read the frame length from the descriptor (LW2);
//   tok_put    allocate the frame's TBUF elements (64 bytes each) in sequence, waiting
//              while TBUF_LIMIT elements are in flight (TX_SEQUENCE_0 counts the
//              elements the MSF has sent);
//   --         copy each 64-byte chunk from DRAM into its element (dram[tbuf_wr]),
//              write the transmit control words (length, SOP/EOP, port: valid), then
//              count the packet as sent for the queue manager's flow control
//              (TXDONE_BASE + 4 * port), count tx packets / bytes, and give the buffer
//              back to the free list.
// Elements are taken by the MSF in strict sequence, so frames leave in the order the
// queue manager sent them.
#include "npk_sys.h"
#include "npk_block.h"

#define TX_SEQUENCE_0           0x0060
#define TBUF_ELEMENT_CONTROL    0x1800
#define TBUF_ELEMENTS           128
#define TBUF_LIMIT              96

.reg @tx_next @in_flight @old_seq

    npk_thread_setup()
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
    npk_start_tokens()
.end

tx_loop#:
    npk_get_input(tx_loop#)
.begin
    .reg port buf da len n first k elem bytes left t ind d
    .reg read $l
    .sig s_l dma s_tcw
    .reg write $tcw0 $tcw1
    .xfer_order $tcw0 $tcw1
    alu[port, --, b, $i1]
    alu_shf[d, --, b, pw, <<16]
    alu_shf[d, --, b, d, >>(16 - DESC_SHIFT)]
    immed[t, DESC_BASE]
    alu[d, d, +, t]
    sram[read, $l, d, 8, 1], ctx_swap[s_l]
    alu_shf[len, --, b, $l, >>16]
    alu[n, len, +, 63]
    alu_shf[n, --, b, n, >>6]
    // TBUF elements, in order
    ctx_arb[tok_put]
    .begin
        .reg read $seq
        .sig seq_done
        br[tx_have_room#]
tx_wait_room#:
        msf[read, $seq, zero, TX_SEQUENCE_0, 1], ctx_swap[seq_done]
        alu[t, $seq, -, @old_seq]
        alu_shf[t, --, b, t, <<16]
        alu_shf[t, --, b, t, >>16]
        alu[@in_flight, @in_flight, -, t]
        alu[@old_seq, --, b, $seq]
tx_have_room#:
        alu[t, @in_flight, +, n]
        alu[--, TBUF_LIMIT, -, t]
        blo[tx_wait_room#]
    .end
    alu[@in_flight, @in_flight, +, n]
    alu[first, --, b, @tx_next]
    alu[@tx_next, @tx_next, +, n]
    alu[@tx_next, @tx_next, and, (TBUF_ELEMENTS - 1)]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    // copy and validate element by element
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    immed[k, 0]
    alu[left, --, b, len]
tx_elem#:
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
    dram[tbuf_wr, --, da, 0, max_8], indirect_ref, sig_done[dma]
    ctx_arb[dma]
    // transmit control word: [31:24] payload length, [9] SOP, [8] EOP, [7:0] port
    alu_shf[t, port, or, bytes, <<24]
    .if (k == 0)
        alu_shf[t, t, or, 1, <<9]
    .endif
    alu[left, left, -, bytes]
    .if (left == 0)
        alu_shf[t, t, or, 1, <<8]
    .endif
    alu[$tcw0, --, b, t]
    immed[$tcw1, 0]
    immed[t, TBUF_ELEMENT_CONTROL]
    alu_shf[t, t, or, elem, <<3]
    msf[write, $tcw0, t, 0, 2], ctx_swap[s_tcw]
    alu[k, k, +, 1]
    alu[--, left, -, 0]
    bne[tx_elem#]
    // sent (handed to the TBUF): flow control, statistics, buffer back
    .begin
        .reg write $bytes
        .sig s_b
        alu_shf[t, --, b, port, <<2]
        immed[d, TXDONE_BASE]
        scratch[incr, --, d, t]
        alu_shf[t, --, b, port, <<4]
        alu[d, t, +, (STAT_PORT_BASE + 12)]
        scratch[incr, --, t, (STAT_PORT_BASE + 8)]
        alu[$bytes, --, b, len]
        scratch[add, $bytes, d, 0], ctx_swap[s_b]
    .end
    npk_free_buffer(pw)
.end
    br[tx_loop#]
