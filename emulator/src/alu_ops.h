/* Semantics of the ALU operations written alu[dest, a, OP, b] (mev2.yaml enums alu_op
 * without a mnemonic of their own; the generated NPK_ALU_PLAIN_OPS lists them):
 *   uint8_t npk_alu_<OP>(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
 * sets *r and returns the new condition codes (cc: the current ones, for the carry).
 * Included by me.c only; a new operation is its mev2.yaml line and a function here. */
#ifndef NPK_ALU_OPS_H
#define NPK_ALU_OPS_H
#include "exec.h"

static inline uint8_t npk_cc_add(uint32_t a, uint32_t b, uint32_t cin, uint32_t *r)
{
    uint64_t s = (uint64_t)a + b + cin;
    uint32_t v = (uint32_t)s;
    *r = v;
    uint8_t f = npk_cc_logic(v);
    if (s >> 32) f |= F_C;
    if (((a ^ v) & (b ^ v)) >> 31) f |= F_V;
    return f;
}

/* subtraction a - b - borrow; C = no borrow (ARM convention: bcs/bhs = a >= b) */
static inline uint8_t npk_cc_sub(uint32_t a, uint32_t b, uint32_t borrow, uint32_t *r)
{
    uint64_t d = (uint64_t)a - b - borrow;
    uint32_t v = (uint32_t)d;
    *r = v;
    uint8_t f = npk_cc_logic(v);
    if (!(d >> 63)) f |= F_C;
    if (((a ^ b) & (a ^ v)) >> 31) f |= F_V;
    return f;
}

#define NPK_LOGIC_OP(NAME, EXPR) \
    static inline uint8_t npk_alu_##NAME(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r) \
    { (void)a; (void)cc; *r = (EXPR); return npk_cc_logic(*r); }

NPK_LOGIC_OP(B, b)
NPK_LOGIC_OP(NOTB, ~b)
NPK_LOGIC_OP(AND, a & b)
NPK_LOGIC_OP(NOTAND, ~a & b)
NPK_LOGIC_OP(ANDNOT, a & ~b)
NPK_LOGIC_OP(OR, a | b)
NPK_LOGIC_OP(XOR, a ^ b)
#undef NPK_LOGIC_OP

static inline uint8_t npk_alu_PLUS(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ (void)cc; return npk_cc_add(a, b, 0, r); }
static inline uint8_t npk_alu_PLUS16(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ (void)cc; return npk_cc_add(a, b & 0xFFFF, 0, r); }
static inline uint8_t npk_alu_PLUS8(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ (void)cc; return npk_cc_add(a, b & 0xFF, 0, r); }
static inline uint8_t npk_alu_PLUSCARRY(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ return npk_cc_add(a, b, (cc & F_C) ? 1 : 0, r); }
static inline uint8_t npk_alu_MINUS(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ (void)cc; return npk_cc_sub(a, b, 0, r); }
static inline uint8_t npk_alu_BMINUSA(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ (void)cc; return npk_cc_sub(b, a, 0, r); }
static inline uint8_t npk_alu_MINUSCARRY(uint32_t a, uint32_t b, uint8_t cc, uint32_t *r)
{ return npk_cc_sub(a, b, (cc & F_C) ? 0 : 1, r); }

#endif
