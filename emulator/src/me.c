/* Microengine: pre-decoding, execution, context arbitration and signals.
 *
 * A control-store word is decoded once, when it is loaded (npk_predecode_word), into an
 * npk_uop: its class, its operands through the operand-field map of mev2.yaml
 * (npk_unrestricted_def / npk_restricted_to_u, generated), its memory command
 * (npk_cmd_lookup).  Executing it (me_exec) is: fetch (breakpoints, history), the
 * class's semantics, retirement (statistics, index post-modify, deferred branches and
 * context swaps).  Local CSRs are csr.c, memory commands issue.c, ALU operations of
 * their own alu.c, the plain ALU operations alu_ops.h. */
#include <string.h>
#include <stdio.h>
#include "issue.h"
#include "alu_ops.h"

/* a register watchpoint sees the write of this instruction: who wrote it, and the old value */
static inline void watch_wr(npk_exec *e, int me, int kind, uint32_t idx, uint32_t old, uint32_t v)
{
    npk_reg_watch(e->c, me, kind, idx, old, v, e->m->idx, e->ctx, e->pc);
}

/* ---- operands: the slow kinds ------------------------------------------------
 * LM_ADDR reaches 1K longwords (the index wraps at 1024); only the first lm_words
 * (640 on the IXP2800) hold RAM, the rest are addressable but not populated
 * (HRM p.40): reading them gives 0, writing does nothing, and both are counted as
 * NPK_FAULT_LOCAL_MEMORY. */

static inline uint32_t lm_index(npk_exec *e, int which, uint32_t off)
{
    return ((*npk_lm_reg(e->m, e->ctx, which) >> 2) | off) & 0x3FF;
}

__attribute__((cold)) static void lm_fault(npk_exec *e, uint32_t idx)
{
    npk_fault_at(e->c, NPK_FAULT_LOCAL_MEMORY, e->m->idx, e->ctx, e->pc, idx);
}

static inline uint32_t lm_read(npk_exec *e, uint32_t idx)
{
    if (idx < e->c->cfg.lm_words) return e->m->lm[idx];
    lm_fault(e, idx);
    return 0;
}

static inline void lm_write(npk_exec *e, uint32_t idx, uint32_t v)
{
    uint32_t old = lm_read(e, idx);
    if (idx < e->c->cfg.lm_words)
        e->m->lm[idx] = v;
    else
        lm_fault(e, idx);
    if (e->c->nwp_reg)
        watch_wr(e, e->m->idx, NPK_REG_LM, idx, old, v);
}

/* an index register's post-increment, applied when the instruction retires (the last
 * operand that names it wins) */
static inline void index_step(npk_exec *e, const npk_opnd *o)
{
    if (!o->step) return;
    switch (o->via) {
    case NPK_OPVIA_T_INDEX: e->t_delta = 4 * o->step; e->side |= SIDE_T; break;
    case NPK_OPVIA_LM_ADDR0: e->lm_delta[0] = 4 * o->step; e->side |= SIDE_LM0; break;
    case NPK_OPVIA_LM_ADDR1: e->lm_delta[1] = 4 * o->step; e->side |= SIDE_LM1; break;
    default: break;
    }
}

static inline int lm_which(const npk_opnd *o)
{
    return o->via == NPK_OPVIA_LM_ADDR1;
}

uint32_t npk_rd_slow(npk_exec *e, const npk_opnd *o)
{
    npk_me *m = e->m;
    uint32_t rel = (e->base + o->num) & 127;
    switch (o->kind) {
    case NPK_OPK_GPR: return *npk_gpr(m, o->bank, rel);
    case NPK_OPK_ABS: return *npk_gpr(m, o->bank, o->num);
    case NPK_OPK_IMM: case NPK_OPK_NONE: return o->num;   /* a destination read: its constant */
    case NPK_OPK_XFER: return *npk_xfer(m, XK_SIN, rel);
    case NPK_OPK_DXFER: return *npk_xfer(m, XK_DIN, rel);
    case NPK_OPK_NN: return m->nn[rel];
    case NPK_OPK_INDEX: {
        uint32_t v;
        switch (o->file) {
        case NPK_OPFILE_XFER: v = *npk_xfer(m, XK_SIN, m->t_index >> 2); break;
        case NPK_OPFILE_DXFER: v = *npk_xfer(m, XK_DIN, m->t_index >> 2); break;
        case NPK_OPFILE_LM: v = lm_read(e, lm_index(e, lm_which(o), o->offset ? o->num : 0)); break;
        case NPK_OPFILE_NN:
            v = m->nn[m->nn_get & 127];
            if (o->step) e->side |= SIDE_NNGET;
            return v;
        default: e->illegal = 1; return 0;
        }
        index_step(e, o);
        return v;
    }
    default:
        e->illegal = 1;
        return 0;
    }
}

/* where n$ / *n$index++ destinations go: the next ME, or this ME when
 * CTX_ENABLES[NN_MODE] (bit 20) is set (HRM p.172) */
#define CE_NN_MODE (1u << 20)
static inline npk_me *nn_target(npk_chip *c, npk_me *m)
{
    return (m->ctx_enables & CE_NN_MODE) ? m : npk_next_me(c, m);
}

static void wr_xfer(npk_exec *e, int kind, uint32_t idx, uint32_t v)
{
    uint32_t *r = npk_xfer(e->m, kind, idx), old = *r;
    *r = v;
    if (e->c->nwp_reg)
        watch_wr(e, e->m->idx, NPK_REG_SXFER_IN + kind, idx & 127, old, v);
}

static void wr_nn(npk_exec *e, npk_me *n, uint32_t slot, uint32_t v)
{
    uint32_t old = n->nn[slot];
    n->nn[slot] = v;
    if (e->c->nwp_reg) watch_wr(e, n->idx, NPK_REG_NN, slot, old, v);
}

void npk_wr_slow(npk_exec *e, const npk_opnd *o, uint32_t v)
{
    npk_me *m = e->m;
    npk_chip *c = e->c;
    uint32_t rel = (e->base + o->num) & 127;
    switch (o->kind) {
    case NPK_OPK_NONE: return;  /* "--" */
    case NPK_OPK_GPR: case NPK_OPK_ABS: {
        uint32_t i = o->kind == NPK_OPK_GPR ? rel : (uint32_t)(o->num & 127), *r = npk_gpr(m, o->bank, i), old = *r;
        *r = v;
        if (c->nwp_reg) watch_wr(e, m->idx, o->bank, i, old, v);
        return;
    }
    case NPK_OPK_XFER: wr_xfer(e, XK_SOUT, rel, v); return;
    case NPK_OPK_DXFER: wr_xfer(e, XK_DOUT, rel, v); return;
    case NPK_OPK_NN: {
        npk_me *n = nn_target(c, m);
        if (n) wr_nn(e, n, rel, v);
        return;
    }
    case NPK_OPK_INDEX:
        switch (o->file) {
        case NPK_OPFILE_XFER: wr_xfer(e, XK_SOUT, m->t_index >> 2, v); break;
        case NPK_OPFILE_DXFER: wr_xfer(e, XK_DOUT, m->t_index >> 2, v); break;
        case NPK_OPFILE_LM: lm_write(e, lm_index(e, lm_which(o), o->offset ? o->num : 0), v); break;
        case NPK_OPFILE_NN: {  /* NN ring put into the next ME (or this one in NN_MODE) */
            npk_me *n = nn_target(c, m);
            if (n) {
                wr_nn(e, n, n->nn_put & 127, v);
                n->nn_put = (n->nn_put + 1) & 127;
            }
            return;
        }
        default: e->illegal = 1; return;
        }
        index_step(e, o);
        return;
    default:
        e->illegal = 1;
        return;
    }
}

/* ---- shifts --------------------------------------------------------------- */

static inline uint32_t rotr(uint32_t v, uint32_t n) { n &= 31; return n ? (v >> n) | (v << (32 - n)) : v; }

/* shift of the B operand as encoded in alu_shf / ld_field (mev2.yaml shift_type) */
static inline uint32_t shift_b(uint32_t alu_out, uint32_t b, uint32_t type, uint32_t amt)
{
    uint32_t ind = alu_out & 31;
    switch (type) {
    case NPK_SHIFT_TYPE_ROT_LEFT: return rotr(b, amt);  /* rotate right by amt (= <<rot 32-amt) */
    case NPK_SHIFT_TYPE_RIGHT: { uint32_t n = amt ? amt : ind; return b >> n; }
    case NPK_SHIFT_TYPE_LEFT: { uint32_t n = amt ? (32 - amt) & 31 : ind; return b << n; }
    default: return b;
    }
}

/* where a fast operand's register is in npk_me.rf: its number relative to the context's
 * first register `base` or absolute */
static inline __attribute__((always_inline)) uint32_t fast_idx(uint32_t base, const npk_opnd *o)
{
    return ((base & o->rmask) * NPK_RF_FILES + o->key) & (128 * NPK_RF_FILES - 1);
}

/* a fast operand's value (fast_src, not a local-memory one: the fast loop stages those
 * as registers): a constant, or a register of the files `g` (npk_me.rf) */
static inline __attribute__((always_inline)) uint32_t fast_val(const uint32_t *g, uint32_t base, const npk_opnd *o)
{
    return o->kind == NPK_OPK_IMM ? (uint32_t)o->num : g[fast_idx(base, o)];
}

/* ---- context state -------------------------------------------------------- */

/* (inlined where contexts sleep, wake and swap in: the constant state folds its tests) */
static inline __attribute__((always_inline)) void ctx_state(npk_chip *c, npk_me *m, int ctx, int state)
{
    npk_ctx *x = &m->ctx[ctx];
    if (x->state == state)
        return;
    uint64_t d = c->now - x->state_since;
    if (x->state == NPK_CTX_SLEEP) {
        x->sleep_cycles += d;
    } else if (x->state == NPK_CTX_READY) {
        m->st.ctx_ready_cycles[ctx] += d;
        m->ready &= ~(1u << ctx);   /* (only a ready context has its bit) */
    }
    x->state = (uint8_t)state;
    x->state_since = c->now;
    if (state == NPK_CTX_READY) m->ready |= 1u << ctx;
    npk_hist(c, NPK_EV_STATE, m->idx, ctx, 0, (uint32_t)state, x->pc);
}

void npk_ctx_set_state(npk_chip *c, npk_me *m, int ctx, int state)
{
    ctx_state(c, m, ctx, state);
}

