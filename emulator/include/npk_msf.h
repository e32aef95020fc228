/*
 * npk_msf.h -- the built-in MSF device of the npkit emulator core (C API).
 *
 * The chip side (npk_emu.h) calls an MSF plug-in (npk_msf_ops); this device is
 * the one built in: receive and transmit ports, RBUF and TBUF, in C.
 *
 * The block between CDEF-BEGIN and CDEF-END is read verbatim by the Python
 * binding after npk_emu.h's block (cffi ABI mode).
 */
#ifndef NPK_MSF_H
#define NPK_MSF_H
#include "npk_emu.h"
#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
/* npk_msf_create builds the modelled media switch fabric and attaches it to the
 * chip through npk_set_msf (npk_msf_destroy detaches it).  It follows the
 * IXP2800 HRM chapter 8 (SPI-4, one RBUF and one TBUF partition) closely
 * enough that receive/transmit microcode written for the part runs unmodified.
 * Full reference for microcode writers: examples/passthrough/README.md.
 *
 * MSF addresses (msf[read|write|fast_wr]; HRM addresses where known):
 *   0x0030 + 4n RX_THREAD_FREELIST_n   write / fast_wr: add a thread (n = 0..2, one list)
 *   0x0044      RBUF_ELEMENT_DONE      write / fast_wr: data = element number (RSW[30:24])
 *   0x0060 + 4n TX_SEQUENCE_n          read: [31] TBUF idle (nothing valid or moving),
 *                                      [15:0] elements transmitted (mod 2^16)
 *   0x0380 + 4g TX_MULTIPLE_PORT_STATUS_g  read: 2 bits per port, ports 16g..16g+15 (npkit address)
 *   0x0400 + 4p TX_PORT_STATUS_p       read: [1:0] PHY FIFO status of port p: 0 starving
 *                                      (<= 1/4 full), 1 hungry (<= 3/4), 2 satisfied;
 *                                      [31:16] free bytes (npkit extension; npkit address)
 *   0x1800 + 8e TBUF_ELEMENT_CONTROL_e write 2 words: transmit control word; sets valid
 *   0x2000 + o  RBUF byte o (read) / TBUF byte o (write)
 * msf[fast_wr, --, a, b]: CSR address = (a + b)[15:0], data = (a + b)[31:16].
 * Freelist entry (16-bit data): [6:0] absolute S_TRANSFER_IN register (the pair
 *   n, n+1 receives the status), from bit 7 the ME as {cluster, ME in cluster}
 *   ([10:7] on the IXP2800: cluster in bit 10; [9:7] on the IXP2400: cluster in
 *   bit 9, as Linux's ixp2400_rx.uc builds it), [15:12] signal; the context is
 *   [6:4] (8-ctx mode).  Built as: xfer | ctx << 4 | flat index << 7 | sig << 12.
 * Receive status word (pushed to xfer n, n+1, then the signal):
 *   rsw0 [31] 0 (SPI-4) [30:24] element (RBUF offset >> 6) [23:16] byte count
 *   (0 = 256) [15] SOP [14] EOP [13] Err [12] LenErr [11] ParErr [10] AbortErr
 *   [9] Null [8] Type [7:0] port;  rsw1 [15:0] 16-bit one's complement sum of
 *   the element's byte pairs (big-endian; an odd last byte counts as 0x00XX).
 * Transmit control word: w0 [31:24] payload length (0 = 256) [23:21] prepend
 *   offset [20:16] prepend length [15:13] payload offset [11] skip [10] abort
 *   [9] SOP [8] EOP [7:0] port; w1 reserved.  Payload starts at byte
 *   ((prepend offset + prepend length + 7) & ~7) + payload offset of the element.
 * dram[rbuf_rd|tbuf_wr, ...], indirect_ref: see issue_mem in me.c: ALU_OUT
 *   [4] + [20:5] = 0x2000 + buffer offset, [25] + [24:21] = quadwords - 1.
 *
 * Timing: times are picoseconds internally; a chip cycle is 10^6/clock_mhz ps.
 * A packet offered at t (ns, first wire byte) starts its data at
 * t + preamble; all its elements are allocated then (none free enough: the
 * packet is dropped whole, reason no_rx_thread if elements are waiting in the
 * full element list for want of a thread, else rbuf_full; oversize_frame if the
 * whole RBUF could never hold it); element k becomes
 * valid when its last byte has arrived (the last one after the FCS), joins the
 * full element list and is pushed to the thread at the head of the freelist.
 * Transmit: TBUF elements are taken in strict sequence once valid, moved over
 * the SPI-4 bus (spi_bps) into the port's PHY FIFO (tx_fifo_bytes; the head
 * element waits while its port's FIFO lacks room), freed (TX_SEQUENCE + 1);
 * a frame goes on the wire when its EOP is in the FIFO (store and forward) or,
 * with tx_start_bytes, once that many of its bytes are (cut through), and the
 * wire is free; departure time = first wire byte; the wire is then busy for
 * preamble + frame + FCS + IFG bytes.  A frame is aborted (tbuf_underrun,
 * reported as an aborted frame) when, cut through, an element arrives after
 * the wire needed its first byte, when a SOP element arrives for a port whose
 * frame lacks its EOP, or when its EOP element has the Abort bit. */
