/* Microengine: fetch, decode, execute; context arbitration and signals. */
#include <string.h>
#include <stdio.h>
#include "internal.h"

/* Operand namespace: restricted (8-bit) fields are mapped onto the
 * unrestricted (10-bit) encoding so one reader/writer handles both;
 * OP_ILLEGAL marks an undefined encoding. */
#define OP_ILLEGAL 0x400u
#define OP_NONE 0x300u

typedef struct exec_ctx {
    npk_chip *c;
    npk_me *m;
    int ctx;
    npk_ctx *x;
    int illegal;
    int lm_delta[2];
    int t_delta;
    int nnget_delta;
    uint32_t pc;           /* address of the executing instruction (watchpoint reports) */
    uint32_t base;
    int stall;             /* unit queue full: the instruction did not issue */
} exec_ctx;

static inline uint32_t relbase(const npk_me *m, int ctx)
{
    return m->ctx_mode == 8 ? (uint32_t)ctx * 16u : (uint32_t)(ctx >> 1) * 32u;
}

/* a register watchpoint sees the write of this instruction: who wrote it, and the old value */
static inline void watch_wr(exec_ctx *e, int me, int kind, uint32_t idx, uint32_t old, uint32_t v)
{
    npk_reg_watch(e->c, me, kind, idx, old, v, e->m->idx, e->ctx, e->pc);
}

/* LM_ADDR_n of a context, or the ME-wide copy when CTX_ENABLES[LM_ADDR_n_GLOBAL]
 * (bits 16/17) is set (HRM p.173) */
static inline uint32_t *lm_reg(npk_me *m, int ctx, int which)
{
    return (m->ctx_enables & (1u << (16 + which))) ? &m->lm_global[which] : &m->ctx[ctx].lm_addr[which];
}

static uint32_t restricted_to_u(uint32_t num, uint32_t msb, int is_dest)
{
    if (is_dest && num == 0x20)
        return OP_NONE;
    if (num & 0x20)
        return 0x300u | (((msb << 7) | ((num & 0xC0) >> 1) | (num & 0x1F)) & 0xFF);
    switch (num & 0xC0) {
    case 0x00: return num & 0x1F;
    case 0x80: return 0x180u | (num & 0x1F);
    case 0xC0: return 0x1C0u | (num & 0x1F);
    default: break;
    }
    uint32_t code = num & 0x1F;
    switch (code) {
    case 0: return 0x140;
    case 1: return is_dest ? OP_ILLEGAL : 0x241;
    case 2: return 0x142;
    case 3: return 0x243;
    case 4: return 0x144;
    case 8: return 0x100;
    case 10: return 0x102;
    case 12: return 0x104;
    default: break;
    }
    if (code >= 16 && code < 24)
        return 0x200u | (code - 16);
    if (code >= 24)
        return 0x220u | (code - 24);
    return OP_ILLEGAL;
}

/* PC of the instruction being executed (me_exec advanced the context's PC
 * before executing it; nothing changes it before its memory operands) */
static inline uint32_t cur_pc(const exec_ctx *e)
{
    return e->x->pc - 1;
}

/* LM_ADDR reaches 1K longwords (the index wraps at 1024); only the first
 * lm_words (640 on the IXP2800) hold RAM, the rest are addressable but not
 * populated (HRM p.40): reading them gives 0, writing does nothing, and both
 * are counted as NPK_FAULT_LM. */
static inline uint32_t lm_index(exec_ctx *e, int which, uint32_t off)
{
    return ((*lm_reg(e->m, e->ctx, which) >> 2) | off) & 0x3FF;
}

__attribute__((cold)) static void lm_fault(exec_ctx *e, uint32_t idx)
{
    npk_fault_at(e->c, NPK_FAULT_LM, e->m->idx, e->ctx, cur_pc(e), idx);
}

static inline uint32_t lm_read(exec_ctx *e, uint32_t idx)
{
    if (idx < e->c->cfg.lm_words) return e->m->lm[idx];
    lm_fault(e, idx);
    return 0;
}

static inline void lm_write(exec_ctx *e, uint32_t idx, uint32_t v)
{
    uint32_t old = lm_read(e, idx);
    if (idx < e->c->cfg.lm_words)
        e->m->lm[idx] = v;
    else
        lm_fault(e, idx);
    if (e->c->nwp_reg)
        watch_wr(e, e->m->idx, NPK_REG_LM, idx, old, v);
}

static uint32_t rd_op_slow(exec_ctx *e, uint32_t num, int bank)
{
    npk_me *m = e->m;
    if ((num & 0x380) == 0x080)
        return m->gpr[bank][num & 0x7F];
    switch (num) {
    case 0x100: case 0x102: case 0x104: {
        uint32_t v = m->xfer[XK_DIN][(m->t_index >> 2) & 127];
        if (num != 0x100) e->t_delta = num == 0x102 ? 4 : -4;
        return v;
    }
    case 0x140: case 0x142: case 0x144: {
        uint32_t v = m->xfer[XK_SIN][(m->t_index >> 2) & 127];
        if (num != 0x140) e->t_delta = num == 0x142 ? 4 : -4;
        return v;
    }
    case 0x210: case 0x211: case 0x230: case 0x231: {
        int w = num >= 0x230;
        uint32_t v = lm_read(e, lm_index(e, w, 0));
        e->lm_delta[w] = (num & 1) ? -4 : 4;
        return v;
    }
    case 0x241: case 0x243: {
        uint32_t v = m->nn[m->nn_get & 127];
        if (num == 0x243) e->nnget_delta = 1;
        return v;
    }
    default: break;
    }
    if ((num & 0x3E0) == 0x180)
        return m->xfer[XK_SIN][(relbase(m, e->ctx) + (num & 0x1F)) & 127];
    if ((num & 0x3E0) == 0x1C0)
        return m->xfer[XK_DIN][(relbase(m, e->ctx) + (num & 0x1F)) & 127];
    if ((num & 0x3F0) == 0x200)
        return lm_read(e, lm_index(e, 0, num & 0xF));
    if ((num & 0x3F0) == 0x220)
        return lm_read(e, lm_index(e, 1, num & 0xF));
    if ((num & 0x3E0) == 0x280)
        return m->nn[(relbase(m, e->ctx) + (num & 0x1F)) & 127];
    e->illegal = 1;
    return 0;
}

static inline npk_me *next_me(npk_chip *c, npk_me *m)
{
    return (uint32_t)(m->idx + 1) < c->cfg.num_me ? &c->me[m->idx + 1] : NULL;
}

/* where n$ / *n$index++ destinations go: the next ME, or this ME when
 * CTX_ENABLES[NN_MODE] (bit 20) is set (HRM p.172) */
#define CE_NN_MODE (1u << 20)
static inline npk_me *nn_target(npk_chip *c, npk_me *m)
{
    return (m->ctx_enables & CE_NN_MODE) ? m : next_me(c, m);
}

static void wr_xfer(exec_ctx *e, int kind, uint32_t idx, uint32_t v)
{
    uint32_t old = e->m->xfer[kind][idx & 127];
    e->m->xfer[kind][idx & 127] = v;
    if (e->c->nwp_reg)
        watch_wr(e, e->m->idx, NPK_REG_SXFER_IN + kind, idx & 127, old, v);
}