/* context i of m runs from t (+ the swap cost); `cal`: m's entry in the run loop's
 * calendar made now (0: by the caller, later) */
static inline __attribute__((always_inline)) void me_run_ctx_cal(npk_chip *c, npk_me *m, int i, uint64_t t, int cal)
{
    if (m->cur < 0 && m->idle_since != NPK_NEVER) {
        m->st.idle_cycles += t - m->idle_since;
        m->idle_since = NPK_NEVER;
    }
    m->ctx_arb_cntl = (m->ctx_arb_cntl & ~0x77u) | (uint32_t)i | ((uint32_t)(m->cur < 0 ? i : m->cur) << 4);
    m->cur = i;
    ctx_state(c, m, i, NPK_CTX_RUNNING);
    if (cal) npk_me_set_next(c, m, t + c->cfg.ctx_swap_cost);
    else m->next = t + c->cfg.ctx_swap_cost;
    m->st.stalled_cycles += c->cfg.ctx_swap_cost;
    m->over_stalled = 1;
    m->st.ctx_swaps++;
}

static inline __attribute__((always_inline)) void me_run_ctx(npk_chip *c, npk_me *m, int i, uint64_t t)
{
    me_run_ctx_cal(c, m, i, t, 1);
}

/* choose the next ready context round-robin after the current one; the ME
 * resumes at t (+ swap cost when switching) */
static inline __attribute__((always_inline)) void me_pick(npk_chip *c, npk_me *m, uint64_t t)
{
    int start = m->cur < 0 ? (int)(m->ctx_arb_cntl & 7) : m->cur;
    uint32_t ready = m->ready & (m->ctx_mode == 4 ? 0x55u : 0xFFu);
    if (ready) {
        /* the first ready context after `start`, round robin (start itself last) */
        uint32_t s = (uint32_t)(start + 1) & (NPK_NCTX - 1);
        uint32_t rot = ((ready >> s) | (ready << (NPK_NCTX - s))) & 0xFFu;
        me_run_ctx(c, m, (int)(s + (uint32_t)__builtin_ctz(rot)) & (NPK_NCTX - 1), t);
        return;
    }
    m->cur = -1;
    npk_me_set_next(c, m, NPK_NEVER);
    if (m->idle_since == NPK_NEVER)
        m->idle_since = t;
}

static inline int wait_done(const npk_ctx *x)
{
    if (x->wait_mask == 0) return 1;
    return x->wait_any ? (x->sig & x->wait_mask) != 0 : (x->sig & x->wait_mask) == x->wait_mask;
}

static inline void run_woken(npk_chip *c, npk_me *m, uint64_t limit, uint64_t far, uint64_t quiet);

static void wake(npk_chip *c, npk_me *m, int ctx, uint64_t t)
{
    npk_ctx *x = &m->ctx[ctx];
    x->sig &= (uint16_t)~x->wait_mask;
    x->wait_mask = 0;
    if (m->cur < 0 && m->status == NPK_ME_RUNNING && !m->ready && !c->hist_level &&
        (m->ctx_mode == 8 || !(ctx & 1))) {
        /* the ME idles and no other context is ready: this one runs (the same as READY
         * then picked at once, which leaves no ready cycles and no record but the state's) */
        if (c->wake_ahead) {
            /* its first words run in this step of the run loop, which makes its calendar
             * entry then (npk_me_run_woken): now, up to the run's end but for those that
             * read transfer registers others may write or test signals (more events of
             * this cycle may come); or after the step's events */
            me_run_ctx_cal(c, m, ctx, t, 0);
            if (c->wake_ahead == WAKE_NOW) run_woken(c, m, c->now, c->run_end, c->now);
            else c->woke |= 1u << m->idx;
        } else {
            me_run_ctx(c, m, ctx, t);
        }
        return;
    }
    ctx_state(c, m, ctx, NPK_CTX_READY);
    if (m->cur < 0 && m->status == NPK_ME_RUNNING)
        me_pick(c, m, t);
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

void npk_me_pick(npk_chip *c, npk_me *m, uint64_t t)
{
    me_pick(c, m, t);
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
    npk_me_set_next(c, m, NPK_NEVER);
}

/* the running context, swapping out to wait for its signals (not voluntarily): ready if
 * they have come (`done`: wait_done), asleep until they do; the next one picked */
static inline __attribute__((always_inline)) void swap_out_waiting(npk_chip *c, npk_me *m, int ctx, int done, uint64_t t)
{
    npk_ctx *x = &m->ctx[ctx];
    if (done) {
        x->sig &= (uint16_t)~x->wait_mask;
        x->wait_mask = 0;
        ctx_state(c, m, ctx, NPK_CTX_READY);
    } else {
        ctx_state(c, m, ctx, NPK_CTX_SLEEP);
    }
    me_pick(c, m, t);
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
        ctx_state(c, m, ctx, NPK_CTX_READY);
        me_pick(c, m, t);
        return;
    }
    swap_out_waiting(c, m, ctx, wait_done(x), t);
}

/* ---- instruction semantics ---------------------------------------------------- */

static int branch_to(npk_exec *e, uint32_t target, uint32_t defer)
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

static int input_state(npk_exec *e, uint32_t n)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    if (n == NPK_INPUT_STATE_NN_EMPTY) return m->nn_put == m->nn_get;   /* own ring */
    if (n == NPK_INPUT_STATE_NN_FULL) {                                /* the ring we write */
        npk_me *nx = nn_target(c, m);
        if (!nx) return 0;
        return ((nx->nn_put - nx->nn_get) & 127) >= c->cfg.nn_full_threshold;
    }
    if (n >= NPK_INPUT_STATE_SCR_RING0_STATUS && n <= NPK_INPUT_STATE_SCR_RING11_STATUS)
        return npk_scr_ring_full(c, (int)(n - NPK_INPUT_STATE_SCR_RING0_STATUS));
    return 0;  /* FCI_NOT_EMPTY / FCI_FULL: no flow-control interface modelled */
}

static void exec_alu(npk_exec *e, const npk_uop *u)
{
    switch (u->op) {
#define OWN(NAME, CODE) case CODE: npk_alu_##NAME(e, u); return;
    NPK_ALU_OWN_OPS(OWN)
#undef OWN
    default: break;
    }
    uint32_t a, b, r = 0;
    uint8_t f;
    npk_alu_sources(e, u, &a, &b);
    switch (u->op) {
#define PLAIN(NAME, CODE) case CODE: f = npk_alu_##NAME(a, b, e->x->cc, &r); break;
    NPK_ALU_PLAIN_OPS(PLAIN)
#undef PLAIN
    default:
        e->illegal = 1;
        return;
    }
    e->x->cc = f;
    npk_wr(e, &u->d, r);
    npk_set_alu(e, a, b, r);
}

/* byte_align_be (shift type right) / byte_align_le (left) */
static void exec_byte_align(npk_exec *e, const npk_uop *u, uint32_t a, uint32_t st, uint32_t amt)
{
    npk_me *m = e->m;
    if ((st != NPK_SHIFT_TYPE_RIGHT && st != NPK_SHIFT_TYPE_LEFT) || amt) { e->illegal = 1; return; }
    uint32_t idx = m->byte_index & 3;
    uint64_t cat;
    uint32_t sh;
    if (st == NPK_SHIFT_TYPE_RIGHT) {  /* BE: prev:B, right shift 32,24,16,8 (HRM p.43 Table 6) */
        cat = ((uint64_t)m->prev_b << 32) | a;
        sh = 32 - 8 * idx;
    } else {                            /* LE: A:prev, right shift 0,8,16,24 */
        cat = ((uint64_t)a << 32) | m->prev_a;
        sh = 8 * idx;
    }
    uint32_t r = (uint32_t)(cat >> sh);
    npk_wr(e, &u->d, r);
    e->x->cc = npk_cc_logic(r);
    m->prev_a = a;
    m->prev_b = a;
    m->alu_out = r;
}

static void exec_alu_shf(npk_exec *e, const npk_uop *u)
{
    npk_me *m = e->m;
    uint64_t w = u->w;
    uint32_t a = npk_rd(e, &u->a), b = npk_rd(e, &u->b);
    if (NPK_ALU_SHF_SWAP(w)) { uint32_t t = a; a = b; b = t; }
    uint32_t op = u->op, st = NPK_ALU_SHF_SHIFT_TYPE(w), amt = NPK_ALU_SHF_SHIFT_AMT(w);
    uint32_t r;
    if (st == NPK_SHIFT_TYPE_DBL_RIGHT) {
        if (op != NPK_ALU_SHF_OP_B) { e->illegal = 1; return; }
        uint32_t n = amt ? amt : (m->alu_out & 31);
        r = n ? (uint32_t)((((uint64_t)a << 32) | b) >> n) : b;
    } else if (op == NPK_ALU_SHF_OP_BYTE_ALIGN) {
        exec_byte_align(e, u, a, st, amt);
        return;
    } else if (op == NPK_ALU_SHF_OP_ASR) {
        uint32_t n = st == NPK_SHIFT_TYPE_RIGHT ? (amt ? amt : (m->alu_out & 31)) : 0;
        if (st == NPK_SHIFT_TYPE_ROT_LEFT) r = rotr(b, amt);
        else if (st == NPK_SHIFT_TYPE_LEFT) r = shift_b(m->alu_out, b, st, amt);
        else r = (uint32_t)((int32_t)b >> n);
    } else {
        uint32_t sb = shift_b(m->alu_out, b, st, amt);
        switch (op) {
        case NPK_ALU_SHF_OP_B: r = sb; break;
        case NPK_ALU_SHF_OP_NOTB: r = ~sb; break;
        case NPK_ALU_SHF_OP_AND: r = a & sb; break;
        case NPK_ALU_SHF_OP_NOTAND: r = ~a & sb; break;
        case NPK_ALU_SHF_OP_ANDNOT: r = a & ~sb; break;
        default: r = a | sb; break;   /* NPK_ALU_SHF_OP_OR */
        }
    }
    npk_wr(e, &u->d, r);
    e->x->cc = npk_cc_logic(r);
    npk_set_alu(e, a, b, r);
}

