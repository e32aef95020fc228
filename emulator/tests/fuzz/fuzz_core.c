/* libFuzzer target for the emulator core (issue 10): control-store words,
 * initial registers and memory, and the loader-level C API (memory access at
 * any 64-bit address and size, registers, scratch rings, CAP CSRs, signals,
 * breakpoints/watchpoints, history, the MSF device) are taken from the input;
 * the chip runs a bounded number of cycles and its invariants are checked.
 * Built by `make -C emulator fuzz` with clang -fsanitize=fuzzer,address,undefined;
 * run by `make fuzz` (long) and tests/emulator/test_fuzz_core.py (short).
 * The seed corpus (corpus/) is made from assembled programs by make_seeds.py.
 *
 * Input format (integers little-endian; a field past the end of the input
 * reads as 0, so every byte string is a valid input):
 *
 *   header, 16 bytes
 *     [0]  flags: bit0 history level 1, bit1 history level 2 (every
 *          instruction), bit2 attach the MSF device (npk_msf_create),
 *          bit3 no unit queue limit (queue_depth 0), bit4 zero unit latencies,
 *          bit5 run the input twice, as given and in lock-step (history of every
 *          instruction, which turns run-ahead and the fast loop off), and require the
 *          same final state
 *     [1]  SRAM: channels = (b & 3) + 1, channel bytes = 128 KB << ((b >> 2) & 3)
 *     [2]  DRAM bytes = 256 KB << (b & 3); scratch bytes = {16384, 4096, 7,
 *          65536}[(b >> 3) & 3]; local memory words = {640, 1024, 16, 0}[(b >> 5) & 3]
 *     [3]  control store words = {8192, 4096, 512, 64}[b & 3];
 *          CAM entries = ((b >> 2) & 15) + 1
 *     [4]  number of MEs = (b & 15) + 1
 *     [5]  context mask enabled on every loaded ME no ENABLE record named
 *     [6]  cycles of the final run = 64 * (b + 1)
 *     [7]  timestamp shift = (b & 31) % 17; csr write-to-use delay = {0, 1, 2, 3, 4, 7,
 *          12, 20}[b >> 5]
 *     [8]  MSF: ports = (b & 15) + 1; RBUF element bytes = {64, 128, 256, 100}[(b >> 4) & 3];
 *          TBUF element bytes = {64, 128, 256, 100}[(b >> 6) & 3]
 *     [9]  RBUF elements = b, or (b & 15) << 26 when b >= 0xF0 (invalid configs, such as
 *          element counts whose product with the element size wraps 2^32, must be refused)
 *     [10] TBUF elements, the same way
 *     [11] freelist depth
 *     [12] tx_start_bytes = 16 * b
 *     [13..15] reserved
 *   records until the input ends: a tag byte (taken mod 16), then its fields
 *     0 WORDS   me:u8 (bit 7: 4-context mode), n:u8, n x 40-bit words (5 bytes)
 *               appended to that ME's control-store image (at most 1024 words; loaded
 *               before anything else)
 *     1 REG     me:u8 ctx:u8 kind:u8 index:u16 value:u32      npk_reg_write (+ read back)
 *     2 MEM     space:u8 addr:u64 n:u8 data[n]                npk_mem_write, npk_mem_read
 *     3 MEMRAW  space:u8 addr:u64 n:u64 write:u8              any address and size
 *     4 RING    ring:u8 base:u32 size:u32 margin:u32          npk_scratch_ring_config
 *     5 SIG     me:u8 ctx:u8 sig:u8                           npk_set_signal
 *     6 RUN     cycles:u16                                     run 4 * cycles (all runs of an
 *               input, the final one included, stop at MAX_RUN_CYCLES)
 *     7 BP      me:u8 ctx:u8 pc:u16 del:u8                     npk_bp_add / npk_bp_del
 *     8 WP      what:u8 me:u8 addr:u64 len:u16                 npk_wp_add_mem / _reg, del
 *     9 CAP     addr:u32 value:u32                             npk_cap_csr_write / _read
 *     10 RX     port:u8 len:u16 gap_ns:u16 data[len % 2048]     npk_msf_rx_add (MSF attached)
 *     11 ENABLE me:u8 mask:u8                                  npk_me_enable
 *     12 HIST   level:u8                                        npk_history_enable + drain
 *     13 DELIVER me:u8 ctx:u8 xfer:u8 n:u8 sig:u8              npk_msf_deliver
 *     14 RESET                                                  npk_reset (keeps the images)
 *     15 WIRE   port:u8 pre:u8 fcs:u8 ifg:u16                  npk_msf_port_wire
 *
 * With NPK_FUZZ_VERBOSE set in the environment each input prints what it did
 * (to check that a seed runs its programs as meant).
 *
 * A broken invariant (a fault record out of range, a ring holding more than
 * its size, memory that does not read back what was written, ...) aborts, so
 * the fuzzer reports it like a sanitizer finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npk_emu.h"
#include "npk_msf.h"
#include "../c/test_config.h"

#define MAX_ME 16
#define MAX_WORDS 1024        /* control-store image per ME */
#ifndef MAX_RUN_CYCLES
#define MAX_RUN_CYCLES 60000u   /* all RUN records together */
#endif
#define FAIL() abort()
#define REQUIRE(x) do { if (!(x)) FAIL(); } while (0)

