/* Sanitizer test driver for the emulator core (built with ASan/UBSan by
 * `make -C emulator asan`, run by tests/emulator/test_c_asan.py).  It runs a
 * mix of programs through the public API, random control stores, and the
 * API's error paths; it prints "OK" and exits 0 when every check holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npk_emu.h"
#include "npk_msf.h"
#include "mev2_isa.h"
#include "test_config.h"

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

/* encoded with npkit.asm.isa.encode (see tests/emulator/test_c_asan.py) */
static const uint64_t prog_alu_loop[] = {0xf0000c2801ull, 0xf000000b00ull, 0xb0c0200801ull, 0xaa801c0401ull, 0xd800800101ull, 0xe000020000ull};
static const uint64_t prog_mem_mix[] = {0xf0001c0001ull, 0xf0000c1d80ull, 0x0110008001ull, 0x0510048001ull, 0x2842008301ull, 0xe000000030ull, 0x1700008301ull, 0x3622480000ull, 0xa5b00c0300ull, 0xa9b03c0801ull, 0xbb801c0001ull, 0xa9402e0001ull, 0xfc10ac6318ull, 0xe000010000ull};
static const uint64_t prog_producer[] = {0xf0000c0401ull, 0xf000000b00ull, 0xd800804214ull, 0xa0643c0001ull, 0xb0c0200801ull, 0xa0801c0401ull, 0xaab00f2401ull, 0xd800800101ull, 0xa028500800ull, 0xe000020000ull};
static const uint64_t prog_consumer[] = {0xf0000f2001ull, 0xf000000b00ull, 0xd800800214ull, 0xb0c0200a43ull, 0xaa801c0401ull, 0xd800800101ull, 0xe000020000ull};
/* immed[a0, 0xFFFFFFFC]; scratch[write, $0, a0, 0, 1], ctx_swap[s1]; the same read; halt */
static const uint64_t prog_scratch_wrap[] = {0xf0800c0c00ull, 0x1110008000ull, 0x1010008000ull, 0xe000020000ull};
/* the write 40 times in a loop (a1 counts down) */
static const uint64_t prog_scratch_wrap_loop[] = {0xf0800c0c00ull, 0xf0000ca001ull, 0x1110008000ull, 0xaa801c0401ull, 0xd800800101ull, 0xe000020000ull};
/* TCAM on channel 1, window 0x200000 (base 0x40200000): write 8 longwords to result slot
 * 255, read them back as a lookup (8: four past the slot), then read 8 from the window's last
 * longword (past the channel: a fault) */
static const uint64_t prog_tcam[] = {0xf040ffc000ull, 0xf4440cc400ull, 0x011e008000ull, 0x001e008000ull,
                                     0xf04ffff000ull, 0xf4440cfc00ull, 0x001e008000ull, 0xe000020000ull};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void config(npk_config *c)
{
    npk_test_config(c, "asan", 5);
    c->history_capacity = 4096;
    c->hash_mult48 = 0x123456789ABDull; c->hash_mult64 = 0x9E3779B97F4A7C15ull;
    c->hash_mult128_lo = 3; c->hash_mult128_hi = 5;
}

static uint64_t rng = 0x1234567;
static uint64_t next_rand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}

