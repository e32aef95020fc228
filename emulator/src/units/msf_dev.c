/* MSF device: receive and transmit ports with wire timing, RBUF elements,
 * receive status words pushed to threads on the receive thread freelist,
 * TBUF elements with transmit control words, TX_SEQUENCE and per-port
 * transmit flow-control status.  The model and the register map are
 * documented in npk_emu.h ("MSF device") and examples/passthrough/README.md.
 * It plugs into the chip through npk_msf_ops. */
#include <stdlib.h>
#include <string.h>
#include "../internal.h"
#include "npk_msf.h"

#define MAXP 16
#define RBUF_BYTES 8192u
#define TBUF_BYTES 8192u
#define BUF_BASE 0x2000u
#define TCW_BASE 0x1800u       /* TBUF element control words, 8 bytes each */
#define FRAME_MAX 16384u
#define NEVER_PS UINT64_MAX

enum { EL_FREE = 0, EL_FILL = 1, EL_FULL = 2, EL_HELD = 3 };

typedef struct rx_pkt { uint64_t t_ps; size_t off; uint32_t id; uint16_t len; } rx_pkt;
typedef struct fl_ent { uint8_t me, ctx, xfer, sig; } fl_ent;
typedef struct full_ent { uint32_t elem, w0, w1; } full_ent;
typedef struct rel_ent { uint64_t t_ps; uint32_t bytes; } rel_ent;
typedef struct out_rec { uint64_t t_ps; size_t off; uint16_t len; uint8_t port, aborted; } out_rec;
typedef struct drop_rec { uint32_t id; uint8_t port, reason; } drop_rec;

typedef struct port {
    uint32_t pre, fcs, ifg;
    uint64_t byte_ps;          /* picoseconds per byte on the wire */
    /* receive */
    rx_pkt *q; size_t qhead, qlen, qcap;
    int busy;                  /* a packet is arriving */
    rx_pkt cur;
    uint32_t nel, kel;         /* elements of cur, next to become valid */
    uint32_t *els;
    /* transmit PHY */
    uint8_t *frame; uint32_t flen; int in_frame;
    int live; uint64_t start_ps;  /* cut through: the frame is on the wire since start_ps */
    int dead;                     /* aborted frame: discard its elements up to the EOP */
    uint32_t fifo_used;
    rel_ent *rel; size_t rhead, rlen, rcap;
    uint64_t wire_free_ps;
    npk_msf_port_stats st;
} port;

struct npk_msf {
    npk_chip *chip;
    npk_msf_cfg cfg;
    uint64_t mhz;
    port p[MAXP];
    uint8_t rbuf[RBUF_BYTES], tbuf[TBUF_BYTES];
    uint8_t el_state[128];
    uint32_t *freeq; uint32_t fhead, flen;
    full_ent *full; uint32_t fuhead, fulen;
    fl_ent *fl; uint32_t flhead, fllen;
    uint32_t tcw[128][2];
    uint8_t valid[128];
    uint32_t tx_next;
    int tx_moving; uint64_t tx_done_ps; uint32_t tx_elem;
    uint64_t tx_seq;
    uint8_t *blob; size_t blen, bcap;       /* pending input data */
    out_rec *out; size_t olen, ocap;
    uint8_t *odata; size_t odlen, odcap;
    drop_rec *drops; size_t dlen, dcap;
    uint64_t next_cycle;
    npk_msf_stats st;
};

/* ---- time ------------------------------------------------------------------ */

static uint64_t cyc_of(const npk_msf *d, uint64_t ps)
{
    if (ps == NEVER_PS) return NPK_NEVER;
    return (ps / 1000000u) * d->mhz + ((ps % 1000000u) * d->mhz + 999999u) / 1000000u;
}

static uint64_t ps_of(const npk_msf *d, uint64_t cyc)
{
    return (cyc / d->mhz) * 1000000u + (cyc % d->mhz) * 1000000u / d->mhz;
}

static uint64_t now_ps(const npk_msf *d) { return ps_of(d, d->chip->now); }

static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- receive ----------------------------------------------------------------- */

static void add_drop(npk_msf *d, uint32_t id, int port, int reason)
{
    if (grow((void **)&d->drops, &d->dcap, d->dlen + 1, sizeof *d->drops)) return;
    d->drops[d->dlen++] = (drop_rec){id, (uint8_t)port, (uint8_t)reason};
}

