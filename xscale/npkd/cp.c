/* cp.c -- the control plane engine (cp.h).  Reason codes: microcode/reasons.yaml. */
#include "cp.h"
#include "bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t no_app_exceptions[256];   /* cp.app_exc without an application's file */

enum {
    EXC_ARP = 1, EXC_IP_OPTIONS = 2, EXC_BROADCAST = 3, EXC_MULTICAST = 4, EXC_LOCAL_DELIVERY = 5,
    EXC_NO_ROUTE = 6, EXC_TTL_EXPIRED = 7, EXC_REDIRECT = 8, EXC_ARP_MISS = 9, EXC_PLUGIN = 10
};

static const char *const STAT_NAMES[] = {
#define NPKD_STAT_NAME(name) #name,
    NPKD_STATS(NPKD_STAT_NAME)
#undef NPKD_STAT_NAME
};

const char *cp_stat_name(int i)
{
    return i >= 0 && i < ST_COUNT ? STAT_NAMES[i] : "?";
}

static const uint8_t ZERO_MAC[6];

static char *fmt_u(char *b, uint32_t v)
{
    char t[12];
    int n = 0;
    do t[n++] = (char)('0' + v % 10); while ((v /= 10));
    while (n) *b++ = t[--n];
    *b = 0;
    return b;
}

char *fmt_ip(char *b, uint32_t a)
{
    for (int i = 3; i >= 0; i--) {
        b = fmt_u(b, (a >> (8 * i)) & 255);
        if (i) *b++ = '.';
    }
    *b = 0;
    return b;
}

static char *fmt_s(char *b, const char *s)
{
    while (*s) *b++ = *s++;
    *b = 0;
    return b;
}

char *fmt_route(char *b, const route_cfg *r)
{
    b = fmt_ip(b, r->prefix);
    *b++ = '/';
    b = fmt_u(b, (uint32_t)r->len);
    if (r->next_hop) {
        b = fmt_ip(fmt_s(b, " via "), r->next_hop);
        return fmt_u(fmt_s(b, " port "), (uint32_t)r->port);
    }
    return fmt_u(fmt_s(b, " dev "), (uint32_t)r->port);
}

static int journal(cp *c, const char *verb, const route_cfg *r, const uint8_t *mac)
{
    if (!c->journal) return 0;
    char line[112], *b = line;
    if (c->timed_mark) b = fmt_s(fmt_u(fmt_s(b, "timed "), c->timed_mark - 1), " ");   /* timed N add ... */
    b = fmt_s(b, verb);
    if (!strcmp(verb, "add ")) {
        b = fmt_route(b, r);
    } else if (!strcmp(verb, "del ")) {
        b = fmt_u(fmt_s(fmt_ip(b, r->prefix), "/"), (uint32_t)r->len);
    } else {                                          /* adj IP PORT MAC | unadj IP */
        b = fmt_ip(b, r->prefix);
        if (mac) {
            static const char hex[] = "0123456789abcdef";
            b = fmt_u(fmt_s(b, " "), (uint32_t)r->port);
            for (int i = 0; i < 6; i++) {
                *b++ = i ? ':' : ' ';
                *b++ = hex[mac[i] >> 4];
                *b++ = hex[mac[i] & 15];
            }
        }
    }
    fmt_s(b, "\n");
    return c->journal(c->ensure_ctx, line);
}

static void change_log(cp *c, int add, const route_cfg *r, int source);

/* A route change is made write-ahead, so that a restarted daemon's model and the fast
 * path's tables agree however the daemon died.  A SIGKILL is taken at a system call,
 * and the journal's write() is the only one a change makes; so: first everything that
 * can fail, leaving nothing a lookup or the model sees (tables_prepare_*: the checks,
 * no such route, the next-hop table's room, the trie's new nodes, out of pool), then
 * the journal line, then (a route added or deleted: `source` CHG_TIMED or CHG_SOCKET;
 * 0 for ARP's adj/unadj) its record in the change log for the host, then the change
 * published (SRAM writes only, which cannot fail).  Killed at the journal's write:
 * neither the journal, nor SRAM, nor the change log has the change; killed at any later
 * call: all three have it.  No line is written for a change that fails, so the replay
 * (tables.c journal_line) never meets a line it cannot apply; rather than teach it to
 * skip lines, a failure is found before the line is written.  A line that cannot be
 * written: the change is not made (-9).  The change log's record is stamped with the
 * clock of this instant (not the turn's: the exceptions the turn handled first may have
 * taken a while), so the host, which follows changes from the log, has the record no
 * later than the fast path has the change. */
static int commit_change(cp *c, const char *verb, const route_cfg *r, const uint8_t *mac, int add, int source)
{
    if (journal(c, verb, r, mac)) {
        tables_abort(c->tab);
        return -9;
    }
    if (source) change_log(c, add, r, source);
    tables_commit(c->tab);
    return 0;
}

static uint64_t now(cp *c)
{
    return c->hw.now_ns(c->hw.ctx);
}

static int cp_flows_init(cp *c, const flow_cfg *f)
{
    flow_table *t = calloc(1, sizeof *t);
    if (!t) return -1;
    t->key_base = f->key_base;
    t->aux_base = f->aux_base;
    t->buckets = f->buckets;
    t->mult_hi = f->mult_hi;
    t->mult_lo = f->mult_lo;
    t->log_base = f->log_base;
    t->log_cap = f->log_cap;
    c->fl = t;
    flow_set_idle(t, 1000ull * f->idle_us, now(c));
    for (uint32_t i = 0; i < f->nplugin_init; i++)
        if (!plugin_load(t, f->plugin_init[i].slot, f->plugin_init[i].name, f->plugin_init[i].args,
                         f->plugin_init[i].nargs))
            plugin_logged(t, c->mem, f->plugin_init[i].slot, now(c));
    return 0;
}

int cp_init(cp *c, const npkd_cfg *cfg, npkd_mem *mem, tables *tab, const npkd_hw *hw)
{
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->mem = mem;
    c->tab = tab;
    c->hw = *hw;
    for (int i = 0; i < cfg->nports; i++) c->own[i] = cfg->port[i].addr;
    c->bucket = (uint64_t)cfg->opt.icmp_burst * 1000000000ull;
    c->bucket_ns = now(c);
    c->log_count = cfg->log_cap ? npkd_sram_rd(mem, cfg->log_base) : 0;   /* a restart appends */
    if (cfg->flows && cp_flows_init(c, cfg->flows)) return -1;
    return 0;
}

void cp_free(cp *c)
{
    for (uint32_t i = 0; i < c->narp; i++) free(c->arp[i].hold);
    free(c->arp);
    free(c->backlog);
    if (c->fl) free(c->fl->seen);
    free(c->fl);
    c->fl = NULL;
    u32map_free(&c->arp_at);
    if (c->app_exc && c->app_exc != no_app_exceptions) free((void *)c->app_exc);
}

/* ---- buffers, the control ring, the log ------------------------------------------------ */

#include "cp_buffers.h"   /* desc_addr, buffer, owned, free_buffer, log_exc */

