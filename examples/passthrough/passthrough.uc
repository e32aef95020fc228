// passthrough.uc: receive -> transmit, input port p to output port p, one
// mpacket at a time, on the eight contexts of one ME.
//
// Each context loops:
//   1. in turn (signal token rx_turn passed context to context), put itself on
//      RX_THREAD_FREELIST_0 and sleep until the MSF pushes a receive status
//      word (RSW) into $rsw0/$rsw1 and signals rsw_ready;
//   2. copy the RBUF element into its own DRAM buffer (dram[rbuf_rd] with an
//      indirect reference) and give the element back (RBUF_ELEMENT_DONE);
//   3. in turn (token tx_turn), take the next TBUF element, waiting while
//      TBUF_LIMIT elements are in flight (TX_SEQUENCE_0 counts the ones the
//      MSF has sent);
//   4. copy the data from DRAM into the TBUF element (dram[tbuf_wr]) and write
//      its transmit control word (payload length, SOP/EOP from the RSW, port),
//      which marks it valid.
// Freelist order = context order = TBUF allocation order, so mpackets leave
// in the order they arrived and every frame keeps its bytes.
// Build with -D SLOW=N for a deliberately slow variant (overload tests).
// Assumes 64-byte RBUF and TBUF elements and one partition (the default
// `msf:` config).  See README.md for the register formats.  Runs on any ME; build
// with -D ME_PER_CLUSTER=4 -D ME_PER_CLUSTER_LOG2=2 for the IXP2400 (the freelist
// entry's ME field is {cluster, ME in the cluster}, one bit narrower there).

#ifndef ME_PER_CLUSTER
#define ME_PER_CLUSTER          8           // IXP2800: MEs 0x00-0x07, 0x10-0x17
#define ME_PER_CLUSTER_LOG2     3
#endif

#define RX_THREAD_FREELIST_0    0x0030
#define RBUF_ELEMENT_DONE       0x0044
#define TX_SEQUENCE_0           0x0060
#define TBUF_ELEMENT_CONTROL    0x1800
#define TBUF_ELEMENTS           128
#define TBUF_LIMIT              96          // TBUF elements in flight at most
#define DRAM_BUFS               0x100000    // 256 bytes of DRAM per context

.sig volatile rx_turn
.sig volatile tx_turn
.sig rsw_ready
.reg freelist_cmd dbuf zero
.reg read $rsw0 $rsw1
.xfer_order $rsw0 $rsw1
.reg @tx_next @in_flight @old_seq

.begin
    .reg sts t
    // freelist entry: [6:0] absolute xfer register (ctx << 4 | &$rsw0), from bit 7
    // the ME as {cluster, ME in the cluster}, [15:12] signal; carried in the upper
    // half of the fast_wr address.  ACTIVE_CTX_STS: [7] cluster, [6:3] ME, [2:0] context
    immed[freelist_cmd, RX_THREAD_FREELIST_0]
    immed_w1[freelist_cmd, (&$rsw0 | (&rsw_ready << 12))]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[sts, 0]
    alu[t, sts, and, ((ME_PER_CLUSTER << 3) - 1)]  // context and ME in the cluster
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<20]
    alu[t, sts, and, 0x80]                          // the cluster, next to the ME
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<(16 + ME_PER_CLUSTER_LOG2)]
    alu[t, sts, and, 7]
    alu_shf[dbuf, --, b, t, <<8]
    immed[t, 0]
    immed_w1[t, (DRAM_BUFS >> 16)]
    alu[dbuf, dbuf, +, t]
    immed[zero, 0]
.end

.begin
    br!=ctx[0, rx_loop#]
    // context 0: wait until the TBUF is idle, take the sequence, start the tokens
    .reg read $seq
    .sig seq_done
tx_idle#:
    msf[read, $seq, zero, TX_SEQUENCE_0, 1], ctx_swap[seq_done]
    alu_shf[--, --, b, $seq, >>31]
    beq[tx_idle#]
    alu[@old_seq, --, b, $seq]
    alu[@tx_next, @old_seq, and, (TBUF_ELEMENTS - 1)]
    immed[@in_flight, 0]
    local_csr_wr[SAME_ME_SIGNAL, (&rx_turn << 3)]
    local_csr_wr[SAME_ME_SIGNAL, (&tx_turn << 3)]
.end

rx_loop#:
    ctx_arb[rx_turn]
    local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&rx_turn << 3))]
    msf[fast_wr, --, freelist_cmd, 0]
    ctx_arb[rsw_ready]
#ifdef SLOW
    // test build (-D SLOW=N): hold the element and the ME for about 4N cycles
.begin
    .reg n
    immed[n, SLOW]
slow#:
    alu[n, n, -, 1]
    bne[slow#]
.end
#endif

.begin
    .reg elem count sop_eop port ind t tx_elem
    .sig dma
    alu_shf[elem, 0x7f, and, $rsw0, >>24]   // RBUF offset >> 6
    alu_shf[count, 0xff, and, $rsw0, >>16]  // bytes in the element
    alu_shf[sop_eop, 0x3, and, $rsw0, >>14] // [1] SOP, [0] EOP
    alu[port, $rsw0, and, 0xff]

    // indirect reference: [25] + [24:21] quadwords - 1, [4] + [20:5] MSF address
    alu[t, count, -, 1]
    alu_shf[t, 0x10, or, t, >>3]
    alu_shf[ind, 0x10, or, t, <<21]
    alu_shf[t, ind, or, elem, <<11]         // 0x2000 + elem * 64, at bit 5
    alu_shf[--, t, or, 1, <<18]
    dram[rbuf_rd, --, dbuf, 0, max_8], indirect_ref, sig_done[dma]
    ctx_arb[dma]
    alu_shf[t, RBUF_ELEMENT_DONE, or, elem, <<16]
    msf[fast_wr, --, t, 0]

    // take the next TBUF element, in context order
    ctx_arb[tx_turn]
    .begin
        .reg read $seq
        .sig seq_done
        br[have_room#]
    wait_room#:
        msf[read, $seq, zero, TX_SEQUENCE_0, 1], ctx_swap[seq_done]
        alu[t, $seq, -, @old_seq]
        alu[t, t, and, 0xff]
        alu[@in_flight, @in_flight, -, t]
        alu[@old_seq, --, b, $seq]
    have_room#:
        alu[--, TBUF_LIMIT, -, @in_flight]
        blo[wait_room#]
        beq[wait_room#]
    .end
    alu[@in_flight, @in_flight, +, 1]
    alu[tx_elem, --, b, @tx_next]
    alu[@tx_next, @tx_next, +, 1]
    alu[@tx_next, @tx_next, and, (TBUF_ELEMENTS - 1)]
    local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&tx_turn << 3))]

    alu_shf[t, ind, or, tx_elem, <<11]
    alu_shf[--, t, or, 1, <<18]
    dram[tbuf_wr, --, dbuf, 0, max_8], indirect_ref, sig_done[dma]
    ctx_arb[dma]

    // transmit control word: [31:24] payload length, [9] SOP, [8] EOP, [7:0] port
    .begin
        .reg write $tcw0 $tcw1
        .xfer_order $tcw0 $tcw1
        .sig tcw_done
        alu_shf[t, port, or, sop_eop, <<8]
        alu_shf[$tcw0, t, or, count, <<24]
        immed[$tcw1, 0]
        immed[t, TBUF_ELEMENT_CONTROL]
        alu_shf[t, t, or, tx_elem, <<3]
        msf[write, $tcw0, t, 0, 2], ctx_swap[tcw_done]
    .end
.end
    br[rx_loop#]
