/* Internal state of the emulator core.  Not part of the API. */
#ifndef NPK_INTERNAL_H
#define NPK_INTERNAL_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "npk_emu.h"
/* The library exports its API (npk_emu.h, npk_msf.h) and nothing else: the core's own
 * functions are hidden, so calls between its files are direct, not through the PLT. */
#pragma GCC visibility push(hidden)
#include "mev2_isa.h"   /* generated from asm/isa/mev2.yaml (src/gen/) */

#define NPK_MAX_ME 16
#define NPK_CAL 64      /* cycles the run loop's calendar of due MEs spans (a power of two, <= 64) */
#define NPK_NCTX 8
#define NPK_NEVER UINT64_MAX
#define NPK_MAX_BP 64
#define NPK_MAX_WP 64
#define NPK_MAX_PEND 8      /* local_csr_wr writes waiting for their write-to-use delay, per ME */
#define NPK_MSF_STUB_BYTES 65536u
#define NPK_CAP_CSR_WORDS 16384u   /* cap CSR space, 64 KB / 4 */
/* the most longwords one command moves: a DRAM access names up to 16 quadwords (HRM p.197:
 * 128 bytes; through transfer registers in 4-context mode, or RBUF/TBUF <-> DRAM) */
#define NPK_MAX_XFER_WORDS 32
#define NPK_WHEEL 4096u            /* cycles the event wheel holds (sched.c); a power of 2 */
#define NPK_EV_CHUNK 256u          /* events per chunk of the event pool (they never move) */
#define NPK_EV_MAX (1u << 24)      /* events in flight at most */

enum { F_Z = 1, F_N = 2, F_C = 4, F_V = 8 };

/* transfer-register files (npk_xfer; the order of NPK_REG_SXFER_IN..NPK_REG_DXFER_OUT) */
enum { XK_SIN = 0, XK_SOUT = 1, XK_DIN = 2, XK_DOUT = 3 };
/* An ME's register files in one array (npk_me.rf), interleaved: register n of file f at
 * rf[n * NPK_RF_FILES + f].  The few registers a context uses of each file then share
 * cache lines (a context's registers 0 and 1 of every file are one line), where a file
 * apiece would take a line each. */
enum { NPK_RF_A = 0, NPK_RF_B = 1, NPK_RF_XFER = 2 /* + XK_* */, NPK_RF_LM_STAGE = 6, NPK_RF_FILES = 8 };

typedef struct npk_ctx {
    _Alignas(64) uint32_t pc;   /* (a context's state is one cache line, found by a shift) */
    uint8_t state;         /* NPK_CTX_* */
    uint8_t cc;
    uint8_t wait_any;
    uint8_t br_pending;    /* deferred branch in flight */
    uint8_t br_left;
    uint8_t swap_pending;  /* deferred ctx swap in flight */
    uint8_t swap_left;
    uint8_t swap_voluntary;
    uint16_t sig;          /* bit n = signal n */
    uint16_t wait_mask;
    uint32_t br_target;
    uint32_t swap_target;  /* ctx_arb br[]: resume address, or UINT32_MAX */
    uint32_t lm_addr[2];
    uint64_t state_since;
    uint32_t xin_pending;  /* its commands in flight that push into read transfer registers */
    uint8_t base;          /* its first relative register (npk_relbase; npk_set_ctx_mode) */
    /* its statistics (npk_me_stats.ctx_instructions, ctx_sleep_cycles: npk_stats_me) kept
     * here, in the line a turn touches anyway */
    uint64_t instructions;
    uint64_t sleep_cycles;
} npk_ctx;
_Static_assert(sizeof(npk_ctx) == 64, "a context's state fills one cache line");

/* A decoded operand (npk_predecode_word): the operand-field map's view of one field
 * (mev2.yaml operand_fields, npk_unrestricted_def), with the GPR bank it is read or
 * written in. */
typedef struct npk_opnd {
    uint8_t kind;          /* NPK_OPK_* */
    uint8_t file, via;     /* index registers: NPK_OPFILE_*, NPK_OPVIA_* */
    int8_t step;           /* index registers: post-increment in registers */
    uint8_t offset;        /* index registers: num is an offset */
    uint8_t bank;          /* GPR bank of the access: 0 A, 1 B */
    uint16_t num;          /* register number, offset or constant */
    uint16_t key;          /* GPR and transfer registers: num * NPK_RF_FILES + the file
                            * (NPK_RF_*), for the fast path's npk_me.rf index */
    uint8_t rmask;         /* ... numbered from the context's first register (127) or absolute (0):
                            * the register is rf[((base & rmask) * NPK_RF_FILES + key) % 1024] */
    uint8_t lm;            /* *l$indexN[num] without post-increment: 1 + N (0: another operand).
                            * The fast path reads it as a register (key, rmask = 0) of the
                            * NPK_RF_LM_STAGE file, where F_LM puts the longword first */
} npk_opnd;

/* A memory-class word's command as issue.c uses it, decoded when the word is loaded
 * (npk_predecode_command): the issue reads these instead of taking the word apart */
typedef struct npk_cmd_pre {
    uint8_t unit;          /* NPK_UNIT_* */
    uint8_t ev_cmd, sub;   /* the event's cmd and sub (history records; CAP: 0 read, 1 write) */
    uint8_t defer;         /* ctx_swap's defer slots */
    uint16_t sigmask;      /* the signals the command sends (0: none) */
    uint16_t flags;        /* NPK_CMDF_* */
    uint16_t nwords;       /* longwords it moves, before an indirect_ref override */
    uint8_t xoff;          /* the first transfer register, from the context's first: the field
                            * (in 8-context mode bit 4 names the other kind: NPK_CMDF_XFER_DRAM) */
    uint8_t occ;           /* its unit's busy cycles for the word's count (NPK_OCC_UNKNOWN: over
                            * 255, found at issue; as an indirect_ref count) */
} npk_cmd_pre;

