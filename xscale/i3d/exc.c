/* exc.c -- what i3d does with an exception record of an I3 slice (docs/spp.md §6-§8),
 * the frames it sends (encapsulated as the fast path encapsulates them: spp.md §2) and
 * its statistics block.
 *
 *   i3_no_trigger, i3_multi_trigger, spp_to_gpe: the triggers of the longest matching
 *       length in the daemon's store (those without a TCAM filter too) each get a copy
 *       (I3's multicast); none: dropped_no_trigger.  A trigger whose action is gpe
 *       consumes the packet here; drop drops it.
 *   i3_no_finger: out of the slice's range, finger k (spp.md §4.2) invalid: the highest
 *       valid finger below k (never past the identifier); none: dropped_no_finger.
 *   i3_complex: the packet carries an identifier stack (the stack id, bytes 18..25):
 *       its trigger's receivers get it as above; when no trigger matches, the stack is
 *       popped (the stack id becomes the trigger id, the complex flag and the stack id
 *       are cleared) and the packet is routed again by the new identifier (in range:
 *       triggers; out of range: a finger).
 * Every frame sent is the received I3 packet with its hop limit one less (as the fast
 * path forwards it), outer headers for its output meta-interface and next hop. */
#include <string.h>

#include "i3d.h"
#include "../npkd/bytes.h"

const char *i3d_stat_name(int i)
{
    static const char *const names[] = {
#define I3D_STAT_NAME(name) #name,
        I3D_STATS(I3D_STAT_NAME)
#undef I3D_STAT_NAME
    };
    return i >= 0 && i < I3S_COUNT ? names[i] : "?";
}

void i3d_init(i3d *d, npkd_mem *mem, const i3d_hw *hw)
{
    memset(d, 0, sizeof *d);
    d->mem = mem;
    d->hw = *hw;
    d->exc_ring = d->cp_ring = d->relay_ring = d->back_ring = -1;
    d->st.next_handle = 1;                          /* store_init's, without a second memset */
#define I3D_OPT_DEFAULT(name, dflt) d->opt.name = (dflt);
    I3D_OPTIONS(I3D_OPT_DEFAULT)
#undef I3D_OPT_DEFAULT
}

void i3d_free(i3d *d)
{
    store_free(&d->st);
    fast_free(&d->fp);
}

/* ---- buffers and sending ------------------------------------------------------------------- */

#define ETH 14u
#define IP4 20u
#define UDP 8u
#define I3_AT (ETH + IP4 + UDP)
#define I3_HDR 27u

static uint32_t desc_addr(const i3d *d, uint32_t h)
{
    return d->desc_base + (h << d->desc_shift);
}

static uint8_t *buffer(i3d *d, uint32_t h, uint32_t len)
{
    return npkd_dram(d->mem, d->buf_base + (h << d->buf_shift), len);
}

static void free_buffer(i3d *d, uint32_t h)
{
    d->hw.queue_put(d->hw.ctx, d->freelist_q, desc_addr(d, h));
}

static const uint8_t *arp_of(const i3d *d, uint32_t ip)
{
    for (uint32_t i = 0; i < d->narp; i++)
        if (d->arp[i].ip == ip) return d->arp[i].mac;
    return NULL;
}

static uint32_t ip_sum(const uint8_t *h)
{
    uint32_t s = 0;
    for (uint32_t i = 0; i < IP4; i += 2) s += (uint32_t)h[i] << 8 | h[i + 1];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return ~s & 0xFFFF;
}

/* the outer headers of frame f (len bytes) for leaving by meta-interface `out` to hop:
 * 0, or -1 (no such meta-interface or no MAC for the next hop) */