static uint16_t csum16(const uint8_t *b, uint32_t n)
{
    uint32_t s = 0;
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) s += ((uint32_t)b[i] << 8) | b[i + 1];
    if (i < n) s += b[i];  /* HRM: zeros appended as the more significant byte */
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)s;
}

static void autopush(npk_msf *d)
{
    while (d->fulen && d->fllen) {
        full_ent f = d->full[d->fuhead];
        d->fuhead = (d->fuhead + 1) % d->cfg.rbuf_elems;
        d->fulen--;
        fl_ent t = d->fl[d->flhead];
        d->flhead = (d->flhead + 1) % d->cfg.freelist_depth;
        d->fllen--;
        d->el_state[f.elem] = EL_HELD;
        uint32_t w[2] = {f.w0, f.w1};
        npk_msf_deliver(d->chip, t.me, t.ctx, t.xfer, w, 2, t.sig);
        d->st.rsw_pushed++;
    }
}

static void rx_sop(npk_msf *d, int pi)
{
    port *p = &d->p[pi];
    rx_pkt k = p->q[p->qhead];
    p->qhead++;
    p->qlen--;
    p->st.rx_pending--;
    p->st.rx_offered++;
    uint32_t e = d->cfg.rbuf_elem_bytes;
    uint32_t need = k.len ? (k.len + e - 1) / e : 1;
    if (need > d->cfg.rbuf_elems) {
        p->st.rx_drop_oversize++;
        add_drop(d, k.id, pi, NPK_MSF_DROP_OVERSIZE_FRAME);
        return;
    }
    if (need > d->flen) {
        int reason = (d->fulen && !d->fllen) ? NPK_MSF_DROP_NO_RX_THREAD : NPK_MSF_DROP_RBUF_FULL;
        if (reason == NPK_MSF_DROP_NO_RX_THREAD) p->st.rx_drop_no_rx_thread++;
        else p->st.rx_drop_rbuf_full++;
        add_drop(d, k.id, pi, reason);
        return;
    }
    for (uint32_t i = 0; i < need; i++) {
        uint32_t el = d->freeq[d->fhead];
        d->fhead = (d->fhead + 1) % d->cfg.rbuf_elems;
        d->flen--;
        d->el_state[el] = EL_FILL;
        p->els[i] = el;
        uint32_t off = i * e, n = k.len - off < e ? k.len - off : e;
        memcpy(d->rbuf + el * e, d->blob + k.off + off, n);
    }
    p->cur = k;
    p->busy = 1;
    p->nel = need;
    p->kel = 0;
    p->st.rx_received++;
    p->st.rx_bytes += k.len;
}

static uint64_t rx_valid_ps(const npk_msf *d, const port *p)
{
    uint32_t e = d->cfg.rbuf_elem_bytes;
    uint64_t end = (p->kel + 1 == p->nel) ? (uint64_t)p->cur.len + p->fcs : (uint64_t)(p->kel + 1) * e;
    return p->cur.t_ps + (p->pre + end) * p->byte_ps;
}

static void rx_valid(npk_msf *d, int pi)
{
    port *p = &d->p[pi];
    uint32_t e = d->cfg.rbuf_elem_bytes;
    uint32_t el = p->els[p->kel];
    uint32_t off = p->kel * e, n = p->cur.len - off < e ? p->cur.len - off : e;
    int sop = p->kel == 0, eop = p->kel + 1 == p->nel;
    uint32_t w0 = (((el * e) >> 6) & 0x7F) << 24 | (n & 0xFF) << 16 | (uint32_t)sop << 15 |
                  (uint32_t)eop << 14 | ((uint32_t)pi & 0xFF);
    uint32_t w1 = csum16(d->rbuf + el * e, n);
    d->el_state[el] = EL_FULL;
    uint32_t tail = (d->fuhead + d->fulen) % d->cfg.rbuf_elems;
    d->full[tail] = (full_ent){el, w0, w1};
    d->fulen++;
    p->st.rx_mpackets++;
    p->kel++;
    if (p->kel == p->nel) p->busy = 0;
    autopush(d);
}

