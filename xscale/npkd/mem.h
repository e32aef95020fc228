/* mem.h -- the chip's memories as npkd sees them.
 *
 * SRAM addresses are the microengines' byte addresses (channel in bits 31:30);
 * words are stored big-endian, as the MEs see them (npk_xscale.h), so every
 * access swaps with ntohl/htonl.  DRAM is byte-addressed (a packet buffer holds
 * the frame's bytes in wire order).  The daemon maps the windows through the
 * device; the native unit tests point the same structure at plain buffers. */
#ifndef NPKD_MEM_H
#define NPKD_MEM_H
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>

typedef struct npkd_mem {
    volatile uint32_t *sram[4];     /* channel bases, NULL when not mapped */
    uint32_t sram_ch_bytes;
    uint8_t *dram;
    uint32_t dram_bytes;
    volatile uint32_t *scratch;     /* scratch (16 KB; the range cache, lpm.c), NULL when not mapped */
    uint32_t scratch_bytes;
    /* maps scratch on first use (a route change), so that a router without a range cache
     * runs the boot it ran before; NULL once tried, or in the native unit tests */
    volatile uint32_t *(*map_scratch)(void *ctx, uint32_t *bytes);
    void *map_ctx;
    uint8_t *mark[4];               /* optional: one bit per SRAM word written (image dumps) */
    uint64_t sram_writes;           /* words written (statistics) */
    uint64_t bad_access;            /* accesses outside the mapped windows */
} npkd_mem;

static inline uint32_t npkd_sram_rd(npkd_mem *m, uint32_t addr)
{
    uint32_t ch = addr >> 30, off = addr & 0x3FFFFFFCu;
    if (!m->sram[ch] || off >= m->sram_ch_bytes) {
        m->bad_access++;
        return 0;
    }
    return ntohl(m->sram[ch][off >> 2]);
}

static inline void npkd_sram_wr(npkd_mem *m, uint32_t addr, uint32_t v)
{
    uint32_t ch = addr >> 30, off = addr & 0x3FFFFFFCu;
    if (!m->sram[ch] || off >= m->sram_ch_bytes) {
        m->bad_access++;
        return;
    }
    m->sram[ch][off >> 2] = htonl(v);
    m->sram_writes++;
    if (m->mark[ch]) m->mark[ch][off >> 5] |= (uint8_t)(1u << ((off >> 2) & 7));
}

/* n SRAM words from addr as stored (big-endian: test bits against htonl(mask)), or
 * NULL when they are not all in a mapped window: for a quick scan of words that only
 * this program writes (so plain, not volatile, reads do) */
static inline const uint32_t *npkd_sram_words(npkd_mem *m, uint32_t addr, uint32_t n)
{
    uint32_t ch = addr >> 30, off = addr & 0x3FFFFFFCu;
    if (!m->sram[ch] || off > m->sram_ch_bytes || n > (m->sram_ch_bytes - off) / 4) return NULL;
    return (const uint32_t *)(uintptr_t)(m->sram[ch] + (off >> 2));
}

/* A scratch word (big-endian as the MEs store it); 0 when scratch is not mapped. */
static inline void npkd_scratch_map(npkd_mem *m)
{
    if (m->scratch || !m->map_scratch) return;
    m->scratch = m->map_scratch(m->map_ctx, &m->scratch_bytes);
    m->map_scratch = NULL;
    if (!m->scratch) m->scratch_bytes = 0;
}

static inline uint32_t npkd_scratch_rd(npkd_mem *m, uint32_t addr)
{
    npkd_scratch_map(m);
    if (!m->scratch || addr >= m->scratch_bytes) return 0;
    return ntohl(m->scratch[addr >> 2]);
}

static inline void npkd_scratch_wr(npkd_mem *m, uint32_t addr, uint32_t v)
{
    npkd_scratch_map(m);
    if (!m->scratch || addr >= m->scratch_bytes) return;
    m->scratch[addr >> 2] = htonl(v);
}

/* A DRAM byte range, or NULL when it lies outside the window. */
static inline uint8_t *npkd_dram(npkd_mem *m, uint32_t addr, uint32_t len)
{
    if (!m->dram || addr > m->dram_bytes || len > m->dram_bytes - addr) {
        m->bad_access++;
        return NULL;
    }
    return m->dram + addr;
}
#endif
