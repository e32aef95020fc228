// tcam.h -- the QDR-attached ternary CAM (network search engine), as microcode sees it
// (docs/tcam.md).
//
// The TCAM sits on one SRAM channel beside that channel's SRAM and answers a 2 MB address
// window of it; the chip config chooses it (`tcam:` in the chip config:
// examples/chips/ixp2850_spp.yaml).  `npk link` defines TCAM_BASE (channel << 30 | window),
// TCAM_ENTRIES, TCAM_KEY_BITS and TCAM_KEY_LW from the chip config it links for; the
// defaults below are those of examples/chips/ixp2850_spp.yaml.
//
// Window layout (byte offsets from TCAM_BASE):
//   TCAM_ENTRY_OFF  + i * 128    entry i: key (9 LW) | mask (9 LW, 1 = compare) |
//                                result (2 LW) | control (LW; bit 31 valid) | unused
//   TCAM_KEY_OFF    + s * 64     key slot s: the key to look up (TCAM_KEY_LW LW, MSB first)
//   TCAM_RESULT_OFF + s * 16     result slot s: a read of it is the lookup (below)
//   TCAM_CSR_OFF    + ...        counters (read only): lookups, hits, multi-hits
// A slot s is by convention the issuing thread's: flat ME index * 8 + context
// (tcam_slot below); slots 128..255 are free for the XScale.
//
// The lookup: `sram[read, $r0, TCAM_BASE + TCAM_RESULT_OFF, s * 16, 4]` compares key slot
// s with every valid entry and returns
//   $r0  TCAM_HIT (bit 31) if any entry matched | match count saturated at 255 (bits 7:0)
//   $r1  index of the best match: the lowest matching index (position is priority)
//   $r2  result bits 63:32 of that entry,  $r3  result bits 31:0  (0s on a miss)
// It completes the SRAM read latency + the TCAM's lookup_latency after its service, and
// keeps the channel busy cycles_per_lookup cycles.  The channel serves commands in FIFO
// order, so a read issued after the thread's key write sees that key.
#ifndef TCAM_H
#define TCAM_H

#ifndef TCAM_BASE
#define TCAM_BASE       0x80600000      // SRAM channel 2, window 0x00600000
#endif
#ifndef TCAM_ENTRIES
#define TCAM_ENTRIES    8192
#endif
#ifndef TCAM_KEY_BITS
#define TCAM_KEY_BITS   144
#endif
#ifndef TCAM_KEY_LW
#define TCAM_KEY_LW     5               // (TCAM_KEY_BITS + 31) / 32
#endif

#define TCAM_WINDOW_BYTES   0x200000
#define TCAM_ENTRY_OFF      0x000000
#define TCAM_KEY_OFF        0x100000
#define TCAM_RESULT_OFF     0x110000
#define TCAM_CSR_OFF        0x120000

#define TCAM_ENTRY_BYTES    128
#define TCAM_ENTRY_SHIFT    7
#define TCAM_E_KEY          0           // 9 LW
#define TCAM_E_MASK         36          // 9 LW
#define TCAM_E_RESULT       72          // 2 LW: bits 63:32, then 31:0
#define TCAM_E_CONTROL      80          // bit 31 valid
#define TCAM_VALID          0x80000000

#define TCAM_KEY_SLOT_SHIFT     6       // 64 B a key slot
#define TCAM_RESULT_SLOT_SHIFT  4       // 16 B a result slot
#define TCAM_SLOTS              256

#define TCAM_HIT            0x80000000  // $r0 bit 31
#define TCAM_HIT_BIT        31
#define TCAM_COUNT_MASK     0xFF        // $r0 bits 7:0, saturated at 255

// counters (TCAM_CSR_OFF + ...): 32-bit, wrapping; the host API has them in 64 bits
#define TCAM_CSR_LOOKUPS    0
#define TCAM_CSR_HITS       4
#define TCAM_CSR_MULTI      8           // lookups that matched more than one entry
#define TCAM_CSR_ENTRIES    12          // the chip config's entries
#define TCAM_CSR_KEY_BITS   16          // ... and key_bits