static void wr_op_slow(exec_ctx *e, uint32_t num, int bank, uint32_t v)
{
    npk_me *m = e->m;
    npk_chip *c = e->c;
    if (num >= 0x300 && num < 0x400)
        return;  /* "--" */
    if ((num & 0x380) == 0x080) {
        uint32_t old = m->gpr[bank][num & 0x7F];
        m->gpr[bank][num & 0x7F] = v;
        if (c->nwp_reg) watch_wr(e, m->idx, bank, num & 0x7F, old, v);
        return;
    }
    switch (num) {
    case 0x100: case 0x102: case 0x104:
        wr_xfer(e, XK_DOUT, m->t_index >> 2, v);
        if (num != 0x100) e->t_delta = num == 0x102 ? 4 : -4;
        return;
    case 0x140: case 0x142: case 0x144:
        wr_xfer(e, XK_SOUT, m->t_index >> 2, v);
        if (num != 0x140) e->t_delta = num == 0x142 ? 4 : -4;
        return;
    case 0x210: case 0x211: case 0x230: case 0x231: {
        int w = num >= 0x230;
        lm_write(e, lm_index(e, w, 0), v);
        e->lm_delta[w] = (num & 1) ? -4 : 4;
        return;
    }
    case 0x243: {  /* NN ring put into the next ME (or this one in NN_MODE) */
        npk_me *n = nn_target(c, m);
        if (n) {
            uint32_t slot = n->nn_put & 127, old = n->nn[slot];
            n->nn[slot] = v;
            n->nn_put = (n->nn_put + 1) & 127;
            if (c->nwp_reg) watch_wr(e, n->idx, NPK_REG_NN, slot, old, v);
        }
        return;
    }
    default: break;
    }
    if ((num & 0x3E0) == 0x180) { wr_xfer(e, XK_SOUT, relbase(m, e->ctx) + (num & 0x1F), v); return; }
    if ((num & 0x3E0) == 0x1C0) { wr_xfer(e, XK_DOUT, relbase(m, e->ctx) + (num & 0x1F), v); return; }
    if ((num & 0x3F0) == 0x200) { lm_write(e, lm_index(e, 0, num & 0xF), v); return; }
    if ((num & 0x3F0) == 0x220) { lm_write(e, lm_index(e, 1, num & 0xF), v); return; }
    if ((num & 0x3E0) == 0x280) {
        npk_me *n = nn_target(c, m);
        if (n) {
            uint32_t i = (relbase(m, e->ctx) + (num & 0x1F)) & 127;
            uint32_t old = n->nn[i];
            n->nn[i] = v;
            if (c->nwp_reg) watch_wr(e, n->idx, NPK_REG_NN, i, old, v);
        }
        return;
    }
    e->illegal = 1;
}

static inline __attribute__((always_inline)) uint32_t rd_op(exec_ctx *e, uint32_t num, int bank)
{
    if (num < 0x20)
        return e->m->gpr[bank][(e->base + num) & 127];
    if ((num & 0x700) == 0x300)
        return num & 0xFF;
    return rd_op_slow(e, num, bank);
}

static inline __attribute__((always_inline)) void wr_op(exec_ctx *e, uint32_t num, int bank, uint32_t v)
{
    if (num < 0x20 && !e->c->nwp_reg) {
        e->m->gpr[bank][(e->base + num) & 127] = v;
        return;
    }
    if (num < 0x20) {
        uint32_t i = (e->base + num) & 127, old = e->m->gpr[bank][i];
        e->m->gpr[bank][i] = v;
        watch_wr(e, e->m->idx, bank, i, old, v);
        return;
    }
    wr_op_slow(e, num, bank, v);
}

/* ---- condition codes ------------------------------------------------------ */

static inline uint8_t cc_logic(uint32_t r)
{
    return (uint8_t)((r == 0 ? F_Z : 0) | ((r >> 31) ? F_N : 0));
}

static inline uint8_t cc_add(uint32_t a, uint32_t b, uint32_t cin, uint32_t *r)
{
    uint64_t s = (uint64_t)a + b + cin;
    uint32_t v = (uint32_t)s;
    *r = v;
    uint8_t f = cc_logic(v);
    if (s >> 32) f |= F_C;
    if (((a ^ v) & (b ^ v)) >> 31) f |= F_V;
    return f;
}

/* subtraction a - b - borrow; C = no borrow (ARM convention: bcs/bhs = a >= b) */
static inline uint8_t cc_sub(uint32_t a, uint32_t b, uint32_t borrow, uint32_t *r)
{
    uint64_t d = (uint64_t)a - b - borrow;
    uint32_t v = (uint32_t)d;
    *r = v;
    uint8_t f = cc_logic(v);
    if (!(d >> 63)) f |= F_C;
    if (((a ^ b) & (a ^ v)) >> 31) f |= F_V;
    return f;
}

/* ---- shifts --------------------------------------------------------------- */

static inline uint32_t rotr(uint32_t v, uint32_t n) { n &= 31; return n ? (v >> n) | (v << (32 - n)) : v; }

/* shift of the B operand as encoded in alu_shf / ld_field (see mev2.yaml) */
static uint32_t shift_b(npk_me *m, uint32_t b, uint32_t type, uint32_t amt)
{
    uint32_t ind = m->alu_out & 31;
    switch (type) {
    case 0: return rotr(b, amt);                         /* rotate right by amt (= <<rot 32-amt) */
    case 1: { uint32_t n = amt ? amt : ind; return b >> n; }
    case 2: { uint32_t n = amt ? (32 - amt) & 31 : ind; return b << n; }
    default: return b;
    }
}

/* ---- context state -------------------------------------------------------- */

void npk_ctx_set_state(npk_chip *c, npk_me *m, int ctx, int state)
{
    npk_ctx *x = &m->ctx[ctx];
    if (x->state == state)
        return;
    uint64_t d = c->now - x->state_since;
    if (x->state == NPK_CTX_SLEEP) m->st.ctx_sleep_cycles[ctx] += d;
    else if (x->state == NPK_CTX_READY) m->st.ctx_ready_cycles[ctx] += d;
    x->state = (uint8_t)state;
    x->state_since = c->now;
    npk_hist(c, NPK_EV_STATE, m->idx, ctx, 0, (uint32_t)state, x->pc);
}

static inline int wait_done(const npk_ctx *x)
{
    if (x->wait_mask == 0) return 1;
    return x->wait_any ? (x->sig & x->wait_mask) != 0 : (x->sig & x->wait_mask) == x->wait_mask;
}

static void wake(npk_chip *c, npk_me *m, int ctx, uint64_t t)
{
    npk_ctx *x = &m->ctx[ctx];
    x->sig &= (uint16_t)~x->wait_mask;
    x->wait_mask = 0;
    npk_ctx_set_state(c, m, ctx, NPK_CTX_READY);
    if (m->cur < 0 && m->status == NPK_ME_RUNNING)
        npk_me_pick(c, m, t);
}

void npk_ctx_signal(npk_chip *c, npk_me *m, int ctx, uint16_t mask)
{
    npk_ctx *x = &m->ctx[ctx];
    x->sig |= mask;
    if (c->hist_level)
        for (int s = 1; s < 16; s++)
            if (mask & (1u << s))
                npk_hist_rec(c, NPK_EV_SIGNAL, m->idx, ctx, 0, (uint32_t)s, 0);
    if (x->state == NPK_CTX_SLEEP && wait_done(x))
        wake(c, m, ctx, c->now);
}

/* choose the next ready context round-robin after the current one; the ME
 * resumes at t (+ swap cost when switching) */
void npk_me_pick(npk_chip *c, npk_me *m, uint64_t t)
{
    int start = m->cur < 0 ? (int)(m->ctx_arb_cntl & 7) : m->cur;
    for (int k = 1; k <= NPK_NCTX; k++) {
        int i = (start + k) & (NPK_NCTX - 1);
        if (m->ctx_mode == 4 && (i & 1)) continue;
        if (m->ctx[i].state == NPK_CTX_READY) {
            int was_idle = m->cur < 0;
            if (was_idle && m->idle_since != NPK_NEVER) {
                m->st.idle_cycles += t - m->idle_since;
                m->idle_since = NPK_NEVER;
            }
            m->ctx_arb_cntl = (m->ctx_arb_cntl & ~0x77u) | (uint32_t)i | ((uint32_t)(m->cur < 0 ? i : m->cur) << 4);
            m->cur = i;
            npk_ctx_set_state(c, m, i, NPK_CTX_RUNNING);
            m->next = t + c->cfg.ctx_swap_cost;
            m->st.stalled_cycles += c->cfg.ctx_swap_cost;
            m->st.ctx_swaps++;
            return;
        }
    }
    m->cur = -1;
    m->next = NPK_NEVER;
    if (m->idle_since == NPK_NEVER)
        m->idle_since = t;
}

