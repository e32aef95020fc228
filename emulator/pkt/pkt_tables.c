/* pkt_tables.c -- MT19937 as Python's random module runs it, the route file parser,
 * route sets as sorted intervals, and the LPM trie build (see npk_pkt.h). */
#include <stdlib.h>
#include <string.h>
#include "npk_pkt.h"

/* ---- MT19937 (the generator of CPython's _randommodule.c) ---------------------------- */

#define MT_N 624
#define MT_M 397

uint32_t npk_mt_u32(npk_mt *m)
{
    static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
    uint32_t *mt = m->state;
    uint32_t y;
    if (m->index >= MT_N) {
        int kk;
        for (kk = 0; kk < MT_N - MT_M; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < MT_N - 1; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (mt[MT_N - 1] & 0x80000000u) | (mt[0] & 0x7fffffffu);
        mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 1u];
        m->index = 0;
    }
    y = mt[m->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

/* getrandbits(k), 0 <= k <= 32 */
uint32_t npk_mt_bits(npk_mt *m, int k)
{
    if (k <= 0) return 0;
    return npk_mt_u32(m) >> (32 - k);
}

/* _randbelow_with_getrandbits(n), n >= 1 */
uint32_t npk_mt_below(npk_mt *m, uint32_t n)
{
    int k = 0;
    for (uint32_t v = n; v; v >>= 1) k++;
    uint32_t r = npk_mt_bits(m, k);
    while (r >= n) r = npk_mt_bits(m, k);
    return r;
}

double npk_mt_random(npk_mt *m)
{
    uint32_t a = npk_mt_u32(m) >> 5, b = npk_mt_u32(m) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* ---- route file ------------------------------------------------------------------------ */

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* a strict dotted quad (what ipaddress.IPv4Address accepts); 0 on anything else */
static int parse_quad(const char *s, const char *e, uint32_t *out)
{
    uint32_t v = 0;
    for (int q = 0; q < 4; q++) {
        if (q) {
            if (s >= e || *s != '.') return 0;
            s++;
        }
        const char *d = s;
        uint32_t o = 0;
        while (s < e && *s >= '0' && *s <= '9' && s - d < 4) o = o * 10 + (uint32_t)(*s++ - '0');
        long nd = s - d;
        if (nd < 1 || nd > 3 || o > 255 || (nd > 1 && *d == '0')) return 0;
        v = v << 8 | o;
    }
    if (s != e) return 0;
    *out = v;
    return 1;
}

static int parse_uint(const char *s, const char *e, uint32_t max, uint32_t *out)
{
    uint64_t v = 0;
    if (s >= e || e - s > 10) return 0;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v > max) return 0;
    *out = (uint32_t)v;
    return 1;
}

static uint32_t mask_of(int len) { return len ? (uint32_t)(0xFFFFFFFFull << (32 - len)) : 0; }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int64_t npk_routes_parse(const char *text, size_t n, uint32_t cap, uint32_t *prefix, uint8_t *length,
                         uint32_t *next_hop, uint32_t *port)
{
    uint32_t count = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && text[j] != '\n') j++;
        size_t end = j;
        if (end > i && text[end - 1] == '\r') end--;
        const char *s = text + i, *e = text + end;
        for (const char *p = s; p < e; p++) {
            unsigned char c = (unsigned char)*p;
            if (c == '#') { e = p; break; }
            if (c >= 0x80 || (c < 0x20 && c != '\t') || c == 0x7f) return -1;  /* unusual: Python decides */
        }
        const char *f[4][2];
        int nf = 0;
        const char *p = s;
        while (p < e) {
            while (p < e && is_space(*p)) p++;
            if (p >= e) break;
            const char *q = p;
            while (q < e && !is_space(*q)) q++;
            if (nf == 3) return -1;
            f[nf][0] = p;
            f[nf][1] = q;
            nf++;
            p = q;
        }
        i = j + 1;
        if (nf == 0) continue;
        if (nf != 3 || count >= cap) return -1;
        const char *slash = f[0][0];
        while (slash < f[0][1] && *slash != '/') slash++;
        uint32_t addr, len, hop, prt;
        if (slash >= f[0][1] || !parse_quad(f[0][0], slash, &addr) || !parse_uint(slash + 1, f[0][1], 32, &len) ||
            (addr & ~mask_of((int)len)) || !parse_quad(f[1][0], f[1][1], &hop) ||
            !parse_uint(f[2][0], f[2][1], 0x7FFFFFFF, &prt))
            return -1;
        prefix[count] = addr;
        length[count] = (uint8_t)len;
        next_hop[count] = hop;
        port[count] = prt;
        count++;
    }
    /* duplicates: Python names both lines */
    if (count > 1) {
        uint64_t *keys = malloc(sizeof *keys * count);
        if (!keys) return -1;
        for (uint32_t k = 0; k < count; k++) keys[k] = (uint64_t)prefix[k] << 6 | length[k];
        qsort(keys, count, sizeof *keys, cmp_u64);
        int dup = 0;
        for (uint32_t k = 1; k < count && !dup; k++) dup = keys[k] == keys[k - 1];
        free(keys);
        if (dup) return -1;
    }
    return count;
}

