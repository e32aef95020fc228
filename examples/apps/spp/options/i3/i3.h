// i3.h -- the SPP's I3 code option (docs/spp.md §10): its parse (the I3 header of
// docs/spp.md §6: version, complex flag, hop limit, trigger), the decision of §4.2 (in
// the router's range: exactly one trigger filter in the TCAM; out of it: the Chord finger
// table) and its header format (hop limit - 1).  Expanded by spp/spp.uc with its
// registers (the frame's bytes 8..71 in $$d0..$$d15, len, mi, sid, fblk); leaves
// kind/code (to spp_done#) or branches to spp_encap# with out_mi, nh_ip, nh_port, w10,
// w12, w13.
#ifndef SPP_OPTION_I3_H
#define SPP_OPTION_I3_H

#define OPT_I3      2
#define FINGER_BASE 0xC0011000

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

#macro i3_option()
    alu[--, len, -, 69]
    blo[spp_done#]
    alu_shf[t, --, b, $$d8, >>12]
    alu[t, t, and, 0xF]
    alu[--, t, -, 1]
    bne[spp_done#]                          // I3 version
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_I3_COMPLEX]
    br_bset[$$d8, 8, spp_done#]             // the complex flag (byte 42 bit 0)
    immed[kind, OUT_DROP]
    immed[code, DROP_I3_HOP_LIMIT]
    alu[t, $$d8, and, 0xFF]
    alu[--, t, -, 2]
    blo[spp_done#]
    // trigger: bytes 46..53
    alu_shf[thi, --, b, $$d9, <<16]
    alu_shf[t, --, b, $$d10, >>16]
    alu[thi, thi, or, t]
    alu_shf[tlo, --, b, $$d10, <<16]
    alu_shf[t, --, b, $$d11, >>16]
    alu[tlo, tlo, or, t]
    spp_i3_decide()
#endm

#endif
