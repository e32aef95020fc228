// udplb.uc -- the UDP load balancer's block (examples/apps/udplb, docs/applications.md
// "A data path of your own"): between npkit's rx and qm, in place of parse, lookup and
// hdr_format.
// In:  RING_IN  (packet word, frame length) from rx.
// Out: RING_OUT (packet word, output port) to the qm, the frame rewritten for a backend;
//      or the frame dropped with one of the application's reasons (reasons.yaml), tested
//      in this order: lb_runt, lb_not_ours, lb_not_ipv4, lb_bad_header, lb_fragment,
//      lb_not_udp, lb_no_service, lb_ttl_expired.  model.py says the same in Python.
//
// The service is looked up in tables.yaml's `services` (services_table.h: one 2-word SRAM
// read a row, rows in order); the backend is row
//     first + ((h * count) >> 16),  h = (x >> 16) ^ (x & 0xFFFF),  x = src_ip ^ src_port
// of `backends` (backends_table.h: one 3-word read).  The rewrite: destination MAC and
// address the backend's, source MAC the output port's (npk_port_lm_init's local memory),
// TTL - 1, IPv4 and UDP checksums by RFC 1624 eq. 3 (a zero UDP checksum stays zero, a
// result of zero is sent as 0xFFFF, RFC 768).
//
// The frame's first 48 bytes are read and written back as 6 quadwords; the IP header is
// at byte 14 (2 mod 4), so its fields straddle longwords: LW k holds bytes 4k..4k+3.
#include "npk_sys.h"
#include "npk_block.h"
#include "services_table.h"
#include "backends_table.h"

// the entry layouts this code reads (tables.yaml's fields, in this order)
#if (SERVICES_ENTRY_WORDS != 2) || (SERVICES_PORT_SHIFT != 16) || (SERVICES_FIRST_SHIFT != 8) || (SERVICES_COUNT_SHIFT != 0)
#error "udplb.uc reads services as {vip: ipv4, port: 16, first: 8, count: 8}"
#endif
#if (BACKENDS_ENTRY_WORDS != 3) || (BACKENDS_MAC_LO_SHIFT != 16) || (BACKENDS_PORT_SHIFT != 8)
#error "udplb.uc reads backends as {ip: ipv4, mac_hi: 32, mac_lo: 16, port: 8}"
#endif

// fold the 32-bit sum R to 16 bits (end-around carries), T scratch
#macro lb_fold(R, T)
    alu_shf[T, --, b, R, >>16]
    alu[R, R, and, m16]
    alu[R, R, +, T]
    alu_shf[T, --, b, R, >>16]
    alu[R, R, +, T]
#endm