static int encapsulate(i3d *d, uint8_t *f, uint32_t len, const i3_hop *hop)
{
    const i3_mi *m = &d->st.mi[hop->out];
    const uint8_t *mac = arp_of(d, hop->ip);
    if (!m->used || !mac || m->port >= I3D_MAX_PORTS) return -1;
    memcpy(f, mac, 6);
    memcpy(f + 6, d->port_mac[m->port], 6);
    wr16(f + 12, 0x0800);
    uint8_t *ip = f + ETH;
    uint32_t total = (uint32_t)ip[2] << 8 | ip[3], ulen = (uint32_t)ip[IP4 + 4] << 8 | ip[IP4 + 5];
    if (total < IP4 + UDP || total > len - ETH) total = len - ETH;   /* the received lengths stand */
    if (ulen < UDP || ulen > total - IP4) ulen = total - IP4;
    memset(ip, 0, IP4);
    ip[0] = 0x45;
    wr16(ip + 2, total);
    ip[8] = 64;
    ip[9] = 17;
    wr32(ip + 12, m->ip);
    wr32(ip + 16, hop->ip);
    wr16(ip + 10, ip_sum(ip));
    uint8_t *u = ip + IP4;
    wr16(u, m->udp);
    wr16(u + 2, hop->udp);
    wr16(u + 4, ulen);
    wr16(u + 6, 0);
    return 0;
}

/* FNV-1a over the first 128 bytes: how the host names the packet (npkd's frame_digest) */
static uint32_t digest(const uint8_t *f, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len && i < 128; i++) h = (h ^ f[i]) * 16777619u;
    return h;
}

/* the exception log (i3d.h): a record per exception handled */
static void log_exc(i3d *d, uint32_t dig, uint32_t len, uint32_t port, uint32_t code, uint32_t act, uint32_t sent,
                    uint32_t h)
{
    uint32_t b = d->stats_base;
    if (!b) return;
    uint32_t a = b + I3D_LOG_OFF + 16 + 16 * (d->log_count % I3D_LOG_CAP);
    npkd_sram_wr(d->mem, a, dig);
    npkd_sram_wr(d->mem, a + 4, (len & 0xFFFF) << 16 | (port & 0xFF) << 8 | (code & 0xFF));
    npkd_sram_wr(d->mem, a + 8, act << 24 | (sent > 255 ? 255 : sent) << 16 | (h & 0xFFFF));
    npkd_sram_wr(d->mem, a + 12, (uint32_t)(d->now / 1000u));
    d->log_count++;
    npkd_sram_wr(d->mem, b + I3D_LOG_OFF + 4, I3D_LOG_CAP);
    npkd_sram_wr(d->mem, b + I3D_LOG_OFF, d->log_count);     /* the count last */
}

void i3d_mirror(i3d *d)
{
    uint32_t b = d->stats_base;
    if (!b) return;
    uint32_t n = d->st.nflt < I3D_MIRROR_CAP ? d->st.nflt : I3D_MIRROR_CAP;
    for (uint32_t i = 0; i < n; i++) {
        const i3_filter *f = &d->st.flt[i];
        uint32_t a = b + I3D_MIRROR_OFF + 16 + 32 * i;
        npkd_sram_wr(d->mem, a, f->handle);
        npkd_sram_wr(d->mem, a + 4, (uint32_t)f->slice << 16 | (uint32_t)f->code << 8 | f->action);
        npkd_sram_wr(d->mem, a + 8, (uint32_t)(f->id >> 32));
        npkd_sram_wr(d->mem, a + 12, (uint32_t)f->id);
        npkd_sram_wr(d->mem, a + 16, (uint32_t)f->len << 24 | (uint32_t)f->fast << 16 | (uint32_t)(f->in & 0xFF) << 8 | f->to.out);
        npkd_sram_wr(d->mem, a + 20, f->to.ip);
        npkd_sram_wr(d->mem, a + 24, (uint32_t)f->to.udp << 16);
        npkd_sram_wr(d->mem, a + 28, (uint32_t)f->entry);
    }
    npkd_sram_wr(d->mem, b + I3D_MIRROR_OFF, n);
    npkd_sram_wr(d->mem, b + I3D_MIRROR_OFF + 8, (uint32_t)(d->changed_ns / 1000u));
    npkd_sram_wr(d->mem, b + I3D_MIRROR_OFF + 4, ++d->mirror_gen);   /* last: the reader's check */
}