/* ld_field: u->d the field written (also read: the bytes kept), u->a the source */
static void exec_ld_field(npk_exec *e, const npk_uop *u)
{
    uint64_t w = u->w;
    uint32_t src = npk_rd(e, &u->a);
    uint32_t old = NPK_LD_FIELD_W_CLR(w) ? 0 : npk_rd(e, &u->d);
    if (u->d.kind == NPK_OPK_NONE && u->d.num == 0) old = 0;
    uint32_t st = NPK_LD_FIELD_SHIFT_TYPE(w);
    uint32_t sh = st == NPK_SHIFT_TYPE_DBL_RIGHT ? src : shift_b(e->m->alu_out, src, st, NPK_LD_FIELD_SHIFT_AMT(w));
    uint32_t bm = NPK_LD_FIELD_BYTE_MASK(w), mask = 0;
    for (int i = 0; i < 4; i++)
        if (bm & (1u << i)) mask |= 0xFFu << (8 * i);
    uint32_t r = (old & ~mask) | (sh & mask);
    npk_wr(e, &u->d, r);
    if (NPK_LD_FIELD_LOAD_CC(w)) e->x->cc = npk_cc_logic(r);
    e->m->alu_out = r;
}

/* immed: u->d the destination, u->b the constant field (predecode) */
static void exec_immed(npk_exec *e, const npk_uop *u)
{
    npk_me *m = e->m;
    uint64_t w = u->w;
    if (u->b.kind != NPK_OPK_IMM) { e->illegal = 1; return; }  /* neither field a constant */
    uint32_t lo = u->b.num;
    uint32_t kind = NPK_IMMED_KIND(w), shift = NPK_IMMED_SHIFT(w), hi = NPK_IMMED_HI_BYTE(w);
    uint32_t r;
    if (m->csr_rd_valid) {
        /* local_csr_rd returns its value through the following immed */
        r = m->csr_rd_value;
        m->csr_rd_valid = 0;
        npk_wr(e, &u->d, r);
        m->alu_out = r;
        return;
    }
    if (kind == NPK_IMMED_KIND_IMMED) {
        if (shift == 3) { e->illegal = 1; return; }
        r = (hi << 8) | lo;
        if (NPK_IMMED_INVERT(w)) r = ~r;
        r <<= 8 * shift;
    } else if (kind == NPK_IMMED_KIND_BYTE) {
        uint32_t old = npk_rd(e, &u->d);
        r = (old & ~(0xFFu << (8 * shift))) | (lo << (8 * shift));
    } else if (kind == NPK_IMMED_KIND_WORD) {
        uint32_t old = npk_rd(e, &u->d);
        uint32_t s = (shift >> 1) * 16;
        r = (old & ~(0xFFFFu << s)) | (((hi << 8) | lo) << s);
    } else {
        e->illegal = 1;
        return;
    }
    npk_wr(e, &u->d, r);
    m->alu_out = r;
}

static void exec_mul(npk_exec *e, const npk_uop *u)
{
    npk_me *m = e->m;
    uint64_t w = u->w;
    if (NPK_MUL_STEP_LAST(w)) {
        uint32_t r = NPK_MUL_STEP_STEP(w) ? m->mul_hi : m->mul_lo;
        npk_wr(e, &u->d, r);
        m->alu_out = r;
        return;
    }
    uint32_t a = npk_rd(e, &u->a);
    uint32_t b = npk_rd(e, &u->b);
    if (NPK_MUL_STEP_SWAP(w)) { uint32_t t = a; a = b; b = t; }
    uint64_t p;
    switch (NPK_MUL_STEP_MUL_SIZE(w)) {
    case NPK_MUL_SIZE__24X8: p = (uint64_t)(a & 0xFFFFFF) * (b & 0xFF); break;
    case NPK_MUL_SIZE__16X16: p = (uint64_t)(a & 0xFFFF) * (b & 0xFFFF); break;
    default: p = (uint64_t)a * b; break;
    }
    m->mul_lo = (uint32_t)p;
    m->mul_hi = (uint32_t)(p >> 32);
    m->prev_a = a;
    m->prev_b = b;
}

/* a local_csr_wr executed at cycle `now` takes effect csr_write_to_use cycles later (the
 * run loop or npk_me_advance applies it): queue it; returns that cycle.  The queue has room. */
static inline uint64_t queue_csr_write(npk_chip *c, npk_me *m, int ctx, uint32_t addr, uint32_t v, uint64_t now)
{
    npk_pending_csr *p = &m->pend[m->npend++];
    p->at = now + c->cfg.csr_write_to_use;
    p->addr = addr;
    p->value = v;
    p->ctx = ctx;
    if (p->at < m->pend_min) npk_me_set_pend(c, m, p->at);
    return p->at;
}

/* local_csr_rd / _wr: u->a the written value's operand (predecode) */
static void exec_local_csr(npk_exec *e, const npk_uop *u)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    uint32_t addr = NPK_LOCAL_CSR_CSR(u->w) << 2;
    if (!NPK_LOCAL_CSR_WRITE(u->w)) {
        m->csr_rd_value = npk_lcsr_read(c, m, e->ctx, addr);
        m->csr_rd_valid = 2;
        return;
    }
    uint32_t v = npk_rd(e, &u->a);
    if (e->illegal) return;
    if (m->npend >= NPK_MAX_PEND) npk_me_apply_csrs(c, m);
    if (m->npend >= NPK_MAX_PEND) { npk_lcsr_write(c, m, e->ctx, addr, v); return; }
    queue_csr_write(c, m, e->ctx, addr, v, c->now);
}

/* a swap's ctx_arb (not a halt, a kill or an illegal word): what the context waits for,
 * and the swap after its defer slots */
static void ctx_arb_wait(const npk_chip *c, npk_ctx *x, uint64_t w)
{
    uint32_t sigs = NPK_CTX_ARB_SIGS(w) << 1;
    x->wait_mask = (uint16_t)sigs;
    x->wait_any = (uint8_t)NPK_CTX_ARB_ANY(w);
    x->swap_voluntary = (uint8_t)(NPK_CTX_ARB_VOLUNTARY(w) && !sigs);
    x->swap_target = NPK_CTX_ARB_BR_ENABLE(w) ? NPK_CTX_ARB_TARGET(w) % c->cfg.ustore_words : UINT32_MAX;
    x->swap_pending = 1;
    x->swap_left = (uint8_t)NPK_CTX_ARB_DEFER(w);
}

/* returns -1 when the instruction dealt with the context itself (halt, kill) */
static int exec_ctx_arb(npk_exec *e, const npk_uop *u)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    npk_ctx *x = e->x;
    uint64_t w = u->w;
    uint32_t sigs = NPK_CTX_ARB_SIGS(w) << 1;
    int bpt = (int)NPK_CTX_ARB_BPT(w), any = (int)NPK_CTX_ARB_ANY(w);
    int vol = (int)NPK_CTX_ARB_VOLUNTARY(w), dashes = (int)NPK_CTX_ARB_DASHES(w);
    if (bpt) {
        npk_me_stop(c, m, e->ctx, NPK_ME_HALT, e->pc, w, "halt (ctx_arb[bpt])");
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
    ctx_arb_wait(c, x, w);
    return 0;
}

/* Does a branch on condition `cond` (mev2.yaml branch_cond) with parameter p go, for
 * condition codes f in context ctx?  -1: the condition depends on more (signals,
 * input states), or is undefined.  Pre-decoding turns this into masks (npk_uop). */
static int cond_holds(uint32_t cond, uint8_t f, uint32_t ctx, uint32_t p)
{
    int z = !!(f & F_Z), n = !!(f & F_N), cy = !!(f & F_C), v = !!(f & F_V);
    switch (cond) {
    case NPK_BRANCH_COND_EQ: return z;
    case NPK_BRANCH_COND_NE: return !z;
    case NPK_BRANCH_COND_MI: return n;
    case NPK_BRANCH_COND_PL: return !n;
    case NPK_BRANCH_COND_CS: return cy;
    case NPK_BRANCH_COND_CC: return !cy;
    case NPK_BRANCH_COND_VS: return v;
    case NPK_BRANCH_COND_VC: return !v;
    case NPK_BRANCH_COND_GE: return n == v;
    case NPK_BRANCH_COND_LT: return n != v;
    case NPK_BRANCH_COND_LE: return z || n != v;
    case NPK_BRANCH_COND_GT: return !z && n == v;
    case NPK_BRANCH_COND_CTX_EQ: return ctx == p;
    case NPK_BRANCH_COND_CTX_NE: return ctx != p;
    case NPK_BRANCH_COND_ALWAYS: return 1;
    default: return -1;
    }
}

/* the branch to u->target is taken for condition codes cc in context ctx (masks of cond_holds) */
static inline int cond_taken(const npk_uop *u, uint8_t cc, int ctx)
{
    return (u->ccmask >> (cc & 15)) & (u->ctxmask >> ctx) & 1;
}

/* taken: the aborted cycles (a branch with defer slots aborts fewer); pc or the deferred branch */
static inline int take_branch(npk_ctx *x, const npk_uop *u)
{
    if (u->defer == 0) {
        x->pc = u->target;
    } else {
        x->br_pending = 1;
        x->br_left = u->defer;
        x->br_target = u->target;
    }
    return u->extra;
}

/* branch on a condition (mev2.yaml branch_cond); returns the aborted cycles */
static int exec_branch(npk_exec *e, const npk_uop *u)
{
    uint64_t w = u->w;
    npk_ctx *x = e->x;
    uint32_t p = NPK_BRANCH_PARAM(w);
    int take;
    switch (u->op) {
    case NPK_BRANCH_COND_SIGNAL: case NPK_BRANCH_COND_NO_SIGNAL: {
        if (p == 0) { e->illegal = 1; return 0; }
        int set = (x->sig >> p) & 1;
        if (set) x->sig &= (uint16_t)~(1u << p);   /* the test consumes the signal */
        take = u->op == NPK_BRANCH_COND_SIGNAL ? set : !set;
        break;
    }
    case NPK_BRANCH_COND_INP_STATE: take = input_state(e, p); break;
    case NPK_BRANCH_COND_NO_INP_STATE: take = !input_state(e, p); break;
    default:
        if (!npk_branch_cond_name(u->op)) { e->illegal = 1; return 0; }
        take = cond_taken(u, x->cc, e->ctx);
        break;
    }
    return take ? take_branch(x, u) : 0;
}

/* br_bset / br_bclr: u->a the register, u->b the bit position + 1 (predecode) */
static int exec_br_bit(npk_exec *e, const npk_uop *u)
{
    if (u->b.kind != NPK_OPK_IMM) { e->illegal = 1; return 0; }
    uint32_t reg = npk_rd(e, &u->a), pos = npk_rd(e, &u->b);
    uint32_t bit = (pos + 31) & 31;
    int set = (reg >> bit) & 1;
    return set == (int)NPK_BR_BIT_SET(u->w) ? take_branch(e->x, u) : 0;
}

