/* Event scheduling: a pool of events and a binary min-heap ordered by
 * (cycle, issue sequence) so completions are processed deterministically. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static inline int ev_less(const npk_heap_ent *x, const npk_heap_ent *y)
{
    return x->cycle < y->cycle || (x->cycle == y->cycle && x->seq < y->seq);
}

npk_event *npk_ev_alloc(npk_chip *c)
{
    uint32_t i;
    if (c->nfree) {
        i = c->free_list[--c->nfree];
    } else {
        if (c->pool_used == c->pool_cap) {
            uint32_t cap = c->pool_cap ? c->pool_cap * 2 : 256;
            if (cap > (1u << 24)) return NULL;
            npk_event *p = realloc(c->pool, (size_t)cap * sizeof *p);
            if (!p) return NULL;
            c->pool = p;
            uint32_t *f = realloc(c->free_list, (size_t)cap * sizeof *f);
            if (!f) return NULL;
            c->free_list = f;
            npk_heap_ent *h = realloc(c->heap, (size_t)cap * sizeof *h);
            if (!h) return NULL;
            c->heap = h;
            c->pool_cap = cap;
        }
        i = c->pool_used++;
    }
    npk_event *e = &c->pool[i];
    memset(e, 0, offsetof(npk_event, data));
    return e;
}

void npk_ev_push(npk_chip *c, npk_event *e)
{
    uint32_t idx = (uint32_t)(e - c->pool);
    e->seq = c->seq++;
    npk_heap_ent ent = {e->cycle, e->seq, idx};
    uint32_t k = c->nheap++;
    while (k > 0) {
        uint32_t p = (k - 1) / 2;
        if (!ev_less(&ent, &c->heap[p])) break;
        c->heap[k] = c->heap[p];
        k = p;
    }
    c->heap[k] = ent;
}

npk_event *npk_ev_top(npk_chip *c)
{
    return c->nheap ? &c->pool[c->heap[0].idx] : NULL;
}

uint64_t npk_ev_next_cycle(npk_chip *c)
{
    return c->nheap ? c->heap[0].cycle : NPK_NEVER;
}

void npk_ev_pop_free(npk_chip *c)
{
    uint32_t top = c->heap[0].idx;
    npk_heap_ent last = c->heap[--c->nheap];
    uint32_t k = 0, n = c->nheap;
    for (;;) {
        uint32_t l = 2 * k + 1, r = l + 1, s = l;
        if (l >= n) break;
        if (r < n && ev_less(&c->heap[r], &c->heap[l])) s = r;
        if (!ev_less(&c->heap[s], &last)) break;
        c->heap[k] = c->heap[s];
        k = s;
    }
    if (n) c->heap[k] = last;
    c->free_list[c->nfree++] = top;
}
