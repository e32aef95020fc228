// parse.h -- Ethernet + IPv4 validation (microcode/README.md §4.1), as a macro so the
// parse block (parse.uc) and the parallel fast path (fastpath/fastpath.uc) share it.
//
// In:  pw  = packet word from rx (V | in_port << 28 | buffer index), LEN = frame length
// Out: kind/code; on OUT_FORWARD: pw |= PW_TTL_LE1 / PW_SRC_ON_IN_SUBNET, DST = dst IP.
// The rules and their order are those of npkit.emulator.traffic.oracle (steps 1-18);
// steps 19-22 need the route and are taken by lookup (19) and hdr_format (20-22).
// Per-port facts come from local memory (npk_port_lm_init): LM[16p] = MAC bytes 0-3,
// LM[16p+4] = MAC bytes 4-5 (bits 15..0), LM[16p+8] = subnet, LM[16p+12] = netmask; the
// router's special destinations from the CAM (npk_special_cam_init): tag = address,
// state = CAM_NET / CAM_BCAST / CAM_LOCAL.
#ifndef PARSE_H
#define PARSE_H

#macro parse_opt_word(K, LO, HI)
    .if (ihl > K)
        alu_shf[u, --, b, HI, >>16]
        alu[t, t, +, u]
        alu_shf[u, --, b, LO, <<16]
        alu_shf[u, --, b, u, >>16]
        alu[t, t, +, u]
    .endif
#endm

