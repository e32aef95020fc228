/* test_i3d.c -- native unit tests of the I3 daemon (xscale/i3d) under ASan/UBSan, driven
 * by tests/xscale/test_i3d.py: the trigger store (I3's longest match, several triggers),
 * the Chord ring and finger table, the order of its TCAM and finger writes, its
 * configuration and commands, and what it does with each exception record.  Prints one
 * line per check that fails and exits 1 if any did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fast.h"
#include "i3d.h"
#include "parse.h"
#include "store.h"

static int failures, checks;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                     \
        }                                                                              \
    } while (0)

/* ---- a fake chip: memories, rings, the free list, a clock -------------------------------- */

#define CH_BYTES (8u << 20)
typedef struct fake {
    npkd_mem mem;
    uint32_t ring[16][64];
    uint32_t rhead[16], rn[16];
    uint32_t freeq[64], nfree;
    uint64_t now;
    uint32_t wlog[4096][2];      /* SRAM writes the fast path sees, in order */
    uint32_t nw;
} fake;

static int f_get(void *ctx, int r, uint32_t *w)
{
    fake *f = ctx;
    if (!f->rn[r]) return 0;
    *w = f->ring[r][f->rhead[r]];
    f->rhead[r] = (f->rhead[r] + 1) % 64;
    f->rn[r]--;
    return 1;
}

static int f_put(void *ctx, int r, uint32_t w)
{
    fake *f = ctx;
    if (f->rn[r] == 64) return 0;
    f->ring[r][(f->rhead[r] + f->rn[r]) % 64] = w;
    f->rn[r]++;
    return 1;
}

static uint32_t f_free(void *ctx, int r)
{
    return 64 - ((fake *)ctx)->rn[r];
}

static uint32_t f_qget(void *ctx, uint32_t q)
{
    fake *f = ctx;
    (void)q;
    return f->nfree ? f->freeq[--f->nfree] : 0;
}

static void f_qput(void *ctx, uint32_t q, uint32_t e)
{
    fake *f = ctx;
    (void)q;
    if (f->nfree < 64) f->freeq[f->nfree++] = e;
}

static uint64_t f_now(void *ctx)
{
    return ((fake *)ctx)->now;
}

static void f_log(void *ctx, uint32_t a, uint32_t v)
{
    fake *f = ctx;
    if (f->nw < 4096) {
        f->wlog[f->nw][0] = a;
        f->wlog[f->nw][1] = v;
        f->nw++;
    }
}

static fake *fake_new(void)
{
    fake *f = calloc(1, sizeof *f);
    f->mem.sram_ch_bytes = CH_BYTES;
    for (int c = 0; c < 4; c++) f->mem.sram[c] = calloc(CH_BYTES / 4, 4);
    f->mem.dram_bytes = 64u << 11;
    f->mem.dram = calloc(f->mem.dram_bytes, 1);
    return f;
}

static void fake_free(fake *f)
{
    for (int c = 0; c < 4; c++) free((void *)(uintptr_t)f->mem.sram[c]);
    free(f->mem.dram);
    free(f);
}

/* ---- a daemon configured as the SPP example's (docs/spp.md §3) ----------------------------- */

static const char *CONF[] = {
    "sys 0x40010000 5 64 0 11 0x40001000",
    "rings 11 12 13",
    "tcam 0x80600000 64 8 56",
    "mitable 0xC0010000 8",
    "stats 0x80500000",
    "port 2 02:4e:50:00:00:02",
    "port 3 02:4e:50:00:00:03",
    "arp 10.0.2.2 02:00:0a:00:02:02",
    "arp 10.0.3.2 02:00:0a:00:03:02",
    "arp 10.0.3.3 02:00:0a:00:03:03",
    "slice 0 1 v4a ipv4 400000",
    "mi 0 1 a0 0 10.0.0.1:33001",
    "mi 1 1 a1 1 10.0.1.1:33001",
    "slice 1 2 i3a i3 300000",
    "mi 2 2 b0 2 10.0.2.1:34001",
    "mi 3 2 b1 3 10.0.3.1:34001",
    "ring i3a 0x4000000000000000 0x2000000000000000 0xC0011000",
    "finger i3a 62 b1 10.0.3.2:34001",
    "finger 2 63 b1 10.0.3.3:34001 node 0xC000000000000000",
    "filter v4a 0 dst 172.16.0.0/16 out a1 next_hop 10.0.1.2:33001",
    "filter i3a 1 trigger 0x3000000000000001 out b1 next_hop 10.0.3.2:40001",
    "filter i3a 2 trigger 0x3100000000000000/8 out b0 next_hop 10.0.2.2:40002",
    NULL,
};