static void test_programs(const npk_config *cfg)
{
    npk_chip *c = npk_create(cfg);
    CHECK(c != NULL);
    if (!c) return;
    int reason = -1;
    CHECK(npk_load_ustore(c, 0, prog_alu_loop, N(prog_alu_loop), 8) == NPK_OK);
    CHECK(npk_load_ustore(c, 1, prog_mem_mix, N(prog_mem_mix), 8) == NPK_OK);
    CHECK(npk_load_ustore(c, 4, prog_producer, N(prog_producer), 8) == NPK_OK);
    CHECK(npk_load_ustore(c, 5, prog_consumer, N(prog_consumer), 4) == NPK_OK);
    CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
    CHECK(npk_me_enable(c, 1, 0xFF) == NPK_OK);
    CHECK(npk_me_enable(c, 4, 0x01) == NPK_OK);
    CHECK(npk_me_enable(c, 5, 0x01) == NPK_OK);
    npk_history_enable(c, 2);
    CHECK(npk_run(c, 2000000, &reason) == NPK_OK);
    CHECK(reason == NPK_STOP_HALTED);
    uint32_t v = 0;
    CHECK(npk_reg_read(c, 0, 0, NPK_REG_GPR_B, 0 * 16 + 2, &v) == NPK_OK && v == 55);
    CHECK(npk_reg_read(c, 5, 0, NPK_REG_GPR_B, 2, &v) == NPK_OK && v == 20100);
    npk_hist_event ev[256];
    size_t total = 0, n;
    while ((n = npk_history_drain(c, ev, 256)) > 0) total += n;
    CHECK(total > 100);
    CHECK(npk_history_hash(c) != 0);
    npk_me_stats ms;
    CHECK(npk_stats_me(c, 1, &ms) == NPK_OK && ms.instructions == 8 * N(prog_mem_mix));
    npk_unit_stats us;
    CHECK(npk_stats_unit(c, NPK_UNIT_SRAM, 0, &us) == NPK_OK && us.commands == 16);
    npk_reset(c);
    CHECK(npk_cycle(c) == 0);
    npk_destroy(c);
}

/* a register watchpoint stops once per change of value (immed[b2, 0] over 0 is none),
 * and names the thread and the instruction that wrote it */
static void test_watch(const npk_config *cfg)
{
    npk_chip *c = npk_create(cfg);
    CHECK(c != NULL);
    if (!c) return;
    CHECK(npk_load_ustore(c, 0, prog_alu_loop, N(prog_alu_loop), 8) == NPK_OK);
    CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
    int id = npk_wp_add_reg(c, 0, NPK_REG_GPR_B, 2), reason = -1, hits = 0;
    npk_stop_info st;
    for (;;) {
        CHECK(npk_run(c, 100000, &reason) == NPK_OK);
        if (reason != NPK_STOP_WATCHPOINT) break;
        CHECK(npk_last_stop(c, &st) == NPK_OK);
        CHECK(st.id == id && st.me == 0 && st.ctx == 0 && st.pc == 2);  /* alu[b2, b2, +, a1] */
        hits++;
    }
    CHECK(reason == NPK_STOP_HALTED && hits == 10);
    npk_destroy(c);
}

static void test_fuzz(const npk_config *cfg)
{
    for (int round = 0; round < 12; round++) {
        npk_chip *c = npk_create(cfg);
        CHECK(c != NULL);
        if (!c) return;
        static uint64_t words[512];
        for (int me = 0; me < 4; me++) {
            for (size_t i = 0; i < N(words); i++) words[i] = next_rand() & 0xFFFFFFFFFFull;
            CHECK(npk_load_ustore(c, me, words, N(words), (me & 1) ? 4 : 8) == NPK_OK);
            CHECK(npk_me_enable(c, me, 0xFF) == NPK_OK);
        }
        npk_scratch_ring_config(c, 1, 0x100, 128, 4);
        if (round & 1) npk_history_enable(c, 1);
        int reason;
        CHECK(npk_run(c, 200000, &reason) == NPK_OK);
        for (int me = 0; me < 4; me++) {
            npk_me_info st;
            CHECK(npk_me_status(c, me, &st) == NPK_OK);
            CHECK(st.state >= NPK_ME_RUNNING && st.state <= NPK_ME_IDLE);
        }
        npk_destroy(c);
    }
}

