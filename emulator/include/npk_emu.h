/*
 * npk_emu.h -- the npkit IXP2xxx microengine emulator core (C API).
 *
 * A chip is built from an npk_config (filled by the Python side from
 * emulator/configs/<name>.yaml), loaded with control-store words, enabled per
 * ME, and run for a cycle budget.  Everything the chip holds lives in the
 * npk_chip object: no global mutable state, so several chips may coexist.
 *
 * Determinism: the same config (including seed), images and API calls give
 * the same cycle-by-cycle history.  No wall clock and no pointer order is
 * consulted anywhere.
 *
 * Execution model: every ME issues at most one instruction per cycle for its
 * running context; MEs are stepped in index order each cycle, unit
 * completions (ordered by cycle, then issue order) are processed before the
 * MEs of that cycle.  When nothing is runnable the chip jumps to the next
 * completion.  Instructions that only touch their own ME (datapath, branches
 * on condition codes, local_csr_rd, queued local_csr_wr) may run ahead of the
 * other MEs up to the next completion.  Those of them on the fast path that
 * read no read transfer register (which only completions and the MSF device
 * write) may run on past completions, to the end of the run's budget or the
 * next due CSR write: no event reads or writes what they touch.  Context
 * swaps and SAME_ME_SIGNAL writes, which another ME's signal could overtake,
 * run ahead only as far as no such signal can arrive (the fastest unit's
 * command overhead + latency, or the CSR write-to-use delay when a control
 * store writes a neighbour signal).
 * Results are identical to lock-step execution, and lock-step is used
 * whenever history, breakpoints, watchpoints or stepping are active so that
 * records come out in cycle order.
 *
 * Conventions
 *   - cycles are microengine clock cycles;
 *   - memory byte addresses: SRAM channel = addr[31:30], offset = addr[29:0];
 *     DRAM is one flat space (channel chosen by config interleave);
 *     scratch is flat.  Longwords are stored big-endian (byte 0 = bits 31:24);
 *   - register indices for GPR, transfer and NN registers are absolute
 *     (0..127 per bank/kind); context-relative numbering is done by the
 *     decoder exactly as the hardware does (8-ctx: ctx*16+r, 4-ctx:
 *     (ctx/2)*32+r).
 *   - functions returning int return 0 on success and a negative NPK_E*
 *     code on error (bad ME/ctx/index, out-of-range address).
 *
 * The built-in MSF device (ports, RBUF, TBUF) has its own header, npk_msf.h.
 *
 * The block between CDEF-BEGIN and CDEF-END is read verbatim by the Python
 * binding (cffi ABI mode), so it holds only declarations cffi understands.
 */
#ifndef NPK_EMU_H
#define NPK_EMU_H
#include <stdint.h>
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
typedef struct npk_chip npk_chip;

enum {
    NPK_OK = 0,
    NPK_EINVAL = -1,     /* bad argument (ME, context, index, kind) */
    NPK_ERANGE = -2,     /* address outside the memory */
    NPK_ENOMEM = -3,
    NPK_ESTATE = -4      /* operation impossible in the current state */
};

/* Timing of one shared unit.  A command issued at cycle t joins its channel
 * queue at t + cmd_overhead, starts when the channel is free, occupies the
 * channel for ceil(bytes / unit_bytes) * cycles_per_unit cycles and signals
 * read_latency (or write_latency) cycles after its occupancy ends. */
typedef struct npk_unit_cfg {
    uint32_t channels;
    uint32_t cmd_overhead;
    uint32_t read_latency;
    uint32_t write_latency;
    uint32_t unit_bytes;
    uint32_t cycles_per_unit;
    uint32_t queue_depth;     /* commands a channel holds (queued + in service); 0 = unbounded.
                                 An ME issuing to a full channel stalls and retries. */
} npk_unit_cfg;

/* A ternary CAM (network search engine) on an SRAM channel (docs/tcam.md): it answers a
 * 2 MB window of the channel, whose SRAM bytes are its storage (entries, key slots,
 * counters).  A read of a result slot is a lookup: served for cycles_per_lookup cycles on
 * the channel, it completes read_latency + lookup_latency cycles after its service. */