/* ---- route sets as intervals ------------------------------------------------------------ */

typedef struct {
    uint64_t key;   /* prefix << 6 | length: sorts by prefix, then shorter first */
    uint32_t idx;
} rkey;

static int cmp_rkey(const void *a, const void *b)
{
    const rkey *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

typedef struct {
    uint32_t *starts;
    int32_t *vals;
    int64_t count;
} emitter;

static void emit(emitter *em, uint64_t start, int32_t val)
{
    if (em->count && em->vals[em->count - 1] == val) return;
    em->starts[em->count] = (uint32_t)start;
    em->vals[em->count] = val;
    em->count++;
}

int64_t npk_rt_build(uint32_t n, const uint32_t *prefix, const uint8_t *length, uint32_t *starts,
                     int32_t *vals, uint32_t *dup)
{
    rkey *ks = malloc(sizeof *ks * (n ? n : 1));
    if (!ks) return -2;
    for (uint32_t i = 0; i < n; i++) {
        if (length[i] > 32 || (prefix[i] & ~mask_of(length[i]))) { free(ks); return -2; }
        ks[i].key = (uint64_t)prefix[i] << 6 | length[i];
        ks[i].idx = i;
    }
    qsort(ks, n, sizeof *ks, cmp_rkey);
    for (uint32_t i = 1; i < n; i++) {
        if (ks[i].key == ks[i - 1].key) {
            dup[0] = ks[i - 1].idx;
            dup[1] = ks[i].idx;
            free(ks);
            return -1;
        }
    }
    struct { uint64_t end; int32_t val; } st[34];
    int top = 0;
    uint64_t cur = 0;
    emitter em = {starts, vals, 0};
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = ks[i].key >> 6, e = s + (1ull << (32 - (ks[i].key & 63)));
        while (top && st[top - 1].end <= s) {
            if (cur < st[top - 1].end) { emit(&em, cur, st[top - 1].val); cur = st[top - 1].end; }
            top--;
        }
        if (cur < s) { emit(&em, cur, top ? st[top - 1].val : -1); cur = s; }
        st[top].end = e;
        st[top].val = (int32_t)ks[i].idx;
        top++;
    }
    while (top) {
        if (cur < st[top - 1].end) { emit(&em, cur, st[top - 1].val); cur = st[top - 1].end; }
        top--;
    }
    if (cur < (1ull << 32)) emit(&em, cur, -1);
    free(ks);
    return em.count;
}

int32_t npk_rt_lookup(const uint32_t *starts, const int32_t *vals, uint32_t count, uint32_t addr)
{
    uint32_t lo = 0, hi = count;  /* largest i with starts[i] <= addr; starts[0] == 0 */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= addr) lo = mid; else hi = mid;
    }
    return count ? vals[lo] : -1;
}

void npk_rt_lookup_many(const uint32_t *starts, const int32_t *vals, uint32_t count, uint32_t n,
                        const uint32_t *addr, int32_t *out)
{
    for (uint32_t i = 0; i < n; i++) out[i] = npk_rt_lookup(starts, vals, count, addr[i]);
}

/* ---- the LPM trie (toolchain/router/lpm.py, microcode/lookup/LAYOUT.md) ----------------- */

#define ENTRY_CHILD 0x80000000u
#define TYPE_SHIFT 28
#define DENSE32 0
#define DENSE16 1
#define RUNS 2
#define RUNS_MAX 5

typedef struct {
    uint32_t *nodes;
    uint64_t cap_words, hw;   /* hw in 16-byte units */
} pool;

