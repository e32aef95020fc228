/* MSF unit: forwards msf[] commands to the plug-in (npk_msf_ops).  The
 * default plug-in is a loopback stub over a 64 KB buffer that counts calls;
 * the modelled MSF with ports, RBUF and TBUF is msf_dev.c (npk_msf_create). */
#include <string.h>
#include "../internal.h"

static void stub_read(void *u, int me, int ctx, uint32_t addr, uint32_t *w, unsigned n)
{
    npk_chip *c = u;
    (void)me; (void)ctx;
    for (unsigned i = 0; i < n; i++) w[i] = npk_rd32(c->msf_buf + ((addr + 4 * i) & (NPK_MSF_STUB_BYTES - 4)));
}

static void stub_write(void *u, int me, int ctx, uint32_t addr, const uint32_t *w, unsigned n)
{
    npk_chip *c = u;
    (void)me; (void)ctx;
    for (unsigned i = 0; i < n; i++) npk_wr32(c->msf_buf + ((addr + 4 * i) & (NPK_MSF_STUB_BYTES - 4)), w[i]);
}

static void stub_fast_wr(void *u, int me, uint32_t addr, uint32_t data)
{
    (void)u; (void)me; (void)addr; (void)data;
}

static void stub_rbuf_rd(void *u, uint32_t a, uint8_t *buf, unsigned nb)
{
    npk_chip *c = u;
    for (unsigned i = 0; i < nb; i++) buf[i] = c->msf_buf[(a + i) & (NPK_MSF_STUB_BYTES - 1)];
}

static void stub_tbuf_wr(void *u, uint32_t a, const uint8_t *buf, unsigned nb)
{
    npk_chip *c = u;
    for (unsigned i = 0; i < nb; i++) c->msf_buf[(a + i) & (NPK_MSF_STUB_BYTES - 1)] = buf[i];
}

void npk_msf_stub_init(npk_chip *c)
{
    memset(&c->msf, 0, sizeof c->msf);
    c->msf.user = c;
    c->msf.read = stub_read;
    c->msf.write = stub_write;
    c->msf.fast_wr = stub_fast_wr;
    c->msf.rbuf_rd = stub_rbuf_rd;
    c->msf.tbuf_wr = stub_tbuf_wr;
    c->msf_custom = 0;
}

static void nop_read(void *u, int me, int ctx, uint32_t addr, uint32_t *w, unsigned n)
{ (void)u; (void)me; (void)ctx; (void)addr; for (unsigned i = 0; i < n; i++) w[i] = 0; }
static void nop_write(void *u, int me, int ctx, uint32_t addr, const uint32_t *w, unsigned n)
{ (void)u; (void)me; (void)ctx; (void)addr; (void)w; (void)n; }
static void nop_rbuf(void *u, uint32_t a, uint8_t *b, unsigned n) { (void)u; (void)a; memset(b, 0, n); }
static void nop_tbuf(void *u, uint32_t a, const uint8_t *b, unsigned n) { (void)u; (void)a; (void)b; (void)n; }

int npk_set_msf(npk_chip *c, const npk_msf_ops *ops)
{
    if (!c) return NPK_EINVAL;
    if (!ops) { npk_msf_stub_init(c); return NPK_OK; }
    c->msf = *ops;
    if (!c->msf.read) c->msf.read = nop_read;
    if (!c->msf.write) c->msf.write = nop_write;
    if (!c->msf.fast_wr) c->msf.fast_wr = stub_fast_wr;
    if (!c->msf.rbuf_rd) c->msf.rbuf_rd = nop_rbuf;
    if (!c->msf.tbuf_wr) c->msf.tbuf_wr = nop_tbuf;
    c->msf_custom = 1;
    return NPK_OK;
}

/* msf[read|read64]: the plug-in fills the read transfer registers */
void npk_msf_read(npk_chip *c, npk_event *e, uint32_t *out)
{
    c->msf.read(c->msf.user, e->me, e->ctx, e->addr, out, e->count);
    c->msf_counts[0]++;
}

void npk_msf_write(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    c->msf.write(c->msf.user, e->me, e->ctx, e->addr, e->data, e->count);
    c->msf_counts[1]++;
}

/* msf[fast_wr, --, a, b]: the two operands as given (addr, aux) */
void npk_msf_fast_wr(npk_chip *c, npk_event *e, uint32_t *out)
{
    (void)out;
    c->msf.fast_wr(c->msf.user, e->me, e->addr, e->aux);
    c->msf_counts[2]++;
}

int npk_msf_deliver(npk_chip *c, int me, int ctx, int xfer_abs, const uint32_t *words, unsigned n, int sig)
{
    if (!c || me < 0 || (uint32_t)me >= c->cfg.num_me || ctx < 0 || ctx >= 8 || xfer_abs < 0 || sig < 0 || sig > 15)
        return NPK_EINVAL;
    npk_me *m = &c->me[me];
    for (unsigned i = 0; i < n && i < 128; i++) *npk_xfer(m, XK_SIN, (uint32_t)xfer_abs + i) = words[i];
    if (sig) npk_ctx_signal(c, m, ctx, (uint16_t)(1u << sig));
    return NPK_OK;
}

int npk_msf_stub_counts(npk_chip *c, uint64_t *out5)
{
    if (!c || !out5) return NPK_EINVAL;
    for (int i = 0; i < 5; i++) out5[i] = c->msf_counts[i];
    return NPK_OK;
}
