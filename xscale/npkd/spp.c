/* spp.c -- npkd's SPP mode (cfg.h spp_cfg; docs/spp.md §12): an IPv4 slice's slow path on
 * the GPE (the gpe placement's build, NPK_GPE).  The buffer and log helpers
 * are cp.c's (cp_buffers.h); cp.c only calls spp_exception from app_exception. */
#include <string.h>

#include "cp.h"
#include "bytes.h"
#include "pkt.h"

#ifdef NPK_GPE   /* the gpe placement's build only: the XScale's npkd is the router's, unchanged */

static const uint8_t ZERO_MAC[6];

#include "cp_buffers.h"   /* desc_addr, buffer, owned, free_buffer, log_exc: cp.c's */

/* buffer h out of port: its length, then (packet word, port with bit 31 set: a ring get of 0
 * is an empty ring) on the ring back to i3d, which clears the bit (whose one producer npkd
 * is: the room is waited for, as i3d does on cp_to_qm) */
static void send_buffer(cp *c, uint32_t h, uint32_t len, int port, uint32_t pw)
{
    npkd_sram_wr(c->mem, desc_addr(c, h) + 8, len << 16);
    owned(c, h, 0);
    while (c->hw.ring_free(c->hw.ctx, c->cfg->cp_ring) < 2) {
    }
    c->hw.ring_put(c->hw.ctx, c->cfg->cp_ring, pw);
    c->hw.ring_put(c->hw.ctx, c->cfg->cp_ring, 0x80000000u | (uint32_t)port);   /* never 0 (empty) */
}

static uint32_t ts_ms(cp *c)
{
    uint64_t t = c->tab && c->tab->clock ? c->tab->clock(c->tab->clock_ctx) : c->hw.now_ns(c->hw.ctx);
    return (uint32_t)((c->epoch_ms_of_day + t / 1000000ull) % 86400000ull);
}

#define SPP_OUTER 42u        /* Ethernet + outer IPv4 + UDP (docs/spp.md §2) */

static void spp_wr16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static int spp_is_local(const spp_cfg *s, uint32_t a)
{
    for (uint32_t i = 0; i < s->nlocal; i++) {
        uint32_t m = s->local[i].len ? 0xFFFFFFFFu << (32 - s->local[i].len) : 0;
        if ((a & m) == (s->local[i].prefix & m)) return 1;
    }
    return 0;
}

/* an ICMP error about the inner packet (`in`: a frame of its own) from the slice's address */
static uint32_t spp_error(cp *c, const uint8_t *in, uint32_t n, const ip_view *v, uint8_t type, uint8_t code,
                          uint32_t from, int counter)
{
    if (icmp_is_error(in, n, v) || !ip_is_unicast_src(v->src)) {
        c->stats[ST_icmp_suppressed_rules]++;
        return 0;
    }
    c->stats[counter]++;
    return build_icmp_error(c->frame, ZERO_MAC, ZERO_MAC, from, in, n, type, code, 0);
}

/* the slow path's answer to the inner packet in c->frame (a frame: 14 bytes of Ethernet,
 * then IPv4), or 0: to one of the slice's addresses (the input meta-interface's, or one of
 * its GPE prefixes: the filters whose action is gpe), an echo request is answered, UDP
 * gets Port Unreachable, another protocol but ICMP Protocol Unreachable; any other
 * destination Time Exceeded (TTL 1 or 0) or Net Unreachable (the slow path has no route
 * of its own), from the meta-interface's address */
static uint32_t spp_answer(cp *c, const spp_cfg *s, const uint8_t *in, uint32_t n, const ip_view *v, uint32_t mi_ip)
{
    uint32_t off = ETH_HLEN + 4u * v->ihl, l4 = v->tot_len - 4u * v->ihl;
    if (v->dst == mi_ip || spp_is_local(s, v->dst)) {
        if (v->proto == IPPROTO_ICMP_ && l4 >= 8 && in[off] == ICMP_ECHO && !(v->frag & 0x2000)) {
            c->stats[ST_local_echo_requests]++;
            uint32_t m = inet_csum(in + off, l4, 0) || !ip_is_unicast_src(v->src) ? 0 :
                         build_echo_reply(c->frame, ZERO_MAC, ZERO_MAC, in, n, &v->dst, 1, v->dst, ts_ms(c));
            c->stats[m ? ST_icmp_echo_reply : ST_local_counted]++;
            return m;
        }
        if (v->proto == IPPROTO_UDP_) {
            c->stats[ST_local_udp]++;
            return spp_error(c, in, n, v, ICMP_UNREACH, UNREACH_PORT, mi_ip, ST_icmp_port_unreachable);
        }
        if (v->proto != IPPROTO_ICMP_) {
            c->stats[ST_local_proto_unsupported]++;
            return spp_error(c, in, n, v, ICMP_UNREACH, UNREACH_PROTO, mi_ip, ST_icmp_protocol_unreachable);
        }
        c->stats[ST_local_counted]++;
        return 0;
    }
    if (v->ttl <= 1) return spp_error(c, in, n, v, ICMP_TIME_EXCEEDED, 0, mi_ip, ST_icmp_time_exceeded);
    return spp_error(c, in, n, v, ICMP_UNREACH, UNREACH_NET, mi_ip, ST_icmp_net_unreachable);
}

