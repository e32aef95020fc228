/* pkt.c -- packet parsing and building (pkt.h). */
#include "pkt.h"

#include <string.h>

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint16_t inet_csum(const uint8_t *p, size_t n, uint32_t sum)
{
    for (; n > 1; n -= 2, p += 2) sum += (uint32_t)(p[0] << 8 | p[1]);
    if (n) sum += (uint32_t)p[0] << 8;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)~sum;
}

uint32_t frame_digest(const uint8_t *f, uint32_t len)
{
    uint32_t h = 2166136261u;
    uint32_t n = len < 128 ? len : 128;
    for (uint32_t i = 0; i < n; i++) h = (h ^ f[i]) * 16777619u;
    return h;
}

int ip_parse(const uint8_t *f, uint32_t len, ip_view *v)
{
    if (len < ETH_HLEN + 20 || rd16(f + 12) != 0x0800) return -1;
    const uint8_t *h = f + ETH_HLEN;
    v->hdr = h;
    v->ihl = h[0] & 0xF;
    if (h[0] >> 4 != 4 || v->ihl < 5 || ETH_HLEN + 4u * v->ihl > len) return -1;
    v->tos = h[1];
    v->tot_len = rd16(h + 2);
    v->id = rd16(h + 4);
    v->frag = rd16(h + 6);
    v->ttl = h[8];
    v->proto = h[9];
    v->src = rd32(h + 12);
    v->dst = rd32(h + 16);
    if (v->tot_len < 4u * v->ihl || v->tot_len > len - ETH_HLEN) return -1;
    return 0;
}

int ip_is_unicast_src(uint32_t a)
{
    uint32_t top = a >> 24;
    return top != 0 && top != 127 && a < 0xE0000000u;
}

int icmp_is_error(const uint8_t *f, uint32_t len, const ip_view *v)
{
    uint32_t off = ETH_HLEN + 4u * v->ihl;
    if (v->proto != IPPROTO_ICMP_ || off >= len) return 0;
    uint8_t t = f[off];
    return t == ICMP_UNREACH || t == 4 || t == ICMP_REDIRECT || t == ICMP_TIME_EXCEEDED || t == ICMP_PARAM_PROBLEM;
}

static uint32_t eth_ip(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], uint8_t tos,
                       uint16_t tot_len, uint16_t id, uint8_t proto, uint32_t src, uint32_t dst)
{
    memcpy(out, dst_mac, 6);
    memcpy(out + 6, src_mac, 6);
    wr16(out + 12, 0x0800);
    uint8_t *h = out + ETH_HLEN;
    h[0] = 0x45;
    h[1] = tos;
    wr16(h + 2, tot_len);
    wr16(h + 4, id);
    wr16(h + 6, 0);
    h[8] = IP_TTL_OWN;
    h[9] = proto;
    wr16(h + 10, 0);
    wr32(h + 12, src);
    wr32(h + 16, dst);
    wr16(h + 10, inet_csum(h, 20, 0));
    return ETH_HLEN + (uint32_t)tot_len;
}

static uint32_t pad(uint8_t *out, uint32_t n)
{
    if (n < ETH_MIN) {
        memset(out + n, 0, ETH_MIN - n);
        n = ETH_MIN;
    }
    return n;
}

uint32_t build_icmp_error(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t ip_src,
                          const uint8_t *orig, uint32_t orig_len, uint8_t type, uint8_t code, uint32_t aux)
{
    ip_view v;
    uint32_t quote = 0;
    if (!ip_parse(orig, orig_len, &v)) quote = v.tot_len;
    else if (orig_len > ETH_HLEN) quote = orig_len - ETH_HLEN;
    if (quote > ICMP_MAX_IP - 28) quote = ICMP_MAX_IP - 28;
    const uint8_t *oh = orig + ETH_HLEN;
    uint16_t id = orig_len >= ETH_HLEN + 6 ? rd16(oh + 4) : 0;
    uint32_t dst = orig_len >= ETH_HLEN + 16 ? rd32(oh + 12) : 0;
    uint32_t n = eth_ip(out, dst_mac, src_mac, IP_TOS_ERROR, (uint16_t)(28 + quote), id, IPPROTO_ICMP_, ip_src, dst);
    uint8_t *icmp = out + ETH_HLEN + 20;
    icmp[0] = type;
    icmp[1] = code;
    wr16(icmp + 2, 0);
    wr32(icmp + 4, aux);
    memcpy(icmp + 8, oh, quote);
    wr16(icmp + 2, inet_csum(icmp, 8 + quote, 0));
    return pad(out, n);
}

uint32_t build_echo_reply(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], const uint8_t *req,
                          uint32_t req_len)
{
    ip_view v;
    if (ip_parse(req, req_len, &v)) return 0;
    uint32_t hl = 4u * v.ihl, icmp_len = v.tot_len - hl;
    if (20u + icmp_len > 0xFFFFu) return 0;
    uint32_t n = eth_ip(out, dst_mac, src_mac, v.tos, (uint16_t)(20u + icmp_len), v.id, IPPROTO_ICMP_, v.dst, v.src);
    uint8_t *icmp = out + ETH_HLEN + 20;
    memcpy(icmp, req + ETH_HLEN + hl, icmp_len);
    icmp[0] = ICMP_ECHO_REPLY;
    icmp[1] = 0;
    wr16(icmp + 2, 0);
    wr16(icmp + 2, inet_csum(icmp, icmp_len, 0));
    return pad(out, n);
}