// The common path (a frame to forward) takes no branch: every test branches out of
// line to a stub that sets the reason and leaves, so each check costs its one or two
// instructions and no taken-branch bubble (README §6).
#macro parse_fold_check(BAD)
    // fold t to 16 bits; a valid header sums to 0xFFFF
    alu_shf[u, --, b, t, >>16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[t, --, b, t, >>16]
    alu[t, t, +, u]
    alu_shf[u, --, b, t, >>16]
    alu[t, t, +, u]
    alu_shf[t, --, b, t, <<16]
    immed[u, 0xFFFF0000]
    alu[--, t, -, u]
    bne[BAD]
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
    // frame bytes 0..39: Ethernet header, IP header (at byte 14) and 6 bytes more
    dram[read, $$h0, buf, 0, 5], sig_done[s_hdr]
    alu_shf[t, --, b, pw, >>28]
    alu[t, t, and, 7]
    alu_shf[t, --, b, t, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]
    immed[kind, OUT_DROP]
    immed[u, 1514]
    ctx_arb[s_hdr]
    // 1-2: frame length
    alu[--, len, -, 60]
    bcc[parse_e_short#]
    alu[--, u, -, len]
    bcc[parse_e_oversize#]
    // 3: destination MAC (group addresses pass)
    alu[t, --, b, $$h0]
    br_bset[t, 24, parse_mac_ok#]
    alu[--, t, -, *l$index0[0]]
    bne[parse_e_mac#]
    alu_shf[t, --, b, $$h1, >>16]
    alu[--, t, -, *l$index0[1]]
    bne[parse_e_mac#]
parse_mac_ok#:
    // 4-5: EtherType
    alu_shf[t, --, b, $$h3, >>16]
    immed[u, 0x0800]
    alu[--, t, -, u]
    bne[parse_not_ipv4#]
    // 6-9: version, IHL, total length
    alu_shf[t, --, b, $$h3, >>12]
    alu[t, t, and, 0xF]
    alu[--, t, -, 4]
    bne[parse_e_version#]
    alu_shf[ihl, --, b, $$h3, >>8]
    alu[ihl, ihl, and, 0xF]
    alu[--, ihl, -, 5]
    bcc[parse_e_ihl#]
    alu_shf[t, --, b, $$h4, >>16]
    alu_shf[u, --, b, ihl, <<2]
    alu[--, t, -, u]
    bcc[parse_e_total#]
    alu[u, len, -, 14]
    alu[--, u, -, t]
    bcc[parse_e_truncated#]
    // 10: header checksum over 20 bytes (options: out of line)
    // the 16-bit words at bytes 14..33: low half of h3, h4..h7, high half of h8
    alu_shf[u, --, b, $$h8, >>16]
    alu_shf[t, --, b, $$h3, <<16]
    alu_shf[t, --, b, t, >>16]
    alu[t, t, +, $$h4]
    alu[t, t, +carry, $$h5]
    alu[t, t, +carry, $$h6]
    alu[t, t, +carry, $$h7]
    alu[t, t, +carry, u]
    alu[t, t, +carry, 0]
    alu[t, t, +carry, 0]
    alu_shf[u, --, b, t, <<16]
    alu_shf[u, --, b, u, >>16]
    alu_shf[t, --, b, t, >>16]
    alu[t, t, +, u]
    alu[--, ihl, -, 6]
    bcs[parse_options#]
    parse_fold_check(parse_e_checksum#)
    // 12: martian destination
    alu[t, --, b, $$h7]
    alu[u, --, b, $$h8]
    dbl_shf[DST, t, u, >>16]
    alu_shf[t, --, b, DST, >>24]
    beq[parse_e_martian_dst#]
    alu[--, t, -, 127]
    beq[parse_e_martian_dst#]
    alu_shf[u, --, b, DST, >>28]
    alu[--, u, -, 0xF]
    beq[parse_class_e#]
    // 13-17: the router's own subnets and addresses (CAM), multicast
    cam_lookup[t, DST]
    br_bset[t, 7, parse_dst_special#]
    alu[--, u, -, 0xE]
    beq[parse_x_multicast#]
    alu[t, --, b, $$h0]
    br_bset[t, 24, parse_e_link_bcast#]
    // 18: martian source
    alu[t, --, b, $$h6]
    alu[u, --, b, $$h7]
    dbl_shf[src, t, u, >>16]
    alu_shf[t, --, b, src, >>24]
    beq[parse_e_martian_src#]
    alu[--, t, -, 127]
    beq[parse_e_martian_src#]
    alu_shf[t, --, b, src, >>29]
    alu[--, t, -, 7]
    beq[parse_e_martian_src#]
    cam_lookup[t, src]
    br_bset[t, 7, parse_src_special#]
parse_src_ok#:
    // forward to the lookup with what steps 20 and 21 need
    alu_shf[t, --, b, $$h5, >>8]
    alu[t, t, and, 0xFF]
    alu[--, t, -, 2]
    bcc[parse_ttl_le1#]
parse_ttl_done#:
    alu[t, src, and, *l$index0[3]]
    alu[--, t, -, *l$index0[2]]
    beq[parse_on_subnet#]
parse_fwd#:
    br[parse_done#], defer[1]
    immed[kind, OUT_FORWARD]

    // ---- out of line ----------------------------------------------------------------
parse_ttl_le1#:
    alu_shf[pw, pw, or, 1, <<PW_TTL_LE1_BIT]
    br[parse_ttl_done#]
parse_on_subnet#:
    alu_shf[pw, pw, or, 1, <<PW_SRC_ON_IN_SUBNET_BIT]
    br[parse_fwd#]
parse_options#:
    // IHL > 5: IP header word w is at frame bytes 14 + 4w; read bytes 32..79:
    // word w = low half of h(w-5), high half of h(w-4)
    dram[read, $$h0, buf, 32, 6], ctx_swap[s_hdr]
    parse_opt_word(5, $$h0, $$h1)
    parse_opt_word(6, $$h1, $$h2)
    parse_opt_word(7, $$h2, $$h3)
    parse_opt_word(8, $$h3, $$h4)
    parse_opt_word(9, $$h4, $$h5)
    parse_opt_word(10, $$h5, $$h6)
    parse_opt_word(11, $$h6, $$h7)
    parse_opt_word(12, $$h7, $$h8)
    parse_opt_word(13, $$h8, $$h9)
    parse_opt_word(14, $$h9, $$h10)
    parse_fold_check(parse_e_checksum#)
    // 11: options go to the control plane
    immed[kind, OUT_EXCEPTION]
    br[parse_done#], defer[1]
    immed[code, EXC_IP_OPTIONS]
parse_not_ipv4#:
    immed[u, 0x0806]
    alu[--, t, -, u]
    bne[parse_e_ethertype#]
    immed[kind, OUT_EXCEPTION]
    br[parse_done#], defer[1]
    immed[code, EXC_ARP]
parse_class_e#:
    alu[t, DST, +, 1]
    bne[parse_e_martian_dst#]
    immed[kind, OUT_EXCEPTION]
    br[parse_done#], defer[1]
    immed[code, EXC_BROADCAST]
parse_dst_special#:
    alu_shf[t, --, b, t, >>8]
    alu[t, t, and, 0xF]
    alu[--, t, -, CAM_NET]
    beq[parse_e_obsolete#]
    immed[kind, OUT_EXCEPTION]
    alu[--, t, -, CAM_BCAST]
    beq[parse_x_broadcast#]
    // CAM_LOCAL: a link-layer group address still comes first (step 16)
    alu[t, --, b, $$h0]
    br_bset[t, 24, parse_e_link_bcast#]
    br[parse_done#], defer[1]
    immed[code, EXC_LOCAL_DELIVERY]
parse_src_special#:
    alu_shf[t, --, b, t, >>8]
    alu[t, t, and, 0xF]
    alu[--, t, -, CAM_BCAST]
    bne[parse_src_ok#]
    br[parse_done#], defer[1]
    immed[code, DROP_MARTIAN_SRC]
parse_x_broadcast#:
    br[parse_done#], defer[1]
    immed[code, EXC_BROADCAST]
parse_x_multicast#:
    immed[kind, OUT_EXCEPTION]
    br[parse_done#], defer[1]
    immed[code, EXC_MULTICAST]
parse_e_short#:
    br[parse_done#], defer[1]
    immed[code, DROP_SHORT_FRAME]
parse_e_oversize#:
    br[parse_done#], defer[1]
    immed[code, DROP_OVERSIZE_FRAME]
parse_e_mac#:
    br[parse_done#], defer[1]
    immed[code, DROP_DST_MAC_MISMATCH]
parse_e_ethertype#:
    br[parse_done#], defer[1]
    immed[code, DROP_NON_IPV4_ETHERTYPE]
parse_e_version#:
    br[parse_done#], defer[1]
    immed[code, DROP_BAD_VERSION]
parse_e_ihl#:
    br[parse_done#], defer[1]
    immed[code, DROP_BAD_IHL]
parse_e_total#:
    br[parse_done#], defer[1]
    immed[code, DROP_BAD_TOTAL_LENGTH]
parse_e_truncated#:
    br[parse_done#], defer[1]
    immed[code, DROP_IP_TRUNCATED]
parse_e_checksum#:
    immed[kind, OUT_DROP]
    br[parse_done#], defer[1]
    immed[code, DROP_BAD_CHECKSUM]
parse_e_martian_dst#:
    br[parse_done#], defer[1]
    immed[code, DROP_MARTIAN_DST]
parse_e_obsolete#:
    br[parse_done#], defer[1]
    immed[code, DROP_OBSOLETE_BROADCAST]
parse_e_link_bcast#:
    immed[kind, OUT_DROP]
    br[parse_done#], defer[1]
    immed[code, DROP_LINK_BROADCAST_UNICAST_IP]
parse_e_martian_src#:
    immed[code, DROP_MARTIAN_SRC]
parse_done#:
.end
#endm

#endif // PARSE_H