#define NPK_OCC_UNKNOWN 255

enum {
    NPK_CMDF_PULL = 1,           /* the unit pulls from the write transfer registers */
    NPK_CMDF_PUSH = 2,           /* ... pushes into the read ones */
    NPK_CMDF_SWAP = 4,           /* the context swaps out until sigmask (ctx_swap[]) */
    NPK_CMDF_INDIRECT = 8,       /* indirect_ref: ALU_OUT overrides fields */
    NPK_CMDF_SPLIT = 16,         /* the unit gets the two address operands apart */
    NPK_CMDF_MSF_BUFFER = 32,    /* the event's aux is the MSF buffer address */
    NPK_CMDF_XFER_DRAM = 64,     /* names $$ registers (the command's default, or bit 4 of the field) */
    NPK_CMDF_ONE_WORD = 128,     /* moves one longword whatever the count says */
    NPK_CMDF_QUADWORDS = 256,    /* counts quadwords (an indirect count too) */
    NPK_CMDF_XIN_FOREIGN = 512,  /* its transfer registers run past the context's window (with
                                  * the word's count; an indirect_ref count is checked at issue):
                                  * a push counts as foreign (npk_xin_issued), and only such a
                                  * command can wrap past register 127 */
};

/* A pre-decoded control-store word: built when the word is loaded, so that execution
 * neither matches classes nor decodes operand fields. */
typedef struct npk_uop {
    uint64_t w;            /* the word */
    npk_opnd a, b;         /* operands as the class uses them (see npk_predecode_word) */
    union {
        npk_opnd d;        /* the destination (classes that write one) */
        npk_cmd_pre mem;   /* memory classes (NPK_IC_SRAM ... NPK_IC_HASH): the command */
    };
    uint8_t cls;           /* enum npk_iclass; NPK_IC_ILLEGAL also for an illegal command */
    uint8_t local;         /* touches only this ME: may run ahead (uop_is_local) */
    uint8_t op;            /* ALU / shift operation, branch condition */
    uint8_t fast;          /* the fast path's handler (me.c F_*), 0: the general path */
    uint8_t extra;         /* branches: cycles a taken branch aborts */
    uint8_t defer;         /* branches: defer slots */
    uint8_t ctxmask;       /* branch on a condition: the contexts it is taken in */
    uint8_t fast_lm;       /* a fast word with local-memory operands: its handler (u->fast is then
                            * F_LM, which stages them first) */
    uint8_t fast_xin;      /* a fast word that reads a read transfer register: its handler (u->fast
                            * is then F_XIN, which waits for the next event first) */
    uint8_t flags;         /* UOP_*: what the fast paths may do with it */
    uint16_t ccmask;       /* branch on a condition: the condition codes it is taken for */
    uint16_t target;       /* branches: the target, inside the control store */
    uint32_t cmd;          /* memory classes: NPK_CMD_*; immed: the value */
} npk_uop;

enum {
    UOP_XIN_OWN = 1,       /* an F_XIN word whose read transfer registers are all its context's
                            * own (relative, inside its window): it waits only for what can write
                            * them (npk_ctx.xin_pending, npk_me.xin_foreign, the MSF device) */
    UOP_PLAIN_CMD = 2,     /* a unit command with register or constant operands, no indirect_ref,
                            * no swap defer slots: a turn issues it without the general path */
};

typedef struct npk_pending_csr {
    uint64_t at;
    uint32_t addr, value;
    int ctx;
} npk_pending_csr;

typedef struct npk_me {
    /* what a turn, a completion and a woken run touch: the first two cache lines (and the
     * running context's state); the rest is read by rarer words and the API */
    int idx;
    int ctx_mode;          /* 4 or 8 */
    int cur;               /* running context, -1 when idle */
    uint32_t ready;        /* bit i: context i is NPK_CTX_READY (npk_ctx_set_state) */
    uint32_t xin_foreign;  /* commands in flight that push into read transfer registers
                            * outside the issuing context's window (npk_xin_issued) */
    int status;            /* NPK_ME_* */
    uint64_t next;         /* cycle of the next instruction, NPK_NEVER when idle */
    uint64_t idle_since;
    /* the statistics charge a swap's cost, a queue-full retry's wait (stalled) and a
     * taken branch's aborted cycles when they begin: those past the end of a run, up to
     * `next`, are taken back in npk_stats_me from the counter this says */
    int over_stalled;
    int csr_rd_valid;
    npk_uop *uop;          /* per word (+ one past the end: a PC there is out of range) */
    uint32_t alu_out;      /* last ALU result (indirect shift / indirect_ref) */
    uint32_t prev_a, prev_b;
    uint32_t ctx_arb_cntl;
    uint64_t pend_min;
    npk_me_stats st;       /* (its counters but the contexts' arrays in the second line; the
                            * contexts' instructions and sleep cycles are npk_ctx's) */
    npk_ctx ctx[NPK_NCTX];
    /* the register files (NPK_RF_*: npk_gpr, npk_xfer): GPR A and B, the transfer
     * registers, the fast path's copies of local-memory operands (register 16 * N +
     * offset for *l$indexN[offset]) */
    uint32_t rf[128 * NPK_RF_FILES];
    uint64_t *ustore;
    uint32_t nn[128];
    uint32_t nn_put, nn_get;
    uint32_t lm_global[2]; /* LM_ADDR_0/1 when CTX_ENABLES makes them global */
    uint32_t *lm;
    uint32_t cam_tag[16];
    uint8_t cam_state[16];
    uint8_t cam_valid[16];
    uint8_t cam_lru[16];   /* cam_lru[0] = least recently used entry */
    /* local CSRs */
    uint32_t ctx_enables;
    uint32_t cc_enable;
    uint32_t csr_ctx_ptr;
    uint32_t byte_index;
    uint32_t t_index;
    uint32_t crc_rem;
    uint32_t ustore_addr;
    uint32_t ustore_lo;
    uint32_t future_count[NPK_NCTX];   /* each context's FUTURE_COUNT and its signal */
    uint32_t future_sig[NPK_NCTX];
    uint64_t ts_offset;    /* TIMESTAMP written value minus counter */
    uint64_t prng;
    uint32_t mul_lo, mul_hi;
    uint32_t popcnt;
    uint32_t csr_rd_value;
    npk_pending_csr pend[NPK_MAX_PEND];
    int npend;
    int bp_skip;           /* resume past a breakpoint once */
    npk_me_info stop;
} npk_me;
_Static_assert(offsetof(npk_me, st.ctx_swaps) < 128 && offsetof(npk_me, st.aborted_cycles) >= 64,
               "an ME's hot fields and counters fill its first two cache lines");