typedef struct npk_msf npk_msf;

typedef struct npk_msf_cfg {
    uint32_t ports;            /* 1..16 receive and transmit ports */
    uint64_t rate_bps;         /* line rate of every port */
    uint32_t rbuf_elem_bytes;  /* 64, 128 or 256 */
    uint32_t rbuf_elems;       /* elem_bytes * elems <= 8192 */
    uint32_t tbuf_elem_bytes;
    uint32_t tbuf_elems;
    uint32_t preamble_bytes;   /* wire model of every port until npk_msf_port_wire */
    uint32_t fcs_bytes;
    uint32_t ifg_bytes;
    uint32_t tx_fifo_bytes;    /* PHY transmit FIFO per port */
    uint64_t spi_bps;          /* SPI-4 bus rate, TBUF -> PHY */
    uint32_t freelist_depth;   /* entries in RX_THREAD_FREELIST */
    uint32_t tx_start_bytes;   /* PHY starts a frame once this many bytes are in its FIFO
                                  (0: only when the EOP is there, store and forward) */
} npk_msf_cfg;

/* Drop reasons (codes of microcode/reasons.yaml).  OVERSIZE_FRAME: a frame that needs more
   elements than the RBUF has.  The IXP2800 hands elements to threads as they fill and never
   holds a whole frame, so such a frame reaches the microcode, which drops every frame over
   1514 bytes as oversize_frame; this model allocates a frame's elements at its SOP, so it
   drops the frame there, under the same reason (it is the frame, not a full RBUF). */
enum { NPK_MSF_DROP_OVERSIZE_FRAME = 2, NPK_MSF_DROP_RBUF_FULL = 32, NPK_MSF_DROP_NO_RX_THREAD = 33,
       NPK_MSF_DROP_TBUF_UNDERRUN = 37 };

typedef struct npk_msf_port_stats {
    uint64_t rx_offered;       /* packets whose first data byte arrived */
    uint64_t rx_received;      /* accepted into RBUF */
    uint64_t rx_bytes;
    uint64_t rx_mpackets;      /* RBUF elements filled */
    uint64_t rx_drop_rbuf_full;
    uint64_t rx_drop_no_rx_thread;
    uint64_t tx_elements;      /* TBUF elements moved to this port */
    uint64_t tx_frames;        /* frames put on the wire (departed or scheduled) */
    uint64_t tx_bytes;
    uint64_t tx_drop_underrun; /* frames aborted */
    uint64_t tx_orphans;       /* non-SOP elements without a frame (discarded) */
    uint64_t rx_pending;       /* packets handed in, not yet arrived */
    uint64_t rx_drop_oversize; /* frames needing more elements than the RBUF has */
} npk_msf_port_stats;

typedef struct npk_msf_stats {
    uint64_t rsw_pushed;
    uint64_t freelist_overflow;  /* freelist writes lost: list full */
    uint64_t bad_element_done;   /* RBUF_ELEMENT_DONE of an element not held */
    uint64_t bad_tcw;            /* control words for an element out of range, naming bytes past
                                    their element, or growing a frame past 16 KB */
    uint32_t rbuf_free, rbuf_full_list, rbuf_held, freelist_len;
    uint32_t tbuf_valid;
    uint64_t tx_sequence;
} npk_msf_stats;

npk_msf *npk_msf_create(npk_chip *chip, const npk_msf_cfg *cfg);  /* NULL on a bad config;
                                        npk_reset leaves the device alone: make a new one */
void npk_msf_destroy(npk_msf *msf);    /* detaches it (if still attached) and frees it */
void npk_msf_release(npk_msf *msf);    /* frees it without touching its chip (already destroyed) */
int npk_msf_port_wire(npk_msf *msf, int port, uint32_t preamble, uint32_t fcs, uint32_t ifg);
/* hand in n packets, each: first-wire-byte time (ns, per port nondecreasing), port,
 * id, length (1..16384); data = the n frames back to back (no FCS) */
int npk_msf_rx_add(npk_msf *msf, size_t n, const uint64_t *time_ns, const uint8_t *port,
                   const uint32_t *id, const uint16_t *len, const uint8_t *data);
/* transmitted frames whose departure is <= the chip's current time: first call
 * with NULL buffers to learn how many (and bytes); then with buffers to take them */
size_t npk_msf_tx_ready(npk_msf *msf, size_t *nbytes);
size_t npk_msf_tx_drain(npk_msf *msf, uint8_t *port, uint64_t *time_ns, uint16_t *len,
                        uint8_t *aborted, uint8_t *data, size_t cap_frames, size_t cap_bytes);
/* drop records (packet id, port, reason code), oldest first; taken once */
size_t npk_msf_drops(npk_msf *msf, uint32_t *id, uint8_t *port, uint8_t *reason, size_t cap);
int npk_msf_port_stats_get(npk_msf *msf, int port, npk_msf_port_stats *out);
int npk_msf_stats_get(npk_msf *msf, npk_msf_stats *out);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif /* NPK_MSF_H */
