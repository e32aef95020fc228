/* xs_demo.c -- a Linux program for the IXP2800's XScale (npkit example).
 *
 *   xs_demo            the device demo, with xs_demo.uc on a microengine:
 *                      print, malloc, read scratch and SRAM through the mapped
 *                      windows, wait for the ME's interrupt, answer on a
 *                      scratch ring that the ME reads
 *   xs_demo compute    pure computation (no device): identical output under
 *                      qemu-arm -cpu pxa255, on npkit's XScale and natively
 *   xs_demo spin N     N rounds of an integer loop (benchmark), prints a checksum
 *   xs_demo idle       sleep on the device's interrupt forever (benchmark)
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npk_xscale.h"
#include "xs_demo.h"

static void say(const char *s)
{
    /* write(2) directly: the line reaches the host unbuffered */
    if (write(1, s, strlen(s)) < 0) exit(3);
}

static uint32_t crc32_sw(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int compute(void)
{
    enum { N = 4096 };
    uint32_t *v = malloc(N * sizeof *v);
    if (!v) return 1;
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        v[i] = x >> 8;
    }
    printf("crc32 %08" PRIx32 "\n", crc32_sw((const uint8_t *)v, N * sizeof *v));
    qsort(v, N, sizeof *v, cmp_u32);
    printf("sorted min %" PRIu32 " median %" PRIu32 " max %" PRIu32 "\n", v[0], v[N / 2], v[N - 1]);
    uint64_t big = 0;
    for (int i = 0; i < N; i++) big += (uint64_t)v[i] * (uint64_t)(i + 1);
    printf("u64 sum %" PRIu64 " div7 %" PRIu64 " mod1000003 %" PRIu64 "\n", big, big / 7, big % 1000003u);
    double s = 0;
    for (int i = 1; i <= 1000; i++) s += 1.0 / ((double)i * i);
    printf("basel %.12f\n", s);
    char buf[64];
    snprintf(buf, sizeof buf, "%-8s|%5d|%#x|%e", "fmt", -42, 48879, 6.02214076e23);
    printf("%s\n", buf);
    free(v);
    return 0;
}

static int spin(unsigned long rounds)
{
    uint32_t a = 1, b = 2;
    for (unsigned long i = 0; i < rounds; i++) {
        a = a * 33u + b;
        b ^= a >> 3;
    }
    printf("spin %lu %08" PRIx32 "\n", rounds, a ^ b);
    return 0;
}

static int idle(void)
{
    npk_dev d;
    if (npk_dev_open(&d) != 0) { say("idle: no device\n"); return 2; }
    for (;;)
        if (npk_dev_wait(&d) < 0) return 2;
}

static int demo(void)
{
    char line[160];
    say("hello from the XScale\n");                                     /* step 1: write */

    size_t n = 1000;                                                    /* step 2: malloc */
    uint32_t *buf = malloc(n * sizeof *buf);
    if (!buf) { say("malloc failed\n"); return 1; }
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) { buf[i] = (uint32_t)(i * i); sum += buf[i]; }
    snprintf(line, sizeof line, "malloc %zu words sum %" PRIu64 "\n", n, sum);
    say(line);

    npk_dev d;
    int rc = npk_dev_open(&d);
    if (rc != 0) { snprintf(line, sizeof line, "device: error %d\n", rc); say(line); return 2; }
    volatile uint32_t *scr = npk_dev_map(&d, NPK_XS_SCRATCH_BASE, 16384);
    volatile uint32_t *sram = npk_dev_map(&d, npk_xs_sram_phys(0, 0), 1u << 20);
    if (!scr || !sram) { say("mmap failed\n"); return 2; }
    /* the answer ring: set up by the control plane, as on the real part */
    npk_csr_write(&d, NPK_XS_RING_BASE + 0x300 + 8 * XS_ANSWER_RING, XS_ANSWER_RING_BASE);
    npk_csr_write(&d, NPK_XS_RING_BASE + 0x304 + 8 * XS_ANSWER_RING, XS_ANSWER_RING_SIZE);
    say("waiting for the microengine\n");
    scr[XS_SCR_READY_ADDR / 4] = htonl(1);                              /* tell the ME we listen */

    int64_t count = npk_dev_wait(&d);                                   /* step 4: interrupt */
    uint32_t raw_a = npk_csr_read(&d, NPK_XS_INTC_BASE + NPK_XS_INTC_RAW_A);
    npk_csr_write(&d, NPK_XS_INTC_BASE + NPK_XS_INTC_RAW_A, raw_a);      /* acknowledge */
    snprintf(line, sizeof line, "interrupt count %" PRId64 " raw_a %08" PRIx32 "\n", count, raw_a);
    say(line);

    uint32_t scr_magic = ntohl(scr[XS_SCR_MAGIC_ADDR / 4]);            /* step 3: windows */
    uint32_t sram_magic = ntohl(sram[XS_SRAM_MAGIC_ADDR / 4]);
    uint32_t request = ntohl(sram[XS_SRAM_REQUEST / 4]);
    snprintf(line, sizeof line, "scratch %08" PRIx32 " sram %08" PRIx32 " request %" PRIu32 "\n",
             scr_magic, sram_magic, request);
    say(line);

    /* SRAM atomics through the alias window: two adds, then a swap reads the total */
    npk_csr_write(&d, npk_xs_sram_atomic(NPK_AT_ADD, 0, XS_SRAM_COUNTER), 5);
    npk_csr_write(&d, npk_xs_sram_atomic(NPK_AT_ADD, 0, XS_SRAM_COUNTER), 7);
    uint32_t total = npk_csr_swap(&d, npk_xs_sram_atomic(NPK_AT_SWAP, 0, XS_SRAM_COUNTER), 100);
    snprintf(line, sizeof line, "atomic total %" PRIu32 " now %" PRIu32 "\n", total,
             ntohl(sram[XS_SRAM_COUNTER / 4]));
    say(line);

    uint32_t answer = request * 2 + 1;                                  /* step 5: ring */
    int ok = npk_ring_put(&d, XS_ANSWER_RING, answer);
    snprintf(line, sizeof line, "answer %" PRIu32 " %s\n", answer, ok ? "sent" : "ring full");
    say(line);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(line, sizeof line, "done at %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
    say(line);
    free(buf);
    return ok ? 0 : 4;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "compute")) return compute();
    if (argc > 2 && !strcmp(argv[1], "spin")) return spin(strtoul(argv[2], NULL, 0));
    if (argc > 1 && !strcmp(argv[1], "idle")) return idle();
    return demo();
}
