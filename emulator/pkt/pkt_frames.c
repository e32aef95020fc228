/* pkt_frames.c -- frame bytes: the generator's builder for the common kinds and the
 * reference router (see npk_pkt.h; generator.py and oracle.py are the specification). */
#include <string.h>
#include "npk_pkt.h"

#define BENCHMARK_NET 0xC6120000u
#define TUNNEL_PORT 49152u
#define P_UDP 0
#define P_TCP 1
#define P_TUNNEL 2

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v); }
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t get32(const uint8_t *p) { return get16(p) << 16 | get16(p + 2); }

/* one's complement sum of big-endian 16-bit words, odd length zero-padded */
static uint32_t sum16(uint32_t acc, const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 1 < n; i += 2) acc += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1) acc += (uint32_t)p[n - 1] << 8;
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return acc;
}

static uint32_t fold(uint64_t acc)
{
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return (uint32_t)acc;
}

static uint32_t cksum(uint32_t acc) { return ~fold(acc) & 0xFFFF; }

static uint32_t pseudo(uint32_t src, uint32_t dst, uint32_t proto, uint32_t len)
{
    return fold((uint64_t)(src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + proto + len);
}

int64_t npk_tag_id(const uint8_t *f, uint32_t len)
{
    for (uint32_t k = 0; k + 4 <= len; k++) {
        if (f[k] == 'N' && f[k + 1] == 'P' && f[k + 2] == 'K' && f[k + 3] == '1')
            return k + 8 <= len ? (int64_t)get32(f + k + 4) : -1;
    }
    return -1;
}

void npk_tag_ids(uint32_t n, const uint8_t *data, const uint64_t *off, const uint16_t *len, int64_t *out)
{
    for (uint32_t i = 0; i < n; i++) out[i] = npk_tag_id(data + off[i], len[i]);
}

/* ---- lookups ------------------------------------------------------------------------ */

static const uint8_t *arp_mac(const npk_arp *a, uint32_t ip)
{
    uint32_t lo = 0, hi = a->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a->ip[mid] < ip) lo = mid + 1; else hi = mid;
    }
    return lo < a->n && a->ip[lo] == ip ? a->mac + 6 * lo : NULL;
}

static int32_t route_of(const npk_routes *r, uint32_t addr) { return npk_rt_lookup(r->starts, r->vals, r->count, addr); }

/* ---- the generator -------------------------------------------------------------------- */

static uint32_t mask_of(int len) { return len ? (uint32_t)(0xFFFFFFFFull << (32 - len)) : 0; }

static int martian_dst(uint32_t a)
{
    uint32_t top = a >> 24;
    return top == 0 || top == 127 || a >= 0xE0000000u;
}

static int resolves(const npk_gen *g, uint32_t dst, int32_t *route)
{
    const npk_router *r = g->router;
    if (martian_dst(dst) || npk_in_sorted(g->not_unicast, g->n_not_unicast, dst)) return 0;
    *route = route_of(&r->routes, dst);
    if (*route < 0) return 0;
    uint32_t hop = r->routes.next_hop[*route];
    return arp_mac(&r->arp, hop ? hop : dst) != NULL;
}

/* dst_normal; 0 on success */
static int dst_normal(npk_gen *g, uint32_t *out)
{
    if (!g->pool_n) return -1;
    for (int t = 0; t < 100; t++) {
        uint32_t i = npk_mt_below(&g->rng, g->pool_n);
        uint32_t dst = g->pool_prefix[i] | (npk_mt_u32(&g->rng) & ~mask_of(g->pool_len[i]));
        if (!g->forwardable) { *out = dst; return 0; }
        int32_t route = -1;
        if (resolves(g, dst, &route) && (g->via_port < 0 || g->router->routes.port[route] == (uint32_t)g->via_port)) {
            *out = dst;
            return 0;
        }
    }
    return -1;
}

