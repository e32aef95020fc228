// hdr_format.h -- steps 20-23 of the oracle and the forwarding rewrite
// (microcode/README.md §4.3).  Shared by hdr_format.uc and the parallel fast path.
//
// In:  pw (flags from parse), NHI = next-hop index.
// Out: kind/code; on OUT_FORWARD the frame's first 32 bytes are rewritten in
//      DRAM (next hop's MAC, output port's MAC, TTL - 1, RFC 1624 eq. 3 checksum)
//      and OPORT = output port.
#ifndef HDR_FORMAT_H
#define HDR_FORMAT_H

#macro hdr_body(NHI, OPORT)
.begin
    .reg t u f buf nb ck
    .reg read $n0 $n1 $n2 $n3
    .xfer_order $n0 $n1 $n2 $n3
    .reg read $$d0 $$d1 $$d2 $$d3 $$d4 $$d5
    .xfer_order $$d0 $$d1 $$d2 $$d3 $$d4 $$d5
    .reg write $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7
    .xfer_order $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7
    .sig s_nh s_dr s_dw
    alu_shf[t, --, b, NHI, <<4]
    immed[nb, LPM_NH_BASE]
    sram[read, $n0, nb, t, 4], sig_done[s_nh]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 8..31: source MAC 2-5, EtherType, IP header bytes 0..17
    dram[read, $$d0, buf, 8, 3], sig_done[s_dr]
    ctx_arb[s_nh, s_dr]
    immed[kind, OUT_EXCEPTION]
    alu_shf[f, --, b, $n0, >>24]
    alu_shf[OPORT, --, b, $n0, >>16]
    alu[OPORT, OPORT, and, 0xFF]
    // entries that are never forwarded (the parse/lookup steps normally catch them)
    br_bset[f, 7, hdr_x_noroute#]
    br_bset[f, 6, hdr_x_local#]
    br_bset[f, 4, hdr_x_bcast#]
    // 20: TTL
    br_bset[pw, PW_TTL_LE1_BIT, hdr_x_ttl#]
#if (SEND_REDIRECTS)
    // 21: redirect (route back out of the receiving port to a source on its subnet)
    br_bset[pw, PW_SRC_ON_IN_SUBNET_BIT, hdr_redirect_test#]
hdr_no_redirect#:
#endif
    // 22: next hop not resolved
    br_bset[f, 5, hdr_x_arp#]
    // 23: rewrite frame bytes 0..31: next hop's MAC and the port's (the entry's LW1..3
    // are the new bytes 0..11), EtherType and IP bytes 0..7 unchanged, TTL - 1, checksum
    alu[$$w0, --, b, $n1]
    alu[$$w1, --, b, $n2]
    alu[$$w2, --, b, $n3]
    alu[$$w3, --, b, $$d1]
    alu[$$w4, --, b, $$d2]
    immed[u, 0x100]
    alu[t, --, b, $$d3]
    alu[$$w5, t, -, u]
    alu[t, --, b, $$d4]
    alu_shf[ck, --, ~b, t, >>16]
    alu_shf[ck, --, b, ck, <<16]
    alu_shf[ck, --, b, ck, >>16]
    immed[u, 0xFEFF]
    alu[ck, ck, +, u]
    alu_shf[u, --, b, ck, >>16]
    alu[ck, ck, +, u]
    alu[ck, --, ~b, ck]
    alu_shf[ck, --, b, ck, <<16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[t, --, b, t, >>16]
    alu[$$w6, ck, or, t]
    alu[$$w7, --, b, $$d5]
    dram[write, $$w0, buf, 0, 4], ctx_swap[s_dw]
    br[hdr_done#], defer[1]
    immed[kind, OUT_FORWARD]

    // ---- out of line ----------------------------------------------------------------
#if (SEND_REDIRECTS)
hdr_redirect_test#:
    alu_shf[t, --, b, pw, >>28]
    alu[t, t, and, 7]
    alu[--, t, -, OPORT]
    bne[hdr_no_redirect#]
    br[hdr_done#], defer[1]
    immed[code, EXC_REDIRECT]
#endif
hdr_x_noroute#:
    br[hdr_done#], defer[1]
    immed[code, EXC_NO_ROUTE]
hdr_x_local#:
    br[hdr_done#], defer[1]
    immed[code, EXC_LOCAL_DELIVERY]
hdr_x_bcast#:
    br[hdr_done#], defer[1]
    immed[code, EXC_BROADCAST]
hdr_x_ttl#:
    br[hdr_done#], defer[1]
    immed[code, EXC_TTL_EXPIRED]
hdr_x_arp#:
    immed[code, EXC_ARP_MISS]
hdr_done#:
.end
#endm

#endif // HDR_FORMAT_H