static i3d *daemon_new(fake *f)
{
    i3d *d = calloc(1, sizeof *d);
    i3d_hw hw = {f, f_get, f_put, f_free, f_qget, f_qput, f_now};
    i3d_init(d, &f->mem, &hw);
    char line[200], err[300];
    for (int i = 0; CONF[i]; i++) {
        snprintf(line, sizeof line, "%s", CONF[i]);
        int rc = i3d_conf_line(d, line, err, sizeof err);
        if (rc) printf("config line %d: %s\n", i, err);
        CHECK(rc == 0);
    }
    CHECK(i3d_ready(d, err, sizeof err) == 0);
    d->fp.on_write = f_log;
    d->fp.on_write_ctx = f;
    return d;
}

static void daemon_free(i3d *d)
{
    i3d_free(d);
    free(d);
}

/* a command's answer, all lines */
static char answer[8192];
static void collect(void *ctx, const char *text)
{
    (void)ctx;
    strncat(answer, text, sizeof answer - strlen(answer) - 1);
}

static const char *cmd(i3d *d, const char *c)
{
    char line[512];
    snprintf(line, sizeof line, "%s", c);
    answer[0] = 0;
    i3d_command(d, line, collect, NULL);
    return answer;
}

static int ends_ok(const char *a)
{
    size_t n = strlen(a);
    return n >= 3 && !strcmp(a + n - 3, "ok\n");
}

/* ---- store ---------------------------------------------------------------------------------- */

static void test_store(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    i3_store *s = &d->st;
    uint32_t h[8];
    /* the /64 trigger alone; an id under the /8 only */
    CHECK(trig_match(s, 2, 0x3000000000000001ull, h, 8) == 1);
    CHECK(trig_match(s, 2, 0x31abcdef00000000ull, h, 8) == 1);
    CHECK(trig_match(s, 2, 0x3200000000000000ull, h, 8) == 0);
    CHECK(trig_match(s, 1, 0x3000000000000001ull, h, 8) == 0);      /* another slice's */
    /* I3: the longest matching length wins, every trigger of it gets a copy */
    i3_filter t;
    char why[300];
    memset(&t, 0, sizeof t);
    t.slice = 2, t.code = CODE_I3, t.action = FA_FORWARD, t.fast = 1, t.in = -1, t.len = 64, t.id = 0x31000000000000aaull;
    t.to.out = 2, t.to.ip = 0x0A000202, t.to.udp = 1;
    uint32_t a = flt_add(s, &t, why, sizeof why);
    t.to.udp = 2;
    uint32_t b = flt_add(s, &t, why, sizeof why);
    CHECK(a && b && a != b);
    CHECK(flt_add(s, &t, why, sizeof why) == 0 && strstr(why, "same filter"));
    CHECK(trig_match(s, 2, 0x31000000000000aaull, h, 8) == 2 && ((h[0] == a && h[1] == b) || (h[0] == b && h[1] == a)));
    CHECK(trig_match(s, 2, 0x31000000000000abull, h, 8) == 1);       /* the /8 only */
    /* the TCAM's count: fast filters of any length (a, b are fast; the /8 too) */
    CHECK(trig_match_any(s, 2, 0x31000000000000aaull) == 3);
    flt_get(s, b)->fast = 0;
    CHECK(trig_match_any(s, 2, 0x31000000000000aaull) == 2);
    /* errors */
    t.len = 8;
    CHECK(flt_add(s, &t, why, sizeof why) == 0 && strstr(why, "bits past"));
    t.len = 64, t.slice = 1;
    CHECK(flt_add(s, &t, why, sizeof why) == 0 && strstr(why, "runs ipv4"));
    t.slice = 2, t.to.out = 0;                                        /* a0 is v4a's */
    CHECK(flt_add(s, &t, why, sizeof why) == 0 && strstr(why, "not slice 2's"));
    CHECK(slice_del(s, 2, why, sizeof why) == -1 && strstr(why, "filter(s)"));
    i3_slice sl;
    memset(&sl, 0, sizeof sl);
    sl.id = 2, sl.code = CODE_I3, sl.index = 9, sl.ring.self = 1;
    strcpy(sl.name, "x");
    CHECK(slice_add(s, &sl, why, sizeof why) == -1 && strstr(why, "exists"));
    sl.id = 7, sl.ring.self = sl.ring.pred = 5;
    CHECK(slice_add(s, &sl, why, sizeof why) == -1 && strstr(why, "predecessor"));
    daemon_free(d);
    fake_free(f);
}

/* ---- the ring --------------------------------------------------------------------------------- */