/* a record i3d relayed (its frame: Ethernet, outer IPv4 to a meta-interface, UDP, the
 * inner IPv4 packet): the answer goes back in the same buffer, encapsulated from the
 * input meta-interface to the sender's outer address and UDP port, out of the port it
 * came in by (Ethernet: back to the MAC it came from) */
int spp_exception(cp *c, exc_info *x, uint8_t *f, const spp_cfg *s)
{
    x->digest = frame_digest(f, x->len);
    uint32_t k = s->nmi, m = 0;
    if (x->len >= SPP_OUTER + 20 && f[12] == 8 && f[13] == 0 && f[14] == 0x45 && f[23] == IPPROTO_UDP_) {
        uint32_t dst = rd32(f + 30), dport = (uint32_t)f[36] << 8 | f[37];
        for (k = 0; k < s->nmi; k++)
            if (s->mi[k].port == x->in_port && s->mi[k].ip == dst && s->mi[k].udp == dport) break;
    }
    if (k == s->nmi) {
        c->stats[ST_exc_unknown]++;                 /* not an IPv4 slice's meta-interface */
    } else {
        uint8_t *in = c->quote;                     /* the inner packet, a frame of its own */
        uint32_t n = x->len - SPP_OUTER + ETH_HLEN;
        memset(in, 0, 12);
        in[12] = 8;
        in[13] = 0;
        memcpy(in + ETH_HLEN, f + SPP_OUTER, x->len - SPP_OUTER);
        ip_view v;
        if (!ip_parse(in, n, &v) && !(v.frag & 0x1FFF))
            m = spp_answer(c, s, in, n, &v, s->mi[k].ip);
        else
            c->stats[ST_local_counted]++;
    }
    uint32_t ilen = m ? (uint32_t)c->frame[16] << 8 | c->frame[17] : 0;
    uint8_t *o = m ? buffer(c, x->handle, SPP_OUTER + ilen) : NULL;
    if (!o) {
        log_exc(c, x, ACT_CONSUMED);
        free_buffer(c, x->handle);
        return 1;
    }
    uint8_t mac[6], peer[4], sport[2];               /* the sender's, before the frame is rewritten */
    memcpy(mac, f + 6, 6);
    memcpy(peer, f + 26, 4);
    memcpy(sport, f + 34, 2);
    memmove(o + 6, o, 6);                           /* Ethernet: from the MAC it came to, back */
    memcpy(o, mac, 6);
    o[12] = 8;
    o[13] = 0;
    uint8_t *ip = o + ETH_HLEN;
    memset(ip, 0, 28);
    ip[0] = 0x45;
    spp_wr16(ip + 2, 28 + ilen);
    ip[8] = 64;
    ip[9] = IPPROTO_UDP_;
    uint32_t a = s->mi[k].ip;
    ip[12] = (uint8_t)(a >> 24), ip[13] = (uint8_t)(a >> 16), ip[14] = (uint8_t)(a >> 8), ip[15] = (uint8_t)a;
    memcpy(ip + 16, peer, 4);
    spp_wr16(ip + 10, inet_csum(ip, 20, 0));
    spp_wr16(ip + 20, s->mi[k].udp);                /* UDP: checksum 0 (none), as the fast path */
    memcpy(ip + 22, sport, 2);
    spp_wr16(ip + 24, 8 + ilen);
    memcpy(ip + 28, c->frame + ETH_HLEN, ilen);
    uint32_t len = SPP_OUTER + ilen;
    x->sent = 1;
    send_buffer(c, x->handle, len, (int)x->in_port, x->pw);
    log_exc(c, x, ACT_FORWARDED);
    return 1;
}

#else
typedef int npkd_spp_gpe_only;   /* ISO C: a translation unit is not empty */
#endif
