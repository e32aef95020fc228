/* lpm.c -- the LPM trie of LAYOUT.md in C; follows toolchain/router/lpm.py step by step
 * (same planning, same allocation order, same write order; an update that touches
 * several /16s writes all their new nodes before it publishes the first: lpm_prepare),
 * see lpm.h. */
#include "lpm.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t UNITS[3] = {64, 32, 1};   /* DENSE32, DENSE16, RUNS */
/* the limbo entry lpm_adopt(.., 1) puts first: the pool units below the adopted
 * high-water mark that the table's previous owner had free or in limbo (recover) */
#define LIMBO_ADOPTED 0xFFFFFFFFu

/* the root entry of /16 k: the build's array until the table is published, then SRAM
 * (the one copy the fast path reads: nothing to load when the daemon adopts a table) */
static uint32_t root_get(lpm *t, uint32_t k)
{
    return t->built ? npkd_sram_rd(t->mem, t->lay.root + 4 * k) : t->root[k];
}

static uint32_t child_entry(int type, uint32_t off)
{
    return LPM_ENTRY_CHILD | ((uint32_t)type << LPM_TYPE_SHIFT) | off;
}

int lpm_init(lpm *t, const lpm_layout *lay, npkd_mem *mem)
{
    memset(t, 0, sizeof *t);
    t->lay = *lay;
    t->mem = mem;
    t->inner16 = calloc(LPM_ROOT_ENTRIES, sizeof *t->inner16);
    t->short_len = malloc(LPM_ROOT_ENTRIES);
    t->short_nh = calloc(LPM_ROOT_ENTRIES, sizeof *t->short_nh);
    t->root = calloc(LPM_ROOT_ENTRIES, sizeof *t->root);
    t->child = malloc(256 * sizeof *t->child);
    if (!t->inner16 || !t->short_len || !t->short_nh || !t->root || !t->child) {
        lpm_free(t);
        return -1;
    }
    memset(t->short_len, -1, LPM_ROOT_ENTRIES);
    t->alloc.capacity = lay->node_bytes / LPM_UNIT;
    return 0;
}

void lpm_free(lpm *t)
{
    for (int n = 0; n <= 32; n++) u32map_free(&t->routes[n]);
    if (t->inner16)
        for (uint32_t k = 0; k < LPM_ROOT_ENTRIES; k++) u32vec_free(&t->inner16[k]);
    for (uint32_t i = 0; i < t->n24; i++) u32vec_free(&t->inner24[i]);
    u32map_free(&t->inner24_at);
    for (int i = 0; i < 3; i++) u32vec_free(&t->alloc.free[i]);
    u32vec_free(&t->alloc.limbo);
    u32vec_free(&t->alloc.spare);
    u32vec_free(&t->pend.placed);
    u32vec_free(&t->pend.publish);
    free(t->alloc.seen);
    free(t->inner16);
    free(t->inner24);
    free(t->short_len);
    free(t->short_nh);
    free(t->root);
    free(t->child);
    memset(t, 0, sizeof *t);
}

/* ---- allocator ------------------------------------------------------------------- */

/* a pool unit of a run that holds no DENSE16 is a RUNS node: onto that free list */
static void runs_free(lpm_alloc *a, uint32_t start, uint32_t len)
{
    for (uint32_t u = start; u < start + len; u++) u32vec_push(&a->free[LPM_RUNS], u);
}

/* `units` off the start of a spare run (recover) that holds them, the last first; a run
 * left shorter than a DENSE16 goes to the RUNS free list */
static int take_spare(lpm_alloc *a, uint32_t units, uint32_t *off)
{
    u32vec *v = &a->spare;
    for (uint32_t i = v->n; i >= 2; i -= 2) {
        uint32_t *run = &v->v[i - 2];
        if (run[1] < units) continue;
        *off = run[0];
        run[0] += units;
        run[1] -= units;
        if (run[1] < UNITS[LPM_DENSE16]) {
            runs_free(a, run[0], run[1]);
            run[0] = v->v[v->n - 2];
            run[1] = v->v[v->n - 1];
            v->n -= 2;
        }
        return 1;
    }
    return 0;
}

static int alloc_node(lpm *t, int type, uint32_t *off)
{
    lpm_alloc *a = &t->alloc;
    uint32_t units = UNITS[type];
    u32vec *pool = &a->free[type];
    a->in_use += units;
    if (pool->n) {
        *off = pool->v[--pool->n];
        return 0;
    }
    if (a->spare.n && take_spare(a, units, off)) return 0;
    if (a->high_water + units <= a->capacity) {
        *off = a->high_water;
        a->high_water += units;
        return 0;
    }
    /* the pool is used up to its end (where lpm.py gives up): a larger free node, the
     * smallest there is, split; the rest of it goes on this type's free list */
    for (int big = type - 1; big >= 0; big--) {
        u32vec *from = &a->free[big];
        if (!from->n) continue;
        uint32_t o = from->v[--from->n];
        for (uint32_t u = o + units; u < o + UNITS[big]; u += units) u32vec_push(pool, u);
        *off = o;
        return 0;
    }
    a->in_use -= units;
    return -2;
}

