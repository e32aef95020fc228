/* tables.c -- build_tables in C (tables.h). */
#include "tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nh_encode(const nh_entry *e, uint32_t w[4])
{
    uint8_t h[12];
    memcpy(h, e->dst, 6);
    memcpy(h + 6, e->src, 6);
    w[0] = (e->flags & 0xFF) << 24 | (e->port & 0xFF) << 16;
    w[1] = e->flags & NH_ARP_MISS ? e->next_hop
                                  : (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    w[2] = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
    w[3] = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
}

void nh_decode(const uint32_t w[4], nh_entry *e)
{
    memset(e, 0, sizeof *e);
    e->flags = w[0] >> 24;
    e->port = (w[0] >> 16) & 0xFF;
    uint8_t h[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) h[4 * i + j] = (uint8_t)(w[1 + i] >> (24 - 8 * j));
    if (e->flags & NH_ARP_MISS) {
        e->next_hop = w[1];
        memset(h, 0, 4);
    }
    memcpy(e->dst, h, 6);
    memcpy(e->src, h + 6, 6);
}

void nh_read(npkd_mem *m, const lpm_layout *l, uint32_t index, nh_entry *e)
{
    uint32_t w[4];
    for (uint32_t i = 0; i < 4; i++) w[i] = npkd_sram_rd(m, l->nh + 16 * index + 4 * i);
    nh_decode(w, e);
}

void nh_write(npkd_mem *m, const lpm_layout *l, uint32_t index, const nh_entry *e)
{
    uint32_t w[4];
    nh_encode(e, w);
    for (uint32_t i = 0; i < 4; i++) npkd_sram_wr(m, l->nh + 16 * index + 4 * i, w[i]);
}

static uint32_t nh_hash(const nh_entry *e)
{
    uint32_t w[4], h = 0;
    nh_encode(e, w);
    for (int i = 0; i < 4; i++) h = npkd_hash32(h ^ w[i]);
    return h;
}

static int nh_equal(const nh_entry *a, const nh_entry *b)
{
    uint32_t x[4], y[4];
    nh_encode(a, x);
    nh_encode(b, y);
    return !memcmp(x, y, sizeof x);
}

/* the index of e, appending it when new (NextHopTable.intern); -1 table full / no memory */
static int nh_intern(nh_table *t, const nh_entry *e, uint32_t cap, uint32_t via, int *is_new)
{
    *is_new = 0;
    if (t->n && t->last < t->n && !memcmp(&t->e[t->last], e, sizeof *e)) return (int)t->last;  /* routes come in runs */
    uint32_t h = nh_hash(e);
    uint32_t *at = u32map_get(&t->by_hash, h);
    if (at && nh_equal(&t->e[*at], e)) return (int)(t->last = *at);
    if (at)
        for (uint32_t i = 0; i < t->n; i++)
            if (nh_equal(&t->e[i], e)) return (int)(t->last = i);
    if (t->n >= cap) return -1;
    if (t->n == t->cap) {
        uint32_t nc = t->cap ? 2 * t->cap : 32;
        nh_entry *p = realloc(t->e, nc * sizeof *p);
        if (!p) return -1;
        t->e = p;
        uint32_t *q = realloc(t->via, nc * sizeof *q);
        if (!q) return -1;
        t->via = q;
        t->cap = nc;
    }
    t->e[t->n] = *e;
    t->via[t->n] = via;
    if (!at && u32map_put(&t->by_hash, h, t->n)) return -1;
    *is_new = 1;
    t->last = t->n;
    return (int)t->n++;
}

/* before a change: the grace of the nodes in limbo (tables.h) */
static void settle(tables *t)
{
    lpm_alloc *a = &t->trie.alloc;
    if (!t->clock || !a->limbo.n) return;
    uint64_t now = t->clock(t->clock_ctx), grace = (uint64_t)t->cfg->opt.lpm_grace_us * 1000u;
    uint32_t k = 0, n = 0;
    while (k < t->nmarks && now - t->marks[k].at >= grace) n = t->marks[k++].n;
    if (k) {
        uint32_t before = a->limbo.n;
        lpm_grace_upto(&t->trie, n);
        for (uint32_t i = k; i < t->nmarks; i++) {
            t->marks[i - k].n = t->marks[i].n - (before - a->limbo.n);
            t->marks[i - k].at = t->marks[i].at;
        }
        t->nmarks -= k;
    }
    if (a->limbo.n > (t->nmarks ? t->marks[t->nmarks - 1].n : 0) && t->nmarks < TABLES_GRACE_MARKS) {
        t->marks[t->nmarks].n = a->limbo.n;
        t->marks[t->nmarks++].at = now;
    }
}

int tables_init(tables *t, const npkd_cfg *cfg, npkd_mem *mem)
{
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->mem = mem;
    t->pend_nh = -1;
    if (lpm_init(&t->trie, &cfg->lay, mem)) return -1;
    nh_entry none = {0};
    none.flags = NH_NO_ROUTE;
    int is_new;
    return nh_intern(&t->nh, &none, cfg->lay.nh_cap, 0, &is_new) == 0 ? 0 : -1;
}

void tables_free(tables *t)
{
    lpm_free(&t->trie);
    free(t->nh.e);
    free(t->nh.via);
    u32map_free(&t->nh.by_hash);
    memset(t, 0, sizeof *t);
}

void route_entry(const npkd_cfg *cfg, const route_cfg *r, nh_entry *e)
{
    memset(e, 0, sizeof *e);
    e->port = (uint32_t)r->port;
    memcpy(e->src, cfg->port[r->port].mac, 6);
    if (!r->next_hop) {
        e->flags = NH_DIRECT | NH_ARP_MISS;
        return;
    }
    const arp_cfg *a = cfg_arp(cfg, r->next_hop);
    if (!a) {
        e->flags = NH_ARP_MISS;
        e->next_hop = r->next_hop;
        return;
    }
    memcpy(e->dst, a->mac, 6);
}

static void port_entry(const port_cfg *p, int index, uint32_t flags, const uint8_t *dst, nh_entry *e)
{
    memset(e, 0, sizeof *e);
    e->port = (uint32_t)index;
    e->flags = flags;
    memcpy(e->src, p->mac, 6);
    if (dst) memcpy(e->dst, dst, 6);
}

/* loader.py build_tables' put() */
static int put(tables *t, uint32_t prefix, int len, const nh_entry *e, uint32_t via, int replace, char *err,
               size_t errlen)
{
    if (!replace && lpm_get(&t->trie, prefix, len, NULL)) {
        snprintf(err, errlen, "duplicate route %u.%u.%u.%u/%d", prefix >> 24, (prefix >> 16) & 255,
                 (prefix >> 8) & 255, prefix & 255, len);
        return -5;
    }
    int is_new;
    int index = nh_intern(&t->nh, e, t->cfg->lay.nh_cap, via, &is_new);
    if (index < 0) {
        snprintf(err, errlen, "next-hop table full (%u entries)", t->cfg->lay.nh_cap);
        return -2;
    }
    int rc = lpm_add(&t->trie, prefix, len, (uint32_t)index);
    if (rc) snprintf(err, errlen, "route %08x/%d: error %d", prefix, len, rc);
    return rc;
}

/* ---- loading, in steps (the daemon looks at the exception ring in between) ------------- */

static int load_error(tables_load *L, int rc, const char *what)
{
    if (what) snprintf(L->err, sizeof L->err, "%s", what);
    return rc < 0 ? rc : -1;
}

int tables_load_begin(tables *t, tables_load *L, int write, const char *journal)
{
    memset(L, 0, sizeof *L);
    L->write = write;
    if (journal && journal[0]) L->journal = fopen(journal, "r");   /* a restart */
    if (t->cfg->routes_path[0] && !t->cfg->nroute) {
        L->f = fopen(t->cfg->routes_path, "r");
        if (!L->f) {
            snprintf(L->err, sizeof L->err, "%s: cannot open", t->cfg->routes_path);
            return -1;
        }
    }
    return 0;
}

static int next_route(tables *t, tables_load *L, route_cfg *r, int *eof)
{
    char line[512];
    *eof = 0;
    if (!L->f) {                                     /* routes given in the configuration */
        if (L->line >= t->cfg->nroute) {
            *eof = 1;
            return 0;
        }
        *r = t->cfg->route[L->line++];
        return 0;
    }
    for (;;) {
        if (!fgets(line, sizeof line, L->f)) {
            *eof = 1;
            return 0;
        }
        L->line++;
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s || *s == '#' || *s == '\n' || *s == '\r') continue;
        if (parse_route(t->cfg, line, r)) {
            snprintf(L->err, sizeof L->err, "%s:%u: bad route (PREFIX/LEN NEXTHOP PORT)", t->cfg->routes_path, L->line);
            return -1;
        }
        return 0;
    }
}