typedef struct npk_tcam_cfg {
    uint32_t present;           /* 0: no TCAM (the other fields are not looked at) */
    uint32_t channel;           /* SRAM channel */
    uint32_t window;            /* byte offset of the window in the channel, 2 MB aligned */
    uint32_t entries;           /* 1..8192 */
    uint32_t key_bits;          /* 72, 144, 288 */
    uint32_t result_bits;       /* 32 or 64 */
    uint32_t lookup_latency;
    uint32_t cycles_per_lookup;
} npk_tcam_cfg;

typedef struct npk_config {
    char name[32];
    uint32_t clock_mhz;
    uint32_t num_me;            /* <= 16 */
    uint32_t ctx_per_me;        /* 8 */
    uint32_t ustore_words;      /* <= 8192 */
    uint32_t lm_words;          /* <= 1024 */
    uint32_t cam_entries;       /* <= 16 */
    uint32_t nn_full_threshold; /* NN_FULL asserted when ring count >= this */
    uint32_t branch_taken_penalty;
    uint32_t ctx_swap_cost;
    uint32_t csr_write_to_use;  /* cycles before a local_csr_wr takes effect */
    uint32_t timestamp_shift;   /* TIMESTAMP counts cycles >> shift */
    uint64_t sram_channel_bytes;
    uint64_t dram_bytes;
    uint32_t dram_interleave;   /* bytes per DRAM channel stripe */
    uint32_t scratch_bytes;
    uint32_t scratch_rings;
    uint32_t history_capacity;  /* events kept in the ring buffer */
    uint64_t seed;
    uint64_t hash_mult48;
    uint64_t hash_mult64;
    uint64_t hash_mult128_lo;
    uint64_t hash_mult128_hi;
    npk_unit_cfg sram;
    npk_unit_cfg dram;
    npk_unit_cfg scratch;
    npk_unit_cfg hash;
    npk_unit_cfg cap;
    npk_unit_cfg msf;
    npk_unit_cfg pci;
    uint32_t me_per_cluster;    /* MEs per cluster: 8 (IXP2800), 4 (IXP2400); 0 = half of num_me
                                   rounded up to a power of two.  See "ME numbers" below. */
    npk_tcam_cfg tcam;
} npk_config;

/* units (statistics, history) */
enum {
    NPK_UNIT_SRAM = 0, NPK_UNIT_DRAM = 1, NPK_UNIT_SCRATCH = 2, NPK_UNIT_HASH = 3,
    NPK_UNIT_CAP = 4, NPK_UNIT_MSF = 5, NPK_UNIT_PCI = 6, NPK_UNIT_COUNT = 7
};

/* memory spaces for npk_mem_read / npk_mem_write / watchpoints */
enum { NPK_MEM_SRAM = 0, NPK_MEM_DRAM = 1, NPK_MEM_SCRATCH = 2 };

/* register kinds for npk_reg_read / npk_reg_write */
enum {
    NPK_REG_GPR_A = 0,      /* index 0..127 absolute */
    NPK_REG_GPR_B = 1,
    NPK_REG_SXFER_IN = 2,   /* SRAM transfer registers, read half (memory -> ME) */
    NPK_REG_SXFER_OUT = 3,  /* SRAM transfer registers, write half (ME -> memory) */
    NPK_REG_DXFER_IN = 4,
    NPK_REG_DXFER_OUT = 5,
    NPK_REG_NN = 6,         /* next-neighbour registers 0..127 */
    NPK_REG_LM = 7,         /* local memory word index */
    NPK_REG_CAM_TAG = 8,    /* index = entry */
    NPK_REG_CAM_STATE = 9,
    NPK_REG_CSR = 10,       /* index = local CSR byte address; ctx = context for ACTIVE_* */
    NPK_REG_PC = 11,        /* per ctx */
    NPK_REG_CC = 12,        /* per ctx: bit0 Z, bit1 N, bit2 C, bit3 V */
    NPK_REG_SIGNALS = 13,   /* per ctx: bit n = signal n */
    NPK_REG_CTX_STATE = 14, /* per ctx: NPK_CTX_* (read only) */
    NPK_REG_WAIT_MASK = 15  /* per ctx: signals awaited (read only) */
};

