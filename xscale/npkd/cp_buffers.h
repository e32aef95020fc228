/* cp_buffers.h -- a packet buffer's descriptor, its bytes and its bit in the owned table
 * (cp.h), for the two files of npkd that hold buffers: cp.c and spp.c.  Plain static
 * functions, one copy in each, so that cp.c compiles to the code it had (the XScale's
 * instruction counts are pinned by tests/router/test_harness_reference.py). */
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

#endif
