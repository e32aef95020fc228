/* Chip configuration shared by the sanitizer C drivers (emulator/tests/c/test_core.c,
 * tests/msf/c/test_msf_dev.c): the IXP2800 shape with small memories, filled by hand
 * because the drivers run without the Python config loader.  Each driver adjusts what
 * it needs after the call. */
#ifndef NPK_TEST_CONFIG_H
#define NPK_TEST_CONFIG_H
#include <string.h>
#include "npk_emu.h"

static inline void npk_test_unit(npk_unit_cfg *u, uint32_t ch, uint32_t overhead, uint32_t lat, uint32_t ub,
                                 uint32_t cpu)
{
    u->channels = ch; u->cmd_overhead = overhead; u->read_latency = lat; u->write_latency = lat / 2;
    u->unit_bytes = ub; u->cycles_per_unit = cpu; u->queue_depth = 64;
}

/* `overhead`: command-bus cycles before a unit queues a command */
static inline void npk_test_config(npk_config *c, const char *name, uint32_t overhead)
{
    memset(c, 0, sizeof *c);
    strncpy(c->name, name, sizeof c->name - 1);
    c->clock_mhz = 1400; c->num_me = 16; c->ctx_per_me = 8; c->ustore_words = 8192; c->lm_words = 640;
    c->cam_entries = 16; c->nn_full_threshold = 96; c->branch_taken_penalty = 3; c->ctx_swap_cost = 3;
    c->csr_write_to_use = 3; c->timestamp_shift = 4; c->sram_channel_bytes = 1 << 20; c->dram_bytes = 1 << 22;
    c->dram_interleave = 128; c->scratch_bytes = 16384; c->scratch_rings = 16;
    c->seed = 1;
    npk_test_unit(&c->sram, 4, overhead, 90, 4, 6);
    npk_test_unit(&c->dram, 3, overhead, 200, 16, 14);
    npk_test_unit(&c->scratch, 1, overhead, 50, 4, 2);
    npk_test_unit(&c->hash, 1, overhead, 60, 16, 4);
    npk_test_unit(&c->cap, 1, overhead, 40, 4, 2);
    npk_test_unit(&c->msf, 1, overhead, 60, 8, 2);
    npk_test_unit(&c->pci, 1, overhead, 300, 4, 21);
}
#endif