enum { NPK_CTX_INACTIVE = 0, NPK_CTX_READY = 1, NPK_CTX_RUNNING = 2, NPK_CTX_SLEEP = 3 };

enum {
    NPK_STOP_BUDGET = 0,      /* cycle budget used up */
    NPK_STOP_HALTED = 1,      /* no ME has an enabled context left */
    NPK_STOP_BREAKPOINT = 2,
    NPK_STOP_WATCHPOINT = 3,
    NPK_STOP_STEP = 4,        /* npk_step finished its instruction */
    NPK_STOP_IRQ = 5          /* an XScale interrupt in the npk_xscale_irq_stop mask was raised */
};

/* why an ME stopped (npk_me_info) */
enum {
    NPK_ME_RUNNING = 0,
    NPK_ME_HALT = 1,          /* ctx_arb[bpt] / halt */
    NPK_ME_ILLEGAL = 2,       /* undecodable word */
    NPK_ME_BAD_PC = 3,        /* PC outside the control store */
    NPK_ME_IDLE = 4           /* no context enabled */
};

typedef struct npk_me_info {
    int32_t state;            /* NPK_ME_* */
    int32_t ctx;              /* context that stopped it */
    uint32_t pc;
    uint64_t word;
    uint64_t cycle;
    char reason[96];
} npk_me_info;

/* npk_stop_info.pc of a register watchpoint written by a memory unit's completion
 * (a read's transfer registers): me/ctx are then the thread that issued the command */
#define NPK_PC_UNIT 0xFFFFFFFFu

typedef struct npk_stop_info {
    int32_t reason;           /* NPK_STOP_* */
    int32_t me, ctx;          /* breakpoint: the thread about to execute pc; register
                                 watchpoint: the thread whose instruction at pc changed the
                                 register (it fires only when the value changes); memory
                                 watchpoint: -1 */
    uint32_t pc;
    int32_t id;               /* breakpoint / watchpoint id */
    uint64_t cycle;
} npk_stop_info;

typedef struct npk_me_stats {
    uint64_t executing_cycles; /* instructions issued */
    uint64_t aborted_cycles;   /* taken-branch bubbles */
    uint64_t stalled_cycles;   /* context swaps and other stalls */
    uint64_t idle_cycles;      /* no context ready */
    uint64_t instructions;
    uint64_t ctx_swaps;
    uint64_t ctx_instructions[8];
    uint64_t ctx_sleep_cycles[8];
    uint64_t ctx_ready_cycles[8];  /* ready but not running */
} npk_me_stats;

typedef struct npk_unit_stats {
    uint64_t commands;
    uint64_t bytes;
    uint64_t busy_cycles;
    uint64_t queue_max;
    uint64_t queue_sum;        /* sum of queue depth seen at each issue: mean = sum / commands */
} npk_unit_stats;

/* thread history */
enum {
    NPK_EV_STATE = 0,          /* a0 = new NPK_CTX_* state, a1 = pc */
    NPK_EV_MEM_ISSUE = 1,      /* unit, a0 = cmd | sub<<8 | count<<16, a1 = address */
    NPK_EV_MEM_DONE = 2,       /* unit, a0 = cmd, a1 = address */
    NPK_EV_SIGNAL = 3,         /* a0 = signal number */
    NPK_EV_HALT = 4,           /* a0 = NPK_ME_* reason, a1 = pc */
    NPK_EV_INSTR = 5,          /* a0 = pc (only with npk_history_enable(.., 2)) */
    NPK_EV_TCAM = 6,           /* a TCAM lookup completed: unit SRAM, a0 = hit << 31 | count << 16
                                  | slot, a1 = index of the best match; followed by */
    NPK_EV_TCAM_DATA = 7       /* ... its key longwords and result: a0 = i (0..8: key longword i,
                                  9: result bits 63:32, 10: bits 31:0), a1 = the longword */
};

