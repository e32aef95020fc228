// classify.h -- the flow table of `-D classify=flows` (docs/flows.md): an exact match on
// the 5-tuple, in the lookup step (between parse and the route lookup, in the same
// thread: no ring hop, and a flow that has a route of its own skips the trie walk).
// Shared by classify/lookup_flows.uc (pipelined) and classify/fastpath_flows.uc (parallel).
//
// The table (npkit.emulator.traffic.flows, declared in classify/flows.yaml, compiled by
// `npk link` into flows_table.h and SRAM, changed at run time by the control daemon):
//   keys  FLOW_KEY_BASE + 32 * bucket: 2 ways x {src, dst, sport << 16 | dport,
//         proto << 24 | action << 16 | arg}; bucket = hash_128(key) & (FLOW_BUCKETS - 1)
//   aux   FLOW_AUX_BASE + 32 * entry (entry = 2 * bucket + way): packets, bytes, 0, 0,
//         and the route action's own next-hop entry, next-hop index FLOW_NH0 + 2 * entry
// Cost: one DRAM read (frame bytes 16..39), one hash, one 8-longword SRAM read; a hit adds
// an SRAM incr and an SRAM add (the flow's counters).
//
// In:  DST = destination IPv4 (from parse), pw.  Out: HIT = 1 when the flow decided
// (route: kind = OUT_FORWARD, NHI = its next hop; plugin: OUT_EXCEPTION / EXC_PLUGIN and
// the plugin's slot in pw bits 23..16),
// 0 when the route lookup is still to run (no entry, or a count entry).
#ifndef CLASSIFY_H
#define CLASSIFY_H
#include "flows_table.h"

#define FLOW_ACT_COUNT  1
#define FLOW_ACT_ROUTE  2
#define FLOW_ACT_PLUGIN 3

// With CLASSIFY_CAM_CACHE (layout param flow_cache, pipelined only: the parallel pool's
// CAM holds the router's own addresses) the ME's CAM caches the last 16 flows looked up,
// found or not: tag = src ^ dst ^ ports ^ proto << 24, and at FLOW_CACHE_LM + 32 * entry
// in local memory the key, its action word, its entry index and the table's generation
// (FLOW_GEN in SRAM, which the control daemon bumps at every change; read beside the
// header, so a cached flow costs no serial memory reference: no hash, no bucket read).
#define FLOW_CACHE_LM 0x200

#macro classify_body(DST, NHI, HIT)
.begin
    .reg t u buf src ports proto bkt ent word
    .reg read $$c0 $$c1 $$c2 $$c3 $$c4 $$c5
    .xfer_order $$c0 $$c1 $$c2 $$c3 $$c4 $$c5
    .reg $k0 $k1 $k2 $k3
    .xfer_order $k0 $k1 $k2 $k3
    .reg read $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7
    .xfer_order $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7
    .reg write $cb
    .sig s_c s_h s_f s_a
#ifdef CLASSIFY_CAM_CACHE
    .reg tag cres gen
    .reg read $g
    .sig s_g
#endif
    immed[HIT, 0]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 16..39: total length, id | fragment, TTL, protocol | checksum, source
    // hi | source lo, destination hi | destination lo, sport | dport, -- (no options here:
    // parse excepted them)
#ifdef CLASSIFY_CAM_CACHE
    dram[read, $$c0, buf, 16, 3], sig_done[s_c]
    immed[u, FLOW_GEN]
    sram[read, $g, u, 0, 1], sig_done[s_g]
    ctx_arb[s_c, s_g]
    alu[gen, --, b, $g]
#else
    dram[read, $$c0, buf, 16, 3], ctx_swap[s_c]