static void test_errors(const npk_config *cfg)
{
    npk_config bad = *cfg;
    bad.num_me = 0;
    CHECK(npk_create(&bad) == NULL);
    CHECK(npk_create(NULL) == NULL);
    npk_chip *c = npk_create(cfg);
    if (!c) { failures++; return; }
    uint64_t w = 0;
    uint32_t v;
    uint8_t buf[16];
    CHECK(npk_load_ustore(c, 16, &w, 1, 8) == NPK_EINVAL);
    CHECK(npk_load_ustore(c, 0, &w, 1, 5) == NPK_EINVAL);
    CHECK(npk_me_enable(c, -1, 1) == NPK_EINVAL);
    CHECK(npk_reg_read(c, 0, 0, NPK_REG_GPR_A, 128, &v) == NPK_EINVAL);
    CHECK(npk_reg_read(c, 0, 9, NPK_REG_PC, 0, &v) == NPK_EINVAL);
    CHECK(npk_reg_read(c, 0, 0, 99, 0, &v) == NPK_EINVAL);
    CHECK(npk_mem_read(c, NPK_MEM_DRAM, cfg->dram_bytes - 4, buf, 8) == NPK_ERANGE);
    CHECK(npk_mem_read(c, NPK_MEM_SRAM, 0xC0000000u + cfg->sram_channel_bytes, buf, 4) == NPK_ERANGE);
    CHECK(npk_mem_write(c, 7, 0, buf, 4) == NPK_ERANGE);
    CHECK(npk_step(c, 0, 0) == NPK_ESTATE);
    CHECK(npk_bp_del(c, 3) == NPK_EINVAL);
    CHECK(npk_wp_del(c, 3) == NPK_EINVAL);
    CHECK(npk_scratch_ring_config(c, 20, 0, 128, 0) == NPK_EINVAL);
    CHECK(npk_scratch_ring_config(c, 1, 16380, 128, 0) == NPK_ERANGE);
    CHECK(npk_msf_deliver(c, 0, 9, 0, NULL, 0, 1) == NPK_EINVAL);
    int id = npk_bp_add(c, -1, -1, 5);
    CHECK(id >= 0 && npk_bp_del(c, id) == NPK_OK);
    npk_destroy(c);
    npk_destroy(NULL);
}

/* Issue 10: a scratch address near 2^32 wrapped the bound check (segfault);
 * memory API calls with addresses near 2^64 wrote outside the buffers; a CSR
 * access through the API with a context > 7 indexed past the contexts; an
 * MSF config whose element count times element size wraps 2^32 passed the
 * check.  Each is now refused or counted as a fault of the thread. */
