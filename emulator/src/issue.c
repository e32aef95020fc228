/* Memory and unit commands: an ME issues a command to a shared unit.  What each
 * command is (legal or not, what it moves through the transfer registers, how many
 * longwords, whether it signals a pair) is the generated command table
 * (npk_cmd_info_of, from mev2.yaml units); the unit carries it out when it completes
 * (the units' files, dispatched by units/common.c). */
#include "issue.h"

/* longwords the command moves (mev2.yaml words) */
static uint32_t command_words(const npk_cmd_info *k, uint64_t w)
{
    uint32_t cnt = NPK_SRAM_REF_CNT(w);
    switch (k->words) {
    case NPK_WORDS_KEYS: return cnt * k->key_words;
    case NPK_WORDS_QUADWORDS: return 2 * (cnt + 1);
    default: return cnt + 1;
    }
}

/* A memory-class word's command, once, when the word is loaded (u->cmd is legal: from
 * npk_mem_command); what it takes from the command table and the word's fields. */
void npk_predecode_command(const npk_chip *c, npk_uop *u, int ctx_mode)
{
    const npk_cmd_info *k = npk_cmd_info_of(u->cmd);
    uint64_t w = u->w;
    uint32_t sig = NPK_SRAM_SIG(w), mode = NPK_SRAM_SIG_MODE(w);
    npk_cmd_pre *p = &u->mem;
    memset(p, 0, sizeof *p);
    p->unit = k->unit_id;
    /* CAP events: 0 read, 1 write */
    p->ev_cmd = (uint8_t)(k->unit_id == NPK_UNIT_CAP ? k->dir == NPK_DIR_PULL : NPK_SRAM_CMD(w));
    p->sub = (uint8_t)NPK_SRAM_SUB(w);
    p->nwords = (uint16_t)command_words(k, w);
    if (sig) {
        p->sigmask = (uint16_t)(1u << sig);
        if (k->sig_pair && sig < 15) p->sigmask |= (uint16_t)(1u << (sig + 1));
    }
    if (sig && mode != NPK_SIG_MODE_SIG_DONE) {
        p->flags |= NPK_CMDF_SWAP;
        p->defer = (uint8_t)mode;
    }
    if (k->dir & NPK_DIR_PULL) p->flags |= NPK_CMDF_PULL;
    if (k->dir & NPK_DIR_PUSH) p->flags |= NPK_CMDF_PUSH;
    if (NPK_SRAM_INDIRECT_REF(w)) p->flags |= NPK_CMDF_INDIRECT;
    if (k->split) p->flags |= NPK_CMDF_SPLIT;
    if (k->msf_buffer) p->flags |= NPK_CMDF_MSF_BUFFER;
    int kind;
    uint32_t first;
    xfer_target(ctx_mode, (uint32_t)NPK_SRAM_XFER(w), k->xfer_dram, &kind, &first);
    p->xoff = (uint8_t)first;
    if (kind == XK_DIN) p->flags |= NPK_CMDF_XFER_DRAM;
    if (npk_xin_foreign(ctx_mode, first, p->nwords)) p->flags |= NPK_CMDF_XIN_FOREIGN;
    if (k->words == NPK_WORDS_ONE) p->flags |= NPK_CMDF_ONE_WORD;
    if (k->words == NPK_WORDS_QUADWORDS) p->flags |= NPK_CMDF_QUADWORDS;
    /* (as npk_issue: one longword's bytes for a ONE_WORD command) */
    uint64_t occ = npk_unit_occupancy(c, p->unit, (p->flags & NPK_CMDF_ONE_WORD) ? 4 : p->nwords * 4u);
    p->occ = (uint8_t)(occ < NPK_OCC_UNKNOWN ? occ : NPK_OCC_UNKNOWN);
}

static inline npk_event *new_event(npk_exec *e, int unit, uint32_t op, uint32_t addr)
{
    npk_event *ev = npk_ev_alloc(e->c);
    if (!ev) return NULL;
    ev->kind = EVK_MEM;
    ev->unit = (uint8_t)unit;
    ev->op = (uint8_t)op;
    ev->me = (uint8_t)e->m->idx;
    ev->ctx = (uint8_t)e->ctx;
    ev->pc = (uint16_t)e->pc;
    ev->addr = addr;
    return ev;
}

