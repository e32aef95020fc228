/* store.c -- meta-interfaces, slices, filters and the Chord ring (store.h). */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_init(i3_store *s)
{
    memset(s, 0, sizeof *s);
    s->next_handle = 1;
}

void store_free(i3_store *s)
{
    free(s->flt);
    s->flt = NULL;
    s->nflt = s->capflt = 0;
}

static void ip_text(char *b, size_t n, uint32_t a)
{
    snprintf(b, n, "%u.%u.%u.%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255);
}

/* ---- slices and meta-interfaces ----------------------------------------------------------- */

i3_slice *slice_get(i3_store *s, uint16_t id)
{
    for (int i = 0; id && i < I3_MAX_SLICES; i++)
        if (s->slice[i].id == id) return &s->slice[i];
    return NULL;
}

i3_slice *slice_by_index(i3_store *s, uint8_t index)
{
    for (int i = 0; i < I3_MAX_SLICES; i++)
        if (s->slice[i].id && s->slice[i].index == index) return &s->slice[i];
    return NULL;
}

i3_slice *slice_by_name(i3_store *s, const char *name)
{
    for (int i = 0; i < I3_MAX_SLICES; i++)
        if (s->slice[i].id && !strcmp(s->slice[i].name, name)) return &s->slice[i];
    return NULL;
}

int slice_add(i3_store *s, const i3_slice *sl, char *why, size_t n)
{
    if (!sl->id || sl->id > 4095) {
        snprintf(why, n, "slice id %u: 1..4095", sl->id);
        return -1;
    }
    if (sl->code != CODE_IPV4 && sl->code != CODE_I3) {
        snprintf(why, n, "code option %u: ipv4 or i3", sl->code);
        return -1;
    }
    if (slice_get(s, sl->id)) {
        snprintf(why, n, "slice %u exists already", sl->id);
        return -1;
    }
    if (!sl->name[0] || slice_by_name(s, sl->name)) {
        snprintf(why, n, sl->name[0] ? "a slice is named %s already" : "a slice needs a name%s", sl->name);
        return -1;
    }
    if (slice_by_index(s, sl->index)) {
        snprintf(why, n, "slice index %u is taken", sl->index);
        return -1;
    }
    if (sl->code == CODE_I3 && sl->ring.self == sl->ring.pred) {
        snprintf(why, n, "an i3 slice's node id must differ from its predecessor's");
        return -1;
    }
    for (int i = 0; i < I3_MAX_SLICES; i++)
        if (!s->slice[i].id) {
            s->slice[i] = *sl;
            return 0;
        }
    snprintf(why, n, "no room for another slice (at most %d)", I3_MAX_SLICES);
    return -1;
}

int slice_del(i3_store *s, uint16_t id, char *why, size_t n)
{
    i3_slice *sl = slice_get(s, id);
    if (!sl) {
        snprintf(why, n, "no slice %u", id);
        return -1;
    }
    uint32_t t = flt_count_slice(s, id);
    if (t) {
        snprintf(why, n, "slice %u still has %u filter(s): delete them first", id, t);
        return -1;
    }
    for (int i = 0; i < I3_MAX_MIS; i++)
        if (s->mi[i].used && s->mi[i].slice == id) memset(&s->mi[i], 0, sizeof s->mi[i]);
    memset(sl, 0, sizeof *sl);
    return 0;
}

int mi_of(const i3_store *s, uint8_t port, uint32_t ip, uint16_t udp)
{
    for (int i = 0; i < I3_MAX_MIS; i++)
        if (s->mi[i].used && s->mi[i].port == port && s->mi[i].ip == ip && s->mi[i].udp == udp) return i;
    return -1;
}

int mi_by_name(const i3_store *s, uint16_t slice, const char *name)
{
    for (int i = 0; i < I3_MAX_MIS; i++)
        if (s->mi[i].used && s->mi[i].slice == slice && !strcmp(s->mi[i].name, name)) return i;
    return -1;
}

int mi_add(i3_store *s, int index, const i3_mi *m, char *why, size_t n)
{
    char a[16];
    int o = mi_of(s, m->port, m->ip, m->udp);
    if (o >= 0) {
        ip_text(a, sizeof a, m->ip);
        snprintf(why, n, "meta-interface %s:%u on port %u is slice %u's already", a, m->udp, m->port, s->mi[o].slice);
        return -1;
    }
    if (m->name[0] && mi_by_name(s, m->slice, m->name) >= 0) {
        snprintf(why, n, "slice %u has a meta-interface %s already", m->slice, m->name);
        return -1;
    }
    if (index < 0)
        for (index = 0; index < I3_MAX_MIS && s->mi[index].used; index++) {
        }
    if (index >= I3_MAX_MIS || s->mi[index].used) {
        snprintf(why, n, "no room for the meta-interface (at most %d)", I3_MAX_MIS);
        return -1;
    }
    s->mi[index] = *m;
    s->mi[index].used = 1;
    return index;
}

/* ---- filters -------------------------------------------------------------------------------- */

uint64_t id_mask(uint8_t len)
{
    return len >= 64 ? ~0ull : len == 0 ? 0 : ~0ull << (64 - len);
}

uint32_t ip_mask(int len)
{
    return len <= 0 ? 0 : len >= 32 ? 0xFFFFFFFFu : ~0u << (32 - len);
}

i3_filter *flt_get(i3_store *s, uint32_t handle)
{
    for (uint32_t i = 0; handle && i < s->nflt; i++)
        if (s->flt[i].handle == handle) return &s->flt[i];
    return NULL;
}

uint32_t flt_count_slice(const i3_store *s, uint16_t slice)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nflt; i++) n += s->flt[i].slice == slice;
    return n;
}

