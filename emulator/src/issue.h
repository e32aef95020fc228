/* Issuing a unit command: the inline core that the general path (issue.c, npk_issue_mem)
 * and a turn's plain command (me.c, exec_plain_command) share.  Internal to the core. */
#ifndef NPK_ISSUE_H
#define NPK_ISSUE_H
#include "exec.h"

/* SRAM: the channel is addr[31:30] (modulo the channels there are); DRAM: channels are
 * striped every dram_interleave bytes */
static inline int unit_channel(npk_chip *c, int unit, uint32_t addr)
{
    switch (unit) {
    case NPK_UNIT_SRAM: return c->sram_chan_of[addr >> 30];
    case NPK_UNIT_DRAM: {
        uint32_t stripe = c->dram_il_shift < 32 ? addr >> c->dram_il_shift : addr / c->dram_il;
        return (int)npk_fastmod(stripe, c->dram_chans_m, c->dram_chans);
    }
    default: return 0;
    }
}

/* the transfer registers a command names: the xfer field, its first from the context's
 * first (8-context mode: bit 4 names the other kind than the command's default) */
static inline void xfer_target(int ctx_mode, uint32_t field, int default_dram, int *kind, uint32_t *first)
{
    int dram = default_dram;
    if (ctx_mode == 8 && (field & 0x10)) {
        dram = !dram;
        field &= 0xF;
    }
    *kind = dram ? XK_DIN : XK_SIN;
    *first = field;
}

/* indirect_ref: fields of the previous ALU result (ALU_OUT) override the instruction
 * (the format IXP2400/2800 receive/transmit microcode uses):
 *   [25] override ref_count, [24:21] ref_count - 1 (quadwords for dram)
 *   [4]  override data reference, [20:5] data reference: for dram[rbuf_rd|tbuf_wr] the
 *        MSF buffer address (0x2000 + byte offset in RBUF / TBUF) */
static inline void indirect_ref(const npk_cmd_pre *k, uint32_t ind, uint32_t *nwords, uint32_t *msf_addr)
{
    if (ind & (1u << 25)) {
        uint32_t cnt = ((ind >> 21) & 0xF) + 1;
        *nwords = (k->flags & NPK_CMDF_QUADWORDS) ? cnt * 2 : cnt;
        if (*nwords > NPK_MAX_XFER_WORDS) *nwords = NPK_MAX_XFER_WORDS;
    }
    if (ind & (1u << 4))
        *msf_addr = (ind >> 5) & 0xFFFF;
}

/* the issuing context waits for mask: ctx_swap[s], optionally with defer[1|2] */
static inline void swap_on(npk_ctx *x, uint16_t mask, uint32_t defer)
{
    x->wait_mask = mask;
    x->wait_any = 0;
    x->swap_pending = 1;
    x->swap_left = (uint8_t)defer;
    x->swap_target = UINT32_MAX;
}

/* copy n words the unit pulls from the write half of the named transfer registers */
static inline void pull_words(npk_me *m, npk_event *ev, int kind, uint32_t xidx, uint32_t n)
{
    int okind = kind == XK_SIN ? XK_SOUT : XK_DOUT;
    for (uint32_t i = 0; i < n; i++)
        ev->data[i] = *npk_xfer(m, okind, xidx + i);
}

enum { NPK_ISSUED = 0, NPK_ISSUE_STALL = 1, NPK_ISSUE_NO_EVENT = 2 };

/* The command of word u (at pc), issued at c->now by context ctx of m with address
 * operands a and b: its event scheduled on its unit (NPK_ISSUED), or nothing done because the
 * channel's queue is full (NPK_ISSUE_STALL: the word retries) or no event can be had
 * (NPK_ISSUE_NO_EVENT). */