void npk_me_stop(npk_chip *c, npk_me *m, int ctx, int why, uint32_t pc, uint64_t w, const char *reason)
{
    m->status = why;
    m->stop.state = why;
    m->stop.ctx = ctx;
    m->stop.pc = pc;
    m->stop.word = w;
    m->stop.cycle = c->now;
    snprintf(m->stop.reason, sizeof m->stop.reason, "%s", reason);
    npk_hist(c, NPK_EV_HALT, m->idx, ctx < 0 ? 0 : ctx, 0, (uint32_t)why, pc);
    for (uint32_t i = 0; i < c->cfg.ctx_per_me; i++) {
        if (m->ctx[i].state != NPK_CTX_INACTIVE)
            npk_ctx_set_state(c, m, (int)i, NPK_CTX_INACTIVE);
    }
    m->ctx_enables &= ~0xFF00u;
    if (m->cur >= 0 && m->idle_since == NPK_NEVER)
        m->idle_since = c->now;
    m->cur = -1;
    m->next = NPK_NEVER;
}

/* put the running context to sleep (or yield) and pick the next one */
static void ctx_swap_out(npk_chip *c, npk_me *m, int ctx, uint64_t t)
{
    npk_ctx *x = &m->ctx[ctx];
    if (x->swap_target != UINT32_MAX) {
        x->pc = x->swap_target;
        x->swap_target = UINT32_MAX;
    }
    if (x->swap_voluntary) {
        x->swap_voluntary = 0;
        npk_ctx_set_state(c, m, ctx, NPK_CTX_READY);
    } else if (wait_done(x)) {
        x->sig &= (uint16_t)~x->wait_mask;
        x->wait_mask = 0;
        npk_ctx_set_state(c, m, ctx, NPK_CTX_READY);
    } else {
        npk_ctx_set_state(c, m, ctx, NPK_CTX_SLEEP);
    }
    npk_me_pick(c, m, t);
}

/* ---- local CSRs ----------------------------------------------------------- */

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
        return m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_CTX_FUTURE_COUNT)].future_count;
    case NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL: case NPK_LCSR_ACTIVE_FUTURE_COUNT_SIGNAL:
        return m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL)].future_sig;
    case NPK_LCSR_INDIRECT_LM_ADDR_0: case NPK_LCSR_ACTIVE_LM_ADDR_0:
        return *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0), 0);
    case NPK_LCSR_INDIRECT_LM_ADDR_1: case NPK_LCSR_ACTIVE_LM_ADDR_1:
        return *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1), 1);
    case NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_0_BYTE_INDEX:
        return *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX), 0) | (m->byte_index & 3);
    case NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_1_BYTE_INDEX:
        return *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX), 1) | (m->byte_index & 3);
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
    npk_ctx *x = &m->ctx[ctx];
    if (!x->future_sig) return;
    uint64_t ts = (c->now >> c->cfg.timestamp_shift) + m->ts_offset;
    uint32_t delta = x->future_count - (uint32_t)ts;
    npk_event *e = npk_ev_alloc(c);
    if (!e) return;
    e->kind = EVK_SIGNAL;
    e->me = (uint8_t)m->idx;
    e->ctx = (uint8_t)ctx;
    e->sigmask = (uint16_t)(1u << (x->future_sig & 0xF));
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
        m->ustore[m->ustore_addr % c->cfg.ustore_words] = (((uint64_t)(v & 0xFF)) << 32) | m->ustore_lo;
        npk_me_predecode(c, m, m->ustore_addr % c->cfg.ustore_words);
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
        m->ctx[i].future_count = v;
        schedule_future(c, m, i);
        break;
    }
    case NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL: case NPK_LCSR_ACTIVE_FUTURE_COUNT_SIGNAL:
        m->ctx[csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_FUTURE_COUNT_SIGNAL)].future_sig = v & 0xF;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_0: case NPK_LCSR_ACTIVE_LM_ADDR_0:
        *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0), 0) = v & 0xFFC;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_1: case NPK_LCSR_ACTIVE_LM_ADDR_1:
        *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1), 1) = v & 0xFFC;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_0_BYTE_INDEX:
        *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_0_BYTE_INDEX), 0) = v & 0xFFC;
        m->byte_index = v & 3;
        break;
    case NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX: case NPK_LCSR_ACTIVE_LM_ADDR_1_BYTE_INDEX:
        *lm_reg(m, csr_ctx(m, ctx, addr == NPK_LCSR_INDIRECT_LM_ADDR_1_BYTE_INDEX), 1) = v & 0xFFC;
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
    case NPK_LCSR_NEXT_NEIGHBOR_SIGNAL: signal_encoded(c, next_me(c, m), v, ctx); break;
    case NPK_LCSR_PREV_NEIGHBOR_SIGNAL: signal_encoded(c, m->idx > 0 ? &c->me[m->idx - 1] : NULL, v, ctx); break;
    case NPK_LCSR_SAME_ME_SIGNAL: signal_encoded(c, m, v, ctx); break;
    case NPK_LCSR_CRC_REMAINDER: m->crc_rem = v; break;
    case NPK_LCSR_PSEUDO_RANDOM_NUMBER: m->prng = v ? v : 1; break;
    default: break;
    }
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
    m->pend_min = nmin;
}

/* ---- memory / unit commands ------------------------------------------------ */

static int unit_channel(npk_chip *c, int unit, uint32_t addr)
{
    uint32_t n = c->cfg.sram.channels;
    switch (unit) {
    case NPK_UNIT_SRAM: return (int)((addr >> 30) % (n ? n : 1));
    case NPK_UNIT_DRAM: {
        uint32_t ch = c->cfg.dram.channels ? c->cfg.dram.channels : 1;
        uint32_t il = c->cfg.dram_interleave ? c->cfg.dram_interleave : 128;
        return (int)((addr / il) % ch);
    }
    default: return 0;
    }
}

static void xfer_target(npk_me *m, int ctx, uint32_t field, int default_dram, int *kind, uint32_t *idx)
{
    int dram = default_dram;
    if (m->ctx_mode == 8 && (field & 0x10)) {
        dram = !dram;
        field &= 0xF;
    }
    *kind = dram ? XK_DIN : XK_SIN;
    *idx = (relbase(m, ctx) + field) & 127;
}

/* does this command move data out of the ME (pull) and/or into it (push)? */
static void cmd_dirs(int unit, uint32_t cmd, uint32_t sub, int *pull, int *push)
{
    *pull = 0;
    *push = 0;
    switch (unit) {
    case NPK_UNIT_SRAM:
        switch (cmd) {
        case 0: *push = 1; break;
        case 1: *pull = 1; break;
        case 2: *pull = 1; *push = 1; break;
        case 3: case 4: case 5: case 6: *pull = 1; *push = (sub & 1); break;
        case 7: case 8: *push = (sub & 1); break;
        case 9: if (sub & 1) *push = 1; else *pull = 1; break;
        case 10: *pull = !(sub & 1); break;
        case 11: *push = 1; break;
        case 13: if (sub & 1) *push = 1; else *pull = 1; break;
        case 15: *push = 1; break;
        default: break;
        }
        break;
    case NPK_UNIT_SCRATCH:
        switch (cmd) {
        case 0: *push = 1; break;
        case 1: *pull = 1; break;
        case 2: *pull = 1; *push = 1; break;
        case 3: case 4: case 5: case 6: *pull = 1; *push = (sub & 1); break;
        case 7: case 8: *push = (sub & 1); break;
        case 9: *push = 1; break;
        case 10: *pull = 1; break;
        default: break;
        }
        break;
    case NPK_UNIT_DRAM:
        if (cmd == 0x8) *push = 1;
        else if (cmd == 0x9) *pull = 1;
        break;
    case NPK_UNIT_MSF:
        if (cmd == 0xC) *push = 1;
        else if (cmd == 0xD && (sub & 1) == 0) *pull = 1;
        break;
    case NPK_UNIT_PCI: case NPK_UNIT_CAP:
        if (cmd == 0x4 || cmd == 0xE || cmd == 0) *push = 1; else *pull = 1;
        break;
    case NPK_UNIT_HASH: *pull = 1; *push = 1; break;
    default: break;
    }
}