/* one line of the journal of route changes a previous instance kept (a restart):
 *   add ROUTE | del PREFIX/LEN | adj A.B.C.D PORT MAC | unadj A.B.C.D
 *   | timed N add ROUTE | timed N del PREFIX/LEN | timed N
 * replayed into the model in order, so next-hop entries get the indices they have */
static int journal_line(tables *t, tables_load *L, const char *s)
{
    const npkd_cfg *c = t->cfg;
    route_cfg r;
    uint32_t ip;
    const char *q;
    if (!strncmp(s, "timed ", 6)) {                  /* timed change N: made (the rest), or failed */
        char *end;
        unsigned long k = strtoul(s + 6, &end, 10);
        if (s[6] < '0' || s[6] > '9' || k >= UINT32_MAX || (*end != ' ' && *end != '\n' && *end != '\r' && *end)) return -1;
        if (k + 1 > L->timed_done) L->timed_done = (uint32_t)k + 1;
        while (*end == ' ') end++;
        return *end && *end != '\n' && *end != '\r' ? journal_line(t, L, end) : 0;
    }
    if (!strncmp(s, "add ", 4)) return parse_route(c, s + 4, &r) || tables_add_route(t, &r) ? -1 : 0;
    if (!strncmp(s, "del ", 4)) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.40s dev 0", s + 4);
        buf[strcspn(buf, "\r\n")] = 0;
        if (!strstr(buf, " dev 0")) strcat(buf, " dev 0");
        if (parse_route(c, buf, &r)) return -1;
        int rc = lpm_del(&t->trie, r.prefix, r.len);
        return rc == -4 ? 0 : rc;
    }
    if (!strncmp(s, "adj ", 4)) {
        unsigned port;
        nh_entry e = {0};
        if (parse_ip(s + 4, &ip, &q) || sscanf(q, "%u", &port) != 1 || port >= (unsigned)c->nports) return -1;
        q = strchr(q + 1, ' ');
        if (!q || parse_mac(q, e.dst, NULL)) return -1;
        e.port = port;
        e.flags = NH_DIRECT;
        memcpy(e.src, c->port[port].mac, 6);
        route_cfg a = {ip, ip, 32, (int)port};
        if (tables_add_entry_route(t, &a, &e)) return -1;
        return u32vec_push(&L->learnt, ip);
    }
    if (!strncmp(s, "unadj ", 6)) {
        if (parse_ip(s + 6, &ip, NULL)) return -1;
        lpm_del(&t->trie, ip, 32);
        for (uint32_t i = 0; i < L->learnt.n; i++)
            if (L->learnt.v[i] == ip) L->learnt.v[i] = L->learnt.v[--L->learnt.n];
        return 0;
    }
    return s[0] == '#' || s[0] == '\n' ? 0 : -1;
}