static void retire(lpm *t, int type, uint32_t off)
{
    t->alloc.in_use -= UNITS[type];
    u32vec_push(&t->alloc.limbo, (uint32_t)type << 24 | off);
}

/* a node written but never published (an update that ran out of pool): no lookup ever
 * saw it, so it is free at once */
static void unplace(lpm *t, uint32_t node)
{
    t->alloc.in_use -= UNITS[node >> 24];
    u32vec_push(&t->alloc.free[node >> 24], node & 0xFFFFFF);
}

/* ---- what a table's previous owner left (lpm_adopt) ----------------------------------- */

static void mark(uint32_t *seen, uint32_t lim, uint32_t off, uint32_t units)
{
    for (uint32_t u = off; u < lim && u - off < units; u++) seen[u >> 5] |= 1u << (u & 31);
}

/* mark the node a pointer entry points to; its type, or -1 (a leaf or reserved type) */
static int mark_entry(uint32_t *seen, uint32_t lim, uint32_t e)
{
    int type = (int)((e >> LPM_TYPE_SHIFT) & 7);
    if (!(e & LPM_ENTRY_CHILD) || type > LPM_RUNS) return -1;
    mark(seen, lim, e & LPM_OFFSET_MASK, UNITS[type]);
    return type;
}

/* n <= 256 SRAM words at addr as stored (big-endian): in place, or read into buf */
static const uint32_t *stored(lpm *t, uint32_t addr, uint32_t n, uint32_t *buf)
{
    const uint32_t *w = npkd_sram_words(t->mem, addr, n);
    if (w) return w;
    for (uint32_t i = 0; i < n; i++) buf[i] = htonl(npkd_sram_rd(t->mem, addr + 4 * i));
    return buf;
}

/* the first group of 16 of the 256 stored entries w from k on (a multiple of 16) that
 * holds a pointer, 256 if none: most root entries are leaves, 16 are or'ed at a time */
__attribute__((noinline)) static uint32_t next_pointers(const uint32_t *w, uint32_t k)
{
    const uint32_t child = htonl(LPM_ENTRY_CHILD);
    const uint32_t *p = w + k, *end = w + 256;
    for (; p < end; p += 16) {
        uint32_t any = p[0] | p[1] | p[2] | p[3] | p[4] | p[5] | p[6] | p[7];
        any |= p[8] | p[9] | p[10] | p[11] | p[12] | p[13] | p[14] | p[15];
        if (any & child) break;
    }
    return (uint32_t)(p - w);
}

/* The walk of lpm_adopt(.., 1): `budget` more SRAM words of the trie read (a block of
 * 256 root entries counts 256, a level-2 DENSE32 256 more), every pool unit below the
 * adopted high-water mark that an entry leads to marked in `seen`.  1 when the walk is
 * complete (or there is none), 0 more to do, -1 out of memory (then there is none: what
 * the previous owner left stays lost, as without recovery). */
int lpm_recover_step(lpm *t, uint32_t budget)
{
    lpm_alloc *a = &t->alloc;
    if (!a->adopted || a->walk_at == LPM_ROOT_ENTRIES) return 1;
    if (!a->seen && !(a->seen = calloc(a->adopted / 32 + 1, sizeof *a->seen))) {
        a->adopted = 0;
        return -1;
    }
    const uint32_t child = htonl(LPM_ENTRY_CHILD);
    uint32_t rbuf[256], nbuf[256], lim = a->adopted;
    for (uint32_t spent = 0; a->walk_at < LPM_ROOT_ENTRIES && spent < budget; a->walk_at += 256) {
        const uint32_t *r = stored(t, t->lay.root + 4 * a->walk_at, 256, rbuf);
        spent += 256;
        for (uint32_t k = 0; (k = next_pointers(r, k)) < 256; k += 16)
            for (uint32_t j = k; j < k + 16; j++) {
                if (!(r[j] & child) || mark_entry(a->seen, lim, ntohl(r[j])) != LPM_DENSE32) continue;
                const uint32_t *w = stored(t, t->lay.nodes + LPM_UNIT * (ntohl(r[j]) & LPM_OFFSET_MASK), 256, nbuf);
                for (uint32_t b = 0; b < 256; b++)
                    if (w[b] & child) mark_entry(a->seen, lim, ntohl(w[b]));
                spent += 256;
            }
    }
    return a->walk_at == LPM_ROOT_ENTRIES;
}

