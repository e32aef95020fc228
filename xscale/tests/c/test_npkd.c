/* test_npkd.c -- native unit tests of npkd's packet builders, table code and control
 * plane engine, under ASan/UBSan (driven by tests/xscale/test_npkd.py).  Prints one
 * line per check that fails and exits 1 if any did. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"
#include "lpm.h"
#include "pkt.h"
#include "tables.h"

static int failures, checks;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                     \
        }                                                                              \
    } while (0)

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static const uint8_t ROUTER_MAC[6] = {0x02, 0x4e, 0x50, 0, 0, 1};
static const uint8_t HOST_MAC[6] = {0x02, 0, 0, 0xff, 0, 1};

/* a UDP datagram in an Ethernet frame: src -> dst, ttl, `payload` bytes, IHL 5 + opt/4 */
static uint32_t udp_frame(uint8_t *f, uint32_t src, uint32_t dst, uint8_t ttl, uint32_t payload, const uint8_t *opt,
                          uint32_t optlen)
{
    memset(f, 0, 1600);
    memcpy(f, ROUTER_MAC, 6);
    memcpy(f + 6, HOST_MAC, 6);
    f[12] = 8;
    uint8_t *h = f + 14;
    uint32_t hl = 20 + optlen, tot = hl + 8 + payload;
    h[0] = (uint8_t)(0x40 | hl / 4);
    h[2] = (uint8_t)(tot >> 8);
    h[3] = (uint8_t)tot;
    h[4] = 0x12;
    h[5] = 0x34;
    h[8] = ttl;
    h[9] = 17;
    for (int i = 0; i < 4; i++) {
        h[12 + i] = (uint8_t)(src >> (24 - 8 * i));
        h[16 + i] = (uint8_t)(dst >> (24 - 8 * i));
    }
    if (optlen) memcpy(h + 20, opt, optlen);
    uint16_t ck = inet_csum(h, hl, 0);
    h[10] = (uint8_t)(ck >> 8);
    h[11] = (uint8_t)ck;
    uint8_t *u = h + hl;
    u[0] = 0x30;
    u[1] = 0x39;
    u[2] = 0x00;
    u[3] = 0x35;
    u[4] = (uint8_t)((8 + payload) >> 8);
    u[5] = (uint8_t)(8 + payload);
    for (uint32_t i = 0; i < payload; i++) u[8 + i] = (uint8_t)i;
    uint32_t n = 14 + tot;
    return n < 60 ? 60 : n;
}

/* an ICMP Echo Request (id 0xAB, seq 7, 20 bytes of data 0..19) src -> dst, with options */
static uint32_t echo_frame(uint8_t *f, uint32_t src, uint32_t dst, const uint8_t *opt, uint32_t optlen)
{
    uint32_t n = udp_frame(f, src, dst, 64, 20, opt, optlen);
    uint8_t *h = f + 14, *icmp = h + 20 + optlen;
    h[9] = 1;
    h[10] = h[11] = 0;
    uint16_t ck = inet_csum(h, 20 + optlen, 0);
    h[10] = (uint8_t)(ck >> 8);
    h[11] = (uint8_t)ck;
    memset(icmp, 0, 8);
    icmp[0] = 8;
    icmp[5] = 0xAB;
    icmp[7] = 7;
    for (int i = 0; i < 20; i++) icmp[8 + i] = (uint8_t)i;
    ck = inet_csum(icmp, 28, 0);
    icmp[2] = (uint8_t)(ck >> 8);
    icmp[3] = (uint8_t)ck;
    return n;
}

/* the reply to an echo request (RFC 1812 4.3.3.6) with no options to return (none, or
 * NOPs only): the ICMP message whole, from the address asked, IHL 5, every checksum right */
static void check_echo_reply(const uint8_t *out, uint32_t m, uint32_t from, uint32_t to)
{
    ip_view v;
    CHECK(ip_parse(out, m, &v) == 0 && v.ihl == 5 && v.tot_len == 48 && v.proto == 1 && v.ttl == 64);
    CHECK(v.src == from && v.dst == to && inet_csum(out + 14, 20, 0) == 0);
    CHECK(out[34] == 0 && out[35] == 0 && inet_csum(out + 34, 28, 0) == 0);
    CHECK(out[39] == 0xAB && out[41] == 7 && out[42] == 0 && out[61] == 19);
}

static const uint32_t OWN[3] = {0x0A000001, 0x0A000101, 0x0A000201};
#define S_ADDR 0xC6120001u      /* the requests' source */
#define OUT_ADDR 0x0A000101u    /* the interface the replies leave by */
#define TS 80000123u            /* the time they are made */

/* the reply to an echo request from S_ADDR to 10.0.0.1 with options opt (optlen): the
 * options it carries (want, wlen: a multiple of 4) and its destination; the rest as
 * for every reply.  Returns whether all is so. */
static int echo_opts(const uint8_t *opt, uint32_t optlen, const uint8_t *want, uint32_t wlen, uint32_t to)
{
    uint8_t f[1600], out[1600];
    uint32_t n = echo_frame(f, S_ADDR, 0x0A000001, opt, optlen), dst;
    uint32_t m = build_echo_reply(out, HOST_MAC, ROUTER_MAC, f, n, OWN, 3, OUT_ADDR, TS);
    int strict = -1, ok = 1;
    ip_view v;
    ok &= m == 14 + 20 + wlen + 28 && !ip_parse(out, m, &v) && v.ihl == 5 + wlen / 4 && v.tot_len == 48 + wlen;
    ok &= v.src == 0x0A000001 && v.dst == to && v.ttl == 64 && v.id == 0x1234 && v.proto == 1;
    ok &= inet_csum(out + 14, 20 + wlen, 0) == 0 && (!wlen || !memcmp(out + 34, want, wlen));
    const uint8_t *icmp = out + 34 + wlen;
    ok &= icmp[0] == 0 && icmp[5] == 0xAB && icmp[7] == 7 && icmp[27] == 19 && inet_csum(icmp, 28, 0) == 0;
    ok &= !echo_reply_route(f, n, OWN, 3, &dst, &strict) && dst == to && strict == (wlen && want[0] == 137);
    return ok;
}