static void element_done(npk_msf *d, uint32_t field)
{
    uint32_t el = (field & 0x7F) * 64 / d->cfg.rbuf_elem_bytes;
    if (el >= d->cfg.rbuf_elems || d->el_state[el] != EL_HELD) {
        d->st.bad_element_done++;
        npk_fault_cmd(d->chip, NPK_FAULT_MSF, 0x44);
        return;
    }
    d->el_state[el] = EL_FREE;
    d->freeq[(d->fhead + d->flen) % d->cfg.rbuf_elems] = el;
    d->flen++;
}

static void freelist_add(npk_msf *d, uint32_t data)
{
    if (d->fllen >= d->cfg.freelist_depth) {
        d->st.freelist_overflow++;
        npk_fault_cmd(d->chip, NPK_FAULT_MSF, 0x30);
        return;
    }
    /* ME field from bit 7: {cluster, ME in cluster} = the flat index (npk_emu.h "ME numbers") */
    uint32_t me_mask = 2 * d->chip->cfg.me_per_cluster - 1;
    fl_ent t = {(uint8_t)((data >> 7) & me_mask), (uint8_t)((data >> 4) & 7), (uint8_t)(data & 0x7F),
                (uint8_t)((data >> 12) & 0xF)};
    if (t.me >= d->chip->cfg.num_me) {
        d->st.freelist_overflow++;
        npk_fault_cmd(d->chip, NPK_FAULT_MSF, 0x30);
        return;
    }
    if (d->chip->me[t.me].ctx_mode == 4) t.ctx &= 6;
    d->fl[(d->flhead + d->fllen) % d->cfg.freelist_depth] = t;
    d->fllen++;
    autopush(d);
}

/* ---- transmit ---------------------------------------------------------------- */

static void out_add(npk_msf *d, int pi, uint64_t t_ps, const uint8_t *b, uint32_t n, int aborted)
{
    if (grow((void **)&d->out, &d->ocap, d->olen + 1, sizeof *d->out)) return;
    if (grow((void **)&d->odata, &d->odcap, d->odlen + n, 1)) return;
    memcpy(d->odata + d->odlen, b, n);
    d->out[d->olen++] = (out_rec){t_ps, d->odlen, (uint16_t)n, (uint8_t)pi, (uint8_t)aborted};
    d->odlen += n;
}

static void release_add(port *p, uint64_t t, uint32_t bytes)
{
    if (p->rhead && p->rhead == p->rlen) p->rhead = p->rlen = 0;
    if (p->rhead >= 1024) {
        memmove(p->rel, p->rel + p->rhead, (p->rlen - p->rhead) * sizeof *p->rel);
        p->rlen -= p->rhead;
        p->rhead = 0;
    }
    if (grow((void **)&p->rel, &p->rcap, p->rlen + 1, sizeof *p->rel)) return;
    p->rel[p->rlen++] = (rel_ent){t, bytes};
}

/* the open frame of port pi is aborted at time t (the wire, if the frame was
 * on it, stops there and keeps its inter-frame gap) */
static void frame_abort(npk_msf *d, int pi, uint64_t t)
{
    port *p = &d->p[pi];
    out_add(d, pi, p->live ? p->start_ps : t, p->frame, p->flen, 1);
    p->st.tx_drop_underrun++;
    p->fifo_used -= p->flen;
    if (p->live) {
        uint64_t s = p->start_ps + (uint64_t)p->pre * p->byte_ps;
        p->wire_free_ps = (t > s ? t : s) + (uint64_t)p->ifg * p->byte_ps;
    }
    p->flen = 0;
    p->in_frame = 0;
    p->live = 0;
}

/* a transmit control word the device cannot carry out as written (counted, and a fault
 * at its address) */
static void bad_tcw(npk_msf *d, uint32_t e)
{
    d->st.bad_tcw++;
    npk_fault_cmd(d->chip, NPK_FAULT_MSF, TCW_BASE + 8 * e);
}

/* n bytes at src onto the end of port p's frame, if it has room for them */
static int frame_append(port *p, const uint8_t *src, uint32_t n)
{
    if (p->flen + n > FRAME_MAX) return 0;
    memcpy(p->frame + p->flen, src, n);
    p->flen += n;
    return 1;
}