static void test_faults(const npk_config *cfg)
{
    npk_chip *c = npk_create(cfg);
    if (!c) { failures++; return; }
    int reason = -1;
    CHECK(npk_load_ustore(c, 0, prog_scratch_wrap, N(prog_scratch_wrap), 8) == NPK_OK);
    CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
    CHECK(npk_run(c, 100000, &reason) == NPK_OK && reason == NPK_STOP_HALTED);
    uint64_t counts[NPK_FAULT_KINDS];
    memset(counts, 0xFF, sizeof counts);
    CHECK(npk_fault_counts(c, counts, NPK_FAULT_KINDS) == 2);
    CHECK(counts[NPK_FAULT_SCRATCH] == 2 && counts[NPK_FAULT_SRAM] == 0);
    npk_fault log[NPK_FAULT_LOG];
    CHECK(npk_fault_log(c, log, NPK_FAULT_LOG) == 2);
    CHECK(log[0].kind == NPK_FAULT_SCRATCH && log[0].me == 0 && log[0].ctx == 0 && log[0].pc == 1);
    CHECK(log[0].addr == 0xFFFFFFFCu && log[1].pc == 2 && log[1].cycle > log[0].cycle);
    uint32_t v = 1;
    CHECK(npk_reg_read(c, 0, 0, NPK_REG_SXFER_IN, 0, &v) == NPK_OK && v == 0);  /* the read gave zeros */

    /* the log keeps the last NPK_FAULT_LOG, oldest first; reset clears it */
    npk_reset(c);
    CHECK(npk_fault_counts(c, NULL, 0) == 0 && npk_fault_log(c, log, NPK_FAULT_LOG) == 0);
    CHECK(npk_load_ustore(c, 0, prog_scratch_wrap_loop, N(prog_scratch_wrap_loop), 8) == NPK_OK);
    CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
    CHECK(npk_run(c, 1000000, &reason) == NPK_OK && reason == NPK_STOP_HALTED);
    CHECK(npk_fault_counts(c, counts, 3) == 40 && counts[NPK_FAULT_SCRATCH] == 40);
    CHECK(npk_fault_log(c, log, NPK_FAULT_LOG) == NPK_FAULT_LOG);
    for (int i = 1; i < NPK_FAULT_LOG; i++) CHECK(log[i].cycle > log[i - 1].cycle);
    npk_fault last2[2];
    CHECK(npk_fault_log(c, last2, 2) == 2 && last2[1].cycle == log[NPK_FAULT_LOG - 1].cycle);
    CHECK(last2[0].cycle == log[NPK_FAULT_LOG - 2].cycle);

    /* memory API: any 64-bit address and size is refused or served inside the memory */
    uint8_t buf[8] = {0x41, 0x41, 0x41, 0x41};
    for (int space = 0; space < 3; space++) {
        CHECK(npk_mem_write(c, space, UINT64_MAX, buf, 4) == NPK_ERANGE);
        CHECK(npk_mem_write(c, space, UINT64_MAX - 1, buf, 4) == NPK_ERANGE);
        CHECK(npk_mem_read(c, space, UINT64_MAX - 3, buf, 8) == NPK_ERANGE);
        CHECK(npk_mem_read(c, space, 8, buf, SIZE_MAX) == NPK_ERANGE);
        CHECK(npk_mem_write(c, space, 4, buf, SIZE_MAX - 2) == NPK_ERANGE);
        CHECK(npk_mem_read(c, space, 0, NULL, 0) == NPK_OK);
    }
    CHECK(npk_mem_write(c, NPK_MEM_SCRATCH, cfg->scratch_bytes, buf, 0) == NPK_OK);
    CHECK(npk_mem_write(c, NPK_MEM_SCRATCH, cfg->scratch_bytes - 4, buf, 4) == NPK_OK);
    CHECK(npk_mem_write(c, NPK_MEM_DRAM, cfg->dram_bytes - 3, buf, 4) == NPK_ERANGE);
    CHECK(npk_mem_write(c, NPK_MEM_SRAM, (3ull << 30) + cfg->sram_channel_bytes - 4, buf, 4) == NPK_OK);
    CHECK(npk_mem_write(c, NPK_MEM_SRAM, 4ull << 30, buf, 4) == NPK_ERANGE);

    /* CSRs through the API: the context must be -1..7 */
    CHECK(npk_reg_write(c, 0, 100, NPK_REG_CSR, NPK_LCSR_ACTIVE_CTX_FUTURE_COUNT, 5) == NPK_EINVAL);
    CHECK(npk_reg_read(c, 0, 8, NPK_REG_CSR, NPK_LCSR_ACTIVE_CTX_WAKEUP_EVENTS, &v) == NPK_EINVAL);
    CHECK(npk_reg_read(c, 0, -5, NPK_REG_CSR, NPK_LCSR_ACTIVE_LM_ADDR_0, &v) == NPK_EINVAL);
    CHECK(npk_reg_write(c, 0, -1, NPK_REG_CSR, NPK_LCSR_ACTIVE_LM_ADDR_0, 8) == NPK_OK);
    CHECK(npk_load_ustore(c, 0, NULL, 4, 8) == NPK_EINVAL);

    /* MSF device config: element count x size must not wrap around 2^32 */
    npk_msf_cfg mc;
    memset(&mc, 0, sizeof mc);
    mc.ports = 1; mc.rate_bps = 1000000000; mc.rbuf_elem_bytes = 64; mc.rbuf_elems = 1u << 26;
    mc.tbuf_elem_bytes = 64; mc.tbuf_elems = 16; mc.tx_fifo_bytes = 4096; mc.spi_bps = 4000000000ull;
    mc.freelist_depth = 8;
    CHECK(npk_msf_create(c, &mc) == NULL);
    mc.rbuf_elems = 16; mc.tbuf_elems = (1u << 26) + 1;
    CHECK(npk_msf_create(c, &mc) == NULL);
    mc.tbuf_elems = 128;
    npk_msf *d = npk_msf_create(c, &mc);
    CHECK(d != NULL);
    npk_msf_destroy(d);
    npk_destroy(c);
}