/* Every input builds a chip of a few MB (control stores, memories); with
 * ASan's default 256 MB quarantine each would land on fresh pages and the
 * page faults would dominate.  A smaller quarantine still catches a use
 * after free within an input and across the last dozens of inputs. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=32"; }

typedef struct cursor {
    const uint8_t *p;
    size_t n, at;
} cursor;

static uint64_t get(cursor *c, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        uint64_t b = c->at < c->n ? c->p[c->at] : 0;
        c->at++;
        v |= b << (8 * i);
    }
    return v;
}

static int done(const cursor *c) { return c->at >= c->n; }

/* record sizes (after the tag) of the fixed-size records; -1: variable */
static const int rec_size[16] = {-1, 9, -1, 18, 13, 3, 2, 5, 12, 8, -1, 2, 1, 5, 0, 5};

typedef struct state {
    npk_chip *chip;
    npk_msf *msf;
    npk_config cfg;
    uint64_t images[MAX_ME][MAX_WORDS];
    uint32_t nwords[MAX_ME];
    int ctx_mode[MAX_ME];
    int enabled[MAX_ME];
    uint32_t ring_size[16];
    uint32_t run_cycles;
    uint64_t rx_time_ns;
    int last_fault_total;
} state;

static void make_config(npk_config *k, const uint8_t *h)
{
    static const uint32_t scratch[4] = {16384, 4096, 7, 65536};
    static const uint32_t lm[4] = {640, 1024, 16, 0};
    static const uint32_t us[4] = {8192, 4096, 512, 64};
    npk_test_config(k, "fuzz", 2);
    k->history_capacity = 512;
    k->sram.channels = (h[1] & 3u) + 1;
    k->sram_channel_bytes = (128u << 10) << ((h[1] >> 2) & 3);  /* small: ASan poisons the shadow */
    k->dram_bytes = (256u << 10) << (h[2] & 3);                 /* of every allocation and free */
    k->scratch_bytes = scratch[(h[2] >> 3) & 3];
    k->lm_words = lm[(h[2] >> 5) & 3];
    k->ustore_words = us[h[3] & 3];
    k->cam_entries = ((h[3] >> 2) & 15u) + 1;
    k->num_me = (h[4] & 15u) + 1;
    k->timestamp_shift = (h[7] & 31u) % 17u;
    /* (longer than the queue of pending writes is deep, 12 and 20: a write to a full queue
     * takes effect at once) */
    static const uint32_t write_to_use[8] = {0, 1, 2, 3, 4, 7, 12, 20};
    k->csr_write_to_use = write_to_use[h[7] >> 5];
    k->hash_mult48 = 0x123456789ABDull;
    k->hash_mult64 = 0x9E3779B97F4A7C15ull;
    k->hash_mult128_lo = 0x9E3779B97F4A7C15ull;
    k->hash_mult128_hi = 0xC2B2AE3D27D4EB4Full;
    npk_unit_cfg *units[] = {&k->sram, &k->dram, &k->scratch, &k->hash, &k->cap, &k->msf, &k->pci};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (h[0] & 8) units[i]->queue_depth = 0;
        if (h[0] & 16) { units[i]->read_latency = 0; units[i]->write_latency = 0; units[i]->cmd_overhead = 0; }
    }
}