/* configured entries that SRAM has resolved (a MAC learnt by an earlier instance) go
 * back to unresolved: ARP starts from scratch (LAYOUT.md §7: ARP_MISS first) */
static int revert_learnt(tables *t, tables_load *L)
{
    const lpm_layout *l = &t->cfg->lay;
    u32vec resolved = {0};
    for (uint32_t i = 0; i < t->nh.n; i++) {        /* found first, so that the writes come close together */
        nh_entry s;
        nh_read(t->mem, l, i, &s);
        if ((t->nh.e[i].flags & NH_ARP_MISS) && !(s.flags & NH_ARP_MISS) && u32vec_push(&resolved, i)) {
            u32vec_free(&resolved);
            return -1;
        }
    }
    for (uint32_t j = 0; j < resolved.n; j++) {
        uint32_t i = resolved.v[j], w[4];
        nh_encode(&t->nh.e[i], w);
        npkd_sram_wr(t->mem, l->nh + 16 * i, w[0]);
        for (uint32_t k = 1; k < 4; k++) npkd_sram_wr(t->mem, l->nh + 16 * i + 4 * k, w[k]);
        L->reverted++;
    }
    u32vec_free(&resolved);
    for (uint32_t i = 0; i < L->learnt.n; i++)       /* the caller journals their withdrawal */
        if (!lpm_del(&t->trie, L->learnt.v[i], 32)) L->reverted++;
    if (L->on_withdraw) L->on_withdraw(L->on_withdraw_ctx, t->clock ? t->clock(t->clock_ctx) : 0);
    return 0;
}