static int proto_draw(npk_gen *g)
{
    if (g->nprotos == 1) return g->protos[0];
    double r = npk_mt_random(&g->rng) * g->proto_total;
    for (uint32_t i = 0; i < g->nprotos; i++) if (r < g->proto_cum[i]) return g->protos[i];
    return g->protos[g->nprotos - 1];
}

/* an IPv4 header of 20 + optlen bytes at h, checksum filled in */
static void ipv4_header(uint8_t *h, uint32_t optlen, const uint8_t *opts, uint32_t total, uint32_t ident,
                        uint32_t flags, uint32_t ttl, uint32_t proto, uint32_t src, uint32_t dst)
{
    h[0] = (uint8_t)(0x40 | (5 + optlen / 4));
    h[1] = 0;
    put16(h + 2, total & 0xFFFF);
    put16(h + 4, ident & 0xFFFF);
    put16(h + 6, flags << 13);
    h[8] = (uint8_t)ttl;
    h[9] = (uint8_t)proto;
    put16(h + 10, 0);
    put32(h + 12, src);
    put32(h + 16, dst);
    if (optlen) memcpy(h + 20, opts, optlen);
    put16(h + 10, cksum(sum16(0, h, 20 + optlen)));
}

/* ip_frame: 0 on success, -1 when the Python builder must take it (no room for headers) */
static int ip_frame(npk_gen *g, uint8_t *f, uint32_t length, uint32_t pid, uint32_t src, uint32_t dst,
                    uint32_t ttl, const uint8_t *opts, uint32_t optlen, int proto)
{
    uint32_t hl = 14 + 20 + optlen;
    if (proto < 0) proto = proto_draw(g);
    uint32_t l4 = proto == P_UDP ? 8 : proto == P_TCP ? 20 : 36;
    if (hl + l4 > length) { proto = P_UDP; l4 = 8; }
    if (hl + l4 > length) return -1;
    uint32_t payload = length - hl - l4;
    uint32_t taglen = payload < 8 ? payload : 8;
    g->ident = (g->ident + 1) & 0xFFFF;
    uint32_t ident = g->ident;
    uint32_t bits = npk_mt_u32(&g->rng);
    uint32_t sport = 1024 + (bits >> 16) % 64512, dport = (bits & 0xFFFF) ? (bits & 0xFFFF) : 1;
    memset(f, 0, length);
    memcpy(f, g->me_mac, 6);
    memcpy(f + 6, g->src_mac, 6);
    put16(f + 12, 0x0800);
    uint8_t tag[8] = {'N', 'P', 'K', '1', 0, 0, 0, 0};
    put32(tag + 4, pid);
    uint8_t *ip = f + 14, *l4p = f + hl;
    if (proto == P_TUNNEL) {
        uint32_t isrc = 0xC6336400u | npk_mt_bits(&g->rng, 8);
        uint32_t idst = 0xCB007100u | npk_mt_bits(&g->rng, 8);
        uint8_t *in_ip = l4p + 8, *in_udp = l4p + 28, *pl = l4p + 36;
        memcpy(pl, tag, taglen);
        uint32_t seg = 8 + payload;
        put16(in_udp, sport);
        put16(in_udp + 2, dport);
        put16(in_udp + 4, seg);
        uint32_t ck = cksum(sum16(pseudo(isrc, idst, 17, seg), in_udp, seg));
        put16(in_udp + 6, ck ? ck : 0xFFFF);
        ipv4_header(in_ip, 0, NULL, 20 + seg, ident, 0, 64, 17, isrc, idst);
        uint32_t oseg = 8 + 20 + seg;
        put16(l4p, sport);
        put16(l4p + 2, TUNNEL_PORT);
        put16(l4p + 4, oseg);
        ck = cksum(sum16(pseudo(src, dst, 17, oseg), l4p, oseg));
        put16(l4p + 6, ck ? ck : 0xFFFF);
        ipv4_header(ip, optlen, opts, 20 + optlen + oseg, ident, 0, ttl, 17, src, dst);
        return 0;
    }
    uint32_t seg = l4 + payload, pnum, flags, ck_off;
    if (proto == P_TCP) {
        uint32_t seq = npk_mt_u32(&g->rng), ack = npk_mt_u32(&g->rng);
        pnum = 6; flags = 2; ck_off = 16;
        put16(l4p, sport);
        put16(l4p + 2, dport);
        put32(l4p + 4, seq);
        put32(l4p + 8, ack);
        l4p[12] = 5 << 4;
        l4p[13] = 0x18;  /* ACK | PSH */
        put16(l4p + 14, 65535);
    } else {
        pnum = 17; flags = 0; ck_off = 6;
        put16(l4p, sport);
        put16(l4p + 2, dport);
        put16(l4p + 4, seg);
    }
    memcpy(l4p + l4, tag, taglen);
    uint32_t ck = cksum(sum16(pseudo(src, dst, pnum, seg), l4p, l4 + taglen));
    if (ck == 0 && pnum == 17) ck = 0xFFFF;
    put16(l4p + ck_off, ck);
    ipv4_header(ip, optlen, opts, length - 14, ident, flags, ttl, pnum, src, dst);
    return 0;
}