typedef struct npk_hist_event {
    uint64_t cycle;
    uint8_t me, ctx, kind, unit;
    uint32_t a0, a1;
} npk_hist_event;

/* Faults: an access the hardware cannot carry out as the program meant it.
 * Where the HRM says what the part does with such an address, the emulator
 * does that as well (local memory indices wrap at 1024, HRM p.40); in every
 * case the access is counted here, by kind, and the last NPK_FAULT_LOG ones
 * are kept with the thread and the PC of the instruction that made them, so
 * that a bad address in microcode or an image is reported, never a host
 * crash.  Reads of a faulting address return zeros; writes are dropped.
 * Memory faults are detected when the unit carries out the command (cycle =
 * that cycle; pc = the instruction that issued it); one command counts once. */
enum {
    NPK_FAULT_SRAM = 0,        /* SRAM address in a missing channel or past the channel's memory
                                  (HRM p.218: the result is unpredictable) */
    NPK_FAULT_DRAM = 1,        /* DRAM address past dram_bytes */
    NPK_FAULT_SCRATCH = 2,     /* scratch address past scratch_bytes */
    NPK_FAULT_LOCAL_MEMORY = 3, /* local memory index lm_words..1023: addressable but not
                                  populated (HRM p.40); reads 0, writes dropped */
    NPK_FAULT_RING_UNCONFIGURED = 4, /* get/put on a scratch ring or SRAM ring of size 0
                                        (never configured); address = ring number / descriptor */
    NPK_FAULT_RING_FULL = 5,   /* put on a full ring: the words that did not fit are dropped */
    NPK_FAULT_RING_BAD = 6,    /* SRAM ring descriptor with head, tail or count outside its size */
    NPK_FAULT_XFER = 7,        /* a command's transfer registers run past register 127 */
    NPK_FAULT_MSF = 8,         /* built-in MSF device: TBUF control word of a missing element,
                                  RBUF_ELEMENT_DONE of an element not held, a freelist entry for
                                  a missing ME or a full freelist, an rbuf_rd / tbuf_wr running
                                  past the end of the 8 KB buffer (it wraps to its start) */
    NPK_FAULT_PC = 9,          /* PC outside the control store (the ME stops, NPK_ME_BAD_PC) */
    NPK_FAULT_KINDS = 10,
    NPK_FAULT_LOG = 32         /* faults kept in the log */
};

typedef struct npk_fault {
    uint64_t cycle;
    uint64_t addr;             /* the faulting address (byte address; LM: word index; ring: see kind) */
    uint32_t pc;               /* instruction that made the access */
    int32_t me, ctx;           /* -1: not made by a thread (an API call) */
    int32_t kind;              /* NPK_FAULT_* */
} npk_fault;

/* Guarded scratch words: a check that costs nothing until a program writes where it
 * must not.  npk_scratch_guard marks `words` longwords from scratch byte address `base`
 * (longword aligned) as guarded, `allowed` one bit a word (bit k of byte k / 8, LSB
 * first).  A command of a thread that writes a guarded word whose bit is clear (a write,
 * an atomic such as incr) is carried out as usual and recorded: the first write to each
 * such word, for up to NPK_GUARD_LOG words, with the thread and the PC of the instruction
 * that issued it, and how often that word was written since.  The router guards its drop and exception counters
 * so that a reason code no reason declares is reported with where it came from.  words 0
 * disarms; npk_reset clears what was recorded, not the guard. */
enum { NPK_GUARD_WORDS = 1024, NPK_GUARD_LOG = 16 };

typedef struct npk_guard_hit {
    uint64_t cycle;            /* of the first write to the word */
    uint64_t count;            /* writes to the word so far */
    uint32_t addr;             /* scratch byte address of the word */
    uint32_t pc;               /* instruction that issued the first write */
    int32_t me, ctx;           /* its thread (flat ME index); -1: not a thread */
} npk_guard_hit;