/* the per-instruction profile: its counts add up to the instructions run, a run with it
 * ends as one without, npk_reset zeroes it, and its errors */
static void test_profile(const npk_config *cfg)
{
    uint32_t want = 0;
    uint64_t cycles = 0;
    for (int on = 0; on < 2; on++) {
        npk_chip *c = npk_create(cfg);
        CHECK(c != NULL);
        if (!c) return;
        uint64_t ex[16], tk[16];
        CHECK(npk_profile_read(c, 0, ex, tk, 4) == NPK_ESTATE);
        CHECK(npk_profile_enable(c, 2) == NPK_EINVAL);
        CHECK(npk_load_ustore(c, 0, prog_alu_loop, N(prog_alu_loop), 8) == NPK_OK);
        CHECK(npk_load_ustore(c, 1, prog_mem_mix, N(prog_mem_mix), 8) == NPK_OK);
        CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
        CHECK(npk_me_enable(c, 1, 0xFF) == NPK_OK);
        if (on) CHECK(npk_profile_enable(c, 1) == NPK_OK && npk_profile_enable(c, 1) == NPK_OK);
        int reason = -1;
        CHECK(npk_run(c, 2000000, &reason) == NPK_OK && reason == NPK_STOP_HALTED);
        uint32_t v = 0;
        CHECK(npk_reg_read(c, 0, 0, NPK_REG_GPR_B, 2, &v) == NPK_OK);
        if (!on) { want = v; cycles = npk_cycle(c); }
        else { CHECK(v == want); CHECK(npk_cycle(c) == cycles); }
        if (on) {
            for (int me = 0; me < 2; me++) {
                npk_me_stats ms;
                size_t n = me ? N(prog_mem_mix) : N(prog_alu_loop);
                CHECK(npk_profile_read(c, me, ex, tk, n) == NPK_OK);
                uint64_t sum = 0;
                for (size_t i = 0; i < n; i++) { sum += ex[i]; CHECK(tk[i] <= ex[i]); }
                CHECK(npk_stats_me(c, me, &ms) == NPK_OK && sum == ms.instructions);
            }
            CHECK(npk_profile_read(c, 99, ex, tk, 4) == NPK_EINVAL);
            CHECK(npk_profile_read(c, 0, NULL, NULL, (size_t)cfg->ustore_words + 1) == NPK_EINVAL);
            npk_reset(c);
            CHECK(npk_profile_read(c, 0, ex, NULL, 4) == NPK_OK && ex[0] == 0 && ex[3] == 0);
            CHECK(npk_profile_enable(c, 0) == NPK_OK);
            CHECK(npk_profile_read(c, 0, ex, tk, 4) == NPK_ESTATE);
        }
        npk_destroy(c);
    }
}

static void tcam_config(npk_config *t, const npk_config *cfg)
{
    *t = *cfg;
    t->sram_channel_bytes = 4u << 20;
    t->tcam = (npk_tcam_cfg){.present = 1, .channel = 1, .window = 0x200000, .entries = 8192, .key_bits = 288,
                             .result_bits = 64, .lookup_latency = 56, .cycles_per_lookup = 14};
}