static void make_msf(state *s, const uint8_t *h)
{
    static const uint32_t eb[4] = {64, 128, 256, 100};
    npk_msf_cfg m;
    memset(&m, 0, sizeof m);
    m.ports = (h[8] & 15u) + 1;
    m.rate_bps = 1000000000ull;
    m.rbuf_elem_bytes = eb[(h[8] >> 4) & 3];
    m.tbuf_elem_bytes = eb[(h[8] >> 6) & 3];
    m.rbuf_elems = h[9] >= 0xF0 ? (uint32_t)(h[9] & 15) << 26 : h[9];
    m.tbuf_elems = h[10] >= 0xF0 ? (uint32_t)(h[10] & 15) << 26 : h[10];
    m.preamble_bytes = 8; m.fcs_bytes = 4; m.ifg_bytes = 12;
    m.tx_fifo_bytes = 4096;
    m.spi_bps = 10000000000ull;
    m.freelist_depth = h[11];
    m.tx_start_bytes = 16u * h[12];
    s->msf = npk_msf_create(s->chip, &m);
    int valid = (m.rbuf_elem_bytes != 100 && m.tbuf_elem_bytes != 100 && m.rbuf_elems &&
                 (uint64_t)m.rbuf_elems * m.rbuf_elem_bytes <= 8192 && m.tbuf_elems &&
                 (uint64_t)m.tbuf_elems * m.tbuf_elem_bytes <= 8192 && m.freelist_depth);
    REQUIRE(valid == (s->msf != NULL));
}

static void check_invariants(state *s)
{
    npk_chip *c = s->chip;
    uint64_t counts[NPK_FAULT_KINDS], sum = 0;
    uint64_t total = npk_fault_counts(c, counts, NPK_FAULT_KINDS);
    for (int k = 0; k < NPK_FAULT_KINDS; k++) sum += counts[k];
    REQUIRE(sum == total);
    npk_fault log[NPK_FAULT_LOG];
    size_t n = npk_fault_log(c, log, NPK_FAULT_LOG);
    REQUIRE(n == (total < NPK_FAULT_LOG ? total : NPK_FAULT_LOG));
    for (size_t i = 0; i < n; i++) {
        REQUIRE(log[i].kind >= 0 && log[i].kind < NPK_FAULT_KINDS && counts[log[i].kind] > 0);
        REQUIRE(log[i].me >= -1 && log[i].me < (int)s->cfg.num_me && log[i].ctx >= -1 && log[i].ctx < 8);
        REQUIRE(log[i].me < 0 || log[i].kind == NPK_FAULT_PC || log[i].pc < s->cfg.ustore_words);
        REQUIRE(log[i].cycle <= npk_cycle(c));  /* (run-ahead may record them out of cycle order) */
    }
    for (uint32_t me = 0; me < s->cfg.num_me; me++) {
        npk_me_info st;
        REQUIRE(npk_me_status(c, me, &st) == NPK_OK);
        REQUIRE(st.state >= NPK_ME_RUNNING && st.state <= NPK_ME_IDLE);
        for (int ctx = 0; ctx < 8; ctx++) {
            uint32_t pc = 0, cs = 0;
            REQUIRE(npk_reg_read(c, me, ctx, NPK_REG_PC, 0, &pc) == NPK_OK);
            REQUIRE(npk_reg_read(c, me, ctx, NPK_REG_CTX_STATE, 0, &cs) == NPK_OK && cs <= NPK_CTX_SLEEP);
        }
    }
    for (int r = 0; r < 16; r++) {
        uint32_t cnt = 0;
        REQUIRE(npk_scratch_ring_count(c, r, &cnt) == NPK_OK);
        REQUIRE(cnt <= s->ring_size[r]);
    }
    if (s->msf) {
        npk_msf_stats ms;
        REQUIRE(npk_msf_stats_get(s->msf, &ms) == NPK_OK);
        size_t nbytes = 0, ready = npk_msf_tx_ready(s->msf, &nbytes);
        if (ready) {
            uint8_t *port = malloc(ready), *ab = malloc(ready), *data = malloc(nbytes + 1);
            uint64_t *t = malloc(ready * sizeof *t);
            uint16_t *len = malloc(ready * sizeof *len);
            REQUIRE(port && ab && data && t && len);
            REQUIRE(npk_msf_tx_drain(s->msf, port, t, len, ab, data, ready, nbytes) == ready);
            free(port); free(ab); free(data); free(t); free(len);
        }
        uint32_t id[16];
        uint8_t p[16], why[16];
        while (npk_msf_drops(s->msf, id, p, why, 16) > 0) {}
    }
}

