/* Execution of one instruction: the context every semantics function gets, and
 * operand access through the pre-decoded operands (npk_opnd).  Internal to the core. */
#ifndef NPK_EXEC_H
#define NPK_EXEC_H
#include "internal.h"
#pragma GCC visibility push(hidden)   /* (as internal.h says) */

/* side effects an instruction leaves for its retirement (npk_exec.side) */
enum { SIDE_LM0 = 1, SIDE_LM1 = 2, SIDE_T = 4, SIDE_NNGET = 8 };

typedef struct npk_exec {
    npk_chip *c;
    npk_me *m;
    npk_ctx *x;
    int ctx;
    uint32_t pc;           /* address of the executing instruction */
    uint32_t base;         /* first register of the context's relative registers */
    int illegal;           /* the instruction is not one (the ME stops) */
    int stall;             /* unit queue full: the instruction did not issue */
    int side;              /* SIDE_*: index registers to post-modify */
    int lm_delta[2];
    int t_delta;
} npk_exec;

static inline uint32_t npk_relbase(const npk_me *m, int ctx)
{
    return m->ctx[ctx].base;   /* (npk_set_ctx_mode) */
}

/* LM_ADDR_n of a context, or the ME-wide copy when CTX_ENABLES[LM_ADDR_n_GLOBAL]
 * (bits 16/17) is set (HRM p.173) */
static inline uint32_t *npk_lm_reg(npk_me *m, int ctx, int which)
{
    return (m->ctx_enables & (1u << (16 + which))) ? &m->lm_global[which] : &m->ctx[ctx].lm_addr[which];
}

static inline npk_me *npk_next_me(npk_chip *c, npk_me *m)
{
    return (uint32_t)(m->idx + 1) < c->cfg.num_me ? &c->me[m->idx + 1] : NULL;
}

uint32_t npk_rd_slow(npk_exec *e, const npk_opnd *o);
void npk_wr_slow(npk_exec *e, const npk_opnd *o, uint32_t v);

/* read an operand (a destination read as a source gives its constant, 0 for "--") */
static inline __attribute__((always_inline)) uint32_t npk_rd(npk_exec *e, const npk_opnd *o)
{
    if (o->kind == NPK_OPK_GPR)
        return *npk_gpr(e->m, o->bank, e->base + o->num);
    if (o->kind == NPK_OPK_IMM)
        return o->num;
    return npk_rd_slow(e, o);
}

static inline __attribute__((always_inline)) void npk_wr(npk_exec *e, const npk_opnd *o, uint32_t v)
{
    if (o->kind == NPK_OPK_GPR && !e->c->nwp_reg) {
        *npk_gpr(e->m, o->bank, e->base + o->num) = v;
        return;
    }
    npk_wr_slow(e, o, v);
}

/* condition codes of a logical result */
static inline uint8_t npk_cc_logic(uint32_t r)
{
    return (uint8_t)((r == 0 ? F_Z : 0) | ((r >> 31) ? F_N : 0));
}

/* the ALU's remembered operands and result (byte_align, indirect shifts, indirect_ref) */
static inline void npk_set_alu(npk_exec *e, uint32_t a, uint32_t b, uint32_t r)
{
    e->m->prev_a = a;
    e->m->prev_b = b;
    e->m->alu_out = r;
}

/* the two sources of an alu-class word, in the order the instruction names them */
static inline void npk_alu_sources(npk_exec *e, const npk_uop *u, uint32_t *a, uint32_t *b)
{
    uint32_t x = npk_rd(e, &u->a), y = npk_rd(e, &u->b);
    if (NPK_ALU_SWAP(u->w)) { uint32_t t = x; x = y; y = t; }
    *a = x;
    *b = y;
}

/* issue.c: memory and unit commands */
void npk_issue_mem(npk_exec *e, const npk_uop *u);
void npk_predecode_command(const npk_chip *c, npk_uop *u, int ctx_mode);   /* at load: u->mem from u->cmd, the word, the ME's mode, the unit */
void npk_issue_cap_csr(npk_exec *e, const npk_uop *u);

/* alu.c: ALU operations that are instructions of their own (generated list) */
#define NPK_DECLARE_OWN(NAME, CODE) void npk_alu_##NAME(npk_exec *e, const npk_uop *u);
NPK_ALU_OWN_OPS(NPK_DECLARE_OWN)
#undef NPK_DECLARE_OWN

#pragma GCC visibility pop

#endif
