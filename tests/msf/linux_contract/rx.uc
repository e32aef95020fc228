// A minimal receive program for the Linux IXP2400 driver's contract (npkit's own code,
// for tests of npkit.emulator.linux_rxtx; the real one is Linux's ixp2400_rx.uc):
// context 0, frames of one RBUF element.  Per element: a buffer handle off scratch
// ring 0, the element copied to the handle's DRAM buffer, the channel and length
// written at handle + 8, the handle put on ring 1.
#define RX_THREAD_FREELIST_0    0x0030
#define RBUF_ELEMENT_DONE       0x0044
#ifndef ME_PER_CLUSTER
#define ME_PER_CLUSTER          8
#define ME_PER_CLUSTER_LOG2     3
#endif

.sig rsw_ready s
.sig dma
.reg zero entry sts t h elem len ind
.reg read $rsw0 $rsw1
.xfer_order $rsw0 $rsw1
.reg read $g
.reg write $w0 $w1
.xfer_order $w0 $w1
.reg write $p

    br!=ctx[0, idle#]
    immed[zero, 0]
    immed[entry, RX_THREAD_FREELIST_0]
    immed_w1[entry, (&$rsw0 | (&rsw_ready << 12))]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[sts, 0]
    alu[t, sts, and, ((ME_PER_CLUSTER << 3) - 1)]
    alu_shf[entry, entry, or, t, <<20]
    alu[t, sts, and, 0x80]
    alu_shf[entry, entry, or, t, <<(16 + ME_PER_CLUSTER_LOG2)]
loop#:
    msf[fast_wr, --, entry, 0]
    ctx_arb[rsw_ready]
get#:
    scratch[get, $g, zero, 0, 1], ctx_swap[s]
    alu[h, --, b, $g]
    beq[get#]
    alu_shf[elem, 0x7f, and, $rsw0, >>24]
    alu_shf[len, 0xff, and, $rsw0, >>16]
    alu[t, len, -, 1]
    alu_shf[t, 0x10, or, t, >>3]
    alu_shf[ind, 0x10, or, t, <<21]
    alu_shf[t, ind, or, elem, <<11]
    .begin
        .reg read $b
        sram[read, $b, h, 0, 1], ctx_swap[s]
        alu_shf[--, t, or, 1, <<18]          // indirect_ref: the previous ALU result
        dram[rbuf_rd, --, $b, 0, max_8], indirect_ref, sig_done[dma]
    .end
    ctx_arb[dma]
    alu_shf[t, RBUF_ELEMENT_DONE, or, elem, <<16]
    msf[fast_wr, --, t, 0]
    alu[$w0, $rsw0, and, 0x1f]
    alu[$w1, --, b, len]
    sram[write, $w0, h, 8, 2], ctx_swap[s]
    alu[$p, --, b, h]
    scratch[put, $p, zero, 4, 1], ctx_swap[s]
    br[loop#]
idle#:
    ctx_arb[kill]