/* register n (modulo 128) of GPR bank `bank` (0 A, 1 B), of transfer file `kind` (XK_*) */
static inline uint32_t *npk_gpr(npk_me *m, int bank, uint32_t n)
{
    return &m->rf[(n & 127) * NPK_RF_FILES + (uint32_t)bank];
}
static inline uint32_t *npk_xfer(npk_me *m, int kind, uint32_t n)
{
    return &m->rf[(n & 127) * NPK_RF_FILES + NPK_RF_XFER + (uint32_t)kind];
}

/* m runs `mode` (4 or 8) contexts: 8 have 16 relative registers each (context * 16), 4 have
 * 32 (the even contexts: (ctx & 6) * 16) */
static inline void npk_set_ctx_mode(npk_me *m, int mode)
{
    m->ctx_mode = mode;
    for (uint32_t i = 0; i < NPK_NCTX; i++) m->ctx[i].base = (uint8_t)((mode == 8 ? i : i & 6) << 4);
}

typedef struct npk_event {
    uint64_t cycle;
    uint64_t seq;
    uint8_t kind;          /* EVK_* */
    uint8_t unit, me, ctx;
    uint8_t cmd, sub, xkind, chan;   /* cmd, sub: the fields as issued (history records) */
    uint8_t op;            /* NPK_CMD_*: what the unit carries out */
    uint8_t xin;           /* EV_XIN_*: counted as pushing into read transfer registers */
    uint16_t sigmask;
    uint16_t count;        /* longwords */
    uint32_t addr;
    uint16_t xidx;         /* first transfer register, 0..127 */
    uint16_t pc;           /* instruction that issued the command (fault reports; < 8192) */
    struct npk_event *link;   /* the next event of the same cycle on the wheel (its ring) */
    uint32_t aux;
    /* NPK_MAX_XFER_WORDS longwords of its own (the data a command pulls), kept beside the
     * event's chunk so that the event itself fits one cache line; set when the chunk is
     * made, never cleared (npk_ev_alloc clears what comes before it) */
    uint32_t *data;
} npk_event;

enum { EVK_MEM = 0, EVK_SIGNAL = 1, EVK_TCAM = 2 /* a TCAM lookup (units/tcam.c) */ };
enum { EV_XIN = 1, EV_XIN_FOREIGN = 2 };

/* whether a command moving `n` transfer registers from the `first` of its context's
 * window goes past it (a window: 16 registers in 8-context mode, 32 in 4; the most a
 * command moves, NPK_MAX_XFER_WORDS) */
static inline int npk_xin_foreign(int ctx_mode, uint32_t first, uint32_t n)
{
    return first + (n > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : n) > (ctx_mode == 8 ? 16u : 32u);
}

/* What writes a context's read transfer registers while it runs ahead: the completions
 * of commands that push (its own, and those of the ME's other contexts that push outside
 * their own window: npk_ctx.xin_pending, npk_me.xin_foreign) and the MSF device (its next
 * event).  A command that pushes (`foreign`: past its context's window) is counted when
 * issued ... */
static inline void npk_xin_issued(npk_me *m, npk_event *ev, int foreign)
{
    m->ctx[ev->ctx].xin_pending++;
    ev->xin = EV_XIN;
    if (foreign) {
        ev->xin |= EV_XIN_FOREIGN;
        m->xin_foreign++;
    }
}
/* ... and no more when it completes */
static inline void npk_xin_done(npk_me *m, const npk_event *ev)
{
    if (!ev->xin) return;
    m->ctx[ev->ctx].xin_pending--;
    if (ev->xin & EV_XIN_FOREIGN) m->xin_foreign--;
}

typedef struct npk_heap_ent {
    uint64_t cycle, seq;
    npk_event *ev;
} npk_heap_ent;

typedef struct npk_chan {
    uint64_t busy_until;
    uint64_t outstanding;
    npk_unit_stats st;
    uint64_t pad_;         /* (a cache line each: c->chan[unit][chan] is a shift away) */
} npk_chan;
_Static_assert(sizeof(npk_chan) == 64, "a channel fills one cache line");

typedef struct npk_ring {
    uint32_t base, size, head, tail, count, margin;
} npk_ring;

typedef struct npk_bp {
    int used, me, ctx;
    uint32_t pc;
} npk_bp;

typedef struct npk_wp {
    int used, is_mem, me, kind, space;
    uint64_t addr;
    uint32_t index, len;
} npk_wp;

