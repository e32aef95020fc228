/* CAP (chip CSRs through cap[]) and PCI.  XSCALE_INT_A/B writes raise an
 * interrupt bit for the writing ME (npk_xscale_irq); INTERTHREAD_SIG writes
 * signal a thread: data [3:0] signal, [6:4] context, [11:7] ME number (0x00-0x17:
 * cluster << 4 | ME, as ACTIVE_CTX_STS[7:3]; the bit layout is npkit's).  Other CSRs
 * are plain storage.  PCI reads return zeros, writes are discarded. */
#include "../internal.h"

void npk_cap_complete(npk_chip *c, npk_event *e, uint32_t *out)
{
    if (e->unit == NPK_UNIT_PCI) {
        if (e->cmd != 0x4) e->xkind = 0xFF;
        return;
    }
    uint32_t a = e->addr & 0xFFFC;
    if (e->cmd == 0) {  /* read */
        for (uint32_t i = 0; i < e->count; i++) out[i] = c->cap_csr[((a >> 2) + i) % NPK_CAP_CSR_WORDS];
        return;
    }
    for (uint32_t i = 0; i < e->count; i++) {
        uint32_t ad = (a + 4 * i) & 0xFFFC, v = e->data[i];
        c->cap_csr[ad >> 2] = v;
        if (ad == NPK_CAPCSR_XSCALE_INT_A) c->irq |= 1u << e->me;
        else if (ad == NPK_CAPCSR_XSCALE_INT_B) c->irq |= 1u << (16 + e->me);
        else if (ad == NPK_CAPCSR_INTERTHREAD_SIG) {
            int me = npk_me_flat(c, (v >> 7) & 0x1F);
            uint32_t ctx = (v >> 4) & 7, s = v & 0xF;
            if (me >= 0 && ctx < c->cfg.ctx_per_me && s)
                npk_ctx_signal(c, &c->me[me], (int)ctx, (uint16_t)(1u << s));
        }
    }
    e->xkind = 0xFF;
}
