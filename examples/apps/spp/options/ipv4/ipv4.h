// ipv4.h -- the SPP's IPv4 code option (docs/spp.md §10): its parse -- the inner IPv4
// header's checks and the TCAM key of docs/spp.md §5.1 -- the lookup, and its header
// format: inner TTL - 1 with the RFC 1624 checksum update (as hdr_format does).
// Expanded by spp/spp.uc with its registers: the frame's bytes 8..71 in $$d0..$$d15,
// len, mi, sid; leaves kind/code (to spp_done#) or falls through to the encapsulation
// with out_mi, nh_ip, nh_port and the new payload words w10, w12, w13.
#ifndef SPP_OPTION_IPV4_H
#define SPP_OPTION_IPV4_H

#define OPT_IPV4    1

#macro ipv4_option()
    alu[--, len, -, 62]
    blo[spp_done#]
    alu_shf[t, --, b, $$d8, >>8]
    alu[t, t, and, 0xFF]                    // inner version | IHL (byte 42)
    alu_shf[u, --, b, t, >>4]
    alu[--, u, -, 4]
    bne[spp_done#]
    alu[u, t, and, 0xF]
    alu[--, u, -, 5]
    blo[spp_done#]
    immed[code, DROP_SPP_TTL_EXPIRED]
    alu_shf[u, --, b, $$d10, >>8]
    alu[u, u, and, 0xFF]                    // inner TTL (byte 50)
    alu[--, u, -, 2]
    blo[spp_done#]
    // key: slice | kind 1, dst, src, dport | sport, proto << 24 | mi << 16
    alu_shf[u, OPT_IPV4, or, sid, <<8]
    alu_shf[$k0, --, b, u, <<8]
    alu_shf[v, --, b, $$d13, >>16]          // inner destination: bytes 58..61
    alu_shf[$k1, v, or, $$d12, <<16]
    alu_shf[v, --, b, $$d12, >>16]          // inner source: bytes 54..57
    alu_shf[$k2, v, or, $$d11, <<16]
    alu_shf[u, --, b, mi, <<16]
    alu_shf[$k4, u, or, $$d10, <<24]        // inner protocol (byte 51) << 24 | mi << 16
    alu[v, $$d10, and, 0xFF]
    immed[u, 0]
    alu[--, t, -, 0x45]
    bne[spp_v4_key#]
    alu[--, v, -, 6]
    beq[spp_v4_ports#]
    alu[--, v, -, 17]
    bne[spp_v4_key#]
spp_v4_ports#:
    alu[--, len, -, 66]
    blo[spp_v4_key#]
    alu_shf[u, --, b, $$d14, >>16]          // dport: bytes 64..65
    alu_shf[u, --, b, u, <<16]
    alu_shf[t, --, b, $$d13, <<16]          // sport: bytes 62..63
    alu_shf[t, --, b, t, >>16]
    alu[u, u, or, t]
spp_v4_key#:
    alu[$k3, --, b, u]
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    immed[code, DROP_SPP_NO_FILTER]
    br_bclr[$r0, TCAM_HIT_BIT, spp_done#]
    spp_result()
    // inner TTL - 1 and its checksum (RFC 1624 eq. 3, as hdr_format)
    immed[u, 0x100]
    alu[w12, $$d10, -, u]
    alu_shf[t, --, ~b, $$d11, >>16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[t, --, b, t, >>16]
    immed[u, 0xFEFF]
    alu[t, t, +, u]
    alu_shf[u, --, b, t, >>16]
    alu[t, t, +, u]
    alu[t, --, ~b, t]
    alu_shf[t, --, b, t, <<16]
    alu_shf[u, --, b, $$d11, <<16]
    alu_shf[u, --, b, u, >>16]
    alu[w13, t, or, u]
    alu[w10, --, b, $$d8]
#endm

#endif