static int alloc_buffer(cp *c, uint32_t *h)
{
    uint32_t d = c->hw.queue_get(c->hw.ctx, c->cfg->sys.freelist_q);
    if (!d) {
        c->stats[ST_tx_no_buffer]++;
        return -1;
    }
    *h = (d - c->cfg->sys.desc_base) >> c->cfg->sys.desc_shift;
    owned(c, *h, 1);
    return 0;
}

/* a restart: the messages its predecessor's send backlog held (cp.h) never reached the
 * control ring -- counted, the record emptied (their buffers are marked owned: reclaimed) */
static void lost_backlog(cp *c)
{
    const npkd_cfg *g = c->cfg;
    uint32_t n = npkd_sram_rd(c->mem, g->owned_base + 8), first = npkd_sram_rd(c->mem, g->owned_base + 12);
    uint32_t at = NPKD_BACKLOG_AT(g->owned_base, g->owned_cap);
    if (n > g->owned_cap || first >= g->owned_cap) n = 0;        /* not a record: nothing known */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t pw = npkd_sram_rd(c->mem, at + 8 * ((first + k) % g->owned_cap));
        c->stats[pw & PW_CONTROL ? ST_killed_backlog_own : ST_killed_backlog_forwarded]++;
    }
    npkd_sram_wr(c->mem, g->owned_base + 8, 0);
    npkd_sram_wr(c->mem, g->owned_base + 12, 0);
}

uint32_t cp_reclaim(cp *c, int restart)
{
    const npkd_cfg *g = c->cfg;
    if (!g->owned_cap) return 0;
    /* the first start: SRAM as it came, marked by no daemon */
    int valid = restart && npkd_sram_rd(c->mem, g->owned_base) == NPKD_OWNED_MAGIC &&
                npkd_sram_rd(c->mem, g->owned_base + 4) == g->owned_cap;
    uint32_t n = 0;
    if (valid) lost_backlog(c);
    for (uint32_t i = 0; i < (g->owned_cap + 31) / 32; i++) {
        uint32_t a = g->owned_base + NPKD_OWNED_HDR + 4 * i, w = npkd_sram_rd(c->mem, a);
        if (!w) continue;
        npkd_sram_wr(c->mem, a, 0);                   /* cleared first, then freed (cp.h) */
        for (uint32_t b = 0; valid && b < 32; b++) {
            uint32_t h = 32 * i + b;
            if (!(w >> b & 1) || h >= g->sys.n_bufs) continue;
            c->hw.queue_put(c->hw.ctx, g->sys.freelist_q, desc_addr(c, h));
            n++;
        }
    }
    if (!valid) {                                     /* a header, the magic last */
        npkd_sram_wr(c->mem, g->owned_base + 4, g->owned_cap);
        npkd_sram_wr(c->mem, g->owned_base + 8, 0);
        npkd_sram_wr(c->mem, g->owned_base + 12, 0);
        npkd_sram_wr(c->mem, g->owned_base, NPKD_OWNED_MAGIC);
    }
    npkd_sram_wr(c->mem, NPKD_ARPM_AT(g->owned_base, g->owned_cap), 0);     /* an empty ARP cache */
    c->stats[ST_buffers_reclaimed] += n;
    return n;
}

/* a message on the control ring: its buffer is the queue manager's from now on */
static void ring_msg(cp *c, uint32_t w0, uint32_t w1)
{
    owned(c, w0 & 0xFFFF, 0);
    c->hw.ring_put(c->hw.ctx, c->cfg->cp_ring, w0);
    c->hw.ring_put(c->hw.ctx, c->cfg->cp_ring, w1);
}

/* the backlog's record in SRAM (cp.h): its count and first slot */
static void backlog_record(cp *c)
{
    const npkd_cfg *g = c->cfg;
    if (!g->owned_cap) return;
    npkd_sram_wr(c->mem, g->owned_base + 12, c->bl_slot);
    npkd_sram_wr(c->mem, g->owned_base + 8, c->bl_n);
}

static void flush_backlog(cp *c)
{
    if (!c->bl_n) return;
    while (c->bl_n && c->hw.ring_free(c->hw.ctx, c->cfg->cp_ring) >= 2) {
        uint32_t i = c->bl_head;
        c->bl_n--;                                  /* out of the record before on the ring */
        c->bl_slot = c->cfg->owned_cap ? (c->bl_slot + 1) % c->cfg->owned_cap : 0;
        backlog_record(c);
        ring_msg(c, c->backlog[2 * i], c->backlog[2 * i + 1]);
        c->bl_head = (c->bl_head + 1) % c->bl_cap;
    }
}

/* a message (packet word, output port) to the queue manager, in order */
static void put_msg(cp *c, uint32_t w0, uint32_t w1)
{
    flush_backlog(c);
    if (!c->bl_n && c->hw.ring_free(c->hw.ctx, c->cfg->cp_ring) >= 2) {
        ring_msg(c, w0, w1);
        return;
    }
    if (c->bl_n == c->bl_cap) {                    /* grow the circular backlog */
        uint32_t cap = c->bl_cap ? 2 * c->bl_cap : 64;
        uint32_t *p = malloc(2 * (size_t)cap * sizeof *p);
        if (!p) return;
        for (uint32_t k = 0; k < c->bl_n; k++) {
            uint32_t i = (c->bl_head + k) % c->bl_cap;
            p[2 * k] = c->backlog[2 * i];
            p[2 * k + 1] = c->backlog[2 * i + 1];
        }
        free(c->backlog);
        c->backlog = p;
        c->bl_cap = cap;
        c->bl_head = 0;
    }
    uint32_t i = (c->bl_head + c->bl_n) % c->bl_cap;
    c->backlog[2 * i] = w0;
    c->backlog[2 * i + 1] = w1;
    if (c->cfg->owned_cap) {                       /* the record: the slot, then the count */
        uint32_t at = NPKD_BACKLOG_AT(c->cfg->owned_base, c->cfg->owned_cap) +
                      8 * ((c->bl_slot + c->bl_n) % c->cfg->owned_cap);
        npkd_sram_wr(c->mem, at, w0);
        npkd_sram_wr(c->mem, at + 4, w1);
    }
    c->bl_n++;
    backlog_record(c);
    if (c->bl_n > c->stats[ST_tx_backlog_max]) c->stats[ST_tx_backlog_max] = c->bl_n;
}

/* buffer h (frame of len bytes) out of port: descriptor length, then the control ring */
static void send_buffer(cp *c, uint32_t h, uint32_t len, int port, uint32_t pw)
{
    uint32_t d = desc_addr(c, h);
    npkd_sram_wr(c->mem, d + 8, len << 16);
    put_msg(c, pw, (uint32_t)port);
}

/* a frame the router made, copied into a buffer off the free list: 0, or -1 (none) */
static int new_buffer(cp *c, const uint8_t *f, uint32_t len, uint32_t *h)
{
    if (alloc_buffer(c, h)) return -1;
    uint8_t *b = buffer(c, *h, len);
    if (!b) {
        free_buffer(c, *h);
        return -1;
    }
    memcpy(b, f, len);
    npkd_sram_wr(c->mem, desc_addr(c, *h) + 12, 0xFFu << 24);     /* input port: none */
    return 0;
}

