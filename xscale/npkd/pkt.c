/* pkt.c -- packet parsing and building (pkt.h). */
#include "pkt.h"
#include "bytes.h"

#include <string.h>

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

/* pass 1 without changing anything: every option checked, where each one we act on is
 * (r->sr_at, rr_at, ts_at; r->strict for an SSRR), and whether a prespecified timestamp
 * names one of own[] next (r->ts_ours) */
static int options_scan(const uint8_t *h, const uint32_t *own, int nown, opt_result *r)
{
    memset(r, 0, sizeof *r);
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
            r->ts_ours = flg == 3 && p <= l && is_own(rd32(h + i + p - 1), own, nown);
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
    return OPT_OK;
}

int ip_options_route(uint8_t *f, const uint32_t *own, int nown, opt_result *r)
{
    uint8_t *h = f + ETH_HLEN;
    for (;;) {
        if (options_scan(h, own, nown, r) != OPT_OK) return OPT_BAD;
        if (!r->sr_at || !is_own(rd32(h + 16), own, nown)) {
            r->strict = 0;
            return OPT_OK;
        }
        int i = r->sr_at, l = h[i + 1], p = h[i + 2];
        if (p > l) {
            r->sr_exhausted = 1;
            return OPT_OK;
        }
        wr32(h + 16, rd32(h + i + p - 1));                  /* next address -> destination */
        r->source_routed = 1;
        if (!is_own(rd32(h + 16), own, nown)) return OPT_OK;
        /* the next address is this router's too: that hop is made here (the address stays
         * in the route as the one recorded) and the route read on, checked again */
        h[i + 2] = (uint8_t)(p + 4);
    }
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
        } else if (r->ts_ours) {                            /* prespecified: one of ours is next */
            wr32(h + i + p + 3, ts_ms);
            h[i + 2] = (uint8_t)(p + 8);
        }
    }
    return OPT_OK;
}

/* ---- echo replies ------------------------------------------------------------------------ */

/* The return route of the used-up source route at o (the request's, from `src`) into
 * out: 0 (no option: the reply goes straight to src) or the option's length, *dst = the
 * reply's first hop.  The request went src -> a1 -> .. -> ak -> us, ak..a1 being the
 * addresses before the pointer (all of them: the route is used up); the way back is
 * ak -> .. -> a1 -> src: the reply is addressed to ak and carries {a(k-1), .., a1, src}
 * with the pointer on the first.  A route that names src first (RFC 1122 3.2.1.8 case
 * B, a sender's mistake) comes back without src twice; the router's own addresses at
 * the end of the route (hops it made to itself, cp.c options) are no hops back; a route
 * with no hop left gives no option (it would route nothing). */
static uint32_t return_route(const uint8_t *o, uint32_t src, const uint32_t *own, int nown, uint8_t *out,
                             uint32_t *dst)
{
    uint32_t l = o[1], p = o[2], end = p < l + 1 ? p : l + 1;
    uint32_t k = end >= 4 ? (end - 4) / 4 : 0, first = k && rd32(o + 3) == src;
    while (k > first && is_own(rd32(o + 3 + 4 * (k - 1)), own, nown)) k--;
    if (k <= first) return 0;
    uint32_t m = k - first;                               /* addresses in the return route */
    *dst = rd32(o + 3 + 4 * (k - 1));
    out[0] = o[0];
    out[1] = (uint8_t)(3 + 4 * m);
    out[2] = 4;
    for (uint32_t j = 0; j + 1 < m; j++) memcpy(out + 3 + 4 * j, o + 3 + 4 * (k - 2 - j), 4);
    wr32(out + 3 + 4 * (m - 1), src);
    return 3 + 4 * m;
}