static void load_images(state *s)
{
    for (uint32_t me = 0; me < s->cfg.num_me; me++) {
        if (!s->nwords[me]) continue;
        int rc = npk_load_ustore(s->chip, (int)me, s->images[me], s->nwords[me], s->ctx_mode[me]);
        REQUIRE(rc == (s->nwords[me] <= s->cfg.ustore_words ? NPK_OK : NPK_ERANGE));
    }
}

static void run(state *s, uint32_t cycles, uint8_t default_mask)
{
    if (s->run_cycles >= MAX_RUN_CYCLES) return;
    if (cycles > MAX_RUN_CYCLES - s->run_cycles) cycles = MAX_RUN_CYCLES - s->run_cycles;
    for (uint32_t me = 0; me < s->cfg.num_me; me++) {
        if (s->nwords[me] && !s->enabled[me]) {
            REQUIRE(npk_me_enable(s->chip, (int)me, default_mask) == NPK_OK);
            s->enabled[me] = 1;
        }
    }
    uint64_t before = npk_cycle(s->chip);
    int reason = -1;
    REQUIRE(npk_run(s->chip, cycles, &reason) == NPK_OK);
    REQUIRE(reason >= NPK_STOP_BUDGET && reason <= NPK_STOP_STEP);
    uint64_t after = npk_cycle(s->chip);
    REQUIRE(after >= before && after - before <= cycles);
    /* a breakpoint stops without using the budget: count at least one cycle */
    s->run_cycles += (uint32_t)(after - before) + 1;
    check_invariants(s);
}

static void mem_record(state *s, cursor *in)
{
    int space = (int)(get(in, 1) % 4);  /* 3: an invalid space */
    uint64_t addr = get(in, 8);
    size_t n = (size_t)get(in, 1);
    uint8_t data[256], back[256];
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)get(in, 1);
    int rc = npk_mem_write(s->chip, space, addr, data, n);
    REQUIRE(rc == NPK_OK || rc == NPK_ERANGE);
    int rc2 = npk_mem_read(s->chip, space, addr, back, n);
    REQUIRE(rc2 == rc);
    if (rc == NPK_OK) REQUIRE(memcmp(data, back, n) == 0);
}

static void memraw_record(state *s, cursor *in)
{
    int space = (int)(get(in, 1) % 3);
    uint64_t addr = get(in, 8), n = get(in, 8);
    int write = (int)(get(in, 1) & 1);
    uint8_t buf[4096];
    memset(buf, 0x5A, sizeof buf);
    /* no memory is larger than 2^33 bytes: longer accesses must be refused
     * before the buffer is touched; shorter ones use the real buffer */
    size_t len = n > (1ull << 33) ? (size_t)n : (size_t)(n % sizeof buf);
    int rc = write ? npk_mem_write(s->chip, space, addr, buf, len) : npk_mem_read(s->chip, space, addr, buf, len);
    REQUIRE(rc == NPK_OK || rc == NPK_ERANGE);
    if (n > (1ull << 33)) REQUIRE(rc == NPK_ERANGE);
}

static void reg_record(state *s, cursor *in)
{
    int me = (int)(int8_t)get(in, 1), ctx = (int)(int8_t)get(in, 1), kind = (int)get(in, 1) % 18;
    uint32_t index = (uint32_t)get(in, 2), value = (uint32_t)get(in, 4), back = 0;
    int rc = npk_reg_write(s->chip, me, ctx, kind, index, value);
    REQUIRE(rc == NPK_OK || rc == NPK_EINVAL || rc == NPK_ERANGE);
    int rr = npk_reg_read(s->chip, me, ctx, kind, index, &back);
    REQUIRE(rr == NPK_OK || rr == NPK_EINVAL);
    /* plain storage reads back what was written */
    if (rc == NPK_OK && kind <= NPK_REG_LM) REQUIRE(rr == NPK_OK && back == value);
}