static void test_ring(void)
{
    i3_ring r;
    memset(&r, 0, sizeof r);
    r.self = 0x4000000000000000ull, r.pred = 0x2000000000000000ull;
    CHECK(ring_mine(&r, 0x3000000000000000ull));
    CHECK(ring_mine(&r, r.self));
    CHECK(!ring_mine(&r, r.pred));
    CHECK(!ring_mine(&r, 0x4000000000000001ull));
    CHECK(finger_k(&r, r.self + 1) == 0);
    CHECK(finger_k(&r, r.self + 0x10) == 4);
    CHECK(finger_k(&r, r.self + (3ull << 61)) == 62);
    CHECK(finger_k(&r, 0x1000000000000000ull) == 63);                /* wraps: d = 0xD000... */
    /* the GPE's route: finger k, else the highest valid below */
    CHECK(finger_route(&r, r.self + 0x10) == -1);
    r.finger[2].valid = 1;
    CHECK(finger_route(&r, r.self + 0x10) == 2);
    r.finger[4].valid = 1;
    CHECK(finger_route(&r, r.self + 0x10) == 4);
    CHECK(finger_route(&r, r.self + 2) == -1);                        /* k = 1: nothing at or below */
    /* fingers from the nodes: successor(self + 2^k) */
    char why[200];
    i3_hop hop = {0x0A000302, 1, 3};
    CHECK(node_add(&r, r.self, &hop, why, sizeof why) == -1);
    CHECK(node_add(&r, r.self + 0x100, &hop, why, sizeof why) == 0);
    hop.udp = 2;
    CHECK(node_add(&r, 0x8000000000000000ull, &hop, why, sizeof why) == 0);
    i3_finger g[I3_FINGERS];
    fingers_compute(&r, g);
    CHECK(g[0].valid && g[0].node == r.self + 0x100);                /* self+1 .. self+0x100 */
    CHECK(g[8].valid && g[8].node == r.self + 0x100);
    CHECK(g[9].valid && g[9].node == 0x8000000000000000ull && g[9].hop.udp == 2);
    CHECK(g[61].valid && g[61].node == 0x8000000000000000ull);        /* self + 2^61 = 0x6000.. */
    CHECK(!g[63].valid);                                              /* self + 2^63 = 0xC000..: past every node, round to self */
    CHECK(g[62].valid == 0 || g[62].node == 0x8000000000000000ull);
    CHECK(node_del(&r, r.self + 0x100) == 1 && node_del(&r, 1) == 0);
    fingers_compute(&r, g);
    CHECK(g[0].valid && g[0].node == 0x8000000000000000ull);
}

/* ---- the fast path's writes ------------------------------------------------------------------- */

static int log_index(const fake *f, uint32_t from, uint32_t addr)
{
    for (uint32_t i = from; i < f->nw; i++)
        if (f->wlog[i][0] == addr) return (int)i;
    return -1;
}

