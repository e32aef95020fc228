// lookup.h -- longest-prefix match over the SRAM trie of microcode/lookup/LAYOUT.md §4
// (16-8-8, leaf-pushed, DENSE32 / DENSE16 / RUNS nodes, at most 3 dependent reads).
// Shared by lookup.uc and the parallel fast path.
//
// In:  DST = destination IPv4.  Out: NHI = next-hop index; kind = OUT_FORWARD, or
// OUT_EXCEPTION / EXC_NO_ROUTE when the index is 0 (step 19).
//
// With LOOKUP_CAM_CACHE defined the ME's CAM caches recent (destination -> index)
// results, the index kept in local memory at LOOKUP_CACHE_LM + 4 * entry.  (Off by
// default: see README §6 for the measurement.  The cache is not flushed on route
// updates, so it is only for static tables until the generation check is added.)
//
// With LOOKUP_RANGE_CACHE defined (layout parameter lookup=range_cache) the aggregate
// route cache in scratch is tried first (npk_sys.h gives RC_BASE, RC_MASK_LO/HI,
// RC_HITS/RC_MISSES and the macro npk_rc_index; the control plane fills it and keeps it
// consistent across route changes).
#ifndef LOOKUP_H
#define LOOKUP_H

// One trie level below the root: E is a pointer (C = 1) when we get here.
#macro lookup_level(SHIFT, DST, E)
    br_bclr[E, 31, lookup_leaf#]
    alu_shf[b, --, b, DST, >>SHIFT]
    alu[b, b, and, 0xFF]
    alu_shf[t, --, b, E, <<8]
    alu_shf[t, --, b, t, >>4]
    immed[nb, LPM_NODE_BASE]
    alu[nb, nb, +, t]
    alu_shf[t, --, b, E, >>28]
    alu[t, t, and, 7]
    .if (t == 0)
        // DENSE32: one entry, a leaf or (level 2) a pointer to a level-3 node
        alu_shf[t, --, b, b, <<2]
        sram[read, $l0, nb, t, 1], ctx_swap[s_lk]
        alu[E, --, b, $l0]
    .elif (t == 1)
        // DENSE16: two 16-bit indices a longword
        alu_shf[t, --, b, b, >>1]
        alu_shf[t, --, b, t, <<2]
        sram[read, $l0, nb, t, 1], ctx_swap[s_lk]
        alu[E, --, b, $l0]
        alu[t, b, and, 1]
        .if (t == 0)
            alu_shf[E, --, b, E, >>16]
        .else
            alu_shf[E, --, b, E, <<16]
            alu_shf[E, --, b, E, >>16]
        .endif
        br[lookup_leaf#]
    .else
        // RUNS: four boundaries, five 16-bit values, one 4-longword read
        sram[read, $l0, nb, 0, 4], ctx_swap[s_lk]
        alu[w, --, b, $l0]
        alu_shf[t, --, b, w, >>24]
        .if (b < t)
            alu_shf[E, --, b, $l1, >>16]
        .else
            alu_shf[t, --, b, w, >>16]
            alu[t, t, and, 0xFF]
            .if (b < t)
                alu_shf[E, --, b, $l1, <<16]
                alu_shf[E, --, b, E, >>16]
            .else
                alu_shf[t, --, b, w, >>8]
                alu[t, t, and, 0xFF]
                .if (b < t)
                    alu_shf[E, --, b, $l2, >>16]
                .else
                    alu[t, w, and, 0xFF]
                    .if (b < t)
                        alu_shf[E, --, b, $l2, <<16]
                        alu_shf[E, --, b, E, >>16]
                    .else
                        alu_shf[E, --, b, $l3, >>16]
                    .endif
                .endif
            .endif
        .endif
        br[lookup_leaf#]
    .endif
#endm

#macro lookup_body(DST, NHI)
.begin
    .reg t b nb w
    .reg read $l0 $l1 $l2 $l3
    .xfer_order $l0 $l1 $l2 $l3
    .sig s_lk
#ifdef LOOKUP_CAM_CACHE
    .reg hit
    cam_lookup[hit, DST]
    br_bclr[hit, 7, lookup_walk#]
    alu[t, hit, and, 0x78]
    alu_shf[t, --, b, t, >>1]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
    alu[NHI, --, b, *l$index1[0]]
    br[lookup_known#]
lookup_walk#:
#endif
#ifdef LOOKUP_RANGE_CACHE
    // Panama's aggregate route cache (toolchain/router/range_cache.py; README §4.2):
    // the set DST's index bits name, in scratch {lo, hi, index}; a hit when
    // lo <= DST & ~RC_MASK <= hi.  A miss walks the trie below.
    npk_rc_index(t, DST)
    immed[nb, RC_BASE]
    scratch[read, $l0, nb, t, 3], ctx_swap[s_lk]
    immed[w, RC_MASK_LO]
    immed_w1[w, RC_MASK_HI]
    alu[w, DST, and~, w]
    alu[--, w, -, $l0]
    blo[lookup_rc_miss#]
    alu[--, $l1, -, w]
    blo[lookup_rc_miss#]
    alu[NHI, --, b, $l2]
    immed[t, RC_HITS]
    scratch[incr, --, t, 0]
    br[lookup_rc_known#]
lookup_rc_miss#:
    immed[t, RC_MISSES]
    scratch[incr, --, t, 0]
#endif
    alu_shf[t, --, b, DST, >>16]
    alu_shf[t, --, b, t, <<2]
    immed[nb, LPM_ROOT_BASE]
    sram[read, $l0, nb, t, 1], ctx_swap[s_lk]
    alu[NHI, --, b, $l0]
    lookup_level(8, DST, NHI)
    lookup_level(0, DST, NHI)
lookup_leaf#:
#ifdef LOOKUP_CAM_CACHE
    // miss: the LRU entry the lookup returned gets this destination
    alu[t, hit, and, 0x78]
    alu_shf[w, --, b, t, >>3]
    cam_write[w, DST, 1]
    alu_shf[t, --, b, t, >>1]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]
    nop
    nop
    nop
    alu[*l$index1[0], --, b, NHI]
lookup_known#:
#endif
#ifdef LOOKUP_RANGE_CACHE
lookup_rc_known#:
#endif
    .if (NHI == 0)
        immed[kind, OUT_EXCEPTION]
        immed[code, EXC_NO_ROUTE]
    .else
        immed[kind, OUT_FORWARD]
    .endif
.end
#endm

#endif // LOOKUP_H