static int finish(tables *t, tables_load *L)
{
    const npkd_cfg *c = t->cfg;
    int rc;
    if (L->write) {
        if ((rc = lpm_build(&t->trie))) return load_error(L, rc, "node pool full");
        for (uint32_t i = 0; i < t->nh.n; i++) nh_write(t->mem, &c->lay, i, &t->nh.e[i]);
        return 1;
    }
    if ((rc = lpm_adopt(&t->trie, L->restart))) {
        snprintf(L->err, sizeof L->err, rc == -3 ? "out of memory" : "SRAM holds no LPM1 table at 0x%x", c->lay.ctl);
        return -6;
    }
    for (uint32_t i = 0; i < t->nh.n; i++) {
        nh_entry s;
        nh_read(t->mem, &c->lay, i, &s);
        /* an entry resolved since (a learnt MAC, ARP_MISS cleared) is the same next hop */
        if (!nh_equal(&s, &t->nh.e[i]) && !((t->nh.e[i].flags & NH_ARP_MISS) && s.port == t->nh.e[i].port)) {
            snprintf(L->err, sizeof L->err, "SRAM next-hop entry %u differs from the configuration", i);
            return -8;
        }
    }
    t->nmarks = 0;                                  /* lpm_adopt's entry, if any (tables.h) */
    if (t->trie.alloc.limbo.n) {
        t->marks[0].n = t->trie.alloc.limbo.n;
        t->marks[0].at = t->started_ns;
        t->nmarks = 1;
    }
    if (L->restart && revert_learnt(t, L)) {
        snprintf(L->err, sizeof L->err, "out of memory");
        return -3;
    }
    return 1;
}

int tables_load_step(tables *t, tables_load *L, uint32_t budget)
{
    const npkd_cfg *c = t->cfg;
    nh_entry e;
    int rc;
    char *err = L->err;
    size_t errlen = sizeof L->err;
    switch (L->phase) {
    case 0:                                           /* connected subnets */
        for (int i = 0; i < c->nports; i++) {
            port_entry(&c->port[i], i, NH_DIRECT | NH_ARP_MISS, NULL, &e);
            if ((rc = put(t, c->port[i].net, c->port[i].len, &e, 0, 0, err, errlen))) return rc < 0 ? rc : -1;
        }
        L->phase = 1;
        return 0;
    case 1:                                           /* the route file, `budget` routes at a time */
        for (uint32_t k = 0; k < budget; k++) {
            route_cfg r;
            int eof;
            if (next_route(t, L, &r, &eof)) return -1;
            if (eof) {
                L->phase = 2;
                return 0;
            }
            route_entry(c, &r, &e);
            if ((rc = put(t, r.prefix, r.len, &e, r.next_hop, 0, err, errlen))) return rc < 0 ? rc : -1;
        }
        return 0;
    case 2:                                           /* hosts with static ARP entries: /32s */
        for (uint32_t i = 0; i < c->narp; i++) {
            uint32_t host = c->arp[i].ip;
            for (int p = 0; p < c->nports; p++) {
                const port_cfg *pc = &c->port[p];
                if ((host & pc->mask) != pc->net || host == pc->addr || host == pc->net || host == pc->bcast)
                    continue;
                uint32_t mp;
                int ml;
                if (lpm_match(&t->trie, host, &mp, &ml, NULL) && mp == pc->net && ml == pc->len) {
                    port_entry(pc, p, NH_DIRECT, c->arp[i].mac, &e);
                    if ((rc = put(t, host, 32, &e, host, 0, err, errlen))) return rc < 0 ? rc : -1;
                }
            }
        }
        L->phase = 3;
        return 0;
    case 3:                                           /* own addresses, broadcasts */
        for (int p = 0; p < c->nports; p++) {
            port_entry(&c->port[p], p, NH_LOCAL, NULL, &e);
            if ((rc = put(t, c->port[p].addr, 32, &e, 0, 1, err, errlen))) return rc < 0 ? rc : -1;
            port_entry(&c->port[p], p, NH_BROADCAST, NULL, &e);
            if ((rc = put(t, c->port[p].bcast, 32, &e, 0, 1, err, errlen))) return rc < 0 ? rc : -1;
        }
        if (c->nports) {
            memset(&e, 0, sizeof e);
            e.flags = NH_BROADCAST;
            if ((rc = put(t, 0xFFFFFFFFu, 32, &e, 0, 1, err, errlen))) return rc < 0 ? rc : -1;
        }
        L->phase = L->journal ? 5 : 4;
        return 0;
    case 4:
        return finish(t, L);
    case 5: {                                         /* the journal of a previous instance */
        char line[256];
        for (uint32_t k = 0; k < budget; k++) {
            size_t n = fgets(line, sizeof line, L->journal) ? strlen(line) : 0;
            if (n && line[n - 1] != '\n' && feof(L->journal)) n = 0;   /* a torn last line: never acknowledged */
            if (!n) {
                L->torn = !feof(L->journal) || L->jbytes < (uint64_t)ftell(L->journal);
                L->phase = 4;
                L->restart = 1;
                return 0;
            }
            L->jbytes += n;
            L->jline++;
            if (journal_line(t, L, line)) {
                snprintf(L->err, sizeof L->err, "route journal line %u: cannot replay", L->jline);
                return -1;
            }
        }
        return 0;
    }
    default:
        return -1;
    }
}