/* RFC 1122 3.2.2.6 / RFC 1812 4.3.3.6: the options an Echo Reply carries back */
static void test_echo_options(void)
{
    /* Record Route with room: this router's outgoing address added (the EOL padding kept) */
    const uint8_t rr[12] = {7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(echo_opts(rr, 12, (const uint8_t[12]){7, 11, 8, 10, 0, 1, 1, 0, 0, 0, 0, 0}, 12, S_ADDR));
    /* Record Route full: as received */
    const uint8_t rr_full[8] = {7, 7, 8, 1, 2, 3, 4, 0};
    CHECK(echo_opts(rr_full, 8, rr_full, 8, S_ADDR));
    /* Timestamp, flag 0: a timestamp; full: the overflow count up by one */
    const uint8_t ts0[12] = {68, 12, 5, 0x20, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(echo_opts(ts0, 12, (const uint8_t[12]){68, 12, 9, 0x20, 0x04, 0xC4, 0xB4, 0x7B, 0, 0, 0, 0}, 12, S_ADDR));
    const uint8_t ts0_full[8] = {68, 8, 9, 0x20, 0, 0, 0, 9};
    CHECK(echo_opts(ts0_full, 8, (const uint8_t[8]){68, 8, 9, 0x30, 0, 0, 0, 9}, 8, S_ADDR));
    /* flag 1: address and timestamp; full: overflow */
    const uint8_t ts1[12] = {68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(echo_opts(ts1, 12, (const uint8_t[12]){68, 12, 13, 1, 10, 0, 1, 1, 0x04, 0xC4, 0xB4, 0x7B}, 12, S_ADDR));
    const uint8_t ts1_full[12] = {68, 12, 13, 1, 1, 2, 3, 4, 0, 0, 0, 5};
    CHECK(echo_opts(ts1_full, 12, (const uint8_t[12]){68, 12, 13, 0x11, 1, 2, 3, 4, 0, 0, 0, 5}, 12, S_ADDR));
    /* flag 3: a timestamp when the next address named is any of ours (10.0.2.1: not the
     * interface the reply leaves by); another's: as received; full: overflow */
    const uint8_t ts3[12] = {68, 12, 5, 3, 10, 0, 2, 1, 0, 0, 0, 0};
    CHECK(echo_opts(ts3, 12, (const uint8_t[12]){68, 12, 13, 3, 10, 0, 2, 1, 0x04, 0xC4, 0xB4, 0x7B}, 12, S_ADDR));
    const uint8_t ts3_other[12] = {68, 12, 5, 3, 10, 0, 9, 1, 0, 0, 0, 0};
    CHECK(echo_opts(ts3_other, 12, ts3_other, 12, S_ADDR));
    const uint8_t ts3_full[12] = {68, 12, 13, 3, 10, 0, 2, 1, 0, 0, 0, 1};
    CHECK(echo_opts(ts3_full, 12, (const uint8_t[12]){68, 12, 13, 0x13, 10, 0, 2, 1, 0, 0, 0, 1}, 12, S_ADDR));
    /* a used-up loose source route S -> 1.1.1.1 -> 2.2.2.2 -> us: back to 2.2.2.2 with
     * {1.1.1.1, S}, pointer on the first */
    const uint8_t lsrr[12] = {131, 11, 12, 1, 1, 1, 1, 2, 2, 2, 2, 0};
    CHECK(echo_opts(lsrr, 12, (const uint8_t[12]){131, 11, 4, 1, 1, 1, 1, 198, 18, 0, 1, 0}, 12, 0x02020202));
    /* strict: the same, strict (the first hop on-link is the caller's to check) */
    const uint8_t ssrr[8] = {137, 7, 8, 10, 0, 1, 2, 0};
    CHECK(echo_opts(ssrr, 8, (const uint8_t[8]){137, 7, 4, 198, 18, 0, 1, 0}, 8, 0x0A000102));
    /* a route that names the source first (RFC 1122 3.2.1.8 case B): S once on the way back */
    const uint8_t case_b[12] = {131, 11, 12, 198, 18, 0, 1, 2, 2, 2, 2, 0};
    CHECK(echo_opts(case_b, 12, (const uint8_t[8]){131, 7, 4, 198, 18, 0, 1, 0}, 8, 0x02020202));
    /* the last hop is ours (one the router made to itself, cp.c options): not a hop back */
    const uint8_t own_last[12] = {131, 11, 12, 1, 1, 1, 1, 10, 0, 2, 1, 0};
    CHECK(echo_opts(own_last, 12, (const uint8_t[8]){131, 7, 4, 198, 18, 0, 1, 0}, 8, 0x01010101));
    /* no hop at all: no source route back, straight to S */
    const uint8_t empty[4] = {131, 3, 4, 0};
    CHECK(echo_opts(empty, 4, NULL, 0, S_ADDR));
    /* all together, with NOPs and a router alert (not returned): route, RR, TS in that order */
    const uint8_t all[36] = {1, 0x94, 4, 0, 0, 68, 8, 5, 0, 0, 0, 0, 0, 7, 7, 4, 0, 0, 0, 0,
                             137, 11, 12, 1, 1, 1, 1, 10, 0, 1, 2, 1, 0, 0, 0, 0};
    CHECK(echo_opts(all, 36, (const uint8_t[28]){137, 11, 4, 1, 1, 1, 1, 198, 18, 0, 1, 7, 7, 8, 10, 0, 1, 1,
                                                 68, 8, 9, 0, 0x04, 0xC4, 0xB4, 0x7B, 0, 0}, 28, 0x0A000102));
    /* malformed options (checked by the caller first): no reply */
    uint8_t f[1600], out[1600];
    const uint8_t bad[4] = {7, 2, 0, 0};
    uint32_t n = echo_frame(f, S_ADDR, 0x0A000001, bad, 4), dst;
    int strict;
    CHECK(build_echo_reply(out, HOST_MAC, ROUTER_MAC, f, n, OWN, 3, OUT_ADDR, TS) == 0);
    CHECK(echo_reply_route(f, n, OWN, 3, &dst, &strict) == -1);
}

static void test_checksums(void)
{
    /* RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2 */
    const uint8_t v[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    CHECK(inet_csum(v, sizeof v, 0) == (uint16_t)~0xddf2);
    uint8_t f[1600], g[1600];
    uint32_t n = udp_frame(f, 0xC6120001, 0x01020304, 64, 30, NULL, 0);
    memcpy(g, f, n);
    forward_rewrite(f, HOST_MAC, ROUTER_MAC, 0);     /* RFC 1624 incremental */
    forward_rewrite(g, HOST_MAC, ROUTER_MAC, 1);     /* full recompute */
    CHECK(!memcmp(f, g, n));
    CHECK(f[14 + 8] == 63 && inet_csum(f + 14, 20, 0) == 0);
    CHECK(!memcmp(f, HOST_MAC, 6) && !memcmp(f + 6, ROUTER_MAC, 6));
}

static void test_icmp_error(void)
{
    uint8_t f[1600], out[1600];
    uint32_t n = udp_frame(f, 0xC6120001, 0x01020304, 1, 30, NULL, 0);
    uint32_t m = build_icmp_error(out, HOST_MAC, ROUTER_MAC, 0x0A000001, f, n, ICMP_TIME_EXCEEDED, 0, 0);
    ip_view v;
    CHECK(ip_parse(out, m, &v) == 0);
    CHECK(v.tos == IP_TOS_ERROR && v.ttl == 64 && v.proto == 1 && v.src == 0x0A000001 && v.dst == 0xC6120001);
    CHECK(v.tot_len == 20 + 8 + 20 + 8 + 30 && m == 14u + v.tot_len);
    CHECK(inet_csum(out + 14, 20, 0) == 0);
    CHECK(inet_csum(out + 34, v.tot_len - 20u, 0) == 0);
    CHECK(out[34] == 11 && out[35] == 0 && rd32(out + 38) == 0);
    CHECK(!memcmp(out + 42, f + 14, 58));                 /* the datagram as received */
    CHECK(v.id == 0x1234);
    /* a big datagram: the error stops at 576 bytes of IP */
    n = udp_frame(f, 0xC6120001, 0x01020304, 1, 1400, NULL, 0);
    m = build_icmp_error(out, HOST_MAC, ROUTER_MAC, 0x0A000001, f, n, ICMP_UNREACH, UNREACH_NET, 0);
    CHECK(ip_parse(out, m, &v) == 0 && v.tot_len == 576 && inet_csum(out + 34, 556, 0) == 0);
    /* redirect: the gateway in the second word; parameter problem: the pointer */
    m = build_icmp_error(out, HOST_MAC, ROUTER_MAC, 0x0A000001, f, n, ICMP_REDIRECT, 1, 0x0A000002);
    CHECK(out[34] == 5 && out[35] == 1 && rd32(out + 38) == 0x0A000002);
    m = build_icmp_error(out, HOST_MAC, ROUTER_MAC, 0x0A000001, f, n, ICMP_PARAM_PROBLEM, 0, 22u << 24);
    CHECK(out[34] == 12 && out[38] == 22 && inet_csum(out + 34, 556, 0) == 0);
    /* the rules' helpers */
    CHECK(ip_is_unicast_src(0xC6120001) && !ip_is_unicast_src(0x7F000001) && !ip_is_unicast_src(0xE0000001));
    ip_parse(out, m, &v);
    CHECK(icmp_is_error(out, m, &v));
}

static void test_echo_and_arp(void)
{
    uint8_t f[1600], out[1600];
    uint32_t n = udp_frame(f, 0xC6120001, 0x0A000001, 64, 20, NULL, 0);
    f[14 + 9] = 1;                                    /* make it an ICMP echo request */
    uint8_t *icmp = f + 34;
    memset(icmp, 0, 28);
    icmp[0] = 8;
    icmp[4] = 0xAB;
    icmp[7] = 7;
    uint16_t ck = inet_csum(icmp, 28, 0);
    icmp[2] = (uint8_t)(ck >> 8);
    icmp[3] = (uint8_t)ck;
    f[14 + 10] = f[14 + 11] = 0;
    ck = inet_csum(f + 14, 20, 0);
    f[14 + 10] = (uint8_t)(ck >> 8);
    f[14 + 11] = (uint8_t)ck;
    uint32_t m = build_echo_reply(out, HOST_MAC, ROUTER_MAC, f, n, OWN, 3, 0x0A000001, 0);
    ip_view v;
    CHECK(m == 62 && ip_parse(out, m, &v) == 0 && v.src == 0x0A000001 && v.dst == 0xC6120001);
    CHECK(out[34] == 0 && out[38] == 0xAB && out[41] == 7 && inet_csum(out + 34, 28, 0) == 0);
    CHECK(inet_csum(out + 14, 20, 0) == 0);
    /* a request with NOPs only: nothing to return, the reply of a request without options */
    const uint8_t nops[4] = {1, 1, 1, 0};
    n = echo_frame(f, 0xC6120001, 0x0A000001, nops, 4);
    m = build_echo_reply(out, HOST_MAC, ROUTER_MAC, f, n, OWN, 3, 0x0A000001, 0);
    CHECK(m == 62);
    check_echo_reply(out, m, 0x0A000001, 0xC6120001);
    uint8_t plain[1600];
    n = echo_frame(f, 0xC6120001, 0x0A000001, NULL, 0);
    CHECK(build_echo_reply(plain, HOST_MAC, ROUTER_MAC, f, n, OWN, 3, 0x0A000001, 0) == 62 && !memcmp(plain, out, 62));
    m = build_arp(out, 1, ROUTER_MAC, 0x0A000001, (const uint8_t[6]){0}, 0x0A00004D);
    CHECK(m == 60 && out[0] == 0xFF && rd16(out + 12) == 0x0806 && rd16(out + 20) == 1);
    CHECK(rd32(out + 28) == 0x0A000001 && rd32(out + 38) == 0x0A00004D && !memcmp(out + 22, ROUTER_MAC, 6));
    m = build_arp(out, 2, ROUTER_MAC, 0x0A000001, HOST_MAC, 0x0A0000C8);
    CHECK(!memcmp(out, HOST_MAC, 6) && rd16(out + 20) == 2 && !memcmp(out + 32, HOST_MAC, 6) &&
          rd32(out + 38) == 0x0A0000C8);
}

static void test_options(void)
{
    uint8_t f[1600];
    const uint32_t own[2] = {0x0A000001, 0x0A000101};
    opt_result r;
    /* record route, 2 slots */
    const uint8_t rr[12] = {7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, rr, 12);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && r.rr_at == 20 && !r.source_routed);
    ip_options_record(f, &r, 0x0A000201, 1234, NULL);
    CHECK(f[14 + 22] == 8 && rd32(f + 14 + 23) == 0x0A000201);
    /* timestamp, flag 0 */
    const uint8_t ts[12] = {68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, ts, 12);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && r.ts_at == 20);
    ip_options_record(f, &r, 0x0A000201, 80000123, NULL);
    CHECK(f[14 + 22] == 9 && rd32(f + 14 + 24) == 80000123);
    /* loose source route through us to 1.2.3.4 */
    const uint8_t lsrr[8] = {131, 7, 4, 1, 2, 3, 4, 0};
    udp_frame(f, 0xC6120001, 0x0A000001, 64, 20, lsrr, 8);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && r.source_routed && !r.strict);
    CHECK(rd32(f + 14 + 16) == 0x01020304);
    ip_options_record(f, &r, 0x0A000201, 0, NULL);
    CHECK(rd32(f + 14 + 23) == 0x0A000201 && f[14 + 22] == 8);
    /* strict source route not addressed to us: forwarded as is */
    const uint8_t ssrr[8] = {137, 7, 4, 1, 2, 3, 4, 0};
    udp_frame(f, 0xC6120001, 0x05060708, 64, 20, ssrr, 8);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && !r.source_routed && rd32(f + 14 + 16) == 0x05060708);
    /* exhausted source route: for us */
    const uint8_t done[8] = {137, 7, 8, 1, 2, 3, 4, 0};
    udp_frame(f, 0xC6120001, 0x0A000101, 64, 20, done, 8);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && r.sr_exhausted);
    /* malformed: a length of 1, a pointer below 4, a length past the header */
    const uint8_t bad1[4] = {7, 1, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, bad1, 4);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_BAD && r.pointer == 21);
    const uint8_t bad2[8] = {7, 7, 2, 0, 0, 0, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, bad2, 8);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_BAD && r.pointer == 22);
    const uint8_t bad3[4] = {1, 68, 40, 5};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, bad3, 4);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_BAD && r.pointer == 22);
    /* a prespecified timestamp naming another of our addresses (RFC 1812 5.3.13.6: any of
     * the router's): stamped, whatever interface the datagram leaves by */
    const uint8_t ts3[12] = {68, 12, 5, 3, 10, 0, 1, 1, 0, 0, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, ts3, 12);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && r.ts_ours);
    ip_options_record(f, &r, 0x0A000201, 80000123, NULL);
    CHECK(f[14 + 22] == 13 && rd32(f + 14 + 24) == 0x0A000101 && rd32(f + 14 + 28) == 80000123);
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, ts3, 12);
    CHECK(ip_options_route(f, own, 1, &r) == OPT_OK && !r.ts_ours);  /* not ours: as is */
    ip_options_record(f, &r, 0x0A000201, 80000123, NULL);
    CHECK(f[14 + 22] == 5 && rd32(f + 14 + 28) == 0);
    /* unknown options are carried (router alert) */
    const uint8_t ra[4] = {0x94, 4, 0, 0};
    udp_frame(f, 0xC6120001, 0x01020304, 64, 20, ra, 4);
    CHECK(ip_options_route(f, own, 2, &r) == OPT_OK && !r.rr_at && !r.ts_at && !r.sr_at);
}

/* ---- a fake chip for the table and engine tests ----------------------------------------- */

typedef struct fake {
    npkd_mem mem;
    uint32_t ring[16][1024];
    uint32_t head[16], count[16];
    uint64_t now;
} fake;

static int f_get(void *ctx, int ring, uint32_t *w)
{
    fake *k = ctx;
    if (!k->count[ring]) return *w = 0, 0;
    *w = k->ring[ring][k->head[ring]];
    k->head[ring] = (k->head[ring] + 1) % 1024;
    k->count[ring]--;
    return 1;
}

static int f_put(void *ctx, int ring, uint32_t w)
{
    fake *k = ctx;
    if (k->count[ring] == 1024) return 0;
    k->ring[ring][(k->head[ring] + k->count[ring]++) % 1024] = w;
    return 1;
}

static uint32_t f_free(void *ctx, int ring)
{
    return 1024 - ((fake *)ctx)->count[ring];
}

static uint32_t f_qget(void *ctx, uint32_t q)
{
    npkd_mem *m = &((fake *)ctx)->mem;
    uint32_t head = npkd_sram_rd(m, q), count = npkd_sram_rd(m, q + 8);
    if (!count || !head) return 0;
    npkd_sram_wr(m, q, count == 1 ? 0 : npkd_sram_rd(m, head));
    if (count == 1) npkd_sram_wr(m, q + 4, 0);
    npkd_sram_wr(m, q + 8, count - 1);
    return head;
}