static int legal_mem_cmd(int unit, uint32_t cmd, uint32_t sub)
{
    switch (unit) {
    case NPK_UNIT_SRAM:
        if (cmd == 6 || cmd > 15) return 0;
        if (cmd <= 1 || cmd == 9 || cmd == 10 || cmd == 13 || cmd == 14 || cmd == 15 || (cmd >= 3 && cmd <= 8) || cmd == 12)
            return cmd == 15 ? sub != 3 : (cmd == 14 ? (sub == 0 || sub == 2) : 1);
        if (cmd == 2 || cmd == 11) return 1;
        return 0;
    case NPK_UNIT_SCRATCH: return cmd <= 10;
    case NPK_UNIT_DRAM: return cmd >= 8 && cmd <= 0xB;
    case NPK_UNIT_MSF: return cmd == 0xC || cmd == 0xD;
    case NPK_UNIT_PCI: return cmd == 4 || cmd == 5;
    case NPK_UNIT_CAP: return cmd == 0xE || cmd == 0xF;
    case NPK_UNIT_HASH: return cmd == 6 && sub <= 2;
    default: return 0;
    }
}

static void issue_mem(exec_ctx *e, int unit, uint64_t w)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    uint32_t cmd = NPK_SRAM_CMD(w), sub = NPK_SRAM_SUB(w), sig = NPK_SRAM_SIG(w);
    uint32_t mode = NPK_SRAM_SIG_MODE(w);
    uint32_t cnt = NPK_SRAM_REF_CNT(w) + 1;
    if (unit == NPK_UNIT_SRAM || unit == NPK_UNIT_MSF || unit == NPK_UNIT_PCI || unit == NPK_UNIT_CAP || unit == NPK_UNIT_DRAM) {
        if (!legal_mem_cmd(unit, cmd, sub) && (sub & 2))
            sub &= 1;  /* opt19 overlaps sub bit 1 (ignore_data_error) */
    }
    if (!legal_mem_cmd(unit, cmd, sub) || (sig == 0 && mode != 3)) {
        e->illegal = 1;
        return;
    }
    uint32_t a = rd_op(e, restricted_to_u(NPK_SRAM_A_SRC(w), 0, 0), 0);
    uint32_t b = rd_op(e, restricted_to_u(NPK_SRAM_B_SRC(w), 0, 0), 1);
    if (e->illegal) return;
    uint32_t addr = a + b;
    int kind;
    uint32_t xidx;
    int is_dram = unit == NPK_UNIT_DRAM;
    uint32_t nwords = cnt;
    if (unit == NPK_UNIT_HASH) {
        cnt = NPK_SRAM_REF_CNT(w);
        if (cnt < 1 || cnt > 3) { e->illegal = 1; return; }
        nwords = cnt * (sub == 2 ? 4 : 2);
    } else if (is_dram) {
        nwords = cnt * 2;
    }
    xfer_target(m, e->ctx, NPK_SRAM_XFER(w), is_dram, &kind, &xidx);
    uint32_t msf_addr = 0;
    if (NPK_SRAM_INDIRECT_REF(w)) {
        /* indirect_ref: fields of the previous ALU result (ALU_OUT) override the
         * instruction (the format IXP2400/2800 receive/transmit microcode uses):
         *   [25] override ref_count, [24:21] ref_count - 1 (quadwords for dram)
         *   [4]  override data reference, [20:5] data reference: for
         *        dram[rbuf_rd|tbuf_wr] the MSF buffer address (0x2000 + byte
         *        offset in RBUF / TBUF) */
        uint32_t ind = m->alu_out;
        if (ind & (1u << 25)) {
            cnt = ((ind >> 21) & 0xF) + 1;
            nwords = is_dram ? cnt * 2 : cnt;
            if (nwords > NPK_MAX_XFER_WORDS) nwords = NPK_MAX_XFER_WORDS;
        }
        if (ind & (1u << 4))
            msf_addr = (ind >> 5) & 0xFFFF;
    }
    int ch = unit_channel(c, unit, addr);
    if (npk_unit_full(c, unit, ch)) {
        e->stall = 1;
        return;
    }
    int pull, push;
    cmd_dirs(unit, cmd, sub, &pull, &push);
    if ((pull || push) && xidx + (nwords > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : nwords) > 128)
        npk_fault_at(c, NPK_FAULT_XFER, m->idx, e->ctx, cur_pc(e), xidx);  /* the registers wrap to 0 */
    npk_event *ev = npk_ev_alloc(c);
    if (!ev) { e->illegal = 1; return; }
    ev->kind = EVK_MEM;
    ev->unit = (uint8_t)unit;
    ev->me = (uint8_t)m->idx;
    ev->ctx = (uint8_t)e->ctx;
    ev->pc = (uint16_t)cur_pc(e);
    ev->cmd = (uint8_t)cmd;
    ev->sub = (uint8_t)sub;
    ev->count = (uint16_t)nwords;
    ev->addr = addr;
    ev->xkind = (uint8_t)kind;
    ev->xidx = (uint16_t)xidx;
    ev->aux = (is_dram && cmd >= 0xA) ? msf_addr : b;
    if (unit == NPK_UNIT_SRAM && cmd == 12) ev->aux = b;   /* enqueue: buffer pointer */
    if (unit == NPK_UNIT_SRAM && cmd == 12) ev->addr = a;  /* enqueue: queue descriptor */
    if (unit == NPK_UNIT_MSF && cmd == 0xD && (sub & 1)) { ev->addr = a; ev->aux = b; }
    if (unit == NPK_UNIT_CAP) ev->cmd = (uint8_t)(cmd & 1);  /* cap[read|write, $x, a, b, n]: 0 read, 1 write */
    uint16_t sm = 0;
    if (sig) {
        sm = (uint16_t)(1u << sig);
        if (is_dram && sig < 15) sm |= (uint16_t)(1u << (sig + 1));  /* DRAM signals a pair */
    }
    ev->sigmask = sm;
    if (pull) {
        int okind = kind == XK_SIN ? XK_SOUT : XK_DOUT;
        uint32_t n = nwords > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : nwords;
        if (unit != NPK_UNIT_SRAM && unit != NPK_UNIT_SCRATCH && unit != NPK_UNIT_HASH) {}
        if ((unit == NPK_UNIT_SRAM || unit == NPK_UNIT_SCRATCH) && cmd >= 2 && cmd <= 8) n = 1;
        for (uint32_t i = 0; i < n; i++)
            ev->data[i] = m->xfer[okind][(xidx + i) & 127];
    }
    ev->chan = (uint8_t)ch;
    uint32_t bytes = nwords * 4;
    if ((unit == NPK_UNIT_SRAM || unit == NPK_UNIT_SCRATCH) && cmd >= 2 && cmd <= 8) bytes = 4;
    ev->cycle = npk_unit_schedule(c, unit, ch, bytes, pull && !push);
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, unit, cmd | (sub << 8) | (nwords << 16), addr);
    npk_ev_push(c, ev);
    if (sig && mode != 3) {
        /* ctx_swap[s], optionally with defer[1|2] */
        npk_ctx *x = e->x;
        x->wait_mask = sm;
        x->wait_any = 0;
        x->swap_pending = 1;
        x->swap_left = (uint8_t)mode;
        x->swap_voluntary = 0;
        x->swap_target = UINT32_MAX;
    }
}

