/* The emulator benchmarks' loops (toolchain/bench/emulator.py) on the C core alone, for profiling
 * without Python around it: tools/core_counts.py writes the chip config and the loop's
 * words, builds this against emulator/src and runs it (under callgrind to count the host
 * instructions inside npk_run).
 *
 *   core_counts CONFIG WORDS REGS CYCLES [MES]
 *
 * CONFIG: an npk_config as bytes; WORDS: the loop's control-store words, one a line; REGS:
 * a1 and b1 of every context, ME by ME, a pair a line (toolchain/bench/emulator.py _loop_regs).
 * Every context of every ME (of the first MES, when given) runs the loop.
 * Prints ME instructions per host second, the instructions, and a fingerprint of the
 * final state (ME and unit statistics, every GPR): a change to the core that keeps
 * results identical keeps the fingerprint. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "npk_emu.h"

static uint64_t fingerprint(npk_chip *c, uint32_t num_me)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(v) do { h ^= (uint64_t)(v); h *= 1099511628211ull; } while (0)
    for (uint32_t me = 0; me < num_me; me++) {
        npk_me_stats st;
        npk_stats_me(c, (int)me, &st);
        const uint64_t *p = (const uint64_t *)&st;
        for (size_t i = 0; i < sizeof st / sizeof *p; i++) MIX(p[i]);
        for (int bank = 0; bank < 2; bank++)
            for (uint32_t r = 0; r < 128; r++) {
                uint32_t v = 0;
                npk_reg_read(c, (int)me, 0, bank, r, &v);
                MIX(v);
            }
    }
    for (int u = 0; u < NPK_UNIT_COUNT; u++)
        for (int ch = 0; ch < npk_unit_channels(c, u); ch++) {
            npk_unit_stats us;
            npk_stats_unit(c, u, ch, &us);
            const uint64_t *p = (const uint64_t *)&us;
            for (size_t i = 0; i < sizeof us / sizeof *p; i++) MIX(p[i]);
        }
    MIX(npk_cycle(c));
#undef MIX
    return h;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: core_counts CONFIG WORDS REGS CYCLES [MES]\n");
        return 2;
    }
    npk_config cfg;
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(&cfg, 1, sizeof cfg, f) != sizeof cfg) {
        fprintf(stderr, "core_counts: %s is not an npk_config\n", argv[1]);
        return 2;
    }
    fclose(f);
    uint64_t words[256];
    size_t n = 0;
    f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "core_counts: cannot read %s\n", argv[2]);
        return 2;
    }
    unsigned long long w;
    while (n < 256 && fscanf(f, "%llx", &w) == 1) words[n++] = w;
    fclose(f);
    uint32_t (*regs)[8][2] = calloc(cfg.num_me, sizeof *regs);
    f = fopen(argv[3], "r");
    if (!regs || !f) {
        fprintf(stderr, "core_counts: cannot read %s\n", argv[3]);
        return 2;
    }
    for (uint32_t me = 0; me < cfg.num_me; me++)
        for (uint32_t ctx = 0; ctx < 8; ctx++)
            if (fscanf(f, "%x %x", &regs[me][ctx][0], &regs[me][ctx][1]) != 2) {
                fprintf(stderr, "core_counts: %s has no a1 and b1 for ME %u context %u\n", argv[3], me, ctx);
                return 2;
            }
    fclose(f);
    uint64_t cycles = strtoull(argv[4], NULL, 0);
    uint32_t mes = argc == 6 ? (uint32_t)strtoul(argv[5], NULL, 0) : cfg.num_me;

    npk_chip *c = npk_create(&cfg);
    if (!c) {
        fprintf(stderr, "core_counts: the emulator rejected the config\n");
        return 2;
    }
    for (uint32_t me = 0; me < cfg.num_me; me++) {
        npk_load_ustore(c, (int)me, words, n, 8);
        if (me < mes) npk_me_enable(c, (int)me, 0xFF);
        for (uint32_t ctx = 0; ctx < 8; ctx++) {   /* a1, b1: relative register 1 of banks A, B */
            npk_reg_write(c, (int)me, (int)ctx, NPK_REG_GPR_A, ctx * 16 + 1, regs[me][ctx][0]);
            npk_reg_write(c, (int)me, (int)ctx, NPK_REG_GPR_B, ctx * 16 + 1, regs[me][ctx][1]);
        }
    }
    struct timespec t0, t1;
    int reason;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    npk_run(c, cycles, &reason);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    uint64_t ins = 0;
    for (uint32_t me = 0; me < cfg.num_me; me++) {
        npk_me_stats st;
        npk_stats_me(c, (int)me, &st);
        ins += st.instructions;
    }
    printf("{\"mips\": %.2f, \"instructions\": %llu, \"cycles\": %llu, \"fingerprint\": \"%016llx\"}\n",
           (double)ins / dt / 1e6, (unsigned long long)ins, (unsigned long long)npk_cycle(c),
           (unsigned long long)fingerprint(c, cfg.num_me));
    npk_destroy(c);
    free(regs);
    return 0;
}
