/* CAP (chip CSRs through cap[]) and PCI.  XSCALE_INT_A/B writes raise an
 * interrupt bit for the writing ME (npk_xscale_irq); INTERTHREAD_SIG writes
 * signal a thread: data [3:0] signal, [6:4] context, [11:7] ME number (0x00-0x17:
 * cluster << 4 | ME, as ACTIVE_CTX_STS[7:3]; the bit layout is npkit's).  Other CSRs
 * are plain storage.  PCI reads return zeros, writes are discarded. */
#include "../internal.h"

void npk_pci_read(npk_chip *c, npk_event *e, uint32_t *out) { (void)c; (void)e; (void)out; }
void npk_pci_write(npk_chip *c, npk_event *e, uint32_t *out) { (void)c; (void)e; (void)out; }

void npk_cap_read(npk_chip *c, npk_event *e, uint32_t *out)
{
    uint32_t a = e->addr & 0xFFFC;
    for (uint32_t i = 0; i < e->count; i++) out[i] = c->cap_csr[((a >> 2) + i) % NPK_CAP_CSR_WORDS];
}

/* cap[write] and cap[fast_wr] */
void npk_cap_write(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    uint32_t a = e->addr & 0xFFFC;
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
}