/* the GPE path's delay of the packet whose descriptor is at desc (i3d.h) */
static void note_delay(i3d *d, uint32_t handle)
{
    uint32_t ts = npkd_sram_rd(d->mem, desc_addr(d, handle) + 20);
    uint64_t now = d->now, mhz = d->opt.clock_mhz ? d->opt.clock_mhz : 1400;
    uint32_t now_ticks = (uint32_t)(now * mhz / 16000u);
    uint64_t ns = (uint64_t)(uint32_t)(now_ticks - ts) * 16000u / mhz;
    d->lat_n++;
    d->lat_sum += ns;
    if (ns > d->lat_max) d->lat_max = ns;
    if (d->stats_base)
        npkd_sram_wr(d->mem, d->stats_base + I3D_SAMPLES_OFF + 4u * (uint32_t)((d->lat_n - 1) % I3D_SAMPLES),
                     (uint32_t)(ns > 0xFFFFFFFFu ? 0xFFFFFFFFu : ns));
}

/* buffer h's frame out: descriptor length, then (packet word, port) on the cp ring */
static void send_msg(i3d *d, uint32_t h, uint32_t len, uint32_t pw, uint8_t port, uint32_t origin)
{
    npkd_sram_wr(d->mem, desc_addr(d, h) + 8, len << 16);
    note_delay(d, origin);
    /* the room on the ring is read only when the last reading is used up: the daemon is
     * the ring's one producer, so the room known is never more than there is */
    while (d->cp_room < 2) d->cp_room = d->hw.ring_free(d->hw.ctx, d->cp_ring);
    d->cp_room -= 2;
    d->hw.ring_put(d->hw.ctx, d->cp_ring, pw);
    d->hw.ring_put(d->hw.ctx, d->cp_ring, port);
}

/* a copy of frame f (already encapsulated) in a buffer off the free list: 0, -1 none */
static int send_copy(i3d *d, const uint8_t *f, uint32_t len, uint8_t port, uint32_t origin)
{
    uint32_t q = d->hw.queue_get(d->hw.ctx, d->freelist_q);
    if (!q) {
        d->stats[I3S_no_buffer]++;
        return -1;
    }
    uint32_t h = (q - d->desc_base) >> d->desc_shift;
    uint8_t *b = buffer(d, h, len);
    if (!b) {
        free_buffer(d, h);
        d->stats[I3S_no_buffer]++;
        return -1;
    }
    memcpy(b, f, len);
    npkd_sram_wr(d->mem, desc_addr(d, h) + 12, 0xFFu << 24);          /* input port: none */
    npkd_sram_wr(d->mem, desc_addr(d, h) + 20, npkd_sram_rd(d->mem, desc_addr(d, origin) + 20));
    send_msg(d, h, len, 0x80000000u | PW_CONTROL | h, port, h);
    return 0;
}

/* ---- the I3 decision ------------------------------------------------------------------------- */

typedef struct pkt {
    uint32_t pw, h, len, port;
    i3_slice *sl;
    uint8_t *f;
    int sent;          /* the packet's own buffer went out */
    uint32_t nsent;    /* frames sent about it */
} pkt;

/* the packet to `hops` (n of them): the first in its own buffer, the others copies */
static void deliver(i3d *d, pkt *p, const i3_hop *hops, uint32_t n, int by_finger)
{
    memcpy(d->frame, p->f, p->len);                 /* the copies' bytes (headers rewritten below) */
    for (uint32_t i = 0; i < n; i++) {
        if (encapsulate(d, d->frame, p->len, &hops[i])) {
            d->stats[I3S_dropped_bad]++;
            continue;
        }
        uint8_t port = d->st.mi[hops[i].out].port;
        if (!p->sent) {
            memcpy(p->f, d->frame, ETH + IP4 + UDP);
            send_msg(d, p->h, p->len, p->pw, port, p->h);
            p->sent = 1;
            p->nsent++;
        } else if (send_copy(d, d->frame, p->len, port, p->h)) {
            continue;
        } else {
            d->stats[I3S_copies]++;
            p->nsent++;
        }
        d->stats[by_finger ? I3S_finger_forwarded : I3S_delivered]++;
    }
}

static void by_finger(i3d *d, pkt *p, uint64_t id)
{
    int k = finger_route(&p->sl->ring, id);
    if (k < 0) {
        d->stats[I3S_dropped_no_finger]++;
        return;
    }
    i3_hop hop = p->sl->ring.finger[k].hop;
    deliver(d, p, &hop, 1, 1);
}

