// parse.h -- Ethernet + IPv4 validation (microcode/README.md §4.1), as a macro so the
// parse block (parse.uc) and the parallel fast path (fastpath/fastpath.uc) share it.
//
// In:  pw  = packet word from rx (V | in_port << 28 | buffer index), LEN = frame length
// Out: kind/code; on OUT_FORWARD: pw |= PW_TTL_LE1 / PW_SRC_ON_IN_SUBNET, DST = dst IP.
// The rules and their order are those of npkit.emulator.traffic.oracle (steps 1-18);
// steps 19-22 need the route and are taken by lookup (19) and hdr_format (20-22).
// Per-port facts come from local memory (npk_port_lm_init): LM[16p] = MAC bytes 0-1
// << 16, LM[16p+4] = MAC bytes 2-5, LM[16p+8] = subnet, LM[16p+12] = netmask; the
// router's special destinations from the CAM (npk_special_cam_init): tag = address,
// state = CAM_NET / CAM_BCAST / CAM_LOCAL.
#ifndef PARSE_H
#define PARSE_H

#macro parse_opt_word(K, REG)
    .if (ihl > K)
        alu_shf[u, --, b, REG, >>16]
        alu[t, t, +, u]
        alu_shf[u, --, b, REG, <<16]
        alu_shf[u, --, b, u, >>16]
        alu[t, t, +, u]
    .endif
#endm

