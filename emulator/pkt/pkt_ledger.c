/* pkt_ledger.c -- the departure ledger (see npk_pkt.h): the per-frame accounting of
 * npkit.emulator.traffic_run.TrafficRun.departed and RouterRun._departed, in C. */
#include <stdlib.h>
#include <string.h>
#include "npk_pkt.h"

npk_ledger *npk_ledger_new(void)
{
    npk_ledger *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->first_duplicate = l->first_conflict = -1;
    l->cap = 4096;
    l->flows = malloc(sizeof *l->flows * l->cap);
    if (!l->flows) { free(l); return NULL; }
    for (uint64_t i = 0; i < l->cap; i++) l->flows[i].pid = -1;
    return l;
}

void npk_ledger_free(npk_ledger *l)
{
    if (!l) return;
    free(l->flows);
    free(l);
}

/* oracle.flow_of: input port, then frame bytes 23 and 26..33 (as many as the frame has) */
static void flow_key(uint8_t *k, const uint8_t *f, uint32_t len, uint32_t in_port)
{
    memset(k, 0, 12);
    k[0] = (uint8_t)in_port;
    uint32_t n = 0;
    if (len > 23) k[2 + n++] = f[23];
    for (uint32_t b = 26; b < 34 && b < len; b++) k[2 + n++] = f[b];
    k[1] = (uint8_t)n;
}

static uint64_t flow_hash(const uint8_t *k)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 12; i++) { h ^= k[i]; h *= 0x100000001b3ull; }
    return h;
}

static npk_flow *flow_slot(npk_flow *t, uint64_t cap, const uint8_t *k)
{
    uint64_t i = flow_hash(k) & (cap - 1);
    while (t[i].pid >= 0 && memcmp(t[i].key, k, 12)) i = (i + 1) & (cap - 1);
    return &t[i];
}

static int flow_grow(npk_ledger *l, uint64_t cap, int64_t cut)
{
    npk_flow *t = malloc(sizeof *t * cap);
    if (!t) return -1;
    for (uint64_t i = 0; i < cap; i++) t[i].pid = -1;
    uint64_t used = 0;
    for (uint64_t i = 0; i < l->cap; i++) {
        if (l->flows[i].pid < 0 || l->flows[i].pid < cut) continue;
        *flow_slot(t, cap, l->flows[i].key) = l->flows[i];
        used++;
    }
    free(l->flows);
    l->flows = t;
    l->cap = cap;
    l->used = used;
    return 0;
}

static int flow_check_key(npk_ledger *l, const uint8_t *k, int64_t pid)
{
    if ((l->used + 1) * 2 > l->cap && flow_grow(l, l->cap * 2, -1)) return -1;
    npk_flow *s = flow_slot(l->flows, l->cap, k);
    int reordered = s->pid > pid;
    if (s->pid < 0) {
        memcpy(s->key, k, 12);
        l->used++;
    }
    s->pid = pid;
    return reordered;
}

int npk_flow_check(npk_ledger *l, const uint8_t *frame, uint32_t len, uint32_t in_port, int64_t pid)
{
    uint8_t k[12];
    flow_key(k, frame, len, in_port);
    return flow_check_key(l, k, pid);
}

uint64_t npk_flow_evict(npk_ledger *l, int64_t cut)
{
    uint64_t cap = l->cap;
    uint64_t keep = 0;
    for (uint64_t i = 0; i < l->cap; i++) keep += l->flows[i].pid >= cut;
    while (cap > 4096 && keep * 4 < cap) cap /= 2;
    if (flow_grow(l, cap, cut)) return l->used;
    return l->used;
}

static npk_chunkv *chunk_of(npk_chunkv *c, uint32_t n, uint64_t pid)
{
    uint32_t lo = 0, hi = n;  /* last chunk with first <= pid */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c[mid].first <= pid) lo = mid + 1; else hi = mid;
    }
    if (!lo || pid >= c[lo - 1].end) return NULL;
    return &c[lo - 1];
}

/* a frame the router made itself: ARP, or IPv4 from one of its own addresses */
static int router_frame(const npk_ledger *l, const uint8_t *f, uint32_t len)
{
    if (len < 14) return 0;
    if (f[12] == 0x08 && f[13] == 0x06) return 1;
    if (f[12] != 0x08 || f[13] != 0x00 || len < 30) return 0;
    uint32_t src = (uint32_t)f[26] << 24 | (uint32_t)f[27] << 16 | (uint32_t)f[28] << 8 | f[29];
    for (uint32_t i = 0; i < l->n_own && i < 16; i++)
        if (l->own[i] == src) return 1;
    return 0;
}

int64_t npk_depart(npk_ledger *l, npk_chunkv *chunks, uint32_t nchunks, uint64_t pushed, uint32_t n,
                   const uint8_t *port, const uint64_t *t, const uint16_t *len, const uint64_t *off,
                   const uint8_t *data, uint8_t *slow, int64_t *pid, int64_t *lat)
{
    int64_t nslow = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *f = data + off[i];
        lat[i] = -1;
        if (l->n_own && router_frame(l, f, len[i])) {
            slow[i] = 2;
            pid[i] = -1;
            nslow++;
            continue;
        }
        int64_t tid = npk_tag_id(f, len[i]);
        npk_chunkv *c = tid >= 0 && (uint64_t)tid < pushed ? chunk_of(chunks, nchunks, (uint64_t)tid) : NULL;
        uint64_t k = c ? (uint64_t)tid - c->first : 0;
        /* a packet with a fate already: the frame may be a copy of it made before the
           run (a pcap frame repeated or edited), which Python finds by its bytes */
        if (!c || c->tags[k] != tid || (c->vkind && c->vkind[k] == NPK_V_PYTHON) || c->fate[k]) {
            slow[i] = 1;
            pid[i] = -1;
            nslow++;
            continue;
        }
        slow[i] = 0;
        pid[i] = tid;
        c->left--;
        c->fate[k] = 1;
        l->forwarded[c->ports[k] & 63]++;
        if (!c->vkind) continue;
        uint32_t p = port[i] & 63;
        if (t[i] < l->tx_until) l->tx_bits[p] += (uint64_t)(len[i] + l->over[p]) * 8;
        lat[i] = (int64_t)(t[i] - c->times[k]);
        if (c->vkind[k] != 0) l->wrong_outcome++;
        else if (c->vport[k] != port[i]) l->wrong_port++;
        else if (c->lens[k] != len[i] || memcmp(c->vout + c->off[k], f, len[i])) l->wrong_bytes++;
        else l->matched++;
        uint8_t key[12];
        if (c->data) flow_key(key, c->data + c->off[k], c->lens[k], c->ports[k]);
        else flow_key(key, f, len[i], c->ports[k]);
        int r = flow_check_key(l, key, tid);
        if (r < 0) return -1;
        l->reordered += (uint64_t)r;
    }
    return nslow;
}

void npk_port_load(uint32_t n, const uint8_t *port, const uint16_t *len, const uint8_t *kind, uint8_t want,
                   const uint32_t *over, uint64_t *bits, uint64_t *pkts)
{
    for (uint32_t i = 0; i < n; i++) {
        if (kind && kind[i] != want) continue;
        uint8_t p = port[i];
        bits[p] += 8u * ((uint64_t)len[i] + over[p]);
        pkts[p]++;
    }
}