static uint32_t child_entry(int type, uint64_t off) { return ENTRY_CHILD | (uint32_t)type << TYPE_SHIFT | (uint32_t)off; }

static int place(pool *p, int type, const uint32_t *words, uint32_t nwords, uint32_t *entry)
{
    uint32_t units = type == DENSE32 ? 64 : type == DENSE16 ? 32 : 1;
    if ((p->hw + units) * 4 > p->cap_words || p->hw + units > 0x01000000u) return -1;
    memcpy(p->nodes + p->hw * 4, words, nwords * sizeof *words);
    *entry = child_entry(type, p->hw);
    p->hw += units;
    return 0;
}

/* encode_leaf_node: RUNS when at most 5 runs, else DENSE16 */
static int place_leaf_node(pool *p, const uint16_t *v, uint32_t *entry)
{
    uint32_t starts[RUNS_MAX], values[RUNS_MAX];
    int nr = 0;
    for (int b = 0; b < 256; b++) {
        if (b == 0 || v[b] != v[b - 1]) {
            if (nr == RUNS_MAX) { nr = RUNS_MAX + 1; break; }
            starts[nr] = (uint32_t)b;
            values[nr] = v[b];
            nr++;
        }
    }
    uint32_t w[128];
    if (nr <= RUNS_MAX) {
        uint32_t bounds[4];
        for (int i = 0; i < 4; i++) bounds[i] = i + 1 < nr ? starts[i + 1] : 0xFF;
        for (int i = nr; i < RUNS_MAX; i++) values[i] = values[nr - 1];
        w[0] = bounds[0] << 24 | bounds[1] << 16 | bounds[2] << 8 | bounds[3];
        w[1] = values[0] << 16 | values[1];
        w[2] = values[2] << 16 | values[3];
        w[3] = values[4] << 16;
        return place(p, RUNS, w, 4, entry);
    }
    for (int i = 0; i < 128; i++) w[i] = (uint32_t)v[2 * i] << 16 | v[2 * i + 1];
    return place(p, DENSE16, w, 128, entry);
}

static int uniform(const uint16_t *v)
{
    for (int b = 1; b < 256; b++) if (v[b] != v[0]) return 0;
    return 1;
}

typedef struct {
    uint32_t prefix;
    uint8_t len;
    uint16_t nh;
} lroute;

/* by /16, then length, then prefix: each /16's routes come together, shorter first */
static int cmp_lroute(const void *a, const void *b)
{
    const lroute *x = a, *y = b;
    uint32_t kx = x->prefix >> 16, ky = y->prefix >> 16;
    if (kx != ky) return kx < ky ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->prefix < y->prefix ? -1 : x->prefix > y->prefix;
}

static int cmp_deep(const void *a, const void *b)   /* by /24, then length */
{
    const lroute *x = a, *y = b;
    uint32_t kx = x->prefix >> 8, ky = y->prefix >> 8;
    if (kx != ky) return kx < ky ? -1 : 1;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->prefix < y->prefix ? -1 : x->prefix > y->prefix;
}

/* one /16 with routes longer than /16: its root entry (nodes placed as _materialise does) */
static int build16(pool *p, uint16_t base, const lroute *r, uint32_t nr, uint32_t *entry)
{
    uint16_t vals[256], sub[256];
    for (int b = 0; b < 256; b++) vals[b] = base;
    uint32_t ndeep = 0;
    for (uint32_t i = 0; i < nr; i++) {
        if (r[i].len <= 24) {
            uint32_t start = (r[i].prefix >> 8) & 0xFF, span = 1u << (24 - r[i].len);
            for (uint32_t b = start; b < start + span; b++) vals[b] = r[i].nh;
        } else {
            ndeep++;
        }
    }
    lroute *deep = NULL;
    if (ndeep) {
        deep = malloc(sizeof *deep * ndeep);
        if (!deep) return -2;
        uint32_t k = 0;
        for (uint32_t i = 0; i < nr; i++) if (r[i].len > 24) deep[k++] = r[i];
        qsort(deep, ndeep, sizeof *deep, cmp_deep);
    }
    /* children by byte, in order; a /24 whose deep routes only repeat its cover folds back */
    uint16_t (*kids)[256] = NULL;
    int has_kid[256] = {0};
    int nkids = 0;
    if (ndeep) {
        kids = malloc(sizeof *kids * 256);
        if (!kids) { free(deep); return -2; }
    }
    for (uint32_t i = 0; i < ndeep;) {
        uint32_t b = (deep[i].prefix >> 8) & 0xFF, j = i;
        for (int x = 0; x < 256; x++) sub[x] = vals[b];
        while (j < ndeep && ((deep[j].prefix >> 8) & 0xFF) == b) {
            uint32_t start = deep[j].prefix & 0xFF, span = 1u << (32 - deep[j].len);
            for (uint32_t x = start; x < start + span; x++) sub[x] = deep[j].nh;
            j++;
        }
        if (uniform(sub)) {
            vals[b] = sub[0];
        } else {
            memcpy(kids[b], sub, sizeof sub);
            has_kid[b] = 1;
            nkids++;
        }
        i = j;
    }
    int rc = 0;
    if (!nkids) {
        if (uniform(vals)) *entry = vals[0];
        else rc = place_leaf_node(p, vals, entry);
    } else {
        uint32_t w[256];
        for (int b = 0; b < 256 && !rc; b++) {
            if (has_kid[b]) rc = place_leaf_node(p, kids[b], &w[b]);
            else w[b] = vals[b];
        }
        if (!rc) rc = place(p, DENSE32, w, 256, entry);
    }
    free(kids);
    free(deep);
    return rc;
}