/* in range: the triggers; 1 when a trigger matched (whatever its action) */
static int by_triggers(i3d *d, pkt *p, uint64_t id, int count_none)
{
    uint32_t h[64];
    uint32_t n = trig_match(&d->st, p->sl->id, id, h, 64);
    if (!n) {
        if (count_none) d->stats[I3S_dropped_no_trigger]++;
        return 0;
    }
    if (n > 64) n = 64;
    i3_hop hops[64];
    uint32_t nh = 0, gpe = 0, drop = 0;
    for (uint32_t i = 0; i < n; i++) {
        i3_filter *f = flt_get(&d->st, h[i]);
        f->hits++;
        if (f->action == FA_FORWARD) hops[nh++] = f->to;
        gpe += f->action == FA_GPE;
        drop += f->action == FA_DROP;
    }
    if (nh) deliver(d, p, hops, nh, 0);
    else if (gpe) d->stats[I3S_gpe_consumed]++;
    else if (drop) d->stats[I3S_dropped_filter]++;
    return 1;
}

static void i3_packet(i3d *d, pkt *p, uint32_t code)
{
    if (p->len < I3_AT + I3_HDR) {
        d->stats[I3S_dropped_bad]++;
        return;
    }
    uint8_t *i3 = p->f + I3_AT;
    if (i3[1] <= 1) {
        d->stats[I3S_dropped_hop_limit]++;
        return;
    }
    i3[1]--;                                        /* as the fast path does when it forwards */
    uint64_t id = (uint64_t)rd32(i3 + 4) << 32 | rd32(i3 + 8);
    if (code == EXC_I3_COMPLEX || (i3[0] & 1)) {
        if (ring_mine(&p->sl->ring, id) && by_triggers(d, p, id, 0)) return;
        /* pop the stack: the stack id is the identifier now */
        memcpy(i3 + 4, i3 + 18, 8);
        memset(i3 + 18, 0, 8);
        i3[0] &= 0xF0;
        id = (uint64_t)rd32(i3 + 4) << 32 | rd32(i3 + 8);
    }
    if (ring_mine(&p->sl->ring, id))
        by_triggers(d, p, id, 1);
    else
        by_finger(d, p, id);
}

void i3d_exception(i3d *d, uint32_t pw, uint32_t rec)
{
    uint32_t code = rec & 0xFF, index = rec >> 8 & 0xFF;
    pkt p = {pw, pw & 0xFFFF, 0, rec >> 16 & 0xFF, NULL, NULL, 0, 0};
    d->stats[I3S_exceptions]++;
    d->now = d->hw.now_ns(d->hw.ctx);               /* the clock as the record is taken */
    if (p.h >= d->n_bufs) {
        d->stats[I3S_exc_other]++;
        return;
    }
    p.len = npkd_sram_rd(d->mem, desc_addr(d, p.h) + 8) >> 16;
    p.f = p.len <= I3D_FRAME_MAX ? buffer(d, p.h, p.len) : NULL;
    uint32_t dig = p.f ? digest(p.f, p.len) : 0;
    /* the slice: the meta-interface the frame came to (its input port, outer destination
     * and UDP port, as the substrate's demux found it), else the record's slice byte */
    int mi = p.f && p.len >= I3_AT ? mi_of(&d->st, (uint8_t)p.port, rd32(p.f + ETH + 16),
                                          (uint16_t)(p.f[ETH + IP4 + 2] << 8 | p.f[ETH + IP4 + 3])) : -1;
    p.sl = mi >= 0 ? slice_get(&d->st, d->st.mi[mi].slice)
           : index == SLICE_SUBSTRATE ? NULL : slice_by_index(&d->st, (uint8_t)index);
    if (!p.sl || p.sl->code != CODE_I3 || code < EXC_SPP_TO_GPE || code > EXC_I3_COMPLEX) {
        if (d->relay_ring >= 0 && d->hw.ring_free(d->hw.ctx, d->relay_ring) >= 2) {
            d->hw.ring_put(d->hw.ctx, d->relay_ring, pw);       /* the other daemon's (npkd) */
            d->hw.ring_put(d->hw.ctx, d->relay_ring, rec);
            d->stats[I3S_relayed]++;
            d->back_until = d->now + 200000u;   /* its answer comes back within microseconds */
            log_exc(d, dig, p.len, p.port, code, I3A_RELAYED, 0, p.h);
        } else {
            d->stats[I3S_exc_other]++;
            log_exc(d, dig, p.len, p.port, code, I3A_DROPPED, 0, p.h);
            free_buffer(d, p.h);
        }
        return;
    }
    d->stats[I3S_exc_to_gpe] += code == EXC_SPP_TO_GPE;
    d->stats[I3S_exc_no_trigger] += code == EXC_I3_NO_TRIGGER;
    d->stats[I3S_exc_multi_trigger] += code == EXC_I3_MULTI;
    d->stats[I3S_exc_no_finger] += code == EXC_I3_NO_FINGER;
    d->stats[I3S_exc_complex] += code == EXC_I3_COMPLEX;
    if (!p.f) {
        d->stats[I3S_dropped_bad]++;
        log_exc(d, dig, p.len, p.port, code, I3A_DROPPED, 0, p.h);
        free_buffer(d, p.h);
        return;
    }
    uint32_t consumed = d->stats[I3S_gpe_consumed];
    i3_packet(d, &p, code);
    log_exc(d, dig, p.len, p.port, code, p.sent ? I3A_FORWARDED : consumed != d->stats[I3S_gpe_consumed] ? I3A_CONSUMED : I3A_DROPPED,
            p.nsent, p.h);
    if (!p.sent) free_buffer(d, p.h);
}

