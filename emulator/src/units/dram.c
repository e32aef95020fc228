/* DRAM unit: reads/writes in quadwords and RBUF/TBUF moves through the MSF
 * plug-in.  HRM p.51: the minimum physical access is 16 bytes, which is the
 * default unit_bytes of the DRAM channel occupancy. */
#include <string.h>
#include "../internal.h"

/* the command's DRAM range, or 0 (a fault: a read pushes zeros, nothing else happens) */
static int dram_range(npk_chip *c, npk_event *e, uint64_t *a, uint32_t *nb)
{
    *a = e->addr & ~7u;
    *nb = e->count * 4;
    if (*a + *nb > c->cfg.dram_bytes) {  /* a < 2^32, nb <= 128: no wrap */
        npk_fault_cmd(c, NPK_FAULT_DRAM, *a);
        return 0;
    }
    return 1;
}

void npk_dram_read(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint64_t a;
    uint32_t nb;
    if (!dram_range(c, e, &a, &nb)) return;
    for (uint32_t i = 0; i < e->count; i++) out[i] = npk_rd32(c->dram + a + 4 * i);
}

void npk_dram_write(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint64_t a;
    uint32_t nb;
    if (!dram_range(c, e, &a, &nb)) return;
    for (uint32_t i = 0; i < e->count; i++) npk_wr32(c->dram + a + 4 * i, e->data[i]);
    if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_DRAM, a, nb);
}

/* rbuf_rd: RBUF -> DRAM */
void npk_dram_rbuf_rd(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint64_t a;
    uint32_t nb;
    if (!dram_range(c, e, &a, &nb)) return;
    uint8_t buf[4 * NPK_MAX_XFER_WORDS];
    memset(buf, 0, sizeof buf);
    if (nb > sizeof buf) nb = sizeof buf;
    c->msf.rbuf_rd(c->msf.user, e->aux, buf, nb);
    c->msf_counts[3]++;
    memcpy(c->dram + a, buf, nb);
    if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_DRAM, a, nb);
}

/* tbuf_wr: DRAM -> TBUF */
void npk_dram_tbuf_wr(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint64_t a;
    uint32_t nb;
    if (!dram_range(c, e, &a, &nb)) return;
    if (nb > 4 * NPK_MAX_XFER_WORDS) nb = 4 * NPK_MAX_XFER_WORDS;
    c->msf.tbuf_wr(c->msf.user, e->aux, c->dram + a, nb);
    c->msf_counts[4]++;
}