static void test_tcam_order(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    /* the slice file's rows are adopted where the link put them */
    CHECK(d->fp.used[0] && d->fp.used[1] && d->fp.used[2] && !d->fp.used[8]);
    CHECK(fast_filters_used(&d->fp) == 3);
    const char *a = cmd(d, "filter add i3a trigger 0x3abc000000000000/16 out b1 next_hop 10.0.3.3:40009");
    CHECK(ends_ok(a) && strstr(a, "entry 8 "));                       /* the daemon's first: 8 */
    uint32_t e = 0x80600000u + 8 * 128;
    /* invalid first, the result, key and mask, valid last */
    CHECK(f->nw == 1 + 2 + 9 + 9 + 1);
    CHECK(f->wlog[0][0] == e + 80 && f->wlog[0][1] == 0);
    CHECK(log_index(f, 0, e + 72) > 0 && log_index(f, 0, e + 72) < log_index(f, 0, e + 0));
    CHECK(log_index(f, 0, e + 0) < log_index(f, 0, e + 36));
    CHECK(f->wlog[f->nw - 1][0] == e + 80 && f->wlog[f->nw - 1][1] == TC_VALID);
    /* the words of spp.md §5.2 / §5.3 */
    CHECK(npkd_sram_rd(&f->mem, e + 0) == (2u << 16 | 2u << 8));
    CHECK(npkd_sram_rd(&f->mem, e + 36) == 0xFFFFFF00u);
    CHECK(npkd_sram_rd(&f->mem, e + 4) == 0x3abc0000u && npkd_sram_rd(&f->mem, e + 40) == 0xFFFF0000u);
    CHECK(npkd_sram_rd(&f->mem, e + 8) == 0 && npkd_sram_rd(&f->mem, e + 44) == 0);
    CHECK(npkd_sram_rd(&f->mem, e + 72) == (1u << 24 | 3u << 16 | 40009u));
    CHECK(npkd_sram_rd(&f->mem, e + 76) == 0x0A000303u);
    /* slow: the control word alone, the trigger kept; fast again: the same entry */
    f->nw = 0;
    a = cmd(d, "filter slow 4");
    CHECK(ends_ok(a) && strstr(a, "entry - ") && strstr(a, " slow"));
    CHECK(f->nw == 1 && f->wlog[0][0] == e + 80 && f->wlog[0][1] == 0);
    a = cmd(d, "filter fast 4");
    CHECK(ends_ok(a) && strstr(a, "entry 8 "));
    f->nw = 0;
    CHECK(ends_ok(cmd(d, "filter del 4")));
    CHECK(f->nw == 1 && f->wlog[0][1] == 0 && !d->fp.used[8]);
    CHECK(strstr(cmd(d, "filter del 4"), "error: no such filter"));
    /* an ipv4 filter: §5.1's key */
    a = cmd(d, "filter add v4a dst 172.17.0.0/16 src 192.168.0.0/16 proto udp dport 53 in a0 out a1 next_hop 10.0.1.3:40000");
    CHECK(ends_ok(a));
    CHECK(npkd_sram_rd(&f->mem, e + 0) == (1u << 16 | 1u << 8) && npkd_sram_rd(&f->mem, e + 4) == 0xAC110000u);
    CHECK(npkd_sram_rd(&f->mem, e + 12) == (53u << 16) && npkd_sram_rd(&f->mem, e + 48) == 0xFFFF0000u);
    CHECK(npkd_sram_rd(&f->mem, e + 16) == (17u << 24 | 0u << 16) && npkd_sram_rd(&f->mem, e + 52) == 0xFFFF0000u);
    /* the TCAM full: the filter is the GPE's */
    char c[200];
    for (int i = 0; i < 60; i++) {
        snprintf(c, sizeof c, "filter add i3a trigger 0x%016llx out b1 next_hop 10.0.3.2:1", 0x3000000000001000ull + (unsigned)i);
        cmd(d, c);
    }
    CHECK(fast_filters_used(&d->fp) == 3 + 56 && d->stats[I3S_tcam_full] > 0);   /* 3..7: not the daemon's */
    CHECK(strstr(answer, "entry - ") && strstr(answer, " slow"));
    /* bad commands: an error line, nothing written */
    f->nw = 0;
    CHECK(strstr(cmd(d, "filter add i3a trigger 0x12/70 out b1 next_hop 10.0.3.2:1"), "error: trigger"));
    CHECK(strstr(cmd(d, "filter add i3a trigger 0x12 out a0 next_hop 10.0.3.2:1"), "error: out a0"));
    CHECK(strstr(cmd(d, "filter add i3a dst 1.2.3.0/24"), "error: 'dst' is not a field of an i3 filter"));
    CHECK(strstr(cmd(d, "filter add nosuch trigger 0x1"), "error: no such slice"));
    CHECK(strstr(cmd(d, "filter add i3a trigger 0x1"), "error: a forwarding filter needs"));
    CHECK(strstr(cmd(d, "bogus"), "error: unknown command"));
    CHECK(f->nw == 0);
    daemon_free(d);
    fake_free(f);
}

static void test_slice_filters(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    /* a whole slice's filters out of the TCAM and back */
    CHECK(ends_ok(cmd(d, "filter slow slice i3a")) && strstr(answer, "filter 3 ") && strstr(answer, " slow"));
    CHECK(flt_get(&d->st, 2)->entry < 0 && flt_get(&d->st, 3)->entry < 0 && flt_get(&d->st, 1)->entry == 0);
    CHECK(ends_ok(cmd(d, "filter fast slice 2")) && flt_get(&d->st, 2)->entry >= 0 && flt_get(&d->st, 3)->entry >= 0);
    CHECK(strstr(cmd(d, "filter slow slice nosuch"), "error: no such slice"));
    daemon_free(d);
    fake_free(f);
}

static void test_stale_filters(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    CHECK(ends_ok(cmd(d, "filter add i3a trigger 0x3abc000000000000 out b1 next_hop 10.0.3.3:1")));
    i3d *again = daemon_new(f);                        /* a new daemon on the same SRAM */
    CHECK(fast_clear_own(&again->fp) == 1 && (npkd_sram_rd(&f->mem, 0x80600000u + 8 * 128 + 80) & TC_VALID) == 0);
    CHECK((npkd_sram_rd(&f->mem, 0x80600000u + 1 * 128 + 80) & TC_VALID) == 0 || again->fp.used[1]);
    CHECK(fast_clear_own(&again->fp) == 0);
    daemon_free(again);
    daemon_free(d);
    fake_free(f);
}

