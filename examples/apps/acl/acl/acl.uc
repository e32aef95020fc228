// acl.uc -- an access-control block between lookup and hdr_format (the ACL application,
// docs/applications.md).
// In:  RING_IN  (packet word, next-hop index) from lookup.
// Out: RING_OUT the same message, unchanged, to hdr_format; or the packet dropped with
//      DROP_ACL_DENY when it is the first fragment (offset 0) of a TCP or UDP packet
//      whose source address is in a rule's prefix and whose destination port is the
//      rule's port.  The rules are tables.yaml's `acl` table (acl_table.h, written by
//      `npk link --app`): one SRAM read of each field a rule, rules in their order.
//
// The IP header is at frame byte 14; parse excepts a header with options (IHL > 5), so
// a packet that gets here has its TCP/UDP ports at frame bytes 34..37.
#include "npk_sys.h"
#include "npk_block.h"
#include "acl_table.h"

#define ACL_ENTRY_BYTES (ACL_ENTRY_WORDS << 2)

#macro acl_body()
.begin
    .reg buf t m src dport n tsrc tmask tport
    .reg read $$d0 $$d1 $$d2 $$d3 $$d4 $$d5
    .xfer_order $$d0 $$d1 $$d2 $$d3 $$d4 $$d5
    .reg read $a $b $c
    .sig s_d s_a s_b s_c
    immed[kind, OUT_FORWARD]
    alu_shf[buf, --, b, pw, <<16]
    alu_shf[buf, --, b, buf, >>(16 - BUF_SHIFT)]
    // frame bytes 16..39: IP bytes 2..25 (flags/fragment offset, protocol, source
    // address, then the first 6 bytes of the TCP/UDP header)
    dram[read, $$d0, buf, 16, 3], ctx_swap[s_d]
    alu_shf[t, --, b, $$d1, >>16]
    alu_shf[t, --, b, t, <<19]              // the 13-bit fragment offset, at the top
    bne[acl_done#]                          // not a first fragment: pass
    alu[t, $$d1, and, 0xFF]                 // protocol
    alu[--, t, -, 6]
    beq[acl_l4#]
    alu[--, t, -, 17]
    bne[acl_done#]                          // neither TCP nor UDP: pass
acl_l4#:
    alu_shf[src, --, b, $$d2, <<16]         // source address: IP bytes 12..15
    alu_shf[t, --, b, $$d3, >>16]
    alu[src, src, or, t]
    alu_shf[dport, --, b, $$d5, >>16]       // destination port: frame bytes 36..37
    immed[tsrc, (ACL_BASE + (ACL_SRC_WORD << 2))]
    immed[tmask, (ACL_BASE + (ACL_SRC_NETMASK_WORD << 2))]
    immed[tport, (ACL_BASE + (ACL_DPORT_WORD << 2))]
    immed[m, ACL_DPORT_MASK]
    immed[n, ACL_ROWS]
acl_row#:
    alu[--, --, b, n]
    beq[acl_done#]                          // no rule matched: pass
    sram[read, $a, tsrc, 0, 1], sig_done[s_a]
    sram[read, $b, tmask, 0, 1], sig_done[s_b]
    sram[read, $c, tport, 0, 1], sig_done[s_c]
    ctx_arb[s_a, s_b, s_c]
    alu[n, n, -, 1]
    alu[tsrc, tsrc, +, ACL_ENTRY_BYTES]
    alu[tmask, tmask, +, ACL_ENTRY_BYTES]
    alu[tport, tport, +, ACL_ENTRY_BYTES]
    alu_shf[t, --, b, $c, >>ACL_DPORT_SHIFT]
    alu[t, t, and, m]
    alu[--, t, -, dport]
    bne[acl_row#]                           // another port
    alu[t, src, and, $b]
    alu[--, t, -, $a]
    bne[acl_row#]                           // source not in the prefix
    immed[kind, OUT_DROP]
    immed[code, DROP_ACL_DENY]
acl_done#:
.end
#endm

    npk_thread_setup()
    br!=ctx[0, acl_loop#]
    npk_start_tokens()
acl_loop#:
    npk_get_input(acl_loop#)
    alu[ow1, --, b, $i1]
    acl_body()
    npk_emit(acl_loop#)