#macro parse_body(LEN, DST)
.begin
    .reg len buf t u src ihl
    .reg read $$h0 $$h1 $$h2 $$h3 $$h4 $$h5 $$h6 $$h7 $$h8 $$h9 $$h10 $$h11
    .xfer_order $$h0 $$h1 $$h2 $$h3 $$h4 $$h5 $$h6 $$h7 $$h8 $$h9 $$h10 $$h11
    .sig s_hdr
    alu[len, --, b, LEN]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 0..39 (2 bytes of pad, Ethernet header, 24 bytes of IP header)
    dram[read, $$h0, buf, 0, 5], sig_done[s_hdr]
    alu_shf[t, --, b, pw, >>28]
    alu[t, t, and, 7]
    alu_shf[t, --, b, t, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    immed[kind, OUT_DROP]
    ctx_arb[s_hdr]
    // 1-2: frame length
    .if (len < 60)
        immed[code, DROP_SHORT_FRAME]
        br[parse_done#]
    .endif
    immed[u, 1514]
    .if (len > u)
        immed[code, DROP_OVERSIZE_FRAME]
        br[parse_done#]
    .endif
    // 3: destination MAC (group addresses pass)
    alu[t, --, b, $$h0]
    br_bset[t, 8, parse_mac_ok#]
    alu_shf[t, --, b, t, <<16]
    alu[--, t, -, *l$index0[0]]
    bne[parse_mac_bad#]
    alu[t, --, b, $$h1]
    alu[--, t, -, *l$index0[1]]
    beq[parse_mac_ok#]
parse_mac_bad#:
    immed[code, DROP_DST_MAC_MISMATCH]
    br[parse_done#]
parse_mac_ok#:
    // 4-5: EtherType
    alu_shf[t, --, b, $$h3, <<16]
    immed[u, 0x08060000]
    alu[--, t, -, u]
    bne[parse_not_arp#]
    immed[kind, OUT_EXCEPTION]
    immed[code, EXC_ARP]
    br[parse_done#]
parse_not_arp#:
    immed[u, 0x08000000]
    alu[--, t, -, u]
    beq[parse_ipv4#]
    immed[code, DROP_NON_IPV4_ETHERTYPE]
    br[parse_done#]
parse_ipv4#:
    // 6-9: version, IHL, total length
    alu_shf[t, --, b, $$h4, >>28]
    .if (t != 4)
        immed[code, DROP_BAD_VERSION]
        br[parse_done#]
    .endif
    alu_shf[ihl, --, b, $$h4, >>24]
    alu[ihl, ihl, and, 0xF]
    .if (ihl < 5)
        immed[code, DROP_BAD_IHL]
        br[parse_done#]
    .endif
    alu_shf[t, --, b, $$h4, <<16]
    alu_shf[t, --, b, t, >>16]
    alu_shf[u, --, b, ihl, <<2]
    .if (t < u)
        immed[code, DROP_BAD_TOTAL_LENGTH]
        br[parse_done#]
    .endif
    alu[u, len, -, 14]
    .if (t > u)
        immed[code, DROP_IP_TRUNCATED]
        br[parse_done#]
    .endif
    // 10: header checksum (one's complement sum of IHL*4 bytes must be 0xFFFF)
    alu[t, --, b, $$h4]
    alu[t, t, +, $$h5]
    alu[t, t, +carry, $$h6]
    alu[t, t, +carry, $$h7]
    alu[t, t, +carry, $$h8]
    alu[t, t, +carry, 0]
    alu[t, t, +carry, 0]
    alu_shf[u, --, b, t, <<16]
    alu_shf[u, --, b, u, >>16]
    alu_shf[t, --, b, t, >>16]
    alu[t, t, +, u]
    .if (ihl > 5)
        // options: IP header word w is at buffer byte 16 + 4w; read bytes 32..79
        dram[read, $$h0, buf, 32, 6], ctx_swap[s_hdr]
        parse_opt_word(5, $$h1)
        parse_opt_word(6, $$h2)
        parse_opt_word(7, $$h3)
        parse_opt_word(8, $$h4)
        parse_opt_word(9, $$h5)
        parse_opt_word(10, $$h6)
        parse_opt_word(11, $$h7)
        parse_opt_word(12, $$h8)
        parse_opt_word(13, $$h9)
        parse_opt_word(14, $$h10)
    .endif
    alu_shf[u, --, b, t, >>16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[t, --, b, t, >>16]
    alu[t, t, +, u]
    alu_shf[u, --, b, t, >>16]
    alu[t, t, +, u]
    alu_shf[t, --, b, t, <<16]
    immed[u, 0xFFFF0000]
    alu[--, t, -, u]
    beq[parse_ck_ok#]
    immed[code, DROP_BAD_CHECKSUM]
    br[parse_done#]
parse_ck_ok#:
    // 11: options go to the control plane
    .if (ihl > 5)
        immed[kind, OUT_EXCEPTION]
        immed[code, EXC_IP_OPTIONS]
        br[parse_done#]
    .endif
    // 12: martian destination
    alu[DST, --, b, $$h8]
    alu_shf[t, --, b, DST, >>24]
    .if ((t == 0) || (t == 127))
        immed[code, DROP_MARTIAN_DST]
        br[parse_done#]
    .endif
    alu_shf[u, --, b, DST, >>28]
    .if (u == 0xF)
        alu[t, DST, +, 1]
        .if (t != 0)
            immed[code, DROP_MARTIAN_DST]
            br[parse_done#]
        .endif
    .endif
    // 13-17: the router's own subnets and addresses (CAM), broadcast, multicast
    cam_lookup[t, DST]
    br_bclr[t, 7, parse_dst_plain#]
    alu_shf[t, --, b, t, >>8]
    alu[t, t, and, 0xF]
    .if (t == CAM_NET)
        immed[code, DROP_OBSOLETE_BROADCAST]
        br[parse_done#]
    .endif
    immed[kind, OUT_EXCEPTION]
    .if (t == CAM_BCAST)
        immed[code, EXC_BROADCAST]
        br[parse_done#]
    .endif
    // CAM_LOCAL: a link-layer group address still comes first (step 16)
    alu[t, --, b, $$h0]
    br_bset[t, 8, parse_link_bcast#]
    immed[code, EXC_LOCAL_DELIVERY]
    br[parse_done#]
parse_dst_plain#:
    immed[kind, OUT_EXCEPTION]
    alu[t, DST, +, 1]
    .if (t == 0)
        immed[code, EXC_BROADCAST]
        br[parse_done#]
    .endif
    .if (u == 0xE)
        immed[code, EXC_MULTICAST]
        br[parse_done#]
    .endif
    alu[t, --, b, $$h0]
    br_bclr[t, 8, parse_src#]
parse_link_bcast#:
    immed[kind, OUT_DROP]
    immed[code, DROP_LINK_BROADCAST_UNICAST_IP]
    br[parse_done#]
parse_src#:
    // 18: martian source
    immed[kind, OUT_DROP]
    immed[code, DROP_MARTIAN_SRC]
    alu[src, --, b, $$h7]
    alu_shf[t, --, b, src, >>24]
    .if ((t == 0) || (t == 127))
        br[parse_done#]
    .endif
    alu_shf[t, --, b, src, >>29]
    .if (t == 7)
        br[parse_done#]
    .endif
    cam_lookup[t, src]
    br_bclr[t, 7, parse_src_ok#]
    alu_shf[t, --, b, t, >>8]
    alu[t, t, and, 0xF]
    .if (t == CAM_BCAST)
        br[parse_done#]
    .endif
parse_src_ok#:
    // forward to the lookup with what steps 20 and 21 need
    alu_shf[t, --, b, $$h6, >>24]
    .if (t < 2)
        alu_shf[pw, pw, or, 1, <<PW_TTL_LE1_BIT]
    .endif
    alu[t, src, and, *l$index0[3]]
    alu[--, t, -, *l$index0[2]]
    bne[parse_fwd#]
    alu_shf[pw, pw, or, 1, <<PW_SRC_ON_IN_SUBNET_BIT]
parse_fwd#:
    immed[kind, OUT_FORWARD]
parse_done#:
.end
#endm

#endif // PARSE_H