/* 0 sent, -1 no buffer (counted as tx_no_buffer) */
static int send_frame(cp *c, int port, const uint8_t *f, uint32_t len)
{
    uint32_t h;
    if (new_buffer(c, f, len, &h)) return -1;
    send_buffer(c, h, len, port, 0x80000000u | PW_CONTROL | h);
    c->stats[ST_frames_sent]++;
    return 0;
}

/* ---- ARP cache ------------------------------------------------------------------------------ */

static arp_ent *arp_find(cp *c, uint32_t ip)
{
    uint32_t *i = u32map_get(&c->arp_at, ip);
    return i ? &c->arp[*i] : NULL;
}

/* the ARP cache's record in SRAM (cp.h): entry e's state, tries and port; `start` also
 * the time its resolution began (now) */
static void arp_record(cp *c, const arp_ent *e, int start)
{
    const npkd_cfg *g = c->cfg;
    uint32_t i = (uint32_t)(e - c->arp);
    if (!g->owned_cap || i >= NPKD_ARP_MIRROR) return;
    uint32_t at = NPKD_ARPM_AT(g->owned_base, g->owned_cap) + 16 + 16 * i;
    if (start) {
        uint64_t t = now(c);
        npkd_sram_wr(c->mem, at + 8, (uint32_t)(t >> 32));
        npkd_sram_wr(c->mem, at + 12, (uint32_t)t);
    }
    npkd_sram_wr(c->mem, at + 4, (uint32_t)e->state << 24 | (uint32_t)e->tries << 16 | e->port);
}

static arp_ent *arp_get(cp *c, uint32_t ip, int port)
{
    arp_ent *e = arp_find(c, ip);
    if (e) return e;
    if (c->narp == c->caparp) {
        uint32_t cap = c->caparp ? 2 * c->caparp : 32;
        arp_ent *p = realloc(c->arp, cap * sizeof *p);
        if (!p) return NULL;
        c->arp = p;
        c->caparp = cap;
    }
    e = &c->arp[c->narp];
    memset(e, 0, sizeof *e);
    e->ip = ip;
    e->port = (uint8_t)port;
    e->hold = calloc(c->cfg->opt.arp_hold ? c->cfg->opt.arp_hold : 1, sizeof *e->hold);
    if (!e->hold || u32map_put(&c->arp_at, ip, c->narp)) {
        free(e->hold);
        return NULL;
    }
    c->narp++;
    if (c->cfg->owned_cap && c->narp <= NPKD_ARP_MIRROR) {   /* the entry, then the count */
        uint32_t at = NPKD_ARPM_AT(c->cfg->owned_base, c->cfg->owned_cap);
        npkd_sram_wr(c->mem, at + 16 * c->narp, ip);
        arp_record(c, e, 0);
        npkd_sram_wr(c->mem, at, c->narp);
    }
    return e;
}

static int static_arp(const cp *c, uint32_t ip)
{
    return cfg_arp(c->cfg, ip) != NULL;
}

static uint32_t nh_count(cp *c)
{
    if (c->tables_ready) return c->tab->nh.n;
    uint32_t n = 1;       /* entries are contiguous from 0; an all-zero entry ends them */
    for (; n < c->cfg->lay.nh_cap; n++) {
        uint32_t a = c->cfg->lay.nh + 16 * n, z = 0;
        for (uint32_t i = 0; i < 4; i++) z |= npkd_sram_rd(c->mem, a + 4 * i);
        if (!z) break;
    }
    return n;
}

static int ensure_tables(cp *c)
{
    if (c->tables_ready) return 0;
    return c->ensure_tables ? c->ensure_tables(c->ensure_ctx) : -1;
}

/* put a resolved MAC into the fast path (LAYOUT.md §7 rule 5) */
static void arp_install(cp *c, arp_ent *e)
{
    const lpm_layout *l = &c->cfg->lay;
    uint32_t n = nh_count(c);
    for (uint32_t i = 1; i < n; i++) {                 /* gateway entries waiting for e->ip */
        nh_entry s;
        nh_read(c->mem, l, i, &s);
        if (!(s.flags & NH_ARP_MISS) || s.next_hop != e->ip) continue;
        nh_entry r = s;
        r.flags &= ~NH_ARP_MISS;
        r.next_hop = 0;
        memcpy(r.dst, e->mac, 6);
        uint32_t w[4];
        nh_encode(&r, w);
        for (uint32_t k = 1; k < 4; k++) npkd_sram_wr(c->mem, l->nh + 16 * i + 4 * k, w[k]);
        npkd_sram_wr(c->mem, l->nh + 16 * i, w[0]);   /* last: ARP_MISS off */
        e->gateway_installed = 1;
    }
    uint32_t idx = lpm_walk(c->mem, l, e->ip);
    nh_entry s;
    nh_read(c->mem, l, idx, &s);
    if ((s.flags & NH_ARP_MISS) && !s.next_hop && (s.flags & NH_DIRECT) && !c->tables_ready) {
        e->adjacency_pending = 1;       /* when the route model is loaded (cp_tables_ready): no stall now */
        return;
    }
    if ((s.flags & NH_ARP_MISS) && !s.next_hop && (s.flags & NH_DIRECT)) {
        nh_entry a = {0};
        a.port = s.port;
        a.flags = NH_DIRECT;
        memcpy(a.dst, e->mac, 6);
        memcpy(a.src, c->cfg->port[s.port].mac, 6);
        route_cfg r = {e->ip, e->ip, 32, (int)s.port};
        if (!tables_prepare_entry_route(c->tab, &r, &a) && !commit_change(c, "adj ", &r, e->mac, 1, 0))
            e->adjacency_installed = 1;
    }
}

static void arp_uninstall(cp *c, arp_ent *e)
{
    const lpm_layout *l = &c->cfg->lay;
    if (e->gateway_installed) {
        uint32_t n = nh_count(c);
        for (uint32_t i = 1; i < n; i++) {
            nh_entry s;
            nh_read(c->mem, l, i, &s);
            if (s.flags & (NH_ARP_MISS | NH_DIRECT) || memcmp(s.dst, e->mac, 6)) continue;
            if (c->tables_ready && (i >= c->tab->nh.n || c->tab->nh.via[i] != e->ip)) continue;
            nh_entry r = s;
            r.flags |= NH_ARP_MISS;
            r.next_hop = e->ip;
            memset(r.dst, 0, 6);
            uint32_t w[4];
            nh_encode(&r, w);
            npkd_sram_wr(c->mem, l->nh + 16 * i, w[0]);   /* first: ARP_MISS on */
            for (uint32_t k = 1; k < 4; k++) npkd_sram_wr(c->mem, l->nh + 16 * i + 4 * k, w[k]);
        }
        e->gateway_installed = 0;
    }
    e->adjacency_pending = 0;
    if (e->adjacency_installed && !ensure_tables(c)) {
        route_cfg r = {e->ip, 0, 32, 0};
        int rc = tables_prepare_del(c->tab, e->ip, 32);
        if (rc == -4)             /* deleted through the socket since: only no longer learnt */
            journal(c, "unadj ", &r, NULL);
        else if (!rc)
            rc = commit_change(c, "unadj ", &r, NULL, 0, 0);
        if (rc == -4 || !rc) e->adjacency_installed = 0;   /* else still in: a later try */
    }
}

