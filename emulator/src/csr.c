/* Local CSRs of an ME (mev2.yaml local_csrs): reads, writes, and the write-to-use
 * delay of local_csr_wr (writes wait in m->pend until they take effect). */
#include "exec.h"

static inline int csr_ctx(npk_me *m, int active_ctx, int indirect)
{
    return indirect ? (int)(m->csr_ctx_ptr & 7) : active_ctx;
}

uint32_t npk_lcsr_read(npk_chip *c, npk_me *m, int ctx, uint32_t addr)
{
    if (ctx < 0) ctx = 0;
    npk_ctx *x;
    switch (addr) {
    case NPK_LCSR_USTORE_ADDRESS: return m->ustore_addr;
    case NPK_LCSR_USTORE_DATA_LOWER: return (uint32_t)m->ustore[m->ustore_addr % c->cfg.ustore_words];
    case NPK_LCSR_USTORE_DATA_UPPER: return (uint32_t)(m->ustore[m->ustore_addr % c->cfg.ustore_words] >> 32);
    case NPK_LCSR_ALU_OUT: return m->alu_out;
    case NPK_LCSR_CTX_ARB_CNTL: return m->ctx_arb_cntl;
    case NPK_LCSR_CTX_ENABLES: return m->ctx_enables | (m->ctx_mode == 4 ? 0x80000000u : 0);
    case NPK_LCSR_CC_ENABLE: return m->cc_enable;
    case NPK_LCSR_CSR_CTX_POINTER: return m->csr_ctx_ptr;
    case NPK_LCSR_INDIRECT_CTX_STS: case NPK_LCSR_ACTIVE_CTX_STS: {
        int i = csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_STS);
        x = &m->ctx[i];
        if (addr == NPK_LCSR_ACTIVE_CTX_STS)
            return 0x80000000u | (npk_me_hw(c, m->idx) << 3) | (uint32_t)i;  /* [7:3] ME number */
        return (x->state == NPK_CTX_READY || x->state == NPK_CTX_RUNNING ? 0x80000000u : 0) | x->pc;
    }
    case NPK_LCSR_INDIRECT_CTX_SIG_EVENTS: case NPK_LCSR_ACTIVE_CTX_SIG_EVENTS:
        return m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_SIG_EVENTS)].sig;
    case NPK_LCSR_INDIRECT_CTX_WAKEUP_EVENTS: case NPK_LCSR_ACTIVE_CTX_WAKEUP_EVENTS:
        return m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_WAKEUP_EVENTS)].wait_mask;
    case NPK_LCSR_INDIRECT_CTX_FUTURE_COUNT: case NPK_LCSR_ACTIVE_CTX_FUTURE_COUNT:
        return m->future_count[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_FUTURE_COUNT)];
    case NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL: case NPK_LCSR_ACTIVE_FUTURE_COUNT_SIGNAL:
        return m->future_sig[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL)];
    case NPK_LCSR_INDIRECT_LM_ADDR_0: case NPK_LCSR_ACTIVE_LM_ADDR_0:
        return *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0), 0);
    case NPK_LCSR_INDIRECT_LM_ADDR_1: case NPK_LCSR_ACTIVE_LM_ADDR_1:
        return *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1), 1);
    case NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_0_BYTE_INDEX:
        return *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX), 0) | (m->byte_index & 3);
    case NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_1_BYTE_INDEX:
        return *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX), 1) | (m->byte_index & 3);
    case NPK_LCSR_BYTE_INDEX: return m->byte_index;
    case NPK_LCSR_T_INDEX: return m->t_index;
    case NPK_LCSR_T_INDEX_BYTE_INDEX: return m->t_index | (m->byte_index & 3);
    case NPK_LCSR_NN_PUT: return m->nn_put;
    case NPK_LCSR_NN_GET: return m->nn_get;
    case NPK_LCSR_TIMESTAMP_LOW: return (uint32_t)((c->now >> c->cfg.timestamp_shift) + m->ts_offset);
    case NPK_LCSR_TIMESTAMP_HIGH: return (uint32_t)(((c->now >> c->cfg.timestamp_shift) + m->ts_offset) >> 32);
    case NPK_LCSR_CRC_REMAINDER: return m->crc_rem;
    case NPK_LCSR_PROFILE_COUNT: return (uint32_t)(c->now & 0xFFFF);
    case NPK_LCSR_PSEUDO_RANDOM_NUMBER: return (uint32_t)npk_prng_next(&m->prng);
    default: return 0;
    }
}

