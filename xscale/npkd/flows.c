/* flows.c -- the flow table in SRAM and the plugin slots (flows.h). */
#include "flows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

static void flow_logged(const flow_table *t, npkd_mem *m, const flow_key *k, uint32_t word, uint64_t now_ns);

typedef struct { uint64_t hi, lo; } u128;

/* hash_128 of the hash unit (emulator/src/units/hash.c): key * mult over GF(2), reduced
 * modulo x^128 + x^7 + x^2 + x + 1 */
static u128 gf_mul(u128 a, u128 b)
{
    u128 r = {0, 0};
    for (int i = 127; i >= 0; i--) {
        int top = (int)(r.hi >> 63);
        r.hi = (r.hi << 1) | (r.lo >> 63);
        r.lo <<= 1;
        if (top) r.lo ^= 0x87;
        int bit = i >= 64 ? (int)((b.hi >> (i - 64)) & 1) : (int)((b.lo >> i) & 1);
        if (bit) { r.hi ^= a.hi; r.lo ^= a.lo; }
    }
    return r;
}

uint32_t flow_bucket(const flow_table *t, const flow_key *k)
{
    u128 key = {(uint64_t)k->src << 32 | k->dst, (uint64_t)k->ports << 32 | k->proto};
    u128 mult = {t->mult_hi, t->mult_lo};
    return (uint32_t)gf_mul(key, mult).lo & (t->buckets - 1);
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

int flow_key_of(const uint8_t *f, uint32_t len, flow_key *k)
{
    if (len < 38 || f[12] != 8 || f[13] != 0) return -1;
    uint32_t frag = ((uint32_t)f[20] << 8 | f[21]) & 0x1FFF;
    k->proto = f[23];
    k->src = be32(f + 26);
    k->dst = be32(f + 30);
    k->ports = frag == 0 && (k->proto == 6 || k->proto == 17) ? be32(f + 34) : 0;
    return 0;
}

static uint32_t key_addr(const flow_table *t, uint32_t entry) { return t->key_base + 16 * entry; }

/* a change made: the fast path's CAM caches drop what they hold (classify.h FLOW_GEN) */
void flow_changed(const flow_table *t, npkd_mem *m)
{
    uint32_t a = t->aux_base + 64 * t->buckets;
    npkd_sram_wr(m, a, npkd_sram_rd(m, a) + 1);
}

int flow_rebind(flow_table *t, npkd_mem *m, const flow_key *k, uint32_t action, uint32_t arg, uint64_t now_ns)
{
    uint32_t word;
    int e = flow_find(t, m, k, &word);
    if (e < 0) return flow_add(t, m, k, action, arg, now_ns);
    word = (word & 0xFF000000u) | (action & 0xFF) << 16 | (arg & 0xFFFF);
    flow_logged(t, m, k, word, now_ns);
    npkd_sram_wr(m, key_addr(t, (uint32_t)e) + 12, word);
    flow_changed(t, m);
    return 0;
}

int flow_find(const flow_table *t, npkd_mem *m, const flow_key *k, uint32_t *word)
{
    if (!t->buckets) return -1;
    uint32_t b = flow_bucket(t, k);
    for (uint32_t w = 0; w < 2; w++) {
        uint32_t a = key_addr(t, 2 * b + w);
        uint32_t x = npkd_sram_rd(m, a + 12);
        if (!((x >> 16) & 0xFF) || x >> 24 != k->proto) continue;
        if (npkd_sram_rd(m, a) == k->src && npkd_sram_rd(m, a + 4) == k->dst && npkd_sram_rd(m, a + 8) == k->ports) {
            if (word) *word = x;
            return (int)(2 * b + w);
        }
    }
    return -1;
}

int flow_add(flow_table *t, npkd_mem *m, const flow_key *k, uint32_t action, uint32_t arg, uint64_t now_ns)
{
    if (!t->buckets) return -1;
    if (flow_find(t, m, k, NULL) >= 0) return -2;
    uint32_t b = flow_bucket(t, k);
    for (uint32_t w = 0; w < 2; w++) {
        uint32_t e = 2 * b + w, a = key_addr(t, e);
        if ((npkd_sram_rd(m, a + 12) >> 16) & 0xFF) continue;
        uint32_t aux = t->aux_base + 32 * e;
        uint32_t word = k->proto << 24 | (action & 0xFF) << 16 | (arg & 0xFFFF);
        flow_logged(t, m, k, word, now_ns);         /* the host's record first, */
        npkd_sram_wr(m, aux, 0);                    /* counters from 0, then the key, */
        npkd_sram_wr(m, aux + 4, 0);
        npkd_sram_wr(m, a, k->src);
        npkd_sram_wr(m, a + 4, k->dst);
        npkd_sram_wr(m, a + 8, k->ports);           /* and its action word last: published */
        npkd_sram_wr(m, a + 12, word);
        flow_changed(t, m);
        if (t->seen) t->seen[e] = ~0u;
        t->added++;
        return 0;
    }
    return -3;
}

int flow_del(flow_table *t, npkd_mem *m, const flow_key *k, uint64_t now_ns)
{
    if (!t->buckets) return -1;
    int e = flow_find(t, m, k, NULL);
    if (e < 0) return -4;
    flow_logged(t, m, k, k->proto << 24, now_ns);
    npkd_sram_wr(m, key_addr(t, (uint32_t)e) + 12, 0);     /* the action word first: unpublished */
    flow_changed(t, m);
    t->deleted++;
    return 0;
}

static int proto_num(const char *s, uint32_t *p, const char **end)
{
    static const struct { const char *n; uint32_t v; } names[] = {{"udp", 17}, {"tcp", 6}, {"icmp", 1}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i].n);
        if (!strncmp(s, names[i].n, n) && (s[n] == ' ' || s[n] == 0)) {
            *p = names[i].v;
            *end = s + n;
            return 0;
        }
    }
    char *e;
    unsigned long v = strtoul(s, &e, 10);
    if (e == s || v > 255) return -1;
    *p = (uint32_t)v;
    *end = e;
    return 0;
}

