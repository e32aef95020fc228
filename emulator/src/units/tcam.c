/* TCAM: a ternary CAM (network search engine) on an SRAM channel (docs/tcam.md).
 *
 * It answers a 2 MB window of its channel, and the SRAM bytes of the window are its
 * storage: entries (key 9 LW | mask 9 LW | result 2 LW | control LW, 128 bytes each),
 * key slots (64 bytes), result slots (16 bytes), counters.  So whatever sees SRAM sees the
 * TCAM as it is: the MEs' plain reads and writes, the XScale's window (which maps the
 * SRAM's backing store), the host's npk_mem_*, snapshots.  The one thing that is not a
 * plain SRAM access is a `read` of a result slot: npk_issue (issue.h) schedules it as a
 * lookup (EVK_TCAM: occupancy cycles_per_lookup, latency + lookup_latency), and
 * npk_tcam_complete carries it out when it completes.
 *
 * Match: entry i matches key k when it is valid (control bit 31) and, on each of the
 * ceil(key_bits / 32) key longwords, (k ^ entry.key) & entry.mask == 0 (the bits past
 * key_bits in the last longword are ignored).  The best match is the lowest index. */
#include "../internal.h"

#define TCAM_VALID 0x80000000u

static inline uint32_t raw32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* the key longwords compared, and the mask of the last one's bits inside key_bits, as
 * stored (big-endian: XOR and AND need no byte swap) */
static uint32_t key_words(const npk_chip *c, uint32_t *last_raw)
{
    uint32_t bits = c->cfg.tcam.key_bits, rem = bits % 32;
    uint32_t m = rem ? ~0u << (32 - rem) : ~0u;
    uint8_t b[4];
    npk_wr32(b, m);
    *last_raw = raw32(b);
    return (bits + 31) / 32;
}

/* the match of key `kraw` (stored form, NPK_TCAM_KEY_WORDS longwords) against every entry */
static void tcam_match(const npk_chip *c, const uint32_t *kraw, npk_tcam_result *r)
{
    uint32_t last, kw = key_words(c, &last);
    const uint8_t *base = c->sram + c->tcam_off;
    memset(r, 0, sizeof *r);
    for (uint32_t i = 0; i < c->cfg.tcam.entries; i++) {
        const uint8_t *e = base + (size_t)i * NPK_TCAM_ENTRY_BYTES;
        if (!(npk_rd32(e + NPK_TCAM_E_CONTROL) & TCAM_VALID)) continue;
        uint32_t diff = 0;
        for (uint32_t w = 0; w + 1 < kw; w++)
            diff |= (raw32(e + 4 * w) ^ kraw[w]) & raw32(e + NPK_TCAM_E_MASK + 4 * w);
        diff |= (raw32(e + 4 * (kw - 1)) ^ kraw[kw - 1]) & raw32(e + NPK_TCAM_E_MASK + 4 * (kw - 1)) & last;
        if (diff) continue;
        if (!r->count++) {
            r->hit = 1;
            r->index = i;
            r->result = (uint64_t)npk_rd32(e + NPK_TCAM_E_RESULT) << 32 | npk_rd32(e + NPK_TCAM_E_RESULT + 4);
            if (c->cfg.tcam.result_bits == 32) r->result &= 0xFFFFFFFF00000000ull;   /* bits 63:32 alone */
        }
    }
}

/* the counters' low 32 bits and the configuration words, in the window's counter block */
static void csr_mirror(npk_chip *c)
{
    uint8_t *p = c->sram + c->tcam_off + NPK_TCAM_CSR_OFF;
    npk_wr32(p, (uint32_t)c->tcam_st.lookups);
    npk_wr32(p + 4, (uint32_t)c->tcam_st.hits);
    npk_wr32(p + 8, (uint32_t)c->tcam_st.multi_hits);
    npk_wr32(p + 12, c->cfg.tcam.entries);
    npk_wr32(p + 16, c->cfg.tcam.key_bits);
}

void npk_tcam_reset(npk_chip *c)
{
    memset(&c->tcam_st, 0, sizeof c->tcam_st);
    if (c->cfg.tcam.present) csr_mirror(c);
}

/* A lookup completes: key slot s against the entries; the answer (hit | count, index,
 * result) into the read transfer registers, the result slot and the counters. */
