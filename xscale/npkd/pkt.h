/* pkt.h -- packets the control plane reads and builds (RFC 791, 792, 826, 1812).
 * Pure functions on byte buffers: the native unit tests run them under ASan/UBSan,
 * and npkit.emulator.traffic.control (the oracle's control plane) builds the same
 * bytes in Python. */
#ifndef NPKD_PKT_H
#define NPKD_PKT_H
#include <stddef.h>
#include <stdint.h>

#define ETH_HLEN 14
#define ETH_MIN 60          /* frames are padded to 60 bytes (no FCS) */
#define ICMP_MAX_IP 576     /* RFC 1812 4.3.2.3: an ICMP error fits in 576 bytes */
#define IP_TTL_OWN 64       /* TTL of datagrams the router originates */
#define IP_TOS_ERROR 0xC0   /* RFC 1812 4.3.2.5: precedence 6 for ICMP errors */
#define NPKD_FRAME_MAX 1514

enum {
    ICMP_ECHO_REPLY = 0, ICMP_UNREACH = 3, ICMP_REDIRECT = 5, ICMP_ECHO = 8,
    ICMP_TIME_EXCEEDED = 11, ICMP_PARAM_PROBLEM = 12
};
enum { UNREACH_NET = 0, UNREACH_HOST = 1, UNREACH_PROTO = 2, UNREACH_PORT = 3, UNREACH_SRCFAIL = 5 };
enum { IPPROTO_ICMP_ = 1, IPPROTO_TCP_ = 6, IPPROTO_UDP_ = 17 };

typedef struct ip_view {
    uint32_t src, dst;
    uint16_t tot_len, id, frag;     /* frag: flags + offset as in the header */
    uint8_t ihl, tos, ttl, proto;
    const uint8_t *hdr;             /* the IP header (frame + 14) */
} ip_view;

uint16_t inet_csum(const uint8_t *p, size_t n, uint32_t sum);
uint32_t frame_digest(const uint8_t *f, uint32_t len);   /* FNV-1a over min(len, 128) bytes */
/* 0 ok: an IPv4 frame whose header lies in the frame */
int ip_parse(const uint8_t *f, uint32_t len, ip_view *v);
int ip_is_unicast_src(uint32_t a);   /* not 0/8, 127/8, class D/E, limited broadcast */
int icmp_is_error(const uint8_t *f, uint32_t len, const ip_view *v);

/* The router's own datagrams: Ethernet header (dst, src) + IPv4 header (given id/tos;
 * no options but an echo reply's) + ICMP; padded to ETH_MIN; all checksums set.  Return
 * the frame length. */
/* ICMP error `type/code` about `orig` (a received frame): aux = the 4 bytes after the
 * checksum (redirect gateway, parameter-problem pointer << 24, 0); quotes the original
 * datagram as received, as much as fits in 576 bytes of IP. */
uint32_t build_icmp_error(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t ip_src,
                          const uint8_t *orig, uint32_t orig_len, uint8_t type, uint8_t code, uint32_t aux);
/* The Echo Reply to the echo request `req` (RFC 1122 3.2.2.6, RFC 1812 4.3.3.6): from
 * the address the request was sent to, the request's ICMP message whole.  A request with
 * IP options gets them back as these rules say (pkt.c reply_options): a used-up source
 * route reversed into a source route of the same type, the reply addressed to its first
 * hop; Record Route and Timestamp with this router added (out_addr: the interface the
 * reply leaves by; ts_ms: ms since midnight UT; own[]: the router's addresses, for a
 * prespecified timestamp); no other option.  A request without options: an IHL 5 header.
 * Returns the frame length, 0 when req is not an IPv4 datagram with well-formed options. */
uint32_t build_echo_reply(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], const uint8_t *req,
                          uint32_t req_len, const uint32_t *own, int nown, uint32_t out_addr, uint32_t ts_ms);
/* where that reply goes first (*dst: the request's source, or the first hop of the
 * return route) and whether the route back is strict (the first hop must be on-link);
 * -1 as build_echo_reply's 0 */
int echo_reply_route(const uint8_t *req, uint32_t req_len, const uint32_t *own, int nown, uint32_t *dst, int *strict);
/* ARP (RFC 826): a request for `target` from (mac, ip), broadcast; a reply to (tha, tpa) */
uint32_t build_arp(uint8_t *out, int op, const uint8_t sha[6], uint32_t spa, const uint8_t tha[6], uint32_t tpa);
/* Forwarding rewrite: MACs, TTL - 1; checksum by RFC 1624 eq. 3 (incremental) or, when
 * full, recomputed over the header (after option processing). */
void forward_rewrite(uint8_t *f, const uint8_t dst_mac[6], const uint8_t src_mac[6], int full);

/* IP options (RFC 791 3.1, RFC 1812 5.2.4): process the options of frame f (IHL > 5) as
 * the router that forwards it out of an interface with address out_addr.  Source
 * route: when the datagram is addressed to one of own[] and the route is not
 * exhausted, the next address becomes the destination and out_addr is recorded (the
 * caller routes again and calls with pass 2 to record the right interface).
 * Returns OPT_OK, or OPT_BAD with *pointer = the offending octet (parameter problem). */
enum { OPT_OK = 0, OPT_BAD = 1 };
typedef struct opt_result {
    int source_routed;      /* an LSRR/SSRR option moved the destination */
    int strict;             /* it was strict (SSRR): the next hop must be on-link */
    int sr_exhausted;       /* addressed to us with a source route that is used up */
    uint8_t pointer;        /* OPT_BAD: offending octet, from the IP header start */
    int sr_at, rr_at, ts_at;   /* where each option starts (0: none), for pass 2 */
    int ts_ours;            /* a prespecified timestamp (flag 3) names one of own[] next */
} opt_result;
int ip_options_route(uint8_t *f, const uint32_t *own, int nown, opt_result *r);
/* pass 2, once the outgoing interface is known: record route, timestamp, the address
 * recorded for a source route; ts_ms = milliseconds since midnight UT.  A prespecified
 * timestamp is added when the next address named is any of the router's (r->ts_ours:
 * RFC 1812 5.3.13.6), not only the outgoing interface's. */
int ip_options_record(uint8_t *f, const opt_result *r, uint32_t out_addr, uint32_t ts_ms, uint8_t *pointer);
#endif