static void send_arp_request(cp *c, arp_ent *e)
{
    const port_cfg *p = &c->cfg->port[e->port];
    uint32_t n = build_arp(c->frame, 1, p->mac, p->addr, ZERO_MAC, e->ip);
    send_frame(c, e->port, c->frame, n);
    c->stats[ST_arp_requests_sent]++;
}

/* ---- ICMP ----------------------------------------------------------------------------------- */

/* where a datagram to dst leaves: 1 with port and, when known, the next hop's MAC */
typedef struct route_out {
    int port, resolved;
    uint32_t next_hop, index;
    nh_entry e;
    uint8_t mac[6];
} route_out;

static int route_to(cp *c, uint32_t dst, route_out *o)
{
    memset(o, 0, sizeof *o);
    o->index = lpm_walk(c->mem, &c->cfg->lay, dst);
    nh_read(c->mem, &c->cfg->lay, o->index, &o->e);
    if (o->e.flags & (NH_NO_ROUTE | NH_LOCAL | NH_BROADCAST) || o->e.port >= (uint32_t)c->cfg->nports) return 0;
    o->port = (int)o->e.port;
    if (!(o->e.flags & NH_ARP_MISS)) {
        o->resolved = 1;
        memcpy(o->mac, o->e.dst, 6);
        return 1;
    }
    o->next_hop = o->e.next_hop ? o->e.next_hop : dst;
    arp_ent *a = arp_find(c, o->next_hop);
    if (a && a->state == ARP_REACHABLE) {
        o->resolved = 1;
        memcpy(o->mac, a->mac, 6);
    }
    return 1;
}

static int own_or_bcast(const cp *c, uint32_t a)
{
    for (int i = 0; i < c->cfg->nports; i++)
        if (a == c->cfg->port[i].bcast || a == c->cfg->port[i].net) return 1;
    return 0;
}

/* RFC 1812 4.3.2.7: no error about a link broadcast, a non-first fragment, an ICMP
 * error, or a datagram whose source or destination is not a unicast address */
static int may_send_error(const cp *c, const uint8_t *f, uint32_t len, const ip_view *v)
{
    if (f[0] & 1) return 0;
    if (v->frag & 0x1FFF) return 0;
    if (!ip_is_unicast_src(v->src) || own_or_bcast(c, v->src)) return 0;
    if (v->dst >= 0xE0000000u || own_or_bcast(c, v->dst)) return 0;
    return !icmp_is_error(f, len, v);
}

static int take_token(cp *c)
{
    uint64_t t = now(c), cap = (uint64_t)c->cfg->opt.icmp_burst * 1000000000ull;
    if (t > c->bucket_ns) {
        c->bucket += (t - c->bucket_ns) * c->cfg->opt.icmp_rate;
        if (c->bucket > cap) c->bucket = cap;
        c->bucket_ns = t;
    }
    if (c->bucket < 1000000000ull) return 0;
    c->bucket -= 1000000000ull;
    return 1;
}

static void hold(cp *c, arp_ent *e, const hold_item *it);

/* send a frame the router made (Ethernet destination bytes still to fill) via o;
 * `counter` (an ICMP sent counter) counts it when it leaves: now, or once ARP resolves
 * the next hop (if ARP fails it is counted as own_dropped_no_arp instead) */
static void emit(cp *c, const route_out *o, uint8_t *f, uint32_t len, int counter)
{
    if (o->resolved) {
        memcpy(f, o->mac, 6);
        if (!send_frame(c, o->port, f, len)) c->stats[counter]++;
        return;
    }
    arp_ent *e = arp_get(c, o->next_hop, o->port);
    uint32_t h;
    if (!e || new_buffer(c, f, len, &h)) return;
    hold_item it = {0};
    it.x.handle = h;
    it.x.len = len;
    it.generated = 1;
    it.counter = (uint8_t)counter;
    hold(c, e, &it);
}

/* an ICMP error about the received frame f; 1 when sent (or held for ARP); `counter`
 * counts it once it leaves (emit) */
static int icmp_error(cp *c, const uint8_t *f, uint32_t len, uint8_t type, uint8_t code, uint32_t aux, int counter)
{
    ip_view v;
    if (ip_parse(f, len, &v)) return 0;
    if (!may_send_error(c, f, len, &v)) {
        c->stats[ST_icmp_suppressed_rules]++;
        return 0;
    }
    route_out o;
    if (!route_to(c, v.src, &o)) {
        c->stats[ST_icmp_no_route_back]++;
        return 0;
    }
    if (!take_token(c)) {
        c->stats[ST_icmp_suppressed_rate_limit]++;
        return 0;
    }
    const port_cfg *p = &c->cfg->port[o.port];
    uint32_t n = build_icmp_error(c->frame, ZERO_MAC, p->mac, p->addr, f, len, type, code, aux);
    emit(c, &o, c->frame, n, counter);
    return 1;
}

/* ---- holding packets for ARP ------------------------------------------------------------------ */

static void release(cp *c, arp_ent *e, const hold_item *it)
{
    uint8_t *f = buffer(c, it->x.handle, it->x.len);
    if (!f) return;
    const port_cfg *p = &c->cfg->port[e->port];
    if (it->generated) {
        memcpy(f, e->mac, 6);
        send_buffer(c, it->x.handle, it->x.len, e->port, 0x80000000u | PW_CONTROL | it->x.handle);
        c->stats[ST_frames_sent]++;
        c->stats[it->counter]++;
        return;
    }
    forward_rewrite(f, e->mac, p->mac, it->full);
    send_buffer(c, it->x.handle, it->x.len, e->port, it->x.pw);
    log_exc(c, &it->x, ACT_FORWARDED);
    c->stats[ST_held_sent]++;
    c->stats[ST_forwarded]++;
}

static void hold(cp *c, arp_ent *e, const hold_item *it)
{
    if (e->state == ARP_REACHABLE) {
        release(c, e, it);
        return;
    }
    if (e->nhold >= c->cfg->opt.arp_hold) {             /* the newest is dropped */
        free_buffer(c, it->x.handle);
        if (!it->generated) {
            c->stats[ST_held_dropped_overflow]++;
            log_exc(c, &it->x, ACT_DROPPED);
        } else {
            c->stats[ST_own_dropped_no_arp]++;
        }
    } else {
        e->hold[e->nhold++] = *it;
        if (!it->generated) c->stats[ST_held]++;
    }
    if (e->state == ARP_NONE) {                         /* start resolving */
        e->state = ARP_INCOMPLETE;
        e->tries = 1;
        e->next_try = now(c) + 1000ull * c->cfg->opt.arp_retry_us;
        arp_record(c, e, 1);
        send_arp_request(c, e);
    }
}

static void resolved(cp *c, arp_ent *e)
{
    /* the held packets first, then the fast path: packets it forwards from now on
     * reach the queue manager after them */
    for (uint32_t i = 0; i < e->nhold; i++) release(c, e, &e->hold[i]);
    e->nhold = 0;
    arp_install(c, e);
    c->stats[ST_arp_resolved]++;
}