struct npk_chip {
    npk_config cfg;
    uint64_t now;
    uint64_t seq;
    uint64_t due[NPK_MAX_ME];  /* per ME: min(next, pend_min) (npk_set_due) */
    int due_now;               /* an ME became due at c->now while the run loop ran MEs */
    /* the same as a calendar, so the run loop finds the next cycle an ME is due and the
     * MEs due then without scanning: cal[cycle % NPK_CAL] holds the MEs due at a cycle in
     * [cal_base, cal_base + NPK_CAL), cal_bits the slots in use; cal_far the MEs due
     * later (not NPK_NEVER: an ME never due is in none), none of them before
     * cal_far_min; cal_late the MEs due before cal_base (not expected: the run loop then
     * scans due[]) */
    uint64_t cal_base, cal_bits, cal_far_min;
    uint32_t cal[NPK_CAL], cal_far, cal_late;
    /* divisions the hot paths avoid (npk_create): unit_bytes as a shift (>= 32: not a
     * power of two), DRAM channel interleave, SRAM and DRAM channel counts */
    uint8_t unit_shift[NPK_UNIT_COUNT];
    const npk_unit_cfg *unit_cfg[NPK_UNIT_COUNT];   /* NPK_UNIT_* -> its part of cfg */
    uint32_t dram_chans, dram_il, dram_il_shift;
    uint8_t sram_chan_of[4];   /* SRAM channel of address bits 31:30 (modulo the channels there are) */
    uint64_t dram_chans_m;
    npk_me me[NPK_MAX_ME];
    npk_uop *uops;             /* every ME's pre-decoded control store (npk_me.uop points in:
                                * to its own, or to another ME's with the same words, chip.c
                                * npk_load_ustore) */
    uint32_t ustore_loaded;    /* bit i: ME i's control store was loaded (its words decoded) */
    uint8_t *sram;         /* channels * sram_channel_bytes */
    uint8_t *dram;
    uint8_t *scratch;
    npk_ring rings[16];
    uint32_t *cap_csr;
    uint32_t irq;
    uint32_t irq_stop;     /* npk_run stops when irq & irq_stop (npk_xscale_irq_stop) */
    int mem_fd[3];         /* memfds behind sram, dram, scratch (-1: anonymous) */
    size_t mem_len[3];     /* their mapped, page-rounded lengths */
    npk_chan chan[NPK_UNIT_COUNT][4];
    /* events (sched.c): a pool in chunks, the wheel of the next NPK_WHEEL cycles (per
     * cycle a ring of events linked by npk_event.link), a heap of the events beyond it */
    npk_event **chunk;
    uint32_t pool_cap, pool_used;
    npk_event **free_list;
    uint32_t nfree;
    npk_heap_ent *heap;
    uint32_t nheap;
    uint64_t wheel_base;       /* the wheel holds cycles [wheel_base, wheel_base + NPK_WHEEL) */
    uint64_t ev_first;         /* the earliest event's cycle, NPK_NEVER: none */
    uint32_t wheel_count;
    npk_event *wheel_last[NPK_WHEEL];   /* each cycle's events a ring: the last pushed, whose
                                         * link is the first (one pointer a cycle: the slots
                                         * events are due in stay few cache lines) */
    uint64_t wheel_bits[NPK_WHEEL / 64];
    /* run control */
    uint32_t nbr_sig_words;   /* control-store words that write NEXT/PREV_NEIGHBOR_SIGNAL */
    int wake_ahead;           /* npk_run completing events, run-ahead allowed (WAKE_*): a context
                               * woken on an idle ME runs its first local words (me.c wake) */
    uint32_t woke;            /* ... WAKE_AFTER: the MEs whose woken context runs them after the
                               * step's events (npk_run, npk_me_run_woken) */
    uint64_t run_end;         /* npk_run: the cycle its budget ends */
    uint64_t lookahead;       /* npk_run: the fewest cycles from an ME's word to its effect
                               * on another ME's contexts (cross_me_lookahead) */
    int stop_req;
    npk_stop_info stop;
    int step_me, step_ctx;
    npk_bp bp[NPK_MAX_BP];
    npk_wp wp[NPK_MAX_WP];
    int nbp, nwp_reg, nwp_mem;
    int fast_ok;              /* npk_run: words may take the fast loop and plain-command turn
                               * (no breakpoint, register watchpoint, instruction history or
                               * profile: those need every word on the general path) */
    /* per-instruction profile (npk_profile_enable; NULL: off): per ME 2 * ustore_words
     * counters, the executions of each address, then the taken branches of each */
    uint64_t *prof;
    /* history */
    int hist_level;
    npk_hist_event *hist;
    uint32_t hist_cap, hist_head, hist_len;
    uint64_t hist_dropped;
    uint64_t hist_hash;
    /* MSF */
    npk_msf_ops msf;
    int msf_custom;
    uint8_t *msf_buf;
    uint64_t msf_counts[5];
    /* faults (npk_fault_*): counts by kind, the last NPK_FAULT_LOG records */
    uint64_t fault_count[NPK_FAULT_KINDS];
    npk_fault fault_log[NPK_FAULT_LOG];
    uint32_t fault_head, fault_len;
    /* guarded scratch words (npk_scratch_guard): a write to [guard_base, + guard_bytes)
     * whose bit is clear is recorded (scratch.c) */
    uint32_t guard_base, guard_bytes;
    uint8_t guard_allowed[NPK_GUARD_WORDS / 8];
    npk_guard_hit guard_log[NPK_GUARD_LOG];
    uint32_t guard_len;
    uint64_t msf_next;         /* npk_run: the MSF device's next event (what bounds xin_own words) */
    const npk_event *cur_ev;   /* command being completed, NULL outside npk_unit_complete */
    int cur_faulted;           /* cur_ev has already recorded its fault */
    /* the TCAM (units/tcam.c): an SRAM `read` of [tcam_lo, tcam_lo + tcam_len), its result
     * slots, is a lookup (tcam_len 0: no TCAM: no address is); tcam_off: the window's
     * offset in c->sram.  (Here at the end: the fields before keep their places, and the
     * offsets the hot paths use.) */
    uint32_t tcam_lo, tcam_len;
    uint64_t tcam_off;
    npk_tcam_stats tcam_st;
    char err[160];
};