static void exec_cap_csr(exec_ctx *e, uint64_t w)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    uint32_t cmd = NPK_CAP_CSR_CMD(w);
    uint32_t addr = (NPK_CAP_CSR_CSR_HI(w) << 8) | NPK_CAP_CSR_CSR_LO(w);
    uint32_t sig = NPK_CAP_CSR_SIG(w), mode = NPK_CAP_CSR_SIG_MODE(w);
    if (!(cmd & 2) && sig == 0 && mode != 3) { e->illegal = 1; return; }
    if (npk_unit_full(c, NPK_UNIT_CAP, 0)) {
        e->stall = 1;
        return;
    }
    npk_event *ev = npk_ev_alloc(c);
    if (!ev) { e->illegal = 1; return; }
    ev->kind = EVK_MEM;
    ev->unit = NPK_UNIT_CAP;
    ev->me = (uint8_t)m->idx;
    ev->ctx = (uint8_t)e->ctx;
    ev->pc = (uint16_t)cur_pc(e);
    ev->addr = addr;
    ev->chan = 0;
    if (cmd & 2) {  /* fast_wr: data from the instruction or from ALU_OUT */
        ev->cmd = 2;
        ev->data[0] = (cmd & 1) ? NPK_CAP_CSR_FAST_DATA(w) : m->alu_out;
        ev->count = 1;
        ev->sigmask = 0;
        ev->cycle = npk_unit_schedule(c, NPK_UNIT_CAP, 0, 4, 1);
        npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, NPK_UNIT_CAP, 2 | (1u << 16), addr);
        npk_ev_push(c, ev);
        return;
    }
    int kind;
    uint32_t xidx;
    xfer_target(m, e->ctx, NPK_CAP_CSR_XFER(w), 0, &kind, &xidx);
    uint32_t n = NPK_CAP_CSR_REF_CNT(w) + 1;
    if (xidx + n > 128) npk_fault_at(c, NPK_FAULT_XFER, m->idx, e->ctx, cur_pc(e), xidx);
    ev->cmd = (uint8_t)(cmd & 1);
    ev->count = (uint16_t)n;
    ev->xkind = (uint8_t)kind;
    ev->xidx = (uint16_t)xidx;
    ev->sigmask = sig ? (uint16_t)(1u << sig) : 0;
    if (cmd & 1)
        for (uint32_t i = 0; i < n; i++)
            ev->data[i] = m->xfer[kind == XK_SIN ? XK_SOUT : XK_DOUT][(xidx + i) & 127];
    ev->cycle = npk_unit_schedule(c, NPK_UNIT_CAP, 0, n * 4, (int)(cmd & 1));
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, NPK_UNIT_CAP, (cmd & 1) | (n << 16), addr);
    npk_ev_push(c, ev);
    if (sig && mode != 3) {
        e->x->wait_mask = ev->sigmask;
        e->x->wait_any = 0;
        e->x->swap_pending = 1;
        e->x->swap_left = (uint8_t)mode;
        e->x->swap_target = UINT32_MAX;
    }
}

/* ---- instruction classes --------------------------------------------------- */

static int branch_to(exec_ctx *e, uint32_t target, uint32_t defer)
{
    npk_ctx *x = e->x;
    npk_chip *c = e->c;
    if (target >= c->cfg.ustore_words) target %= c->cfg.ustore_words;
    if (defer == 0) {
        x->pc = target;
    } else {
        x->br_pending = 1;
        x->br_left = (uint8_t)defer;
        x->br_target = target;
    }
    uint32_t pen = c->cfg.branch_taken_penalty;
    return (int)(pen > defer ? pen - defer : 0);
}

static int input_state(exec_ctx *e, uint32_t n)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    if (n == 0) return m->nn_put == m->nn_get;              /* NN_EMPTY: own ring */
    if (n == 1) {                                            /* NN_FULL: the ring we write */
        npk_me *nx = nn_target(c, m);
        if (!nx) return 0;
        return ((nx->nn_put - nx->nn_get) & 127) >= c->cfg.nn_full_threshold;
    }
    if (n >= 2 && n <= 13) return npk_scr_ring_full(c, (int)n - 2);
    return 0;  /* FCI_NOT_EMPTY / FCI_FULL: no flow-control interface modelled */
}

static void set_alu(exec_ctx *e, uint32_t a, uint32_t b, uint32_t r)
{
    e->m->prev_a = a;
    e->m->prev_b = b;
    e->m->alu_out = r;
}

static int exec_alu(exec_ctx *e, uint64_t w)
{
    npk_me *m = e->m;
    npk_ctx *x = e->x;
    uint32_t op = NPK_ALU_OP(w);
    uint32_t an = NPK_ALU_A_SRC(w), bn = NPK_ALU_B_SRC(w);
    int bank = (int)NPK_ALU_DEST_BANK(w);
    uint32_t dn = NPK_ALU_DEST(w);
    uint32_t a, b, r = 0;
    uint8_t f;
    switch (op) {
    case NPK_ALU_OP_CAM_CLEAR:
        npk_cam_reset(m);
        return 0;
    case NPK_ALU_OP_CAM_WRITE: case NPK_ALU_OP_CAM_WRITE_STATE: {
        uint32_t entry = rd_op(e, bn, 1) & 15;
        if (entry >= e->c->cfg.cam_entries) entry %= e->c->cfg.cam_entries;
        if (op == NPK_ALU_OP_CAM_WRITE) {
            m->cam_tag[entry] = rd_op(e, an, 0);
            m->cam_valid[entry] = 1;
            npk_cam_touch(m, (int)entry);
        }
        m->cam_state[entry] = (uint8_t)(dn & 0xF);
        return 0;
    }
    case NPK_ALU_OP_CRC: {
        uint32_t ct = NPK_ALU_CRC_TYPE(w), nb = NPK_ALU_CRC_BYTES(w);
        if (ct == 1 || ct == 3 || nb == 7) { e->illegal = 1; return 0; }
        uint32_t src = rd_op(e, an, 0);
        r = npk_crc(m, ct, src, nb, (int)NPK_ALU_CRC_LE(w), (int)NPK_ALU_CRC_BIT_SWAP(w));
        wr_op(e, dn, bank, src);
        set_alu(e, src, 0, src);
        return 0;
    }
    default: break;
    }
    a = rd_op(e, an, 0);
    b = rd_op(e, bn, 1);
    if (NPK_ALU_SWAP(w)) { uint32_t t = a; a = b; b = t; }
    switch (op) {
    case NPK_ALU_OP_B: r = b; f = cc_logic(r); break;
    case NPK_ALU_OP_PLUS: f = cc_add(a, b, 0, &r); break;
    case NPK_ALU_OP_NOTB: r = ~b; f = cc_logic(r); break;
    case NPK_ALU_OP_PLUS16: f = cc_add(a, b & 0xFFFF, 0, &r); break;
    case NPK_ALU_OP_PLUS8: f = cc_add(a, b & 0xFF, 0, &r); break;
    case NPK_ALU_OP_AND: r = a & b; f = cc_logic(r); break;
    case NPK_ALU_OP_NOTAND: r = ~a & b; f = cc_logic(r); break;
    case NPK_ALU_OP_ANDNOT: r = a & ~b; f = cc_logic(r); break;
    case NPK_ALU_OP_OR: r = a | b; f = cc_logic(r); break;
    case NPK_ALU_OP_XOR: r = a ^ b; f = cc_logic(r); break;
    case NPK_ALU_OP_MINUS: f = cc_sub(a, b, 0, &r); break;
    case NPK_ALU_OP_BMINUSA: f = cc_sub(b, a, 0, &r); break;
    case NPK_ALU_OP_PLUSCARRY: f = cc_add(a, b, (x->cc & F_C) ? 1 : 0, &r); break;
    case NPK_ALU_OP_MINUSCARRY: f = cc_sub(a, b, (x->cc & F_C) ? 0 : 1, &r); break;
    case NPK_ALU_OP_POP_COUNT1: m->popcnt = (uint32_t)__builtin_popcount(b); return 0;
    case NPK_ALU_OP_POP_COUNT2: return 0;
    case NPK_ALU_OP_POP_COUNT3:
        r = (uint32_t)__builtin_popcount(b);
        wr_op(e, dn, bank, r);
        set_alu(e, a, b, r);
        x->cc = cc_logic(r);
        return 0;
    case NPK_ALU_OP_FIND_BSET: case NPK_ALU_OP_FIND_BSET_WITH_MASK: {
        /* result: bit number of the least significant set bit; 0x80 (and Z)
         * when no bit is set */
        uint32_t v = op == NPK_ALU_OP_FIND_BSET ? b : (a & b);
        r = v ? (uint32_t)__builtin_ctz(v) : 0x80u;
        wr_op(e, dn, bank, r);
        set_alu(e, a, b, r);
        x->cc = v ? 0 : F_Z;
        return 0;
    }
    case NPK_ALU_OP_CAM_LOOKUP: {
        r = npk_cam_lookup(m, a, e->c->cfg.cam_entries);
        wr_op(e, dn, bank, r);
        uint32_t tok = b;
        if (tok & 1) *lm_reg(m, e->ctx, 0) = r & 0xFFC;
        else if (tok & 2) *lm_reg(m, e->ctx, 1) = r & 0xFFC;
        set_alu(e, a, b, r);
        return 0;
    }
    case NPK_ALU_OP_CAM_READ_TAG: {
        uint32_t ent = b % e->c->cfg.cam_entries;
        r = m->cam_tag[ent];
        wr_op(e, dn, bank, r);
        return 0;
    }
    case NPK_ALU_OP_CAM_READ_STATE: {
        uint32_t ent = b % e->c->cfg.cam_entries;
        r = (uint32_t)m->cam_state[ent] << 8;
        wr_op(e, dn, bank, r);
        return 0;
    }
    default:
        e->illegal = 1;
        return 0;
    }
    x->cc = f;
    wr_op(e, dn, bank, r);
    set_alu(e, a, b, r);
    return 0;
}

