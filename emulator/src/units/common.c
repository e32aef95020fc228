/* Shared-unit timing (command queue, occupancy, latency) and completion. */
#include "../internal.h"

uint32_t npk_rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

void npk_wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

int npk_mem_basic(npk_chip *c, npk_event *e, uint32_t *out, npk_word_rd rd, npk_word_wr wr)
{
    uint32_t a = e->addr & ~3u;
    switch (e->cmd) {
    case 0:
        for (uint32_t i = 0; i < e->count; i++) out[i] = rd(c, a + 4 * i);
        return 1;
    case 1:
        for (uint32_t i = 0; i < e->count; i++) wr(c, a + 4 * i, e->data[i]);
        return 0;
    case 2: case 3: case 4: case 5: case 6: case 7: case 8: break;
    default: return -1;
    }
    uint32_t old = rd(c, a), v;
    switch (e->cmd) {
    case 2: v = e->data[0]; break;            /* swap */
    case 3: v = old | e->data[0]; break;      /* set */
    case 4: v = old & ~e->data[0]; break;     /* clr */
    case 5: v = old + e->data[0]; break;      /* add */
    case 6: v = old - e->data[0]; break;      /* sub */
    case 7: v = old + 1; break;               /* incr */
    default: v = old - 1; break;              /* decr */
    }
    wr(c, a, v);
    out[0] = old;
    e->count = 1;
    return e->cmd == 2 ? 1 : (int)(e->sub & 1);  /* swap always returns; others if test_and_ */
}

static const npk_unit_cfg *unit_cfg(npk_chip *c, int unit)
{
    switch (unit) {
    case NPK_UNIT_SRAM: return &c->cfg.sram;
    case NPK_UNIT_DRAM: return &c->cfg.dram;
    case NPK_UNIT_SCRATCH: return &c->cfg.scratch;
    case NPK_UNIT_HASH: return &c->cfg.hash;
    case NPK_UNIT_CAP: return &c->cfg.cap;
    case NPK_UNIT_MSF: return &c->cfg.msf;
    default: return &c->cfg.pci;
    }
}

int npk_unit_full(npk_chip *c, int unit, int chan)
{
    const npk_unit_cfg *u = unit_cfg(c, unit);
    return u->queue_depth && c->chan[unit][chan & 3].outstanding >= u->queue_depth;
}

/* A command issued now joins the channel queue after cmd_overhead, is served
 * in FIFO order (channel busy for its occupancy), and completes
 * read/write_latency cycles after its service ends. */
uint64_t npk_unit_schedule(npk_chip *c, int unit, int chan, uint32_t bytes, int is_write)
{
    const npk_unit_cfg *u = unit_cfg(c, unit);
    npk_chan *ch = &c->chan[unit][chan & 3];
    uint64_t arrive = c->now + u->cmd_overhead;
    uint64_t start = ch->busy_until > arrive ? ch->busy_until : arrive;
    uint32_t ub = u->unit_bytes ? u->unit_bytes : 4;
    uint64_t units = (bytes + ub - 1) / ub;
    if (units == 0) units = 1;
    uint64_t occ = units * u->cycles_per_unit;
    ch->busy_until = start + occ;
    ch->st.commands++;
    ch->st.bytes += bytes;
    ch->st.busy_cycles += occ;
    ch->st.queue_sum += ch->outstanding;
    if (ch->outstanding + 1 > ch->st.queue_max) ch->st.queue_max = ch->outstanding + 1;
    ch->outstanding++;
    return start + occ + (is_write ? u->write_latency : u->read_latency);
}

void npk_unit_complete(npk_chip *c, npk_event *e)
{
    uint32_t out[NPK_MAX_XFER_WORDS];
    int npush = 0;
    npk_me *m = &c->me[e->me];
    npk_chan *ch = &c->chan[e->unit][e->chan & 3];
    if (ch->outstanding) ch->outstanding--;
    for (int i = 0; i < NPK_MAX_XFER_WORDS; i++) out[i] = 0;
    c->cur_ev = e;
    c->cur_faulted = 0;
    switch (e->unit) {
    case NPK_UNIT_SRAM: npk_sram_complete(c, e, out); break;
    case NPK_UNIT_SCRATCH: npk_scratch_complete(c, e, out); break;
    case NPK_UNIT_DRAM: npk_dram_complete(c, e, out); break;
    case NPK_UNIT_HASH: npk_hash_complete(c, e, out); break;
    case NPK_UNIT_CAP: case NPK_UNIT_PCI: npk_cap_complete(c, e, out); break;
    case NPK_UNIT_MSF: npk_msf_complete(c, e, out); break;
    default: break;
    }
    c->cur_ev = NULL;
    /* the completion handlers leave the number of pushed words in e->count
     * when they push (xkind < 4); xkind = 0xFF means nothing to push */
    if (e->xkind != 0xFF) {
        npush = e->count > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : e->count;
        for (int i = 0; i < npush; i++) {
            uint32_t idx = (e->xidx + (uint32_t)i) & 127;
            uint32_t was = m->xfer[e->xkind][idx];
            m->xfer[e->xkind][idx] = out[i];
            if (c->nwp_reg)
                npk_reg_watch(c, m->idx, NPK_REG_SXFER_IN + e->xkind, idx, was, out[i], e->me, e->ctx, NPK_PC_UNIT);
        }
    }
    npk_hist(c, NPK_EV_MEM_DONE, e->me, e->ctx, e->unit, e->cmd, e->addr);
    if (e->sigmask)
        npk_ctx_signal(c, m, e->ctx, e->sigmask);
}