/* ME numbers (npk_emu.h "ME numbers"): hardware number c << 4 | m of flat index i, and
 * back (-1 when the number names no ME of this chip) */
static inline uint32_t npk_me_hw(const npk_chip *c, int i)
{
    uint32_t k = c->cfg.me_per_cluster;
    return ((uint32_t)i / k) << 4 | (uint32_t)i % k;
}
static inline int npk_me_flat(const npk_chip *c, uint32_t hw)
{
    uint32_t k = c->cfg.me_per_cluster, cl = hw >> 4, m = hw & 0xF;
    if (cl > 1 || m >= k || cl * k + m >= c->cfg.num_me) return -1;
    return (int)(cl * k + m);
}

/* ME i enters (add) or leaves the calendar's entry for cycle d (an ME never due is in
 * none: nothing to do for d = NPK_NEVER) */
static inline void npk_cal_mark(npk_chip *c, uint32_t i, uint64_t d, int add)
{
    uint32_t bit = 1u << i;
    if (d - c->cal_base < NPK_CAL) {   /* inside the window (unsigned: d >= cal_base) */
        uint32_t s = (uint32_t)d & (NPK_CAL - 1);
        if (add) {
            c->cal[s] |= bit;
            c->cal_bits |= 1ull << s;
        } else {
            c->cal[s] &= ~bit;
            c->cal_bits &= ~((uint64_t)(c->cal[s] == 0) << s);   /* (no branch: see npk_wheel_append) */
        }
    } else if (d == NPK_NEVER) {
        return;
    } else if (d >= c->cal_base) {
        if (add) {
            c->cal_far |= bit;
            if (d < c->cal_far_min) c->cal_far_min = d;
        } else {
            c->cal_far &= ~bit;   /* cal_far_min stays a lower bound */
        }
    } else if (add) {
        c->cal_late |= bit;
    } else {
        c->cal_late &= ~bit;
    }
}

static inline void npk_set_due(npk_chip *c, uint32_t i, uint64_t d)
{
    uint64_t old = c->due[i];
    if (old == d) return;
    npk_cal_mark(c, i, old, 0);
    c->due[i] = d;
    npk_cal_mark(c, i, d, 1);
}

/* when ME m acts next: its next instruction or a pending CSR write (npk_run's calendar) */
static inline void npk_me_set_next(npk_chip *c, npk_me *m, uint64_t t)
{
    m->next = t;
    npk_set_due(c, (uint32_t)m->idx, t < m->pend_min ? t : m->pend_min);
    if (t <= c->now) c->due_now = 1;
}
static inline void npk_me_set_pend(npk_chip *c, npk_me *m, uint64_t t)
{
    m->pend_min = t;
    npk_set_due(c, (uint32_t)m->idx, t < m->next ? t : m->next);
    if (t <= c->now) c->due_now = 1;
}

/* the fewest cycles from a neighbour-signal write to the signal: its write-to-use delay,
 * or none when the delay is longer than the queue of pending writes is deep (a write
 * to a full queue takes effect at once, exec_local_csr; with one write a cycle at most,
 * a delay of NPK_MAX_PEND or less never fills it) */
static inline uint64_t npk_nbr_sig_lookahead(const npk_chip *c)
{
    return c->cfg.csr_write_to_use <= NPK_MAX_PEND ? c->cfg.csr_write_to_use : 0;
}

/* sched.c */
#define NPK_EV_SLOT(cycle) ((uint32_t)(cycle) & (NPK_WHEEL - 1))   /* a cycle's ring on the wheel */
void npk_ev_find_first(npk_chip *c);   /* ev_first anew, from ev_first on */
void npk_ev_push_heap(npk_chip *c, npk_event *e);
/* event e onto the wheel's ring of `cycle`, last */
static inline void npk_wheel_append(npk_chip *c, npk_event *e, uint64_t cycle)
{
    uint32_t s = NPK_EV_SLOT(cycle);
    /* after the last, before the first; an empty slot's ring is e alone.  Without a branch:
     * whether the cycle has an event already follows the emulated schedule, which the host's
     * branch predictor cannot learn when it is irregular (1.06x the memory loop;
     * docs/performance-log.md, "a schedule the host cannot predict").  A mask, not `?:`,
     * which the profile-guided build turned back into a branch */
    npk_event *last = c->wheel_last[s];
    npk_event *l = (npk_event *)((uintptr_t)last | ((uintptr_t)e & -(uintptr_t)(last == NULL)));
    e->link = l->link;
    l->link = e;
    c->wheel_last[s] = e;
    c->wheel_bits[s >> 6] |= 1ull << (s & 63);
    c->wheel_count++;
}
/* event e (its cycle set) scheduled, after every event of its cycle pushed before it
 * (inline: every command pushes one) */