uint32_t build_arp(uint8_t *out, int op, const uint8_t sha[6], uint32_t spa, const uint8_t tha[6], uint32_t tpa)
{
    static const uint8_t bcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    static const uint8_t zero[6] = {0};
    memcpy(out, op == 1 ? bcast : tha, 6);
    memcpy(out + 6, sha, 6);
    wr16(out + 12, 0x0806);
    uint8_t *a = out + ETH_HLEN;
    wr16(a, 1);
    wr16(a + 2, 0x0800);
    a[4] = 6;
    a[5] = 4;
    wr16(a + 6, (uint32_t)op);
    memcpy(a + 8, sha, 6);
    wr32(a + 14, spa);
    memcpy(a + 18, op == 1 ? zero : tha, 6);
    wr32(a + 24, tpa);
    return pad(out, ETH_HLEN + 28);
}

void forward_rewrite(uint8_t *f, const uint8_t dst_mac[6], const uint8_t src_mac[6], int full)
{
    memcpy(f, dst_mac, 6);
    memcpy(f + 6, src_mac, 6);
    uint8_t *h = f + ETH_HLEN;
    if (full) {
        h[8]--;
        wr16(h + 10, 0);
        wr16(h + 10, inet_csum(h, 4u * (h[0] & 0xF), 0));
        return;
    }
    /* RFC 1624 eq. 3: HC' = ~(~HC + ~m + m'), m = TTL|proto before, m' after */
    uint32_t m = (uint32_t)h[8] << 8 | h[9];
    h[8]--;
    uint32_t m2 = (uint32_t)h[8] << 8 | h[9];
    uint32_t sum = (~(uint32_t)rd16(h + 10) & 0xFFFF) + (~m & 0xFFFF) + m2;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    wr16(h + 10, ~sum & 0xFFFF);
}

/* ---- IP options ------------------------------------------------------------------- */

static int is_own(uint32_t a, const uint32_t *own, int nown)
{
    for (int i = 0; i < nown; i++)
        if (own[i] == a) return 1;
    return 0;
}

#define BAD(at)                                                                                   \
    do {                                                                                          \
        r->pointer = (uint8_t)(at);                                                               \
        return OPT_BAD;                                                                           \
    } while (0)

int ip_options_route(uint8_t *f, const uint32_t *own, int nown, opt_result *r)
{
    memset(r, 0, sizeof *r);
    uint8_t *h = f + ETH_HLEN;
    int hl = 4 * (h[0] & 0xF);
    for (int i = 20; i < hl;) {
        int t = h[i];
        if (t == 0) break;
        if (t == 1) {
            i++;
            continue;
        }
        if (i + 1 >= hl) BAD(i);
        int l = h[i + 1];
        if (l < 2 || i + l > hl) BAD(i + 1);
        int p = l >= 3 ? h[i + 2] : 0;
        switch (t) {
        case 7:                                            /* record route */
            if (l < 3) BAD(i + 1);
            if (p < 4) BAD(i + 2);
            if (p <= l && p + 3 > l) BAD(i + 2);
            if (r->rr_at) BAD(i);
            r->rr_at = i;
            break;
        case 68: {                                         /* timestamp */
            if (l < 4) BAD(i + 1);
            if (p < 5) BAD(i + 2);
            int flg = h[i + 3] & 0xF;
            if (flg != 0 && flg != 1 && flg != 3) BAD(i + 3);
            int need = flg == 0 ? 3 : 7;
            if (p <= l && p + need > l) BAD(i + 2);
            if (p > l && (h[i + 3] >> 4) == 15) BAD(i + 3);  /* overflow count overflows */
            if (r->ts_at) BAD(i);
            r->ts_at = i;
            break;
        }
        case 131:                                          /* loose source route */
        case 137:                                          /* strict source route */
            if (l < 3) BAD(i + 1);
            if (p < 4) BAD(i + 2);
            if (p <= l && p + 3 > l) BAD(i + 2);
            if (r->sr_at) BAD(i);
            r->sr_at = i;
            r->strict = t == 137;
            break;
        default:                                           /* others: carried unchanged */
            break;
        }
        i += l;
    }
    if (r->sr_at && is_own(rd32(h + 16), own, nown)) {
        int i = r->sr_at, l = h[i + 1], p = h[i + 2];
        if (p > l) {
            r->sr_exhausted = 1;
        } else {
            wr32(h + 16, rd32(h + i + p - 1));              /* next address -> destination */
            r->source_routed = 1;
        }
    } else {
        r->strict = 0;
    }
    return OPT_OK;
}

int ip_options_record(uint8_t *f, const opt_result *r, uint32_t out_addr, uint32_t ts_ms, uint8_t *pointer)
{
    uint8_t *h = f + ETH_HLEN;
    (void)pointer;
    if (r->source_routed) {
        int i = r->sr_at, p = h[i + 2];
        wr32(h + i + p - 1, out_addr);
        h[i + 2] = (uint8_t)(p + 4);
    }
    if (r->rr_at) {
        int i = r->rr_at, l = h[i + 1], p = h[i + 2];
        if (p <= l) {
            wr32(h + i + p - 1, out_addr);
            h[i + 2] = (uint8_t)(p + 4);
        }
    }
    if (r->ts_at) {
        int i = r->ts_at, l = h[i + 1], p = h[i + 2], flg = h[i + 3] & 0xF;
        if (p > l) {
            h[i + 3] = (uint8_t)(h[i + 3] + 0x10);          /* full: count the overflow */
        } else if (flg == 0) {
            wr32(h + i + p - 1, ts_ms);
            h[i + 2] = (uint8_t)(p + 4);
        } else if (flg == 1) {
            wr32(h + i + p - 1, out_addr);
            wr32(h + i + p + 3, ts_ms);
            h[i + 2] = (uint8_t)(p + 8);
        } else if (rd32(h + i + p - 1) == out_addr) {       /* prespecified: ours is next */
            wr32(h + i + p + 3, ts_ms);
            h[i + 2] = (uint8_t)(p + 8);
        }
    }
    return OPT_OK;
}