static void unresolved(cp *c, arp_ent *e)
{
    c->stats[ST_arp_unresolved]++;
    for (uint32_t i = 0; i < e->nhold; i++) {
        hold_item *it = &e->hold[i];
        uint8_t *f = buffer(c, it->x.handle, it->x.len);
        if (!it->generated && f) {
            memcpy(c->quote, f, it->x.len);
            it->x.sent += (uint32_t)icmp_error(c, c->quote, it->x.len, ICMP_UNREACH, UNREACH_HOST, 0,
                                               ST_icmp_host_unreachable);
            c->stats[ST_held_dropped_unresolved]++;
            log_exc(c, &it->x, ACT_CONSUMED);
        } else {
            c->stats[ST_own_dropped_no_arp]++;        /* the router's own frame: never left */
        }
        free_buffer(c, it->x.handle);
    }
    e->nhold = 0;
    e->state = ARP_NONE;
    arp_record(c, e, 0);
}

/* ---- the exception reasons ------------------------------------------------------------------ */

static void arp_input(cp *c, const uint8_t *f, uint32_t len, uint32_t in_port)
{
    if (len < ETH_HLEN + 28 || in_port >= (uint32_t)c->cfg->nports) {
        c->stats[ST_arp_ignored]++;
        return;
    }
    const uint8_t *a = f + ETH_HLEN;
    uint32_t op = (uint32_t)a[6] << 8 | a[7];
    if (a[0] != 0 || a[1] != 1 || a[2] != 8 || a[3] != 0 || a[4] != 6 || a[5] != 4 || (op != 1 && op != 2)) {
        c->stats[ST_arp_ignored]++;
        return;
    }
    c->stats[op == 1 ? ST_arp_requests_received : ST_arp_replies_received]++;
    const uint8_t *sha = a + 8, *tha = a + 18;
    (void)tha;
    uint32_t spa = rd32(a + 14), tpa = rd32(a + 24);
    const port_cfg *p = &c->cfg->port[in_port];
    int for_me = tpa == p->addr;
    int probe = spa == 0;          /* RFC 5227 probe: answered when for us, nothing learnt */
    if ((sha[0] & 1) || (probe && op != 1) ||
        (!probe && ((spa & p->mask) != p->net || spa == p->addr || spa == p->net || spa == p->bcast))) {
        c->stats[ST_arp_ignored]++;
        return;
    }
    arp_ent *e = probe ? NULL : arp_find(c, spa);
    if (!probe && !static_arp(c, spa) && (e || for_me)) {  /* RFC 826: merge, or add when for me */
        if (!e) e = arp_get(c, spa, (int)in_port);
        if (e) {
            int was = e->state;
            memcpy(e->mac, sha, 6);
            e->state = ARP_REACHABLE;
            e->port = (uint8_t)in_port;
            e->expires = now(c) + 1000000ull * c->cfg->opt.arp_age_ms;
            if (was != ARP_REACHABLE) c->stats[ST_arp_learnt]++;
            arp_record(c, e, 0);
            if (was == ARP_INCOMPLETE) resolved(c, e);
        }
    }
    if (op == 1 && for_me) {   /* to the asker's hardware address (a probe's: tpa 0.0.0.0) */
        uint32_t n = build_arp(c->frame, 2, p->mac, p->addr, sha, spa);
        send_frame(c, (int)in_port, c->frame, n);
        c->stats[ST_arp_replies_sent]++;
    }
}

/* IP timestamps (RFC 791): ms since midnight UT by the emulated clock */
/* the clock read afresh, not the turn's: a record taken late in a long turn (a batch, the
 * control socket's work) arrived after the turn began, and its stamp must not come
 * before its arrival (the oracle allows a stamp from the arrival on) */
static uint32_t ts_ms(cp *c)
{
    uint64_t t = c->tab && c->tab->clock ? c->tab->clock(c->tab->clock_ctx) : now(c);
    return (uint32_t)((c->epoch_ms_of_day + t / 1000000ull) % 86400000ull);
}

/* an Echo Request to the router: the reply (pkt.h build_echo_reply) goes to the request's
 * source, or along the return route of the source route it used up -- to that route's
 * first hop, which must be a unicast address (else the request is counted) and, for a
 * strict route, on-link (else, like no route, icmp_no_route_back); 1 sent (or held) */
static uint32_t echo_request(cp *c, const uint8_t *f, uint32_t len, const ip_view *v)
{
    uint32_t off = ETH_HLEN + 4u * v->ihl, l4 = v->tot_len - 4u * v->ihl, to = v->src;
    int strict = 0;
    route_out o;
    c->stats[ST_local_echo_requests]++;
    if (inet_csum(f + off, l4, 0) != 0 || (f[0] & 1) || !ip_is_unicast_src(v->src) || own_or_bcast(c, v->src) ||
        (v->ihl > 5 && (echo_reply_route(f, len, c->own, c->cfg->nports, &to, &strict) || !ip_is_unicast_src(to) ||
                        own_or_bcast(c, to)))) {
        c->stats[ST_local_counted]++;
        return 0;
    }
    if (!route_to(c, to, &o) || (strict && !(o.e.flags & NH_DIRECT))) {
        c->stats[ST_icmp_no_route_back]++;
        return 0;
    }
    const port_cfg *p = &c->cfg->port[o.port];
    uint32_t n = build_echo_reply(c->frame, ZERO_MAC, p->mac, f, len, c->own, c->cfg->nports, p->addr, ts_ms(c));
    if (!n) {
        c->stats[ST_local_counted]++;
        return 0;
    }
    emit(c, &o, c->frame, n, ST_icmp_echo_reply);
    return 1;
}

/* a datagram addressed to the router: 1 frame sent (or held for ARP) or 0.  Echo
 * Request: Echo Reply (echo_request); UDP: Port Unreachable (every port is closed); ICMP
 * other than echo: counted; any other protocol, TCP included (npkd has no transport but
 * UDP): Protocol Unreachable (RFC 1122 3.2.2.1) */
static uint32_t local_input(cp *c, uint8_t *f, uint32_t len)
{
    ip_view v;
    if (ip_parse(f, len, &v) || (v.frag & 0x1FFF)) {
        c->stats[ST_local_counted]++;
        return 0;
    }
    uint32_t off = ETH_HLEN + 4u * v.ihl, l4 = v.tot_len - 4u * v.ihl;
    if (v.proto == IPPROTO_ICMP_ && l4 >= 8 && f[off] == ICMP_ECHO && !(v.frag & 0x2000))
        return echo_request(c, f, len, &v);
    if (v.proto == IPPROTO_UDP_ && c->cfg->opt.closed_ports_only) {
        c->stats[ST_local_udp]++;
        return (uint32_t)icmp_error(c, f, len, ICMP_UNREACH, UNREACH_PORT, 0, ST_icmp_port_unreachable);
    }
    if (v.proto != IPPROTO_ICMP_ && v.proto != IPPROTO_UDP_) {
        c->stats[ST_local_proto_unsupported]++;
        return (uint32_t)icmp_error(c, f, len, ICMP_UNREACH, UNREACH_PROTO, 0, ST_icmp_protocol_unreachable);
    }
    c->stats[ST_local_counted]++;
    return 0;
}