#endif
    alu[t, --, b, $$c1]
    alu[proto, t, and, 0xFF]
    alu_shf[u, --, b, t, >>16]
    alu_shf[u, --, b, u, <<19]         // fragment offset (13 bits) at the top
    alu[t, --, b, $$c2]
    alu[ports, --, b, $$c3]
    dbl_shf[src, t, ports, >>16]
    alu[t, --, b, $$c4]
    alu[ports, --, b, $$c5]
    dbl_shf[ports, t, ports, >>16]
    alu[--, u, -, 0]
    bne[classify_noports#]
    alu[--, proto, -, 6]
    beq[classify_key#]
    alu[--, proto, -, 17]
    beq[classify_key#]
classify_noports#:
    immed[ports, 0]
classify_key#:
#ifdef CLASSIFY_CAM_CACHE
    alu[tag, src, xor, DST]
    alu[tag, tag, xor, ports]
    alu_shf[t, --, b, proto, <<24]
    alu[tag, tag, xor, t]
    cam_lookup[cres, tag]
    br_bclr[cres, 7, classify_walk#]
    alu[t, cres, and, 0x78]
    alu_shf[t, --, b, t, <<2]
    alu_shf[t, t, or, 1, <<9]          // + FLOW_CACHE_LM
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
    alu[--, src, -, *l$index1[0]]
    bne[classify_walk#]
    alu[--, DST, -, *l$index1[1]]
    bne[classify_walk#]
    alu[--, ports, -, *l$index1[2]]
    bne[classify_walk#]
    alu[--, gen, -, *l$index1[5]]
    bne[classify_walk#]
    alu[word, --, b, *l$index1[3]]
    alu_shf[t, --, b, word, >>24]
    alu[--, t, -, proto]
    bne[classify_walk#]
    alu[ent, --, b, *l$index1[4]]
    alu_shf[t, --, b, word, >>16]
    alu[t, t, and, 0xFF]
    bne[classify_hit#]
    br[classify_done#]
classify_walk#:
#endif
    alu[$k0, --, b, src]
    alu[$k1, --, b, DST]
    alu[$k2, --, b, ports]
    alu[$k3, --, b, proto]
    hash_128[$k0, 1], ctx_swap[s_h]
    immed[t, (FLOW_BUCKETS - 1)]
    alu[bkt, t, and, $k3]
    alu_shf[t, --, b, bkt, <<5]
    immed[u, FLOW_KEY_BASE]
    sram[read, $f0, u, t, 8], ctx_swap[s_f]
    alu_shf[ent, --, b, bkt, <<1]
    // way 0
    alu[--, src, -, $f0]
    bne[classify_way1#]
    alu[--, DST, -, $f1]
    bne[classify_way1#]
    alu[--, ports, -, $f2]
    bne[classify_way1#]
    alu[word, --, b, $f3]
    alu_shf[t, --, b, word, >>24]
    alu[--, t, -, proto]
    bne[classify_way1#]
    alu_shf[t, --, b, word, >>16]
    alu[t, t, and, 0xFF]
    bne[classify_found#]
classify_way1#:
    alu[ent, ent, or, 1]
    alu[--, src, -, $f4]
    bne[classify_none#]
    alu[--, DST, -, $f5]
    bne[classify_none#]
    alu[--, ports, -, $f6]
    bne[classify_none#]
    alu[word, --, b, $f7]
    alu_shf[t, --, b, word, >>24]
    alu[--, t, -, proto]
    bne[classify_none#]
    alu_shf[t, --, b, word, >>16]
    alu[t, t, and, 0xFF]
    bne[classify_found#]
classify_none#:
    alu_shf[word, --, b, proto, <<24]  // no entry: action 0 (cached as such)
    immed[t, 0]
classify_found#:
#ifdef CLASSIFY_CAM_CACHE
    // into the CAM entry the lookup named (the LRU one, or the stale hit), with no
    // context swap between the CAM and local memory writes
    alu[u, cres, and, 0x78]
    alu_shf[bkt, --, b, u, >>3]
    cam_write[bkt, tag, 1]
    alu_shf[u, --, b, u, <<2]
    alu_shf[u, u, or, 1, <<9]          // + FLOW_CACHE_LM
    local_csr_wr[ACTIVE_LM_ADDR_1, u]
    nop
    nop
    nop
    alu[*l$index1[0], --, b, src]
    alu[*l$index1[1], --, b, DST]
    alu[*l$index1[2], --, b, ports]
    alu[*l$index1[3], --, b, word]
    alu[*l$index1[4], --, b, ent]
    alu[*l$index1[5], --, b, gen]
#endif
    alu[--, t, -, 0]
    beq[classify_done#]
classify_hit#:
    // the flow's counters: packets + 1, bytes + IP total length
    alu_shf[u, --, b, ent, <<5]
    immed[buf, FLOW_AUX_BASE]
    alu[u, u, +, buf]
    alu_shf[$cb, --, b, $$c0, >>16]
    sram[incr, --, u, 0]
    sram[add, $cb, u, 4], sig_done[s_a]
    alu[--, t, -, FLOW_ACT_COUNT]
    beq[classify_counted#]
    immed[HIT, 1]
    alu[--, t, -, FLOW_ACT_ROUTE]
    bne[classify_plugin#]
    immed[u, FLOW_NH0]
    alu_shf[t, --, b, ent, <<1]
    alu[NHI, u, +, t]
    br[classify_counted#], defer[1]
    immed[kind, OUT_FORWARD]
classify_plugin#:
    // the slot as this lookup found it, in the packet word's reserved bits 23..16 (the
    // exception record's first word): the daemon runs that slot's plugin
    alu[t, word, and, 0xF]
    alu_shf[pw, pw, or, t, <<16]
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_PLUGIN]
classify_counted#:
    ctx_arb[s_a]
classify_done#:
.end
#endm

#endif // CLASSIFY_H