static void ring_record(state *s, cursor *in)
{
    int ring = (int)(int8_t)get(in, 1);
    uint32_t base = (uint32_t)get(in, 4), size = (uint32_t)get(in, 4) % 2048, margin = (uint32_t)get(in, 4);
    int rc = npk_scratch_ring_config(s->chip, ring, base, size, margin);
    REQUIRE(rc == NPK_OK || rc == NPK_EINVAL || rc == NPK_ERANGE);
    if (rc == NPK_OK) s->ring_size[ring] = size;
}

static void wp_record(state *s, cursor *in)
{
    uint32_t what = (uint32_t)get(in, 1);
    int me = (int)(int8_t)get(in, 1);
    uint64_t addr = get(in, 8);
    uint32_t len = (uint32_t)get(in, 2);
    int id = (what & 1) ? npk_wp_add_mem(s->chip, (int)((what >> 1) % 4), addr, len)
                        : npk_wp_add_reg(s->chip, me, (int)((what >> 1) % 16), (uint32_t)addr);
    if (id >= 0 && (what & 0x80)) REQUIRE(npk_wp_del(s->chip, id) == NPK_OK);
}

static void rx_record(state *s, cursor *in)
{
    uint8_t port = (uint8_t)get(in, 1);
    uint16_t len = (uint16_t)(get(in, 2) % 2048);
    uint32_t gap = (uint32_t)get(in, 2);
    uint8_t *data = malloc(len ? len : 1);
    REQUIRE(data);
    for (uint16_t i = 0; i < len; i++) data[i] = (uint8_t)get(in, 1);
    if (!s->msf) { free(data); return; }
    s->rx_time_ns += gap;
    uint64_t t = s->rx_time_ns;
    uint32_t id = (uint32_t)s->rx_time_ns;
    int rc = npk_msf_rx_add(s->msf, 1, &t, &port, &id, &len, data);
    REQUIRE(rc == NPK_OK || rc == NPK_EINVAL);
    free(data);
}

static void deliver_record(state *s, cursor *in)
{
    int me = (int)(int8_t)get(in, 1), ctx = (int)(int8_t)get(in, 1), x = (int)(int8_t)get(in, 1);
    unsigned n = (unsigned)get(in, 1) % 32;
    int sig = (int)(int8_t)get(in, 1);
    uint32_t words[32];
    for (unsigned i = 0; i < n; i++) words[i] = 0x11111111u * i;
    int rc = npk_msf_deliver(s->chip, me, ctx, x, words, n, sig);
    REQUIRE(rc == NPK_OK || rc == NPK_EINVAL);
}