static void signal_encoded(npk_chip *c, npk_me *target, uint32_t v, int from_ctx)
{
    /* [2:0] context, [6:3] signal number, [7] = signal the context after
     * the writer's own (SAME_ME_SIGNAL) */
    if (!target) return;
    int ctx = (int)(v & 7);
    if (v & 0x80) ctx = (from_ctx + 1) & 7;
    uint32_t s = (v >> 3) & 0xF;
    if (s && (uint32_t)ctx < c->cfg.ctx_per_me)
        npk_ctx_signal(c, target, ctx, (uint16_t)(1u << s));
}

static void schedule_future(npk_chip *c, npk_me *m, int ctx)
{
    if (!m->future_sig[ctx]) return;
    uint64_t ts = (c->now >> c->cfg.timestamp_shift) + m->ts_offset;
    uint32_t delta = m->future_count[ctx] - (uint32_t)ts;
    npk_event *e = npk_ev_alloc(c);
    if (!e) return;
    e->kind = EVK_SIGNAL;
    e->me = (uint8_t)m->idx;
    e->ctx = (uint8_t)ctx;
    e->sigmask = (uint16_t)(1u << (m->future_sig[ctx] & 0xF));
    e->cycle = c->now + ((uint64_t)(delta ? delta : 1) << c->cfg.timestamp_shift);
    npk_ev_push(c, e);
}

void npk_lcsr_write(npk_chip *c, npk_me *m, int ctx, uint32_t addr, uint32_t v)
{
    if (ctx < 0) ctx = 0;
    switch (addr) {
    case NPK_LCSR_USTORE_ADDRESS: m->ustore_addr = v & 0x1FFF; break;
    case NPK_LCSR_USTORE_DATA_LOWER: m->ustore_lo = v; break;
    case NPK_LCSR_USTORE_DATA_UPPER:
        npk_me_store_word(c, m, m->ustore_addr % c->cfg.ustore_words, (((uint64_t)(v & 0xFF)) << 32) | m->ustore_lo);
        m->ustore_addr = (m->ustore_addr + 1) & 0x1FFF;
        break;
    case NPK_LCSR_CTX_ARB_CNTL: m->ctx_arb_cntl = v; break;
    case NPK_LCSR_CTX_ENABLES: {
        uint32_t old = m->ctx_enables;
        m->ctx_enables = v & 0x7FFFFFFFu;  /* [31] in-use contexts follows the loaded ctx_mode */
        for (uint32_t i = 0; i < c->cfg.ctx_per_me; i++) {
            uint32_t bit = 1u << (8 + i);
            if ((v & bit) && !(old & bit) && m->ctx[i].state == NPK_CTX_INACTIVE && m->status == NPK_ME_RUNNING) {
                npk_ctx_set_state(c, m, (int)i, NPK_CTX_READY);
                if (m->cur < 0) npk_me_pick(c, m, c->now);
            } else if (!(v & bit) && (old & bit) && (int)i != m->cur) {
                npk_ctx_set_state(c, m, (int)i, NPK_CTX_INACTIVE);
            }
        }
        break;
    }
    case NPK_LCSR_CC_ENABLE: m->cc_enable = v; break;
    case NPK_LCSR_CSR_CTX_POINTER: m->csr_ctx_ptr = v & 7; break;
    case NPK_LCSR_INDIRECT_CTX_STS: m->ctx[m->csr_ctx_ptr & 7].pc = v % c->cfg.ustore_words; break;
    case NPK_LCSR_INDIRECT_CTX_SIG_EVENTS: case NPK_LCSR_ACTIVE_CTX_SIG_EVENTS: {
        int i = csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_SIG_EVENTS);
        m->ctx[i].sig = (uint16_t)(v & 0xFFFE);
        break;
    }
    case NPK_LCSR_INDIRECT_CTX_WAKEUP_EVENTS: case NPK_LCSR_ACTIVE_CTX_WAKEUP_EVENTS:
        m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_WAKEUP_EVENTS)].wait_mask = (uint16_t)(v & 0xFFFE);
        break;
    case NPK_LCSR_INDIRECT_CTX_FUTURE_COUNT: case NPK_LCSR_ACTIVE_CTX_FUTURE_COUNT: {
        int i = csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_FUTURE_COUNT);
        m->future_count[i] = v;
        schedule_future(c, m, i);
        break;
    }
    case NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL: case NPK_LCSR_ACTIVE_FUTURE_COUNT_SIGNAL:
        m->future_sig[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL)] = v & 0xF;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_0: case NPK_LCSR_ACTIVE_LM_ADDR_0:
        *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0), 0) = v & 0xFFC;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_1: case NPK_LCSR_ACTIVE_LM_ADDR_1:
        *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1), 1) = v & 0xFFC;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_0_BYTE_INDEX:
        *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX), 0) = v & 0xFFC;
        m->byte_index = v & 3;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_1_BYTE_INDEX:
        *npk_lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX), 1) = v & 0xFFC;
        m->byte_index = v & 3;
        break;
    case NPK_LCSR_BYTE_INDEX: m->byte_index = v & 3; break;
    case NPK_LCSR_T_INDEX: m->t_index = v & 0x1FC; break;
    case NPK_LCSR_T_INDEX_BYTE_INDEX: m->t_index = v & 0x1FC; m->byte_index = v & 3; break;
    case NPK_LCSR_NN_PUT: m->nn_put = v & 127; break;
    case NPK_LCSR_NN_GET: m->nn_get = v & 127; break;
    case NPK_LCSR_TIMESTAMP_LOW: case NPK_LCSR_TIMESTAMP_HIGH: {
        uint64_t cur = (c->now >> c->cfg.timestamp_shift) + m->ts_offset;
        uint64_t want = addr == NPK_LCSR_TIMESTAMP_LOW ? ((cur & ~0xFFFFFFFFull) | v)
                                                       : ((cur & 0xFFFFFFFFull) | ((uint64_t)v << 32));
        m->ts_offset = want - (c->now >> c->cfg.timestamp_shift);
        break;
    }
    case NPK_LCSR_NEXT_NEIGHBOR_SIGNAL: signal_encoded(c, npk_next_me(c, m), v, ctx); break;
    case NPK_LCSR_PREV_NEIGHBOR_SIGNAL: signal_encoded(c, m->idx > 0 ? &c->me[m->idx - 1] : NULL, v, ctx); break;
    case NPK_LCSR_SAME_ME_SIGNAL: signal_encoded(c, m, v, ctx); break;
    case NPK_LCSR_CRC_REMAINDER: m->crc_rem = v; break;
    case NPK_LCSR_PSEUDO_RANDOM_NUMBER: m->prng = v ? v : 1; break;
    default: break;
    }
}