/* br=byte / br!=byte: u->a the register, u->b the compare value (predecode) */
static int exec_br_byte(npk_exec *e, const npk_uop *u)
{
    uint32_t reg = npk_rd(e, &u->a), val = npk_rd(e, &u->b);
    uint32_t byte = (reg >> (8 * NPK_BR_BYTE_BYTE_NO(u->w))) & 0xFF;
    int eq = byte == (val & 0xFF);
    return eq == (int)NPK_BR_BYTE_EQUAL(u->w) ? take_branch(e->x, u) : 0;
}

/* ---- pre-decoding ------------------------------------------------------------ */

static npk_opnd opnd_u(uint32_t num, int bank, int is_dest)
{
    npk_opdef d = npk_unrestricted_def(num, is_dest);
    uint16_t key = (uint16_t)((d.num & 127) * NPK_RF_FILES);
    npk_opnd o = {d.kind, d.file, d.via, d.step, d.offset, (uint8_t)bank, (uint16_t)d.num, (uint16_t)(key + bank), 127, 0};
    switch (d.kind) {
    case NPK_OPK_ABS: o.rmask = 0; break;
    case NPK_OPK_INDEX:
        if (d.file == NPK_OPFILE_LM && d.step == 0 && d.num < 16 && (d.offset || d.num == 0)) {
            int n = d.via == NPK_OPVIA_LM_ADDR1;
            o.lm = (uint8_t)(1 + n);
            o.key = (uint16_t)((16 * n + d.num) * NPK_RF_FILES + NPK_RF_LM_STAGE);
            o.rmask = 0;
        }
        break;
    case NPK_OPK_XFER: o.key = (uint16_t)(key + NPK_RF_XFER + (is_dest ? XK_SOUT : XK_SIN)); break;
    case NPK_OPK_DXFER: o.key = (uint16_t)(key + NPK_RF_XFER + (is_dest ? XK_DOUT : XK_DIN)); break;
    default: break;
    }
    return o;
}

static npk_opnd opnd_r(uint32_t num, uint32_t msb, int bank, int is_dest)
{
    uint32_t u = npk_restricted_to_u(num, msb, is_dest);
    if (u == NPK_OPERAND_ILLEGAL) return (npk_opnd){NPK_OPK_ILLEGAL, 0, 0, 0, 0, (uint8_t)bank, 0, 0, 0, 0};
    return opnd_u(u, bank, is_dest);
}

static int opnd_is_nn(const npk_opnd *o)
{
    return o->kind == NPK_OPK_NN || o->file == NPK_OPFILE_NN;
}

/* A word is "local" when executing it reads and writes only state of its own ME that
 * no other ME or unit can change in the meantime: datapath instructions without
 * next-neighbour operands, branches on condition codes, context number, bits and bytes,
 * jumps, local_csr_rd, and local_csr_wr, which only queues the write (npk_me.pend: it
 * takes effect csr_write_to_use cycles later, at its exact cycle in the run loop, or in
 * the run-ahead when only this ME's words read the CSR) as long as the queue has room
 * (LOCAL_QUEUED).  The run loop lets an ME execute local words ahead of the other MEs up
 * to the next unit completion or pending CSR write others can see, which gives exactly
 * the same results as lock-step execution.  (Every field the class
 * has is checked, whichever way it is used.)  A ctx_arb that swaps (LOCAL_SWAP) changes
 * only this ME's contexts, but which one runs next depends on the signals they have: it
 * runs ahead only as far as no other ME's signal can reach this one (npk_chip.lookahead). */
enum { LOCAL_NO = 0, LOCAL_YES = 1, LOCAL_QUEUED = 2, LOCAL_SWAP = 3 };
static int uop_is_local(const npk_uop *u)
{
    uint64_t w = u->w;
    npk_opnd f[3];
    switch (u->cls) {
    case NPK_IC_ALU:
        f[0] = opnd_u(NPK_ALU_A_SRC(w), 0, 0); f[1] = opnd_u(NPK_ALU_B_SRC(w), 0, 0);
        f[2] = opnd_u(NPK_ALU_DEST(w), 0, 0);
        break;
    case NPK_IC_IMMED:
        f[0] = opnd_u(NPK_IMMED_A_SRC(w), 0, 0); f[1] = opnd_u(NPK_IMMED_B_SRC(w), 0, 0); f[2] = f[1];
        break;
    case NPK_IC_MUL_STEP:
        f[0] = opnd_u(NPK_MUL_STEP_A_SRC(w), 0, 0); f[1] = opnd_u(NPK_MUL_STEP_B_SRC(w), 0, 0); f[2] = f[1];
        break;
    case NPK_IC_JUMP:
        f[0] = opnd_u(NPK_JUMP_A_SRC(w), 0, 0); f[1] = opnd_u(NPK_JUMP_B_SRC(w), 0, 0); f[2] = f[1];
        break;
    case NPK_IC_ALU_SHF:
        f[0] = opnd_r(NPK_ALU_SHF_A_SRC(w), 0, 0, 0); f[1] = opnd_r(NPK_ALU_SHF_B_SRC(w), 0, 0, 0);
        f[2] = opnd_r(NPK_ALU_SHF_DEST(w), 0, 0, 0);
        break;
    case NPK_IC_LD_FIELD:
        f[0] = opnd_r(NPK_LD_FIELD_A_SRC(w), 0, 0, 0); f[1] = opnd_r(NPK_LD_FIELD_B_SRC(w), 0, 0, 0); f[2] = f[1];
        break;
    case NPK_IC_BR_BIT:
        f[0] = opnd_r(NPK_BR_BIT_A_SRC(w), 0, 0, 0); f[1] = opnd_r(NPK_BR_BIT_B_SRC(w), 0, 0, 0); f[2] = f[1];
        break;
    case NPK_IC_BR_BYTE:
        f[0] = opnd_r(NPK_BR_BYTE_A_SRC(w), 0, 0, 0); f[1] = opnd_r(NPK_BR_BYTE_B_SRC(w), 0, 0, 0); f[2] = f[1];
        break;
    case NPK_IC_BRANCH: {
        uint32_t cond = NPK_BRANCH_COND(w);
        return cond < NPK_BRANCH_COND_SIGNAL || cond == NPK_BRANCH_COND_ALWAYS;
    }
    case NPK_IC_LOCAL_CSR:
        if (!NPK_LOCAL_CSR_WRITE(w)) return LOCAL_YES;
        f[0] = opnd_u(NPK_LOCAL_CSR_A_SRC(w), 0, 0); f[1] = opnd_u(NPK_LOCAL_CSR_B_SRC(w), 0, 0);
        return opnd_is_nn(&f[0]) || opnd_is_nn(&f[1]) ? LOCAL_NO : LOCAL_QUEUED;
    case NPK_IC_CTX_ARB: {
        /* a swap: not a halt (bpt), a kill (any alone) or an illegal word (exec_ctx_arb) */
        int sigs = NPK_CTX_ARB_SIGS(w) != 0, vol = (int)NPK_CTX_ARB_VOLUNTARY(w), dashes = (int)NPK_CTX_ARB_DASHES(w);
        if (NPK_CTX_ARB_BPT(w) || (!sigs && !vol && !dashes) || NPK_CTX_ARB_DEFER(w) > 2) return LOCAL_NO;
        return LOCAL_SWAP;
    }
    default:
        return LOCAL_NO;
    }
    return !opnd_is_nn(&f[0]) && !opnd_is_nn(&f[1]) && !opnd_is_nn(&f[2]) ? LOCAL_YES : LOCAL_NO;
}