/* element e has crossed the SPI-4 bus into its port's PHY FIFO at time t */
static void tx_arrive(npk_msf *d, uint32_t e, uint64_t t)
{
    uint32_t w0 = d->tcw[e][0];
    int pi = (int)(w0 & 0xFF) % (int)d->cfg.ports;
    port *p = &d->p[pi];
    int sop = (w0 >> 9) & 1, eop = (w0 >> 8) & 1, abort = (w0 >> 10) & 1;
    uint32_t S = d->cfg.tbuf_elem_bytes;
    uint32_t plen = (w0 >> 24) ? (w0 >> 24) : 256, pro = (w0 >> 21) & 7, prl = (w0 >> 16) & 0x1F;
    uint32_t pay = ((pro + prl + 7) & ~7u) + ((w0 >> 13) & 7);
    const uint8_t *el = d->tbuf + e * S;
    p->st.tx_elements++;
    if (sop && p->in_frame) frame_abort(d, pi, t);
    if (sop) p->dead = 0;
    if (p->dead) { p->dead = !eop; return; }
    if (!sop && !p->in_frame) { p->st.tx_orphans++; return; }
    if (p->live) {
        uint64_t need = p->start_ps + ((uint64_t)p->pre + p->flen) * p->byte_ps;
        if (t > need) {  /* the wire ran dry: underrun */
            frame_abort(d, pi, need);
            p->dead = !eop;
            return;
        }
    }
    p->in_frame = 1;
    uint32_t before = p->flen;
    /* a control word that names bytes past its element, or that grows the frame past what
     * a port holds, is bad (counted once): what the element holds goes, bytes past the
     * frame's limit are left out */
    int bad = 0;
    if (prl) bad |= !(pro + prl <= S && frame_append(p, el + pro, prl));
    uint32_t n = pay < S ? (plen < S - pay ? plen : S - pay) : 0;
    bad |= n < plen;
    if (n) bad |= !frame_append(p, el + pay, n);
    if (bad) bad_tcw(d, e);
    p->fifo_used += p->flen - before;
    uint32_t cut = d->cfg.tx_start_bytes;
    if (!p->live && (eop || (cut && p->flen >= cut))) {
        p->live = 1;
        p->start_ps = t > p->wire_free_ps ? t : p->wire_free_ps;
    }
    if (!eop) return;
    if (abort) { frame_abort(d, pi, t); return; }
    uint64_t start = p->start_ps;
    p->live = 0;
    uint64_t end = start + ((uint64_t)p->pre + p->flen + p->fcs) * p->byte_ps;
    p->wire_free_ps = end + (uint64_t)p->ifg * p->byte_ps;
    out_add(d, pi, start, p->frame, p->flen, 0);
    p->st.tx_frames++;
    p->st.tx_bytes += p->flen;
    release_add(p, end, p->flen);
    p->flen = 0;
    p->in_frame = 0;
}

static uint32_t elem_bytes(const npk_msf *d, uint32_t e)
{
    uint32_t w0 = d->tcw[e][0];
    if ((w0 >> 11) & 1) return 0;
    uint32_t plen = (w0 >> 24) ? (w0 >> 24) : 256;
    return plen + ((w0 >> 16) & 0x1F);
}

static void tx_try(npk_msf *d, uint64_t t)
{
    while (!d->tx_moving && d->valid[d->tx_next]) {
        uint32_t e = d->tx_next;
        uint32_t w0 = d->tcw[e][0];
        if ((w0 >> 11) & 1) {  /* skip: free without transmitting */
            d->valid[e] = 0;
            d->tx_seq++;
            d->tx_next = (e + 1) % d->cfg.tbuf_elems;
            continue;
        }
        port *p = &d->p[(w0 & 0xFF) % d->cfg.ports];
        uint32_t n = elem_bytes(d, e);
        if (p->fifo_used && p->fifo_used + n > d->cfg.tx_fifo_bytes) return;  /* wait for room */
        d->tx_moving = 1;
        d->tx_elem = e;
        d->tx_done_ps = t + (uint64_t)n * 8u * 1000000000000ull / d->cfg.spi_bps;
    }
}