static inline __attribute__((always_inline)) int npk_issue_as(npk_chip *c, npk_me *m, int ctx, uint32_t pc,
                                                              const npk_uop *u, uint32_t a, uint32_t b, const int tcam)
{
    const npk_cmd_pre *k = &u->mem;
    uint32_t addr = a + b, flags = k->flags;
    uint32_t nwords = k->nwords, msf_addr = 0;
    int kind = (flags & NPK_CMDF_XFER_DRAM) ? XK_DIN : XK_SIN;
    uint32_t xidx = (npk_relbase(m, ctx) + k->xoff) & 127;
    if (flags & NPK_CMDF_INDIRECT) indirect_ref(k, m->alu_out, &nwords, &msf_addr);
    int unit = k->unit;
    /* a split command (enqueue: queue descriptor + buffer) goes to the channel of its first
     * operand, the queue's (HRM p.215: the Q_array and the queue's links are one channel's);
     * the sum of two channel-1 addresses would name channel 2 */
    int ch = unit_channel(c, unit, (flags & NPK_CMDF_SPLIT) ? a : addr);
    if (npk_unit_full(c, unit, ch)) return NPK_ISSUE_STALL;
    int pull = (flags & NPK_CMDF_PULL) != 0, push = (flags & NPK_CMDF_PUSH) != 0;
    uint32_t moved = nwords > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : nwords;
    /* (a command inside its context's window cannot run past the last register) */
    if ((flags & (NPK_CMDF_XIN_FOREIGN | NPK_CMDF_INDIRECT)) && (pull || push) && xidx + moved > 128)
        npk_fault_at(c, NPK_FAULT_XFER, m->idx, ctx, pc, xidx);  /* the registers wrap to 0 */
    npk_event *ev = npk_ev_alloc_unset(c);
    if (!ev) return NPK_ISSUE_NO_EVENT;
    uint32_t one = (flags & NPK_CMDF_ONE_WORD) != 0;
    if (pull) pull_words(m, ev, kind, xidx, one ? 1 : moved);
    uint32_t bytes = one ? 4 : nwords * 4;
    uint64_t occ = (flags & NPK_CMDF_INDIRECT) || k->occ == NPK_OCC_UNKNOWN ? npk_unit_occupancy(c, unit, bytes) : k->occ;
    if (tcam) occ = c->cfg.tcam.cycles_per_lookup;
    uint64_t done = npk_unit_schedule_occ(c, unit, ch, bytes, occ, pull && !push);
    if (tcam) done += c->cfg.tcam.lookup_latency;
    /* every field of the event set here, after everything they are made from is read (no
     * clearing first: every command pays for it) */
    ev->cycle = done;
    ev->kind = tcam ? EVK_TCAM : EVK_MEM;
    ev->unit = (uint8_t)unit;
    ev->me = (uint8_t)m->idx;
    ev->ctx = (uint8_t)ctx;
    ev->cmd = k->ev_cmd;
    ev->sub = k->sub;
    ev->xkind = (uint8_t)kind;
    ev->chan = (uint8_t)ch;
    ev->op = (uint8_t)u->cmd;
    ev->sigmask = k->sigmask;
    ev->count = (uint16_t)nwords;
    ev->addr = (flags & NPK_CMDF_SPLIT) ? a : addr;
    ev->xidx = (uint16_t)xidx;
    ev->pc = (uint16_t)pc;
    ev->aux = (flags & NPK_CMDF_MSF_BUFFER) ? msf_addr : b;
    ev->xin = 0;
    if (push)
        npk_xin_issued(m, ev, (flags & NPK_CMDF_INDIRECT) ? npk_xin_foreign(m->ctx_mode, k->xoff, moved)
                                                          : (flags & NPK_CMDF_XIN_FOREIGN) != 0);
    npk_hist(c, NPK_EV_MEM_ISSUE, m->idx, ctx, unit, NPK_SRAM_CMD(u->w) | (NPK_SRAM_SUB(u->w) << 8) | (nwords << 16), addr);
    npk_ev_push(c, ev);
    if (flags & NPK_CMDF_SWAP) {
        swap_on(&m->ctx[ctx], k->sigmask, k->defer);
        m->ctx[ctx].swap_voluntary = 0;
    }
    return NPK_ISSUED;
}

/* a TCAM lookup's issue (issue.c: npk_issue_as with tcam = 1, out of line) */
__attribute__((cold, noinline, visibility("hidden"))) int npk_issue_tcam(npk_chip *c, npk_me *m, int ctx, uint32_t pc, const npk_uop *u,
                                                   uint32_t a, uint32_t b);

/* The command of word u (see npk_issue_as).  A read of a TCAM result slot is a lookup:
 * its own occupancy and latency, and its completion is the TCAM's (units/tcam.c); with no
 * TCAM tcam_len is 0 and no address is one.  (The lookup is another instantiation of the
 * issue, out of line: the plain one keeps its code as it was.) */
static inline __attribute__((always_inline)) int npk_issue(npk_chip *c, npk_me *m, int ctx, uint32_t pc,
                                                           const npk_uop *u, uint32_t a, uint32_t b)
{
    if (__builtin_expect(a + b - c->tcam_lo < c->tcam_len, 0) && u->mem.unit == NPK_UNIT_SRAM && u->cmd == NPK_CMD_SRAM_READ)
        return npk_issue_tcam(c, m, ctx, pc, u, a, b);
    return npk_issue_as(c, m, ctx, pc, u, a, b, 0);
}

#endif