static int same(const i3_filter *a, const i3_filter *b)
{
    if (a->slice != b->slice || a->code != b->code || a->in != b->in || a->action != b->action ||
        a->to.ip != b->to.ip || a->to.udp != b->to.udp || a->to.out != b->to.out)
        return 0;
    if (a->code == CODE_I3) return a->id == b->id && a->len == b->len;
    return a->dst == b->dst && a->dst_mask == b->dst_mask && a->src == b->src && a->src_mask == b->src_mask &&
           a->proto == b->proto && a->dport == b->dport && a->sport == b->sport;
}

static int check(i3_store *s, const i3_filter *f, char *why, size_t n)
{
    i3_slice *sl = slice_get(s, f->slice);
    if (!sl) return snprintf(why, n, "no slice %u", f->slice), -1;
    if (sl->code != f->code)
        return snprintf(why, n, "slice %u runs %s: its filters are %s filters", f->slice,
                        sl->code == CODE_I3 ? "i3" : "ipv4", sl->code == CODE_I3 ? "trigger" : "ipv4"), -1;
    if (f->action < FA_FORWARD || f->action > FA_DROP) return snprintf(why, n, "action %u", f->action), -1;
    if (f->action == FA_FORWARD && (!s->mi[f->to.out].used ||
                                    s->mi[f->to.out].slice != f->slice))
        return snprintf(why, n, "output meta-interface %u is not slice %u's", f->to.out, f->slice), -1;
    if (f->in >= 0 && (f->in >= I3_MAX_MIS || !s->mi[f->in].used || s->mi[f->in].slice != f->slice))
        return snprintf(why, n, "input meta-interface %d is not slice %u's", f->in, f->slice), -1;
    if (f->code == CODE_I3) {
        if (f->len < 1 || f->len > 64)
            return snprintf(why, n, "a trigger compares 1..64 bits of the identifier, not %u", f->len), -1;
        if (f->id & ~id_mask(f->len))
            return snprintf(why, n, "trigger 0x%016llx has bits past its length /%u", (unsigned long long)f->id,
                            f->len), -1;
    } else if ((f->dst & ~f->dst_mask) || (f->src & ~f->src_mask)) {
        return snprintf(why, n, "a prefix has host bits set"), -1;
    }
    for (uint32_t i = 0; i < s->nflt; i++)
        if (same(&s->flt[i], f)) return snprintf(why, n, "the same filter is filter %u already", s->flt[i].handle), -1;
    return 0;
}