int npk_issue_tcam(npk_chip *c, npk_me *m, int ctx, uint32_t pc, const npk_uop *u, uint32_t a, uint32_t b)
{
    return npk_issue_as(c, m, ctx, pc, u, a, b, 1);
}

void npk_issue_mem(npk_exec *e, const npk_uop *u)
{
    uint32_t a = npk_rd(e, &u->a);
    uint32_t b = npk_rd(e, &u->b);
    if (e->illegal) return;
    int r = npk_issue(e->c, e->m, e->ctx, e->pc, u, a, b);
    if (r == NPK_ISSUE_STALL) e->stall = 1;
    else if (r == NPK_ISSUE_NO_EVENT) e->illegal = 1;
}

/* cap[fast_wr, data, CSR] and cap[read|write, $x, CSR, n]: the CAP unit's read / write
 * commands at a CSR address the instruction names */
void npk_issue_cap_csr(npk_exec *e, const npk_uop *u)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    uint64_t w = u->w;
    uint32_t cmd = NPK_CAP_CSR_CMD(w);
    uint32_t addr = (NPK_CAP_CSR_CSR_HI(w) << 8) | NPK_CAP_CSR_CSR_LO(w);
    uint32_t sig = NPK_CAP_CSR_SIG(w), mode = NPK_CAP_CSR_SIG_MODE(w);
    int fast = cmd == NPK_CAP_CSR_CMD_FAST_WR || cmd == NPK_CAP_CSR_CMD_FAST_WR_ALU;
    int write = cmd == NPK_CAP_CSR_CMD_WRITE;
    if (!fast && sig == 0 && mode != NPK_SIG_MODE_SIG_DONE) { e->illegal = 1; return; }
    if (npk_unit_full(c, NPK_UNIT_CAP, 0)) {
        e->stall = 1;
        return;
    }
    npk_event *ev = new_event(e, NPK_UNIT_CAP, fast || write ? NPK_CMD_CAP_WRITE : NPK_CMD_CAP_READ, addr);
    if (!ev) { e->illegal = 1; return; }
    ev->chan = 0;
    if (fast) {  /* data from the instruction or from ALU_OUT */
        ev->cmd = 2;   /* CAP events: 2 fast_wr */
        ev->data[0] = cmd == NPK_CAP_CSR_CMD_FAST_WR ? NPK_CAP_CSR_FAST_DATA(w) : m->alu_out;
        ev->count = 1;
        ev->sigmask = 0;
        ev->cycle = npk_unit_schedule(c, NPK_UNIT_CAP, 0, 4, 1);
        npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, NPK_UNIT_CAP, 2 | (1u << 16), addr);
        npk_ev_push(c, ev);
        return;
    }
    int kind;
    uint32_t xidx;
    uint32_t first;
    xfer_target(m->ctx_mode, NPK_CAP_CSR_XFER(w), 0, &kind, &first);
    xidx = (npk_relbase(m, e->ctx) + first) & 127;
    uint32_t n = NPK_CAP_CSR_REF_CNT(w) + 1;
    if (xidx + n > 128) npk_fault_at(c, NPK_FAULT_XFER, m->idx, e->ctx, e->pc, xidx);
    ev->cmd = (uint8_t)write;
    ev->count = (uint16_t)n;
    ev->xkind = (uint8_t)kind;
    ev->xidx = (uint16_t)xidx;
    ev->sigmask = sig ? (uint16_t)(1u << sig) : 0;
    if (write) pull_words(m, ev, kind, xidx, n);
    else npk_xin_issued(m, ev, npk_xin_foreign(m->ctx_mode, first, n));
    ev->cycle = npk_unit_schedule(c, NPK_UNIT_CAP, 0, n * 4, write);
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, NPK_UNIT_CAP, (uint32_t)write | (n << 16), addr);
    npk_ev_push(c, ev);
    if (sig && mode != NPK_SIG_MODE_SIG_DONE)
        swap_on(e->x, ev->sigmask, mode);
}