static void test_finger_order(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    uint32_t blk = 0xC0011000u, k5 = blk + 0x20 + 16 * 5;
    CHECK(ends_ok(cmd(d, "finger set i3a 5 b0 10.0.2.2:34001 node 0x4000000000000030")));
    CHECK(f->wlog[0][0] == k5 && f->wlog[0][1] == 0);                /* invalid first */
    CHECK(log_index(f, 0, k5 + 4) == 1);
    int last = log_index(f, 1, k5);
    CHECK(last > log_index(f, 0, k5 + 12) && f->wlog[last][1] == (0x80000000u | 2u << 16 | 34001u));
    CHECK(npkd_sram_rd(&f->mem, k5 + 4) == 0x0A000202u && npkd_sram_rd(&f->mem, k5 + 12) == 0x30);
    CHECK(npkd_sram_rd(&f->mem, blk) == (2u << 16 | 3u));             /* 62, 63 and 5 */
    CHECK(strstr(cmd(d, "finger show i3a"), "finger 5 out b0 next_hop 10.0.2.2:34001"));
    f->nw = 0;
    CHECK(ends_ok(cmd(d, "finger del i3a 5")));
    CHECK(f->wlog[0][0] == k5 && f->wlog[0][1] == 0 && npkd_sram_rd(&f->mem, blk) == (2u << 16 | 2u));
    /* nodes: the fingers follow */
    CHECK(ends_ok(cmd(d, "node add i3a 0x4000000000000100 b1 10.0.3.3:34001")));
    CHECK(d->st.slice[1].ring.finger[0].valid && d->st.slice[1].ring.finger[8].valid && !d->st.slice[1].ring.finger[9].valid);
    CHECK(strstr(cmd(d, "finger set v4a 1 a0 10.0.0.2:1"), "error: no such i3 slice"));
    daemon_free(d);
    fake_free(f);
}

/* ---- configuration errors --------------------------------------------------------------------- */