/* NPK_ERANGE: base not aligned, words > NPK_GUARD_WORDS or past scratch */
int npk_scratch_guard(npk_chip *chip, uint32_t base, uint32_t words, const uint8_t *allowed);
/* the words written against the guard, in the order of their first write; returns how
 * many there are (at most NPK_GUARD_LOG), fills at most max */
size_t npk_guard_hits(npk_chip *chip, npk_guard_hit *buf, size_t max);

/* MSF plug-in.  The built-in MSF device (npk_msf_create, npk_msf.h) or a device
 * written in Python (binding.Chip.set_msf) implements these; any pointer may be NULL.  Without a plug-in the chip uses
 * a loopback stub: msf[write] stores into a 64 KB buffer that msf[read] reads
 * back, rbuf_rd reads from the same buffer, tbuf_wr writes into it, fast_wr
 * is counted; npk_msf_stub_counts reports how often each was used.
 *   read/write : msf[read|write, $x, a, b, n] -- addr = a + b, n longwords;
 *                called when the command completes (data already pulled).
 *   fast_wr    : msf[fast_wr, --, a, b] -- the two operands as given (the
 *                built-in device, npk_msf_create, takes CSR = (a + b)[15:0] and
 *                data = (a + b)[31:16], as IXP microcode expects).
 *   rbuf_rd    : dram[rbuf_rd, ...] -- copy nbytes from MSF buffer address
 *                msf_addr (the indirect_ref data reference, 0x2000 + offset);
 *                the chip then writes them to DRAM.
 *   tbuf_wr    : dram[tbuf_wr, ...] -- nbytes read from DRAM go to msf_addr.
 *   next_event : earliest cycle at which the device wants advance() called
 *                (UINT64_MAX = none); lets the run loop skip idle time.
 *   advance    : the chip reached cycle `now` (the device's next_event, or with no
 *                next_event every step of the run loop); the device may call
 *                npk_msf_deliver() to hand receive status words to a thread
 *                that registered on the receive freelist. */
typedef struct npk_msf_ops {
    void *user;
    void (*read)(void *user, int me, int ctx, uint32_t addr, uint32_t *words, unsigned n);
    void (*write)(void *user, int me, int ctx, uint32_t addr, const uint32_t *words, unsigned n);
    void (*fast_wr)(void *user, int me, uint32_t addr, uint32_t data);
    void (*rbuf_rd)(void *user, uint32_t msf_addr, uint8_t *buf, unsigned nbytes);
    void (*tbuf_wr)(void *user, uint32_t msf_addr, const uint8_t *buf, unsigned nbytes);
    uint64_t (*next_event)(void *user);
    void (*advance)(void *user, npk_chip *chip, uint64_t now);
} npk_msf_ops;

/* ME numbers.  Every `me` argument of this API is the flat index 0..num_me-1 (cluster c,
 * ME m within it: c * me_per_cluster + m; the next-neighbour order).  What the hardware
 * shows microcode is the ME number c << 4 | m (IXP2800 HRM Table 3: 0x00-0x07, 0x10-0x17):
 * ACTIVE_CTX_STS[7:3], the ME field of INTERTHREAD_SIG writes.  The receive freelist entry
 * packs {cluster, m} into [7 + log2(2 * me_per_cluster) - 1 : 7], which equals the flat
 * index.  npk_me_number / npk_me_index convert (-1: no such ME). */
int npk_me_number(npk_chip *chip, int me);
int npk_me_index(npk_chip *chip, int number);

/* lifecycle */
npk_chip *npk_create(const npk_config *cfg);
void npk_destroy(npk_chip *chip);
void npk_reset(npk_chip *chip);       /* registers, memories, time, stats; keeps ustore */
const char *npk_last_error(npk_chip *chip);
int npk_get_config(npk_chip *chip, npk_config *out);

/* loading and enabling */
int npk_load_ustore(npk_chip *chip, int me, const uint64_t *words, size_t n, int ctx_mode);
int npk_me_enable(npk_chip *chip, int me, uint32_t ctx_mask);
int npk_set_signal(npk_chip *chip, int me, int ctx, int sig);   /* .set_sig; ctx -1 = all */
int npk_me_status(npk_chip *chip, int me, npk_me_info *out);

