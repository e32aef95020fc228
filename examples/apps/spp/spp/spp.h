// spp.h -- the macros of spp.uc (docs/spp.md): the substrate's and the options' steps.
// They use spp.uc's registers (declared there, before the include of this file's users).
#ifndef SPP_H
#define SPP_H

// copy N_ROWS rows of 4 LW from SRAM BASE into local memory at LM (context 0, at start)
#macro spp_lm_copy(BASE, N_ROWS, WORDS, LM)
.begin
    .reg a n lm
    .reg read $c0 $c1 $c2 $c3
    .xfer_order $c0 $c1 $c2 $c3
    .sig s_c
    immed[a, BASE]
    immed[n, N_ROWS]
    immed[lm, LM]
spp_copy_row#:
    alu[--, --, b, n]
    beq[spp_copy_done#]
    sram[read, $c0, a, 0, WORDS], ctx_swap[s_c]
    local_csr_wr[ACTIVE_LM_ADDR_0, lm]
    nop
    nop
    nop
    alu[*l$index0[0], --, b, $c0]
    alu[*l$index0[1], --, b, $c1]
    alu[*l$index0[2], --, b, $c2]
#if (WORDS > 3)
    alu[*l$index0[3], --, b, $c3]
#else
    alu[*l$index0[3], --, b, 0]
#endif
    alu[a, a, +, (WORDS << 2)]
    alu[lm, lm, +, 16]
    br[spp_copy_row#], defer[1]
    alu[n, n, -, 1]
spp_copy_done#:
.end
#endm


// The meta-interface table's SPP_MI_ROWS_MAX rows (the link's, and those the GPE's daemon
// writes at run time: docs/spp.md §4.1) from SRAM into local memory at LM, and at
// LM_GEN + 4 the number of rows the demux searches (the last valid row + 1).  Each row is
// written whole between two swaps, so another context searching meanwhile sees the old
// row or the new one.  A, N, LMA, CNT: registers free here.
#macro spp_mi_copy(LM, LM_GEN, A, N, LMA, CNT)
.begin
    .reg read $c0 $c1 $c2 $c3
    .xfer_order $c0 $c1 $c2 $c3
    .sig s_c
    immed[A, SPP_META_IF_BASE]
    immed[N, 0]
    immed[CNT, 0]
    immed[LMA, LM]
spp_mi_copy_row#:
    sram[read, $c0, A, 0, 4], ctx_swap[s_c]
    local_csr_wr[ACTIVE_LM_ADDR_0, LMA]
    alu[N, N, +, 1]
    alu[A, A, +, 16]
    alu[LMA, LMA, +, 16]
    alu[*l$index0[0], --, b, $c0]
    alu[*l$index0[1], --, b, $c1]
    alu[*l$index0[2], --, b, $c2]
    alu[*l$index0[3], --, b, $c3]
    br_bclr[$c3, 31, spp_mi_copy_next#]
    alu[CNT, --, b, N]
spp_mi_copy_next#:
    alu[--, N, -, SPP_MI_ROWS_MAX]
    blo[spp_mi_copy_row#]
    immed[A, LM_GEN]
    local_csr_wr[ACTIVE_LM_ADDR_0, A]
    nop
    nop
    nop
    alu[*l$index0[1], --, b, CNT]
.end
#endm


#macro spp_add_halves(ACC, W)
.begin
    .reg h
    alu_shf[h, --, b, W, >>16]
    alu[ACC, ACC, +, h]
    alu_shf[h, --, b, W, <<16]
    alu_shf[h, --, b, h, >>16]
    alu[ACC, ACC, +, h]
.end
#endm

#macro spp_fold(ACC)
.begin
    .reg h
    alu_shf[h, --, b, ACC, >>16]
    alu_shf[ACC, --, b, ACC, <<16]
    alu_shf[ACC, --, b, ACC, >>16]
    alu[ACC, ACC, +, h]
    alu_shf[h, --, b, ACC, >>16]
    alu[ACC, ACC, +, h]
    alu_shf[ACC, --, b, ACC, <<16]
    alu_shf[ACC, --, b, ACC, >>16]
.end
#endm

// A TCAM answer with a match ($r0..$r3): the filter's action; on forward out_mi, nh_ip
// and nh_port, else the exception spp_to_gpe or the drop spp_filter_drop (to spp_done#).
#macro spp_result()
.begin
    .reg act
    alu_shf[act, --, b, $r2, >>24]
    alu[--, act, -, 1]
    beq[spp_res_fwd#]
    immed[kind, OUT_DROP]
    immed[code, DROP_SPP_FILTER_DROP]
    alu[--, act, -, 2]
    bne[spp_done#]
    immed[kind, OUT_EXCEPTION]
    br[spp_done#], defer[1]
    immed[code, EXC_SPP_TO_GPE]
spp_res_fwd#:
    alu_shf[out_mi, --, b, $r2, >>16]
    alu[out_mi, out_mi, and, 0xFF]
    alu_shf[nh_port, --, b, $r2, <<16]
    alu_shf[nh_port, --, b, nh_port, >>16]
    alu[nh_ip, --, b, $r3]
.end
#endm

// The frame re-encapsulated for output meta-interface out_mi and next hop nh_ip:nh_port
// (docs/spp.md §2): frame bytes 0..55 written (Ethernet, outer IPv4, UDP, the first 14
// bytes of the slice payload from w10, $$d9, w12, w13); ow1 = the output port (with
// SPP_CLASS_IN_MSG: | slice index << 8, the DRR qm's class).
#macro spp_encap()
.begin
    .reg lm mip mw1 oport mh ml pm0 pm1 ck n i
    .reg write $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7 $$w8 $$w9 $$w10 $$w11 $$w12 $$w13
    .xfer_order $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7 $$w8 $$w9 $$w10 $$w11 $$w12 $$w13
    .sig s_dw
    alu_shf[lm, --, b, out_mi, <<4]
    immed[n, LM_MI]
    alu[lm, lm, +, n]
    local_csr_wr[ACTIVE_LM_ADDR_0, lm]
    immed[lm, LM_ARP]
    immed[n, SPP_ARP_ROWS]
    immed[i, 0]
    alu[mip, --, b, *l$index0[0]]
    alu[mw1, --, b, *l$index0[1]]
    local_csr_wr[ACTIVE_LM_ADDR_0, lm]
    alu_shf[oport, --, b, mw1, >>8]
    alu[oport, oport, and, 0xFF]
    nop
spp_arp_row#:
    alu[--, i, -, n]
    bhs[spp_no_arp#]
    alu[--, nh_ip, -, *l$index0[0]]
    beq[spp_arp_found#]
    alu[i, i, +, 1]
    alu[lm, lm, +, 16]
    local_csr_wr[ACTIVE_LM_ADDR_0, lm]
    nop
    nop
    br[spp_arp_row#]
spp_no_arp#:
    immed[kind, OUT_DROP]
    br[spp_encap_done#], defer[1]
    immed[code, DROP_SPP_NO_ARP]
spp_arp_found#:
    alu[mh, --, b, *l$index0[1]]
    alu[ml, --, b, *l$index0[2]]
    alu_shf[lm, --, b, oport, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_0, lm]
    // outer checksum: 0x4500 + total + 0x4011 + the addresses' halfwords
    alu_shf[ck, --, b, $$d2, >>16]
    immed[lm, 0x8511]                       // 0x4500 + 0x4011
    alu[ck, ck, +, lm]
    alu[pm0, --, b, *l$index0[0]]
    alu[pm1, --, b, *l$index0[1]]
    alu_shf[lm, --, b, mip, >>16]
    alu[ck, ck, +, lm]
    alu_shf[lm, --, b, mip, <<16]
    alu_shf[lm, --, b, lm, >>16]
    alu[ck, ck, +, lm]
    alu_shf[lm, --, b, nh_ip, >>16]
    alu[ck, ck, +, lm]
    alu_shf[lm, --, b, nh_ip, <<16]
    alu_shf[lm, --, b, lm, >>16]
    alu[ck, ck, +, lm]
    spp_fold(ck)
    alu[ck, --, ~b, ck]
    alu_shf[ck, --, b, ck, <<16]
    // the new bytes 0..55
    alu[$$w0, --, b, mh]
    alu_shf[lm, --, b, pm0, >>16]
    alu_shf[ml, --, b, ml, >>16]
    alu_shf[$$w1, lm, or, ml, <<16]
    alu_shf[lm, --, b, pm0, <<16]
    alu[$$w2, lm, or, pm1]
    immed[lm, 0x4500]
    immed_w1[lm, 0x0800]
    alu[$$w3, --, b, lm]
    alu_shf[lm, --, b, $$d2, >>16]
    alu_shf[$$w4, --, b, lm, <<16]
    immed[lm, 0x4011]
    alu[$$w5, --, b, lm]
    alu_shf[lm, --, b, mip, >>16]
    alu[$$w6, ck, or, lm]
    alu_shf[lm, --, b, nh_ip, >>16]
    alu_shf[$$w7, lm, or, mip, <<16]
    alu_shf[lm, --, b, mw1, >>16]
    alu_shf[$$w8, lm, or, nh_ip, <<16]
    alu_shf[lm, --, b, $$d7, <<16]
    alu_shf[lm, --, b, lm, >>16]
    alu_shf[$$w9, lm, or, nh_port, <<16]
    alu_shf[lm, --, b, w10, <<16]
    alu_shf[$$w10, --, b, lm, >>16]
    alu[$$w11, --, b, $$d9]
    alu[$$w12, --, b, w12]
    alu[$$w13, --, b, w13]
    dram[write, $$w0, buf, 0, 7], ctx_swap[s_dw]
#ifdef SPP_CLASS_IN_MSG
    alu_shf[ow1, oport, or, sidx, <<8]
#else
    alu[ow1, --, b, oport]
#endif
    immed[kind, OUT_FORWARD]
spp_encap_done#:
.end
#endm

#endif // SPP_H