static void f_qput(void *ctx, uint32_t q, uint32_t e)
{
    npkd_mem *m = &((fake *)ctx)->mem;
    uint32_t tail = npkd_sram_rd(m, q + 4), count = npkd_sram_rd(m, q + 8);
    npkd_sram_wr(m, e, 0);
    npkd_sram_wr(m, count ? tail : q, e);
    npkd_sram_wr(m, q + 4, e);
    npkd_sram_wr(m, q + 8, count + 1);
}

static uint64_t f_now(void *ctx)
{
    return ((fake *)ctx)->now;
}

static void fake_init(fake *k, npkd_cfg *c)
{
    memset(k, 0, sizeof *k);
    k->mem.sram_ch_bytes = 8u << 20;
    for (int ch = 0; ch < 4; ch++) k->mem.sram[ch] = calloc(k->mem.sram_ch_bytes / 4, 4);
    k->mem.dram_bytes = 64u << 11;
    k->mem.dram = calloc(k->mem.dram_bytes, 1);
    cfg_init(c);
    const char *macs[3] = {"02:4e:50:00:00:00", "02:4e:50:00:00:01", "02:4e:50:00:00:02"};
    for (int p = 0; p < 3; p++) {
        port_cfg *pc = &c->port[c->nports++];
        pc->addr = 0x0A000001u | (uint32_t)p << 8;
        pc->len = 24;
        pc->mask = lpm_mask(24);
        pc->net = pc->addr & pc->mask;
        pc->bcast = pc->net | 0xFF;
        parse_mac(macs[p], pc->mac, NULL);
    }
    c->arp = calloc(2, sizeof *c->arp);
    c->narp = c->caparp = 2;
    c->arp[0].ip = 0x0A000002;                         /* 10.0.0.2: the way back to 198.18/15 */
    parse_mac("02:00:0a:00:00:02", c->arp[0].mac, NULL);
    c->arp[1].ip = 0x0A000102;
    parse_mac("02:00:0a:00:01:02", c->arp[1].mac, NULL);
    c->route = calloc(4, sizeof *c->route);
    c->caproute = 4;
    c->route[c->nroute++] = (route_cfg){0xC6120000u, 0x0A000002u, 15, 0};
    c->route[c->nroute++] = (route_cfg){0x01000000u, 0x0A000102u, 8, 1};
    c->route[c->nroute++] = (route_cfg){0x2C000000u, 0x0A00024Du, 8, 2};   /* 44/8 via unresolved 10.0.2.77 */
    c->lay = (lpm_layout){0, 0x1000, 0x41000, 16384, 0x81000, 0x700000};
    c->sys = (sys_cfg){0x40010000u, 5, 64, 0, 11, 0x40001000u, 0x500};
    c->exc_ring = 11;
    c->cp_ring = 12;
    c->log_base = 0x80310000u;
    c->log_cap = 64;
    c->stats_base = 0x80300000u;
    c->owned_base = 0x80420000u;
    c->owned_cap = 64;
    /* the free list: 64 descriptors */
    for (uint32_t i = 0; i < 64; i++) f_qput(k, c->sys.freelist_q, c->sys.desc_base + (i << 5));
}

static void fake_free(fake *k, npkd_cfg *c)
{
    for (int ch = 0; ch < 4; ch++) free((void *)k->mem.sram[ch]);
    free(k->mem.dram);
    cfg_free(c);
}

static void test_lpm(void)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    tables t;
    char err[200];
    CHECK(tables_init(&t, &c, &k->mem) == 0);
    CHECK(tables_build(&t, 1, err, sizeof err) == 0);
    /* every address answers as the reference longest match; churn keeps it so */
    uint32_t x = 12345;
    for (int round = 0; round < 400; round++) {
        x = x * 1103515245u + 12345u;
        int len = 8 + (int)(x >> 8) % 25;
        uint32_t p = (0x14000000u | (x & 0x00FFFFFFu)) & lpm_mask(len);   /* inside 20/8 */
        if (round % 3 == 2 && lpm_get(&t.trie, p, len, NULL)) {
            CHECK(tables_del_route(&t, p, len) == 0);
        } else {
            route_cfg r = {p, (round & 1) ? 0x0A000002u : 0x0A000102u, len, (round & 1) ? 0 : 1};
            CHECK(tables_add_route(&t, &r) == 0);
        }
        if (round % 16 == 0) lpm_grace(&t.trie);
        for (int probe = 0; probe < 20; probe++) {
            x = x * 1103515245u + 12345u;
            uint32_t a = 0x14000000u | (x & 0x00FFFFFFu);
            uint32_t nh = 0;
            if (!lpm_match(&t.trie, a, NULL, NULL, &nh)) nh = 0;
            CHECK(lpm_walk(&k->mem, &c.lay, a) == nh);
        }
    }
    CHECK(tables_del_route(&t, 0x63000000u, 8) == -4);           /* no such route */
    tables_free(&t);
    fake_free(k, &c);
    free(k);
}

/* ---- the trie's node pool across daemon restarts (lpm_adopt with recover) ------------ */

static const uint32_t NODE_UNITS[3] = {64, 32, 1};   /* DENSE32, DENSE16, RUNS */

/* how many entries of the trie in SRAM lead to each pool unit (the walk of LAYOUT.md §4
 * over every root entry, as the test sees it); 0 if a node lies past the pool's end */
static int reach_units(npkd_mem *m, const lpm_layout *l, uint8_t *refs, uint32_t cap)
{
    memset(refs, 0, cap);
    for (uint32_t k = 0; k < LPM_ROOT_ENTRIES; k++) {
        uint32_t e = npkd_sram_rd(m, l->root + 4 * k);
        for (int level = 2; level <= 3 && (e & LPM_ENTRY_CHILD); level++) {
            uint32_t type = (e >> LPM_TYPE_SHIFT) & 7, off = e & LPM_OFFSET_MASK;
            if (type > LPM_RUNS || off + NODE_UNITS[type] > cap) return 0;
            for (uint32_t u = off; u < off + NODE_UNITS[type]; u++) refs[u]++;
            if (type != LPM_DENSE32 || level == 3) break;
            for (uint32_t b = 0; b < 256; b++) {
                uint32_t c = npkd_sram_rd(m, l->nodes + LPM_UNIT * off + 4 * b);
                uint32_t ct = (c >> LPM_TYPE_SHIFT) & 7, co = c & LPM_OFFSET_MASK;
                if (!(c & LPM_ENTRY_CHILD)) continue;
                if (ct > LPM_RUNS || co + NODE_UNITS[ct] > cap) return 0;
                for (uint32_t u = co; u < co + NODE_UNITS[ct]; u++) refs[u]++;
            }
            break;
        }
    }
    return 1;
}

/* The allocator against SRAM: no unit is reached twice, none is both reachable and free
 * (or in limbo), none is free twice, all lie below the high-water mark; `exact` (no
 * recovery pending): every unit below it is one of reachable, free, in limbo. */
static int pool_consistent(lpm *t, npkd_mem *m, int exact)
{
    const lpm_alloc *a = &t->alloc;
    uint32_t cap = a->capacity;
    uint8_t *refs = malloc(cap), *held = calloc(cap, 1);
    int ok = reach_units(m, &t->lay, refs, cap);
    for (uint32_t u = 0; ok && u < cap; u++) ok = refs[u] <= 1 && (!refs[u] || u < a->high_water);
    for (int type = 0; type < 3; type++)
        for (uint32_t i = 0; ok && i < a->free[type].n; i++)
            for (uint32_t u = a->free[type].v[i]; ok && u < a->free[type].v[i] + NODE_UNITS[type]; u++)
                ok = u < a->high_water && !refs[u] && !held[u]++;
    for (uint32_t i = 0; ok && i < a->spare.n; i += 2)
        for (uint32_t u = a->spare.v[i]; ok && u < a->spare.v[i] + a->spare.v[i + 1]; u++)
            ok = u < a->high_water && !refs[u] && !held[u]++;
    for (uint32_t i = 0; ok && i < a->limbo.n; i++) {
        uint32_t e = a->limbo.v[i];
        if (e == 0xFFFFFFFFu) continue;
        for (uint32_t u = e & 0xFFFFFF; ok && u < (e & 0xFFFFFF) + NODE_UNITS[e >> 24]; u++)
            ok = u < a->high_water && !refs[u] && !held[u]++;
    }
    for (uint32_t u = 0; ok && exact && u < a->high_water; u++) ok = refs[u] || held[u];
    free(refs);
    free(held);
    return ok;
}

/* lpm_walk (the fast path's walk of SRAM) answers as lpm_match (the route set) at the
 * first and last address of every route and at pseudo-random addresses in 20/8 */
static int walk_agrees(lpm *t, npkd_mem *m, const uint32_t *pfx, const int *len, int n, uint32_t *x)
{
    int ok = 1;
    for (int i = 0; i < n + 200; i++) {
        uint32_t a;
        if (i < n) {
            a = pfx[i] | (i & 1 ? ~lpm_mask(len[i]) : 0);
        } else {
            *x = *x * 1103515245u + 12345u;
            a = 0x14000000u | (*x & 0x00FFFFFFu);
        }
        uint32_t nh = 0;
        if (!lpm_match(t, a, NULL, NULL, &nh)) nh = 0;
        ok &= lpm_walk(m, &t->lay, a) == nh;
    }
    return ok;
}

/* A daemon's life: churn (each route of the set toggled twice, so that the table ends
 * as it began, in an order that differs from one life to the next), a grace every third
 * change, checked after every change (`exact`: the allocator accounts for every unit
 * once the recovery has run).  Returns the first lpm_add/lpm_del error, or 0. */
#define CHURN_ROUTES 48
typedef struct churn {
    uint32_t pfx[CHURN_ROUTES], nh[CHURN_ROUTES];
    int len[CHURN_ROUTES];
    uint8_t on[CHURN_ROUTES];
} churn;

static int churn_life(lpm *t, npkd_mem *m, churn *ch, int life, int exact, int *consistent)
{
    uint32_t x = 777;
    for (int step = 0; step < 2 * CHURN_ROUTES; step++) {
        int i = (step * 7 + life * 5) % CHURN_ROUTES;
        uint32_t nh = 1 + (uint32_t)(step % 5);
        int rc = ch->on[i] ? lpm_del(t, ch->pfx[i], ch->len[i]) : lpm_add(t, ch->pfx[i], ch->len[i], nh);
        if (rc) return rc;
        ch->on[i] ^= 1;
        ch->nh[i] = nh;
        if (step % 3 == 2) lpm_grace(t);
        *consistent &= walk_agrees(t, m, ch->pfx, ch->len, CHURN_ROUTES, &x);
        int pending = t->alloc.limbo.n && t->alloc.limbo.v[0] == 0xFFFFFFFFu;
        *consistent &= pool_consistent(t, m, exact && !pending);
    }
    return 0;
}

/* Routes churn, the daemon is killed and a new one adopts the table (a new lpm on the
 * same SRAM, the same routes in its model, its walk in steps, its first grace), 30
 * lives; the high-water mark after each in hw_after.  Returns the first error. */