static void exec_alu_shf(exec_ctx *e, uint64_t w)
{
    npk_me *m = e->m;
    uint32_t msb = NPK_ALU_SHF_IMM_MSB(w);
    uint32_t a = rd_op(e, restricted_to_u(NPK_ALU_SHF_A_SRC(w), msb, 0), 0);
    uint32_t b = rd_op(e, restricted_to_u(NPK_ALU_SHF_B_SRC(w), msb, 0), 1);
    if (NPK_ALU_SHF_SWAP(w)) { uint32_t t = a; a = b; b = t; }
    uint32_t op = NPK_ALU_SHF_OP(w), st = NPK_ALU_SHF_SHIFT_TYPE(w), amt = NPK_ALU_SHF_SHIFT_AMT(w);
    uint32_t r;
    if (st == 3) {
        if (op != 0) { e->illegal = 1; return; }
        uint32_t n = amt ? amt : (m->alu_out & 31);
        r = n ? (uint32_t)((((uint64_t)a << 32) | b) >> n) : b;
    } else if (op == 7) {  /* byte_align_be (type right) / byte_align_le (type left) */
        if ((st != 1 && st != 2) || amt) { e->illegal = 1; return; }
        uint32_t idx = m->byte_index & 3;
        uint64_t cat;
        uint32_t sh;
        if (st == 1) {  /* BE: prev:B, right shift 32,24,16,8 (HRM p.43 Table 6) */
            cat = ((uint64_t)m->prev_b << 32) | a;
            sh = 32 - 8 * idx;
        } else {        /* LE: A:prev, right shift 0,8,16,24 */
            cat = ((uint64_t)a << 32) | m->prev_a;
            sh = 8 * idx;
        }
        r = (uint32_t)(cat >> sh);
        wr_op(e, restricted_to_u(NPK_ALU_SHF_DEST(w), msb, 1), (int)NPK_ALU_SHF_DEST_BANK(w), r);
        e->x->cc = cc_logic(r);
        m->prev_a = a;
        m->prev_b = a;
        m->alu_out = r;
        return;
    } else if (op == 6) {  /* asr */
        uint32_t n = st == 1 ? (amt ? amt : (m->alu_out & 31)) : 0;
        if (st == 0) { r = rotr(b, amt); }
        else if (st == 2) { r = shift_b(m, b, st, amt); }
        else r = (uint32_t)((int32_t)b >> n);
    } else {
        uint32_t sb = shift_b(m, b, st, amt);
        switch (op) {
        case 0: r = sb; break;
        case 1: r = ~sb; break;
        case 2: r = a & sb; break;
        case 3: r = ~a & sb; break;
        case 4: r = a & ~sb; break;
        default: r = a | sb; break;
        }
    }
    uint32_t dn = restricted_to_u(NPK_ALU_SHF_DEST(w), msb, 1);
    wr_op(e, dn, (int)NPK_ALU_SHF_DEST_BANK(w), r);
    e->x->cc = cc_logic(r);
    set_alu(e, a, b, r);
}

static void exec_ld_field(exec_ctx *e, uint64_t w)
{
    npk_me *m = e->m;
    uint32_t msb = NPK_LD_FIELD_IMM_MSB(w);
    uint32_t dn, sn;
    int dbank;
    if (NPK_LD_FIELD_DEST_IS_B(w)) {
        dn = restricted_to_u(NPK_LD_FIELD_B_SRC(w), msb, 1);
        sn = restricted_to_u(NPK_LD_FIELD_A_SRC(w), msb, 0);
        dbank = 1;
    } else {
        dn = restricted_to_u(NPK_LD_FIELD_A_SRC(w), msb, 1);
        sn = restricted_to_u(NPK_LD_FIELD_B_SRC(w), msb, 0);
        dbank = 0;
    }
    uint32_t src = rd_op(e, sn, !dbank);
    uint32_t old = NPK_LD_FIELD_W_CLR(w) ? 0 : rd_op(e, dn == OP_NONE ? OP_NONE : dn, dbank);
    if (dn == OP_NONE) old = 0;
    uint32_t sh = shift_b(m, src, NPK_LD_FIELD_SHIFT_TYPE(w), NPK_LD_FIELD_SHIFT_AMT(w));
    if (NPK_LD_FIELD_SHIFT_TYPE(w) == 3) sh = src;
    uint32_t bm = NPK_LD_FIELD_BYTE_MASK(w), mask = 0;
    for (int i = 0; i < 4; i++)
        if (bm & (1u << i)) mask |= 0xFFu << (8 * i);
    uint32_t r = (old & ~mask) | (sh & mask);
    wr_op(e, dn, dbank, r);
    if (NPK_LD_FIELD_LOAD_CC(w)) e->x->cc = cc_logic(r);
    m->alu_out = r;
}

static void exec_immed(exec_ctx *e, uint64_t w)
{
    npk_me *m = e->m;
    uint32_t an = NPK_IMMED_A_SRC(w), bn = NPK_IMMED_B_SRC(w);
    uint32_t lo, dn;
    int bank;
    if ((bn & 0x300) == 0x300) { lo = bn & 0xFF; dn = an; bank = 0; }
    else if ((an & 0x300) == 0x300) { lo = an & 0xFF; dn = bn; bank = 1; }
    else { e->illegal = 1; return; }
    uint32_t kind = NPK_IMMED_KIND(w), shift = NPK_IMMED_SHIFT(w), hi = NPK_IMMED_HI_BYTE(w);
    uint32_t r;
    if (m->csr_rd_valid) {
        /* local_csr_rd returns its value through the following immed */
        r = m->csr_rd_value;
        m->csr_rd_valid = 0;
        wr_op(e, dn, bank, r);
        m->alu_out = r;
        return;
    }
    if (kind == 0) {
        if (shift == 3) { e->illegal = 1; return; }
        r = (hi << 8) | lo;
        if (NPK_IMMED_INVERT(w)) r = ~r;
        r <<= 8 * shift;
    } else if (kind == 1) {
        uint32_t old = rd_op(e, dn, bank);
        r = (old & ~(0xFFu << (8 * shift))) | (lo << (8 * shift));
    } else if (kind == 2) {
        uint32_t old = rd_op(e, dn, bank);
        uint32_t s = (shift >> 1) * 16;
        r = (old & ~(0xFFFFu << s)) | (((hi << 8) | lo) << s);
    } else {
        e->illegal = 1;
        return;
    }
    wr_op(e, dn, bank, r);
    m->alu_out = r;
}

static void exec_mul(exec_ctx *e, uint64_t w)
{
    npk_me *m = e->m;
    uint32_t size = NPK_MUL_STEP_MUL_SIZE(w);
    if (NPK_MUL_STEP_LAST(w)) {
        uint32_t r = NPK_MUL_STEP_STEP(w) ? m->mul_hi : m->mul_lo;
        wr_op(e, NPK_MUL_STEP_A_SRC(w), (int)NPK_MUL_STEP_LAST_BANK(w), r);
        m->alu_out = r;
        return;
    }
    uint32_t a = rd_op(e, NPK_MUL_STEP_A_SRC(w), 0);
    uint32_t b = rd_op(e, NPK_MUL_STEP_B_SRC(w), 1);
    if (NPK_MUL_STEP_SWAP(w)) { uint32_t t = a; a = b; b = t; }
    uint64_t p;
    switch (size) {
    case 1: p = (uint64_t)(a & 0xFFFFFF) * (b & 0xFF); break;
    case 2: p = (uint64_t)(a & 0xFFFF) * (b & 0xFFFF); break;
    default: p = (uint64_t)a * b; break;
    }
    m->mul_lo = (uint32_t)p;
    m->mul_hi = (uint32_t)(p >> 32);
    m->prev_a = a;
    m->prev_b = b;
}

