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

// The I3 decision for trigger thi:tlo (docs/spp.md §4.2): in the router's range, the
// TCAM (exactly one trigger filter); out of it, the Chord finger table.  Forwards to
// spp_encap# with w10/w12/w13 set (hop limit - 1), or leaves kind/code (to spp_done#).
#macro spp_i3_decide()
.begin
    .reg fa dlo dhi rlo rhi k x
    .reg read $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7
    .xfer_order $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7
    .sig s_f
    // block j at FINGER_BASE + j * 0x420
    alu_shf[fa, --, b, fblk, <<10]
    alu_shf[x, --, b, fblk, <<5]
    alu[fa, fa, +, x]
    immed[x, FINGER_BASE]
    alu[fa, fa, +, x]
    sram[read, $f0, fa, 0, 8], ctx_swap[s_f]
    // d = t - predecessor, r = node - predecessor (64 bits)
    alu[dlo, tlo, -, $f7]
    alu[dhi, thi, -carry, $f6]
    alu[rlo, $f3, -, $f7]
    alu[rhi, $f2, -carry, $f6]
    alu[--, dlo, or, dhi]
    beq[spp_i3_out#]                        // t == predecessor: not in (pred, node]
    alu[--, rlo, -, dlo]
    alu[--, rhi, -carry, dhi]
    bhs[spp_i3_in#]                         // d <= r: in the router's range
spp_i3_out#:
    // e = t - node (not 0), k = its highest set bit: finger k
    alu[dlo, tlo, -, $f3]
    alu[dhi, thi, -carry, $f2]
    immed[k, 0]
    alu[--, --, b, dhi]
    beq[spp_i3_msb#]
    immed[k, 32]
    alu[dlo, --, b, dhi]
spp_i3_msb#:
    spp_msb_step(16)
    spp_msb_step(8)
    spp_msb_step(4)
    spp_msb_step(2)
    spp_msb_step(1)
    alu_shf[k, --, b, k, <<4]
    alu[fa, fa, +, k]
    sram[read, $f0, fa, 0x20, 2], ctx_swap[s_f]
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_I3_NO_FINGER]
    br_bclr[$f0, 31, spp_done#]
    alu_shf[out_mi, --, b, $f0, >>16]
    alu[out_mi, out_mi, and, 0xFF]
    alu_shf[nh_port, --, b, $f0, <<16]
    alu_shf[nh_port, --, b, nh_port, >>16]
    br[spp_i3_fwd#], defer[1]
    alu[nh_ip, --, b, $f1]
spp_i3_in#:
    alu_shf[x, OPT_I3, or, sid, <<8]
    alu_shf[$k0, --, b, x, <<8]
    alu[$k1, --, b, thi]
    alu[$k2, --, b, tlo]
    alu[$k3, --, b, 0]
    alu_shf[$k4, --, b, mi, <<16]
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_I3_NO_TRIGGER]
    br_bclr[$r0, TCAM_HIT_BIT, spp_done#]
    alu[x, $r0, and, 0xFF]
    immed[code, EXC_I3_MULTI_TRIGGER]
    alu[--, x, -, 1]
    bne[spp_done#]
    immed[kind, OUT_DROP]
    spp_result()
spp_i3_fwd#:
    alu[w10, $$d8, -, 1]                    // hop limit (byte 43) - 1
    alu[w12, --, b, $$d10]
    alu[w13, --, b, $$d11]
    br[spp_encap#]
.end
#endm

// k += S and x >>= S when x >> S is not 0 (one step of the highest-set-bit search of dlo)
#macro spp_msb_step(S)
.begin
    .reg h
    alu_shf[h, --, b, dlo, >>S]
    beq[spp_msb_skip_/**/S#]
    alu[k, k, +, S]
    alu[dlo, --, b, h]
spp_msb_skip_/**/S#:
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