uint32_t flt_add(i3_store *s, const i3_filter *f, char *why, size_t n)
{
    if (check(s, f, why, n)) return 0;
    if (s->nflt == s->capflt) {
        uint32_t cap = s->capflt ? 2 * s->capflt : 64;
        i3_filter *p = realloc(s->flt, cap * sizeof *p);
        if (!p) {
            snprintf(why, n, "out of memory");
            return 0;
        }
        s->flt = p;
        s->capflt = cap;
    }
    i3_filter *d = &s->flt[s->nflt++];
    *d = *f;
    d->handle = s->next_handle++;
    d->entry = -1;
    d->hits = 0;
    return d->handle;
}

void flt_remove(i3_store *s, uint32_t handle)
{
    for (uint32_t i = 0; i < s->nflt; i++)
        if (s->flt[i].handle == handle) {      /* keeps the order: show lists by handle */
            memmove(&s->flt[i], &s->flt[i + 1], (s->nflt - i - 1) * sizeof *s->flt);
            s->nflt--;
            return;
        }
}

static int trig_matches(const i3_filter *t, uint16_t slice, uint64_t id)
{
    return t->code == CODE_I3 && t->slice == slice && ((t->id ^ id) & id_mask(t->len)) == 0;
}

uint32_t trig_match(const i3_store *s, uint16_t slice, uint64_t id, uint32_t *out, uint32_t max)
{
    uint8_t best = 0;
    for (uint32_t i = 0; i < s->nflt; i++)
        if (trig_matches(&s->flt[i], slice, id) && s->flt[i].len > best) best = s->flt[i].len;
    uint32_t n = 0;
    for (uint32_t i = 0; best && i < s->nflt; i++)
        if (trig_matches(&s->flt[i], slice, id) && s->flt[i].len == best) {
            if (n < max) out[n] = s->flt[i].handle;
            n++;
        }
    return n;
}

uint32_t trig_match_any(const i3_store *s, uint16_t slice, uint64_t id)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nflt; i++) n += trig_matches(&s->flt[i], slice, id) && s->flt[i].fast;
    return n;
}

/* ---- the Chord ring ------------------------------------------------------------------------- */

int ring_mine(const i3_ring *r, uint64_t id)
{
    return id - r->pred != 0 && id - r->pred <= r->self - r->pred;
}

int finger_k(const i3_ring *r, uint64_t id)
{
    uint64_t d = id - r->self;
    if (!d) return -1;
    int k = 63;
    while (!(d >> k & 1)) k--;
    return k;
}

int finger_route(const i3_ring *r, uint64_t id)
{
    for (int k = finger_k(r, id); k >= 0; k--)
        if (r->finger[k].valid) return k;
    return -1;
}

int node_add(i3_ring *r, uint64_t id, const i3_hop *hop, char *why, size_t n)
{
    if (id == r->self) {
        snprintf(why, n, "node 0x%016llx is this router", (unsigned long long)id);
        return -1;
    }
    for (uint32_t i = 0; i < r->nnode; i++)
        if (r->node[i].id == id) {
            r->node[i].hop = *hop;            /* known already: its address changes */
            return 0;
        }
    if (r->nnode == I3_MAX_NODES) {
        snprintf(why, n, "no room for another node (at most %d)", I3_MAX_NODES);
        return -1;
    }
    r->node[r->nnode].id = id;
    r->node[r->nnode].hop = *hop;
    r->nnode++;
    return 0;
}

int node_del(i3_ring *r, uint64_t id)
{
    for (uint32_t i = 0; i < r->nnode; i++)
        if (r->node[i].id == id) {
            r->node[i] = r->node[--r->nnode];
            return 1;
        }
    return 0;
}

void fingers_compute(const i3_ring *r, i3_finger *f)
{
    memset(f, 0, I3_FINGERS * sizeof *f);
    for (int k = 0; k < I3_FINGERS; k++) {
        uint64_t start = r->self + (1ull << k), best = 0;
        int j = -1;
        for (uint32_t i = 0; i < r->nnode; i++) {
            uint64_t d = r->node[i].id - start;       /* clockwise from start */
            if (j < 0 || d < best) {
                best = d;
                j = (int)i;
            }
        }
        if (j < 0 || r->self - start < best) continue;   /* this router is successor(start) */
        f[k].valid = 1;
        f[k].node = r->node[j].id;
        f[k].hop = r->node[j].hop;
    }
}
