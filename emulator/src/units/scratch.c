/* Scratchpad unit: reads/writes, atomics and the 16 hardware rings
 * (HRM p.232: head/tail/base/size registers per ring; a ring asserts a
 * status input that MEs test with br_inp_state; npkit asserts
 * SCR_RINGn_STATUS when count >= size - full_margin).
 * An address past scratch_bytes is a fault (NPK_FAULT_SCRATCH): the read
 * returns 0, the write is dropped.  get/put on a ring never configured
 * (size 0) is a fault too, and so is a put that finds the ring full (the
 * words that do not fit are dropped). */
#include "../internal.h"

static uint32_t rd(npk_chip *c, uint32_t a)
{
    a &= ~3u;  /* longword access (HRM p.227: 32-bit words, not byte-writable): bits 1:0 ignored */
    if ((uint64_t)a + 4 <= c->cfg.scratch_bytes) return npk_rd32(c->scratch + a);
    npk_fault_cmd(c, NPK_FAULT_SCRATCH, a);
    return 0;
}

static void wr(npk_chip *c, uint32_t a, uint32_t v)
{
    a &= ~3u;
    if ((uint64_t)a + 4 <= c->cfg.scratch_bytes) {
        npk_wr32(c->scratch + a, v);
        if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_SCRATCH, a, 4);
        if (a - c->guard_base < c->guard_bytes) npk_guard_write(c, a);   /* unsigned: one compare */
    } else {
        npk_fault_cmd(c, NPK_FAULT_SCRATCH, a);
    }
}

int npk_scr_ring_full(npk_chip *c, int ring)
{
    if (ring < 0 || ring >= 16) return 0;
    npk_ring *r = &c->rings[ring];
    if (!r->size) return 0;
    return (uint64_t)r->count + r->margin >= r->size;
}

int npk_scr_ring_get1(npk_chip *c, int ring, uint32_t *word)
{
    npk_ring *r = &c->rings[ring & 15];
    *word = 0;
    if (!r->size || !r->count) return 0;
    *word = rd(c, r->base + 4 * r->head);
    r->head = (r->head + 1) % r->size;
    r->count--;
    return 1;
}

int npk_scr_ring_put1(npk_chip *c, int ring, uint32_t word)
{
    npk_ring *r = &c->rings[ring & 15];
    if (!r->size || r->count >= r->size) return 0;
    wr(c, r->base + 4 * r->tail, word);
    r->tail = (r->tail + 1) % r->size;
    r->count++;
    return 1;
}

NPK_WORD_COMMANDS(scratch, rd, wr)
NPK_WORD_SEM(scratch, sub, NPK_ATOMIC_SUB, rd, wr)

/* get: ring number in address bits 5:2; too few entries -> zeros, nothing taken */
void npk_scratch_get(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint32_t ring = (e->addr >> 2) & 15;
    npk_ring *r = &c->rings[ring];
    if (!r->size) {
        npk_fault_cmd(c, NPK_FAULT_RING_UNCONFIGURED, ring);
    } else if (r->count >= e->count) {
        for (uint32_t i = 0; i < e->count; i++) {
            out[i] = rd(c, r->base + 4 * r->head);
            r->head = (r->head + 1) % r->size;
        }
        r->count -= e->count;
    }
}

/* put: a full ring drops the data */
void npk_scratch_put(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint32_t ring = (e->addr >> 2) & 15;
    npk_ring *r = &c->rings[ring];
    if (!r->size) npk_fault_cmd(c, NPK_FAULT_RING_UNCONFIGURED, ring);
    for (uint32_t i = 0; i < e->count && r->size; i++)
        if (!npk_scr_ring_put1(c, (int)ring, e->data[i])) {
            npk_fault_cmd(c, NPK_FAULT_RING_FULL, ring);
            break;
        }
}