/* The grace of lpm_adopt's limbo entry: every unit below the adopted high-water mark
 * that the walk found no entry leading to and that this allocator does not hold (in
 * limbo, on a free list) becomes free -- what the previous owner had free or in limbo
 * when it stopped, exactly.  None of it has been reachable since before lpm_adopt, and
 * none has been handed out since: nothing below that mark is freed before this entry,
 * the first in limbo (so every node this allocator has written since lies above it or
 * is in limbo, and the walk, over the trie as it was at or after lpm_adopt, saw every
 * older node a lookup can reach).  What node types the units held is not known: a run
 * of them long enough for a DENSE16 is kept whole (`spare`) and serves whatever type is
 * asked for when that type's free list is empty, before the high-water mark grows
 * (take_spare); shorter runs are RUNS nodes. */
static void recover(lpm *t)
{
    lpm_alloc *a = &t->alloc;
    while (lpm_recover_step(t, UINT32_MAX) == 0) {
    }
    if (!a->adopted) return;                          /* out of memory */
    uint32_t lim = a->adopted, *seen = a->seen;
    for (uint32_t i = 0; i < a->limbo.n; i++)
        if (a->limbo.v[i] != LIMBO_ADOPTED) mark(seen, lim, a->limbo.v[i] & 0xFFFFFF, UNITS[a->limbo.v[i] >> 24]);
    for (int type = 0; type < 3; type++)
        for (uint32_t i = 0; i < a->free[type].n; i++) mark(seen, lim, a->free[type].v[i], UNITS[type]);
    for (uint32_t i = 0; i < a->spare.n; i += 2) mark(seen, lim, a->spare.v[i], a->spare.v[i + 1]);
    uint32_t got = 0;
    for (uint32_t u = 0; u < lim;) {
        if (seen[u >> 5] == 0xFFFFFFFFu && !(u & 31)) {
            u += 32;
            continue;
        }
        if (seen[u >> 5] >> (u & 31) & 1) {
            u++;
            continue;
        }
        uint32_t end = u;
        while (end < lim && !(seen[end >> 5] >> (end & 31) & 1)) end++;
        got += end - u;
        if (end - u >= UNITS[LPM_DENSE16] && !u32vec_push(&a->spare, u)) {
            if (!u32vec_push(&a->spare, end - u)) {
                u = end;
                continue;
            }
            a->spare.n--;                             /* (out of memory) */
        }
        runs_free(a, u, end - u);
        u = end;
    }
    free(a->seen);
    a->seen = NULL;
    a->adopted = 0;
    a->in_use -= got;
    a->recovered += got;
}

void lpm_grace_upto(lpm *t, uint32_t n)
{
    lpm_alloc *a = &t->alloc;
    if (n > a->limbo.n) n = a->limbo.n;
    if (!n) return;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t e = a->limbo.v[i];
        if (e == LIMBO_ADOPTED)
            recover(t);
        else
            u32vec_push(&a->free[e >> 24], e & 0xFFFFFF);
    }
    memmove(a->limbo.v, a->limbo.v + n, (a->limbo.n - n) * sizeof *a->limbo.v);
    a->limbo.n -= n;
}

void lpm_grace(lpm *t)
{
    lpm_grace_upto(t, t->alloc.limbo.n);
}

/* ---- route set ---------------------------------------------------------------------- */

static int pairs_add(u32vec *v, uint32_t p, int n)
{
    return u32vec_push(v, p) || u32vec_push(v, (uint32_t)n) ? -3 : 0;
}

static void pairs_del(u32vec *v, uint32_t p, int n)
{
    for (uint32_t i = 0; i < v->n; i += 2)
        if (v->v[i] == p && v->v[i + 1] == (uint32_t)n) {
            v->v[i] = v->v[v->n - 2];
            v->v[i + 1] = v->v[v->n - 1];
            v->n -= 2;
            return;
        }
}