/* forward the excepted packet (whose buffer we own) to dst's next hop; action */
static int forward(cp *c, exc_info *x, uint8_t *f, int full)
{
    ip_view v;
    route_out o;
    if (ip_parse(f, x->len, &v) || !route_to(c, v.dst, &o)) return ACT_CONSUMED;
    if (o.resolved) {
        if (o.e.flags & NH_ARP_MISS) {                 /* known from the cache: into the fast path */
            arp_ent *a = arp_find(c, o.next_hop);
            if (a && !a->gateway_installed && !a->adjacency_installed && !a->adjacency_pending) arp_install(c, a);
        }
        forward_rewrite(f, o.mac, c->cfg->port[o.port].mac, full);
        send_buffer(c, x->handle, x->len, o.port, x->pw);
        c->stats[ST_forwarded]++;
        return ACT_FORWARDED;
    }
    arp_ent *e = arp_get(c, o.next_hop, o.port);
    if (!e) return ACT_CONSUMED;
    hold_item it = {0};
    it.x = *x;
    it.full = (uint8_t)full;
    hold(c, e, &it);
    return ACT_HELD;
}

/* the gateway a redirect names: the route's next hop, or the destination when on-link */
static uint32_t gateway_of(cp *c, const route_out *o, uint32_t dst)
{
    if (o->e.flags & NH_DIRECT) return dst;
    if (o->e.flags & NH_ARP_MISS) return o->e.next_hop ? o->e.next_hop : dst;
    if (c->tables_ready && o->index < c->tab->nh.n && c->tab->nh.via[o->index]) return c->tab->nh.via[o->index];
    const port_cfg *p = &c->cfg->port[o->port];
    for (uint32_t i = 0; i < c->cfg->narp; i++)
        if (!memcmp(c->cfg->arp[i].mac, o->e.dst, 6) && (c->cfg->arp[i].ip & p->mask) == p->net)
            return c->cfg->arp[i].ip;
    for (uint32_t i = 0; i < c->narp; i++)
        if (c->arp[i].state == ARP_REACHABLE && !memcmp(c->arp[i].mac, o->e.dst, 6)) return c->arp[i].ip;
    return 0;
}

static int redirect(cp *c, exc_info *x, uint8_t *f)
{
    ip_view v;
    route_out o;
    if (ip_parse(f, x->len, &v) || !route_to(c, v.dst, &o)) return ACT_CONSUMED;
    uint32_t gw = c->cfg->send_redirects ? gateway_of(c, &o, v.dst) : 0;
    memcpy(c->quote, f, x->len);                    /* the datagram as received */
    int act = forward(c, x, f, 0);
    if (gw) x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_REDIRECT, 1, gw, ST_icmp_redirect_host);
    return act;
}

static int is_martian_dst(uint32_t d)
{
    uint32_t top = d >> 24;
    return top == 0 || top == 127 || (d >= 0xF0000000u && d != 0xFFFFFFFFu);
}

/* RFC 1812 5.2.4: process the options, then the rules the fast path skipped (steps
 * 12..22 of reasons.yaml, no redirect), then forward */
static int options(cp *c, exc_info *x, uint8_t *f)
{
    const npkd_cfg *g = c->cfg;
    memcpy(c->quote, f, x->len);
    c->stats[ST_options_processed]++;
    opt_result r;
    if (ip_options_route(f, c->own, g->nports, &r) != OPT_OK) {
        c->stats[ST_options_bad]++;
        x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_PARAM_PROBLEM, 0, (uint32_t)r.pointer << 24,
                                        ST_icmp_param_problem);
        return ACT_CONSUMED;
    }
    ip_view v;
    if (ip_parse(f, x->len, &v)) return ACT_CONSUMED;
    uint32_t d = v.dst, s = v.src;
    int subnet_zero = 0, subnet_bcast = 0, src_bcast = 0, own = 0;
    for (int i = 0; i < g->nports; i++) {
        subnet_zero |= d == g->port[i].net;
        subnet_bcast |= d == g->port[i].bcast;
        src_bcast |= s == g->port[i].bcast;
        own |= d == g->port[i].addr;
    }
    if (is_martian_dst(d) || subnet_zero) {
        c->stats[ST_dropped_after_options]++;
        return ACT_CONSUMED;
    }
    if (d == 0xFFFFFFFFu || subnet_bcast) {
        c->stats[ST_broadcast_counted]++;
        return ACT_CONSUMED;
    }
    if (d >= 0xE0000000u) {
        c->stats[ST_multicast_counted]++;
        return ACT_CONSUMED;
    }
    if (f[0] & 1) {
        c->stats[ST_dropped_after_options]++;
        return ACT_CONSUMED;
    }
    if (own) {
        x->sent += local_input(c, f, x->len);
        return ACT_CONSUMED;
    }
    if (!ip_is_unicast_src(s) || src_bcast) {
        c->stats[ST_dropped_after_options]++;
        return ACT_CONSUMED;
    }
    route_out o;
    if (!route_to(c, d, &o)) {
        x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_UNREACH, UNREACH_NET, 0, ST_icmp_net_unreachable);
        return ACT_CONSUMED;
    }
    if (r.strict && !(o.e.flags & NH_DIRECT)) {
        x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_UNREACH, UNREACH_SRCFAIL, 0,
                                        ST_icmp_source_route_failed);
        return ACT_CONSUMED;
    }
    if (v.ttl <= 1) {
        x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_TIME_EXCEEDED, 0, 0, ST_icmp_time_exceeded);
        return ACT_CONSUMED;
    }
    uint8_t ptr;
    ip_options_record(f, &r, g->port[o.port].addr, ts_ms(c), &ptr);
    return forward(c, x, f, 1);
}

static int arp_miss(cp *c, exc_info *x, uint8_t *f)
{
    return forward(c, x, f, 0);
}

/* NPKD_APP_EXCEPTIONS (cp.h) beside the route file: the table by code, all NPKD_EXC_NONE
 * when there is no such file (or no memory); a malformed line ends the reading */
static const uint8_t *app_exceptions_load(const npkd_cfg *g)
{
    char path[NPKD_PATH + 32];
    const char *slash = strrchr(g->routes_path, '/');
    int dir = slash ? (int)(slash - g->routes_path) + 1 : 0;
    snprintf(path, sizeof path, "%.*s%s", dir, g->routes_path, NPKD_APP_EXCEPTIONS);
    FILE *fp = fopen(path, "r");
    if (!fp) return no_app_exceptions;
#ifdef NPK_GPE   /* SPP mode: the gpe placement's build only (the XScale's npkd is the router's, unchanged) */
    uint8_t *t = calloc(256 + sizeof(spp_cfg), 1);
    spp_cfg *spp = t ? (spp_cfg *)(t + 256) : NULL;
    char line[128], act[16];
    unsigned code, a, b, u;
    while (t && fgets(line, sizeof line, fp)) {
        if (sscanf(line, "spp_mi %u %x %u", &a, &b, &u) == 3 && spp->nmi < NPKD_SPP_MAX_MI) {
            spp->mi[spp->nmi].port = a, spp->mi[spp->nmi].ip = b, spp->mi[spp->nmi++].udp = u;
            continue;
        }
        if (sscanf(line, "spp_local %x %u", &a, &b) == 2 && b <= 32 && spp->nlocal < NPKD_SPP_MAX_LOCAL) {
            spp->local[spp->nlocal].prefix = a, spp->local[spp->nlocal++].len = b;
            continue;
        }
        if (sscanf(line, "%u %15s", &code, act) != 2 || code < 1 || code > 255) break;
        t[code] = !strcmp(act, "forward") ? NPKD_EXC_FORWARD : !strcmp(act, "consume") ? NPKD_EXC_CONSUME
                  : !strcmp(act, "spp") ? NPKD_EXC_SPP : 0;
    }
#else
    uint8_t *t = calloc(256, 1);
    char line[128], act[16];
    unsigned code;
    while (t && fgets(line, sizeof line, fp)) {
        if (sscanf(line, "%u %15s", &code, act) != 2 || code < 1 || code > 255) break;
        t[code] = !strcmp(act, "forward") ? NPKD_EXC_FORWARD : !strcmp(act, "consume") ? NPKD_EXC_CONSUME : 0;
    }
#endif
    fclose(fp);
    return t ? t : no_app_exceptions;
}