static void report(state *s)
{
    fprintf(stderr, "cycle %llu, faults %llu\n", (unsigned long long)npk_cycle(s->chip),
            (unsigned long long)npk_fault_counts(s->chip, NULL, 0));
    for (uint32_t me = 0; me < s->cfg.num_me; me++) {
        npk_me_stats st;
        npk_me_info info;
        npk_stats_me(s->chip, (int)me, &st);
        npk_me_status(s->chip, (int)me, &info);
        if (!s->nwords[me]) continue;
        fprintf(stderr, "  ME %u: %u words, %llu instructions, state %d pc %u %s; contexts", me, s->nwords[me],
                (unsigned long long)st.instructions, info.state, info.pc, info.reason);
        for (int ctx = 0; ctx < 8; ctx++) {
            uint32_t cs = 0, pc = 0, wait = 0;
            npk_reg_read(s->chip, (int)me, ctx, NPK_REG_CTX_STATE, 0, &cs);
            npk_reg_read(s->chip, (int)me, ctx, NPK_REG_PC, 0, &pc);
            npk_reg_read(s->chip, (int)me, ctx, NPK_REG_WAIT_MASK, 0, &wait);
            fprintf(stderr, " %u@%u/%x", cs, pc, wait);
        }
        fprintf(stderr, "\n");
    }
    if (s->msf) {
        npk_msf_port_stats ps;
        for (int p = 0; npk_msf_port_stats_get(s->msf, p, &ps) == NPK_OK; p++)
            if (ps.rx_offered || ps.tx_frames)
                fprintf(stderr, "  port %d: rx %llu offered %llu received, tx %llu frames\n", p,
                        (unsigned long long)ps.rx_offered, (unsigned long long)ps.rx_received,
                        (unsigned long long)ps.tx_frames);
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* architectural state at the end of an input: time, every register, the
 * memories, instructions executed, faults by kind, ring counts */
static uint64_t digest(state *s)
{
    npk_chip *c = s->chip;
    uint64_t h = 0xcbf29ce484222325ull, v64 = npk_cycle(c);
    h = fnv(h, &v64, sizeof v64);
    for (uint32_t me = 0; me < s->cfg.num_me; me++) {
        npk_me_stats st;
        npk_stats_me(c, (int)me, &st);
        h = fnv(h, &st.instructions, sizeof st.instructions);
        static const int kinds[] = {NPK_REG_GPR_A, NPK_REG_GPR_B, NPK_REG_SXFER_IN, NPK_REG_SXFER_OUT,
                                    NPK_REG_DXFER_IN, NPK_REG_DXFER_OUT, NPK_REG_NN};
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (uint32_t i = 0; i < 128; i++) {
                uint32_t v = 0;
                npk_reg_read(c, (int)me, 0, kinds[k], i, &v);
                h = fnv(h, &v, sizeof v);
            }
        for (uint32_t i = 0; i < s->cfg.lm_words; i++) {
            uint32_t v = 0;
            npk_reg_read(c, (int)me, 0, NPK_REG_LM, i, &v);
            h = fnv(h, &v, sizeof v);
        }
        for (int ctx = 0; ctx < 8; ctx++)
            for (int k = NPK_REG_PC; k <= NPK_REG_WAIT_MASK; k++) {
                uint32_t v = 0;
                npk_reg_read(c, (int)me, ctx, k, 0, &v);
                h = fnv(h, &v, sizeof v);
            }
    }
    static uint8_t buf[65536];
    uint64_t sizes[3] = {(uint64_t)s->cfg.sram.channels << 30, s->cfg.dram_bytes, s->cfg.scratch_bytes};
    for (int space = 0; space < 3; space++) {
        uint64_t chunk = space == 0 ? s->cfg.sram_channel_bytes : sizes[space];
        for (uint64_t base = 0; base < sizes[space]; base += space == 0 ? 1ull << 30 : chunk)
            for (uint64_t a = 0; a < chunk; a += sizeof buf) {
                size_t n = chunk - a < sizeof buf ? (size_t)(chunk - a) : sizeof buf;
                REQUIRE(npk_mem_read(c, space, base + a, buf, n) == NPK_OK);
                h = fnv(h, buf, n);
            }
    }
    uint64_t counts[NPK_FAULT_KINDS];
    npk_fault_counts(c, counts, NPK_FAULT_KINDS);
    h = fnv(h, counts, sizeof counts);
    for (int r = 0; r < 16; r++) {
        uint32_t n = 0;
        npk_scratch_ring_count(c, r, &n);
        h = fnv(h, &n, sizeof n);
    }
    return h;
}

/* run one input; lockstep: history of every instruction all the time (no run-ahead, and
 * no fast loop: every word goes through the general path, the reference) */
static uint64_t execute(const uint8_t *data, size_t size, int lockstep)
{
    uint8_t h[16];
    memset(h, 0, sizeof h);
    memcpy(h, data, size < sizeof h ? size : sizeof h);
    state *s = calloc(1, sizeof *s);
    REQUIRE(s);
    make_config(&s->cfg, h);
    s->chip = npk_create(&s->cfg);
    REQUIRE(s->chip);  /* every config this target builds is valid */
    for (int i = 0; i < MAX_ME; i++) s->ctx_mode[i] = 8;
    /* pass 1: control-store images */
    cursor in = {data, size, sizeof h};
    while (!done(&in)) {
        uint32_t tag = (uint32_t)get(&in, 1) % 16;
        if (tag == 0) {
            uint32_t b = (uint32_t)get(&in, 1), me = (b & 0x7F) % MAX_ME, n = (uint32_t)get(&in, 1);
            s->ctx_mode[me] = (b & 0x80) ? 4 : 8;
            for (uint32_t i = 0; i < n; i++) {
                uint64_t w = get(&in, 5);
                if (s->nwords[me] < MAX_WORDS) s->images[me][s->nwords[me]++] = w;
            }
        } else if (tag == 2) {
            in.at += 9;
            in.at += (size_t)get(&in, 1);
        } else if (tag == 10) {
            in.at += 1;
            size_t len = (size_t)(get(&in, 2) % 2048);
            in.at += 2 + len;
        } else {
            in.at += (size_t)rec_size[tag];
        }
    }
    load_images(s);
    if ((h[0] & 3) || lockstep) REQUIRE(npk_history_enable(s->chip, (h[0] & 2) || lockstep ? 2 : 1) == NPK_OK);
    if (h[0] & 4) make_msf(s, h);
    /* pass 2: everything else, in order */
    in.at = sizeof h;
    while (!done(&in)) {
        uint32_t tag = (uint32_t)get(&in, 1) % 16;
        switch (tag) {
        case 0: { get(&in, 1); uint32_t n = (uint32_t)get(&in, 1); in.at += 5 * (size_t)n; break; }
        case 1: reg_record(s, &in); break;
        case 2: mem_record(s, &in); break;
        case 3: memraw_record(s, &in); break;
        case 4: ring_record(s, &in); break;
        case 5: {
            int me = (int)(int8_t)get(&in, 1), ctx = (int)(int8_t)get(&in, 1), sig = (int)(int8_t)get(&in, 1);
            int rc = npk_set_signal(s->chip, me, ctx, sig);
            REQUIRE(rc == NPK_OK || rc == NPK_EINVAL);
            break;
        }
        case 6: run(s, 4u * (uint32_t)get(&in, 2), h[5]); break;
        case 7: {
            int me = (int)(int8_t)get(&in, 1), ctx = (int)(int8_t)get(&in, 1);
            uint32_t pc = (uint32_t)get(&in, 2);
            int del = (int)get(&in, 1);
            int id = npk_bp_add(s->chip, me, ctx, pc);
            if (id >= 0 && (del & 1)) REQUIRE(npk_bp_del(s->chip, id) == NPK_OK);
            break;
        }
        case 8: wp_record(s, &in); break;
        case 9: {
            uint32_t a = (uint32_t)get(&in, 4), v = (uint32_t)get(&in, 4), back = 0;
            int rc = npk_cap_csr_write(s->chip, a, v);
            REQUIRE(rc == (a <= 0xFFFF ? NPK_OK : NPK_EINVAL));
            REQUIRE(npk_cap_csr_read(s->chip, a, &back) == rc);
            break;
        }
        case 10: rx_record(s, &in); break;
        case 11: {
            int me = (int)(int8_t)get(&in, 1);
            uint32_t mask = (uint32_t)get(&in, 1);
            if (npk_me_enable(s->chip, me, mask) == NPK_OK) s->enabled[me] = 1;
            break;
        }
        case 12: {
            int level = (int)(get(&in, 1) % 4);
            if (lockstep && level < 3) level = 2;
            int rc = npk_history_enable(s->chip, level);
            REQUIRE(rc == (level <= 2 ? NPK_OK : NPK_EINVAL));
            npk_hist_event ev[64];
            while (npk_history_drain(s->chip, ev, 64) > 0) {}
            break;
        }
        case 13: deliver_record(s, &in); break;
        case 14:
            npk_reset(s->chip);
            memset(s->ring_size, 0, sizeof s->ring_size);
            memset(s->enabled, 0, sizeof s->enabled);
            check_invariants(s);
            REQUIRE(npk_fault_counts(s->chip, NULL, 0) == 0);
            break;
        default: {
            int port = (int)(int8_t)get(&in, 1);
            uint32_t pre = (uint32_t)get(&in, 1), fcs = (uint32_t)get(&in, 1), ifg = (uint32_t)get(&in, 2);
            if (s->msf) {
                int rc = npk_msf_port_wire(s->msf, port, pre, fcs, ifg);
                REQUIRE(rc == NPK_OK || rc == NPK_EINVAL);
            }
            break;
        }
        }
    }
    run(s, 64u * ((uint32_t)h[6] + 1), h[5]);
    if (getenv("NPK_FUZZ_VERBOSE")) report(s);
    uint64_t d = (h[0] & 32) ? digest(s) : 0;
    npk_msf_destroy(s->msf);
    npk_destroy(s->chip);
    free(s);
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t d = execute(data, size, 0);
    /* run-ahead gives the same results as lock-step execution (npk_emu.h) */
    if (size && (data[0] & 32)) REQUIRE(execute(data, size, 1) == d);
    return 0;
}
