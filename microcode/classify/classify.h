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
// (route: kind = OUT_FORWARD, NHI = its next hop; plugin: OUT_EXCEPTION / EXC_PLUGIN),
// 0 when the route lookup is still to run (no entry, or a count entry).
#ifndef CLASSIFY_H
#define CLASSIFY_H
#include "flows_table.h"

#define FLOW_ACT_COUNT  1
#define FLOW_ACT_ROUTE  2
#define FLOW_ACT_PLUGIN 3

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
    immed[HIT, 0]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 16..39: total length, id | fragment, TTL, protocol | checksum, source
    // hi | source lo, destination hi | destination lo, sport | dport, -- (no options here:
    // parse excepted them)
    dram[read, $$c0, buf, 16, 3], ctx_swap[s_c]
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
    bne[classify_hit#]
classify_way1#:
    alu[ent, ent, or, 1]
    alu[--, src, -, $f4]
    bne[classify_done#]
    alu[--, DST, -, $f5]
    bne[classify_done#]
    alu[--, ports, -, $f6]
    bne[classify_done#]
    alu[word, --, b, $f7]
    alu_shf[t, --, b, word, >>24]
    alu[--, t, -, proto]
    bne[classify_done#]
    alu_shf[t, --, b, word, >>16]
    alu[t, t, and, 0xFF]
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
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_PLUGIN]
classify_counted#:
    ctx_arb[s_a]
classify_done#:
.end
#endm

#endif // CLASSIFY_H