/* an application's exception reason (NPKD_APP_EXCEPTIONS): consumed (freed; its log record
 * counts it) or forwarded as the fast path routes it (held for ARP like any other).  The
 * statistics block is npkit's (stats.h): the log says which was done.  0: not an
 * application's code (the caller drops it as unknown) */
static __attribute__((noinline)) int app_exception(cp *c, exc_info *x, uint8_t *f)
{
    if (!c->app_exc) c->app_exc = app_exceptions_load(c->cfg);
    uint8_t action = c->app_exc[x->reason & 0xFF];
    if (action == NPKD_EXC_NONE) return 0;
#ifdef NPK_GPE
    if (action == NPKD_EXC_SPP) return spp_exception(c, x, f, NPKD_APP_SPP(c->app_exc));
#endif
    x->digest = frame_digest(f, x->len);
    int act = action == NPKD_EXC_FORWARD ? forward(c, x, f, 1) : ACT_CONSUMED;
    if (act == ACT_HELD) return 1;                  /* logged when it leaves the hold queue */
    log_exc(c, x, act);
    if (act != ACT_FORWARDED) free_buffer(c, x->handle);
    return 1;
}

#ifdef NPK_GPE
int cp_spp_start(cp *c)
{
    if (!c->app_exc) c->app_exc = app_exceptions_load(c->cfg);
    c->spp_mode = c->app_exc != no_app_exceptions && NPKD_APP_SPP(c->app_exc)->nmi > 0;
    return c->spp_mode;
}
#endif

/* a packet of a flow bound to a plugin (-D classify=flows): the slot's plugin (an empty
 * slot: the packet unchanged), then the rest of the fast path's way (TTL, the route) */
static int plugin_packet(cp *c, exc_info *x, uint8_t *f)
{
    /* the slot the fast path's lookup found (classify.h: packet word bits 23..16), not the
     * entry as it is now: a flow bound or unbound since is the next packets' business */
    uint32_t slot = (x->pw >> 16) & (FLOW_SLOTS - 1);
    x->pw &= ~0x00FF0000u;                          /* reserved again before it goes on */
    if (!c->fl) return ACT_CONSUMED;                /* no flow table: no such exception */
    plugin_slot *s = &c->fl->slot[slot];
    if (slot && s->def) {
        s->packets++;
        if (!s->def->fn(f, x->len, s->args, s->nargs, s->state, now(c))) {
            s->dropped++;
            return ACT_CONSUMED;
        }
    } else {
        c->fl->passthrough++;
    }
    ip_view v;
    if (ip_parse(f, x->len, &v)) return ACT_CONSUMED;
    memcpy(c->quote, f, x->len);
    if (v.ttl <= 1) {
        x->sent += (uint32_t)icmp_error(c, c->quote, x->len, ICMP_TIME_EXCEEDED, 0, 0, ST_icmp_time_exceeded);
        return ACT_CONSUMED;
    }
    return forward(c, x, f, 1);
}

void cp_exception(cp *c, uint32_t pw, uint32_t rec)
{
    const npkd_cfg *g = c->cfg;
    exc_info x = {0};
    x.pw = pw;
    x.handle = pw & 0xFFFF;
    x.reason = rec & 0xFF;
    x.in_port = (rec >> 16) & 0xFF;
    if (x.handle >= g->sys.n_bufs) {
        c->stats[ST_exc_unknown]++;
        return;
    }
    owned(c, x.handle, 1);                          /* the daemon's until it frees or sends it */
    x.len = npkd_sram_rd(c->mem, desc_addr(c, x.handle) + 8) >> 16;
    uint8_t *f = x.len <= NPKD_FRAME_MAX ? buffer(c, x.handle, x.len) : NULL;
    if (!f || x.reason < 1 || (x.reason > EXC_ARP_MISS && x.reason != EXC_PLUGIN)) {
        if (f && app_exception(c, &x, f)) return;
        c->stats[ST_exc_unknown]++;
        if (f) x.digest = frame_digest(f, x.len);
        log_exc(c, &x, ACT_DROPPED);
        free_buffer(c, x.handle);
        return;
    }
    x.digest = frame_digest(f, x.len);
    if (x.reason <= EXC_ARP_MISS) c->stats[ST_exc_arp + x.reason - 1]++;
    int act = ACT_CONSUMED;
    switch (x.reason) {
    case EXC_ARP:
        arp_input(c, f, x.len, x.in_port);
        break;
    case EXC_IP_OPTIONS:
        act = options(c, &x, f);
        break;
    case EXC_BROADCAST:
        c->stats[ST_broadcast_counted]++;
        break;
    case EXC_MULTICAST:
        c->stats[ST_multicast_counted]++;
        break;
    case EXC_LOCAL_DELIVERY:
        x.sent += local_input(c, f, x.len);
        break;
    case EXC_NO_ROUTE:
        x.sent += (uint32_t)icmp_error(c, f, x.len, ICMP_UNREACH, UNREACH_NET, 0, ST_icmp_net_unreachable);
        break;
    case EXC_TTL_EXPIRED:
        x.sent += (uint32_t)icmp_error(c, f, x.len, ICMP_TIME_EXCEEDED, 0, 0, ST_icmp_time_exceeded);
        break;
    case EXC_REDIRECT:
        act = redirect(c, &x, f);
        break;
    case EXC_ARP_MISS:
        act = arp_miss(c, &x, f);
        break;
    case EXC_PLUGIN:
        act = plugin_packet(c, &x, f);
        break;
    default:
        break;
    }
    if (act == ACT_HELD) return;                    /* logged when it leaves the hold queue */
    log_exc(c, &x, act);
    if (act != ACT_FORWARDED) free_buffer(c, x.handle);
}

int cp_poll(cp *c, int max)
{
    int n = 0;
    const npkd_cfg *g = c->cfg;
    while (n < max) {
        uint32_t pw, rec;
#ifdef NPK_GPE
        /* in SPP mode i3d relays a record one word a request: its second may be late */
        if (c->relay_pw) {
            pw = c->relay_pw;
            c->relay_pw = 0;
        } else
#endif
        if (!c->hw.ring_get(c->hw.ctx, g->exc_ring, &pw)) break;
        if (!c->hw.ring_get(c->hw.ctx, g->exc_ring, &rec)) {   /* a record is put whole: cannot happen */
#ifdef NPK_GPE
            if (c->spp_mode) {
                c->relay_pw = pw;
                break;
            }
#endif
            c->stats[ST_exc_unknown]++;
            break;
        }
        cp_exception(c, pw, rec);
        n++;
    }
    flush_backlog(c);
    return n;
}