int64_t npk_gen_frames(npk_gen *g, uint32_t n, const uint8_t *kind, const uint16_t *lens,
                       const uint32_t *pid, uint8_t *out, const uint64_t *off)
{
    static const uint8_t router_alert[4] = {0x94, 0x04, 0x00, 0x00};
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *f = out + off[i];
        uint32_t ttl = 64, optlen = 0;
        int proto = -1;
        switch (kind[i]) {
        case NPK_K_NORMAL: break;
        case NPK_K_TTL_EXPIRING: ttl = npk_mt_below(&g->rng, 2); break;
        case NPK_K_OPTIONS: optlen = 4; break;
        case NPK_K_RUNT: proto = P_UDP; break;
        default: return i;
        }
        /* the Python builder raises for frames too short for their headers: leave it those */
        if (lens[i] < 14 + 20 + optlen + 8) return i;
        npk_mt saved = g->rng;
        uint32_t src = BENCHMARK_NET | npk_mt_bits(&g->rng, 17), dst;
        if (dst_normal(g, &dst)) { g->rng = saved; return -1 - (int64_t)i; }
        if (ip_frame(g, f, lens[i], pid[i], src, dst, ttl, router_alert, optlen, proto)) return -1 - (int64_t)i;
    }
    return n;
}

/* ---- the oracle -------------------------------------------------------------------------- */

static void verdict(uint8_t *kind, uint8_t *reason, uint8_t k, uint8_t r) { *kind = k; *reason = r; }