/* running */
int npk_run(npk_chip *chip, uint64_t max_cycles, int *stop_reason);
int npk_step(npk_chip *chip, int me, int ctx);  /* run until me/ctx executed one instruction */
uint64_t npk_cycle(npk_chip *chip);
int npk_last_stop(npk_chip *chip, npk_stop_info *out);

/* breakpoints and watchpoints: me / ctx -1 = any; return id >= 0 */
int npk_bp_add(npk_chip *chip, int me, int ctx, uint32_t pc);
int npk_bp_del(npk_chip *chip, int id);
/* After a breakpoint stops the run before an ME's word, the ME's next word skips the
 * breakpoint check once, so that running on executes it.  This drops that pass: the
 * next word of the ME is checked again (returns 1 when a pass was pending, else 0). */
int npk_bp_resume_clear(npk_chip *chip, int me);
int npk_wp_add_reg(npk_chip *chip, int me, int kind, uint32_t index);
int npk_wp_add_mem(npk_chip *chip, int space, uint64_t addr, uint32_t len);
int npk_wp_del(npk_chip *chip, int id);

/* registers and memory */
int npk_reg_read(npk_chip *chip, int me, int ctx, int kind, uint32_t index, uint32_t *value);
int npk_reg_write(npk_chip *chip, int me, int ctx, int kind, uint32_t index, uint32_t value);
int npk_mem_read(npk_chip *chip, int space, uint64_t addr, void *buf, size_t n);
int npk_mem_write(npk_chip *chip, int space, uint64_t addr, const void *buf, size_t n);
int npk_scratch_ring_config(npk_chip *chip, int ring, uint32_t base, uint32_t size_words,
                            uint32_t full_margin);
int npk_scratch_ring_count(npk_chip *chip, int ring, uint32_t *count);
int npk_cap_csr_read(npk_chip *chip, uint32_t addr, uint32_t *value);
int npk_cap_csr_write(npk_chip *chip, uint32_t addr, uint32_t value);
uint32_t npk_xscale_irq(npk_chip *chip, int clear); /* bit me: XSCALE_INT_A, bit 16+me: INT_B
                                                       (me = flat index of the writing ME) */
/* npk_run returns (NPK_STOP_IRQ) in the cycle an interrupt bit in mask is raised;
 * 0 = never (default).  The XScale host sets it while its core sleeps on the device. */
int npk_xscale_irq_stop(npk_chip *chip, uint32_t mask);
/* The XScale's ring interface (HRM p.231 Get/Put of one longword): a get takes the
 * oldest word (returns 1; 0 and *word = 0 when the ring is empty), a put appends
 * one (returns 1; 0 when the ring is full, the word is dropped).  Same rings and
 * state as the microengines' scratch[get|put]; negative on a bad ring. */
int npk_scratch_ring_get(npk_chip *chip, int ring, uint32_t *word);
int npk_scratch_ring_put(npk_chip *chip, int ring, uint32_t word);
/* Backing store of a memory (NPK_MEM_*): page-aligned, `mapped` bytes long
 * (size rounded up to whole pages), words big-endian as the MEs see them.  fd is
 * a memfd holding it (mmap it MAP_SHARED at offset 0 from another process), or -1.
 * Valid until npk_destroy; npk_reset keeps the same store. */
typedef struct npk_backing {
    void *ptr;
    uint64_t size;
    uint64_t mapped;
    int fd;
} npk_backing;
int npk_mem_backing(npk_chip *chip, int space, npk_backing *out);

/* statistics */
int npk_stats_me(npk_chip *chip, int me, npk_me_stats *out);
int npk_stats_unit(npk_chip *chip, int unit, int channel, npk_unit_stats *out);
int npk_unit_channels(npk_chip *chip, int unit);

/* faults: counts[kind] for kind < n (n <= NPK_FAULT_KINDS); returns the total */
uint64_t npk_fault_counts(npk_chip *chip, uint64_t *counts, int n);
/* the last faults (at most NPK_FAULT_LOG), oldest first; not consumed (npk_reset clears) */
size_t npk_fault_log(npk_chip *chip, npk_fault *buf, size_t max);