#define LIVES 30
static int restarts(int recover, uint32_t *hw_after, uint32_t *recovered, int *consistent)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    c.lay.node_bytes = 48 * 1024;                       /* 3,072 units */
    churn *ch = calloc(1, sizeof *ch);
    uint32_t x = 4242;
    for (int i = 0; i < CHURN_ROUTES; i++) {           /* 17..30 bits in eight /16s of 20/8 */
        x = x * 1103515245u + 12345u;
        ch->len[i] = 17 + (int)((x >> 8) % 14);
        ch->pfx[i] = (0x14000000u | (uint32_t)(i % 8) << 16 | (x >> 16)) & lpm_mask(ch->len[i]);
        for (int j = 0; j < i; j++)
            if (ch->pfx[j] == ch->pfx[i] && ch->len[j] == ch->len[i]) ch->pfx[i] ^= 1u << (32 - ch->len[i]);
    }
    lpm *t = calloc(1, sizeof *t);
    CHECK(lpm_init(t, &c.lay, &k->mem) == 0);
    for (int i = 0; i < CHURN_ROUTES; i += 2) {
        ch->nh[i] = 9;
        ch->on[i] = !lpm_add(t, ch->pfx[i], ch->len[i], 9);
    }
    CHECK(lpm_build(t) == 0);
    int rc = 0;
    *recovered = 0;
    for (int life = 0; life < LIVES && !rc; life++) {
        rc = churn_life(t, &k->mem, ch, life, recover, consistent);
        hw_after[life] = t->alloc.high_water;
        *recovered += t->alloc.recovered;
        lpm *next = calloc(1, sizeof *next);            /* killed; the next daemon starts */
        CHECK(lpm_init(next, &c.lay, &k->mem) == 0);
        for (int i = 0; i < CHURN_ROUTES; i++)
            if (ch->on[i]) CHECK(lpm_add(next, ch->pfx[i], ch->len[i], ch->nh[i]) == 0);
        lpm_free(t);
        free(t);
        t = next;
        CHECK(lpm_adopt(t, recover) == 0);
        int rc2;
        while ((rc2 = lpm_recover_step(t, 4096)) == 0) *consistent &= pool_consistent(t, &k->mem, 0);
        CHECK(rc2 == 1);
        *consistent &= pool_consistent(t, &k->mem, 0);
        lpm_grace(t);   /* its first change comes a grace period after it started (tables.h) */
    }
    lpm_free(t);
    free(t);
    free(ch);
    fake_free(k, &c);
    free(k);
    return rc;
}

/* The walk in steps with changes in between (as when a change comes while the daemon
 * still loads: LAYOUT.md §7 rule 7): after every change the walk answers as the route
 * set and no unit is both reachable and free; the grace then gives back exactly the
 * units nothing reached when the new daemon adopted the table. */
static void test_lpm_walk_between_changes(void)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    c.lay.node_bytes = 48 * 1024;
    churn *ch = calloc(1, sizeof *ch);
    uint32_t x = 31337;
    for (int i = 0; i < CHURN_ROUTES; i++) {
        x = x * 1103515245u + 12345u;
        ch->len[i] = 17 + (int)((x >> 8) % 14);
        ch->pfx[i] = (0x14000000u | (uint32_t)(i % 8) << 16 | (x >> 16)) & lpm_mask(ch->len[i]);
        for (int j = 0; j < i; j++)
            if (ch->pfx[j] == ch->pfx[i] && ch->len[j] == ch->len[i]) ch->pfx[i] ^= 1u << (32 - ch->len[i]);
    }
    lpm *t = calloc(1, sizeof *t), *next = calloc(1, sizeof *next);
    CHECK(lpm_init(t, &c.lay, &k->mem) == 0 && lpm_build(t) == 0);
    int ok = 1;
    CHECK(churn_life(t, &k->mem, ch, 0, 1, &ok) == 0);
    CHECK(lpm_init(next, &c.lay, &k->mem) == 0);
    for (int i = 0; i < CHURN_ROUTES; i++)
        if (ch->on[i]) CHECK(lpm_add(next, ch->pfx[i], ch->len[i], ch->nh[i]) == 0);
    uint32_t hw = t->alloc.high_water, lost = 0;
    lpm_free(t);
    CHECK(lpm_adopt(next, 1) == 0);
    uint8_t *refs = malloc(next->alloc.capacity);
    CHECK(reach_units(&k->mem, &c.lay, refs, next->alloc.capacity));
    for (uint32_t u = 0; u < hw; u++) lost += !refs[u];
    free(refs);
    uint32_t y = 5;
    int steps = 0, rc;
    for (int step = 0; (rc = lpm_recover_step(next, 2048)) == 0; step++, steps++) {
        int i = (step * 11) % CHURN_ROUTES;
        CHECK((ch->on[i] ? lpm_del(next, ch->pfx[i], ch->len[i]) : lpm_add(next, ch->pfx[i], ch->len[i], 3)) == 0);
        ch->on[i] ^= 1;
        ch->nh[i] = 3;
        ok &= walk_agrees(next, &k->mem, ch->pfx, ch->len, CHURN_ROUTES, &y) && pool_consistent(next, &k->mem, 0);
    }
    CHECK(rc == 1 && steps > 8 && next->alloc.recovered == 0);
    lpm_grace(next);
    CHECK(lost > 0 && next->alloc.recovered == lost);
    ok &= pool_consistent(next, &k->mem, 1);
    CHECK(churn_life(next, &k->mem, ch, 1, 1, &ok) == 0);
    CHECK(ok);
    lpm_free(next);
    free(next);
    free(t);
    free(ch);
    fake_free(k, &c);
    free(k);
}

/* A daemon killed and started again 29 times with route churn in every life, on a pool
 * of 3,072 units that the table never needs a third of: with recovery no change fails,
 * the high-water mark stops growing after the first lives, after every change the
 * walk answers as the route set and no unit is both reachable and free (nor free twice),
 * and every unit is accounted for; without it (what lpm_adopt did before) every unit the
 * dead daemon had free or in limbo is lost and the pool is used up in the sixth life. */
static void test_lpm_restart(void)
{
    uint32_t hw[LIVES] = {0}, got = 0;
    int ok = 1;
    CHECK(restarts(1, hw, &got, &ok) == 0);             /* never runs out of pool */
    CHECK(ok);
    CHECK(got > 0);
    for (int i = 3; i < LIVES; i++) CHECK(hw[i] == hw[2]);   /* the high-water mark stops growing */
    /* the same without recovery (what lpm_adopt did before): the pool is used up */
    uint32_t hw0[LIVES] = {0}, got0 = 1;
    int ok0 = 1;
    CHECK(restarts(0, hw0, &got0, &ok0) == -2 && got0 == 0 && ok0);
}

/* a route change through tables (as the daemon makes them), written to the journal */
static void change(tables *t, FILE *j, const route_cfg *r, int add)
{
    char line[96];
    if (add) {
        CHECK(tables_add_route(t, r) == 0);
        *fmt_route(line, r) = 0;
        fprintf(j, "add %s\n", line);
    } else {
        CHECK(tables_del_route(t, r->prefix, r->len) == 0);
        *fmt_ip(line, r->prefix) = 0;
        fprintf(j, "del %s/%d\n", line, r->len);
    }
}

static int in_limbo(const lpm *t, uint32_t entry)
{
    for (uint32_t i = 0; i < t->alloc.limbo.n; i++)
        if (t->alloc.limbo.v[i] == entry) return 1;
    return 0;
}

/* the limbo entry (type << 24 | offset) of the node a root entry points to */
static uint32_t root_node(tables *t, npkd_mem *m, uint32_t addr)
{
    uint32_t e = npkd_sram_rd(m, t->cfg->lay.root + 4 * (addr >> 16));
    return ((e >> LPM_TYPE_SHIFT) & 7) << 24 | (e & LPM_OFFSET_MASK);
}

/* a new temporary file, open for writing (path: a mkstemp template, made its name);
 * NULL, a failed check, when it cannot be made */
static FILE *temp_file(char *path)
{
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL);
    return f;
}

/* The daemon's grace (tables.h, with a clock; lpm_grace_us 1000): a node replaced by a
 * change is handed out again only once a change comes more than a grace period after
 * one that saw it in limbo.  A daemon started after a kill (journal replayed, lpm_adopt
 * with recover) finds the units its predecessor had free or in limbo -- all of them,
 * counted in lpm_units_recovered -- at its first change a grace period after it started,
 * not at an earlier one. */
static void test_lpm_grace_clock(void)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    char path[] = "/tmp/npkd-journal-XXXXXX", err[200];
    FILE *j = temp_file(path);
    if (!j) return;
    tables t;
    CHECK(tables_init(&t, &c, &k->mem) == 0);
    CHECK(tables_build(&t, 1, err, sizeof err) == 0);
    t.clock = f_now;
    t.clock_ctx = k;
    k->now = 1000000;
    route_cfg a = {0x14010200u, 0x0A000002u, 24, 0}, b = {0x14010280u, 0x0A000102u, 25, 1};
    route_cfg b2 = {0x14010280u, 0x0A000103u, 25, 1}, d = {0x14010300u, 0x0A000102u, 24, 1};
    change(&t, j, &a, 1);
    change(&t, j, &b, 1);
    uint32_t first = root_node(&t, &k->mem, a.prefix);  /* 20.1's level-2 node */
    change(&t, j, &b2, 1);                              /* t = 1 ms: replaces it */
    CHECK(in_limbo(&t.trie, first));
    k->now += 500000;                                   /* 1.5 ms: seen in limbo */
    change(&t, j, &d, 1);
    CHECK(in_limbo(&t.trie, first));
    k->now += 900000;                                   /* 2.4 ms: not a grace period since */
    change(&t, j, &d, 0);
    CHECK(in_limbo(&t.trie, first));
    k->now += 200000;                                   /* 2.6 ms: free, and used again */
    change(&t, j, &d, 1);
    CHECK(!in_limbo(&t.trie, first) && root_node(&t, &k->mem, d.prefix) == first);
    CHECK(pool_consistent(&t.trie, &k->mem, 1));
    k->now += 100000;
    change(&t, j, &a, 0);                               /* more in limbo at the kill */
    fclose(j);
    uint32_t hw = t.trie.alloc.high_water, left = t.trie.alloc.limbo.n;
    for (int type = 0; type < 3; type++) left += t.trie.alloc.free[type].n;
    CHECK(left >= 2);
    tables_free(&t);                                    /* killed at 2.7 ms */

    k->now += 300000;                                   /* started again at 3 ms */
    CHECK(tables_init(&t, &c, &k->mem) == 0);
    t.clock = f_now;
    t.clock_ctx = k;
    t.started_ns = k->now;
    tables_load L;
    CHECK(tables_load_begin(&t, &L, 0, path) == 0);
    L.restart = 1;
    int rc;
    while (!(rc = tables_load_step(&t, &L, 2))) {
    }
    CHECK(rc == 1);
    tables_load_end(&L);
    uint8_t *refs = malloc(t.trie.alloc.capacity);
    CHECK(reach_units(&k->mem, &c.lay, refs, t.trie.alloc.capacity));
    uint32_t lost = 0;
    for (uint32_t u = 0; u < hw; u++) lost += !refs[u];
    free(refs);
    CHECK(lost > 0 && t.trie.alloc.high_water == hw && t.trie.alloc.recovered == 0);
    uint32_t x = 99;
    uint32_t pfx[2] = {a.prefix, d.prefix};
    int len[2] = {a.len, d.len};
    CHECK(walk_agrees(&t.trie, &k->mem, pfx, len, 2, &x));
    k->now += 500000;                                   /* 3.5 ms: too soon */
    CHECK(tables_del_route(&t, d.prefix, d.len) == 0);
    CHECK(t.trie.alloc.recovered == 0 && t.trie.alloc.high_water > hw);
    CHECK(pool_consistent(&t.trie, &k->mem, 0));
    k->now += 600000;                                   /* 4.1 ms: a grace period after the start */
    CHECK(tables_add_route(&t, &d) == 0);
    CHECK(t.trie.alloc.recovered == lost);
    CHECK(pool_consistent(&t.trie, &k->mem, 1) && walk_agrees(&t.trie, &k->mem, pfx, len, 2, &x));
    cp e;
    npkd_hw h = {k, f_get, f_put, f_free, f_qget, f_qput, f_now};
    cp_init(&e, &c, &k->mem, &t, &h);
    e.stats[ST_lpm_units_recovered] = 5;                /* (counters go on from the last daemon's) */
    e.tables_ready = 1;
    cp_publish(&e, 2, 2);
    cp_publish(&e, 2, 2);
    CHECK(e.stats[ST_lpm_units_recovered] == 5 + lost);
    CHECK(npkd_sram_rd(&k->mem, c.stats_base + NPKD_STATS_HDR + 4 * ST_lpm_units_recovered) == 5 + lost);
    cp_free(&e);
    tables_free(&t);
    remove(path);
    fake_free(k, &c);
    free(k);
}

