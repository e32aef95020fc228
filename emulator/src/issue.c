/* Memory and unit commands: an ME issues a command to a shared unit.  What each
 * command is (legal or not, what it moves through the transfer registers, how many
 * longwords, whether it signals a pair) is the generated command table
 * (npk_cmd_info_of, from mev2.yaml units); the unit carries it out when it completes
 * (the units' files, dispatched by units/common.c). */
#include "exec.h"

/* SRAM: the channel is addr[31:30] (modulo the channels there are); DRAM: channels are
 * striped every dram_interleave bytes */
static int unit_channel(npk_chip *c, int unit, uint32_t addr)
{
    switch (unit) {
    case NPK_UNIT_SRAM: return (int)npk_fastmod(addr >> 30, c->sram_chans_m, c->sram_chans);
    case NPK_UNIT_DRAM: {
        uint32_t stripe = c->dram_il_shift < 32 ? addr >> c->dram_il_shift : addr / c->dram_il;
        return (int)npk_fastmod(stripe, c->dram_chans_m, c->dram_chans);
    }
    default: return 0;
    }
}

/* the transfer registers a command names: the xfer field (8-context mode: bit 4 names
 * the other kind than the command's default) */
static void xfer_target(npk_me *m, int ctx, uint32_t field, int default_dram, int *kind, uint32_t *idx)
{
    int dram = default_dram;
    if (m->ctx_mode == 8 && (field & 0x10)) {
        dram = !dram;
        field &= 0xF;
    }
    *kind = dram ? XK_DIN : XK_SIN;
    *idx = (npk_relbase(m, ctx) + field) & 127;
}

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

/* indirect_ref: fields of the previous ALU result (ALU_OUT) override the instruction
 * (the format IXP2400/2800 receive/transmit microcode uses):
 *   [25] override ref_count, [24:21] ref_count - 1 (quadwords for dram)
 *   [4]  override data reference, [20:5] data reference: for dram[rbuf_rd|tbuf_wr] the
 *        MSF buffer address (0x2000 + byte offset in RBUF / TBUF) */
static void indirect_ref(const npk_cmd_pre *k, uint32_t ind, uint32_t *nwords, uint32_t *msf_addr)
{
    if (ind & (1u << 25)) {
        uint32_t cnt = ((ind >> 21) & 0xF) + 1;
        *nwords = (k->flags & NPK_CMDF_QUADWORDS) ? cnt * 2 : cnt;
        if (*nwords > NPK_MAX_XFER_WORDS) *nwords = NPK_MAX_XFER_WORDS;
    }
    if (ind & (1u << 4))
        *msf_addr = (ind >> 5) & 0xFFFF;
}

/* A memory-class word's command, once, when the word is loaded (u->cmd is legal: from
 * npk_mem_command); what it takes from the command table and the word's fields. */
void npk_predecode_command(npk_uop *u)
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
    p->xfield = (uint8_t)NPK_SRAM_XFER(w);
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
    if (k->xfer_dram) p->flags |= NPK_CMDF_XFER_DRAM;
    if (k->words == NPK_WORDS_ONE) p->flags |= NPK_CMDF_ONE_WORD;
    if (k->words == NPK_WORDS_QUADWORDS) p->flags |= NPK_CMDF_QUADWORDS;
}

