/* DRAM unit: reads/writes in quadwords and RBUF/TBUF moves through the MSF
 * plug-in.  HRM p.51: the minimum physical access is 16 bytes, which is the
 * default unit_bytes of the DRAM channel occupancy. */
#include <string.h>
#include "../internal.h"

void npk_dram_complete(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint64_t a = e->addr & ~7u;
    uint32_t nb = e->count * 4;
    int push = 0;
    if (a + nb > c->cfg.dram_bytes) {  /* a < 2^32, nb <= 64: no wrap */
        npk_fault_cmd(c, NPK_FAULT_DRAM, a);
        if (e->cmd != 0x8) e->xkind = 0xFF;  /* a read still pushes (zeros) and signals */
        return;
    }
    switch (e->cmd) {
    case 0x8:
        for (uint32_t i = 0; i < e->count; i++) out[i] = npk_rd32(c->dram + a + 4 * i);
        push = 1;
        break;
    case 0x9:
        for (uint32_t i = 0; i < e->count; i++) npk_wr32(c->dram + a + 4 * i, e->data[i]);
        if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_DRAM, a, nb);
        break;
    case 0xA: {  /* rbuf_rd: RBUF -> DRAM */
        uint8_t buf[64];
        memset(buf, 0, sizeof buf);
        if (nb > sizeof buf) nb = sizeof buf;
        c->msf.rbuf_rd(c->msf.user, e->aux, buf, nb);
        c->msf_counts[3]++;
        memcpy(c->dram + a, buf, nb);
        if (c->nwp_mem) npk_mem_watch(c, NPK_MEM_DRAM, a, nb);
        break;
    }
    case 0xB: {  /* tbuf_wr: DRAM -> TBUF */
        if (nb > 64) nb = 64;
        c->msf.tbuf_wr(c->msf.user, e->aux, c->dram + a, nb);
        c->msf_counts[4]++;
        break;
    }
    default: break;
    }
    if (!push) e->xkind = 0xFF;
}