/* an excepted packet: frame into a buffer off the free list, record on the ring */
static uint32_t except(fake *k, npkd_cfg *c, const uint8_t *f, uint32_t len, int in_port, int reason)
{
    uint32_t d = f_qget(k, c->sys.freelist_q);
    uint32_t h = (d - c->sys.desc_base) >> 5;
    memcpy(k->mem.dram + (h << 11), f, len);
    npkd_sram_wr(&k->mem, d + 8, len << 16);
    f_put(k, c->exc_ring, 0x80000000u | (uint32_t)in_port << 28 | h);
    f_put(k, c->exc_ring, 1u << 24 | (uint32_t)in_port << 16 | (uint32_t)reason);
    return h;
}

/* the next frame the engine sent: its bytes (from the buffer) and port */
static uint32_t sent(fake *k, npkd_cfg *c, uint8_t **frame, int *port)
{
    uint32_t pw, p;
    if (!f_get(k, c->cp_ring, &pw) || !f_get(k, c->cp_ring, &p)) return 0;
    uint32_t h = pw & 0xFFFF;
    *port = (int)p;
    *frame = k->mem.dram + (h << 11);
    uint32_t len = npkd_sram_rd(&k->mem, c->sys.desc_base + (h << 5) + 8) >> 16;
    f_qput(k, c->sys.freelist_q, c->sys.desc_base + (h << 5));   /* as tx does */
    return len;
}

/* the owned table: is buffer h marked, how many are */
static int is_owned(fake *k, const npkd_cfg *c, uint32_t h)
{
    return npkd_sram_rd(&k->mem, c->owned_base + NPKD_OWNED_HDR + 4 * (h >> 5)) >> (h & 31) & 1;
}

static uint32_t owned_count(fake *k, const npkd_cfg *c)
{
    uint32_t n = 0;
    for (uint32_t h = 0; h < c->owned_cap; h++) n += (uint32_t)is_owned(k, c, h);
    return n;
}

static uint32_t free_count(fake *k, const npkd_cfg *c)
{
    return npkd_sram_rd(&k->mem, c->sys.freelist_q + 8);
}

/* the free list's descriptors from head to tail, each once: how many */
static uint32_t free_distinct(fake *k, const npkd_cfg *c)
{
    uint8_t seen[64] = {0};
    uint32_t d = npkd_sram_rd(&k->mem, c->sys.freelist_q), n = 0;
    for (uint32_t i = 0; i < free_count(k, c); i++) {
        uint32_t h = (d - c->sys.desc_base) >> c->sys.desc_shift;
        if (h >= 64 || seen[h]) return 0;
        seen[h] = 1;
        n++;
        d = npkd_sram_rd(&k->mem, d);
    }
    return n;
}

/* The owned table (cp.h): every buffer the engine holds is marked -- packets held for
 * ARP, its own frame held for ARP, a frame waiting for room on the control ring -- and
 * none it gave away; an engine started after the first was killed gives the marked ones
 * back to the free list, counts them and clears the table. */
static void test_owned(void)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    tables t;
    char err[200];
    tables_init(&t, &c, &k->mem);
    CHECK(tables_build(&t, 1, err, sizeof err) == 0);
    npkd_hw hw = {k, f_get, f_put, f_free, f_qget, f_qput, f_now};
    cp e;
    cp_init(&e, &c, &k->mem, &t, &hw);
    e.tables_ready = 1;
    /* a table without its header is cleared, nothing in it is freed, first start or not */
    for (int restart = 0; restart < 2; restart++) {
        npkd_sram_wr(&k->mem, c.owned_base, 0);
        npkd_sram_wr(&k->mem, c.owned_base + NPKD_OWNED_HDR, 0xF0u);
        CHECK(cp_reclaim(&e, restart) == 0 && owned_count(k, &c) == 0 && free_count(k, &c) == 64);
        CHECK(npkd_sram_rd(&k->mem, c.owned_base) == NPKD_OWNED_MAGIC && npkd_sram_rd(&k->mem, c.owned_base + 4) == 64);
    }
    /* the first start frees nothing, header or not: no daemon marked what SRAM holds */
    npkd_sram_wr(&k->mem, c.owned_base + NPKD_OWNED_HDR, 0xF0u);
    CHECK(cp_reclaim(&e, 0) == 0 && owned_count(k, &c) == 0 && free_count(k, &c) == 64);
    /* ... and a restart does not trust a header with the wrong capacity */
    npkd_sram_wr(&k->mem, c.owned_base + 4, 4096);
    npkd_sram_wr(&k->mem, c.owned_base + NPKD_OWNED_HDR, 0xF0u);
    CHECK(cp_reclaim(&e, 1) == 0 && owned_count(k, &c) == 0 && npkd_sram_rd(&k->mem, c.owned_base + 4) == 64);
    CHECK(e.stats[ST_buffers_reclaimed] == 0 && free_count(k, &c) == 64);
    /* three packets held for 10.0.2.77 (44/8), an echo reply held for 10.0.0.99: nobody
     * answers ARP for either */
    uint8_t f[1600], a[60] = {0}, *o;
    int port;
    uint32_t n, held[3];
    for (uint32_t i = 0; i < 3; i++) {
        n = udp_frame(f, 0xC6120001, 0x2C000001 + i, 64, 30, NULL, 0);
        held[i] = except(k, &c, f, n, 0, 9);
    }
    n = echo_frame(f, 0x0A000063, 0x0A000001, NULL, 0);
    uint32_t request = except(k, &c, f, n, 0, 5);
    CHECK(cp_poll(&e, 64) == 4 && e.stats[ST_held] == 3);
    CHECK(owned_count(k, &c) == 4 && is_owned(k, &c, held[0]) && is_owned(k, &c, held[1]) && is_owned(k, &c, held[2]));
    CHECK(!is_owned(k, &c, request));                 /* answered: its buffer went back */
    /* the ARP requests (one a next hop) left on the control ring: not marked */
    int requests = 0;
    while ((n = sent(k, &c, &o, &port))) requests += rd16(o + 12) == 0x0806;
    CHECK(requests == 2 && owned_count(k, &c) == 4);
    /* a Time Exceeded that finds no room on the control ring waits in the backlog, marked */
    while (f_free(k, c.cp_ring) >= 2) f_put(k, c.cp_ring, 0);
    n = udp_frame(f, 0xC6120001, 0x01020304, 1, 30, NULL, 0);
    except(k, &c, f, n, 1, 7);
    cp_poll(&e, 64);
    CHECK(e.bl_n == 1 && owned_count(k, &c) == 5 && free_count(k, &c) == 64 - 5);
    /* the ARP reply for 10.0.2.77: the three held packets join the backlog too */
    build_arp(a, 2, HOST_MAC, 0x0A00024D, c.port[2].mac, 0x0A000201);
    except(k, &c, a, 60, 2, 1);
    cp_poll(&e, 64);
    CHECK(e.bl_n == 4 && e.stats[ST_held_sent] == 3 && owned_count(k, &c) == 5);
    /* the record in SRAM says what the backlog holds, in order: the Time Exceeded (the
     * router's own frame), then the three packets out of port 2 */
    uint32_t bl = NPKD_BACKLOG_AT(c.owned_base, c.owned_cap), first = npkd_sram_rd(&k->mem, c.owned_base + 12);
    CHECK(npkd_sram_rd(&k->mem, c.owned_base + 8) == 4);
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t pw = npkd_sram_rd(&k->mem, bl + 8 * ((first + i) % 64)), out = npkd_sram_rd(&k->mem, bl + 8 * ((first + i) % 64) + 4);
        CHECK(!!(pw & PW_CONTROL) == (i == 0) && is_owned(k, &c, pw & 0xFFFF));
        CHECK(i == 0 ? out == 0 : (out == 2 && (pw & 0xFFFF) == held[i - 1]));
    }
    /* ... and the ARP cache: 10.0.2.77 reachable, 10.0.0.99 resolving (one request so far,
     * started now), each with its port */
    uint32_t am = NPKD_ARPM_AT(c.owned_base, c.owned_cap);
    CHECK(npkd_sram_rd(&k->mem, am) == 2);
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t ip = npkd_sram_rd(&k->mem, am + 16 + 16 * i), st = npkd_sram_rd(&k->mem, am + 20 + 16 * i);
        uint64_t t0 = (uint64_t)npkd_sram_rd(&k->mem, am + 24 + 16 * i) << 32 | npkd_sram_rd(&k->mem, am + 28 + 16 * i);
        CHECK(ip == 0x0A00024D ? st == (ARP_REACHABLE << 24 | 1u << 16 | 2) : ip == 0x0A000063 && st == (ARP_INCOMPLETE << 24 | 1u << 16));
        CHECK(t0 == k->now);
    }
    /* room on the ring: the first two leave, the record follows */
    uint32_t w;
    for (int i = 0; i < 4; i++) f_get(k, c.cp_ring, &w);
    cp_timers(&e);
    CHECK(e.bl_n == 2 && npkd_sram_rd(&k->mem, c.owned_base + 8) == 2 && owned_count(k, &c) == 3);
    CHECK(npkd_sram_rd(&k->mem, c.owned_base + 12) == (first + 2) % 64);
    CHECK((npkd_sram_rd(&k->mem, bl + 8 * ((first + 2) % 64)) & 0xFFFF) == held[1]);
    /* killed: its memory (hold queues, backlog) is gone; what it put on the ring left */
    cp_free(&e);
    while (k->count[c.cp_ring] > 4) f_get(k, c.cp_ring, &w);     /* the filler, then the two that left */
    CHECK(sent(k, &c, &o, &port) && port == 0 && o[23] == 1);                 /* the Time Exceeded */
    CHECK(sent(k, &c, &o, &port) == 14 + 20 + 8 + 30 && port == 2 && rd32(o + 30) == 0x2C000001);
    /* started again: the three buffers are back, counted, the table clear, none twice;
     * the two packets its backlog held never left (counted), the records are empty */
    cp_init(&e, &c, &k->mem, &t, &hw);
    e.tables_ready = 1;
    CHECK(cp_reclaim(&e, 1) == 3 && e.stats[ST_buffers_reclaimed] == 3);
    CHECK(e.stats[ST_killed_backlog_forwarded] == 2 && e.stats[ST_killed_backlog_own] == 0);
    CHECK(npkd_sram_rd(&k->mem, c.owned_base + 8) == 0 && npkd_sram_rd(&k->mem, am) == 0);
    CHECK(owned_count(k, &c) == 0 && free_count(k, &c) == 64 && free_distinct(k, &c) == 64);
    CHECK(npkd_sram_rd(&k->mem, c.owned_base) == NPKD_OWNED_MAGIC);
    /* the new engine's own: a packet held, then sent when the ARP reply comes; a second
     * start with nothing held gives nothing back */
    n = udp_frame(f, 0xC6120001, 0x0A00014D, 64, 30, NULL, 0);    /* 10.0.1.77 on port 1: unknown */
    uint32_t h = except(k, &c, f, n, 0, 9);
    cp_poll(&e, 64);
    CHECK(is_owned(k, &c, h) && owned_count(k, &c) == 1);
    while (sent(k, &c, &o, &port)) {
    }
    build_arp(a, 2, HOST_MAC, 0x0A00014D, c.port[1].mac, 0x0A000101);
    except(k, &c, a, 60, 1, 1);
    cp_poll(&e, 64);
    CHECK(owned_count(k, &c) == 0 && e.stats[ST_held_sent] == 1);
    n = sent(k, &c, &o, &port);
    CHECK(n == 14 + 20 + 8 + 30 && port == 1 && !memcmp(o, HOST_MAC, 6) && rd32(o + 30) == 0x0A00014D);
    CHECK(cp_reclaim(&e, 1) == 0 && e.stats[ST_buffers_reclaimed] == 3 && free_count(k, &c) == 64);
    CHECK(e.stats[ST_killed_backlog_forwarded] == 2);
    cp_free(&e);
    tables_free(&t);
    fake_free(k, &c);
    free(k);
}