/* the issuing context waits for mask: ctx_swap[s], optionally with defer[1|2] */
static void swap_on(npk_ctx *x, uint16_t mask, uint32_t defer)
{
    x->wait_mask = mask;
    x->wait_any = 0;
    x->swap_pending = 1;
    x->swap_left = (uint8_t)defer;
    x->swap_target = UINT32_MAX;
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

/* copy n words the unit pulls from the write half of the named transfer registers */
static void pull_words(npk_me *m, npk_event *ev, int kind, uint32_t xidx, uint32_t n)
{
    int okind = kind == XK_SIN ? XK_SOUT : XK_DOUT;
    for (uint32_t i = 0; i < n; i++)
        ev->data[i] = m->xfer[okind][(xidx + i) & 127];
}

void npk_issue_mem(npk_exec *e, const npk_uop *u)
{
    npk_chip *c = e->c;
    npk_me *m = e->m;
    const npk_cmd_pre *k = &u->mem;
    uint32_t a = npk_rd(e, &u->a);
    uint32_t b = npk_rd(e, &u->b);
    if (e->illegal) return;
    uint32_t addr = a + b, flags = k->flags;
    uint32_t nwords = k->nwords, msf_addr = 0;
    int kind;
    uint32_t xidx;
    xfer_target(m, e->ctx, k->xfield, (flags & NPK_CMDF_XFER_DRAM) != 0, &kind, &xidx);
    if (flags & NPK_CMDF_INDIRECT) indirect_ref(k, m->alu_out, &nwords, &msf_addr);
    int unit = k->unit;
    int ch = unit_channel(c, unit, addr);
    if (npk_unit_full(c, unit, ch)) {
        e->stall = 1;
        return;
    }
    int pull = (flags & NPK_CMDF_PULL) != 0, push = (flags & NPK_CMDF_PUSH) != 0;
    uint32_t moved = nwords > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : nwords;
    if ((pull || push) && xidx + moved > 128)
        npk_fault_at(c, NPK_FAULT_XFER, m->idx, e->ctx, e->pc, xidx);  /* the registers wrap to 0 */
    /* every field of the event set here (no clearing first: every command pays for it) */
    npk_event *ev = npk_ev_alloc_unset(c);
    if (!ev) { e->illegal = 1; return; }
    ev->kind = EVK_MEM;
    ev->unit = (uint8_t)unit;
    ev->me = (uint8_t)m->idx;
    ev->ctx = (uint8_t)e->ctx;
    ev->cmd = k->ev_cmd;
    ev->sub = k->sub;
    ev->xkind = (uint8_t)kind;
    ev->chan = (uint8_t)ch;
    ev->op = (uint8_t)u->cmd;
    ev->sigmask = k->sigmask;
    ev->count = (uint16_t)nwords;
    ev->addr = (flags & NPK_CMDF_SPLIT) ? a : addr;
    ev->xidx = (uint16_t)xidx;
    ev->pc = (uint16_t)e->pc;
    ev->aux = (flags & NPK_CMDF_MSF_BUFFER) ? msf_addr : b;
    ev->xin = 0;
    if (push) npk_xin_issued(m, ev, xidx - npk_relbase(m, e->ctx), moved);
    uint32_t one = (flags & NPK_CMDF_ONE_WORD) != 0;
    if (pull) pull_words(m, ev, kind, xidx, one ? 1 : moved);
    ev->cycle = npk_unit_schedule(c, unit, ch, one ? 4 : nwords * 4, pull && !push);
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, unit, NPK_SRAM_CMD(u->w) | (NPK_SRAM_SUB(u->w) << 8) | (nwords << 16), addr);
    npk_ev_push(c, ev);
    if (flags & NPK_CMDF_SWAP) {
        swap_on(e->x, k->sigmask, k->defer);
        e->x->swap_voluntary = 0;
    }
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
    xfer_target(m, e->ctx, NPK_CAP_CSR_XFER(w), 0, &kind, &xidx);
    uint32_t n = NPK_CAP_CSR_REF_CNT(w) + 1;
    if (xidx + n > 128) npk_fault_at(c, NPK_FAULT_XFER, m->idx, e->ctx, e->pc, xidx);
    ev->cmd = (uint8_t)write;
    ev->count = (uint16_t)n;
    ev->xkind = (uint8_t)kind;
    ev->xidx = (uint16_t)xidx;
    ev->sigmask = sig ? (uint16_t)(1u << sig) : 0;
    if (write) pull_words(m, ev, kind, xidx, n);
    else npk_xin_issued(m, ev, xidx - npk_relbase(m, e->ctx), n);
    ev->cycle = npk_unit_schedule(c, NPK_UNIT_CAP, 0, n * 4, write);
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, e->ctx, NPK_UNIT_CAP, (uint32_t)write | (n << 16), addr);
    npk_ev_push(c, ev);
    if (sig && mode != NPK_SIG_MODE_SIG_DONE)
        swap_on(e->x, ev->sigmask, mode);
}