/* How far a write to a local CSR reaches.  LCSR_PRIVATE: only this ME's own words read
 * the CSR (local-memory addresses, indexes, the condition-code enable, the CRC
 * remainder), so the write may take effect in the ME's own timeline, ahead of the other
 * MEs (npk_me_advance).  LCSR_CONTEXTS: it signals this ME's contexts (SAME_ME_SIGNAL),
 * which a signal from another ME could also do: ahead only within the cross-ME
 * lookahead.  LCSR_CHIP: everything else (other MEs' signals, timers, timestamps,
 * context enables, the control store, the next-neighbour ring) waits for the run loop. */
static int lcsr_reach(uint32_t addr)
{
    switch (addr) {
    case NPK_LCSR_CC_ENABLE: case NPK_LCSR_CSR_CTX_POINTER:
    case NPK_LCSR_INDIRECT_LM_ADDR_0: case NPK_LCSR_ACTIVE_LM_ADDR_0:
    case NPK_LCSR_INDIRECT_LM_ADDR_1: case NPK_LCSR_ACTIVE_LM_ADDR_1:
    case NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_0_BYTE_INDEX:
    case NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_1_BYTE_INDEX:
    case NPK_LCSR_BYTE_INDEX: case NPK_LCSR_T_INDEX: case NPK_LCSR_T_INDEX_BYTE_INDEX:
    case NPK_LCSR_CRC_REMAINDER:
        return LCSR_PRIVATE;
    case NPK_LCSR_SAME_ME_SIGNAL:
        return LCSR_CONTEXTS;
    default:
        return LCSR_CHIP;
    }
}

int npk_me_due_csrs_reach(const npk_me *m, uint64_t t)
{
    int reach = LCSR_PRIVATE;
    for (int i = 0; i < m->npend; i++) {
        if (m->pend[i].at > t) continue;
        int r = lcsr_reach(m->pend[i].addr);
        if (r > reach) reach = r;
    }
    return reach;
}

void npk_me_apply_csrs(npk_chip *c, npk_me *m)
{
    uint64_t nmin = NPK_NEVER;
    int k = 0;
    for (int i = 0; i < m->npend; i++) {
        npk_pending_csr p = m->pend[i];
        if (p.at <= c->now) {
            npk_lcsr_write(c, m, p.ctx, p.addr, p.value);
        } else {
            if (p.at < nmin) nmin = p.at;
            m->pend[k++] = p;
        }
    }
    m->npend = k;
    npk_me_set_pend(c, m, nmin);
}

