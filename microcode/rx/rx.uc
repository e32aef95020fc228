// rx.uc -- the receive block (microcode/README.md §4.6).
//
// Each context loops, in context order (three token signals):
//   tok_get    put itself on RX_THREAD_FREELIST_0 and sleep until the MSF pushes the
//              receive status word (RSW) of the next RBUF element;
//   tok_state  per input port, in local memory at 16 * port: +0 buffer (bit 31 valid,
//              bits 15..0 handle) of the frame being received, +4 bytes so far,
//              +8 receive timestamp.  A SOP element starts a frame in this context's
//              spare buffer (taken off the free list ahead of time);
//   --         copy the element into the buffer at its offset (dram[rbuf_rd]: offsets
//              are multiples of the element size, so quadword aligned) and give the
//              element back (RBUF_ELEMENT_DONE);
//   tok_put    on EOP: write the descriptor (length, input port, timestamp), put
//              (packet word, length) on RING_OUT, count rx packets and bytes.  A frame
//              that found no buffer is dropped: buffer_exhausted.
// tok_put comes after the copy, so a frame's message leaves only once every element of
// it (copied by earlier contexts) is in DRAM.
// A split output ring (the parallel layout, README §3.4): each frame goes to the ring of
// its flow, a 16-bit hash of the IP protocol, source and destination address that the
// SOP context reads from the RBUF element while the element is copied; it is kept in the
// port's local memory (+12) under tok_put, where the frame's EOP context reads it.
#include "npk_sys.h"
#include "npk_block.h"

#define RX_THREAD_FREELIST_0    0x0030
#define RBUF_ELEMENT_DONE       0x0044

.sig volatile tok_state
.sig rsw_ready
.reg freelist_cmd nstate spare
.reg read $rsw0 $rsw1
.xfer_order $rsw0 $rsw1
#ifdef RING_OUT_SPLIT
.reg hdr_base
.reg read $h0 $h1 $h2
.xfer_order $h0 $h1 $h2
.sig s_hdr
#endif

// copy the element into the buffer: indirect reference [25] + [24:21] quadwords - 1,
// [4] + [20:5] MSF address 0x2000 + element * 64
#macro rx_copy()
    alu_shf[da, --, b, buf, <<16]
    alu_shf[da, --, b, da, >>(16 - BUF_SHIFT)]
    alu[da, da, +, off]
    alu[t, count, -, 1]
    alu_shf[t, 0x10, or, t, >>3]
    alu_shf[ind, 0x10, or, t, <<21]
    alu_shf[t, ind, or, elem, <<11]
    alu_shf[--, t, or, 1, <<18]
    dram[rbuf_rd, --, da, 0, max_8], indirect_ref, sig_done[dma]
#endm

#macro rx_take_spare()
.begin
    .reg read $fb
    .sig s_fb
    .reg t
    immed[t, FREELIST_Q]
    sram[dequeue, $fb, t, 0], ctx_swap[s_fb]
    alu[spare, --, b, $fb]
    beq[rx_spare_none#]
    immed[t, DESC_BASE]
    alu[spare, spare, -, t]
    alu_shf[spare, --, b, spare, >>DESC_SHIFT]
    alu_shf[spare, spare, or, 1, <<31]
rx_spare_none#:
.end
#endm

.begin
    .reg sts t
    npk_thread_setup()
    // freelist entry: [6:0] absolute xfer register, from bit 7 the ME as {cluster, ME in
    // the cluster}, [15:12] signal (examples/passthrough/README.md, "Receive")
    immed[freelist_cmd, RX_THREAD_FREELIST_0]
    immed_w1[freelist_cmd, (&$rsw0 | (&rsw_ready << 12))]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[sts, 0]
#ifdef ME_CLUSTER_1
    alu[t, sts, and, ((ME_PER_CLUSTER << 3) - 1)]  // [2:0] context, ME in the cluster
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<20]
    alu[t, sts, and, 0x80]                          // ACTIVE_CTX_STS[7]: cluster 1
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<(16 + ME_PER_CLUSTER_LOG2)]
#else
    alu[t, sts, and, 0x7f]                          // cluster 0: [6:3] ME, [2:0] context
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<20]
#endif
    alu[t, nget, and, 7]
    alu[nstate, t, or, (&tok_state << 3)]
    rx_take_spare()
