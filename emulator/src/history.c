/* Thread history: a ring buffer of events plus a running hash of every
 * event recorded (FNV-1a over the fields), for determinism checks. */
#include <string.h>
#include "internal.h"

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xFF;
        h *= 0x100000001b3ull;
    }
    return h;
}

void npk_hist_rec(npk_chip *c, int kind, int me, int ctx, int unit, uint32_t a0, uint32_t a1)
{
    npk_hist_event ev;
    ev.cycle = c->now;
    ev.me = (uint8_t)me;
    ev.ctx = (uint8_t)ctx;
    ev.kind = (uint8_t)kind;
    ev.unit = (uint8_t)unit;
    ev.a0 = a0;
    ev.a1 = a1;
    uint64_t h = c->hist_hash;
    h = fnv(h, ev.cycle);
    h = fnv(h, (uint64_t)ev.me | (uint64_t)ev.ctx << 8 | (uint64_t)ev.kind << 16 | (uint64_t)ev.unit << 24);
    h = fnv(h, (uint64_t)a0 | (uint64_t)a1 << 32);
    c->hist_hash = h;
    if (!c->hist_cap) return;
    uint32_t pos = (c->hist_head + c->hist_len) % c->hist_cap;
    if (c->hist_len == c->hist_cap) {
        c->hist_head = (c->hist_head + 1) % c->hist_cap;
        c->hist_dropped++;
    } else {
        c->hist_len++;
    }
    c->hist[pos] = ev;
}

int npk_history_enable(npk_chip *c, int level)
{
    if (!c || level < 0 || level > 2) return NPK_EINVAL;
    c->hist_level = level;
    return NPK_OK;
}

size_t npk_history_drain(npk_chip *c, npk_hist_event *buf, size_t max)
{
    size_t n = 0;
    if (!c || !buf) return 0;
    while (n < max && c->hist_len) {
        buf[n++] = c->hist[c->hist_head];
        c->hist_head = (c->hist_head + 1) % c->hist_cap;
        c->hist_len--;
    }
    return n;
}

uint64_t npk_history_dropped(npk_chip *c) { return c ? c->hist_dropped : 0; }
uint64_t npk_history_hash(npk_chip *c) { return c ? c->hist_hash : 0; }
