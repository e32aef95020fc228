// hdr_format.h -- steps 20-23 of the oracle and the forwarding rewrite
// (microcode/README.md §4.3).  Shared by hdr_format.uc and the parallel fast path.
//
// In:  pw (flags from parse), NHI = next-hop index.
// Out: kind/code; on OUT_FORWARD the frame's first 32 buffer bytes are rewritten in
//      DRAM (next hop's MAC, output port's MAC, TTL - 1, RFC 1624 eq. 3 checksum)
//      and OPORT = output port.
#ifndef HDR_FORMAT_H
#define HDR_FORMAT_H

#macro hdr_body(NHI, OPORT)
.begin
    .reg t u f buf nb ck m1 m2 m3
    .reg read $n0 $n1 $n2 $n3
    .xfer_order $n0 $n1 $n2 $n3
    .reg read $$d0 $$d1 $$d2 $$d3
    .xfer_order $$d0 $$d1 $$d2 $$d3
    .reg write $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7
    .xfer_order $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7
    .sig s_nh s_dr s_dw
    alu_shf[t, --, b, NHI, <<4]
    immed[nb, LPM_NH_BASE]
    sram[read, $n0, nb, t, 4], sig_done[s_nh]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    dram[read, $$d0, buf, 16, 2], sig_done[s_dr]
    ctx_arb[s_nh, s_dr]
    immed[kind, OUT_EXCEPTION]
    alu_shf[f, --, b, $n0, >>24]
    alu_shf[OPORT, --, b, $n0, >>16]
    alu[OPORT, OPORT, and, 0xFF]
    // entries that are never forwarded (the parse/lookup steps normally catch them)
    br_bclr[f, 7, hdr_not_noroute#]
    immed[code, EXC_NO_ROUTE]
    br[hdr_done#]
hdr_not_noroute#:
    br_bclr[f, 6, hdr_not_local#]
    immed[code, EXC_LOCAL_DELIVERY]
    br[hdr_done#]
hdr_not_local#:
    br_bclr[f, 4, hdr_not_bcast#]
    immed[code, EXC_BROADCAST]
    br[hdr_done#]
hdr_not_bcast#:
    // 20: TTL
    br_bclr[pw, PW_TTL_LE1_BIT, hdr_ttl_ok#]
    immed[code, EXC_TTL_EXPIRED]
    br[hdr_done#]
hdr_ttl_ok#:
#if (SEND_REDIRECTS)
    // 21: redirect (route back out of the receiving port to a source on its subnet)
    br_bclr[pw, PW_SRC_ON_IN_SUBNET_BIT, hdr_no_redirect#]
    alu_shf[t, --, b, pw, >>28]
    alu[t, t, and, 7]
    alu[--, t, -, OPORT]
    bne[hdr_no_redirect#]
    immed[code, EXC_REDIRECT]
    br[hdr_done#]
hdr_no_redirect#:
#endif
    // 22: next hop not resolved
    br_bclr[f, 5, hdr_forward#]
    immed[code, EXC_ARP_MISS]
    br[hdr_done#]
hdr_forward#:
    // 23: rewrite bytes 0..31 of the buffer (2 pad, 14 Ethernet, 16 IP)
    alu[m1, --, b, $n1]
    alu[m2, --, b, $n2]
    alu[m3, --, b, $n3]
    alu_shf[$$w0, --, b, m1, >>16]
    dbl_shf[$$w1, m1, m2, >>16]
    dbl_shf[$$w2, m2, m3, >>16]
    alu_shf[t, --, b, m3, <<16]
    alu_shf[$$w3, t, or, 0x08, <<8]
    alu[$$w4, --, b, $$d0]
    alu[$$w5, --, b, $$d1]
    alu[t, --, b, $$d2]
    alu[ck, --, ~b, t]
    alu_shf[ck, --, b, ck, <<16]
    alu_shf[ck, --, b, ck, >>16]
    immed[u, 0xFEFF]
    alu[ck, ck, +, u]
    alu_shf[u, --, b, ck, >>16]
    alu[ck, ck, +, u]
    alu[ck, --, ~b, ck]
    alu_shf[ck, --, b, ck, <<16]
    alu_shf[ck, --, b, ck, >>16]
    alu_shf[t, --, b, t, >>16]
    immed[u, 0x100]
    alu[t, t, -, u]
    alu_shf[$$w6, ck, or, t, <<16]
    alu[$$w7, --, b, $$d3]
    dram[write, $$w0, buf, 0, 4], ctx_swap[s_dw]
    immed[kind, OUT_FORWARD]
hdr_done#:
.end
#endm

#endif // HDR_FORMAT_H