static void tx_moved(npk_msf *d)
{
    uint32_t e = d->tx_elem;
    uint64_t t = d->tx_done_ps;
    d->tx_moving = 0;
    tx_arrive(d, e, t);
    d->valid[e] = 0;
    d->tx_seq++;
    d->tx_next = (e + 1) % d->cfg.tbuf_elems;
    tx_try(d, t);
}

/* ---- events ---------------------------------------------------------------- */

/* earliest pending event: returns its time, sets *kind / *which */
static uint64_t earliest(const npk_msf *d, int *kind, int *which)
{
    uint64_t best = NEVER_PS;
    *kind = -1;
    for (uint32_t i = 0; i < d->cfg.ports; i++) {
        const port *p = &d->p[i];
        uint64_t t = NEVER_PS;
        int k = -1;
        if (p->busy) { t = rx_valid_ps(d, p); k = 1; }
        else if (p->qlen) { t = p->q[p->qhead].t_ps + (uint64_t)p->pre * p->byte_ps; k = 0; }
        if (t < best) { best = t; *kind = k; *which = (int)i; }
        if (p->rhead < p->rlen && p->rel[p->rhead].t_ps < best) {
            best = p->rel[p->rhead].t_ps;
            *kind = 2;
            *which = (int)i;
        }
    }
    if (d->tx_moving && d->tx_done_ps < best) { best = d->tx_done_ps; *kind = 3; *which = 0; }
    return best;
}

static void recompute(npk_msf *d)
{
    int k, w;
    d->next_cycle = cyc_of(d, earliest(d, &k, &w));
}

/* Every change to what `earliest` reads ends in recompute() or in this loop, so
 * next_cycle is the next event's cycle whenever this is called: nothing is due before it
 * (a command's completion calls this with nothing due most of the time). */
static void process(npk_msf *d, uint64_t now)
{
#ifdef NPK_CHECK_CALENDAR
    int k0, w0;
    if (d->next_cycle != cyc_of(d, earliest(d, &k0, &w0))) abort();
#endif
    if (now < d->next_cycle) return;
    for (;;) {
        int k, w = 0;
        uint64_t t = earliest(d, &k, &w);
        uint64_t tc = cyc_of(d, t);
        if (k < 0 || tc > now) {
            d->next_cycle = tc;   /* what recompute would find: nothing changed since */
            return;
        }
        switch (k) {
        case 0: rx_sop(d, w); break;
        case 1: rx_valid(d, w); break;
        case 2: {
            port *p = &d->p[w];
            p->fifo_used -= p->rel[p->rhead].bytes;
            p->rhead++;
            tx_try(d, t);
            break;
        }
        default: tx_moved(d); break;
        }
    }
}

/* ---- npk_msf_ops ---------------------------------------------------------------- */

static uint32_t port_status(const npk_msf *d, uint32_t pi)
{
    if (pi >= d->cfg.ports) return 0;
    const port *p = &d->p[pi];
    uint32_t cap = d->cfg.tx_fifo_bytes, u = p->fifo_used;
    uint32_t st = u * 4 <= cap ? 0 : (u * 4 <= cap * 3 ? 1 : 2);
    uint32_t free_b = u >= cap ? 0 : cap - u;
    return st | (free_b > 0xFFFF ? 0xFFFFu : free_b) << 16;
}

static uint32_t csr_read(npk_msf *d, uint32_t a)
{
    if (a >= BUF_BASE && a < BUF_BASE + RBUF_BYTES) return npk_rd32(d->rbuf + ((a - BUF_BASE) & (RBUF_BYTES - 4)));
    if (a >= 0x60 && a < 0x6C) {
        int idle = !d->tx_moving;
        for (uint32_t i = 0; idle && i < d->cfg.tbuf_elems; i++) if (d->valid[i]) idle = 0;
        return (uint32_t)idle << 31 | (uint32_t)(d->tx_seq & 0xFFFF);
    }
    if (a >= 0x400 && a < 0x800) return port_status(d, (a - 0x400) >> 2);
    if (a >= 0x380 && a < 0x3C0) {
        uint32_t g = (a - 0x380) >> 2, v = 0;
        for (uint32_t i = 0; i < 16; i++) v |= (port_status(d, g * 16 + i) & 3) << (2 * i);
        return v;
    }
    return 0;
}