static inline void npk_ev_push(npk_chip *c, npk_event *e)
{
    e->seq = c->seq++;
    if (e->cycle - c->wheel_base >= NPK_WHEEL) {   /* (unsigned: not before the wheel's window either) */
        npk_ev_push_heap(c, e);
        return;
    }
    npk_wheel_append(c, e, e->cycle);
    if (e->cycle < c->ev_first) c->ev_first = e->cycle;
}
npk_event *npk_ev_pop_heap(npk_chip *c);
/* the earliest event (NULL: none); npk_ev_free it.  (Inline: once a completion; the wheel
 * holds every event but those past its window, which only the heap's pop finds.) */
static inline npk_event *npk_ev_pop(npk_chip *c)
{
    if (!c->wheel_count) return npk_ev_pop_heap(c);
    uint32_t s = NPK_EV_SLOT(c->ev_first);
    npk_event *last = c->wheel_last[s], *e = last->link;
    c->wheel_count--;
    if (e != last) {
        last->link = e->link;
    } else {
        c->wheel_last[s] = NULL;
        /* the slot's last: the next is mostly in the same word of the bitmap */
        uint64_t *w = &c->wheel_bits[s >> 6];
        uint64_t later = (*w &= ~(1ull << (s & 63))) & (~0ull << (s & 63));
        if (later) c->ev_first += (uint64_t)__builtin_ctzll(later) - (s & 63);
        else npk_ev_find_first(c);
    }
    return e;
}
void npk_ev_free_all(npk_chip *c);
void npk_ev_from_heap(npk_chip *c, uint64_t now);   /* events the wheel's window now reaches */
/* the run loop reached cycle `now` (inline: once a step of the loop) */
static inline void npk_ev_advance(npk_chip *c, uint64_t now)
{
    if (now <= c->wheel_base) return;
    c->wheel_base = now;  /* no event is earlier: the run loop never passes one */
    if (c->nheap) npk_ev_from_heap(c, now);
}
void npk_ev_reset(npk_chip *c);
static inline uint64_t npk_ev_next_cycle(const npk_chip *c) { return c->ev_first; }
static inline npk_event *npk_ev_at(const npk_chip *c, uint32_t i) { return &c->chunk[i / NPK_EV_CHUNK][i % NPK_EV_CHUNK]; }
/* event e, cleared (but for its data, which commands fill as far as they need) */
static inline npk_event *npk_ev_init(npk_event *e)
{
    memset(e, 0, offsetof(npk_event, data));
    return e;
}
npk_event *npk_ev_alloc_new(npk_chip *c);
/* a new event (NULL: no memory); a freed one when there is one (inline: every command
 * takes one) */
static inline npk_event *npk_ev_alloc(npk_chip *c)
{
    return c->nfree ? npk_ev_init(c->free_list[--c->nfree]) : npk_ev_alloc_new(c);
}
static inline void npk_ev_free(npk_chip *c, npk_event *e) { c->free_list[c->nfree++] = e; }
/* a new event whose every field up to `data` the caller sets (NULL: no memory) */
static inline npk_event *npk_ev_alloc_unset(npk_chip *c)
{
    return c->nfree ? c->free_list[--c->nfree] : npk_ev_alloc_new(c);
}

/* history.c */
/* the profile's size in bytes (c->prof) */
static inline size_t npk_profile_bytes(const npk_chip *c)
{
    return (size_t)c->cfg.num_me * 2 * c->cfg.ustore_words * sizeof(uint64_t);
}
/* the profile (c->prof) counts word pc of m, run by context x (had_br: a deferred branch
 * was in flight before it) */
void npk_profile_rec(npk_chip *c, const npk_me *m, const npk_ctx *x, uint32_t pc, int had_br);
void npk_hist_rec(npk_chip *c, int kind, int me, int ctx, int unit, uint32_t a0, uint32_t a1);
static inline void npk_hist(npk_chip *c, int kind, int me, int ctx, int unit, uint32_t a0, uint32_t a1)
{
    if (c->hist_level)
        npk_hist_rec(c, kind, me, ctx, unit, a0, a1);
}

/* me.c */
void npk_me_advance(npk_chip *c, npk_me *m, uint64_t horizon, uint64_t end, int ahead);
/* when a context woken on an idle ME runs its first local words (npk_chip.wake_ahead):
 * not at all, at its wake (with no MSF device nothing but the chip's own completions writes
 * transfer registers), after the step's events (the device's next event known then) */
enum { WAKE_OFF = 0, WAKE_NOW = 1, WAKE_AFTER = 2 };
/* WAKE_AFTER: ME m's woken context runs its first local words up to `horizon` (the next
 * event) and `end` */
void npk_me_run_woken(npk_chip *c, npk_me *m, uint64_t horizon, uint64_t end);
/* control-store word w decoded into u for an ME in ctx_mode (me.c); whether a word
 * writes NEXT/PREV_NEIGHBOR_SIGNAL (npk_chip.nbr_sig_words) */
void npk_predecode_word(const npk_chip *c, npk_uop *u, uint64_t w, int ctx_mode);
int npk_word_signals_neighbour(uint64_t w);
/* chip.c: word addr of ME m's control store written (while running too); m's pre-decoded
 * words its own again, shared with no other ME */
void npk_me_store_word(npk_chip *c, npk_me *m, uint32_t addr, uint64_t w);
void npk_ctx_signal(npk_chip *c, npk_me *m, int ctx, uint16_t mask);
void npk_ctx_set_state(npk_chip *c, npk_me *m, int ctx, int state);
void npk_me_stop(npk_chip *c, npk_me *m, int ctx, int why, uint32_t pc, uint64_t w, const char *reason);
void npk_me_pick(npk_chip *c, npk_me *m, uint64_t t);

/* csr.c */
void npk_me_apply_csrs(npk_chip *c, npk_me *m);
/* how far the CSR writes due by t reach: LCSR_PRIVATE (only m's words read them),
 * LCSR_CONTEXTS (m's contexts: signals), LCSR_CHIP (anything else) */
