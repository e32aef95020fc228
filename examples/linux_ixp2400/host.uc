// host.uc -- the host side of Linux's IXP2400 driver (drivers/net/ixp2000/ixpdev.c)
// written as microcode, so that the driver's receive and transmit microengine images
// can forward traffic on the emulator with no XScale: context 0 of one ME gives the
// receive code its buffers and hands every received packet straight to the transmit
// code (port in = port out), as the driver's contract in the images' headers says:
//
//   scratch ring 0  rx_pending  receive descriptors the receive code may fill
//   scratch ring 1  rx_done     filled descriptors (channel and length written)
//   scratch ring 2  tx_pending  transmit descriptors for the transmit code
//   scratch ring 3  tx_done     sent descriptors
//   receive descriptor (SRAM)   +0 buffer (DRAM), +4 buffer length, +8 channel, +12 length
//   transmit descriptor (SRAM)  +0 buffer, +4 length, +8 channel
//
// Receive descriptor i is at RX_DESC + 16 i, its transmit twin TX_OFF bytes above it,
// sharing its buffer.  npkit.emulator.linux_rxtx sets up the rings, the descriptors and
// the traffic (-D RX_DESC, TX_OFF, NDESC).

#ifndef RX_DESC
#define RX_DESC     0x1000
#define TX_OFF      0x1000
#define NDESC       128
#endif

.reg zero h a i t
.reg read $g $r0 $r1 $r2 $r3
.xfer_order $r0 $r1 $r2 $r3
.reg write $p $w0 $w1 $w2
.xfer_order $w0 $w1 $w2
.sig s

    br!=ctx[0, idle#]
    immed[zero, 0]
    immed[i, 0]
fill#:                                      // every receive descriptor onto rx_pending
    alu_shf[h, --, b, i, <<4]
    immed[t, RX_DESC]
    alu[$p, h, +, t]
    scratch[put, $p, zero, 0, 1], ctx_swap[s]
    alu[i, i, +, 1]
    alu[--, i, -, NDESC]
    bne[fill#]
loop#:
    scratch[get, $g, zero, 4, 1], ctx_swap[s]       // rx_done
    alu[h, --, b, $g]
    beq[tx_done#]
    sram[read, $r0, h, 0, 4], ctx_swap[s]
    alu[$w0, --, b, $r0]                            // buffer
    alu[$w1, --, b, $r3]                            // length
    alu[$w2, --, b, $r2]                            // channel: out where it came in
    immed[t, TX_OFF]
    alu[a, h, +, t]
    sram[write, $w0, a, 0, 3], ctx_swap[s]
    alu[$p, --, b, a]
    scratch[put, $p, zero, 8, 1], ctx_swap[s]       // tx_pending
tx_done#:
    scratch[get, $g, zero, 12, 1], ctx_swap[s]      // tx_done: the buffer is free again
    alu[a, --, b, $g]
    beq[loop#]
    immed[t, TX_OFF]
    alu[$p, a, -, t]
    scratch[put, $p, zero, 0, 1], ctx_swap[s]       // back onto rx_pending
    br[loop#]
idle#:
    ctx_arb[kill]