static void csr_write(npk_msf *d, uint32_t a, uint32_t v, const uint32_t *w, unsigned n, unsigned i)
{
    if (a >= 0x30 && a < 0x3C) { freelist_add(d, v & 0xFFFF); return; }
    if (a == 0x44) { element_done(d, v); return; }
    if (a >= BUF_BASE && a < BUF_BASE + TBUF_BYTES) { npk_wr32(d->tbuf + ((a - BUF_BASE) & (TBUF_BYTES - 4)), v); return; }
    if (a >= TCW_BASE && a < BUF_BASE && (a & 7) == 0) {
        uint32_t e = (a - TCW_BASE) >> 3;
        if (e >= d->cfg.tbuf_elems) { bad_tcw(d, e); return; }
        d->tcw[e][0] = v;
        d->tcw[e][1] = i + 1 < n ? w[i + 1] : 0;
        d->valid[e] = 1;
        tx_try(d, now_ps(d));
    }
}

static void op_read(void *u, int me, int ctx, uint32_t addr, uint32_t *w, unsigned n)
{
    npk_msf *d = u;
    (void)me; (void)ctx;
    process(d, d->chip->now);
    for (unsigned i = 0; i < n; i++) w[i] = csr_read(d, addr + 4 * i);
}

static void op_write(void *u, int me, int ctx, uint32_t addr, const uint32_t *w, unsigned n)
{
    npk_msf *d = u;
    (void)me; (void)ctx;
    process(d, d->chip->now);
    if (addr >= TCW_BASE && addr < BUF_BASE) {
        for (unsigned i = 0; i < n; i += 2) csr_write(d, addr + 4 * i, w[i], w, n, i);
    } else if (addr >= BUF_BASE) {
        for (unsigned i = 0; i < n; i++) csr_write(d, addr + 4 * i, w[i], w, n, i);
    } else if (n) {
        csr_write(d, addr, w[0], w, n, 0);
    }
    recompute(d);
}

static void op_fast_wr(void *u, int me, uint32_t a, uint32_t b)
{
    npk_msf *d = u;
    (void)me;
    process(d, d->chip->now);
    uint32_t full = a + b;
    csr_write(d, full & 0xFFFF, full >> 16, NULL, 0, 0);
    recompute(d);
}

static void op_rbuf_rd(void *u, uint32_t a, uint8_t *buf, unsigned nb)
{
    npk_msf *d = u;
    uint32_t off = a >= BUF_BASE ? a - BUF_BASE : a;
    if ((uint64_t)off + nb <= RBUF_BYTES) {
        memcpy(buf, d->rbuf + off, nb);
        return;
    }
    npk_fault_cmd(d->chip, NPK_FAULT_MSF, a);  /* wraps in the buffer */
    for (unsigned i = 0; i < nb; i++) buf[i] = d->rbuf[(off + i) & (RBUF_BYTES - 1)];
}

static void op_tbuf_wr(void *u, uint32_t a, const uint8_t *buf, unsigned nb)
{
    npk_msf *d = u;
    uint32_t off = a >= BUF_BASE ? a - BUF_BASE : a;
    if ((uint64_t)off + nb <= TBUF_BYTES) {
        memcpy(d->tbuf + off, buf, nb);
        return;
    }
    npk_fault_cmd(d->chip, NPK_FAULT_MSF, a);  /* wraps in the buffer */
    for (unsigned i = 0; i < nb; i++) d->tbuf[(off + i) & (TBUF_BYTES - 1)] = buf[i];
}

static uint64_t op_next(void *u)
{
    return ((npk_msf *)u)->next_cycle;
}

static void op_advance(void *u, npk_chip *c, uint64_t now)
{
    npk_msf *d = u;
    (void)c;
    if (now >= d->next_cycle) process(d, now);
}

/* ---- API ------------------------------------------------------------------------ */

