/* cp_buffers.h -- a packet buffer's descriptor, its bytes and its bit in the owned table
 * (cp.h), and the exception log's records, for the two files of npkd that handle
 * exception records: cp.c and spp.c.  Plain static functions, one copy in each, so
 * that cp.c compiles to the code it had (the XScale's instruction counts are pinned by
 * tests/router/test_harness_reference.py). */
#ifndef NPKD_CP_BUFFERS_H
#define NPKD_CP_BUFFERS_H
#include "cp.h"

static uint32_t desc_addr(const cp *c, uint32_t h)
{
    return c->cfg->sys.desc_base + (h << c->cfg->sys.desc_shift);
}

static uint8_t *buffer(cp *c, uint32_t h, uint32_t len)
{
    return npkd_dram(c->mem, c->cfg->sys.buf_base + (h << c->cfg->sys.buf_shift), len);
}

/* buffer h in the owned table (cp.h): taken (on) or given away (off) */
static void owned(cp *c, uint32_t h, int on)
{
    const npkd_cfg *g = c->cfg;
    if (h >= g->owned_cap) return;
    uint32_t a = g->owned_base + NPKD_OWNED_HDR + 4 * (h >> 5), bit = 1u << (h & 31);
    uint32_t w = npkd_sram_rd(c->mem, a);
    npkd_sram_wr(c->mem, a, on ? w | bit : w & ~bit);
}

static void free_buffer(cp *c, uint32_t h)
{
    owned(c, h, 0);
    c->hw.queue_put(c->hw.ctx, c->cfg->sys.freelist_q, desc_addr(c, h));
}

/* the exception log's record of x (cp.h): what was done with it, and when */
static void log_exc(cp *c, const exc_info *x, int action)
{
    const npkd_cfg *g = c->cfg;
    if (!g->log_cap) return;
    uint32_t a = g->log_base + 16 + 16 * (c->log_count % g->log_cap);
    npkd_sram_wr(c->mem, a, x->digest);
    npkd_sram_wr(c->mem, a + 4, x->len << 16 | (x->in_port & 0xFF) << 8 | (x->reason & 0xFF));
    npkd_sram_wr(c->mem, a + 8, (uint32_t)action << 24 | (x->sent & 0xFF) << 16 | (x->handle & 0xFFFF));
    npkd_sram_wr(c->mem, a + 12, (uint32_t)(c->hw.now_ns(c->hw.ctx) / 1000));
    c->log_count++;
    npkd_sram_wr(c->mem, g->log_base + 4, g->log_cap);
    npkd_sram_wr(c->mem, g->log_base, c->log_count);     /* last: the host reads up to here */
    c->stats[ST_log_records]++;
}

#endif
