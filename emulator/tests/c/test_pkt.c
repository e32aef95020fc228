/* test_pkt.c -- the packet library (emulator/pkt) under AddressSanitizer and UBSan:
 * route parsing (good, bad, duplicate), interval LPM against a brute-force match, the
 * trie build walked back, the oracle on valid and random frames, and generated frames
 * whose checksums verify.  Prints OK; any failure prints where and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npk_pkt.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

static uint32_t mask_of(int len) { return len ? (uint32_t)(0xFFFFFFFFull << (32 - len)) : 0; }

static void test_mt(void)
{
    /* MT19937 from init_genrand(5489): the reference's first outputs */
    npk_mt m;
    m.state[0] = 5489u;
    for (int i = 1; i < 624; i++) m.state[i] = 1812433253u * (m.state[i - 1] ^ (m.state[i - 1] >> 30)) + (uint32_t)i;
    m.index = 624;
    CHECK(npk_mt_u32(&m) == 3499211612u);
    CHECK(npk_mt_u32(&m) == 581869302u);
    for (int i = 0; i < 10000; i++) {
        uint32_t n = 1 + rnd() % 1000;
        CHECK(npk_mt_below(&m, n) < n);
        double r = npk_mt_random(&m);
        CHECK(r >= 0.0 && r < 1.0);
        CHECK(npk_mt_bits(&m, 7) < 128);
    }
}