static void test_engine(void)
{
    fake *k = calloc(1, sizeof *k);
    npkd_cfg c;
    fake_init(k, &c);
    c.opt.icmp_burst = 3;
    c.opt.icmp_rate = 1000;
    tables t;
    char err[200];
    tables_init(&t, &c, &k->mem);
    CHECK(tables_build(&t, 1, err, sizeof err) == 0);
    cp e;
    npkd_hw hw = {k, f_get, f_put, f_free, f_qget, f_qput, f_now};
    cp_init(&e, &c, &k->mem, &t, &hw);
    e.tables_ready = 1;
    uint8_t f[1600], *o;
    int port;
    uint32_t n, m;
    /* TTL expired: a Time Exceeded back out of port 0 towards 10.0.0.2 */
    n = udp_frame(f, 0xC6120001, 0x01020304, 1, 30, NULL, 0);
    except(k, &c, f, n, 1, 7);
    CHECK(cp_poll(&e, 64) == 1);
    m = sent(k, &c, &o, &port);
    CHECK(m == 14 + 20 + 8 + 58 && port == 0 && o[34] == 11 && rd32(o + 14 + 12) == 0x0A000001);
    CHECK(!memcmp(o, c.arp[0].mac, 6) && !memcmp(o + 6, c.port[0].mac, 6));
    CHECK(e.stats[ST_icmp_time_exceeded] == 1 && e.stats[ST_exc_ttl_expired] == 1);
    CHECK(npkd_sram_rd(&k->mem, c.log_base) == 1 && npkd_sram_rd(&k->mem, c.log_base + 16) == frame_digest(f, n));
    /* no error about an ICMP error, a non-first fragment, a martian source */
    uint8_t g[1600];
    memcpy(g, o, m);
    g[14 + 8] = 1;
    except(k, &c, g, m, 0, 7);
    n = udp_frame(f, 0xC6120001, 0x01020304, 1, 30, NULL, 0);
    f[14 + 6] = 0x00;
    f[14 + 7] = 0x10;                                  /* fragment offset 16 */
    except(k, &c, f, n, 0, 7);
    cp_poll(&e, 64);
    CHECK(e.stats[ST_icmp_suppressed_rules] == 2 && sent(k, &c, &o, &port) == 0);
    /* the rate limit: burst 3, one token used */
    for (int i = 0; i < 4; i++) {
        n = udp_frame(f, 0xC6120001, 0x05060708, 64, 30, NULL, 0);   /* no route */
        except(k, &c, f, n, 1, 6);
    }
    cp_poll(&e, 64);
    CHECK(e.stats[ST_icmp_net_unreachable] == 2 && e.stats[ST_icmp_suppressed_rate_limit] == 2);
    while (sent(k, &c, &o, &port)) {
    }
    k->now += 10000000;                                /* 10 ms: 10 tokens, capped at 3 */
    /* ARP request for our address: a reply, and the sender learnt */
    uint8_t a[60];
    build_arp(a, 1, HOST_MAC, 0x0A0000C8, (const uint8_t[6]){0}, 0x0A000001);
    except(k, &c, a, 60, 0, 1);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    CHECK(m == 60 && port == 0 && rd16(o + 20) == 2 && rd32(o + 38) == 0x0A0000C8 && !memcmp(o, HOST_MAC, 6));
    CHECK(e.stats[ST_arp_learnt] == 1 && e.stats[ST_arp_replies_sent] == 1);
    /* arp_miss via 10.0.2.77: held, request out; the reply releases the packets in order */
    uint32_t h1, h2;
    n = udp_frame(f, 0xC6120001, 0x2C000001, 64, 30, NULL, 0);
    h1 = except(k, &c, f, n, 1, 9);
    f[14 + 5] = 0x35;                                  /* another id */
    h2 = except(k, &c, f, n, 1, 9);
    cp_poll(&e, 64);
    CHECK(e.stats[ST_held] == 2 && e.stats[ST_arp_requests_sent] == 1);
    m = sent(k, &c, &o, &port);
    CHECK(m == 60 && port == 2 && o[0] == 0xFF && rd32(o + 38) == 0x0A00024D && rd32(o + 28) == 0x0A000201);
    const uint8_t NB[6] = {0x02, 0, 0x0a, 0, 2, 0x4d};
    build_arp(a, 2, NB, 0x0A00024D, c.port[2].mac, 0x0A000201);
    except(k, &c, a, 60, 2, 1);
    cp_poll(&e, 64);
    uint32_t pw;
    CHECK(f_get(k, c.cp_ring, &pw) && (pw & 0xFFFF) == h1 && !(pw & PW_CONTROL) && f_get(k, c.cp_ring, &pw));
    CHECK(f_get(k, c.cp_ring, &pw) && (pw & 0xFFFF) == h2 && f_get(k, c.cp_ring, &pw) && pw == 2);
    CHECK(!memcmp(k->mem.dram + (h1 << 11), NB, 6) && k->mem.dram[(h1 << 11) + 22] == 63);
    CHECK(e.stats[ST_held_sent] == 2 && e.stats[ST_arp_resolved] == 1);
    f_qput(k, c.sys.freelist_q, c.sys.desc_base + (h1 << 5));      /* tx sent them */
    f_qput(k, c.sys.freelist_q, c.sys.desc_base + (h2 << 5));
    /* the fast path now has the MAC: the gateway entry lost ARP_MISS */
    nh_entry ne;
    nh_read(&k->mem, &c.lay, lpm_walk(&k->mem, &c.lay, 0x2C000001), &ne);
    CHECK(!(ne.flags & NH_ARP_MISS) && !memcmp(ne.dst, NB, 6) && ne.port == 2);
    /* an unresolvable on-link host: three requests, then Host Unreachable */
    n = udp_frame(f, 0xC6120001, 0x0A000263, 64, 30, NULL, 0);
    except(k, &c, f, n, 1, 9);
    cp_poll(&e, 64);
    for (int i = 0; i < 3; i++) {
        k->now += 1000ull * c.opt.arp_retry_us;
        cp_timers(&e);
    }
    CHECK(e.stats[ST_arp_requests_sent] == 4 && e.stats[ST_arp_unresolved] == 1);
    CHECK(e.stats[ST_icmp_host_unreachable] == 1 && e.stats[ST_held_dropped_unresolved] == 1);
    int last_type = -1;
    while ((m = sent(k, &c, &o, &port))) last_type = o[12] == 8 ? o[34] : -2;
    CHECK(last_type == 3);
    /* the hold queue is bounded: with room for 2, the third packet for a next hop is dropped */
    c.opt.arp_hold = 2;
    for (int i = 0; i < 3; i++) {
        n = udp_frame(f, 0xC6120001, 0x0A000264, 64, 30, NULL, 0);
        except(k, &c, f, n, 1, 9);
    }
    cp_poll(&e, 64);
    CHECK(e.stats[ST_held_dropped_overflow] == 1);
    /* ageing: 10.0.2.77's entry expires; the gateway entry goes back to ARP_MISS (first LW0) */
    k->now += 1000000ull * c.opt.arp_age_ms + 1;
    for (int i = 0; i < 4; i++) {
        k->now += 1000ull * c.opt.arp_retry_us;
        cp_timers(&e);
    }
    CHECK(e.stats[ST_arp_aged] >= 1);
    nh_read(&k->mem, &c.lay, lpm_walk(&k->mem, &c.lay, 0x2C000001), &ne);
    CHECK((ne.flags & NH_ARP_MISS) && ne.next_hop == 0x0A00024D);
    while (sent(k, &c, &o, &port)) {
    }
    k->now += 10000000;                                /* the ICMP bucket full again */
    /* an echo request with options to the router (the ip_options reason): a reply */
    const uint8_t nops[4] = {1, 1, 1, 0};
    n = echo_frame(f, 0xC6120001, 0x0A000001, nops, 4);
    except(k, &c, f, n, 0, 2);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    CHECK(m == 62 && port == 0 && !memcmp(o, c.arp[0].mac, 6) && e.stats[ST_icmp_echo_reply] == 1);
    check_echo_reply(o, m, 0x0A000001, 0xC6120001);
    /* one that came by a loose source route through 10.0.1.2 (used up), recording the route
     * and timestamps with addresses: the reply goes back by 10.0.1.2 (port 1), the route
     * reversed, 10.0.1.1 recorded and stamped with the engine's clock */
    const uint8_t back[24] = {131, 7, 8, 10, 0, 1, 2, 7, 7, 4, 0, 0, 0, 0, 68, 12, 5, 1, 0, 0, 0, 0, 0, 0};
    uint8_t opt[28] = {0};
    memcpy(opt, back, 24);
    n = echo_frame(f, 0xC6120001, 0x0A000001, opt, 28);
    except(k, &c, f, n, 1, 2);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    uint32_t stamp = (uint32_t)(k->now / 1000000u % 86400000u);
    CHECK(m == 14 + 48 + 28 && port == 1 && !memcmp(o, c.arp[1].mac, 6) && !memcmp(o + 6, c.port[1].mac, 6));
    CHECK(o[14] == 0x4C && rd32(o + 26) == 0x0A000001 && rd32(o + 30) == 0x0A000102 && inet_csum(o + 14, 48, 0) == 0);
    CHECK(!memcmp(o + 34, (const uint8_t[7]){131, 7, 4, 198, 18, 0, 1}, 7));
    CHECK(!memcmp(o + 41, (const uint8_t[7]){7, 7, 8, 10, 0, 1, 1}, 7));
    CHECK(!memcmp(o + 48, (const uint8_t[8]){68, 12, 13, 1, 10, 0, 1, 1}, 8) && rd32(o + 56) == stamp);
    CHECK(o[60] == 0 && o[61] == 0 && o[62] == 0 && inet_csum(o + 62, 28, 0) == 0 && e.stats[ST_icmp_echo_reply] == 2);
    /* strict, through 1.2.3.4 (not on-link: 1/8 is via 10.0.1.2): not answered, no route back */
    uint32_t no_back = e.stats[ST_icmp_no_route_back];
    const uint8_t strict_back[8] = {137, 7, 8, 1, 2, 3, 4, 0};
    n = echo_frame(f, 0xC6120001, 0x0A000001, strict_back, 8);
    except(k, &c, f, n, 1, 2);
    cp_poll(&e, 64);
    CHECK(sent(k, &c, &o, &port) == 0 && e.stats[ST_icmp_no_route_back] == no_back + 1);
    /* a loose source route to 10.0.1.1 whose next address is 10.0.2.1 (ours too), then
     * 198.18.0.9: not for us -- on through 10.0.2.1 to 198.18.0.9, out of port 0 */
    const uint8_t via_us[12] = {131, 11, 4, 10, 0, 2, 1, 198, 18, 0, 9, 0};
    n = echo_frame(f, 0xC6120005, 0x0A000101, via_us, 12);
    uint32_t fwd = e.stats[ST_forwarded];
    except(k, &c, f, n, 1, 2);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    CHECK(m == n && port == 0 && rd32(o + 30) == 0xC6120009 && e.stats[ST_forwarded] == fwd + 1);
    CHECK(!memcmp(o + 34, (const uint8_t[11]){131, 11, 12, 10, 0, 2, 1, 10, 0, 0, 1}, 11) && inet_csum(o + 14, 32, 0) == 0);
    /* the same to 10.0.0.1 with the route's last address 10.0.2.1, ours too: a hop made
     * here, then the route is used up -- answered from 10.0.2.1, back by 10.0.1.2 */
    const uint8_t to_us[12] = {131, 11, 8, 10, 0, 1, 2, 10, 0, 2, 1, 0};
    n = echo_frame(f, 0xC6120001, 0x0A000001, to_us, 12);
    except(k, &c, f, n, 1, 2);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    CHECK(m == 14 + 28 + 28 && port == 1 && rd32(o + 26) == 0x0A000201 && rd32(o + 30) == 0x0A000102);
    CHECK(!memcmp(o + 34, (const uint8_t[8]){131, 7, 4, 198, 18, 0, 1, 0}, 8) && inet_csum(o + 14, 28, 0) == 0);
    /* TCP and protocol 99 to the router: Protocol Unreachable (3/2) quoting the datagram */
    for (int proto = 0; proto < 2; proto++) {
        n = udp_frame(f, 0xC6120001, 0x0A000001, 64, 30, NULL, 0);
        f[14 + 9] = proto ? 99 : 6;
        f[14 + 10] = f[14 + 11] = 0;
        uint16_t ck = inet_csum(f + 14, 20, 0);
        f[14 + 10] = (uint8_t)(ck >> 8);
        f[14 + 11] = (uint8_t)ck;
        except(k, &c, f, n, 0, 5);
        cp_poll(&e, 64);
        m = sent(k, &c, &o, &port);
        CHECK(m == 14 + 20 + 8 + 58 && port == 0 && o[34] == 3 && o[35] == 2 && rd32(o + 30) == 0xC6120001);
        CHECK(rd32(o + 26) == 0x0A000001 && inet_csum(o + 34, 8 + 58, 0) == 0 && !memcmp(o + 42, f + 14, 58));
    }
    CHECK(e.stats[ST_icmp_protocol_unreachable] == 2 && e.stats[ST_local_proto_unsupported] == 2);
    /* an ARP probe (sender 0.0.0.0) for our address: answered to the asker's MAC, nothing learnt */
    uint32_t learnt = e.stats[ST_arp_learnt], ignored = e.stats[ST_arp_ignored];
    build_arp(a, 1, HOST_MAC, 0, (const uint8_t[6]){0}, 0x0A000001);
    except(k, &c, a, 60, 0, 1);
    cp_poll(&e, 64);
    m = sent(k, &c, &o, &port);
    CHECK(m == 60 && port == 0 && !memcmp(o, HOST_MAC, 6) && rd16(o + 20) == 2 && rd32(o + 28) == 0x0A000001);
    CHECK(!memcmp(o + 22, c.port[0].mac, 6) && !memcmp(o + 32, HOST_MAC, 6) && rd32(o + 38) == 0);
    CHECK(e.stats[ST_arp_learnt] == learnt && e.stats[ST_arp_ignored] == ignored);
    /* a probe for another address: nothing */
    build_arp(a, 1, HOST_MAC, 0, (const uint8_t[6]){0}, 0x0A000063);
    except(k, &c, a, 60, 0, 1);
    cp_poll(&e, 64);
    CHECK(sent(k, &c, &o, &port) == 0);
    /* an echo request from an on-link host nobody answers for: the reply is held, three
     * requests, then dropped -- counted as the router's own frame lost, not as sent */
    n = echo_frame(f, 0x0A000063, 0x0A000001, NULL, 0);
    except(k, &c, f, n, 0, 5);
    cp_poll(&e, 64);
    for (int i = 0; i < 3; i++) {
        k->now += 1000ull * c.opt.arp_retry_us;
        cp_timers(&e);
    }
    int requests = 0;
    while ((m = sent(k, &c, &o, &port))) requests += rd16(o + 12) == 0x0806 && rd32(o + 38) == 0x0A000063;
    CHECK(requests == 3 && e.stats[ST_own_dropped_no_arp] == 1 && e.stats[ST_icmp_echo_reply] == 3);
    cp_publish(&e, 2, 1);
    CHECK(npkd_sram_rd(&k->mem, c.stats_base) == NPKD_STATS_MAGIC &&
          npkd_sram_rd(&k->mem, c.stats_base + NPKD_STATS_HDR + 4 * ST_arp_resolved) == 1);
    /* every buffer is back (64), and none is marked as the engine's */
    CHECK(npkd_sram_rd(&k->mem, c.sys.freelist_q + 8) == 64 && owned_count(k, &c) == 0);
    cp_free(&e);
    tables_free(&t);
    fake_free(k, &c);
    free(k);
}