static u32vec *inner24_of(lpm *t, uint32_t k24, int create)
{
    uint32_t *at = u32map_get(&t->inner24_at, k24);
    if (at) return &t->inner24[*at];
    if (!create) return NULL;
    if (t->n24 == t->cap24) {
        uint32_t cap = t->cap24 ? 2 * t->cap24 : 64;
        u32vec *p = realloc(t->inner24, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        t->inner24 = p;
        t->cap24 = cap;
    }
    if (u32map_put(&t->inner24_at, k24, t->n24)) return NULL;
    memset(&t->inner24[t->n24], 0, sizeof t->inner24[0]);
    return &t->inner24[t->n24++];
}

int lpm_get(const lpm *t, uint32_t prefix, int len, uint32_t *nh)
{
    if (len < 0 || len > 32) return 0;
    const uint32_t *v = u32map_get(&t->routes[len], prefix);
    if (v && nh) *nh = *v;
    return v != NULL;
}

int lpm_match(const lpm *t, uint32_t addr, uint32_t *prefix, int *len, uint32_t *nh)
{
    for (int n = 32; n >= 0; n--) {
        const uint32_t *v = u32map_get(&t->routes[n], addr & lpm_mask(n));
        if (v) {
            if (prefix) *prefix = addr & lpm_mask(n);
            if (len) *len = n;
            if (nh) *nh = *v;
            return 1;
        }
    }
    return 0;
}

/* The /16s whose best route <= /16 changed (into `touched`); lpm.py _update_short. */
static int update_short(lpm *t, uint32_t p, int n, int add, uint32_t nh, u32vec *touched)
{
    uint32_t first = p >> 16, count = 1u << (16 - n);
    if (add) {
        for (uint32_t k = first; k < first + count; k++)
            if (t->short_len[k] <= n && !(t->short_len[k] == n && t->short_nh[k] == nh)) {
                t->short_len[k] = (int8_t)n;
                t->short_nh[k] = (uint16_t)nh;
                if (touched && u32vec_push(touched, k)) return -3;
            }
        return 0;
    }
    int rlen = -1;
    uint32_t rnh = 0;
    for (int m = n - 1; m >= 0; m--) {
        const uint32_t *v = u32map_get(&t->routes[m], p & lpm_mask(m));
        if (v) {
            rlen = m;
            rnh = *v;
            break;
        }
    }
    for (uint32_t k = first; k < first + count; k++)
        if (t->short_len[k] == n) {
            if (touched && t->short_nh[k] != rnh && u32vec_push(touched, k)) return -3;
            t->short_len[k] = (int8_t)rlen;
            t->short_nh[k] = (uint16_t)rnh;
        }
    return 0;
}

/* lpm.py _set_route: change the set, list the /16s that may have changed */
static int set_route(lpm *t, uint32_t p, int n, int add, uint32_t nh, u32vec *touched)
{
    if (n < 0 || n > 32 || (p & ~lpm_mask(n))) return -1;
    if (add) {
        if (nh < 1 || nh > LPM_NH_MASK) return -1;
        int had = u32map_get(&t->routes[n], p) != NULL;
        if (u32map_put(&t->routes[n], p, nh)) return -3;
        if (!had) {
            t->nroutes++;
            if (n > 16 && pairs_add(&t->inner16[p >> 16], p, n)) return -3;
            if (n > 24) {
                u32vec *v = inner24_of(t, p >> 8, 1);
                if (!v || pairs_add(v, p, n)) return -3;
            }
        }
    } else {
        if (!u32map_del(&t->routes[n], p)) return -4;
        t->nroutes--;
        if (n > 16) pairs_del(&t->inner16[p >> 16], p, n);
        if (n > 24) {
            u32vec *v = inner24_of(t, p >> 8, 0);
            if (v) pairs_del(v, p, n);
        }
    }
    if (n > 16) return touched && u32vec_push(touched, p >> 16) ? -3 : 0;
    return update_short(t, p, n, add, nh, touched);
}

/* ---- planning ------------------------------------------------------------------------- */

static void fill_by_length(lpm *t, const u32vec *v, int lo, int hi, uint16_t *dst, int shift)
{
    for (int n = lo; n <= hi; n++)
        for (uint32_t i = 0; i < v->n; i += 2) {
            if ((int)v->v[i + 1] != n) continue;
            uint32_t p = v->v[i];
            uint32_t start = (p >> shift) & 0xFF, span = 1u << (hi - n);
            uint32_t nh = *u32map_get(&t->routes[n], p);
            for (uint32_t j = 0; j < span; j++) dst[start + j] = (uint16_t)nh;
        }
}

static int all_equal(const uint16_t *v)
{
    for (int i = 1; i < 256; i++)
        if (v[i] != v[0]) return 0;
    return 1;
}

/* lpm.py _plan: 0 = a leaf (*leaf), 1 = nodes (t->vals, t->child, t->has_child) */
static int plan(lpm *t, uint32_t k, uint16_t *leaf)
{
    uint16_t base = t->short_nh[k];
    const u32vec *in = &t->inner16[k];
    *leaf = base;
    if (!in->n) return 0;
    for (int i = 0; i < 256; i++) t->vals[i] = base;
    memset(t->has_child, 0, sizeof t->has_child);
    fill_by_length(t, in, 17, 24, t->vals, 8);
    uint8_t deep[256] = {0};
    for (uint32_t i = 0; i < in->n; i += 2)
        if (in->v[i + 1] > 24) deep[(in->v[i] >> 8) & 0xFF] = 1;
    int any = 0;
    for (int b = 0; b < 256; b++) {
        if (!deep[b]) continue;
        uint16_t *sub = t->child[b];
        for (int i = 0; i < 256; i++) sub[i] = t->vals[b];
        const u32vec *v24 = inner24_of(t, k << 8 | (uint32_t)b, 0);
        if (v24) fill_by_length(t, v24, 25, 32, sub, 0);
        if (all_equal(sub))
            t->vals[b] = sub[0];
        else
            t->has_child[b] = 1, any = 1;
    }
    if (!any && all_equal(t->vals)) {
        *leaf = t->vals[0];
        return 0;
    }
    return 1;
}

/* (type, words) of a leaves-only node: RUNS if the values make at most 5 runs */
static int encode_leaf_node(const uint16_t *vals, uint32_t *w)
{
    int bounds[LPM_RUNS_MAX], nruns = 1;
    uint16_t values[LPM_RUNS_MAX];
    values[0] = vals[0];
    for (int i = 1; i < 256; i++)
        if (vals[i] != vals[i - 1]) {
            if (nruns == LPM_RUNS_MAX) {
                nruns++;
                break;
            }
            bounds[nruns] = i;
            values[nruns++] = vals[i];
        }
    if (nruns <= LPM_RUNS_MAX) {
        int b[4];
        for (int i = 0; i < 4; i++) b[i] = i + 1 < nruns ? bounds[i + 1] : 0xFF;
        for (int i = nruns; i < LPM_RUNS_MAX; i++) values[i] = values[nruns - 1];
        w[0] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
        w[1] = (uint32_t)values[0] << 16 | values[1];
        w[2] = (uint32_t)values[2] << 16 | values[3];
        w[3] = (uint32_t)values[4] << 16;
        return LPM_RUNS;
    }
    for (int i = 0; i < 128; i++) w[i] = (uint32_t)vals[2 * i] << 16 | vals[2 * i + 1];
    return LPM_DENSE16;
}

static int runs_index(uint32_t h, uint32_t b)
{
    return (b >= h >> 24) + (b >= ((h >> 16) & 0xFF)) + (b >= ((h >> 8) & 0xFF)) + (b >= (h & 0xFF));
}

/* the 256 values of a leaves-only node in SRAM */
static int decode_leaf_node(lpm *t, uint32_t entry, uint16_t *out)
{
    int type = (int)((entry >> LPM_TYPE_SHIFT) & 7);
    uint32_t base = t->lay.nodes + LPM_UNIT * (entry & LPM_OFFSET_MASK);
    if (type == LPM_RUNS) {
        uint32_t w[4];
        for (int i = 0; i < 4; i++) w[i] = npkd_sram_rd(t->mem, base + 4 * (uint32_t)i);
        for (uint32_t b = 0; b < 256; b++) {
            int i = runs_index(w[0], b);
            out[b] = (uint16_t)((w[1 + i / 2] >> (i & 1 ? 0 : 16)) & 0xFFFF);
        }
        return 0;
    }
    if (type == LPM_DENSE16) {
        for (uint32_t i = 0; i < 128; i++) {
            uint32_t w = npkd_sram_rd(t->mem, base + 4 * i);
            out[2 * i] = (uint16_t)(w >> 16);
            out[2 * i + 1] = (uint16_t)w;
        }
        return 0;
    }
    return -1;
}

/* lpm.py _same, from what SRAM holds */
static int same(lpm *t, uint32_t k, int kind, uint16_t leaf)
{
    uint32_t e = root_get(t, k);
    if (!kind) return !(e & LPM_ENTRY_CHILD) && e == leaf;
    if (!(e & LPM_ENTRY_CHILD)) return 0;
    int type = (int)((e >> LPM_TYPE_SHIFT) & 7);
    int any = 0;
    for (int b = 0; b < 256; b++) any |= t->has_child[b];
    uint16_t got[256];
    if (!any) {
        if (type == LPM_DENSE32 || decode_leaf_node(t, e, got)) return 0;
        return !memcmp(got, t->vals, sizeof got);
    }
    if (type != LPM_DENSE32) return 0;
    uint32_t base = t->lay.nodes + LPM_UNIT * (e & LPM_OFFSET_MASK);
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t w = npkd_sram_rd(t->mem, base + 4 * b);
        if (!t->has_child[b]) {
            if (w != t->vals[b]) return 0;
            continue;
        }
        if (!(w & LPM_ENTRY_CHILD) || decode_leaf_node(t, w, got)) return 0;
        if (memcmp(got, t->child[b], sizeof got)) return 0;
    }
    return 1;
}

