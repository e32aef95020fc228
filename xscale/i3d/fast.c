/* fast.c -- TCAM filters and finger entries, written in the safe order (fast.h). */
#include "fast.h"

#include <stdlib.h>
#include <string.h>

int fast_init(fast *f, npkd_mem *mem, uint32_t tcam_base, uint32_t entries, uint32_t first, uint32_t count)
{
    free(f->used);
    memset(f, 0, sizeof *f);
    f->mem = mem;
    f->tcam_base = tcam_base;
    f->entries = entries;
    f->first = first < entries ? first : entries;
    f->count = count < entries - f->first ? count : entries - f->first;
    f->used = entries ? calloc(entries, 1) : NULL;
    return entries && !f->used ? -1 : 0;
}

void fast_free(fast *f)
{
    free(f->used);
    f->used = NULL;
}

static void wr(fast *f, uint32_t addr, uint32_t v)
{
    npkd_sram_wr(f->mem, addr, v);
    f->writes++;
    if (f->on_write) f->on_write(f->on_write_ctx, addr, v);
}

/* ---- TCAM filters ---------------------------------------------------------------------- */

static uint32_t entry_addr(const fast *f, uint32_t e)
{
    return f->tcam_base + e * TC_ENTRY_BYTES;
}

void fast_filter_words(const i3_store *s, const i3_filter *t, uint32_t *key, uint32_t *mask, uint32_t *result)
{
    memset(key, 0, SPP_KEY_LW * 4);
    memset(mask, 0, SPP_KEY_LW * 4);
    key[0] = (uint32_t)t->slice << 16 | (uint32_t)t->code << 8;      /* k0: slice id, kind */
    mask[0] = 0xFFFFFF00u;
    if (t->code == CODE_I3) {                                        /* §5.2 */
        uint64_t m = id_mask(t->len);
        key[1] = (uint32_t)(t->id >> 32);
        mask[1] = (uint32_t)(m >> 32);
        key[2] = (uint32_t)t->id;
        mask[2] = (uint32_t)m;
    } else {                                                         /* §5.1 */
        key[1] = t->dst;
        mask[1] = t->dst_mask;
        key[2] = t->src;
        mask[2] = t->src_mask;
        key[3] = (uint32_t)(t->dport < 0 ? 0 : t->dport) << 16 | (uint32_t)(t->sport < 0 ? 0 : t->sport);
        mask[3] = (t->dport < 0 ? 0 : 0xFFFF0000u) | (t->sport < 0 ? 0 : 0xFFFFu);
        key[4] = (uint32_t)(t->proto < 0 ? 0 : t->proto) << 24;
        mask[4] = t->proto < 0 ? 0 : 0xFF000000u;
    }
    if (t->in >= 0) {
        key[4] |= (uint32_t)t->in << 16;
        mask[4] |= 0x00FF0000u;
    }
    (void)s;
    /* §5.3: action, output meta-interface, next hop */
    result[0] = (uint32_t)t->action << 24 | (uint32_t)t->to.out << 16 | t->to.udp;
    result[1] = t->to.ip;
}

void fast_filter_adopt(fast *f, i3_filter *t, uint32_t e)
{
    if (e < f->entries) {
        f->used[e] = 1;
        t->entry = (int32_t)e;
    }
}

int fast_filter_install(fast *f, const i3_store *s, i3_filter *t)
{
    uint32_t e = f->first;
    while (e < f->first + f->count && f->used[e]) e++;
    if (e == f->first + f->count) return -1;
    uint32_t a = entry_addr(f, e), key[SPP_KEY_LW], mask[SPP_KEY_LW], res[2];
    fast_filter_words(s, t, key, mask, res);
    wr(f, a + TC_E_CONTROL, 0);                        /* whatever it held: invalid first */
    wr(f, a + TC_E_RESULT, res[0]);
    wr(f, a + TC_E_RESULT + 4, res[1]);
    for (uint32_t i = 0; i < TC_KEY_LW_MAX; i++) wr(f, a + TC_E_KEY + 4 * i, i < SPP_KEY_LW ? key[i] : 0);
    for (uint32_t i = 0; i < TC_KEY_LW_MAX; i++) wr(f, a + TC_E_MASK + 4 * i, i < SPP_KEY_LW ? mask[i] : 0);
    wr(f, a + TC_E_CONTROL, TC_VALID);                 /* and now it matches */
    f->used[e] = 1;
    t->entry = (int32_t)e;
    return 0;
}

void fast_filter_remove(fast *f, i3_filter *t)
{
    if (t->entry < 0) return;
    uint32_t e = (uint32_t)t->entry;
    wr(f, entry_addr(f, e) + TC_E_CONTROL, 0);
    if (e < f->entries) f->used[e] = 0;
    t->entry = -1;
}

uint32_t fast_filters_used(const fast *f)
{
    uint32_t n = 0;
    for (uint32_t e = 0; e < f->entries; e++) n += f->used[e];
    return n;
}

uint32_t fast_clear_own(fast *f)
{
    uint32_t n = 0;
    for (uint32_t e = f->first; e < f->first + f->count; e++) {
        uint32_t a = entry_addr(f, e) + TC_E_CONTROL;
        if (!f->used[e] && (npkd_sram_rd(f->mem, a) & TC_VALID)) {
            wr(f, a, 0);
            n++;
        }
    }
    return n;
}

/* ---- the finger blocks (spp.md §4.2) ----------------------------------------------------- */

static uint32_t valid_fingers(const i3_slice *sl)
{
    uint32_t n = 0;
    for (int k = 0; k < I3_FINGERS; k++) n += sl->ring.finger[k].valid;
    return n;
}

static void header_count(fast *f, const i3_slice *sl)
{
    wr(f, sl->ring.block, (uint32_t)sl->id << 16 | valid_fingers(sl));
}

void fast_finger_write(fast *f, const i3_slice *sl, int k, const i3_finger *g)
{
    if (!sl->ring.block || k < 0 || k >= I3_FINGERS) return;
    uint32_t a = sl->ring.block + 0x20u + 16u * (uint32_t)k;
    uint32_t w0 = (uint32_t)g->hop.out << 16 | g->hop.udp;
    wr(f, a, 0);                                       /* invalid first */
    if (g->valid) {
        wr(f, a + 4, g->hop.ip);
        wr(f, a + 8, (uint32_t)(g->node >> 32));
        wr(f, a + 12, (uint32_t)g->node);
        wr(f, a, 0x80000000u | w0);                    /* the valid bit last */
    }
    header_count(f, sl);
}

void fast_ring_write(fast *f, const i3_slice *sl)
{
    if (!sl->ring.block) return;
    uint32_t b = sl->ring.block;
    wr(f, b + 4, 0);
    wr(f, b + 8, (uint32_t)(sl->ring.self >> 32));
    wr(f, b + 12, (uint32_t)sl->ring.self);
    wr(f, b + 16, 0);
    wr(f, b + 20, 0);
    wr(f, b + 24, (uint32_t)(sl->ring.pred >> 32));
    wr(f, b + 28, (uint32_t)sl->ring.pred);
    for (int k = 0; k < I3_FINGERS; k++) fast_finger_write(f, sl, k, &sl->ring.finger[k]);
}