static void one(const npk_router *R, const uint8_t *f, uint32_t n, uint32_t in_port, uint8_t *kind, uint8_t *reason,
                uint8_t *oport, uint8_t *o)
{
    memcpy(o, f, n);
    *oport = 0;
    if (in_port >= R->nports) { verdict(kind, reason, 255, 0); return; }
    if (n < 60) { verdict(kind, reason, 1, NPK_R_SHORT_FRAME); return; }
    if (n > 1514) { verdict(kind, reason, 1, NPK_R_OVERSIZE_FRAME); return; }
    const npk_rport *port = &R->ports[in_port];
    int group = f[0] & 1;
    if (!group && memcmp(f, port->mac, 6)) { verdict(kind, reason, 1, NPK_R_DST_MAC_MISMATCH); return; }
    uint32_t et = get16(f + 12);
    if (et == 0x0806) { verdict(kind, reason, 2, NPK_R_ARP); return; }
    if (et != 0x0800) { verdict(kind, reason, 1, NPK_R_NON_IPV4_ETHERTYPE); return; }
    uint32_t vihl = f[14];
    if (vihl >> 4 != 4) { verdict(kind, reason, 1, NPK_R_BAD_VERSION); return; }
    uint32_t ihl = vihl & 0xF;
    if (ihl < 5) { verdict(kind, reason, 1, NPK_R_BAD_IHL); return; }
    uint32_t total = get16(f + 16);
    if (total < ihl * 4) { verdict(kind, reason, 1, NPK_R_BAD_TOTAL_LENGTH); return; }
    if (total > n - 14) { verdict(kind, reason, 1, NPK_R_IP_TRUNCATED); return; }
    if (cksum(sum16(0, f + 14, ihl * 4)) != 0) { verdict(kind, reason, 1, NPK_R_BAD_CHECKSUM); return; }
    if (ihl > 5) { verdict(kind, reason, 2, NPK_R_IP_OPTIONS); return; }
    uint32_t src = get32(f + 26), dst = get32(f + 30), top = dst >> 24;
    if (top == 0 || top == 127 || (dst >= 0xF0000000u && dst != 0xFFFFFFFFu)) { verdict(kind, reason, 1, NPK_R_MARTIAN_DST); return; }
    int zero = 0, bcast = 0, own = 0;
    for (uint32_t p = 0; p < R->nports; p++) {
        zero |= dst == R->ports[p].network;
        bcast |= dst == R->ports[p].broadcast;
        own |= dst == R->ports[p].address;
    }
    if (zero) { verdict(kind, reason, 1, NPK_R_OBSOLETE_BROADCAST); return; }
    if (dst == 0xFFFFFFFFu || bcast) { verdict(kind, reason, 2, NPK_R_BROADCAST); return; }
    if (dst >= 0xE0000000u && dst < 0xF0000000u) { verdict(kind, reason, 2, NPK_R_MULTICAST); return; }
    if (group) { verdict(kind, reason, 1, NPK_R_LINK_BROADCAST_UNICAST_IP); return; }
    if (own) { verdict(kind, reason, 2, NPK_R_LOCAL_DELIVERY); return; }
    uint32_t stop = src >> 24;
    int src_bcast = 0;
    for (uint32_t p = 0; p < R->nports; p++) src_bcast |= src == R->ports[p].broadcast;
    if (stop == 0 || stop == 127 || src >= 0xE0000000u || src_bcast) { verdict(kind, reason, 1, NPK_R_MARTIAN_SRC); return; }
    int32_t route = route_of(&R->routes, dst);
    if (route < 0) { verdict(kind, reason, 2, NPK_R_NO_ROUTE); return; }
    uint32_t ttl = f[22];
    if (ttl <= 1) { verdict(kind, reason, 2, NPK_R_TTL_EXPIRED); return; }
    uint32_t rport = R->routes.port[route];
    if (R->send_redirects && rport == in_port && (src & port->netmask) == port->network) {
        verdict(kind, reason, 2, NPK_R_REDIRECT);
        return;
    }
    uint32_t hop = R->routes.next_hop[route];
    const uint8_t *mac = arp_mac(&R->arp, hop ? hop : dst);
    if (!mac) { verdict(kind, reason, 2, NPK_R_ARP_MISS); return; }
    /* rule 23: new MACs, TTL - 1, checksum by RFC 1624 equation 3 */
    memcpy(o, mac, 6);
    memcpy(o + 6, R->ports[rport].mac, 6);
    uint32_t proto = f[23], old_ck = get16(f + 24);
    o[22] = (uint8_t)(ttl - 1);
    uint32_t m = ttl << 8 | proto, m2 = (ttl - 1) << 8 | proto;
    uint32_t s = fold((uint64_t)(~old_ck & 0xFFFF) + (~m & 0xFFFF) + m2);
    put16(o + 24, ~s & 0xFFFF);
    *oport = (uint8_t)rport;
    verdict(kind, reason, 0, NPK_R_NONE);
}

void npk_oracle_run(const npk_router *r, uint32_t n, const uint8_t *data, const uint64_t *off,
                    const uint16_t *len, const uint8_t *in_port, uint8_t *kind, uint8_t *reason,
                    uint8_t *port, uint8_t *out)
{
    for (uint32_t i = 0; i < n; i++)
        one(r, data + off[i], len[i], in_port[i], kind + i, reason + i, port + i, out + off[i]);
}