void npk_tcam_complete(npk_chip *c, npk_event *e)
{
    npk_me *m = &c->me[e->me];
    npk_complete_begin(c, m, e);
    uint32_t off = (e->addr & ~3u) - c->tcam_lo;    /* inside the result slots (issue.h) */
    uint32_t slot = off >> 4, first = (off & 15) >> 2;
    const uint8_t *ks = c->sram + c->tcam_off + NPK_TCAM_KEY_OFF + (size_t)slot * 64;
    uint32_t kraw[NPK_TCAM_KEY_WORDS];
    for (int w = 0; w < NPK_TCAM_KEY_WORDS; w++) kraw[w] = raw32(ks + 4 * w);
    npk_tcam_result r;
    tcam_match(c, kraw, &r);
    uint32_t ans[4] = {(r.hit ? 0x80000000u : 0) | (r.count > 255 ? 255 : r.count), r.index,
                       (uint32_t)(r.result >> 32), (uint32_t)r.result};
    uint8_t *rs = c->sram + c->tcam_off + NPK_TCAM_RESULT_OFF + (size_t)slot * 16;
    for (int w = 0; w < 4; w++) npk_wr32(rs + 4 * w, ans[w]);
    c->tcam_st.lookups++;
    c->tcam_st.hits += r.hit;
    c->tcam_st.multi_hits += r.count > 1;
    csr_mirror(c);
    uint32_t n = e->count > NPK_MAX_XFER_WORDS ? NPK_MAX_XFER_WORDS : e->count;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = first + i < 4 ? ans[first + i] : 0;
        uint32_t idx = (e->xidx + i) & 127;
        uint32_t *reg = npk_xfer(m, e->xkind, idx), was = *reg;
        *reg = v;
        if (c->nwp_reg)
            npk_reg_watch(c, m->idx, NPK_REG_SXFER_IN + e->xkind, idx, was, v, e->me, e->ctx, NPK_PC_UNIT);
    }
    if (c->hist_level) {
        npk_hist(c, NPK_EV_TCAM, e->me, e->ctx, e->unit,
                 (uint32_t)r.hit << 31 | (r.count > 255 ? 255u : r.count) << 16 | slot, r.index);
        for (uint32_t w = 0; w < (c->cfg.tcam.key_bits + 31) / 32; w++)
            npk_hist(c, NPK_EV_TCAM_DATA, e->me, e->ctx, e->unit, w, npk_rd32(ks + 4 * w));
        npk_hist(c, NPK_EV_TCAM_DATA, e->me, e->ctx, e->unit, 9, ans[2]);
        npk_hist(c, NPK_EV_TCAM_DATA, e->me, e->ctx, e->unit, 10, ans[3]);
    }
    if (c->nwp_mem) {
        c->cur_ev = e;
        npk_mem_watch(c, NPK_MEM_SRAM, e->addr & ~15u, 16);
        c->cur_ev = NULL;
    }
    npk_hist(c, NPK_EV_MEM_DONE, e->me, e->ctx, e->unit, e->cmd, e->addr);
    if (e->sigmask) npk_ctx_signal(c, m, e->ctx, e->sigmask);
}

/* ---- API ----------------------------------------------------------------------- */

static int no_tcam(npk_chip *c)
{
    return !c || !c->cfg.tcam.present;
}

static uint8_t *entry_ptr(npk_chip *c, uint32_t index)
{
    return c->sram + c->tcam_off + NPK_TCAM_ENTRY_OFF + (size_t)index * NPK_TCAM_ENTRY_BYTES;
}

int npk_tcam_info(npk_chip *c, npk_tcam_cfg *out, uint32_t *base)
{
    if (!c || !out) return NPK_EINVAL;
    *out = c->cfg.tcam;
    if (base) *base = c->cfg.tcam.present ? c->cfg.tcam.channel << 30 | c->cfg.tcam.window : 0;
    return c->cfg.tcam.present ? NPK_OK : NPK_ESTATE;
}

int npk_tcam_write(npk_chip *c, uint32_t index, const uint32_t *key, const uint32_t *mask, uint64_t result, int valid)
{
    if (no_tcam(c)) return NPK_ESTATE;
    if (!key || !mask || index >= c->cfg.tcam.entries) return NPK_EINVAL;
    uint8_t *p = entry_ptr(c, index);
    for (int w = 0; w < NPK_TCAM_KEY_WORDS; w++) {
        npk_wr32(p + 4 * w, key[w]);
        npk_wr32(p + NPK_TCAM_E_MASK + 4 * w, mask[w]);
    }
    npk_wr32(p + NPK_TCAM_E_RESULT, (uint32_t)(result >> 32));
    npk_wr32(p + NPK_TCAM_E_RESULT + 4, (uint32_t)result);
    npk_wr32(p + NPK_TCAM_E_CONTROL, valid ? TCAM_VALID : 0);
    return NPK_OK;
}

int npk_tcam_read(npk_chip *c, uint32_t index, uint32_t *key, uint32_t *mask, uint64_t *result, int *valid)
{
    if (no_tcam(c)) return NPK_ESTATE;
    if (index >= c->cfg.tcam.entries) return NPK_EINVAL;
    const uint8_t *p = entry_ptr(c, index);
    for (int w = 0; w < NPK_TCAM_KEY_WORDS; w++) {
        if (key) key[w] = npk_rd32(p + 4 * w);
        if (mask) mask[w] = npk_rd32(p + NPK_TCAM_E_MASK + 4 * w);
    }
    if (result) result[0] = (uint64_t)npk_rd32(p + NPK_TCAM_E_RESULT) << 32 | npk_rd32(p + NPK_TCAM_E_RESULT + 4);
    if (valid) *valid = (npk_rd32(p + NPK_TCAM_E_CONTROL) & TCAM_VALID) != 0;
    return NPK_OK;
}

int npk_tcam_invalidate(npk_chip *c, uint32_t index)
{
    if (no_tcam(c)) return NPK_ESTATE;
    if (index >= c->cfg.tcam.entries) return NPK_EINVAL;
    uint8_t *p = entry_ptr(c, index) + NPK_TCAM_E_CONTROL;
    npk_wr32(p, npk_rd32(p) & ~TCAM_VALID);
    return NPK_OK;
}

int npk_tcam_lookup(npk_chip *c, const uint32_t *key, npk_tcam_result *out)
{
    if (no_tcam(c)) return NPK_ESTATE;
    if (!key || !out) return NPK_EINVAL;
    uint32_t kraw[NPK_TCAM_KEY_WORDS];
    for (int w = 0; w < NPK_TCAM_KEY_WORDS; w++) {
        uint8_t b[4];
        npk_wr32(b, key[w]);
        kraw[w] = raw32(b);
    }
    tcam_match(c, kraw, out);
    return NPK_OK;
}

int npk_tcam_stats_get(npk_chip *c, npk_tcam_stats *out)
{
    if (!c || !out) return NPK_EINVAL;
    *out = c->tcam_st;
    return c->cfg.tcam.present ? NPK_OK : NPK_ESTATE;
}