/* The echo reply's options from the request's header h (already checked: r), in this
 * order: the return route of a source route (same type), Record Route, Timestamp (as
 * received: the caller adds this router); then End of List up to a 32-bit boundary.
 * Not returned: NOP and End of List (padding, which RFC 791 lets anyone drop) and every
 * other option -- RFC 1122 3.2.2.6 and RFC 1812 4.3.3.6 ask for these three only, and
 * the reply is a datagram the router originates: it would not send Stream ID (RFC 1812
 * 4.2.2.1: SHOULD NOT), and security labels or router alerts are not its to repeat.
 * Returns the length (0..40); *rr_at / *ts_at: where RR / TS start in the reply's
 * header (0: none); *dst: the reply's first hop (unchanged without a return route). */
static uint32_t reply_options(const uint8_t *h, const opt_result *r, uint32_t src, const uint32_t *own, int nown,
                              uint8_t *opt, uint32_t *dst, int *rr_at, int *ts_at)
{
    uint32_t n = 0;
    *rr_at = *ts_at = 0;
    if (r->sr_at) n += return_route(h + r->sr_at, src, own, nown, opt, dst);
    if (r->rr_at) {
        *rr_at = 20 + (int)n;
        memcpy(opt + n, h + r->rr_at, h[r->rr_at + 1]);
        n += h[r->rr_at + 1];
    }
    if (r->ts_at) {
        *ts_at = 20 + (int)n;
        memcpy(opt + n, h + r->ts_at, h[r->ts_at + 1]);
        n += h[r->ts_at + 1];
    }
    while (n % 4) opt[n++] = 0;
    return n;
}

int echo_reply_route(const uint8_t *req, uint32_t req_len, const uint32_t *own, int nown, uint32_t *dst, int *strict)
{
    ip_view v;
    opt_result r;
    if (ip_parse(req, req_len, &v)) return -1;
    *dst = v.src;
    *strict = 0;
    if (v.ihl == 5) return 0;
    if (options_scan(v.hdr, NULL, 0, &r) != OPT_OK) return -1;
    uint8_t opt[40];
    *strict = r.sr_at && return_route(v.hdr + r.sr_at, v.src, own, nown, opt, dst) && r.strict;
    return 0;
}

uint32_t build_echo_reply(uint8_t *out, const uint8_t dst_mac[6], const uint8_t src_mac[6], const uint8_t *req,
                          uint32_t req_len, const uint32_t *own, int nown, uint32_t out_addr, uint32_t ts_ms)
{
    ip_view v;
    if (ip_parse(req, req_len, &v)) return 0;
    uint8_t opt[40];
    uint32_t dst = v.src, ol = 0;
    opt_result r, rec = {0};
    if (v.ihl > 5) {
        if (options_scan(v.hdr, own, nown, &r) != OPT_OK) return 0;
        ol = reply_options(v.hdr, &r, v.src, own, nown, opt, &dst, &rec.rr_at, &rec.ts_at);
        rec.ts_ours = r.ts_ours;
    }
    uint32_t hl = 4u * v.ihl, icmp_len = v.tot_len - hl, tot = 20u + ol + icmp_len;
    if (tot > 0xFFFFu) return 0;
    uint32_t n = eth_ip(out, dst_mac, src_mac, v.tos, (uint16_t)tot, v.id, IPPROTO_ICMP_, v.dst, dst);
    uint8_t *h = out + ETH_HLEN, *icmp = h + 20 + ol;
    if (ol) {
        h[0] = (uint8_t)(0x40 | (20 + ol) / 4);
        memcpy(h + 20, opt, ol);
        ip_options_record(out, &rec, out_addr, ts_ms, NULL);   /* RR, TS: this router */
        wr16(h + 10, 0);
        wr16(h + 10, inet_csum(h, 20 + ol, 0));
    }
    memcpy(icmp, req + ETH_HLEN + hl, icmp_len);
    icmp[0] = ICMP_ECHO_REPLY;
    icmp[1] = 0;
    wr16(icmp + 2, 0);
    wr16(icmp + 2, inet_csum(icmp, icmp_len, 0));
    return pad(out, n);
}