/* the operands of u->w as its class uses them (see the exec_* functions) */
static void predecode_operands(const npk_chip *c, npk_uop *u, int ctx_mode)
{
    uint64_t w = u->w;
    switch (u->cls) {
    case NPK_IC_ALU:
        u->op = (uint8_t)NPK_ALU_OP(w);
        u->a = opnd_u(NPK_ALU_A_SRC(w), 0, 0);
        u->b = opnd_u(NPK_ALU_B_SRC(w), 1, 0);
        u->d = opnd_u(NPK_ALU_DEST(w), (int)NPK_ALU_DEST_BANK(w), 1);
        break;
    case NPK_IC_ALU_SHF: {
        uint32_t msb = NPK_ALU_SHF_IMM_MSB(w);
        u->op = (uint8_t)NPK_ALU_SHF_OP(w);
        u->a = opnd_r(NPK_ALU_SHF_A_SRC(w), msb, 0, 0);
        u->b = opnd_r(NPK_ALU_SHF_B_SRC(w), msb, 1, 0);
        u->d = opnd_r(NPK_ALU_SHF_DEST(w), msb, (int)NPK_ALU_SHF_DEST_BANK(w), 1);
        break;
    }
    case NPK_IC_LD_FIELD: {
        uint32_t msb = NPK_LD_FIELD_IMM_MSB(w);
        if (NPK_LD_FIELD_DEST_IS_B(w)) {
            u->d = opnd_r(NPK_LD_FIELD_B_SRC(w), msb, 1, 1);
            u->a = opnd_r(NPK_LD_FIELD_A_SRC(w), msb, 0, 0);
        } else {
            u->d = opnd_r(NPK_LD_FIELD_A_SRC(w), msb, 0, 1);
            u->a = opnd_r(NPK_LD_FIELD_B_SRC(w), msb, 1, 0);
        }
        break;
    }
    case NPK_IC_IMMED: {
        npk_opnd a = opnd_u(NPK_IMMED_A_SRC(w), 0, 0), b = opnd_u(NPK_IMMED_B_SRC(w), 1, 0);
        if (b.kind == NPK_OPK_IMM) { u->b = b; u->d = opnd_u(NPK_IMMED_A_SRC(w), 0, 1); }
        else if (a.kind == NPK_OPK_IMM) { u->b = a; u->d = opnd_u(NPK_IMMED_B_SRC(w), 1, 1); }
        else u->b = (npk_opnd){NPK_OPK_ILLEGAL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        break;
    }
    case NPK_IC_MUL_STEP:
        if (NPK_MUL_STEP_LAST(w)) {
            u->d = opnd_u(NPK_MUL_STEP_A_SRC(w), (int)NPK_MUL_STEP_LAST_BANK(w), 1);
        } else {
            u->a = opnd_u(NPK_MUL_STEP_A_SRC(w), 0, 0);
            u->b = opnd_u(NPK_MUL_STEP_B_SRC(w), 1, 0);
        }
        break;
    case NPK_IC_LOCAL_CSR: {
        npk_opnd a = opnd_u(NPK_LOCAL_CSR_A_SRC(w), 0, 0);
        u->a = a.kind == NPK_OPK_IMM ? opnd_u(NPK_LOCAL_CSR_B_SRC(w), 1, 0) : a;
        break;
    }
    case NPK_IC_BR_BIT: {
        npk_opnd a = opnd_r(NPK_BR_BIT_A_SRC(w), 0, 0, 0), b = opnd_r(NPK_BR_BIT_B_SRC(w), 0, 1, 0);
        if (b.kind == NPK_OPK_IMM) { u->a = a; u->b = b; }
        else if (a.kind == NPK_OPK_IMM) { u->a = b; u->b = a; }
        else u->b = (npk_opnd){NPK_OPK_ILLEGAL, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        break;
    }
    case NPK_IC_BR_BYTE: {
        uint32_t msb = NPK_BR_BYTE_IMM_MSB(w);
        npk_opnd a = opnd_r(NPK_BR_BYTE_A_SRC(w), msb, 0, 0), b = opnd_r(NPK_BR_BYTE_B_SRC(w), msb, 1, 0);
        if (b.kind == NPK_OPK_IMM) { u->a = a; u->b = b; }
        else { u->a = b; u->b = a; }
        break;
    }
    case NPK_IC_JUMP: {
        npk_opnd b = opnd_u(NPK_JUMP_B_SRC(w), 1, 0);
        u->a = b.kind == NPK_OPK_IMM ? opnd_u(NPK_JUMP_A_SRC(w), 0, 0) : b;
        break;
    }
    case NPK_IC_BRANCH:
        u->op = (uint8_t)NPK_BRANCH_COND(w);
        if (u->op == NPK_BRANCH_COND_CTX_EQ || u->op == NPK_BRANCH_COND_CTX_NE) {
            u->ccmask = 0xFFFF;
            for (uint32_t x = 0; x < 8; x++)
                if (cond_holds(u->op, 0, x, NPK_BRANCH_PARAM(w)) == 1) u->ctxmask |= (uint8_t)(1u << x);
        } else {
            u->ctxmask = 0xFF;
            for (uint32_t f = 0; f < 16; f++)
                if (cond_holds(u->op, (uint8_t)f, 0, 0) == 1) u->ccmask |= (uint16_t)(1u << f);
        }
        break;
    case NPK_IC_SRAM: case NPK_IC_SCRATCH: case NPK_IC_DRAM: case NPK_IC_MSF: case NPK_IC_PCI:
    case NPK_IC_CAP: case NPK_IC_HASH:
        u->cmd = npk_mem_command((enum npk_iclass)u->cls, w);
        u->a = opnd_r(NPK_SRAM_A_SRC(w), 0, 0, 0);
        u->b = opnd_r(NPK_SRAM_B_SRC(w), 0, 1, 0);
        if (!u->cmd) u->cls = NPK_IC_ILLEGAL;
        else npk_predecode_command(c, u, ctx_mode);
        break;
    default:
        break;
    }
}

/* ---- the fast path ----------------------------------------------------------------
 * Words whose operands are GPRs and constants and whose effect is on this ME's registers
 * and condition codes alone (plain ALU and shift operations, immed, ld_field, branches on
 * condition codes and contexts, jumps), and the swaps and signal tests of this ME's
 * contexts (ctx_arb without defer slots, br_signal) run in a threaded loop (run_fast)
 * that keeps the context's state in locals; everything else goes through me_exec.  Both
 * give the same results: the run-ahead path uses run_fast, the lock-step path with a
 * history of every instruction (and the debugger) me_exec, and the fuzzer compares the
 * two (tests/fuzz, header flag bit 5). */
enum {
    F_GENERAL = 0,
#define F_ALU_ENUM(NAME, CODE) F_ALU_##NAME,
    NPK_ALU_PLAIN_OPS(F_ALU_ENUM)
#undef F_ALU_ENUM
    F_SHF_B, F_SHF_NOTB, F_SHF_AND, F_SHF_NOTAND, F_SHF_ANDNOT, F_SHF_OR, F_SHF_ASR,
    F_IMMED, F_IMMED_BYTE, F_IMMED_WORD, F_BRANCH, F_BR_BIT, F_BR_BYTE, F_JUMP, F_LD_FIELD,
    F_LCSR_WR, /* local_csr_wr: queue the write (npk_me.pend) */
    F_LM,      /* the word has local-memory operands: stage them, then u->fast_lm */
    F_XIN,     /* the word reads a read transfer register: not past the next event, then
                * u->fast_xin */
    F_CTX_ARB, /* a ctx_arb that swaps at once (no defer): the next context goes on in the loop */
    F_BR_SIG,  /* br_signal / br_!signal: not past the next event or the swap quiet point */
    F_COUNT
};

/* operands the fast path reads and writes itself */
static int fast_rf(const npk_opnd *o)
{
    return o->kind == NPK_OPK_GPR || o->kind == NPK_OPK_ABS || o->kind == NPK_OPK_XFER || o->kind == NPK_OPK_DXFER;
}
/* ... and local memory through an index register that is not post-incremented */
static int fast_src(const npk_opnd *o) { return fast_rf(o) || o->kind == NPK_OPK_IMM || o->lm; }
static int fast_dst(const npk_opnd *o) { return fast_rf(o) || o->kind == NPK_OPK_NONE || o->lm; }
static int fast_reg(const npk_opnd *o) { return o->kind == NPK_OPK_GPR || o->kind == NPK_OPK_ABS; }  /* read and written */
/* a source operand in a read transfer register file (what completions and the MSF write) */
static int reads_xfer_in(const npk_opnd *o)
{
    return (o->kind == NPK_OPK_XFER || o->kind == NPK_OPK_DXFER) &&
           ((o->key & (NPK_RF_FILES - 1)) == NPK_RF_XFER + XK_SIN || (o->key & (NPK_RF_FILES - 1)) == NPK_RF_XFER + XK_DIN);
}

static uint8_t fast_handler_of(const npk_uop *u);

/* an operand that is not a read transfer register, or one inside its context's window (a
 * relative number under 16: in 8-context mode 16 registers a context, in 4-context 32) */
static int xin_own(const npk_opnd *o)
{
    return !reads_xfer_in(o) || (o->rmask && o->num < 16);
}

/* words with local-memory operands go through F_LM, words that read a read transfer
 * register through F_XIN (first) */
static uint8_t fast_handler(npk_uop *u)
{
    uint8_t h = fast_handler_of(u);
    if (h == F_GENERAL) return h;
    if (u->a.lm || u->b.lm || u->d.lm) {
        u->fast_lm = h;
        h = F_LM;
    }
    if (reads_xfer_in(&u->a) || reads_xfer_in(&u->b)) {
        u->fast_xin = h;
        if (xin_own(&u->a) && xin_own(&u->b)) u->flags |= UOP_XIN_OWN;
        h = F_XIN;
    }
    return h;
}

static uint8_t fast_handler_of(const npk_uop *u)
{
    uint64_t w = u->w;
    switch (u->cls) {
    case NPK_IC_ALU:
        if (!fast_src(&u->a) || !fast_src(&u->b) || !fast_dst(&u->d)) return F_GENERAL;
        switch (u->op) {
#define F_ALU_CASE(NAME, CODE) case CODE: return F_ALU_##NAME;
        NPK_ALU_PLAIN_OPS(F_ALU_CASE)
#undef F_ALU_CASE
        default: return F_GENERAL;
        }
    case NPK_IC_ALU_SHF: {
        uint32_t st = NPK_ALU_SHF_SHIFT_TYPE(w);
        if (!fast_src(&u->a) || !fast_src(&u->b) || !fast_dst(&u->d) || st == NPK_SHIFT_TYPE_DBL_RIGHT) return F_GENERAL;
        switch (u->op) {
        case NPK_ALU_SHF_OP_B: return F_SHF_B;
        case NPK_ALU_SHF_OP_NOTB: return F_SHF_NOTB;
        case NPK_ALU_SHF_OP_AND: return F_SHF_AND;
        case NPK_ALU_SHF_OP_NOTAND: return F_SHF_NOTAND;
        case NPK_ALU_SHF_OP_ANDNOT: return F_SHF_ANDNOT;
        case NPK_ALU_SHF_OP_OR: return F_SHF_OR;
        case NPK_ALU_SHF_OP_ASR: return F_SHF_ASR;
        default: return F_GENERAL;
        }
    }
    case NPK_IC_IMMED:
        if (u->b.kind != NPK_OPK_IMM || !fast_dst(&u->d)) return F_GENERAL;
        switch (NPK_IMMED_KIND(w)) {
        case NPK_IMMED_KIND_IMMED: return NPK_IMMED_SHIFT(w) == 3 ? F_GENERAL : F_IMMED;
        case NPK_IMMED_KIND_BYTE: return fast_reg(&u->d) ? F_IMMED_BYTE : F_GENERAL;
        case NPK_IMMED_KIND_WORD: return fast_reg(&u->d) ? F_IMMED_WORD : F_GENERAL;
        default: return F_GENERAL;
        }
    case NPK_IC_BRANCH:
        if (cond_holds(u->op, 0, 0, 0) >= 0) return F_BRANCH;
        return (u->op == NPK_BRANCH_COND_SIGNAL || u->op == NPK_BRANCH_COND_NO_SIGNAL) && NPK_BRANCH_PARAM(w)
               ? F_BR_SIG : F_GENERAL;
    case NPK_IC_BR_BIT:
        return u->b.kind == NPK_OPK_IMM && fast_src(&u->a) ? F_BR_BIT : F_GENERAL;
    case NPK_IC_BR_BYTE:
        return fast_src(&u->a) && fast_src(&u->b) ? F_BR_BYTE : F_GENERAL;
    case NPK_IC_JUMP:
        return fast_src(&u->a) && u->a.kind != NPK_OPK_IMM ? F_JUMP : F_GENERAL;
    case NPK_IC_LD_FIELD:
        return fast_src(&u->a) && fast_reg(&u->d) ? F_LD_FIELD : F_GENERAL;
    case NPK_IC_LOCAL_CSR:
        return u->local == LOCAL_QUEUED && fast_src(&u->a) ? F_LCSR_WR : F_GENERAL;
    case NPK_IC_CTX_ARB:
        return u->local == LOCAL_SWAP && NPK_CTX_ARB_DEFER(w) == 0 ? F_CTX_ARB : F_GENERAL;
    default:
        return F_GENERAL;
    }
}

/* a unit command a turn issues itself (exec_plain_command): register or constant
 * operands, no indirect_ref, a swap without defer slots */
static int plain_command(const npk_uop *u)
{
    switch (u->cls) {
    case NPK_IC_SRAM: case NPK_IC_SCRATCH: case NPK_IC_DRAM: case NPK_IC_MSF: case NPK_IC_PCI:
    case NPK_IC_CAP: case NPK_IC_HASH:
        break;
    default:
        return 0;
    }
    const npk_cmd_pre *k = &u->mem;
    return (fast_reg(&u->a) || u->a.kind == NPK_OPK_IMM) && (fast_reg(&u->b) || u->b.kind == NPK_OPK_IMM) &&
           !(k->flags & NPK_CMDF_INDIRECT) && !((k->flags & NPK_CMDF_SWAP) && k->defer);
}

/* the branch fields every branch class shares: target (inside the control store), defer
 * slots, and the cycles a taken branch aborts */
static void predecode_branch(const npk_chip *c, npk_uop *u, uint32_t target, uint32_t defer)
{
    uint32_t pen = c->cfg.branch_taken_penalty;
    u->target = (uint16_t)(target % c->cfg.ustore_words);
    u->defer = (uint8_t)defer;
    u->extra = (uint8_t)(pen > defer ? pen - defer : 0);
}

/* a word that signals another ME through a local CSR (csr_write_to_use cycles on) */
int npk_word_signals_neighbour(uint64_t w)
{
    if (npk_iclass_of(w) != NPK_IC_LOCAL_CSR || !NPK_LOCAL_CSR_WRITE(w)) return 0;
    uint32_t addr = NPK_LOCAL_CSR_CSR(w) << 2;
    return addr == NPK_LCSR_NEXT_NEIGHBOR_SIGNAL || addr == NPK_LCSR_PREV_NEIGHBOR_SIGNAL;
}

void npk_predecode_word(const npk_chip *c, npk_uop *u, uint64_t w, int ctx_mode)
{
    memset(u, 0, sizeof *u);
    u->w = w;
    u->cls = (uint8_t)npk_iclass_of(u->w);
    predecode_operands(c, u, ctx_mode);
    u->local = (uint8_t)uop_is_local(u);
    switch (u->cls) {
    case NPK_IC_BRANCH: predecode_branch(c, u, NPK_BRANCH_TARGET(u->w), NPK_BRANCH_DEFER(u->w)); break;
    case NPK_IC_BR_BIT: predecode_branch(c, u, NPK_BR_BIT_TARGET(u->w), NPK_BR_BIT_DEFER(u->w)); break;
    case NPK_IC_BR_BYTE: predecode_branch(c, u, NPK_BR_BYTE_TARGET(u->w), NPK_BR_BYTE_DEFER(u->w)); break;
    case NPK_IC_JUMP: predecode_branch(c, u, 0, NPK_JUMP_DEFER(u->w)); break;
    case NPK_IC_IMMED: {
        uint32_t r = (NPK_IMMED_HI_BYTE(u->w) << 8) | u->b.num;
        if (NPK_IMMED_INVERT(u->w)) r = ~r;
        u->cmd = NPK_IMMED_SHIFT(u->w) < 3 ? r << (8 * NPK_IMMED_SHIFT(u->w)) : 0;
        break;
    }
    default: break;
    }
    u->fast = fast_handler(u);
    if (plain_command(u)) u->flags |= UOP_PLAIN_CMD;
}

/* ---- execution ------------------------------------------------------------------ */

/* a breakpoint at pc for this thread stops the run before the instruction (once) */
static int breakpoint(npk_chip *c, npk_me *m, int ctx, uint32_t pc)
{
    if (m->bp_skip) {
        m->bp_skip = 0;
        return 0;
    }
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
            return 1;
        }
    }
    return 0;
}