static void test_parse(void)
{
    uint32_t p[8], h[8], port[8];
    uint8_t l[8];
    const char *good = "# comment\n1.2.0.0/16 10.0.0.2 1\n\n 9.0.0.0/8\t10.0.1.2 4 # trailing\r\n";
    CHECK(npk_routes_parse(good, strlen(good), 8, p, l, h, port) == 2);
    CHECK(p[0] == 0x01020000u && l[0] == 16 && h[0] == 0x0A000002u && port[0] == 1);
    CHECK(p[1] == 0x09000000u && l[1] == 8 && port[1] == 4);
    const char *bad[] = {"1.2.3.0/16 1.1.1.1 0", "1.2.0.0/33 1.1.1.1 0", "1.2.0.0/16 1.1.1 0",
                         "01.2.0.0/16 1.1.1.1 0", "1.2.0.0/16 1.1.1.1", "1.2.0.0/16 1.1.1.1 x",
                         "1.0.0.0/8 1.1.1.1 0\n1.0.0.0/8 2.2.2.2 1", "1.2.0.0/16 256.1.1.1 0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(npk_routes_parse(bad[i], strlen(bad[i]), 8, p, l, h, port) == -1);
    CHECK(npk_routes_parse(good, strlen(good), 1, p, l, h, port) == -1);  /* no room */
}

static int32_t brute(uint32_t n, const uint32_t *p, const uint8_t *l, uint32_t a)
{
    int32_t best = -1;
    for (uint32_t i = 0; i < n; i++)
        if ((a & mask_of(l[i])) == p[i] && (best < 0 || l[i] > l[best])) best = (int32_t)i;
    return best;
}

#define NR 3000

static void random_routes(uint32_t *p, uint8_t *l, uint16_t *nh, uint32_t n)
{
    static const uint8_t lens[] = {8, 12, 16, 18, 20, 22, 24, 24, 24, 26, 28, 32};
    for (uint32_t i = 0; i < n; i++) {
        int dup;
        do {
            l[i] = lens[rnd() % sizeof lens];
            p[i] = (rnd() << 16 ^ rnd()) & mask_of(l[i]) & 0x3FFFFFFFu;  /* a quarter of the space: nesting */
            dup = 0;
            for (uint32_t j = 0; j < i && !dup; j++) dup = p[j] == p[i] && l[j] == l[i];
        } while (dup);
        nh[i] = (uint16_t)(1 + rnd() % 200);
    }
}

static void test_index(void)
{
    static uint32_t p[NR], starts[2 * NR + 1];
    static uint8_t l[NR];
    static uint16_t nh[NR];
    static int32_t vals[2 * NR + 1];
    uint32_t dup[2];
    random_routes(p, l, nh, NR);
    int64_t count = npk_rt_build(NR, p, l, starts, vals, dup);
    CHECK(count > 0 && count <= 2 * NR + 1 && starts[0] == 0);
    for (int i = 0; i < 20000; i++) {
        uint32_t a = i < NR ? p[i] | (rnd() & ~mask_of(l[i])) : (rnd() << 16 ^ rnd()) & 0x7FFFFFFFu;
        int32_t want = brute(NR, p, l, a), got = npk_rt_lookup(starts, vals, (uint32_t)count, a);
        CHECK(want == got || (want >= 0 && got >= 0 && p[want] == p[got] && l[want] == l[got]));
    }
    p[5] = p[9];
    l[5] = l[9];
    CHECK(npk_rt_build(NR, p, l, starts, vals, dup) == -1 && dup[0] == 5 && dup[1] == 9);
    uint32_t hostbits = 0x01020304u;
    uint8_t len8 = 8;
    CHECK(npk_rt_build(1, &hostbits, &len8, starts, vals, dup) == -2);
}

/* the trie walked back (microcode/lookup/LAYOUT.md): next-hop index of an address */
static uint32_t walk(const uint32_t *root, const uint32_t *nodes, uint32_t a)
{
    uint32_t e = root[a >> 16];
    for (int level = 0; level < 2; level++) {
        if (!(e & 0x80000000u)) return e & 0xFFFF;
        uint32_t type = (e >> 28) & 7, off = e & 0xFFFFFF, b = level ? a & 0xFF : (a >> 8) & 0xFF;
        const uint32_t *w = nodes + 4 * off;
        if (type == 0) { e = w[b]; continue; }
        if (type == 1) return b & 1 ? w[b / 2] & 0xFFFF : w[b / 2] >> 16;
        uint32_t bounds[4] = {w[0] >> 24, (w[0] >> 16) & 0xFF, (w[0] >> 8) & 0xFF, w[0] & 0xFF};
        uint32_t vals[5] = {w[1] >> 16, w[1] & 0xFFFF, w[2] >> 16, w[2] & 0xFFFF, w[3] >> 16};
        int k = 0;
        while (k < 4 && b >= bounds[k]) k++;
        return vals[k];
    }
    return e & 0xFFFF;
}

static void test_lpm(void)
{
    static uint32_t p[NR], root[65536];
    static uint8_t l[NR];
    static uint16_t nh[NR];
    random_routes(p, l, nh, NR);
    uint64_t cap = 1u << 22, hw = 0;
    uint32_t *nodes = malloc(cap * sizeof *nodes);
    CHECK(nodes != NULL);
    if (!nodes) return;
    CHECK(npk_lpm_build(NR, p, l, nh, root, nodes, cap, &hw) == 0 && hw > 0);
    for (int i = 0; i < 20000; i++) {
        uint32_t a = i < NR ? p[i] | (rnd() & ~mask_of(l[i])) : (rnd() << 16 ^ rnd()) & 0x7FFFFFFFu;
        int32_t want = brute(NR, p, l, a);
        CHECK(walk(root, nodes, a) == (want < 0 ? 0u : nh[want]));
    }
    CHECK(npk_lpm_build(NR, p, l, nh, root, nodes, 16, &hw) == -1);  /* pool full */
    free(nodes);
}

static uint32_t csum(const uint8_t *d, size_t n, uint32_t acc)
{
    for (size_t i = 0; i + 1 < n; i += 2) acc += (uint32_t)d[i] << 8 | d[i + 1];
    if (n & 1) acc += (uint32_t)d[n - 1] << 8;
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return acc;
}

static void test_gen_and_oracle(void)
{
    /* router: two ports 10.0.0.1/24, 10.0.1.1/24; route 20.0.0.0/8 via 10.0.1.2 (ARP known) */
    npk_rport ports[2] = {{0x0A000001u, 0x0A000000u, 0xFFFFFF00u, 0x0A0000FFu, {2, 0, 0, 0, 0, 0}},
                          {0x0A000101u, 0x0A000100u, 0xFFFFFF00u, 0x0A0001FFu, {2, 0, 0, 0, 0, 1}}};
    uint32_t rp[3] = {0x0A000000u, 0x0A000100u, 0x14000000u}, starts[7], hop[3] = {0, 0, 0x0A000102u};
    uint8_t rl[3] = {24, 24, 8};
    uint16_t rport[3] = {0, 1, 1};
    int32_t vals[7];
    uint32_t dup[2];
    int64_t count = npk_rt_build(3, rp, rl, starts, vals, dup);
    CHECK(count > 0);
    uint32_t arp_ip[1] = {0x0A000102u};
    uint8_t arp_mac[6] = {2, 0, 0, 0, 0xF1, 2};
    npk_router r = {2, ports, {starts, vals, (uint32_t)count, hop, rport}, {arp_ip, arp_mac, 1}, 1};
    uint32_t not_unicast[6] = {0x0A000000u, 0x0A000001u, 0x0A0000FFu, 0x0A000100u, 0x0A000101u, 0x0A0001FFu};
    uint32_t pool_p[1] = {0x14000000u};
    uint8_t pool_l[1] = {8};
    npk_gen g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < 624; i++) g.rng.state[i] = rnd();
    g.rng.index = 624;
    memcpy(g.me_mac, ports[0].mac, 6);
    g.src_mac[0] = 2;
    g.nprotos = 3;
    g.protos[0] = 0; g.protos[1] = 1; g.protos[2] = 2;
    g.proto_cum[0] = 0.3; g.proto_cum[1] = 0.6; g.proto_cum[2] = 1.0;
    g.proto_total = 1.0;
    g.pool_n = 1; g.pool_prefix = pool_p; g.pool_len = pool_l;
    g.forwardable = 1; g.via_port = -1; g.router = &r;
    g.not_unicast = not_unicast; g.n_not_unicast = 6;
    enum { N = 400 };
    static uint8_t kinds[N], frames[N * 1600], out[N * 1600], kind[N], reason[N], oport[N], inp[N];
    static uint16_t lens[N];
    static uint32_t pid[N];
    static uint64_t off[N];
    uint64_t o = 0;
    for (uint32_t i = 0; i < N; i++) {
        kinds[i] = (uint8_t)(1 + i % 4);
        lens[i] = (uint16_t)(kinds[i] == NPK_K_RUNT ? 42 + rnd() % 18 : 60 + rnd() % 1455);
        pid[i] = i;
        off[i] = o;
        o += lens[i];
        inp[i] = 0;
    }
    CHECK(npk_gen_frames(&g, N, kinds, lens, pid, frames, off) == N);
    npk_oracle_run(&r, N, frames, off, lens, inp, kind, reason, oport, out);
    for (uint32_t i = 0; i < N; i++) {
        const uint8_t *f = frames + off[i];
        uint32_t ihl = f[14] & 0xF;
        CHECK(csum(f + 14, ihl * 4, 0) == 0xFFFF);   /* header checksum verifies */
        uint32_t hl = 14 + 4 * ihl, l4 = f[23] == 6 ? 20 : (f[hl + 2] << 8 | f[hl + 3]) == 49152 ? 36 : 8;
        if (lens[i] >= hl + l4 + 8) CHECK(npk_tag_id(f, lens[i]) == (int64_t)pid[i]);
        if (kinds[i] == NPK_K_RUNT) CHECK(kind[i] == 1 && reason[i] == NPK_R_SHORT_FRAME);
        else if (kinds[i] == NPK_K_OPTIONS) CHECK(kind[i] == 2 && reason[i] == NPK_R_IP_OPTIONS);
        else if (kinds[i] == NPK_K_TTL_EXPIRING) CHECK(kind[i] == 2 && reason[i] == NPK_R_TTL_EXPIRED);
        else {
            CHECK(kind[i] == 0 && oport[i] == 1);
            CHECK(memcmp(out + off[i], arp_mac, 6) == 0 && out[off[i] + 22] == f[22] - 1);
            CHECK(csum(out + off[i] + 14, 20, 0) == 0xFFFF);  /* the rewritten header verifies */
        }
    }
    /* random bytes of every length: a verdict for each, nothing read or written outside */
    for (uint32_t i = 0; i < N; i++) {
        lens[i] = (uint16_t)(rnd() % 1600);
        for (uint32_t k = 0; k < lens[i]; k++) frames[off[i] + k] = (uint8_t)rnd();
        if (lens[i] > 14 && rnd() % 2) { frames[off[i] + 12] = 8; frames[off[i] + 13] = 0; frames[off[i] + 14] = 0x45; }
        if (rnd() % 2) memcpy(frames + off[i], ports[0].mac, 6);
        inp[i] = (uint8_t)(rnd() % 3);  /* port 2 does not exist */
    }
    npk_oracle_run(&r, N, frames, off, lens, inp, kind, reason, oport, out);
    for (uint32_t i = 0; i < N; i++) {
        CHECK(inp[i] == 2 ? kind[i] == 255 : kind[i] <= 2);
        if (inp[i] < 2 && lens[i] < 60) CHECK(kind[i] == 1 && reason[i] == NPK_R_SHORT_FRAME);
    }
    /* no destination to draw: the builder says which frame */
    g.pool_n = 0;
    CHECK(npk_gen_frames(&g, 1, kinds, lens, pid, frames, off) == -1);
}

int main(void)
{
    test_mt();
    test_parse();
    test_index();
    test_lpm();
    test_gen_and_oracle();
    if (failures) return 1;
    printf("OK\n");
    return 0;
}
