// A minimal transmit program for the Linux IXP2400 driver's contract (npkit's own code,
// for tests of npkit.emulator.linux_rxtx; the real one is Linux's ixp2400_tx.uc):
// context 0, frames of one TBUF element.  Per packet: a descriptor off scratch ring 2
// (+0 buffer, +4 length, +8 channel), the buffer moved into the next TBUF element,
// its control word written, the descriptor put on ring 3.
#define TBUF_ELEMENT_CONTROL    0x1800

.sig s
.sig dma
.reg zero h len chan elem t ind
.reg read $g
.reg read $d0 $d1 $d2
.xfer_order $d0 $d1 $d2
.reg write $c0 $c1
.xfer_order $c0 $c1
.reg write $p

    br!=ctx[0, idle#]
    immed[zero, 0]
    immed[elem, 0]
loop#:
    scratch[get, $g, zero, 8, 1], ctx_swap[s]
    alu[h, --, b, $g]
    beq[loop#]
    sram[read, $d0, h, 0, 3], ctx_swap[s]
    alu[len, --, b, $d1]
    alu[chan, --, b, $d2]
    alu[t, len, -, 1]
    alu_shf[t, 0x10, or, t, >>3]
    alu_shf[ind, 0x10, or, t, <<21]
    alu_shf[t, ind, or, elem, <<11]
    alu_shf[--, t, or, 1, <<18]
    dram[tbuf_wr, --, $d0, 0, max_8], indirect_ref, sig_done[dma]
    ctx_arb[dma]
    alu_shf[t, chan, or, 3, <<8]
    alu_shf[$c0, t, or, len, <<24]
    immed[$c1, 0]
    immed[t, TBUF_ELEMENT_CONTROL]
    alu_shf[t, t, or, elem, <<3]
    msf[write, $c0, t, 0, 2], ctx_swap[s]
    alu[elem, elem, +, 1]
    alu[elem, elem, and, 127]
    alu[$p, --, b, h]
    scratch[put, $p, zero, 12, 1], ctx_swap[s]
    br[loop#]
idle#:
    ctx_arb[kill]