static const char *skip(const char *s)
{
    while (*s == ' ') s++;
    return s;
}

int flow_parse_key(const char *s, flow_key *k, const char **rest)
{
    const char *e;
    if (parse_ip(skip(s), &k->src, &e)) return -1;
    if (parse_ip(skip(e), &k->dst, &e)) return -1;
    if (proto_num(skip(e), &k->proto, &e)) return -1;
    k->ports = 0;
    if (k->proto == 6 || k->proto == 17) {
        char *x;
        unsigned long sp = strtoul(skip(e), &x, 10);
        if (x == skip(e) || sp > 65535) return -1;
        e = x;
        unsigned long dp = strtoul(skip(e), &x, 10);
        if (x == skip(e) || dp > 65535) return -1;
        k->ports = (uint32_t)(sp << 16 | dp);
        e = x;
    }
    *rest = skip(e);
    return 0;
}

const plugin_def *plugin_by_name(const char *name)
{
    for (const plugin_def *p = npkd_plugins; p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

int plugin_load(flow_table *t, uint32_t slot, const char *name, const uint32_t *args, uint32_t nargs)
{
    const plugin_def *d = plugin_by_name(name);
    if (!d) return -2;
    if (slot < 1 || slot >= FLOW_SLOTS || nargs > FLOW_ARGS) return -1;
    plugin_slot s = {0};
    s.def = d;
    memcpy(s.args, args, nargs * sizeof *args);
    s.nargs = nargs;
    s.loads = t->slot[slot].loads + 1;
    t->slot[slot] = s;                            /* one store between two packets */
    return 0;
}

/* one 32-byte record into the log: its time (us), then 7 words */
static void log_record(const flow_table *t, npkd_mem *m, uint64_t now_ns, const uint32_t w[7])
{
    if (!t->log_cap) return;
    uint32_t n = npkd_sram_rd(m, t->log_base);
    if (n >= t->log_cap) return;
    uint32_t a = t->log_base + 16 + 32 * n;
    npkd_sram_wr(m, a, (uint32_t)(now_ns / 1000));
    for (uint32_t i = 0; i < 7; i++) npkd_sram_wr(m, a + 4 + 4 * i, w[i]);
    npkd_sram_wr(m, t->log_base + 4, t->log_cap);
    npkd_sram_wr(m, t->log_base, n + 1);          /* the count last: the record is whole */
}

void plugin_logged(const flow_table *t, npkd_mem *m, uint32_t slot, uint64_t now_ns)
{
    if (slot >= FLOW_SLOTS) return;
    const plugin_slot *s = &t->slot[slot];
    uint32_t w[7] = {slot << 24 | (uint32_t)(s->def != NULL) << 16 | s->nargs, 0, 0, 0, 0, 0, 0};
    for (uint32_t i = 0; i < FLOW_ARGS; i++) w[1 + i] = i < s->nargs ? s->args[i] : 0;
    char name[8] = {0};
    if (s->def) memcpy(name, s->def->name, strlen(s->def->name) < 8 ? strlen(s->def->name) : 8);
    for (uint32_t i = 0; i < 2; i++)
        w[5 + i] = (uint32_t)(uint8_t)name[4 * i] << 24 | (uint32_t)(uint8_t)name[4 * i + 1] << 16 |
                   (uint32_t)(uint8_t)name[4 * i + 2] << 8 | (uint8_t)name[4 * i + 3];
    log_record(t, m, now_ns, w);
}

/* a flow's entry as it is from now (action 0: gone), before the fast path has it */
static void flow_logged(const flow_table *t, npkd_mem *m, const flow_key *k, uint32_t word, uint64_t now_ns)
{
    uint32_t w[7] = {1u << 28, k->src, k->dst, k->ports, word, 0, 0};
    log_record(t, m, now_ns, w);
}

void flow_set_idle(flow_table *t, uint64_t idle_ns, uint64_t now_ns)
{
    if (idle_ns && !t->seen) {
        t->seen = malloc(2u * t->buckets * sizeof *t->seen);
        if (!t->seen) return;
        memset(t->seen, 0xFF, 2u * t->buckets * sizeof *t->seen);
    }
    t->idle_ns = idle_ns;
    t->next_scan = now_ns + idle_ns;
}

uint64_t flow_deadline(const flow_table *t)
{
    return t->idle_ns && t->seen ? t->next_scan : UINT64_MAX;
}

void flow_scan(flow_table *t, npkd_mem *m, uint64_t now_ns)
{
    if (!t->idle_ns || !t->seen || now_ns < t->next_scan) return;
    t->next_scan = now_ns + t->idle_ns;
    for (uint32_t e = 0; e < 2 * t->buckets; e++) {
        uint32_t a = key_addr(t, e), w = npkd_sram_rd(m, a + 12);
        if (!((w >> 16) & 0xFF)) continue;
        uint32_t n = npkd_sram_rd(m, t->aux_base + 32 * e);
        if (n != t->seen[e]) {
            t->seen[e] = n;
            continue;
        }
        flow_key k = {npkd_sram_rd(m, a), npkd_sram_rd(m, a + 4), npkd_sram_rd(m, a + 8), w >> 24};
        flow_logged(t, m, &k, k.proto << 24, now_ns);
        npkd_sram_wr(m, a + 12, 0);
        flow_changed(t, m);
        t->seen[e] = ~0u;
        t->expired++;
    }
}
