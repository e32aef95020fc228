/* image.c -- `npkd --build-image OUT`: the tables laid out in a private SRAM and written
 * as an NPKSRAM1 file (LAYOUT.md §8), for the test that the C builder gives the Python
 * builder's image. */
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tables.h"

static int put32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int marked(const npkd_mem *m, int ch, uint32_t word)
{
    return m->mark[ch] && (m->mark[ch][word >> 3] >> (word & 7)) & 1;
}

int build_image(const npkd_cfg *cfg, const char *out, char *err, size_t errlen)
{
    npkd_mem mem;
    memset(&mem, 0, sizeof mem);
    mem.sram_ch_bytes = 1u << 24;
    for (int ch = 0; ch < 4; ch++) {
        mem.sram[ch] = calloc(mem.sram_ch_bytes / 4, 4);
        mem.mark[ch] = calloc(mem.sram_ch_bytes / 32, 1);
    }
    int rc = -1;
    tables t;
    FILE *f = NULL;
    if (!mem.sram[3] || !mem.mark[3] || tables_init(&t, cfg, &mem)) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    rc = tables_build(&t, 1, err, errlen);
    tables_free(&t);
    if (rc) goto done;
    rc = -1;
    /* runs of consecutive written words, in address order */
    uint32_t words = mem.sram_ch_bytes / 4, nruns = 0;
    for (int ch = 0; ch < 4; ch++)
        for (uint32_t w = 0; w < words; w++)
            if (marked(&mem, ch, w) && (w == 0 || !marked(&mem, ch, w - 1))) nruns++;
    f = fopen(out, "wb");
    if (!f || fwrite("NPKSRAM1", 1, 8, f) != 8 || put32(f, nruns)) {
        snprintf(err, errlen, "%s: cannot write", out);
        goto done;
    }
    for (int ch = 0; ch < 4; ch++)
        for (uint32_t w = 0; w < words; w++) {
            if (!marked(&mem, ch, w) || (w > 0 && marked(&mem, ch, w - 1))) continue;
            uint32_t n = 0;
            while (w + n < words && marked(&mem, ch, w + n)) n++;
            if (put32(f, (uint32_t)ch << 30 | 4 * w) || put32(f, n)) goto done;
            for (uint32_t i = 0; i < n; i++)
                if (put32(f, ntohl(mem.sram[ch][w + i]))) goto done;
        }
    rc = 0;
done:
    if (f && fclose(f) && !rc) rc = -1;
    for (int ch = 0; ch < 4; ch++) {
        free((void *)mem.sram[ch]);
        free(mem.mark[ch]);
    }
    return rc;
}