/* the class's semantics; returns the aborted cycles of a taken branch, or -1 when the
 * instruction dealt with the context itself (halt, kill) */
static inline int dispatch(npk_exec *e, const npk_uop *u)
{
    switch ((enum npk_iclass)u->cls) {
    case NPK_IC_ALU: exec_alu(e, u); return 0;
    case NPK_IC_ALU_SHF: exec_alu_shf(e, u); return 0;
    case NPK_IC_IMMED: exec_immed(e, u); return 0;
    case NPK_IC_LD_FIELD: exec_ld_field(e, u); return 0;
    case NPK_IC_MUL_STEP: exec_mul(e, u); return 0;
    case NPK_IC_LOCAL_CSR: exec_local_csr(e, u); return 0;
    case NPK_IC_BRANCH: return exec_branch(e, u);
    case NPK_IC_BR_BIT: return exec_br_bit(e, u);
    case NPK_IC_BR_BYTE: return exec_br_byte(e, u);
    case NPK_IC_JUMP: return branch_to(e, npk_rd(e, &u->a), NPK_JUMP_DEFER(u->w));
    case NPK_IC_CTX_ARB: return exec_ctx_arb(e, u);
    case NPK_IC_SRAM: case NPK_IC_SCRATCH: case NPK_IC_DRAM: case NPK_IC_MSF: case NPK_IC_PCI:
    case NPK_IC_CAP: case NPK_IC_HASH:
        npk_issue_mem(e, u);
        return 0;
    case NPK_IC_CAP_CSR: npk_issue_cap_csr(e, u); return 0;
    default: e->illegal = 1; return 0;
    }
}

/* post-modify the index registers the instruction named with ++ / -- */
static void post_modify(npk_exec *e)
{
    npk_me *m = e->m;
    if (e->side & SIDE_LM0) { uint32_t *r = npk_lm_reg(m, e->ctx, 0); *r = (*r + (uint32_t)e->lm_delta[0]) & 0xFFC; }
    if (e->side & SIDE_LM1) { uint32_t *r = npk_lm_reg(m, e->ctx, 1); *r = (*r + (uint32_t)e->lm_delta[1]) & 0xFFC; }
    if (e->side & SIDE_T) m->t_index = (m->t_index + (uint32_t)e->t_delta) & 0x1FC;
    if (e->side & SIDE_NNGET) m->nn_get = (m->nn_get + 1) & 127;
}

/* the instruction is done: statistics, index registers, the local_csr_rd result's
 * lifetime, deferred branches and context swaps, and when the ME issues next */
static inline void retire(npk_exec *e, const npk_uop *u, int extra, int had_br, int had_swap, int csr_rd_before)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    npk_ctx *x = e->x;
    x->instructions++;   /* (the ME's instructions and executing cycles: their sum, npk_stats_me) */
    if (e->illegal) {
        char why[96];
        snprintf(why, sizeof why, "illegal instruction 0x%010llx (%s)", (unsigned long long)u->w,
                 npk_iclass_name(npk_iclass_of(u->w)));
        npk_me_stop(c, m, e->ctx, NPK_ME_ILLEGAL, e->pc, u->w, why);
        return;
    }
    if (extra < 0) return;
    if (e->side) post_modify(e);
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
    m->over_stalled = 0;
    if (x->swap_pending) {
        if (had_swap && x->swap_left) x->swap_left--;
        if (x->swap_left == 0) {
            x->swap_pending = 0;
            if (x->br_pending) { x->pc = x->br_target; x->br_pending = 0; }
            ctx_swap_out(c, m, e->ctx, t);
            return;
        }
    }
    npk_me_set_next(c, m, t);
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
    if (c->nbp && breakpoint(c, m, ctx, pc))
        return;
    const npk_uop *u = &m->uop[pc];
    npk_exec e;
    e.c = c;
    e.m = m;
    e.ctx = ctx;
    e.x = x;
    e.pc = pc;
    e.base = npk_relbase(m, ctx);
    e.illegal = 0;
    e.stall = 0;
    e.side = 0;
    int had_br = x->br_pending;
    int had_swap = x->swap_pending;
    int csr_rd_before = m->csr_rd_valid;
    x->pc = pc + 1;
    if (c->hist_level >= 2)
        npk_hist_rec(c, NPK_EV_INSTR, m->idx, ctx, 0, pc, (uint32_t)(u->w >> 8));
    int extra = dispatch(&e, u);
    if (e.stall) {
        /* the unit's command queue is full: retry when something completes */
        uint64_t retry = npk_ev_next_cycle(c);
        if (retry <= c->now) retry = c->now + 1;
        x->pc = pc;
        m->st.stalled_cycles += retry - c->now;
        m->over_stalled = 1;
        npk_me_set_next(c, m, retry);
        return;
    }
    if (__builtin_expect(c->prof != NULL, 0))
        npk_profile_rec(c, m, x, pc, had_br);
    retire(&e, u, extra, had_br, had_swap, csr_rd_before);
}

/* Run m's running context from m->next through fast words (fast_handler) while no
 * pending CSR write comes due and they start before `far`, or, for a word that reads a
 * read transfer register (F_XIN), before `limit`; returns how many it ran.  A fast word
 * reads and writes nothing but this context's registers, local memory and condition
 * codes, which no event changes except the read transfer registers (completions of this
 * ME's commands, the MSF device's deliveries), so only those words wait for the next
 * event (`limit`); the others may run on to the end of the run's budget (`far`).  A
 * swap or a signal test depends on the contexts' signals, which another ME may send:
 * those run only before `quiet` (quiet_point); a swap goes on with the next context in
 * the loop.  The context's registers stay in the ME; pc, condition codes, the deferred
 * branch and the statistics live in locals until it returns or swaps. */