static int place(lpm *t, int type, const uint32_t *w, uint32_t *off)
{
    int rc = alloc_node(t, type, off);
    if (rc) return rc;
    uint32_t base = t->lay.nodes + LPM_UNIT * *off;
    uint32_t n = UNITS[type] * LPM_UNIT / 4;
    if (type == LPM_RUNS) n = 4;
    for (uint32_t i = 0; i < n; i++) npkd_sram_wr(t->mem, base + 4 * i, w[i]);
    return 0;
}

/* the first half of lpm.py _materialise: a /16's fresh nodes, written where no lookup
 * reaches them (each onto `placed`, type << 24 | offset); its new root entry in *entry.
 * Out of pool: what it placed is given back, and nothing else has changed. */
static int place_nodes(lpm *t, int kind, uint16_t leaf, uint32_t *entry, u32vec *placed, int *wrote)
{
    *entry = leaf;
    if (!kind) return 0;
    uint32_t w[256], ptr[256], mark = placed->n, off;
    int any = 0, rc = 0;
    for (int b = 0; b < 256 && !rc; b++) {
        if (!t->has_child[b]) continue;
        int ct = encode_leaf_node(t->child[b], w);
        if ((rc = place(t, ct, w, &off))) break;
        if (u32vec_push(placed, (uint32_t)ct << 24 | off)) {
            unplace(t, (uint32_t)ct << 24 | off);
            rc = -3;
            break;
        }
        ptr[b] = child_entry(ct, off);
        any = 1;
        *wrote = 1;
    }
    int type = LPM_DENSE32;
    if (!rc) {
        if (any)
            for (int b = 0; b < 256; b++) w[b] = t->has_child[b] ? ptr[b] : t->vals[b];
        else
            type = encode_leaf_node(t->vals, w);
        rc = place(t, type, w, &off);
    }
    if (!rc && u32vec_push(placed, (uint32_t)type << 24 | off)) {
        unplace(t, (uint32_t)type << 24 | off);
        rc = -3;
    }
    if (rc) {
        while (placed->n > mark) unplace(t, placed->v[--placed->n]);
        return rc;
    }
    *wrote = 1;
    *entry = child_entry(type, off);
    return 0;
}