/* thread history: level 0 off, 1 state/memory/signal events, 2 also every instruction */
int npk_history_enable(npk_chip *chip, int level);
size_t npk_history_drain(npk_chip *chip, npk_hist_event *buf, size_t max);
uint64_t npk_history_dropped(npk_chip *chip);
uint64_t npk_history_hash(npk_chip *chip);

/* per-instruction profile: off by default.  While it is on, every word runs on the
 * general (lock-step) path, slower, and the chip counts for each ME and control-store
 * address the executions of the word there and, for a conditional branch (br*, br_bset,
 * br_bclr, br=byte, br!=byte), how often it was taken.  Results are those of a run
 * without it.  on 1: allocated and zeroed (again if on), 0: off and freed; npk_reset
 * zeroes it.  npk_profile_read copies addresses [0, n) of ME me (n <= ustore_words;
 * exec or taken NULL: not copied); NPK_ESTATE while the profile is off. */
int npk_profile_enable(npk_chip *chip, int on);
int npk_profile_read(npk_chip *chip, int me, uint64_t *exec, uint64_t *taken, size_t n);

/* MSF plug-in */
int npk_set_msf(npk_chip *chip, const npk_msf_ops *ops);   /* NULL = loopback stub */
int npk_msf_deliver(npk_chip *chip, int me, int ctx, int xfer_abs, const uint32_t *words,
                    unsigned n, int sig);                   /* into SRAM xfer-in regs, then signal */
int npk_msf_stub_counts(npk_chip *chip, uint64_t *out5);   /* uses of read, write, fast_wr, rbuf_rd, tbuf_wr
                                                              (stub or plug-in) */
/* TCAM (docs/tcam.md; NPK_ESTATE: the chip has none).  Keys and masks are 9 longwords,
 * MSB first (the bits past key_bits are ignored); entry i is stored at its place in the
 * window (npk_tcam_info.base + i * NPK_TCAM_ENTRY_BYTES).  npk_tcam_lookup is the match
 * alone: no timing, no counters, no history. */
enum {
    NPK_TCAM_KEY_WORDS = 9,
    NPK_TCAM_ENTRY_BYTES = 128,
    NPK_TCAM_WINDOW_BYTES = 0x200000,
    NPK_TCAM_ENTRY_OFF = 0x000000,
    NPK_TCAM_KEY_OFF = 0x100000,
    NPK_TCAM_RESULT_OFF = 0x110000,
    NPK_TCAM_CSR_OFF = 0x120000,
    NPK_TCAM_SLOTS = 256,
    NPK_TCAM_E_MASK = 36,
    NPK_TCAM_E_RESULT = 72,
    NPK_TCAM_E_CONTROL = 80
};
typedef struct npk_tcam_result {
    uint32_t hit;              /* 1: an entry matched */
    uint32_t count;            /* matching valid entries (not saturated) */
    uint32_t index;            /* the lowest matching index (0 on a miss) */
    uint64_t result;           /* its result (0 on a miss) */
} npk_tcam_result;
typedef struct npk_tcam_stats {
    uint64_t lookups, hits, multi_hits;
} npk_tcam_stats;
int npk_tcam_info(npk_chip *chip, npk_tcam_cfg *out, uint32_t *base);   /* base: its SRAM address */
int npk_tcam_write(npk_chip *chip, uint32_t index, const uint32_t *key, const uint32_t *mask,
                   uint64_t result, int valid);
int npk_tcam_read(npk_chip *chip, uint32_t index, uint32_t *key, uint32_t *mask, uint64_t *result,
                  int *valid);
int npk_tcam_invalidate(npk_chip *chip, uint32_t index);
int npk_tcam_lookup(npk_chip *chip, const uint32_t *key, npk_tcam_result *out);
int npk_tcam_stats_get(npk_chip *chip, npk_tcam_stats *out);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif /* NPK_EMU_H */