static void test_tcam(const npk_config *cfg)
{
    npk_config t;
    tcam_config(&t, cfg);
    npk_chip *c = npk_create(&t);
    CHECK(c != NULL);
    if (!c) return;
    uint32_t key[9], mask[9], got_k[9], got_m[9];
    for (int i = 0; i < 9; i++) { key[i] = 0x01010101u * (uint32_t)(i + 1); mask[i] = 0xFFFFFFFFu; }
    CHECK(npk_tcam_write(c, 8191, key, mask, 0x1122334455667788ull, 1) == NPK_OK);
    CHECK(npk_tcam_write(c, 8192, key, mask, 1, 1) == NPK_EINVAL);
    CHECK(npk_tcam_write(c, 0, NULL, mask, 1, 1) == NPK_EINVAL);
    npk_tcam_result r;
    CHECK(npk_tcam_lookup(c, key, &r) == NPK_OK && r.hit && r.count == 1 && r.index == 8191);
    CHECK(r.result == 0x1122334455667788ull);
    uint64_t res = 0;
    int valid = 0;
    CHECK(npk_tcam_read(c, 8191, got_k, got_m, &res, &valid) == NPK_OK && valid && got_k[8] == key[8]);
    CHECK(npk_tcam_invalidate(c, 8191) == NPK_OK);
    CHECK(npk_tcam_lookup(c, key, &r) == NPK_OK && !r.hit && r.count == 0);
    CHECK(npk_load_ustore(c, 0, prog_tcam, N(prog_tcam), 8) == NPK_OK);
    CHECK(npk_me_enable(c, 0, 0x01) == NPK_OK);
    npk_history_enable(c, 1);
    int reason;
    CHECK(npk_run(c, 100000, &reason) == NPK_OK && reason == NPK_STOP_HALTED);
    npk_tcam_stats st;
    CHECK(npk_tcam_stats_get(c, &st) == NPK_OK && st.lookups == 1 && st.hits == 0);
    uint32_t v = 1;
    CHECK(npk_reg_read(c, 0, 0, NPK_REG_SXFER_IN, 4, &v) == NPK_OK && v == 0);  /* past the slot */
    uint64_t counts[NPK_FAULT_KINDS];
    npk_fault_counts(c, counts, NPK_FAULT_KINDS);
    CHECK(counts[NPK_FAULT_SRAM] == 1);
    npk_reset(c);
    CHECK(npk_tcam_stats_get(c, &st) == NPK_OK && st.lookups == 0);
    npk_destroy(c);
    /* what the core refuses (config_schema.py says which field) */
    npk_config bad;
    tcam_config(&bad, cfg); bad.tcam.window = 0x300000; CHECK(npk_create(&bad) == NULL);
    tcam_config(&bad, cfg); bad.tcam.window = 0x400000; CHECK(npk_create(&bad) == NULL);
    tcam_config(&bad, cfg); bad.tcam.channel = 4; CHECK(npk_create(&bad) == NULL);
    tcam_config(&bad, cfg); bad.tcam.key_bits = 100; CHECK(npk_create(&bad) == NULL);
    tcam_config(&bad, cfg); bad.tcam.entries = 0; CHECK(npk_create(&bad) == NULL);
    tcam_config(&bad, cfg); bad.tcam.entries = 8193; CHECK(npk_create(&bad) == NULL);
    /* a chip without one */
    npk_chip *plain = npk_create(cfg);
    CHECK(plain != NULL);
    if (plain) {
        CHECK(npk_tcam_write(plain, 0, key, mask, 1, 1) == NPK_ESTATE);
        CHECK(npk_tcam_lookup(plain, key, &r) == NPK_ESTATE);
        npk_destroy(plain);
    }
}

int main(void)
{
    npk_config cfg;
    config(&cfg);
    test_programs(&cfg);
    test_watch(&cfg);
    test_fuzz(&cfg);
    test_errors(&cfg);
    test_faults(&cfg);
    test_profile(&cfg);
    test_tcam(&cfg);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