int i3d_back(i3d *d)
{
    int n = 0;
    uint32_t pw, port;
    while (d->back_ring >= 0) {
        /* npkd puts a frame's two words one request at a time: the first may be here
         * before the second (kept until it comes) */
        if (d->back_pw) {
            pw = d->back_pw;
        } else if (!d->hw.ring_get(d->hw.ctx, d->back_ring, &pw)) {
            break;
        }
        if (!d->hw.ring_get(d->hw.ctx, d->back_ring, &port)) {
            d->back_pw = pw;
            d->back_until = d->now + 200000u;
            break;
        }
        d->back_pw = 0;
        port &= 0x7FFFFFFFu;                        /* npkd sets bit 31: a word of 0 reads as empty */
        while (d->cp_room < 2) d->cp_room = d->hw.ring_free(d->hw.ctx, d->cp_ring);
        d->cp_room -= 2;
        d->hw.ring_put(d->hw.ctx, d->cp_ring, pw);
        d->hw.ring_put(d->hw.ctx, d->cp_ring, port);
        d->stats[I3S_relayed_back]++;
        n++;
    }
    return n;
}

int i3d_poll(i3d *d, int max)
{
    int n = 0;
    while (n < max) {
        uint32_t pw, rec;
        if (!d->hw.ring_get(d->hw.ctx, d->exc_ring, &pw)) break;
        if (!d->hw.ring_get(d->hw.ctx, d->exc_ring, &rec)) {   /* a record is put whole: cannot happen */
            d->stats[I3S_exc_other]++;
            break;
        }
        i3d_exception(d, pw, rec);
        n++;
    }
    return n;
}

void i3d_publish(i3d *d, uint32_t starts)
{
    uint32_t b = d->stats_base;
    if (!b) return;
    npkd_sram_wr(d->mem, b + 4, I3D_STATS_VERSION);
    npkd_sram_wr(d->mem, b + 8, 1);
    npkd_sram_wr(d->mem, b + 12, starts);
    for (int i = 0; i < I3S_COUNT; i++) npkd_sram_wr(d->mem, b + I3D_STATS_HDR + 4u * (uint32_t)i, d->stats[i]);
    npkd_sram_wr(d->mem, b + I3D_LAT_OFF, (uint32_t)d->lat_n);
    npkd_sram_wr(d->mem, b + I3D_LAT_OFF + 4, (uint32_t)(d->lat_max > 0xFFFFFFFFu ? 0xFFFFFFFFu : d->lat_max));
    npkd_sram_wr(d->mem, b + I3D_LAT_OFF + 8, (uint32_t)(d->lat_sum >> 32));
    npkd_sram_wr(d->mem, b + I3D_LAT_OFF + 12, (uint32_t)d->lat_sum);
    npkd_sram_wr(d->mem, b, I3D_STATS_MAGIC);
}