/* the second half: the root entry (the one write that publishes the new nodes), then
 * the old nodes to limbo */
static void publish(lpm *t, uint32_t k, uint32_t entry, int *wrote)
{
    uint32_t old = root_get(t, k);
    if (old != entry) {
        if (t->built) {
            npkd_sram_wr(t->mem, t->lay.root + 4 * k, entry);
            *wrote = 1;
        } else {
            t->root[k] = entry;
        }
    }
    if (old & LPM_ENTRY_CHILD) {
        int type = (int)((old >> LPM_TYPE_SHIFT) & 7);
        uint32_t off = old & LPM_OFFSET_MASK;
        if (type == LPM_DENSE32) {
            uint32_t base = t->lay.nodes + LPM_UNIT * off;
            for (uint32_t b = 0; b < 256; b++) {
                uint32_t w = npkd_sram_rd(t->mem, base + 4 * b);
                if (w & LPM_ENTRY_CHILD) retire(t, (int)((w >> LPM_TYPE_SHIFT) & 7), w & LPM_OFFSET_MASK);
            }
        }
        retire(t, type, off);
    }
}

/* lpm.py _materialise: fresh nodes, then the root entry, then the old nodes to limbo */
static int materialise(lpm *t, uint32_t k, int kind, uint16_t leaf, int *wrote)
{
    u32vec *placed = &t->pend.placed;
    uint32_t entry;
    placed->n = 0;
    int rc = place_nodes(t, kind, leaf, &entry, placed, wrote);
    placed->n = 0;
    if (!rc) publish(t, k, entry, wrote);
    return rc;
}

static void ctl_writes(lpm *t)
{
    uint32_t c = t->lay.ctl;
    npkd_sram_wr(t->mem, c + 0, LPM_CTL_MAGIC);
    npkd_sram_wr(t->mem, c + 4, LPM_CTL_VERSION);
    npkd_sram_wr(t->mem, c + 8, t->generation);
    npkd_sram_wr(t->mem, c + 12, t->alloc.high_water);
}

int lpm_build(lpm *t)
{
    t->built = 0;
    t->generation = 0;
    for (int i = 0; i < 3; i++) t->alloc.free[i].n = 0;
    t->alloc.limbo.n = t->alloc.spare.n = 0;
    t->alloc.high_water = t->alloc.in_use = t->alloc.adopted = 0;
    free(t->alloc.seen);
    t->alloc.seen = NULL;
    for (uint32_t k = 0; k < LPM_ROOT_ENTRIES; k++) t->root[k] = t->short_nh[k];
    int wrote = 0;
    for (uint32_t k = 0; k < LPM_ROOT_ENTRIES; k++) {
        if (!t->inner16[k].n) continue;
        uint16_t leaf;
        int kind = plan(t, k, &leaf);
        int rc = materialise(t, k, kind, leaf, &wrote);
        if (rc) return rc;
    }
    for (uint32_t k = 0; k < LPM_ROOT_ENTRIES; k++) npkd_sram_wr(t->mem, t->lay.root + 4 * k, t->root[k]);
    t->built = 1;
    ctl_writes(t);
    return 0;
}

