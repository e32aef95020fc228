/* util.c -- containers of util.h. */
#include "util.h"

#include <stdlib.h>
#include <string.h>

int u32vec_push(u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? 2 * a->cap : 8;
        uint32_t *p = realloc(a->v, (size_t)cap * sizeof *p);
        if (!p) return -1;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

void u32vec_free(u32vec *a)
{
    free(a->v);
    memset(a, 0, sizeof *a);
}

uint32_t npkd_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

uint32_t *u32map_get(const u32map *m, uint32_t key)
{
    if (!m->cap) return NULL;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = npkd_hash32(key) & mask;; i = (i + 1) & mask) {
        if (!m->used[i]) return NULL;
        if (m->key[i] == key) return &m->val[i];
    }
}

static int grow(u32map *m)
{
    u32map g = {0};
    g.cap = m->cap ? 2 * m->cap : 16;
    g.key = malloc((size_t)g.cap * sizeof *g.key);
    g.val = malloc((size_t)g.cap * sizeof *g.val);
    g.used = calloc(g.cap, 1);
    if (!g.key || !g.val || !g.used) {
        free(g.key);
        free(g.val);
        free(g.used);
        return -1;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->used[i]) u32map_put(&g, m->key[i], m->val[i]);
    u32map_free(m);
    *m = g;
    return 0;
}

int u32map_put(u32map *m, uint32_t key, uint32_t val)
{
    if (4 * (m->n + 1) > 3 * m->cap && grow(m)) return -1;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = npkd_hash32(key) & mask;; i = (i + 1) & mask) {
        if (!m->used[i]) {
            m->used[i] = 1;
            m->key[i] = key;
            m->val[i] = val;
            m->n++;
            return 0;
        }
        if (m->key[i] == key) {
            m->val[i] = val;
            return 0;
        }
    }
}

int u32map_del(u32map *m, uint32_t key)
{
    if (!m->cap) return 0;
    uint32_t mask = m->cap - 1, i = npkd_hash32(key) & mask;
    for (;; i = (i + 1) & mask) {
        if (!m->used[i]) return 0;
        if (m->key[i] == key) break;
    }
    /* backward-shift deletion keeps every probe sequence unbroken */
    uint32_t j = i;
    for (;;) {
        m->used[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!m->used[j]) {
                m->n--;
                return 1;
            }
            uint32_t home = npkd_hash32(m->key[j]) & mask;
            /* move j to i unless its home lies cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
        }
        m->used[i] = 1;
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
}

void u32map_free(u32map *m)
{
    free(m->key);
    free(m->val);
    free(m->used);
    memset(m, 0, sizeof *m);
}