enum { LCSR_PRIVATE = 0, LCSR_CONTEXTS = 1, LCSR_CHIP = 2 };
int npk_me_due_csrs_reach(const npk_me *m, uint64_t t);
uint32_t npk_lcsr_read(npk_chip *c, npk_me *m, int ctx, uint32_t addr);
void npk_lcsr_write(npk_chip *c, npk_me *m, int ctx, uint32_t addr, uint32_t v);

/* alu.c */
uint32_t npk_crc(npk_me *m, uint32_t type, uint32_t data, uint32_t bytes_sel, int le, int bit_swap);
uint32_t npk_cam_lookup(npk_me *m, uint32_t key, uint32_t entries);
void npk_cam_touch(npk_me *m, int entry);
void npk_cam_reset(npk_me *m);

/* units: a command's timing, when it is issued (inline: every command pays for it) */
static inline const npk_unit_cfg *npk_unit_cfg_of(const npk_chip *c, int unit)   /* NPK_UNIT_* */
{
    return c->unit_cfg[unit];
}

/* the channel's command queue is full: the issuing word stalls */
static inline int npk_unit_full(const npk_chip *c, int unit, int chan)
{
    const npk_unit_cfg *u = npk_unit_cfg_of(c, unit);
    return u->queue_depth && c->chan[unit][chan & 3].outstanding >= u->queue_depth;
}

/* the cycles a command moving `bytes` keeps a channel of `unit` busy */
static inline uint64_t npk_unit_occupancy(const npk_chip *c, int unit, uint32_t bytes)
{
    const npk_unit_cfg *u = npk_unit_cfg_of(c, unit);
    uint32_t ub = u->unit_bytes ? u->unit_bytes : 4;
    uint32_t sh = c->unit_shift[unit];
    uint64_t units = sh < 32 ? (bytes + ub - 1) >> sh : (bytes + ub - 1) / ub;
    if (units == 0) units = 1;
    return units * u->cycles_per_unit;
}

/* A command issued now joins the channel queue after cmd_overhead, is served in FIFO
 * order (the channel busy for its occupancy `occ`, npk_unit_occupancy), and completes
 * read/write_latency cycles after its service ends: the cycle it completes. */
static inline uint64_t npk_unit_schedule_occ(npk_chip *c, int unit, int chan, uint32_t bytes, uint64_t occ, int is_write)
{
    const npk_unit_cfg *u = npk_unit_cfg_of(c, unit);
    npk_chan *ch = &c->chan[unit][chan & 3];
    uint64_t arrive = c->now + u->cmd_overhead;
    uint64_t start = ch->busy_until > arrive ? ch->busy_until : arrive;
    ch->busy_until = start + occ;
    ch->st.commands++;
    ch->st.bytes += bytes;
    ch->st.busy_cycles += occ;
    ch->st.queue_sum += ch->outstanding;
    if (ch->outstanding + 1 > ch->st.queue_max) ch->st.queue_max = ch->outstanding + 1;
    ch->outstanding++;
    return start + occ + (is_write ? u->write_latency : u->read_latency);
}

static inline uint64_t npk_unit_schedule(npk_chip *c, int unit, int chan, uint32_t bytes, int is_write)
{
    return npk_unit_schedule_occ(c, unit, chan, bytes, npk_unit_occupancy(c, unit, bytes), is_write);
}

/* units/tcam.c: a lookup completes; the counters cleared (npk_reset) */
void npk_tcam_complete(npk_chip *c, npk_event *e);
void npk_tcam_reset(npk_chip *c);

/* units/common.c: any other completion (its semantics, pushed registers, signals) */
void npk_unit_complete(npk_chip *c, npk_event *e);
/* where the nb bytes at SRAM address addr lie in c->sram (channel addr[31:30], offset
 * addr[29:0]): 1 and *off when inside one channel's memory, else 0 */
static inline int npk_sram_span(const npk_chip *c, uint32_t addr, uint32_t nb, uint64_t *off)
{
    uint32_t ch = addr >> 30;
    uint64_t o = addr & 0x3FFFFFFFu;
    if (ch >= c->cfg.sram.channels || o + nb > c->cfg.sram_channel_bytes) return 0;
    *off = (uint64_t)ch * c->cfg.sram_channel_bytes + o;
    return 1;
}
/* npk_sram_span of one longword, a fault (NPK_FAULT_SRAM) when outside */
int npk_sram_addr(npk_chip *c, uint32_t addr, uint64_t *off);
/* memories hold longwords big-endian (byte 0 = bits 31:24) */
static inline uint32_t npk_rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}
static inline void npk_wr32(uint8_t *p, uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4);
}

/* A command completes: its channel has one fewer in its queue, its pushes are counted
 * done (npk_xin_done) */
static inline void npk_complete_begin(npk_chip *c, npk_me *m, const npk_event *e)
{
    npk_chan *ch = &c->chan[e->unit][e->chan & 3];
    if (ch->outstanding) ch->outstanding--;
    npk_xin_done(m, e);
}

/* Where a plain read (SRAM, DRAM or scratch `read`) takes its e->count longwords from,
 * when they all lie inside the memory (NULL: the semantics function, which reports the
 * fault).  The same bytes as npk_sram_read / npk_dram_read / npk_scratch_read. */