static void exec_local_csr(exec_ctx *e, uint64_t w)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    uint32_t addr = NPK_LOCAL_CSR_CSR(w) << 2;
    if (!NPK_LOCAL_CSR_WRITE(w)) {
        m->csr_rd_value = npk_lcsr_read(c, m, e->ctx, addr);
        m->csr_rd_valid = 2;
        return;
    }
    uint32_t an = NPK_LOCAL_CSR_A_SRC(w), bn = NPK_LOCAL_CSR_B_SRC(w);
    uint32_t v = (an & 0x300) == 0x300 ? rd_op(e, bn, 1) : rd_op(e, an, 0);
    if (e->illegal) return;
    if (m->npend >= 8) npk_me_apply_csrs(c, m);
    if (m->npend >= 8) { npk_lcsr_write(c, m, e->ctx, addr, v); return; }
    npk_pending_csr *p = &m->pend[m->npend++];
    p->at = c->now + c->cfg.csr_write_to_use;
    p->addr = addr;
    p->value = v;
    p->ctx = e->ctx;
    if (p->at < m->pend_min) m->pend_min = p->at;
}

static int exec_ctx_arb(exec_ctx *e, uint64_t w)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    npk_ctx *x = e->x;
    uint32_t sigs = NPK_CTX_ARB_SIGS(w) << 1;
    int bpt = (int)NPK_CTX_ARB_BPT(w), any = (int)NPK_CTX_ARB_ANY(w);
    int vol = (int)NPK_CTX_ARB_VOLUNTARY(w), dashes = (int)NPK_CTX_ARB_DASHES(w);
    if (bpt) {
        npk_me_stop(c, m, e->ctx, NPK_ME_HALT, x->pc - 1, w, "halt (ctx_arb[bpt])");
        return -1;
    }
    if (any && !sigs && !vol && !dashes) {  /* kill */
        m->ctx_enables &= ~(1u << (8 + e->ctx));
        npk_ctx_set_state(c, m, e->ctx, NPK_CTX_INACTIVE);
        npk_me_pick(c, m, c->now + 1);
        return -1;
    }
    if (!sigs && !vol && !dashes) { e->illegal = 1; return 0; }
    if (NPK_CTX_ARB_DEFER(w) > 2) { e->illegal = 1; return 0; }
    x->wait_mask = (uint16_t)sigs;
    x->wait_any = (uint8_t)any;
    x->swap_voluntary = (uint8_t)(vol && !sigs);
    x->swap_target = NPK_CTX_ARB_BR_ENABLE(w) ? NPK_CTX_ARB_TARGET(w) % c->cfg.ustore_words : UINT32_MAX;
    x->swap_pending = 1;
    x->swap_left = (uint8_t)NPK_CTX_ARB_DEFER(w);
    return 0;
}

/* Execute one instruction of the running context of m at c->now. */
static inline __attribute__((always_inline)) void me_exec(npk_chip *c, npk_me *m)
{
    if (m->npend && m->pend_min <= c->now)
        npk_me_apply_csrs(c, m);
    int ctx = m->cur;
    npk_ctx *x = &m->ctx[ctx];
    uint32_t pc = x->pc;
    if (pc >= c->cfg.ustore_words) {
        npk_fault_at(c, NPK_FAULT_PC, m->idx, ctx, pc, pc);
        npk_me_stop(c, m, ctx, NPK_ME_BAD_PC, pc, 0, "PC outside the control store");
        return;
    }
    if (c->nbp) {
        if (m->bp_skip) {
            m->bp_skip = 0;
        } else {
            for (int i = 0; i < NPK_MAX_BP; i++) {
                npk_bp *b = &c->bp[i];
                if (b->used && b->pc == pc && (b->me < 0 || b->me == m->idx) && (b->ctx < 0 || b->ctx == ctx)) {
                    c->stop_req = 1;
                    c->stop.reason = NPK_STOP_BREAKPOINT;
                    c->stop.me = m->idx;
                    c->stop.ctx = ctx;
                    c->stop.pc = pc;
                    c->stop.id = i;
                    c->stop.cycle = c->now;
                    m->bp_skip = 1;
                    return;
                }
            }
        }
    }
    uint64_t w = m->ustore[pc];
    exec_ctx e;
    e.c = c;
    e.m = m;
    e.ctx = ctx;
    e.x = x;
    e.illegal = 0;
    e.lm_delta[0] = e.lm_delta[1] = 0;
    e.t_delta = 0;
    e.nnget_delta = 0;
    e.base = relbase(m, ctx);
    e.pc = pc;
    e.stall = 0;
    int had_br = x->br_pending;
    int had_swap = x->swap_pending;
    int csr_rd_before = m->csr_rd_valid;
    x->pc = pc + 1;
    int extra = 0;  /* aborted (taken branch) cycles */
    int done = 0;   /* instruction already handled the context (halt/kill) */
    if (c->hist_level >= 2)
        npk_hist_rec(c, NPK_EV_INSTR, m->idx, ctx, 0, pc, (uint32_t)(w >> 8));

    switch ((enum npk_iclass)m->cls[pc]) {
    case NPK_IC_ALU: exec_alu(&e, w); break;
    case NPK_IC_ALU_SHF: exec_alu_shf(&e, w); break;
    case NPK_IC_IMMED: exec_immed(&e, w); break;
    case NPK_IC_LD_FIELD: exec_ld_field(&e, w); break;
    case NPK_IC_MUL_STEP: exec_mul(&e, w); break;
    case NPK_IC_LOCAL_CSR: exec_local_csr(&e, w); break;
    case NPK_IC_BRANCH: {
        uint32_t cond = NPK_BRANCH_COND(w), p = NPK_BRANCH_PARAM(w);
        uint8_t f = x->cc;
        int z = !!(f & F_Z), n = !!(f & F_N), cy = !!(f & F_C), v = !!(f & F_V);
        int take;
        switch (cond) {
        case 0: take = z; break;
        case 1: take = !z; break;
        case 2: take = n; break;
        case 3: take = !n; break;
        case 4: take = cy; break;
        case 5: take = !cy; break;
        case 6: take = v; break;
        case 7: take = !v; break;
        case 8: take = n == v; break;
        case 9: take = n != v; break;
        case 10: take = z || n != v; break;
        case 11: take = !z && n == v; break;
        case 16: take = (uint32_t)ctx == p; break;
        case 17: take = (uint32_t)ctx != p; break;
        case 18: case 19: {
            if (p == 0) { e.illegal = 1; take = 0; break; }
            int set = (x->sig >> p) & 1;
            if (set) x->sig &= (uint16_t)~(1u << p);   /* the test consumes the signal */
            take = cond == 18 ? set : !set;
            break;
        }
        case 20: take = input_state(&e, p); break;
        case 21: take = !input_state(&e, p); break;
        case 24: take = 1; break;
        default: e.illegal = 1; take = 0; break;
        }
        if (take && !e.illegal) extra = branch_to(&e, NPK_BRANCH_TARGET(w), NPK_BRANCH_DEFER(w));
        break;
    }
    case NPK_IC_BR_BIT: {
        uint32_t an = NPK_BR_BIT_A_SRC(w), bn = NPK_BR_BIT_B_SRC(w);
        uint32_t reg, pos;
        if (bn & 0x20) { reg = rd_op(&e, restricted_to_u(an, 0, 0), 0); pos = rd_op(&e, restricted_to_u(bn, 0, 0), 1); }
        else if (an & 0x20) { reg = rd_op(&e, restricted_to_u(bn, 0, 0), 1); pos = rd_op(&e, restricted_to_u(an, 0, 0), 0); }
        else { e.illegal = 1; break; }
        uint32_t bit = (pos + 31) & 31;
        int set = (reg >> bit) & 1;
        if (set == (int)NPK_BR_BIT_SET(w)) extra = branch_to(&e, NPK_BR_BIT_TARGET(w), NPK_BR_BIT_DEFER(w));
        break;
    }
    case NPK_IC_BR_BYTE: {
        uint32_t msb = NPK_BR_BYTE_IMM_MSB(w);
        uint32_t an = NPK_BR_BYTE_A_SRC(w), bn = NPK_BR_BYTE_B_SRC(w);
        uint32_t reg, val;
        if (bn & 0x20) { reg = rd_op(&e, restricted_to_u(an, msb, 0), 0); val = rd_op(&e, restricted_to_u(bn, msb, 0), 1); }
        else { reg = rd_op(&e, restricted_to_u(bn, msb, 0), 1); val = rd_op(&e, restricted_to_u(an, msb, 0), 0); }
        uint32_t byte = (reg >> (8 * NPK_BR_BYTE_BYTE_NO(w))) & 0xFF;
        int eq = byte == (val & 0xFF);
        if (eq == (int)NPK_BR_BYTE_EQUAL(w)) extra = branch_to(&e, NPK_BR_BYTE_TARGET(w), NPK_BR_BYTE_DEFER(w));
        break;
    }
    case NPK_IC_JUMP: {
        uint32_t an = NPK_JUMP_A_SRC(w), bn = NPK_JUMP_B_SRC(w);
        uint32_t src;
        if ((bn & 0x300) == 0x300) src = rd_op(&e, an, 0);
        else src = rd_op(&e, bn, 1);
        extra = branch_to(&e, src, NPK_JUMP_DEFER(w));
        break;
    }
    case NPK_IC_CTX_ARB:
        if (exec_ctx_arb(&e, w) < 0) done = 1;
        break;
    case NPK_IC_SRAM: issue_mem(&e, NPK_UNIT_SRAM, w); break;
    case NPK_IC_SCRATCH: issue_mem(&e, NPK_UNIT_SCRATCH, w); break;
    case NPK_IC_DRAM: issue_mem(&e, NPK_UNIT_DRAM, w); break;
    case NPK_IC_MSF: issue_mem(&e, NPK_UNIT_MSF, w); break;
    case NPK_IC_PCI: issue_mem(&e, NPK_UNIT_PCI, w); break;
    case NPK_IC_CAP: issue_mem(&e, NPK_UNIT_CAP, w); break;
    case NPK_IC_HASH: issue_mem(&e, NPK_UNIT_HASH, w); break;
    case NPK_IC_CAP_CSR: exec_cap_csr(&e, w); break;
    default: e.illegal = 1; break;
    }

    if (e.stall) {
        /* the unit's command queue is full: retry when something completes */
        uint64_t retry = npk_ev_next_cycle(c);
        if (retry <= c->now) retry = c->now + 1;
        x->pc = pc;
        m->st.stalled_cycles += retry - c->now;
        m->next = retry;
        return;
    }
    m->st.instructions++;
    m->st.executing_cycles++;
    m->st.ctx_instructions[ctx]++;
    if (e.illegal) {
        char why[96];
        snprintf(why, sizeof why, "illegal instruction 0x%010llx (%s)", (unsigned long long)w,
                 npk_iclass_name(npk_iclass_of(w)));
        npk_me_stop(c, m, ctx, NPK_ME_ILLEGAL, pc, w, why);
        return;
    }
    if (done) return;
    /* post-modify index registers */
    if (e.lm_delta[0]) { uint32_t *r = lm_reg(m, ctx, 0); *r = (*r + (uint32_t)e.lm_delta[0]) & 0xFFC; }
    if (e.lm_delta[1]) { uint32_t *r = lm_reg(m, ctx, 1); *r = (*r + (uint32_t)e.lm_delta[1]) & 0xFFC; }
    if (e.t_delta) m->t_index = (m->t_index + (uint32_t)e.t_delta) & 0x1FC;
    if (e.nnget_delta) m->nn_get = (m->nn_get + 1) & 127;
    if (csr_rd_before && m->csr_rd_valid == csr_rd_before) m->csr_rd_valid = 0;
    else if (m->csr_rd_valid == 2) m->csr_rd_valid = 1;

    /* deferred branch: count down the instructions after the branch */
    if (had_br && x->br_pending) {
        if (--x->br_left == 0) {
            x->br_pending = 0;
            x->pc = x->br_target;
        }
    }
    uint64_t t = c->now + 1 + (uint64_t)extra;
    m->st.aborted_cycles += (uint64_t)extra;
    if (x->swap_pending) {
        if (had_swap) {
            if (x->swap_left) x->swap_left--;
        }
        if (x->swap_left == 0) {
            x->swap_pending = 0;
            if (x->br_pending) { x->pc = x->br_target; x->br_pending = 0; }
            ctx_swap_out(c, m, ctx, t);
            return;
        }
    }
    m->next = t;
}