#macro lb_body()
.begin
    .reg len buf t u x h n cnt first dst dport src sport ip ck uck ds oport addr m16
    .reg read $$d0 $$d1 $$d2 $$d3 $$d4 $$d5 $$d6 $$d7 $$d8 $$d9 $$d10 $$d11
    .xfer_order $$d0 $$d1 $$d2 $$d3 $$d4 $$d5 $$d6 $$d7 $$d8 $$d9 $$d10 $$d11
    .reg write $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7 $$w8 $$w9 $$w10 $$w11
    .xfer_order $$w0 $$w1 $$w2 $$w3 $$w4 $$w5 $$w6 $$w7 $$w8 $$w9 $$w10 $$w11
    .reg read $s0 $s1
    .xfer_order $s0 $s1
    .reg read $b0 $b1 $b2
    .xfer_order $b0 $b1 $b2
    .sig s_d s_s s_b s_w
    alu[len, --, b, $i1]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 0..47: Ethernet, IPv4 (byte 14) and UDP (byte 34) headers, 6 bytes more
    dram[read, $$d0, buf, 0, 6], sig_done[s_d]
    alu_shf[t, --, b, pw, >>28]
    alu[t, t, and, 7]
    alu_shf[t, --, b, t, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_0, t]            // the input port's MAC
    immed[kind, OUT_DROP]
    immed[m16, 0xFFFF]
    ctx_arb[s_d]
    // lb_runt: shorter than 60 bytes (64 with the FCS: IEEE 802.3's minimum)
    alu[--, len, -, 60]
    bcc[lb_runt#]
    // lb_not_ours: destination MAC not the input port's
    alu[t, --, b, $$d0]
    alu[--, t, -, *l$index0[0]]
    bne[lb_not_ours#]
    alu_shf[t, --, b, $$d1, >>16]
    alu[--, t, -, *l$index0[1]]
    bne[lb_not_ours#]
    // lb_not_ipv4: EtherType
    alu_shf[t, --, b, $$d3, >>16]
    immed[u, 0x0800]
    alu[--, t, -, u]
    bne[lb_not_ipv4#]
    // lb_bad_header: version 4 and IHL 5, total length 20 .. len - 14, checksum
    alu_shf[t, --, b, $$d3, >>8]
    alu[t, t, and, 0xFF]
    alu[--, t, -, 0x45]
    bne[lb_bad#]
    alu_shf[t, --, b, $$d4, >>16]
    alu[--, t, -, 20]
    bcc[lb_bad#]
    alu[u, len, -, 14]
    alu[--, u, -, t]
    bcc[lb_bad#]
    // the 16-bit words at bytes 14..33: low half of d3, d4..d7, high half of d8
    alu_shf[u, --, b, $$d8, >>16]
    alu[t, $$d3, and, m16]
    alu[t, t, +, $$d4]
    alu[t, t, +carry, $$d5]
    alu[t, t, +carry, $$d6]
    alu[t, t, +carry, $$d7]
    alu[t, t, +carry, u]
    alu[t, t, +carry, 0]
    alu[t, t, +carry, 0]
    lb_fold(t, u)
    alu[t, t, and, m16]
    alu[--, t, -, m16]
    bne[lb_bad#]
    // lb_fragment: more-fragments or an offset (flags/offset bits 13..0)
    alu_shf[t, --, b, $$d5, >>16]
    alu_shf[t, --, b, t, <<18]
    bne[lb_fragment#]
    // lb_not_udp
    alu[t, $$d5, and, 0xFF]
    alu[--, t, -, 17]
    bne[lb_not_udp#]
    // lb_no_service: (destination address, UDP destination port) in services, in order
    alu[t, --, b, $$d7]
    dbl_shf[dst, t, $$d8, >>16]                 // IP bytes 16..19
    alu_shf[dport, --, b, $$d9, >>16]
    immed[addr, SERVICES_BASE]
    immed[n, SERVICES_ROWS]
lb_svc#:
    alu[--, --, b, n]
    beq[lb_no_service#]
    sram[read, $s0, addr, 0, 2], ctx_swap[s_s]
    alu[n, n, -, 1]
    alu[addr, addr, +, (SERVICES_ENTRY_WORDS << 2)]
    alu[--, dst, -, $s0]
    bne[lb_svc#]
    alu_shf[t, --, b, $s1, >>16]
    alu[--, t, -, dport]
    bne[lb_svc#]
    // lb_ttl_expired: TTL 0 or 1
    alu_shf[t, --, b, $$d5, >>8]
    alu[t, t, and, 0xFF]
    alu[--, t, -, 2]
    bcc[lb_ttl#]
    // the backend: first + (h * count >> 16), h the 16-bit fold of src ^ sport
    alu[t, --, b, $$d6]
    dbl_shf[src, t, $$d7, >>16]                 // IP bytes 12..15
    alu[sport, $$d8, and, m16]
    alu[x, src, xor, sport]
    alu_shf[h, --, b, x, >>16]
    alu[x, x, and, m16]
    alu[h, h, xor, x]
    alu_shf[first, 0xFF, and, $s1, >>8]
    alu[cnt, $s1, and, 0xFF]
    beq[lb_no_service#]                          // a service with no backends (model.py refuses it)
    immed[x, 0]
lb_mul#:
    alu[x, x, +, h]
    alu[cnt, cnt, -, 1]
    bne[lb_mul#]
    alu_shf[x, --, b, x, >>16]
    alu[x, x, +, first]
    alu_shf[t, --, b, x, <<3]                    // 12 bytes a backend
    alu_shf[u, --, b, x, <<2]
    alu[t, t, +, u]
    immed[addr, BACKENDS_BASE]
    sram[read, $b0, addr, t, 3], ctx_swap[s_b]
    alu_shf[oport, 0xFF, and, $b2, >>8]
    alu_shf[t, --, b, oport, <<4]
    local_csr_wr[ACTIVE_LM_ADDR_1, t]            // the output port's MAC
    alu[ip, --, b, $b0]
    // bytes 0..11: the backend's MAC, the output port's MAC
    alu[$$w0, --, b, $b1]
    alu_shf[t, --, b, $b2, >>16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[u, --, b, *l$index1[0], >>16]
    alu[$$w1, t, or, u]
    alu_shf[t, --, b, *l$index1[0], <<16]
    alu[u, --, b, *l$index1[1]]
    alu[$$w2, t, or, u]
    // bytes 12..21 unchanged, TTL - 1
    alu[$$w3, --, b, $$d3]
    alu[$$w4, --, b, $$d4]
    immed[u, 0x100]
    alu[t, --, b, $$d5]
    alu[$$w5, t, -, u]
    // ds: the address's change, ~old + new of both halves (RFC 1624 eq. 3)
    alu_shf[ds, m16, and~, dst, >>16]
    alu[x, m16, and~, dst]
    alu[ds, ds, +, x]
    alu_shf[x, --, b, ip, >>16]
    alu[ds, ds, +, x]
    alu[x, ip, and, m16]
    alu[ds, ds, +, x]
    // IPv4 checksum: ~(~HC + 0xFEFF (TTL - 1) + ds)
    alu_shf[ck, m16, and~, $$d6, >>16]
    immed[u, 0xFEFF]
    alu[ck, ck, +, u]
    alu[ck, ck, +, ds]
    lb_fold(ck, u)
    alu[ck, --, ~b, ck]
    alu_shf[ck, --, b, ck, <<16]
    alu[h, $$d6, and, m16]
    alu[$$w6, ck, or, h]
    // bytes 28..33: source address low half, the backend's address
    alu_shf[t, --, b, $$d7, >>16]
    alu_shf[t, --, b, t, <<16]
    alu_shf[u, --, b, ip, >>16]
    alu[$$w7, t, or, u]
    alu_shf[first, --, b, ip, <<16]
    alu[$$w8, first, or, sport]
    alu[$$w9, --, b, $$d9]
    // UDP checksum: ~(~UC + ds); 0 (none) stays 0, a result of 0 is sent as 0xFFFF
    alu_shf[uck, --, b, $$d10, >>16]
    beq[lb_uck_none#]
    alu_shf[uck, m16, and~, $$d10, >>16]
    alu[uck, uck, +, ds]
    lb_fold(uck, u)
    alu[uck, m16, and~, uck]
    bne[lb_uck_set#]
    alu[uck, --, b, m16]
lb_uck_set#:
    alu_shf[uck, --, b, uck, <<16]
lb_uck_none#:
    alu[cnt, $$d10, and, m16]
    alu[$$w10, uck, or, cnt]
    alu[$$w11, --, b, $$d11]
    dram[write, $$w0, buf, 0, 6], ctx_swap[s_w]
    alu[ow1, --, b, oport]
    br[lb_done#], defer[1]
    immed[kind, OUT_FORWARD]

    // ---- out of line: the drops ------------------------------------------------------
lb_runt#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_RUNT]
lb_not_ours#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_NOT_OURS]
lb_not_ipv4#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_NOT_IPV4]
lb_bad#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_BAD_HEADER]
lb_fragment#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_FRAGMENT]
lb_not_udp#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_NOT_UDP]
lb_no_service#:
    br[lb_done#], defer[1]
    immed[code, DROP_LB_NO_SERVICE]
lb_ttl#:
    immed[code, DROP_LB_TTL_EXPIRED]
lb_done#:
.end
#endm

    npk_thread_setup()
    br!=ctx[0, lb_loop#]
    npk_port_lm_init()
    npk_start_tokens()
lb_loop#:
    npk_get_input(lb_loop#)
    lb_body()
    npk_emit(lb_loop#)
