/* Native unit tests of xscale/lib/npk_xscale.c (gpe build) under ASan/UBSan.
 * A forked fake emulator answers the link: CSR reads return a function of the
 * address, writes are remembered, WAIT returns the count seen + 1; the memories
 * are memfds, as the emulator's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "npk_xscale.h"
#include "npk_gpe_proto.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

#define CH_BYTES (1u << 20)

static void fake_emulator(int s)
{
    uint32_t last_addr = 0, last_value = 0, ring_count = 2;
    npk_gpe_msg m;
    while (read(s, &m, sizeof m) == (ssize_t)sizeof m) {
        npk_gpe_msg r = {0, 0, 0, 0};
        switch (m.op) {
        case NPK_GPE_READ:
            if (m.addr == NPK_XS_RING_BASE + NPK_XS_RING_COUNT + 4 * 3) r.value = ring_count;
            else if (m.addr == NPK_XS_RING_BASE + NPK_XS_RING_FREE + 4 * 3) r.value = 0;
            else if (m.addr == NPK_XS_RING_BASE + 4 * 3) { r.value = 0xA0 + ring_count; ring_count--; }
            else if (m.addr == last_addr) r.value = last_value;
            else r.value = m.addr ^ 0x5A5A5A5Au;
            break;
        case NPK_GPE_WRITE: last_addr = m.addr; last_value = m.value; break;
        case NPK_GPE_SWAP: r.value = last_value; last_addr = m.addr; last_value = m.value; break;
        case NPK_GPE_WAIT: r.value = m.value + 1; break;
        default: r.op = (uint32_t)-EINVAL;
        }
        if (write(s, &r, sizeof r) != (ssize_t)sizeof r) break;
    }
    _exit(0);
}

static int memfd(size_t n)
{
    int fd = memfd_create("t", 0);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) { perror("memfd"); exit(2); }
    return fd;
}

int main(void)
{
    npk_dev d;
    unsetenv("NPK_GPE");
    CHECK(npk_dev_open(&d) == -ENODEV);
    setenv("NPK_GPE", "garbage", 1);
    CHECK(npk_dev_open(&d) == -EINVAL);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    int fs = memfd(4 * CH_BYTES), fdr = memfd(8u << 20), fsc = memfd(16384);
    pid_t pid = fork();
    if (pid == 0) { close(sv[0]); fake_emulator(sv[1]); }
    close(sv[1]);
    char spec[128];
    snprintf(spec, sizeof spec, "%d,%d,%d,%d,%u", sv[0], fs, fdr, fsc, CH_BYTES);
    setenv("NPK_GPE", spec, 1);
    CHECK(npk_dev_open(&d) == 0);
    CHECK(d.gpe == 1 && d.mem_size[0] == 4 * CH_BYTES && d.sram_ch_bytes == CH_BYTES);

    /* memory windows land on the right memfd offsets */
    uint32_t *sram_all = mmap(NULL, 4 * CH_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fs, 0);
    uint32_t *dram_all = mmap(NULL, 8u << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fdr, 0);
    CHECK(sram_all != MAP_FAILED && dram_all != MAP_FAILED);
    sram_all[(2 * CH_BYTES + 0x100) / 4] = htonl(0x11223344u);
    dram_all[0x2004 / 4] = htonl(0xCAFEu);
    volatile uint32_t *ch2 = npk_dev_map(&d, npk_xs_sram_phys(2, 0x100), 64);
    volatile uint32_t *dr = npk_dev_map(&d, 0x2004, 16);
    volatile uint32_t *scr = npk_dev_map(&d, NPK_XS_SCRATCH_BASE, 16384);
    CHECK(ch2 && ntohl(ch2[0]) == 0x11223344u);
    CHECK(dr && ntohl(dr[0]) == 0xCAFEu);
    CHECK(scr != NULL);
    scr[5] = htonl(7);
    uint32_t *scr_all = mmap(NULL, 16384, PROT_READ, MAP_SHARED, fsc, 0);
    CHECK(scr_all != MAP_FAILED && ntohl(scr_all[5]) == 7);
    CHECK(npk_dev_map(&d, NPK_XS_CAP_BASE, 4096) == NULL && errno == EINVAL);   /* CSR: not memory */
    CHECK(npk_dev_map(&d, 0x2000, 16u << 20) == NULL);                          /* beyond DRAM */

    /* address helpers match the header's map */
    CHECK(npk_xs_sram_phys(3, 4) == 0xB0000004u);
    CHECK(npk_xs_sram_atomic(NPK_AT_ADD, 1, 8) == 0xE0000000u + (5u << 25) + (1u << 23) + 8);
    CHECK(npk_xs_scr_atomic(NPK_AT_SWAP, 0x40) == 0xCB870040u);

    /* CSR accesses go over the link */
    CHECK(npk_csr_read(&d, 0xC0004B20u) == (0xC0004B20u ^ 0x5A5A5A5Au));
    npk_csr_write(&d, 0xC0000010u, 99);
    CHECK(npk_csr_read(&d, 0xC0000010u) == 99);
    CHECK(npk_csr_swap(&d, 0xC0000010u, 5) == 99);
    CHECK(npk_csr_read(&d, 0xC0000010u) == 5);

    /* ring get checks the count first; put checks the free space */
    uint32_t w = 1;
    CHECK(npk_ring_get(&d, 3, &w) == 1 && w == 0xA2);
    CHECK(npk_ring_get(&d, 3, &w) == 1 && w == 0xA1);
    CHECK(npk_ring_get(&d, 3, &w) == 0 && w == 0);
    CHECK(npk_ring_put(&d, 3, 9) == 0);

    /* interrupt waits return the emulator's count and remember it */
    CHECK(npk_dev_wait(&d) == 1 && d.last_count == 1);
    CHECK(npk_dev_wait(&d) == 2);

    npk_dev_close(&d);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    printf("OK\n");
    return 0;
}