static int cfg_ok(const npk_msf_cfg *c)
{
    int eok = c->rbuf_elem_bytes == 64 || c->rbuf_elem_bytes == 128 || c->rbuf_elem_bytes == 256;
    int tok = c->tbuf_elem_bytes == 64 || c->tbuf_elem_bytes == 128 || c->tbuf_elem_bytes == 256;
    /* element counts are compared by division: a product could wrap around 2^32 */
    return c->ports >= 1 && c->ports <= MAXP && c->rate_bps >= 1000 && c->rate_bps <= 8000000000000ull && eok &&
           tok && c->rbuf_elems >= 1 && c->rbuf_elems <= RBUF_BYTES / c->rbuf_elem_bytes && c->tbuf_elems >= 1 &&
           c->tbuf_elems <= TBUF_BYTES / c->tbuf_elem_bytes && c->tx_fifo_bytes >= 64 && c->spi_bps >= 1000 &&
           c->freelist_depth >= 1 && c->freelist_depth <= 1024;
}

npk_msf *npk_msf_create(npk_chip *chip, const npk_msf_cfg *cfg)
{
    if (!chip || !cfg || !cfg_ok(cfg) || !chip->cfg.clock_mhz) return NULL;
    npk_msf *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->chip = chip;
    d->cfg = *cfg;
    d->mhz = chip->cfg.clock_mhz;
    d->freeq = calloc(cfg->rbuf_elems, sizeof *d->freeq);
    d->full = calloc(cfg->rbuf_elems, sizeof *d->full);
    d->fl = calloc(cfg->freelist_depth, sizeof *d->fl);
    int ok = d->freeq && d->full && d->fl;
    for (uint32_t i = 0; ok && i < cfg->ports; i++) {
        d->p[i].els = calloc(cfg->rbuf_elems, sizeof(uint32_t));
        d->p[i].frame = malloc(FRAME_MAX);
        if (!d->p[i].els || !d->p[i].frame) ok = 0;
        d->p[i].pre = cfg->preamble_bytes;
        d->p[i].fcs = cfg->fcs_bytes;
        d->p[i].ifg = cfg->ifg_bytes;
        d->p[i].byte_ps = 8000000000000ull / cfg->rate_bps;
    }
    if (!ok) { npk_msf_destroy(d); return NULL; }
    for (uint32_t i = 0; i < cfg->rbuf_elems; i++) d->freeq[i] = i;
    d->flen = cfg->rbuf_elems;
    d->next_cycle = NPK_NEVER;
    npk_msf_ops ops = {d, op_read, op_write, op_fast_wr, op_rbuf_rd, op_tbuf_wr, op_next, op_advance};
    npk_set_msf(chip, &ops);
    return d;
}

void npk_msf_destroy(npk_msf *d)
{
    if (!d) return;
    if (d->chip && d->chip->msf_custom && d->chip->msf.user == d) npk_set_msf(d->chip, NULL);
    npk_msf_release(d);
}

void npk_msf_release(npk_msf *d)
{
    if (!d) return;
    for (int i = 0; i < MAXP; i++) { free(d->p[i].q); free(d->p[i].els); free(d->p[i].frame); free(d->p[i].rel); }
    free(d->freeq); free(d->full); free(d->fl); free(d->blob); free(d->out); free(d->odata); free(d->drops);
    free(d);
}

int npk_msf_port_wire(npk_msf *d, int port, uint32_t pre, uint32_t fcs, uint32_t ifg)
{
    if (!d || port < 0 || (uint32_t)port >= d->cfg.ports || pre > 64 || fcs > 64 || ifg > 4096) return NPK_EINVAL;
    d->p[port].pre = pre;
    d->p[port].fcs = fcs;
    d->p[port].ifg = ifg;
    recompute(d);
    return NPK_OK;
}

static void compact(npk_msf *d)
{
    size_t lo = d->blen;
    for (uint32_t i = 0; i < d->cfg.ports; i++) {
        port *p = &d->p[i];
        if (p->qhead) {
            memmove(p->q, p->q + p->qhead, p->qlen * sizeof *p->q);
            p->qhead = 0;
        }
        if (p->qlen && p->q[0].off < lo) lo = p->q[0].off;
    }
    if (!lo) return;
    memmove(d->blob, d->blob + lo, d->blen - lo);
    d->blen -= lo;
    for (uint32_t i = 0; i < d->cfg.ports; i++)
        for (size_t k = 0; k < d->p[i].qlen; k++) d->p[i].q[k].off -= lo;
}