/* ---- the route journal, write-ahead (cp.c commit_change) ---------------------------------- */

/* A SIGKILL is taken at the daemon's next system call, and the one a route change makes
 * is its journal line's write(): `kill_at` counts the journal writes down, and at 0 the
 * daemon dies there -- the line not written, nothing after it run (longjmp). */
static jmp_buf killed;
static int kill_at;
static FILE *journal_file;

static int journal_or_die(void *ctx, const char *line)
{
    (void)ctx;
    if (kill_at-- == 0) longjmp(killed, 1);
    fputs(line, journal_file);
    fflush(journal_file);
    return 0;
}

/* the daemon's model and the fast path (a walk of SRAM) give addr the same next hop */
static int agrees_at(tables *t, npkd_mem *m, uint32_t addr)
{
    uint32_t nh = 0;
    if (!lpm_match(&t->trie, addr, NULL, NULL, &nh)) nh = 0;
    return lpm_walk(m, &t->cfg->lay, addr) == nh;
}

/* ... at both ends of every route in the model, and at `probe` */
static int model_agrees(tables *t, npkd_mem *m, const uint32_t *probe, int nprobe)
{
    int ok = 1;
    for (int n = 0; n <= 32; n++) {
        const u32map *r = &t->trie.routes[n];
        for (uint32_t i = 0; i < r->cap; i++)
            if (r->used[i]) ok &= agrees_at(t, m, r->key[i]) && agrees_at(t, m, r->key[i] | ~lpm_mask(n));
    }
    for (int i = 0; i < nprobe; i++) ok &= agrees_at(t, m, probe[i]);
    return ok;
}

/* a daemon's engine on a fake chip, its tables built into SRAM and its journal in a
 * temporary file (journal_file, written by journal_or_die) */
typedef struct wal_rig {
    fake *k;
    npkd_cfg c;
    tables *t;
    cp *e;
    char path[32];
} wal_rig;

static int rig_open(wal_rig *g, const char *tmpl, uint32_t changelog_cap)
{
    char err[200];
    g->k = calloc(1, sizeof *g->k);
    fake_init(g->k, &g->c);
    if (changelog_cap) {
        g->c.changelog_base = 0x80400000u;
        g->c.changelog_cap = changelog_cap;
    }
    snprintf(g->path, sizeof g->path, "%s", tmpl);
    journal_file = temp_file(g->path);
    if (!journal_file) return 0;
    g->t = calloc(1, sizeof *g->t);
    CHECK(tables_init(g->t, &g->c, &g->k->mem) == 0);
    CHECK(tables_build(g->t, 1, err, sizeof err) == 0);
    g->e = calloc(1, sizeof *g->e);
    npkd_hw hw = {g->k, f_get, f_put, f_free, f_qget, f_qput, f_now};
    cp_init(g->e, &g->c, &g->k->mem, g->t, &hw);
    g->e->tables_ready = 1;
    g->e->journal = journal_or_die;
    return 1;
}

/* the engine gone (killed, or exited) and the next daemon's tables loaded from the
 * configuration and the journal, SRAM's table adopted: tables_load_step's last result
 * (1: loaded); L is left for the caller to read and end */
static int rig_restart(wal_rig *g, tables_load *L)
{
    if (journal_file) fclose(journal_file);
    journal_file = NULL;
    cp_free(g->e);
    free(g->e);
    g->e = NULL;
    tables_free(g->t);
    CHECK(tables_init(g->t, &g->c, &g->k->mem) == 0);
    CHECK(tables_load_begin(g->t, L, 0, g->path) == 0);
    L->restart = 1;
    int rc;
    while (!(rc = tables_load_step(g->t, L, 64))) {
    }
    if (rc != 1) printf("  the journal's replay: %s\n", L->err);
    return rc;
}

static void rig_close(wal_rig *g)
{
    tables_free(g->t);
    free(g->t);
    remove(g->path);
    fake_free(g->k, &g->c);
    free(g->k);
}

#define JOURNAL_WRITES 6
static const uint32_t JOURNAL_PROBES[] = {0x14010203u, 0x14020304u, 0x0A000232u, 0x0A00014Du, 0x2C000001u};

/* route changes through the engine, each writing a journal line: add, add with a new
 * next-hop entry, a replacement, del, a del that fails (no line), an on-link host
 * resolved (adj) and aged (unadj) */
static void journal_scenario(fake *k, npkd_cfg *c, cp *e)
{
    route_cfg r1 = {0x14010200u, 0x0A000002u, 24, 0};   /* 20.1.2/24 via 10.0.0.2 */
    route_cfg r2 = {0x14020000u, 0x0A00014Du, 16, 1};   /* 20.2/16 via 10.0.1.77 (unresolved) */
    route_cfg r3 = {0x14010200u, 0x0A000102u, 24, 1};   /* 20.1.2/24 again, via 10.0.1.2 */
    CHECK(cp_route_add(e, &r1, CHG_SOCKET) == 0);
    CHECK(cp_route_add(e, &r2, CHG_SOCKET) == 0);
    CHECK(cp_route_add(e, &r3, CHG_SOCKET) == 0);
    CHECK(cp_route_del(e, r2.prefix, r2.len, CHG_SOCKET) == 0);
    CHECK(cp_route_del(e, r2.prefix, r2.len, CHG_SOCKET) == -4);
    uint8_t f[1600], a[60] = {0}, *o;
    int port;
    uint32_t n = udp_frame(f, 0xC6120001, 0x0A000232, 64, 30, NULL, 0);    /* to 10.0.2.50: ARP */
    except(k, c, f, n, 0, 9);
    cp_poll(e, 64);
    while (sent(k, c, &o, &port)) {
    }
    build_arp(a, 2, HOST_MAC, 0x0A000232, c->port[2].mac, 0x0A000201);
    except(k, c, a, 60, 2, 1);
    cp_poll(e, 64);                                    /* resolved: its /32 (adj) */
    while (sent(k, c, &o, &port)) {
    }
    k->now += 1000000ull * c->opt.arp_age_ms + 1;
    cp_timers(e);                                      /* aged: the /32 out (unadj) */
}

/* the scenario until the kill (1) or to its end (0) */
static int run_until_killed(fake *k, npkd_cfg *c, cp *e)
{
    if (setjmp(killed)) return 1;
    journal_scenario(k, c, e);
    return 0;
}

/* Killed at each journal write in turn (and not at all): the daemon started after it
 * (the configuration's routes, the journal replayed, the table in SRAM adopted) loads,
 * its next-hop table is the one in SRAM, its journal has a line for each change made
 * before the kill and none for the one cut, and its model and the fast path agree on
 * every route.  (Killed at any other call, the changes are whole: a change runs no call
 * between its journal line and its last SRAM write.) */