#ifdef RING_OUT_SPLIT
    immed[hdr_base, 0x2018]     // RBUF (MSF address 0x2000), frame bytes 24..35
#endif
    br!=ctx[0, rx_loop#]
    // context 0: clear the per-port state, start the three tokens
    immed[t, 0]
rx_clear#:
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    nop
    nop
    nop
    alu[*l$index0[0], --, b, 0]
    alu[*l$index0[1], --, b, 0]
    alu[t, t, +, 16]
    alu[--, t, -, (16 * NPORTS)]
    bne[rx_clear#]
    npk_start_tokens()
    local_csr_wr[SAME_ME_SIGNAL, (&tok_state << 3)]
.end

rx_loop#:
.begin
    .reg elem count flags port t u off buf da ind len ts
#ifdef RING_OUT_SPLIT
    .reg ring
#endif
    .sig dma
    ctx_arb[tok_get]
    msf[fast_wr, --, freelist_cmd, 0]
    local_csr_wr[SAME_ME_SIGNAL, nget]
    ctx_arb[rsw_ready]
    alu[t, --, b, $rsw0]
    alu[port, t, and, 0xff]
    alu_shf[u, --, b, port, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_0, u]
    alu_shf[elem, 0x7f, and, t, >>24]
    // byte count: 0 means 256 (256-byte elements); ((count - 1) & 0xff) + 1, no branch
    alu_shf[count, 0xff, and, t, >>16]
    alu[count, count, -, 1]
    alu[count, count, and, 0xff]
    alu[count, count, +, 1]
    alu_shf[flags, 0x3, and, t, >>14]       // [1] SOP, [0] EOP
    ctx_arb[tok_state]
    br_bclr[flags, 1, rx_not_sop#]
    // SOP: the frame starts in this context's spare buffer
    local_csr_rd[TIMESTAMP_LOW]
    immed[ts, 0]
    alu[buf, --, b, spare]
    alu[*l$index0[0], --, b, spare]
    alu[*l$index0[1], --, b, count]
    alu[*l$index0[2], --, b, ts]
    immed[off, 0]
    alu[len, --, b, count]
    local_csr_wr[SAME_ME_SIGNAL, nstate]
    immed[spare, 0]
#ifdef RING_OUT_SPLIT
    alu_shf[t, hdr_base, or, elem, <<6]      // 64-byte elements
    msf[read, $h0, t, 0, 3], sig_done[s_hdr]
#endif
    br_bclr[buf, 31, rx_sop_no_copy#]
    rx_copy()
#ifdef RING_OUT_SPLIT
    ctx_arb[dma, s_hdr]
rx_sop_hash#:
    // the flow hash in bits 31..16: source and destination address, 16 bits at a time
    alu_shf[t, --, b, $h0, <<16]             // source 31..16 (bytes 26, 27)
    alu[ring, t, xor, $h1]                   // source 15..0 | destination 31..16
    alu_shf[t, --, b, $h2, >>16]             // destination 15..0
    alu[ring, ring, xor, t]
    alu_shf[t, --, b, ring, <<16]
    alu[ring, ring, xor, t]
    npk_ring_hash(ring, ring)
#else
    ctx_arb[dma]
rx_sop_hash#:
#endif
    alu_shf[t, RBUF_ELEMENT_DONE, or, elem, <<16]
    msf[fast_wr, --, t, 0]
    ctx_arb[tok_put]
#ifdef RING_OUT_SPLIT
    alu[*l$index0[3], --, b, ring]           // the frame's ring, for its EOP context
#endif
    br_bset[flags, 0, rx_eop#]
    br[rx_take#], defer[1]                   // the spare went into this frame
    local_csr_wr[SAME_ME_SIGNAL, nput]
rx_sop_no_copy#:
#ifdef RING_OUT_SPLIT
    ctx_arb[s_hdr]
#endif
    br[rx_sop_hash#]

rx_not_sop#:
    alu[buf, --, b, *l$index0[0]]
    alu[off, --, b, *l$index0[1]]
    alu[len, off, +, count]
    alu[*l$index0[1], --, b, len]
    alu[ts, --, b, *l$index0[2]]
    local_csr_wr[SAME_ME_SIGNAL, nstate]
    br_bclr[buf, 31, rx_no_copy#]
    rx_copy()
    ctx_arb[dma]
rx_no_copy#:
    alu_shf[t, RBUF_ELEMENT_DONE, or, elem, <<16]
    msf[fast_wr, --, t, 0]
    ctx_arb[tok_put]
    br_bset[flags, 0, rx_eop#]
    alu[--, --, b, spare]
    bne[rx_loop#], defer[1]
    local_csr_wr[SAME_ME_SIGNAL, nput]
    br[rx_take#]
rx_eop#:
    br_bclr[buf, 31, rx_exhausted#]
    .begin
        .reg write $d0 $d1 $d2 $d3
        .xfer_order $d0 $d1 $d2 $d3
        .reg write $o0 $o1
        .xfer_order $o0 $o1
        .reg write $bytes
        .sig s_d s_o
        .reg a
        // descriptor LW2..LW5: length / offset, input port, flags, timestamp
        alu_shf[$d0, --, b, len, <<16]
        alu_shf[$d1, --, b, port, <<24]
        immed[$d2, 0]
        alu[$d3, --, b, ts]
        alu_shf[a, --, b, buf, <<16]
        alu_shf[a, --, b, a, >>(16 - DESC_SHIFT)]
        immed[t, DESC_BASE]
        alu[a, a, +, t]
        sram[write, $d0, a, 8, 4], sig_done[s_d]
        // packet word: V, input port, handle
        alu_shf[pw, buf, or, port, <<28]
#ifdef RING_OUT_SPLIT
        // split output ring: the ring of the frame's flow, kept by its SOP context (flow
        // order is kept per fast-path ME; README §3.4)
        .reg rr
        alu[rr, --, b, *l$index0[3]]
rx_full#:
        npk_ring_full(rr, rx_wait#)
        alu_shf[rr, --, b, rr, <<2]
#else
rx_full#:
        br_inp_state[RING_OUT_STATUS, rx_wait#]
#endif
        alu[$o0, --, b, pw]
        alu[$o1, --, b, len]
        // the descriptor write and the put go to different units: wait for the
        // descriptor first so that no block reads a stale one
        ctx_arb[s_d]
#ifdef RING_OUT_SPLIT
        scratch[put, $o0, rr, 0, 2], sig_done[s_o]
#else
        scratch[put, $o0, zero, (RING_OUT << 2), 2], sig_done[s_o]
#endif
        local_csr_wr[SAME_ME_SIGNAL, nput]
        alu_shf[a, --, b, port, <<4]
        alu[u, a, +, (STAT_PORT_BASE + 4)]
        alu[$bytes, --, b, len]
        scratch[incr, --, a, STAT_PORT_BASE]
        scratch[add, $bytes, u, 0], sig_done[s_d]
        ctx_arb[s_o, s_d]
        alu[--, --, b, spare]
        bne[rx_loop#]
        br[rx_take#]
rx_wait#:
        ctx_arb[voluntary]
        br[rx_full#]
    .end
rx_exhausted#:
    local_csr_wr[SAME_ME_SIGNAL, nput]
    npk_count((STAT_DROP_BASE + 4 * DROP_BUFFER_EXHAUSTED))
    alu[--, --, b, spare]
    bne[rx_loop#]
rx_take#:
    rx_take_spare()
.end
    br[rx_loop#]