int lpm_adopt(lpm *t, int recover)
{
    uint32_t c = t->lay.ctl;
    lpm_alloc *a = &t->alloc;
    if (npkd_sram_rd(t->mem, c) != LPM_CTL_MAGIC || npkd_sram_rd(t->mem, c + 4) != LPM_CTL_VERSION) return -1;
    t->generation = npkd_sram_rd(t->mem, c + 8);
    for (int i = 0; i < 3; i++) a->free[i].n = 0;
    a->limbo.n = a->spare.n = 0;
    a->high_water = a->in_use = npkd_sram_rd(t->mem, c + 12);
    free(a->seen);
    a->seen = NULL;
    a->walk_at = 0;
    /* what lies above the pool's end can never be handed out: nothing to look for there */
    a->adopted = recover ? (a->high_water < a->capacity ? a->high_water : a->capacity) : 0;
    if (a->adopted && u32vec_push(&a->limbo, LIMBO_ADOPTED)) return -3;
    t->built = 1;                 /* the root array stays in SRAM only (root_get) */
    return 0;
}

int lpm_prepare(lpm *t, uint32_t prefix, int len, int add, uint32_t nh)
{
    lpm_pending *q = &t->pend;
    q->active = q->wrote = 0;
    q->publish.n = q->placed.n = 0;
    if (!t->built) return set_route(t, prefix, len, add, nh, NULL);   /* the model only */
    if (len < 0 || len > 32 || (prefix & ~lpm_mask(len)) || (add && (nh < 1 || nh > LPM_NH_MASK))) return -1;
    q->had = lpm_get(t, prefix, len, &q->old_nh);
    if (!add && !q->had) return -4;
    u32vec touched = {0};
    int rc = set_route(t, prefix, len, add, nh, &touched);
    if (rc) {                       /* (-3: no memory, the model may be half changed) */
        u32vec_free(&touched);
        return rc;
    }
    q->prefix = prefix;
    q->len = len;
    q->active = 1;
    for (uint32_t i = 0; i < touched.n && !rc; i++) {
        uint16_t leaf;
        uint32_t k = touched.v[i], entry;
        int kind = plan(t, k, &leaf);
        if (same(t, k, kind, leaf)) continue;
        rc = place_nodes(t, kind, leaf, &entry, &q->placed, &q->wrote);
        if (!rc && (u32vec_push(&q->publish, k) || u32vec_push(&q->publish, entry))) rc = -3;
    }
    u32vec_free(&touched);
    if (rc) lpm_abort(t);
    return rc;
}

uint32_t lpm_rc_invalidate(npkd_mem *mem, uint32_t prefix, int len, lpm_rc_change *c)
{
    if (c) memset(c, 0, sizeof *c);
    if (npkd_scratch_rd(mem, LPM_RC_HDR) != LPM_RC_MAGIC) return 0;   /* no cache in this image */
    uint32_t base = npkd_scratch_rd(mem, LPM_RC_HDR + 4), sets = npkd_scratch_rd(mem, LPM_RC_HDR + 8);
    uint32_t keep = ~npkd_scratch_rd(mem, LPM_RC_HDR + 12);
    uint32_t first = prefix & lpm_mask(len), last = first | ~lpm_mask(len);
    uint32_t plo = first & keep, phi = last & keep, n = 0;    /* the prefix's masked addresses lie in [plo, phi] */
    uint32_t fixed = 0, want = 0, j = 0;    /* set-number bits the prefix fixes, and their values */
    for (uint32_t b = 0; b < 32; b++) {
        if (keep & (1u << b)) continue;                 /* not an index bit */
        if (lpm_mask(len) & (1u << b)) {
            fixed |= 1u << j;
            want |= ((prefix >> b) & 1u) << j;
        }
        j++;
    }
    if (sets > (mem->scratch_bytes - base) / 16 || sets > LPM_RC_MAX_SETS) return 0;
    if (c) {
        c->plo = plo;
        c->phi = phi;
    }
    for (uint32_t i = 0; i < sets; i++) {
        uint32_t a = base + 16 * i, lo = npkd_scratch_rd(mem, a), hi = npkd_scratch_rd(mem, a + 4);
        if ((i & fixed) != want || lo > hi || hi < plo || lo > phi) continue;
        npkd_scratch_wr(mem, a + 12, lo);       /* kept for lpm_rc_narrow */
        npkd_scratch_wr(mem, a, 0xFFFFFFFFu);   /* one word: the set misses from now on */
        if (c) c->sets[i / 32] |= 1u << (i % 32);
        n++;
    }
    if (n) npkd_scratch_wr(mem, LPM_RC_INVALIDATED, npkd_scratch_rd(mem, LPM_RC_INVALIDATED) + n);
    return n;
}