static __attribute__((noinline)) uint64_t run_fast_loop(npk_chip *c, npk_me *m, uint64_t limit, uint64_t far,
                                                        uint64_t quiet)
{
    if (limit > m->pend_min) limit = m->pend_min;
    if (far > m->pend_min) far = m->pend_min;
    const npk_uop *uops = m->uop, *u;
    uint32_t *g = m->rf;
    uint32_t aluo = m->alu_out, pa = m->prev_a, pb = m->prev_b;   /* the ALU's remembered values */
    /* local memory: F_LM copies a word's local-memory sources into lm_stage, where its
     * handler reads them as registers; a local-memory destination is written there too
     * and copied to local memory (lm_wb_idx) before the next F_LM word or the end */
    uint32_t lm_wb_idx = UINT32_MAX, lm_wb_slot = 0;
    uint64_t total = 0;
    /* the running context's state while its words run (F_CTX_ARB swaps in the next one) */
    int ctx, brp, had_br;
    npk_ctx *x;
    uint32_t base, pc, brt;
    uint8_t cc, brl;
    uint64_t now, n, aborted;
context:
    ctx = m->cur;
    x = &m->ctx[ctx];
    if (x->swap_pending || m->csr_rd_valid) goto out;
    base = npk_relbase(m, ctx);
    pc = x->pc;
    cc = x->cc;
    brp = x->br_pending;
    brl = x->br_left;
    brt = x->br_target;
    now = m->next;
    n = 0;
    aborted = 0;

/* a fast operand's value; a fast destination's write ("--" drops it): registers are
 * (file, number), the number relative to the context's first register or absolute */
#define VAL(o) fast_val(g, base, &(o))
#define WR(o, v) do { if ((o).kind != NPK_OPK_NONE) g[fast_idx(base, &(o))] = (v); } while (0)
#define TAKE() do { if (u->defer == 0) pc = u->target; \
                    else { brp = 1; brl = u->defer; brt = u->target; } \
                    now += u->extra; aborted += u->extra; } while (0)

#if defined(__GNUC__)   /* threaded dispatch: one indirect jump at the end of every handler */
    static const void *const labels[F_COUNT] = {
        [F_GENERAL] = &&done,
#define F_ALU_LABEL(NAME, CODE) [F_ALU_##NAME] = &&alu_##NAME,
        NPK_ALU_PLAIN_OPS(F_ALU_LABEL)
#undef F_ALU_LABEL
        [F_SHF_B] = &&shf_b, [F_SHF_NOTB] = &&shf_notb, [F_SHF_AND] = &&shf_and, [F_SHF_NOTAND] = &&shf_notand,
        [F_SHF_ANDNOT] = &&shf_andnot, [F_SHF_OR] = &&shf_or, [F_SHF_ASR] = &&shf_asr,
        [F_IMMED] = &&immed, [F_IMMED_BYTE] = &&immed_byte, [F_IMMED_WORD] = &&immed_word,
        [F_BRANCH] = &&branch, [F_BR_BIT] = &&br_bit, [F_BR_BYTE] = &&br_byte, [F_JUMP] = &&jump,
        [F_LD_FIELD] = &&ld_field, [F_LCSR_WR] = &&lcsr_wr, [F_LM] = &&lm, [F_XIN] = &&xin,
        [F_CTX_ARB] = &&ctx_arb, [F_BR_SIG] = &&br_sig,
    };
#define HANDLER(h, label) label:
#define DISPATCH() goto *labels[u->fast]
#define DISPATCH_LM() goto *labels[u->fast_lm]
#define DISPATCH_XIN() goto *labels[u->fast_xin]
#else                   /* portable: a switch */
    uint8_t h;
#define HANDLER(h, label) case h:
#define DISPATCH() do { h = u->fast; goto dispatch; } while (0)
#define DISPATCH_LM() do { h = u->fast_lm; goto dispatch; } while (0)
#define DISPATCH_XIN() do { h = u->fast_xin; goto dispatch; } while (0)
#endif
/* the local-memory longword an F_LM operand names; writing back a staged destination */
#define LMI(o) (((*npk_lm_reg(m, ctx, (o).lm - 1) >> 2) | (o).num) & 0x3FF)
#define LM_WRITE_BACK() do { if (lm_wb_idx != UINT32_MAX) { m->lm[lm_wb_idx] = g[lm_wb_slot]; \
                                                         lm_wb_idx = UINT32_MAX; } } while (0)

/* the next word, if it may run here: fetch it and go to its handler */
#define NEXT() do { if (now >= far) goto done; u = &uops[pc]; \
                    had_br = brp; pc++; DISPATCH(); } while (0)
/* the context's words counted */
#define SAVE_STATS() do { x->instructions += n; m->st.aborted_cycles += aborted; \
                          m->over_stalled &= aborted == 0; } while (0)
/* the word is done: count it, the deferred branch's slot, the time (a taken branch
 * added its aborted cycles) */
#define RETIRE() do { n++; \
                      if (had_br && brp && --brl == 0) { brp = 0; pc = brt; } \
                      now += 1; NEXT(); } while (0)

    NEXT();
#if !defined(__GNUC__)
dispatch:
    switch (h) {
#endif

    HANDLER(F_XIN, xin) {
        /* past the next event only when nothing can write the context's own registers it
         * reads before the word's cycle: no command of the context that pushes, none of the
         * ME's that pushes outside its context's window, no MSF device event */
        if (now >= limit && !((u->flags & UOP_XIN_OWN) && now < c->msf_next && !x->xin_pending && !m->xin_foreign)) goto done;
        DISPATCH_XIN();
    }

    HANDLER(F_LM, lm) {
        LM_WRITE_BACK();
        uint32_t ia = u->a.lm ? LMI(u->a) : 0, ib = u->b.lm ? LMI(u->b) : 0, id = u->d.lm ? LMI(u->d) : 0;
        /* an address past the RAM is a fault: the general path reports it */
        uint32_t lmw = c->cfg.lm_words;
        if (ia >= lmw || ib >= lmw || id >= lmw) goto done;
        if (u->a.lm) g[u->a.key] = m->lm[ia];
        if (u->b.lm) g[u->b.key] = m->lm[ib];
        if (u->d.lm) {
            g[u->d.key] = m->lm[id];   /* read-modify-write destinations read it */
            lm_wb_idx = id;
            lm_wb_slot = u->d.key;
        }
        DISPATCH_LM();
    }

#define F_ALU_BODY(NAME, CODE) \
    HANDLER(F_ALU_##NAME, alu_##NAME) { \
        uint32_t a = VAL(u->a), b = VAL(u->b), r; \
        if (NPK_ALU_SWAP(u->w)) { uint32_t t = a; a = b; b = t; } \
        cc = npk_alu_##NAME(a, b, cc, &r); \
        WR(u->d, r); \
        pa = a; pb = b; aluo = r; \
        RETIRE(); \
    }
    NPK_ALU_PLAIN_OPS(F_ALU_BODY)
#undef F_ALU_BODY

#define F_SHF_BODY(h, label, EXPR) \
    HANDLER(h, label) { \
        uint32_t a = VAL(u->a), b = VAL(u->b); \
        if (NPK_ALU_SHF_SWAP(u->w)) { uint32_t t = a; a = b; b = t; } \
        uint32_t sb = shift_b(aluo, b, NPK_ALU_SHF_SHIFT_TYPE(u->w), NPK_ALU_SHF_SHIFT_AMT(u->w)); \
        uint32_t r = (EXPR); \
        (void)sb; \
        WR(u->d, r); \
        cc = npk_cc_logic(r); \
        pa = a; pb = b; aluo = r; \
        RETIRE(); \
    }
    F_SHF_BODY(F_SHF_B, shf_b, sb)
    F_SHF_BODY(F_SHF_NOTB, shf_notb, ~sb)
    F_SHF_BODY(F_SHF_AND, shf_and, a & sb)
    F_SHF_BODY(F_SHF_NOTAND, shf_notand, ~a & sb)
    F_SHF_BODY(F_SHF_ANDNOT, shf_andnot, a & ~sb)
    F_SHF_BODY(F_SHF_OR, shf_or, a | sb)
#undef F_SHF_BODY

    HANDLER(F_SHF_ASR, shf_asr) {
        uint32_t a = VAL(u->a), b = VAL(u->b), r;
        if (NPK_ALU_SHF_SWAP(u->w)) { uint32_t t = a; a = b; b = t; }
        uint32_t st = NPK_ALU_SHF_SHIFT_TYPE(u->w), amt = NPK_ALU_SHF_SHIFT_AMT(u->w);
        if (st == NPK_SHIFT_TYPE_ROT_LEFT) r = rotr(b, amt);
        else if (st == NPK_SHIFT_TYPE_LEFT) r = shift_b(aluo, b, st, amt);
        else r = (uint32_t)((int32_t)b >> (amt ? amt : (aluo & 31)));
        WR(u->d, r);
        cc = npk_cc_logic(r);
        pa = a; pb = b; aluo = r;
        RETIRE();
    }

    HANDLER(F_IMMED, immed) {
        WR(u->d, u->cmd);
        aluo = u->cmd;
        RETIRE();
    }
    HANDLER(F_IMMED_BYTE, immed_byte) {
        uint32_t s = 8 * NPK_IMMED_SHIFT(u->w), r = (VAL(u->d) & ~(0xFFu << s)) | ((uint32_t)u->b.num << s);
        WR(u->d, r);
        aluo = r;
        RETIRE();
    }
    HANDLER(F_IMMED_WORD, immed_word) {
        uint32_t s = (NPK_IMMED_SHIFT(u->w) >> 1) * 16;
        uint32_t r = (VAL(u->d) & ~(0xFFFFu << s)) | (((NPK_IMMED_HI_BYTE(u->w) << 8) | u->b.num) << s);
        WR(u->d, r);
        aluo = r;
        RETIRE();
    }

    HANDLER(F_BRANCH, branch) {
        if (cond_taken(u, cc, ctx)) TAKE();
        RETIRE();
    }
    HANDLER(F_BR_SIG, br_sig) {
        /* a signal comes with a completion (limit), this ME's CSR write (limit) or another
         * ME (quiet); the test takes the signal (exec_branch) */
        if (now >= limit || now >= quiet) goto done;
        uint32_t p = NPK_BRANCH_PARAM(u->w);
        int set = (x->sig >> p) & 1;
        if (set) x->sig &= (uint16_t)~(1u << p);
        if (set == (u->op == NPK_BRANCH_COND_SIGNAL)) TAKE();
        RETIRE();
    }
    HANDLER(F_BR_BIT, br_bit) {
        uint32_t reg = VAL(u->a), bit = ((uint32_t)u->b.num + 31) & 31;
        if ((int)((reg >> bit) & 1) == (int)NPK_BR_BIT_SET(u->w)) TAKE();
        RETIRE();
    }
    HANDLER(F_BR_BYTE, br_byte) {
        uint32_t reg = VAL(u->a), val = VAL(u->b);
        uint32_t byte = (reg >> (8 * NPK_BR_BYTE_BYTE_NO(u->w))) & 0xFF;
        if ((int)(byte == (val & 0xFF)) == (int)NPK_BR_BYTE_EQUAL(u->w)) TAKE();
        RETIRE();
    }
    HANDLER(F_JUMP, jump) {
        uint32_t t = VAL(u->a);
        if (t >= c->cfg.ustore_words) t %= c->cfg.ustore_words;
        if (u->defer == 0) pc = t;
        else { brp = 1; brl = u->defer; brt = t; }
        now += u->extra;
        aborted += u->extra;
        RETIRE();
    }
    HANDLER(F_LD_FIELD, ld_field) {
        uint64_t w = u->w;
        uint32_t src = VAL(u->a);
        uint32_t old = NPK_LD_FIELD_W_CLR(w) ? 0 : VAL(u->d);
        uint32_t st = NPK_LD_FIELD_SHIFT_TYPE(w);
        uint32_t sh = st == NPK_SHIFT_TYPE_DBL_RIGHT ? src : shift_b(aluo, src, st, NPK_LD_FIELD_SHIFT_AMT(w));
        uint32_t bm = NPK_LD_FIELD_BYTE_MASK(w), mask = 0;
        for (int i = 0; i < 4; i++)
            if (bm & (1u << i)) mask |= 0xFFu << (8 * i);
        uint32_t r = (old & ~mask) | (sh & mask);
        WR(u->d, r);
        if (NPK_LD_FIELD_LOAD_CC(w)) cc = npk_cc_logic(r);
        aluo = r;
        RETIRE();
    }
    HANDLER(F_LCSR_WR, lcsr_wr) {
        /* as exec_local_csr: the write takes effect csr_write_to_use cycles on, in
         * npk_me_advance or the run loop; the loop stops there.  A full queue: the
         * general path */
        if (m->npend >= NPK_MAX_PEND) goto done;
        uint64_t at = queue_csr_write(c, m, ctx, (uint32_t)NPK_LOCAL_CSR_CSR(u->w) << 2, VAL(u->a), now);
        if (limit > at) limit = at;
        if (far > at) far = at;
        RETIRE();
    }
    HANDLER(F_CTX_ARB, ctx_arb) {
        /* which context runs next depends on the signals the contexts have then: the swap
         * is made here only before any other ME's signal could reach this ME (`quiet`),
         * and not in a branch's defer slot (the general path has both) */
        if (now >= quiet || had_br) goto done;
        LM_WRITE_BACK();
        n++;
        x->pc = pc;
        x->cc = cc;
        x->br_pending = 0;   /* (not had_br: no branch is in flight) */
        SAVE_STATS();
        total += n;
        /* as retire: the swap at the next cycle, the context states as of this one */
        ctx_arb_wait(c, x, u->w);
        x->swap_pending = 0;
        uint64_t saved = c->now;
        c->now = now;
        ctx_swap_out(c, m, ctx, now + 1);
        c->now = saved;
        if (m->cur < 0) goto out;
        goto context;
    }
#if !defined(__GNUC__)
    default: goto done;
    }