static void test_journal_kill(void)
{
    for (int at = 0; at <= JOURNAL_WRITES; at++) {
        wal_rig g;
        if (!rig_open(&g, "/tmp/npkd-wal-XXXXXX", 0)) return;
        kill_at = at;
        CHECK(run_until_killed(g.k, &g.c, g.e) == (at < JOURNAL_WRITES));
        CHECK(kill_at == (at < JOURNAL_WRITES ? -1 : 0));
        tables_load L;                                 /* killed: the next daemon starts */
        CHECK(rig_restart(&g, &L) == 1);
        CHECK(L.jline == (uint32_t)at);
        CHECK(L.timed_done == 0);                       /* socket changes and ARP: no timed marks */
        tables_load_end(&L);
        tables *t = g.t;
        CHECK(model_agrees(t, &g.k->mem, JOURNAL_PROBES, (int)(sizeof JOURNAL_PROBES / sizeof JOURNAL_PROBES[0])));
        /* ... and the restarted daemon's own changes go on from there */
        route_cfg r2 = {0x14020000u, 0x0A00014Du, 16, 1};
        int had = lpm_get(&t->trie, r2.prefix, r2.len, NULL);
        CHECK((had ? tables_del_route(t, r2.prefix, r2.len) : tables_add_route(t, &r2)) == 0);
        CHECK(model_agrees(t, &g.k->mem, JOURNAL_PROBES, (int)(sizeof JOURNAL_PROBES / sizeof JOURNAL_PROBES[0])));
        rig_close(&g);
    }
}

static int lines_in(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    if (!f) return -1;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

/* A change that fails leaves no trace: out of pool (an add with a next-hop entry of its
 * own, a del that would need a new node) and the next-hop table full, the model, the
 * next-hop table and what the fast path walks are as before, and no journal line is
 * written (a restart replays the journal and agrees with SRAM). */
static void test_failed_change_leaves_no_trace(void)
{
    wal_rig g;
    if (!rig_open(&g, "/tmp/npkd-wal-XXXXXX", 0)) return;
    fake *k = g.k;
    npkd_cfg *c = &g.c;
    tables *t = g.t;
    cp *e = g.e;
    t->trie.alloc.capacity = t->trie.alloc.high_water + 8;   /* room for a few nodes more */
    kill_at = -1000;
    uint32_t probe[40];
    int np = 0, added = 0, rc = 0;
    for (uint32_t i = 0; i < 32 && !rc; i++) {        /* 20.i.1/24 and 20.i.2/24 via 10.0.0.2 */
        route_cfg r = {0x14000100u | i << 16, 0x0A000002u, 24, 0};
        rc = cp_route_add(e, &r, CHG_SOCKET);
        if (!rc) {
            r.prefix += 0x100;
            rc = cp_route_add(e, &r, CHG_SOCKET);
            added += 2 - !!rc;
        } else {
            CHECK(rc == -2);
        }
        probe[np++] = r.prefix | 0x21;
    }
    CHECK(rc == -2 && added >= 4);                    /* the pool ran out */
    CHECK(pool_consistent(&t->trie, &k->mem, 0));
    uint32_t nh_n = t->nh.n, routes = t->trie.nroutes, gen = npkd_sram_rd(&k->mem, c->lay.ctl + 8);
    route_cfg fresh = {0x15000100u, 0x0A000163u, 24, 1};   /* 21.0.1/24 via 10.0.1.99: a new entry */
    CHECK(cp_route_add(e, &fresh, CHG_SOCKET) == -2);
    CHECK(!lpm_get(&t->trie, fresh.prefix, fresh.len, NULL) && t->nh.n == nh_n && t->trie.nroutes == routes);
    CHECK(npkd_sram_rd(&k->mem, c->lay.ctl + 8) == gen && lpm_walk(&k->mem, &c->lay, 0x15000101u) == 0);
    CHECK(cp_route_del(e, 0x14000100u, 24, CHG_SOCKET) == -2);   /* 20.0.1/24 stays: a new node */
    CHECK(lpm_get(&t->trie, 0x14000100u, 24, NULL) && t->trie.nroutes == routes);
    CHECK(cp_route_del(e, 0x63000000u, 8, CHG_SOCKET) == -4);    /* no such route */
    CHECK(pool_consistent(&t->trie, &k->mem, 0));
    probe[np++] = 0x15000101u;
    probe[np++] = 0x14000101u;
    CHECK(model_agrees(t, &k->mem, probe, np));
    /* the next-hop table full: no line either */
    c->lay.nh_cap = t->nh.n;
    route_cfg more = {0x14000100u, 0x0A0001C8u, 24, 1};  /* a replacement via 10.0.1.200: a new entry */
    CHECK(cp_route_add(e, &more, CHG_SOCKET) == -2 && t->nh.n == nh_n);
    CHECK(e->stats[ST_routes_added] == (uint32_t)added && e->stats[ST_route_errors] == 5);
    fflush(journal_file);
    CHECK(lines_in(g.path) == added);
    tables_load L;                                     /* restarted: the journal replays */
    CHECK(rig_restart(&g, &L) == 1 && t->trie.nroutes == routes && t->nh.n == nh_n);
    tables_load_end(&L);
    CHECK(model_agrees(t, &k->mem, probe, np));
    rig_close(&g);
}

/* timed changes made in order until a kill (1) or all of them (0) */
static int timed_until_killed(cp *e, const timed_change *tc, int n, int *rcs)
{
    if (setjmp(killed)) return 1;
    for (int i = 0; i < n; i++) rcs[i] = cp_timed_change(e, &tc[i], (uint32_t)i);
    return 0;
}

static int file_is(const char *path, const char *want)
{
    char got[512] = {0};
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = 0;
    if (strcmp(got, want)) printf("  journal:\n%s  wanted:\n%s", got, want);
    return !strcmp(got, want);
}

/* Timed changes are journalled with their index in the configuration (cp.c
 * cp_timed_change): "timed N add ...", "timed N del ...", and one that fails (a del of
 * no such route) as "timed N" alone.  Killed at each journal write in turn (and not at
 * all), the daemon started after it replays the changes made, its model and the fast
 * path agree, and it knows which timed changes were dealt with (tables_load.timed_done):
 * all those before the one cut, not that one, which is its to make. */
static void test_timed_marks(void)
{
    static const timed_change tc[4] = {
        {1000, 1, {0x14010200u, 0x0A000002u, 24, 0}},  /* 0: add 20.1.2/24 via 10.0.0.2 */
        {2000, 0, {0x63000000u, 0, 8, 0}},              /* 1: del 99/8: no such route */
        {3000, 1, {0x14020000u, 0x0A000102u, 16, 1}},  /* 2: add 20.2/16 via 10.0.1.2 */
        {4000, 0, {0x14010200u, 0, 24, 0}},             /* 3: del 20.1.2/24 */
    };
    static const char *const lines[4] = {"timed 0 add 20.1.2.0/24 via 10.0.0.2 port 0\n", "timed 1\n",
                                         "timed 2 add 20.2.0.0/16 via 10.0.1.2 port 1\n", "timed 3 del 20.1.2.0/24\n"};
    static const uint32_t probes[] = {0x14010203u, 0x14020304u, 0x63010101u};
    for (int at = 0; at <= 4; at++) {
        wal_rig g;
        if (!rig_open(&g, "/tmp/npkd-timed-XXXXXX", 16)) return;
        kill_at = at;
        int rcs[4] = {9, 9, 9, 9};
        CHECK(timed_until_killed(g.e, tc, 4, rcs) == (at < 4));
        char want[512] = {0};
        for (int i = 0; i < at; i++) strcat(want, lines[i]);
        CHECK(file_is(g.path, want));                   /* a line for each dealt with, none for the cut one */
        CHECK(npkd_sram_rd(&g.k->mem, g.c.changelog_base) == (uint32_t)at);   /* ... and a change log record each */
        if (at == 4) {
            const uint32_t *st = g.e->stats;
            CHECK(rcs[0] == 0 && rcs[1] == -4 && rcs[2] == 0 && rcs[3] == 0);
            CHECK(st[ST_timed_changes] == 4 && st[ST_route_errors] == 1);
            CHECK(st[ST_routes_added] == 2 && st[ST_routes_deleted] == 1);
            uint32_t w1 = npkd_sram_rd(&g.k->mem, g.c.changelog_base + 16 + 4);
            CHECK((w1 & 0xFF) == CHG_TIMED && w1 >> 24 == 1);
            const uint32_t failed = g.c.changelog_base + 16 + 16;   /* record 1: the del that failed */
            w1 = npkd_sram_rd(&g.k->mem, failed + 4);
            CHECK((w1 & 0xFF) == CHG_TIMED_FAILED && w1 >> 24 == 0 && (w1 >> 16 & 0xFF) == 8);
            CHECK(npkd_sram_rd(&g.k->mem, failed + 8) == 0x63000000u);
        }
        tables_load L;                                 /* killed: the next daemon starts */
        CHECK(rig_restart(&g, &L) == 1);
        tables *t = g.t;
        CHECK(L.timed_done == (uint32_t)at);            /* the next to make: the one cut */
        CHECK(!!lpm_get(&t->trie, 0x14010200u, 24, NULL) == (at == 1 || at == 2 || at == 3));
        CHECK(!!lpm_get(&t->trie, 0x14020000u, 16, NULL) == (at > 2));
        tables_load_end(&L);
        CHECK(model_agrees(t, &g.k->mem, probes, (int)(sizeof probes / sizeof probes[0])));
        rig_close(&g);
    }
}

/* The replay's reading of the marks: the highest index, whatever the order of lines and
 * what follows the mark; a journal without marks (socket changes only, or one written
 * before timed changes were marked) has timed_done 0; a malformed mark is an error. */
static void test_timed_marks_replay(void)
{
    static const struct {
        const char *text;
        int ok;
        uint32_t done;
    } cases[] = {
        {"add 20.1.2.0/24 via 10.0.0.2 port 0\ndel 20.1.2.0/24\n", 1, 0},
        {"timed 0 add 20.1.2.0/24 via 10.0.0.2 port 0\nadd 20.9.0.0/16 via 10.0.1.2 port 1\ntimed 3\n", 1, 4},
        {"timed 7 del 20.1.2.0/24\n", 1, 8},               /* (a del of no such route replays as nothing) */
        {"timed x add 20.1.2.0/24 via 10.0.0.2 port 0\n", 0, 0},
        {"timed -1\n", 0, 0},
        {"timed 2add 20.1.2.0/24 via 10.0.0.2 port 0\n", 0, 0},
        {"timed 12\r\ntimed 5 add 20.1.2.0/24 via 10.0.0.2 port 0\n", 1, 13},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake *k = calloc(1, sizeof *k);
        npkd_cfg c;
        fake_init(k, &c);
        char path[] = "/tmp/npkd-timed-XXXXXX", err[200];
        FILE *f = temp_file(path);
        if (!f) return;
        fputs(cases[i].text, f);
        fclose(f);
        tables *t = calloc(1, sizeof *t);
        CHECK(tables_init(t, &c, &k->mem) == 0);
        CHECK(tables_build(t, 1, err, sizeof err) == 0);   /* the image the first daemon had */
        tables_free(t);
        CHECK(tables_init(t, &c, &k->mem) == 0);
        tables_load L;
        CHECK(tables_load_begin(t, &L, 0, path) == 0);
        L.restart = 1;
        int rc;
        while (!(rc = tables_load_step(t, &L, 64))) {
        }
        CHECK((rc == 1) == cases[i].ok);
        if (cases[i].ok) CHECK(L.timed_done == cases[i].done);
        if ((rc == 1) != cases[i].ok || (cases[i].ok && L.timed_done != cases[i].done))
            printf("  case %zu: rc %d phase %d timed_done %u (%s)\n", i, rc, L.phase, L.timed_done, L.err);
        tables_load_end(&L);
        tables_free(t);
        free(t);
        remove(path);
        fake_free(k, &c);
        free(k);
    }
}

int main(void)
{
    test_checksums();
    test_icmp_error();
    test_echo_and_arp();
    test_echo_options();
    test_options();
    test_lpm();
    test_lpm_restart();
    test_lpm_walk_between_changes();
    test_lpm_grace_clock();
    test_engine();
    test_owned();
    test_journal_kill();
    test_failed_change_leaves_no_trace();
    test_timed_marks();
    test_timed_marks_replay();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