uint32_t lpm_rc_narrow(npkd_mem *mem, const lpm_rc_change *c)
{
    uint32_t base = npkd_scratch_rd(mem, LPM_RC_HDR + 4), n = 0;
    for (uint32_t i = 0; i < LPM_RC_MAX_SETS; i++) {
        if (!(c->sets[i / 32] >> (i % 32) & 1u)) continue;
        uint32_t a = base + 16 * i, lo = npkd_scratch_rd(mem, a + 12), hi = npkd_scratch_rd(mem, a + 4);
        /* the parts of [lo, hi] below and above [plo, phi]: the larger one stays cached */
        uint64_t below = c->plo > lo ? (uint64_t)c->plo - lo : 0, above = hi > c->phi ? (uint64_t)hi - c->phi : 0;
        if (!below && !above) continue;         /* all of it inside the prefix: stays empty */
        if (below >= above) {
            npkd_scratch_wr(mem, a + 4, c->plo - 1);
            npkd_scratch_wr(mem, a, lo);
        } else {
            npkd_scratch_wr(mem, a, c->phi + 1);   /* hi unchanged */
        }
        n++;
    }
    if (n) npkd_scratch_wr(mem, LPM_RC_NARROWED, npkd_scratch_rd(mem, LPM_RC_NARROWED) + n);
    return n;
}

void lpm_commit(lpm *t)
{
    lpm_pending *q = &t->pend;
    if (!q->active) return;
    /* the cached answers the change may alter miss (and walk the trie) before any of it
     * is published: a lookup then sees the old answer or the new one, never a stale one after */
    uint32_t rc = q->publish.n ? lpm_rc_invalidate(t->mem, q->prefix, q->len, &t->rc) : 0;
    for (uint32_t i = 0; i < q->publish.n; i += 2) publish(t, q->publish.v[i], q->publish.v[i + 1], &q->wrote);
    if (q->wrote) {
        t->generation++;
        npkd_sram_wr(t->mem, t->lay.ctl + 12, t->alloc.high_water);
        npkd_sram_wr(t->mem, t->lay.ctl + 8, t->generation);
    }
    if (rc) lpm_rc_narrow(t->mem, &t->rc);    /* published: what lies outside the prefix is cached again */
    q->active = 0;
    q->publish.n = q->placed.n = 0;
}

void lpm_abort(lpm *t)
{
    lpm_pending *q = &t->pend;
    if (!q->active) return;
    while (q->placed.n) unplace(t, q->placed.v[--q->placed.n]);
    /* the model as it was: the route back with its old next hop, or gone again */
    if (q->had)
        set_route(t, q->prefix, q->len, 1, q->old_nh, NULL);
    else
        set_route(t, q->prefix, q->len, 0, 0, NULL);
    q->active = 0;
    q->publish.n = 0;
}

int lpm_add(lpm *t, uint32_t prefix, int len, uint32_t nh)
{
    int rc = lpm_prepare(t, prefix, len, 1, nh);
    if (!rc) lpm_commit(t);
    return rc;
}

int lpm_del(lpm *t, uint32_t prefix, int len)
{
    int rc = lpm_prepare(t, prefix, len, 0, 0);
    if (!rc) lpm_commit(t);
    return rc;
}

uint32_t lpm_walk(npkd_mem *m, const lpm_layout *l, uint32_t addr)
{
    uint32_t e = npkd_sram_rd(m, l->root + 4 * (addr >> 16));
    for (int shift = 8; shift >= 0; shift -= 8) {
        if (!(e & LPM_ENTRY_CHILD)) break;
        uint32_t b = (addr >> shift) & 0xFF;
        uint32_t node = l->nodes + LPM_UNIT * (e & LPM_OFFSET_MASK);
        int type = (int)((e >> LPM_TYPE_SHIFT) & 7);
        if (type == LPM_DENSE32) {
            e = npkd_sram_rd(m, node + 4 * b);
        } else if (type == LPM_DENSE16) {
            uint32_t w = npkd_sram_rd(m, node + 4 * (b >> 1));
            e = b & 1 ? w & 0xFFFF : w >> 16;
            break;
        } else {
            uint32_t h = npkd_sram_rd(m, node);
            int i = runs_index(h, b);
            e = (npkd_sram_rd(m, node + 4 * (1 + (uint32_t)i / 2)) >> (i & 1 ? 0 : 16)) & 0xFFFF;
            break;
        }
    }
    return e & LPM_ENTRY_CHILD ? 0 : e & LPM_NH_MASK;
}