/* ---- run-ahead classification -------------------------------------------------
 * A word is "local" when executing it reads and writes only state of its own
 * ME that no other ME or unit can change in the meantime: datapath
 * instructions without next-neighbour operands, branches on condition codes,
 * context number, bits and bytes, jumps, and local_csr_rd.  The run loop lets
 * an ME execute local words ahead of the other MEs up to the next unit
 * completion, which gives exactly the same results as lock-step execution. */

static int u_is_nn(uint32_t num)
{
    return num == 0x241 || num == 0x243 || (num & 0x3E0) == 0x280;
}

static int r_is_nn(uint32_t num)
{
    return (num & 0xE0) == 0x40 && ((num & 0x1F) == 1 || (num & 0x1F) == 3);
}

int npk_word_is_local(uint64_t w)
{
    switch (npk_iclass_of(w)) {
    case NPK_IC_ALU:
        return !u_is_nn(NPK_ALU_A_SRC(w)) && !u_is_nn(NPK_ALU_B_SRC(w)) && !u_is_nn(NPK_ALU_DEST(w));
    case NPK_IC_IMMED:
        return !u_is_nn(NPK_IMMED_A_SRC(w)) && !u_is_nn(NPK_IMMED_B_SRC(w));
    case NPK_IC_MUL_STEP:
        return !u_is_nn(NPK_MUL_STEP_A_SRC(w)) && !u_is_nn(NPK_MUL_STEP_B_SRC(w));
    case NPK_IC_JUMP:
        return !u_is_nn(NPK_JUMP_A_SRC(w)) && !u_is_nn(NPK_JUMP_B_SRC(w));
    case NPK_IC_ALU_SHF:
        return !r_is_nn(NPK_ALU_SHF_A_SRC(w)) && !r_is_nn(NPK_ALU_SHF_B_SRC(w)) && !r_is_nn(NPK_ALU_SHF_DEST(w));
    case NPK_IC_LD_FIELD:
        return !r_is_nn(NPK_LD_FIELD_A_SRC(w)) && !r_is_nn(NPK_LD_FIELD_B_SRC(w));
    case NPK_IC_BR_BIT:
        return !r_is_nn(NPK_BR_BIT_A_SRC(w)) && !r_is_nn(NPK_BR_BIT_B_SRC(w));
    case NPK_IC_BR_BYTE:
        return !r_is_nn(NPK_BR_BYTE_A_SRC(w)) && !r_is_nn(NPK_BR_BYTE_B_SRC(w));
    case NPK_IC_BRANCH: {
        uint32_t cond = NPK_BRANCH_COND(w);
        return cond < 18 || cond == 24;
    }
    case NPK_IC_LOCAL_CSR:
        return !NPK_LOCAL_CSR_WRITE(w);
    default:
        return 0;
    }
}

void npk_me_predecode(npk_chip *c, npk_me *m, uint32_t addr)
{
    (void)c;
    uint64_t w = m->ustore[addr];
    m->cls[addr] = (uint8_t)npk_iclass_of(w);
    m->local[addr] = (uint8_t)npk_word_is_local(w);
}

void npk_me_exec(npk_chip *c, npk_me *m)
{
    me_exec(c, m);
}

/* Execute local words of m's running context while they come before
 * `horizon` (the next unit completion); see npk_word_is_local. */
void npk_me_run_ahead(npk_chip *c, npk_me *m, uint64_t horizon)
{
    uint64_t saved = c->now;
    uint32_t us = c->cfg.ustore_words;
    while (m->next < horizon && m->cur >= 0 && m->pend_min > m->next) {
        uint32_t pc = m->ctx[m->cur].pc;
        if (pc >= us || !m->local[pc]) break;
        c->now = m->next;
        me_exec(c, m);
    }
    c->now = saved;
}