#ifndef ME_PER_CLUSTER
#define ME_PER_CLUSTER 8
#define ME_PER_CLUSTER_LOG2 3
#endif

// SLOT = this thread's slot: flat ME index * 8 + context (ACTIVE_CTX_STS: context in
// bits 2:0, ME number cluster << 4 | ME in bits 7:3)
#macro tcam_slot(SLOT)
.begin
    .reg tcs_t tcs_c
    local_csr_rd[ACTIVE_CTX_STS]
    immed[tcs_t, 0]
    alu[SLOT, tcs_t, and, 7]
    alu_shf[tcs_c, ME_PER_CLUSTER, and, tcs_t, >>(7 - ME_PER_CLUSTER_LOG2)]  // cluster * ME_PER_CLUSTER
    alu_shf[tcs_t, (ME_PER_CLUSTER - 1), and, tcs_t, >>3]                    // ME in the cluster
    alu[tcs_t, tcs_t, or, tcs_c]
    alu_shf[SLOT, SLOT, or, tcs_t, <<3]
.end
#endm

// Look up the key in write transfer registers KEY0.. (N longwords, N <= 8, MSB first:
// normally TCAM_KEY_LW) in slot SLOT (a register); the answer lands in read transfer
// registers RES0..RES0+3 (.xfer_order them).  The thread sleeps until it is there.
#macro tcam_lookup(RES0, KEY0, N, SLOT)
.begin
    .reg tcl_kb tcl_rb tcl_k tcl_r
    .sig tcl_sw tcl_sr
    immed[tcl_kb, (TCAM_BASE + TCAM_KEY_OFF)]
    immed[tcl_rb, (TCAM_BASE + TCAM_RESULT_OFF)]
    alu_shf[tcl_k, --, b, SLOT, <<TCAM_KEY_SLOT_SHIFT]
    alu_shf[tcl_r, --, b, SLOT, <<TCAM_RESULT_SLOT_SHIFT]
    sram[write, KEY0, tcl_kb, tcl_k, N], sig_done[tcl_sw]
    sram[read, RES0, tcl_rb, tcl_r, 4], sig_done[tcl_sr]
    ctx_arb[tcl_sw, tcl_sr]
.end
#endm

// A 288-bit key (9 longwords): KEY0.. holds the first 8, KEY8 the ninth (an SRAM
// command moves at most 8 longwords).
#macro tcam_lookup9(RES0, KEY0, KEY8, SLOT)
.begin
    .reg tcl_kb tcl_rb tcl_k tcl_r
    .sig tcl_sw tcl_sw8 tcl_sr
    immed[tcl_kb, (TCAM_BASE + TCAM_KEY_OFF)]
    immed[tcl_rb, (TCAM_BASE + TCAM_RESULT_OFF)]
    alu_shf[tcl_k, --, b, SLOT, <<TCAM_KEY_SLOT_SHIFT]
    alu_shf[tcl_r, --, b, SLOT, <<TCAM_RESULT_SLOT_SHIFT]
    sram[write, KEY0, tcl_kb, tcl_k, 8], sig_done[tcl_sw]
    alu[tcl_k, tcl_k, +, 32]
    sram[write, KEY8, tcl_kb, tcl_k, 1], sig_done[tcl_sw8]
    sram[read, RES0, tcl_rb, tcl_r, 4], sig_done[tcl_sr]
    ctx_arb[tcl_sw, tcl_sw8, tcl_sr]
.end
#endm

// ADDR = the SRAM address of entry INDEX (a register) of the TCAM; add TCAM_E_* for a
// field.  Writing an entry from microcode: key and mask first, control (TCAM_VALID) last.
#macro tcam_entry_addr(ADDR, INDEX)
.begin
    .reg tce_b
    immed[tce_b, (TCAM_BASE + TCAM_ENTRY_OFF)]
    alu_shf[ADDR, --, b, INDEX, <<TCAM_ENTRY_SHIFT]
    alu[ADDR, ADDR, +, tce_b]
.end
#endm

#endif // TCAM_H