void cp_timers(cp *c)
{
    uint64_t t = now(c);
    if (c->fl) flow_scan(c->fl, c->mem, t);
    for (uint32_t i = 0; i < c->narp; i++) {
        arp_ent *e = &c->arp[i];
        if (e->state == ARP_INCOMPLETE && t >= e->next_try) {
            if (e->tries < c->cfg->opt.arp_tries) {
                e->tries++;
                e->next_try += 1000ull * c->cfg->opt.arp_retry_us;
                arp_record(c, e, 0);
                send_arp_request(c, e);
            } else {
                unresolved(c, e);
            }
        } else if (e->state == ARP_REACHABLE && t >= e->expires) {
            arp_uninstall(c, e);
            e->state = ARP_NONE;
            arp_record(c, e, 0);
            c->stats[ST_arp_aged]++;
        }
    }
    flush_backlog(c);
}

uint64_t cp_deadline(const cp *c)
{
    uint64_t d = c->fl ? flow_deadline(c->fl) : UINT64_MAX;
    for (uint32_t i = 0; i < c->narp; i++) {
        const arp_ent *e = &c->arp[i];
        if (e->state == ARP_INCOMPLETE && e->next_try < d) d = e->next_try;
        if (e->state == ARP_REACHABLE && e->expires < d) d = e->expires;
    }
    return d;
}

void cp_publish(cp *c, uint32_t state, uint32_t starts)
{
    const npkd_cfg *g = c->cfg;
    if (!g->stats_base) return;
    c->stats[ST_sram_writes] = (uint32_t)c->mem->sram_writes;
    uint32_t holding = 0;
    for (uint32_t i = 0; i < c->narp; i++) holding += c->arp[i].nhold;
    c->stats[ST_holding] = holding;
    c->stats[ST_tx_backlog] = c->bl_n;
    if (c->tables_ready) {
        const lpm_alloc *a = &c->tab->trie.alloc;
        c->stats[ST_routes] = c->tab->trie.nroutes;
        c->stats[ST_lpm_units_recovered] += a->recovered - c->recovered_seen;   /* (they go on after a restart) */
        c->recovered_seen = a->recovered;
    }
    npkd_sram_wr(c->mem, g->stats_base, NPKD_STATS_MAGIC);
    npkd_sram_wr(c->mem, g->stats_base + 4, NPKD_STATS_VERSION);
    npkd_sram_wr(c->mem, g->stats_base + 8, state);
    npkd_sram_wr(c->mem, g->stats_base + 12, starts);
    for (uint32_t i = 0; i < ST_COUNT; i++) npkd_sram_wr(c->mem, g->stats_base + NPKD_STATS_HDR + 4 * i, c->stats[i]);
}

void cp_tables_ready(cp *c)
{
    c->tables_ready = 1;
    for (uint32_t i = 0; i < c->narp; i++)
        if (c->arp[i].adjacency_pending && c->arp[i].state == ARP_REACHABLE) {
            c->arp[i].adjacency_pending = 0;
            arp_install(c, &c->arp[i]);
        }
}

/* the log of route changes made (SRAM, cfg `changelog`): count, capacity, then records
 * {time in us, add << 24 | length << 16 | port << 8 | source, prefix, next hop} --
 * how the host learns of changes made through the control socket, and of timed changes
 * a restarted daemon made late (commit_change writes it) or tried and failed
 * (cp_timed_change: source CHG_TIMED_FAILED), and of when a restarted daemon withdrew
 * its predecessor's ARP state (cp_log_withdrawal: source CHG_WITHDRAWN, no route) */
static void change_log_at(cp *c, int add, const route_cfg *r, int source, uint64_t t)
{
    const npkd_cfg *g = c->cfg;
    if (!g->changelog_cap) return;
    uint32_t n = npkd_sram_rd(c->mem, g->changelog_base);
    uint32_t a = g->changelog_base + 16 + 16 * (n % g->changelog_cap);
    npkd_sram_wr(c->mem, a, (uint32_t)(t / 1000));
    npkd_sram_wr(c->mem, a + 4, (uint32_t)add << 24 | (uint32_t)r->len << 16 | (uint32_t)(r->port & 0xFF) << 8 |
                                   (uint32_t)source);
    npkd_sram_wr(c->mem, a + 8, r->prefix);
    npkd_sram_wr(c->mem, a + 12, r->next_hop);
    npkd_sram_wr(c->mem, g->changelog_base + 4, g->changelog_cap);
    npkd_sram_wr(c->mem, g->changelog_base, n + 1);
}

static void change_log(cp *c, int add, const route_cfg *r, int source)
{
    change_log_at(c, add, r, source, c->tab->clock ? c->tab->clock(c->tab->clock_ctx) : now(c));   /* this instant */
}

void cp_log_withdrawal(cp *c, uint64_t at_ns, uint32_t starts)
{
    route_cfg which = {starts, (uint32_t)(at_ns % 1000), 0, 0};
    change_log_at(c, 0, &which, CHG_WITHDRAWN, at_ns);
}

int cp_route_add(cp *c, const route_cfg *r, int source)
{
    if (ensure_tables(c)) return -7;
    int rc = tables_prepare_route(c->tab, r);
    if (!rc) rc = commit_change(c, "add ", r, NULL, 1, source);
    if (rc) {
        c->stats[ST_route_errors]++;
        return rc;
    }
    c->stats[ST_routes_added]++;
    if (r->next_hop) {                                /* a next hop we already know */
        arp_ent *e = arp_find(c, r->next_hop);
        if (e && e->state == ARP_REACHABLE) arp_install(c, e);
    }
    return 0;
}

int cp_route_del(cp *c, uint32_t prefix, int len, int source)
{
    if (ensure_tables(c)) return -7;
    route_cfg r = {prefix, 0, len, 0};
    int rc = tables_prepare_del(c->tab, prefix, len);
    if (!rc) rc = commit_change(c, "del ", &r, NULL, 0, source);
    if (rc) {
        c->stats[ST_route_errors]++;
        return rc;
    }
    c->stats[ST_routes_deleted]++;
    return 0;
}

int cp_timed_change(cp *c, const timed_change *t, uint32_t index)
{
    c->timed_mark = index + 1;
    int rc = t->add ? cp_route_add(c, &t->r, CHG_TIMED) : cp_route_del(c, t->r.prefix, t->r.len, CHG_TIMED);
    c->timed_mark = 0;
    c->stats[ST_timed_changes]++;
    if (rc && rc != -7 && rc != -9) {                  /* tried and failed: dealt with, write-ahead */
        if (c->journal) {
            char line[24];
            fmt_s(fmt_u(fmt_s(line, "timed "), index), "\n");
            c->journal(c->ensure_ctx, line);
        }
        change_log(c, t->add, &t->r, CHG_TIMED_FAILED);
    }
    return rc;
}