void tables_load_end(tables_load *L)
{
    if (L->f) fclose(L->f);
    if (L->journal) fclose(L->journal);
    L->f = L->journal = NULL;
    u32vec_free(&L->learnt);
}

int tables_build(tables *t, int write, char *err, size_t errlen)
{
    tables_load L;
    int rc = tables_load_begin(t, &L, write, NULL);
    while (!rc) rc = tables_load_step(t, &L, UINT32_MAX);
    if (rc < 0) snprintf(err, errlen, "%s", L.err);
    tables_load_end(&L);
    return rc < 0 ? rc : 0;
}

/* the entry nh_intern appended last taken out again (a change that did not happen) */
static void nh_unintern(nh_table *t)
{
    uint32_t i = --t->n, *at = u32map_get(&t->by_hash, nh_hash(&t->e[i]));
    if (at && *at == i) u32map_del(&t->by_hash, nh_hash(&t->e[i]));
    if (t->last >= t->n) t->last = 0;
}

int tables_prepare_entry_route(tables *t, const route_cfg *r, const nh_entry *e)
{
    int is_new;
    int index = nh_intern(&t->nh, e, t->cfg->lay.nh_cap, r->next_hop, &is_new);
    if (index < 0) return -2;
    settle(t);
    int rc = lpm_prepare(&t->trie, r->prefix, r->len, 1, (uint32_t)index);
    if (rc) {
        if (is_new) nh_unintern(&t->nh);
        return rc;
    }
    t->pend_nh = is_new && t->trie.built ? index : -1;
    return 0;
}

int tables_prepare_route(tables *t, const route_cfg *r)
{
    nh_entry e;
    route_entry(t->cfg, r, &e);
    return tables_prepare_entry_route(t, r, &e);
}

int tables_prepare_del(tables *t, uint32_t prefix, int len)
{
    settle(t);
    t->pend_nh = -1;
    return lpm_prepare(&t->trie, prefix, len, 0, 0);
}

void tables_commit(tables *t)
{
    if (t->pend_nh >= 0) nh_write(t->mem, &t->cfg->lay, (uint32_t)t->pend_nh, &t->nh.e[t->pend_nh]);
    t->pend_nh = -1;
    lpm_commit(&t->trie);     /* after the new next-hop entry (LAYOUT.md §7 rule 5) */
}

void tables_abort(tables *t)
{
    lpm_abort(&t->trie);
    if (t->pend_nh >= 0) nh_unintern(&t->nh);
    t->pend_nh = -1;
}

int tables_add_route(tables *t, const route_cfg *r)
{
    int rc = tables_prepare_route(t, r);
    if (!rc) tables_commit(t);
    return rc;
}

int tables_add_entry_route(tables *t, const route_cfg *r, const nh_entry *e)
{
    int rc = tables_prepare_entry_route(t, r, e);
    if (!rc) tables_commit(t);
    return rc;
}

int tables_intern(tables *t, const nh_entry *e, uint32_t via)
{
    int is_new;
    return nh_intern(&t->nh, e, t->cfg->lay.nh_cap, via, &is_new);
}

int tables_del_route(tables *t, uint32_t prefix, int len)
{
    int rc = tables_prepare_del(t, prefix, len);
    if (!rc) tables_commit(t);
    return rc;
}