int npk_lpm_build(uint32_t n, const uint32_t *prefix, const uint8_t *length, const uint16_t *nexthop,
                  uint32_t *root, uint32_t *nodes, uint64_t cap_words, uint64_t *high_water)
{
    lroute *rs = malloc(sizeof *rs * (n ? n : 1));
    uint8_t *best = calloc(65536, 1);   /* length + 1 of the route painted into each root entry */
    if (!rs || !best) { free(rs); free(best); return -2; }
    for (uint32_t i = 0; i < n; i++) {
        if (length[i] > 32 || (prefix[i] & ~mask_of(length[i])) || !nexthop[i]) { free(rs); free(best); return -2; }
        rs[i].prefix = prefix[i];
        rs[i].len = length[i];
        rs[i].nh = nexthop[i];
    }
    qsort(rs, n, sizeof *rs, cmp_lroute);
    memset(root, 0, 65536 * sizeof *root);
    /* routes up to /16: the longest covering each /16 (ties are the same prefix) */
    for (uint32_t i = 0; i < n; i++) {
        if (rs[i].len > 16) continue;
        uint32_t first = rs[i].prefix >> 16, count = 1u << (16 - rs[i].len);
        for (uint32_t k = first; k < first + count; k++) {
            if (best[k] <= rs[i].len + 1) { best[k] = (uint8_t)(rs[i].len + 1); root[k] = rs[i].nh; }
        }
    }
    pool p = {nodes, cap_words, 0};
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc;) {
        uint32_t k = rs[i].prefix >> 16, j = i;
        while (j < n && rs[j].prefix >> 16 == k) j++;
        uint32_t a = i;
        while (a < j && rs[a].len <= 16) a++;
        if (a < j) {
            uint32_t entry;
            rc = build16(&p, (uint16_t)root[k], rs + a, j - a, &entry);
            if (!rc) root[k] = entry;
        }
        i = j;
    }
    free(rs);
    free(best);
    *high_water = p.hw;
    return rc;
}

void npk_words_to_be(uint32_t *w, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = w[i];
        uint8_t *b = (uint8_t *)&w[i];
        b[0] = (uint8_t)(v >> 24);
        b[1] = (uint8_t)(v >> 16);
        b[2] = (uint8_t)(v >> 8);
        b[3] = (uint8_t)v;
    }
}

int npk_in_sorted(const uint32_t *a, uint32_t n, uint32_t v)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo < n && a[lo] == v;
}

uint32_t npk_routes_select(uint32_t n, const uint32_t *prefix, const uint8_t *length, const uint32_t *next_hop,
                           const uint32_t *port, const uint32_t *good, uint32_t ngood, int64_t via,
                           uint32_t *out_prefix, uint8_t *out_length, uint32_t *out_hop, uint32_t *out_port)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((via >= 0 && port[i] != (uint64_t)via) || !npk_in_sorted(good, ngood, next_hop[i])) continue;
        out_prefix[k] = prefix[i];
        out_length[k] = length[i];
        out_hop[k] = next_hop[i];
        out_port[k] = port[i];
        k++;
    }
    return k;
}