static inline const uint8_t *npk_plain_read_src(const npk_chip *c, const npk_event *e)
{
    uint32_t nb = 4u * e->count;
    switch (e->op) {
    case NPK_CMD_DRAM_READ: {
        uint64_t a = e->addr & ~7u;
        return a + nb <= c->cfg.dram_bytes ? c->dram + a : NULL;
    }
    case NPK_CMD_SRAM_READ: {
        uint64_t o;
        return npk_sram_span(c, e->addr & ~3u, nb, &o) ? c->sram + o : NULL;
    }
    case NPK_CMD_SCRATCH_READ: {
        uint64_t a = e->addr & ~3u;
        return a + nb <= c->cfg.scratch_bytes ? c->scratch + a : NULL;
    }
    default:
        return NULL;
    }
}

/* The commonest completion, a read inside its memory with no register watchpoint, straight
 * into the transfer registers (inline: the run loop's); 0: e is not one, nothing done */
static inline int npk_complete_plain_read(npk_chip *c, npk_event *e)
{
    const uint8_t *src;
    if (c->nwp_reg || e->count - 1u >= NPK_MAX_XFER_WORDS || !(src = npk_plain_read_src(c, e))) return 0;
    npk_me *m = &c->me[e->me];
    npk_complete_begin(c, m, e);
    *npk_xfer(m, e->xkind, e->xidx) = npk_rd32(src);
    for (uint32_t i = 1; i < e->count; i++) *npk_xfer(m, e->xkind, e->xidx + i) = npk_rd32(src + 4 * i);
    npk_hist(c, NPK_EV_MEM_DONE, e->me, e->ctx, e->unit, e->cmd, e->addr);
    if (e->sigmask) npk_ctx_signal(c, m, e->ctx, e->sigmask);
    return 1;
}

/* x % d for the 32-bit x and the divisor d of a fastmod constant m = npk_fastmod_m(d) */
static inline uint64_t npk_fastmod_m(uint32_t d) { return ~0ull / d + 1; }
static inline uint32_t npk_fastmod(uint32_t x, uint64_t m, uint32_t d)
{
    return (uint32_t)(((unsigned __int128)(m * x) * d) >> 64);
}
void npk_mem_watch(npk_chip *c, int space, uint64_t addr, uint32_t len);
/* longword accessors of a memory (they count their own faults) and what SRAM and
 * scratch share: reads and writes of e->count words, the atomic commands (one word) */
typedef uint32_t (*npk_word_rd)(npk_chip *c, uint32_t addr);
typedef void (*npk_word_wr)(npk_chip *c, uint32_t addr, uint32_t v);
enum { NPK_ATOMIC_SWAP, NPK_ATOMIC_SET, NPK_ATOMIC_CLR, NPK_ATOMIC_ADD, NPK_ATOMIC_SUB,
       NPK_ATOMIC_INCR, NPK_ATOMIC_DECR };
void npk_mem_read_words(npk_chip *c, npk_event *e, uint32_t *out, npk_word_rd rd);
void npk_mem_write_words(npk_chip *c, npk_event *e, npk_word_wr wr);
void npk_mem_atomic(npk_chip *c, npk_event *e, uint32_t *out, npk_word_rd rd, npk_word_wr wr, int op);
/* the word commands SRAM and scratch both have (read, write and the atomics): the
 * semantics functions npk_<UNIT>_<cmd> on the unit's accessors RD and WR */
#define NPK_WORD_SEM(UNIT, NAME, OP, RD, WR) \
    void npk_##UNIT##_##NAME(npk_chip *c, npk_event *e, uint32_t *out) { npk_mem_atomic(c, e, out, RD, WR, OP); }
#define NPK_WORD_COMMANDS(UNIT, RD, WR) \
    void npk_##UNIT##_read(npk_chip *c, npk_event *e, uint32_t *out) { npk_mem_read_words(c, e, out, RD); } \
    void npk_##UNIT##_write(npk_chip *c, npk_event *e, uint32_t *out) { (void)out; npk_mem_write_words(c, e, WR); } \
    NPK_WORD_SEM(UNIT, swap, NPK_ATOMIC_SWAP, RD, WR) \
    NPK_WORD_SEM(UNIT, set, NPK_ATOMIC_SET, RD, WR) \
    NPK_WORD_SEM(UNIT, clr, NPK_ATOMIC_CLR, RD, WR) \
    NPK_WORD_SEM(UNIT, add, NPK_ATOMIC_ADD, RD, WR) \
    NPK_WORD_SEM(UNIT, incr, NPK_ATOMIC_INCR, RD, WR) \
    NPK_WORD_SEM(UNIT, decr, NPK_ATOMIC_DECR, RD, WR)
void npk_msf_stub_init(npk_chip *c);
int npk_scr_ring_full(npk_chip *c, int ring);
int npk_scr_ring_get1(npk_chip *c, int ring, uint32_t *word);
int npk_scr_ring_put1(npk_chip *c, int ring, uint32_t word);

/* chip.c */
/* record a fault made by thread me/ctx at pc (me -1: not a thread) */
__attribute__((cold)) void npk_fault_at(npk_chip *c, int kind, int me, int ctx, uint32_t pc, uint64_t addr);
/* record a fault of the command being completed (once per command), or of an API call */
__attribute__((cold)) void npk_fault_cmd(npk_chip *c, int kind, uint64_t addr);
/* a write to a guarded scratch word (npk_scratch_guard): recorded if its bit is clear */
__attribute__((cold)) void npk_guard_write(npk_chip *c, uint32_t addr);
/* a write of register (me, kind, index) from old to val by thread wme:wctx at wpc
 * (NPK_PC_UNIT: a memory unit's completion); register watchpoints fire on a change */
void npk_reg_watch(npk_chip *c, int me, int kind, uint32_t index, uint32_t old, uint32_t val,
                   int wme, int wctx, uint32_t wpc);
uint64_t npk_prng_next(uint64_t *s);

#pragma GCC visibility pop

#endif