int npk_msf_rx_add(npk_msf *d, size_t n, const uint64_t *time_ns, const uint8_t *port_, const uint32_t *id,
                   const uint16_t *len, const uint8_t *data)
{
    if (!d || (n && (!time_ns || !port_ || !id || !len || !data))) return NPK_EINVAL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (port_[i] >= d->cfg.ports || len[i] == 0 || len[i] > FRAME_MAX) return NPK_EINVAL;
        total += len[i];
    }
    compact(d);
    if (grow((void **)&d->blob, &d->bcap, d->blen + total + 1, 1)) return NPK_ENOMEM;
    size_t off = d->blen;
    memcpy(d->blob + off, data, total);
    d->blen += total;
    for (size_t i = 0; i < n; i++) {
        port *p = &d->p[port_[i]];
        if (grow((void **)&p->q, &p->qcap, p->qhead + p->qlen + 1, sizeof *p->q)) return NPK_ENOMEM;
        p->q[p->qhead + p->qlen++] = (rx_pkt){time_ns[i] * 1000u, off, id[i], len[i]};
        p->st.rx_pending++;
        off += len[i];
    }
    recompute(d);
    return NPK_OK;
}

size_t npk_msf_tx_ready(npk_msf *d, size_t *nbytes)
{
    if (!d) return 0;
    uint64_t t = now_ps(d);
    size_t n = 0, b = 0;
    for (size_t i = 0; i < d->olen; i++)
        if (d->out[i].t_ps <= t) { n++; b += d->out[i].len; }
    if (nbytes) *nbytes = b;
    return n;
}

size_t npk_msf_tx_drain(npk_msf *d, uint8_t *port_, uint64_t *time_ns, uint16_t *len, uint8_t *aborted,
                        uint8_t *data, size_t cap_frames, size_t cap_bytes)
{
    if (!d || !port_ || !time_ns || !len || !aborted || !data) return 0;
    uint64_t t = now_ps(d);
    size_t n = 0, b = 0, keep = 0, kb = 0;
    for (size_t i = 0; i < d->olen; i++) {
        out_rec r = d->out[i];
        if (r.t_ps <= t && n < cap_frames && b + r.len <= cap_bytes) {
            port_[n] = r.port;
            time_ns[n] = r.t_ps / 1000u;
            len[n] = r.len;
            aborted[n] = r.aborted;
            memcpy(data + b, d->odata + r.off, r.len);
            b += r.len;
            n++;
        } else {
            memmove(d->odata + kb, d->odata + r.off, r.len);
            r.off = kb;
            kb += r.len;
            d->out[keep++] = r;
        }
    }
    d->olen = keep;
    d->odlen = kb;
    return n;
}

size_t npk_msf_drops(npk_msf *d, uint32_t *id, uint8_t *port_, uint8_t *reason, size_t cap)
{
    if (!d) return 0;
    if (!id || !port_ || !reason) return d->dlen;
    size_t n = d->dlen < cap ? d->dlen : cap;
    for (size_t i = 0; i < n; i++) {
        id[i] = d->drops[i].id;
        port_[i] = d->drops[i].port;
        reason[i] = d->drops[i].reason;
    }
    if (n && d->dlen > n) memmove(d->drops, d->drops + n, (d->dlen - n) * sizeof *d->drops);
    d->dlen -= n;
    return n;
}

int npk_msf_port_stats_get(npk_msf *d, int port_, npk_msf_port_stats *out)
{
    if (!d || !out || port_ < 0 || (uint32_t)port_ >= d->cfg.ports) return NPK_EINVAL;
    *out = d->p[port_].st;
    return NPK_OK;
}

int npk_msf_stats_get(npk_msf *d, npk_msf_stats *out)
{
    if (!d || !out) return NPK_EINVAL;
    *out = d->st;
    out->rbuf_free = d->flen;
    out->rbuf_full_list = d->fulen;
    out->freelist_len = d->fllen;
    uint32_t held = 0, valid = 0;
    for (uint32_t i = 0; i < d->cfg.rbuf_elems; i++) held += d->el_state[i] == EL_HELD;
    for (uint32_t i = 0; i < d->cfg.tbuf_elems; i++) valid += d->valid[i];
    out->rbuf_held = held;
    out->tbuf_valid = valid;
    out->tx_sequence = d->tx_seq;
    return NPK_OK;
}