static void test_conf_errors(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    char err[300];
    struct {
        const char *line, *want;
    } bad[] = {
        {"bogus 1", "unknown directive"},
        {"rings 11", "rings EXCEPTIONS"},
        {"rings 11 99", "0..15"},
        {"slice 2 9 v4a ipv4 1", "named v4a already"},
        {"slice 2 9 x ipv5 1", "code option"},
        {"mi 9 77 z 0 1.2.3.4:5", "no slice 77"},
        {"mi 9 1 z 0 10.0.0.1:33001", "is slice 1's already"},
        {"ring v4a 1 2 3", "not an i3 slice"},
        {"ring i3a 5 5 0", "differ"},
        {"finger i3a 64 b1 1.2.3.4:5", "finger SLICE K"},
        {"filter i3a 9 trigger 0xzz out b1 next_hop 1.2.3.4:5", "trigger 0xzz"},
        {"option nosuch 1", "no option nosuch"},
        {"arp 1.2.3 02:00:00:00:00:01", "arp A.B.C.D MAC"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[200];
        snprintf(line, sizeof line, "%s", bad[i].line);
        err[0] = 0;
        int rc = i3d_conf_line(d, line, err, sizeof err);
        if (!rc || !strstr(err, bad[i].want)) printf("config '%s': %d '%s'\n", bad[i].line, rc, err);
        CHECK(rc == -1 && strstr(err, bad[i].want));
    }
    /* timed commands: in ascending order, made when due */
    char tl[200];
    snprintf(tl, sizeof tl, "at 5000 filter slow 2");
    CHECK(i3d_conf_line(d, tl, err, sizeof err) == 0);
    snprintf(tl, sizeof tl, "at 10 filter slow 3");
    CHECK(i3d_conf_line(d, tl, err, sizeof err) == -1 && strstr(err, "ascending"));
    d->now = 4999;
    CHECK(i3d_timed_due(d) == 0 && i3d_timed_next(d) == 5000);
    d->now = 5000;
    CHECK(i3d_timed_due(d) == 1 && flt_get(&d->st, 2)->entry == -1 && i3d_timed_next(d) == UINT64_MAX);
    /* two filters in one entry */
    char line[200];
    snprintf(line, sizeof line, "filter i3a 1 trigger 0x3000000000000009 out b1 next_hop 10.0.3.2:1");
    CHECK(i3d_conf_line(d, line, err, sizeof err) == 0);
    CHECK(i3d_ready(d, err, sizeof err) == -1 && strstr(err, "not free"));
    daemon_free(d);
    fake_free(f);
}

/* ---- slices over the socket ------------------------------------------------------------------- */

static void test_slices(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    const char *a = cmd(d, "slice show");
    CHECK(ends_ok(a) && strstr(a, "slice 1 name v4a index 0 code ipv4") && strstr(a, "slice 2 name i3a index 1 code i3"));
    a = cmd(d, "slice add 7 i3b i3 share 100000 mi c0 4 10.0.4.1:35001 node 0x10 pred 0x1");
    CHECK(ends_ok(a) && strstr(a, "slice 7 name i3b index 2 code i3") && strstr(a, "mi c0:4:4:10.0.4.1:35001"));
    /* its meta-interface row (spp.md §4.1): index 4, valid */
    uint32_t row = 0xC0010000u + 16 * 4;
    CHECK(npkd_sram_rd(&f->mem, row) == 0x0A000401u && npkd_sram_rd(&f->mem, row + 4) == (35001u << 16 | 4u << 8 | 2u));
    CHECK(npkd_sram_rd(&f->mem, row + 8) == (7u << 16 | 2u) && npkd_sram_rd(&f->mem, row + 12) == 0x80000000u);
    CHECK(strstr(cmd(d, "slice add 8 i3c i3 mi c1 4 10.0.4.1:35001 node 1 pred 2"), "error: a meta-interface is taken"));
    CHECK(strstr(cmd(d, "slice add 9 i3c i3"), "error: an i3 slice needs node"));
    CHECK(ends_ok(cmd(d, "filter add i3b trigger 0x8 out c0 next_hop 10.0.4.2:1")));
    CHECK(strstr(cmd(d, "slice del i3b"), "error: slice 7 still has 1 filter"));
    CHECK(ends_ok(cmd(d, "filter del 4")));
    CHECK(ends_ok(cmd(d, "slice del i3b")));
    CHECK(npkd_sram_rd(&f->mem, row + 12) == 0 && !strstr(cmd(d, "slice show"), "i3b"));
    CHECK(strstr(cmd(d, "slice del i3b"), "error: no such slice"));
    daemon_free(d);
    fake_free(f);
}

/* ---- exceptions ------------------------------------------------------------------------------- */

/* an I3 packet of slice i3a in buffer h: from 10.0.2.9:5000 to b0 (10.0.2.1:34001) on port 2 */
static uint32_t i3_frame(fake *f, uint32_t h, uint64_t id, uint8_t hop, uint8_t flags, uint64_t stack)
{
    uint8_t *p = f->mem.dram + (h << 11);
    uint32_t len = 14 + 20 + 8 + 27 + 40;
    memset(p, 0, len);
    p[12] = 8;
    p[14] = 0x45;
    p[23] = 17;
    p[34 + 2] = 34001 >> 8;
    p[34 + 3] = 34001 & 255;
    uint8_t *i = p + 42;
    i[0] = (uint8_t)(0x10 | flags);
    i[1] = hop;
    i[3] = 40;
    for (int k = 0; k < 8; k++) i[4 + k] = (uint8_t)(id >> (56 - 8 * k));
    for (int k = 0; k < 8; k++) i[18 + k] = (uint8_t)(stack >> (56 - 8 * k));
    for (uint32_t k = 0; k < 40; k++) i[27 + k] = (uint8_t)k;
    npkd_sram_wr(&f->mem, 0x40010000u + (h << 5) + 8, len << 16);
    npkd_sram_wr(&f->mem, 0x40010000u + (h << 5) + 20, 100);          /* rx timestamp: tick 100 */
    return len;
}

static void take(fake *f, int ring, uint32_t *pw, uint32_t *port)
{
    *pw = *port = 0;
    f_get(f, ring, pw);
    f_get(f, ring, port);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_exceptions(void)
{
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    uint32_t pw, port, rec_ntrig = 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_NO_TRIGGER;
    for (uint32_t h = 10; h < 20; h++) f_qput(f, 0, 0x40010000u + (h << 5));   /* buffers for copies */
    f->now = 1000000;   /* 1 ms: tick 87500 at 1400 MHz */
    /* a trigger the daemon keeps but has no TCAM filter: the GPE delivers it */
    CHECK(ends_ok(cmd(d, "filter add i3a trigger 0x3a00000000000000 out b1 next_hop 10.0.3.3:777 slow")));
    uint32_t len = i3_frame(f, 1, 0x3a00000000000000ull, 9, 0, 0);
    i3d_exception(d, 0x80000000u | 2u << 28 | 1, rec_ntrig);
    take(f, 12, &pw, &port);
    CHECK(pw == (0x80000000u | 2u << 28 | 1) && port == 3);
    uint8_t *o = f->mem.dram + (1u << 11);
    CHECK(o[0] == 0x02 && o[5] == 0x03 && o[11] == 0x03);               /* to 10.0.3.3's MAC from port 3's */
    CHECK(be32(o + 26) == 0x0A000301u && be32(o + 30) == 0x0A000303u);  /* b1 -> next hop */
    CHECK(o[34] == 34001 >> 8 && o[35] == (34001 & 255) && o[36] == 777 >> 8 && o[37] == (777 & 255));
    CHECK(o[22] == 64 && o[23] == 17 && (uint32_t)(o[16] << 8 | o[17]) == len - 14);
    CHECK(o[42 + 1] == 8 && o[42 + 27 + 39] == 39);                     /* hop limit one less, payload whole */
    CHECK(npkd_sram_rd(&f->mem, 0x40010000u + (1u << 5) + 8) == len << 16);
    CHECK(d->stats[I3S_delivered] == 1 && d->lat_n == 1 && d->lat_max == (87500u - 100u) * 16000u / 1400u);
    /* two triggers of the longest length: a copy each (the first in the packet's buffer) */
    CHECK(ends_ok(cmd(d, "filter add i3a trigger 0x3a00000000000000 out b0 next_hop 10.0.2.2:778")));
    i3_frame(f, 2, 0x3a00000000000000ull, 9, 0, 0);
    uint32_t nfree = f->nfree;
    i3d_exception(d, 0x80000000u | 2, 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_MULTI);
    take(f, 12, &pw, &port);
    CHECK((pw & 0xFFFF) == 2 && (port == 3 || port == 2));
    uint32_t pw2, port2;
    take(f, 12, &pw2, &port2);
    CHECK((pw2 & PW_CONTROL) && (pw2 & 0xFFFF) != 2 && port2 != port && f->nfree == nfree - 1);
    uint8_t *c = f->mem.dram + ((pw2 & 0xFFFF) << 11);
    CHECK(c[42 + 1] == 8 && c[42 + 27 + 5] == 5 && be32(c + 30) == (port2 == 2 ? 0x0A000202u : 0x0A000303u));
    CHECK(d->stats[I3S_copies] == 1 && d->stats[I3S_exc_multi_trigger] == 1);
    /* no trigger at all: dropped, the buffer back on the free list */
    i3_frame(f, 3, 0x3b00000000000000ull, 9, 0, 0);
    nfree = f->nfree;
    i3d_exception(d, 0x80000003u, rec_ntrig);
    CHECK(f->rn[12] == 0 && f->nfree == nfree + 1 && d->stats[I3S_dropped_no_trigger] == 1);
    /* hop limit 1: dropped */
    i3_frame(f, 3, 0x3a00000000000000ull, 1, 0, 0);
    i3d_exception(d, 0x80000003u, rec_ntrig);
    CHECK(f->rn[12] == 0 && d->stats[I3S_dropped_hop_limit] == 1);
    /* out of range, finger k invalid: the highest valid below (62 for k = 63) */
    i3_frame(f, 4, 0x2000000000000000ull, 9, 0, 0);    /* d = 0xE000..: k = 63, but 63 is valid */
    i3d_exception(d, 0x80000004u, 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_NO_FINGER);
    take(f, 12, &pw, &port);
    CHECK((pw & 0xFFFF) == 4 && port == 3 && be32(f->mem.dram + (4u << 11) + 30) == 0x0A000303u);
    CHECK(ends_ok(cmd(d, "finger del i3a 63")));
    i3_frame(f, 4, 0x2000000000000000ull, 9, 0, 0);
    i3d_exception(d, 0x80000004u, 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_NO_FINGER);
    take(f, 12, &pw, &port);
    CHECK((pw & 0xFFFF) == 4 && be32(f->mem.dram + (4u << 11) + 30) == 0x0A000302u);   /* finger 62 */
    i3_frame(f, 4, 0x4000000000000002ull, 9, 0, 0);    /* k = 1: none at or below */
    i3d_exception(d, 0x80000004u, 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_NO_FINGER);
    CHECK(f->rn[12] == 0 && d->stats[I3S_dropped_no_finger] == 1 && d->stats[I3S_finger_forwarded] == 2);
    /* complex: no trigger for the first id, the stack popped: the second is a trigger's */
    i3_frame(f, 5, 0x3c00000000000000ull, 9, 1, 0x3000000000000001ull);
    i3d_exception(d, 0x80000005u, 1u << 24 | 2u << 16 | 1u << 8 | EXC_I3_COMPLEX);
    take(f, 12, &pw, &port);
    uint8_t *x = f->mem.dram + (5u << 11);
    CHECK((pw & 0xFFFF) == 5 && port == 3 && be32(x + 30) == 0x0A000302u);
    CHECK(x[42] == 0x10 && be32(x + 46) == 0x30000000u && be32(x + 50) == 1 && be32(x + 60) == 0);
    /* an ipv4 slice's record: to the relay ring, untouched */
    i3d_exception(d, 0x80000006u, 1u << 24 | 0u << 16 | 0u << 8 | 20);
    take(f, 13, &pw, &port);
    CHECK(pw == 0x80000006u && port == (1u << 24 | 20) && d->stats[I3S_relayed] == 1);
    /* a record from the ring, then the statistics block */
    i3_frame(f, 7, 0x3000000000000001ull, 9, 0, 0);
    f_put(f, 11, 0x80000007u);
    f_put(f, 11, 1u << 24 | 1u << 8 | EXC_I3_MULTI);
    CHECK(i3d_poll(d, 16) == 1 && f->rn[12] == 2);
    i3d_publish(d, 1);
    CHECK(npkd_sram_rd(&f->mem, 0x80500000u) == I3D_STATS_MAGIC);
    CHECK(npkd_sram_rd(&f->mem, 0x80500000u + I3D_STATS_HDR + 4 * I3S_exceptions) == d->stats[I3S_exceptions]);
    CHECK(npkd_sram_rd(&f->mem, 0x80500000u + I3D_LAT_OFF) == d->lat_n && d->lat_n >= 6);
    CHECK(strstr(cmd(d, "stats"), "delivered 5\n"));
    /* the exception log: a record each, the last (the poll's) forwarded, one frame */
    uint32_t lb = 0x80500000u + I3D_LOG_OFF, nlog = npkd_sram_rd(&f->mem, lb);
    CHECK(nlog == d->stats[I3S_exceptions] && npkd_sram_rd(&f->mem, lb + 4) == I3D_LOG_CAP);
    uint32_t last = lb + 16 + 16 * (nlog - 1);
    CHECK(npkd_sram_rd(&f->mem, last + 4) == ((14u + 20 + 8 + 27 + 40) << 16 | EXC_I3_MULTI));
    CHECK(npkd_sram_rd(&f->mem, last + 8) == ((uint32_t)I3A_FORWARDED << 24 | 1u << 16 | 7u));
    CHECK(npkd_sram_rd(&f->mem, lb + 16 + 16 * 2 + 8) >> 24 == I3A_DROPPED);     /* the third: no trigger */
    CHECK(npkd_sram_rd(&f->mem, lb + 16 + 16 * 8 + 8) >> 24 == I3A_RELAYED);
    /* the filter mirror */
    i3d_mirror(d);
    uint32_t mb = 0x80500000u + I3D_MIRROR_OFF;
    CHECK(npkd_sram_rd(&f->mem, mb) == d->st.nflt && npkd_sram_rd(&f->mem, mb + 16 + 32 + 8) == 0x30000000u);
    CHECK(npkd_sram_rd(&f->mem, mb + 16 + 32 * 3 + 16) == (64u << 24 | 0u << 16 | 0xFFu << 8 | 3u));   /* the slow one */
    daemon_free(d);
    fake_free(f);
}

/* random lines of the daemon's own words (and some others) into its commands and its
 * configuration: every one answered "ok" or "error: ...", nothing read out of bounds
 * (ASan), the TCAM's bookkeeping consistent afterwards */
static void test_fuzz(void)
{
    static const char *const words[] = {
        "slice", "filter", "finger", "node", "stats", "add", "del", "show", "fast", "slow", "set", "i3a", "v4a", "2",
        "1", "0", "7", "99999999999999999999", "-1", "trigger", "0x3a00000000000000", "0x3/8", "0x3/0", "0x3/65",
        "0xffffffffffffffff", "0x", "out", "in", "b0", "b1", "a0", "next_hop", "10.0.2.2:1", "10.0.3.2:65536",
        "1.2.3", "dst", "src", "172.16.0.0/16", "0.0.0.0/33", "*", "proto", "udp", "300", "dport", "sport", "action",
        "gpe", "drop", "forward", "mi", "x0", "4", "10.0.4.1:35001", "node", "pred", "0x10", "share", "index", "254",
        "63", "64", "i3", "ipv4", "ring", "at", "option", "batch", "mitable", "port", "arp", "02:00:00:00:00:01", "",
    };
    fake *f = fake_new();
    i3d *d = daemon_new(f);
    uint32_t x = 12345;
    char line[512], err[300];
    int bad = 0;
    for (int n = 0; n < 20000; n++) {
        int k = 1 + (int)((x = x * 1103515245u + 12345u) >> 16) % 9;
        line[0] = 0;
        for (int i = 0; i < k; i++) {
            x = x * 1103515245u + 12345u;
            const char *w = words[(x >> 16) % (sizeof words / sizeof words[0])];
            if (strlen(line) + strlen(w) + 2 < sizeof line) {
                strcat(line, w);
                strcat(line, " ");
            }
        }
        const char *a = cmd(d, line);
        size_t len = strlen(a);
        if (!(len >= 3 && (!strcmp(a + len - 3, "ok\n") || strstr(a, "error: ")))) bad++;
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s", "");
        char conf[512];
        snprintf(conf, sizeof conf, "%s", line);
        i3d_conf_line(d, conf, err, sizeof err);   /* 0 or -1: either is fine, no crash */
    }
    CHECK(bad == 0);
    /* the entries the TCAM bookkeeping marks are exactly the filters' */
    uint32_t with_entry = 0;
    for (uint32_t i = 0; i < d->st.nflt; i++) with_entry += d->st.flt[i].entry >= 0;
    CHECK(with_entry == fast_filters_used(&d->fp));
    daemon_free(d);
    fake_free(f);
}

int main(void)
{
    test_store();
    test_ring();
    test_tcam_order();
    test_slice_filters();
    test_stale_filters();
    test_finger_order();
    test_conf_errors();
    test_slices();
    test_exceptions();
    test_fuzz();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