#endif

done:
    LM_WRITE_BACK();
    if (n) {
        /* the word that stopped the loop was fetched but not executed */
        x->pc = (now >= far) ? pc : pc - 1;
        x->cc = cc;
        x->br_pending = (uint8_t)brp;
        x->br_left = brl;
        x->br_target = brt;
        npk_me_set_next(c, m, now);
        SAVE_STATS();
        total += n;
    }
out:
    if (total) {
        m->alu_out = aluo;
        m->prev_a = pa;
        m->prev_b = pb;
    }
    return total;
#undef VAL
#undef WR
#undef LMI
#undef LM_WRITE_BACK
#undef TAKE
#undef HANDLER
#undef DISPATCH
#undef DISPATCH_LM
#undef DISPATCH_XIN
#undef NEXT
#undef RETIRE
#undef SAVE_STATS
}

static inline uint64_t run_fast(npk_chip *c, npk_me *m, uint64_t limit, uint64_t far, uint64_t quiet)
{
    return m->uop[m->ctx[m->cur].pc].fast ? run_fast_loop(c, m, limit, far, quiet) : 0;
}

/* The first cycle from which another ME's signal could reach m (up to `horizon`, the
 * next completion): every ME is at c->now or later, and what it does from now on reaches
 * another ME c->lookahead cycles on at the soonest; but a neighbour-signal write that a
 * neighbour (ME m - 1: NEXT_NEIGHBOR_SIGNAL, m + 1: PREV_) has queued already takes
 * effect at its own cycle, which may come sooner. */
static uint64_t quiet_point(const npk_chip *c, const npk_me *m, uint64_t horizon)
{
    uint64_t q = c->now + c->lookahead;
    if (c->nbr_sig_words) {
        uint32_t i = (uint32_t)m->idx;
        if (i > 0 && c->me[i - 1].pend_min < q) q = c->me[i - 1].pend_min;
        if (i + 1 < c->cfg.num_me && c->me[i + 1].pend_min < q) q = c->me[i + 1].pend_min;
    }
    return q < horizon ? q : horizon;
}

/* The running context's word is a UOP_PLAIN_CMD command, executed here as me_exec would:
 * issued, retired, the context swapped out (ctx_swap[]) -- without the general path's
 * decoding and bookkeeping.  0: the general path's (a branch or a swap in flight, a
 * local_csr_rd value to keep, CSR writes due; a full queue). */
static int exec_plain_command(npk_chip *c, npk_me *m)
{
    int ctx = m->cur;
    npk_ctx *x = &m->ctx[ctx];
    uint32_t pc = x->pc;
    const npk_uop *u = &m->uop[pc];
    /* (CSR writes due now the run loop made before the turn) */
    if (!(u->flags & UOP_PLAIN_CMD) || x->br_pending || x->swap_pending || m->csr_rd_valid)
        return 0;
    uint32_t base = npk_relbase(m, ctx);
    const uint32_t *g = m->rf;
    /* (an event the pool cannot grow for, like a full queue, is the general path's) */
    if ((!c->nfree && c->pool_used == c->pool_cap) ||
        npk_issue(c, m, ctx, pc, u, fast_val(g, base, &u->a), fast_val(g, base, &u->b)) != NPK_ISSUED)
        return 0;
    /* retire */
    x->pc = pc + 1;
    x->instructions++;
    m->over_stalled = 0;
    if (x->swap_pending) {
        /* (ctx_swap_out: the command's swap has no target, is not voluntary, and waits
         * for all of its signals, of which there are some) */
        x->swap_pending = 0;
        swap_out_waiting(c, m, ctx, (x->sig & x->wait_mask) == x->wait_mask, c->now + 1);
    } else {
        npk_me_set_next(c, m, c->now + 1);
    }
    return 1;
}

/* A context woken on idle ME m by what the run loop did at c->now (a completion, a
 * signal, the MSF device) starts some cycles on (the swap): the words it runs first that
 * touch only this ME's registers run now, as a turn's run-ahead would run them (bounded
 * as run_fast_loop's) -- which saves the ME a turn of its own.  Its calendar entry is made
 * here. */
static inline void run_woken(npk_chip *c, npk_me *m, uint64_t limit, uint64_t far, uint64_t quiet)
{
    if (m->cur >= 0 && m->next > c->now && run_fast(c, m, limit, far, quiet))
        return;   /* (which made its calendar entry) */
    npk_me_set_next(c, m, m->next);
}

void npk_me_run_woken(npk_chip *c, npk_me *m, uint64_t horizon, uint64_t end)
{
    run_woken(c, m, horizon, end, quiet_point(c, m, horizon));
}

/* ME m's turn in the run loop at cycle c->now: its next instruction, then, when `ahead`,
 * the words that touch only this ME for as long as they start before `horizon` (the
 * next event), fast words that read no transfer register up to `end` (the run's
 * budget): the results are those of lock-step execution. */
void npk_me_advance(npk_chip *c, npk_me *m, uint64_t horizon, uint64_t end, int ahead)
{
    int fast = c->fast_ok;   /* (npk_run) */
    /* the turn's word: a plain unit command; a fast word and the fast words after it in
     * one entry of the fast loop (a swap or a signal test there, F_CTX_ARB and F_BR_SIG,
     * as in the run-ahead below); any other word */
    if (!(fast && (exec_plain_command(c, m) ||
                   (ahead ? run_fast(c, m, horizon, end, quiet_point(c, m, horizon))
                          : run_fast(c, m, c->now + 1, c->now + 1, c->now + 1)))))
        me_exec(c, m);
    if (!ahead || m->cur < 0) return;
    /* that word may have issued a command: its completion bounds the rest of the turn */
    if (npk_ev_next_cycle(c) < horizon) horizon = npk_ev_next_cycle(c);
    uint64_t saved = c->now, quiet_until = quiet_point(c, m, horizon);
    while (m->cur >= 0 && m->next < horizon) {
        if (m->pend_min <= m->next) {
            /* CSR writes due: those only this ME reads take effect here, in its own
             * timeline (nothing else could see the difference), and signals to its own
             * contexts where no other ME's can come first; others end the turn */
            int r = npk_me_due_csrs_reach(m, m->next);
            if (r == LCSR_CHIP || (r == LCSR_CONTEXTS && m->next >= quiet_until)) break;
            c->now = m->pend_min;   /* at their own cycle, as in lock-step (a woken context's
                                     * sleep and ready cycles count from there) */
            npk_me_apply_csrs(c, m);
            continue;
        }
        if (fast && run_fast(c, m, horizon, end, quiet_until)) continue;
        uint32_t pc = m->ctx[m->cur].pc;
        if (pc >= c->cfg.ustore_words) break;
        /* a full queue of CSR writes would make the write take effect now; a word that
         * swaps contexts (a ctx_arb, or the last of a swap's defer slots) does so past
         * `quiet_until` only in lock-step */
        int local = m->uop[pc].local;
        int swaps = local == LOCAL_SWAP || m->ctx[m->cur].swap_pending;
        if (local == LOCAL_NO || (local == LOCAL_QUEUED && m->npend >= NPK_MAX_PEND) || (swaps && m->next >= quiet_until))
            break;
        c->now = m->next;
        me_exec(c, m);
    }
    c->now = saved;
    /* fast words that read no read transfer register run on past the horizon (as in
     * run_fast_loop): those of a context swapped in at the end of the turn too */
    if (fast && m->cur >= 0 && m->next >= horizon) run_fast(c, m, horizon, end, quiet_until);
}
