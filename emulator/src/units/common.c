/* Completion of unit commands (their timing at issue: internal.h, npk_unit_schedule). */
#include <string.h>
#include "../internal.h"


void npk_mem_read_words(npk_chip *c, npk_event *e, uint32_t *out, npk_word_rd rd)
{
    uint32_t a = e->addr & ~3u;
    for (uint32_t i = 0; i < e->count; i++) out[i] = rd(c, a + 4 * i);
}

void npk_mem_write_words(npk_chip *c, npk_event *e, npk_word_wr wr)
{
    uint32_t a = e->addr & ~3u;
    for (uint32_t i = 0; i < e->count; i++) wr(c, a + 4 * i, e->data[i]);
}

void npk_mem_atomic(npk_chip *c, npk_event *e, uint32_t *out, npk_word_rd rd, npk_word_wr wr, int op)
{
    uint32_t a = e->addr & ~3u;
    uint32_t old = rd(c, a), v;
    switch (op) {
    case NPK_ATOMIC_SWAP: v = e->data[0]; break;
    case NPK_ATOMIC_SET: v = old | e->data[0]; break;
    case NPK_ATOMIC_CLR: v = old & ~e->data[0]; break;
    case NPK_ATOMIC_ADD: v = old + e->data[0]; break;
    case NPK_ATOMIC_SUB: v = old - e->data[0]; break;
    case NPK_ATOMIC_INCR: v = old + 1; break;
    default: v = old - 1; break;   /* NPK_ATOMIC_DECR */
    }
    wr(c, a, v);
    out[0] = old;
    e->count = 1;   /* whatever an indirect_ref count said: one longword comes back */
}

/* the semantics function of every command (generated list, mev2.yaml units) */
typedef void (*npk_sem_fn)(npk_chip *c, npk_event *e, uint32_t *out);
#define SEM_ENTRY(OP, FN) [OP] = FN,
static const npk_sem_fn semantics[NPK_CMD_COUNT] = { NPK_CMD_SEMANTICS(SEM_ENTRY) };
#undef SEM_ENTRY

void npk_unit_complete(npk_chip *c, npk_event *e)
{
    uint32_t out[NPK_MAX_XFER_WORDS];
    npk_me *m = &c->me[e->me];
    npk_complete_begin(c, m, e);
    /* what the unit does not fill reads as 0 (a fault, an empty ring, a CSR that is not
     * modelled); semantics only ever shrink count (to one longword) */
    uint32_t nout = e->count > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : (e->count ? e->count : 1);
    if (nout <= 2) out[0] = out[1] = 0;   /* most commands: no call to memset */
    else memset(out, 0, nout * sizeof out[0]);
    c->cur_ev = e;
    c->cur_faulted = 0;
    if (e->op < NPK_CMD_COUNT && semantics[e->op]) semantics[e->op](c, e, out);
    c->cur_ev = NULL;
    /* a command that pushes (mev2.yaml dir) fills e->count read transfer registers */
    if (npk_cmd_info_of(e->op)->dir & NPK_DIR_PUSH) {
        int npush = e->count > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : e->count;
        for (int i = 0; i < npush; i++) {
            uint32_t idx = (e->xidx + (uint32_t)i) & 127;
            uint32_t *r = npk_xfer(m, e->xkind, idx), was = *r;
            *r = out[i];
            if (c->nwp_reg)
                npk_reg_watch(c, m->idx, NPK_REG_SXFER_IN + e->xkind, idx, was, out[i], e->me, e->ctx, NPK_PC_UNIT);
        }
    }
    npk_hist(c, NPK_EV_MEM_DONE, e->me, e->ctx, e->unit, e->cmd, e->addr);
    if (e->sigmask)
        npk_ctx_signal(c, m, e->ctx, e->sigmask);
}
