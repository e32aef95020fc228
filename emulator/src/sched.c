/* Event scheduling: completions are processed in (cycle, issue sequence) order, so the
 * same program gives the same history.
 *
 * A timing wheel holds the events of the next NPK_WHEEL cycles: one first-in first-out
 * ring per cycle (issue order is sequence order; the slot points at its last), a bitmap
 * of the cycles that have events, so that push and pop cost the same with ten or ten
 * thousand references in flight.  Events further out (a DRAM latency of 10^7 cycles, a
 * future-count signal) wait in a binary heap ordered by (cycle, sequence) and move onto
 * the wheel, in that order, when the wheel's window reaches them (npk_ev_advance) --
 * before any event of the same cycle can be pushed onto the wheel directly, which keeps
 * the sequence order.
 *
 * Events live in chunks that never move, so that a completion is carried out in place
 * (its unit may call out -- a plug-in MSF device -- and new events may be allocated
 * meanwhile), and the wheel, the heap and the free list hold pointers to them. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* an event and its data (a multiple of 64: aligned_alloc wants the size a multiple of the alignment) */
#define EV_BYTES (sizeof(npk_event) + NPK_MAX_XFER_WORDS * sizeof(uint32_t))
_Static_assert(sizeof(npk_event) == 64, "an event fills one cache line");

static inline int ev_less(const npk_heap_ent *x, const npk_heap_ent *y)
{
    return x->cycle < y->cycle || (x->cycle == y->cycle && x->seq < y->seq);
}

/* room for `cap` events: the index arrays, then chunks of NPK_EV_CHUNK (those made stay
 * usable when a later one cannot be) */
static int grow(npk_chip *c)
{
    uint32_t cap = c->pool_cap ? c->pool_cap * 2 : NPK_EV_CHUNK;
    if (cap > NPK_EV_MAX) return 0;
    npk_event **chunks = realloc(c->chunk, (size_t)(cap / NPK_EV_CHUNK) * sizeof *chunks);
    if (!chunks) return 0;
    c->chunk = chunks;
    npk_event **f = realloc(c->free_list, (size_t)cap * sizeof *f);
    if (!f) return 0;
    c->free_list = f;
    npk_heap_ent *h = realloc(c->heap, (size_t)cap * sizeof *h);
    if (!h) return 0;
    c->heap = h;
    for (uint32_t k = c->pool_cap / NPK_EV_CHUNK; k < cap / NPK_EV_CHUNK; k++) {
        /* the events, then their data: one block, cache-line aligned */
        chunks[k] = aligned_alloc(64, NPK_EV_CHUNK * EV_BYTES);
        if (!chunks[k]) break;
        uint32_t *data = (uint32_t *)(chunks[k] + NPK_EV_CHUNK);
        for (uint32_t j = 0; j < NPK_EV_CHUNK; j++) chunks[k][j].data = data + j * NPK_MAX_XFER_WORDS;
        c->pool_cap = (k + 1) * NPK_EV_CHUNK;
    }
    return c->pool_cap == cap;
}

/* npk_ev_alloc when no freed event is there to reuse: one never used, growing the pool */
npk_event *npk_ev_alloc_new(npk_chip *c)
{
    if (c->pool_used == c->pool_cap) grow(c);
    if (c->pool_used == c->pool_cap) return NULL;
    return npk_ev_init(npk_ev_at(c, c->pool_used++));
}

void npk_ev_free_all(npk_chip *c)
{
    for (uint32_t k = 0; k < c->pool_cap / NPK_EV_CHUNK; k++) free(c->chunk[k]);
    free(c->chunk);
    free(c->free_list);
    free(c->heap);
}

static void heap_push(npk_chip *c, npk_heap_ent ent)
{
    uint32_t k = c->nheap++;
    while (k > 0) {
        uint32_t p = (k - 1) / 2;
        if (!ev_less(&ent, &c->heap[p])) break;
        c->heap[k] = c->heap[p];
        k = p;
    }
    c->heap[k] = ent;
}

static npk_heap_ent heap_pop(npk_chip *c)
{
    npk_heap_ent top = c->heap[0];
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
    return top;
}

/* the earliest cycle with events on the wheel, from slot `from` on (the wheel is not empty) */
static uint64_t wheel_first(const npk_chip *c, uint64_t from)
{
    uint32_t s = NPK_EV_SLOT(from);
    for (uint32_t k = 0; k <= NPK_WHEEL / 64; k++) {
        uint32_t word = ((s >> 6) + k) % (NPK_WHEEL / 64);
        uint64_t bits = c->wheel_bits[word];
        if (k == 0) bits &= ~0ull << (s & 63);
        if (bits) {
            uint32_t slot = word * 64 + (uint32_t)__builtin_ctzll(bits);
            return from + ((slot - s) & (NPK_WHEEL - 1));
        }
    }
    return NPK_NEVER;  /* not reached while wheel_count > 0 */
}

static void update_first(npk_chip *c, uint64_t from)
{
    if (c->wheel_count) c->ev_first = wheel_first(c, from);
    else c->ev_first = c->nheap ? c->heap[0].cycle : NPK_NEVER;
}

void npk_ev_push_heap(npk_chip *c, npk_event *e)
{
    heap_push(c, (npk_heap_ent){e->cycle, e->seq, e});
    if (e->cycle < c->ev_first) c->ev_first = e->cycle;
}

void npk_ev_from_heap(npk_chip *c, uint64_t now)
{
    while (c->nheap && c->heap[0].cycle - now < NPK_WHEEL) {
        npk_heap_ent ent = heap_pop(c);
        npk_wheel_append(c, ent.ev, ent.cycle);
    }
}

void npk_ev_find_first(npk_chip *c)
{
    update_first(c, c->ev_first);
}

npk_event *npk_ev_pop_heap(npk_chip *c)
{
    if (c->ev_first == NPK_NEVER) return NULL;
    npk_event *e = heap_pop(c).ev;
    update_first(c, c->ev_first);
    return e;
}

void npk_ev_reset(npk_chip *c)
{
    c->nheap = 0;
    c->nfree = 0;
    c->pool_used = 0;
    c->wheel_base = 0;
    c->wheel_count = 0;
    c->ev_first = NPK_NEVER;
    memset(c->wheel_last, 0, sizeof c->wheel_last);
    memset(c->wheel_bits, 0, sizeof c->wheel_bits);
}
