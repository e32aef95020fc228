/* npk_xscale.c -- the device interface of npk_xscale.h, for both placements.
 *
 * xscale (ARM build): /dev/ixp2800 is served by the emulator's Linux system-call
 * layer: mmap of a memory window maps the chip's own memory, mmap of a CSR
 * window gives MMIO, read() waits for an interrupt.
 *
 * gpe (native build, NPK_GPE defined): the emulator starts this process with
 * the environment variable NPK_GPE = "link,sram_fd,dram_fd,scratch_fd,sram_ch_bytes":
 * the memories are the emulator's memfds (mapped shared, no copies), CSR accesses
 * and interrupt waits are requests on the link socket (struct npk_gpe_msg),
 * answered after the configured link latency in emulated time. */
#define _GNU_SOURCE
#include "npk_xscale.h"
#include "npk_gpe_proto.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- gpe link ------------------------------------------------------------ */

static int full_io(int fd, void *buf, size_t n, int writing)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static uint32_t gpe_call4(npk_dev *d, uint32_t op, uint32_t addr, uint32_t value, uint32_t pad, int32_t *status)
{
    npk_gpe_msg m = {op, addr, value, pad};
    if (full_io(d->fd, &m, sizeof m, 1) || full_io(d->fd, &m, sizeof m, 0)) {
        fprintf(stderr, "npk_xscale: the emulator link closed\n");
        exit(70);
    }
    if (status) *status = (int32_t)m.op;
    return m.value;
}

static uint32_t gpe_call(npk_dev *d, uint32_t op, uint32_t addr, uint32_t value, int32_t *status)
{
    return gpe_call4(d, op, addr, value, 0, status);
}

#ifdef NPK_GPE
static int gpe_open(npk_dev *d, const char *spec)
{
    unsigned long v[5];
    if (sscanf(spec, "%lu,%lu,%lu,%lu,%lu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5) return -EINVAL;
    d->gpe = 1;
    d->fd = (int)v[0];
    for (int i = 0; i < 3; i++) {
        struct stat st;
        d->mem_fd[i] = (int)v[1 + i];
        if (fstat(d->mem_fd[i], &st) != 0) return -errno;
        d->mem_size[i] = (uint64_t)st.st_size;
    }
    d->sram_ch_bytes = (uint32_t)v[4];
    return 0;
}
#endif

/* ---- open / map ------------------------------------------------------------ */

int npk_dev_open(npk_dev *d)
{
    memset(d, 0, sizeof *d);
    d->fd = -1;
    for (int i = 0; i < 3; i++) d->mem_fd[i] = -1;
#ifdef NPK_GPE
    const char *spec = getenv("NPK_GPE");
    if (!spec) return -ENODEV;
    return gpe_open(d, spec);
#else
    d->fd = open(NPK_XS_DEVICE, O_RDWR | O_CLOEXEC);
    return d->fd < 0 ? -errno : 0;
#endif
}

void npk_dev_close(npk_dev *d)
{
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

void *npk_dev_map(npk_dev *d, uint32_t phys, size_t len)
{
    if (!d->gpe) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, (off_t)phys);
        return p == MAP_FAILED ? NULL : p;
    }
    int which;
    uint64_t off;
    if (phys >= NPK_XS_SCRATCH_BASE && phys < NPK_XS_SCRATCH_BASE + 0x100000u) {
        which = 2;
        off = phys - NPK_XS_SCRATCH_BASE;
    } else if (phys >= NPK_XS_SRAM_BASE && phys < NPK_XS_CAP_BASE) {
        uint32_t ch = (phys - NPK_XS_SRAM_BASE) >> NPK_XS_SRAM_CH_SHIFT;
        which = 0;
        off = (uint64_t)ch * d->sram_ch_bytes + ((phys - NPK_XS_SRAM_BASE) & ((1u << NPK_XS_SRAM_CH_SHIFT) - 1));
    } else if (phys < NPK_XS_SRAM_BASE) {
        which = 1;
        off = phys;
    } else {
        errno = EINVAL;  /* CSR windows: use npk_csr_* */
        return NULL;
    }
    uint64_t pg = off & ~(uint64_t)4095;
    if (off + len > d->mem_size[which]) { errno = ERANGE; return NULL; }
    uint8_t *p = mmap(NULL, len + (off - pg), PROT_READ | PROT_WRITE, MAP_SHARED, d->mem_fd[which], (off_t)pg);
    return p == MAP_FAILED ? NULL : p + (off - pg);
}

/* ---- CSR access ---------------------------------------------------------------- */

/* CSR windows the xscale build maps lazily: base, size */
static const uint32_t csr_win[][2] = {
    {NPK_XS_CAP_BASE, NPK_XS_CAP_SIZE},
    {NPK_XS_MSF_BASE, NPK_XS_MSF_SIZE},
    {NPK_XS_RING_BASE, NPK_XS_RING_SIZE},
    {NPK_XS_SCR_ATOMIC, 8u << 16},
    {NPK_XS_SRAM_ATOMIC, 8u << 25},
    {NPK_XS_INTC_BASE, NPK_XS_INTC_SIZE},
    {NPK_XS_SRAM_QUEUE, 4u << 23},
};
#define NWIN (sizeof csr_win / sizeof csr_win[0])

static volatile uint32_t *csr_ptr(npk_dev *d, uint32_t phys)
{
    for (unsigned i = 0; i < NWIN; i++) {
        if (phys < csr_win[i][0] || phys - csr_win[i][0] >= csr_win[i][1]) continue;
        if (!d->win[i]) {
            void *p = mmap(NULL, csr_win[i][1], PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, (off_t)csr_win[i][0]);
            if (p == MAP_FAILED) return NULL;
            d->win[i] = p;
        }
        return d->win[i] + (phys - csr_win[i][0]) / 4;
    }
    return NULL;
}

uint32_t npk_csr_read(npk_dev *d, uint32_t phys)
{
    if (d->gpe) return gpe_call(d, NPK_GPE_READ, phys, 0, NULL);
    volatile uint32_t *p = csr_ptr(d, phys);
    return p ? *p : 0;
}

void npk_csr_write(npk_dev *d, uint32_t phys, uint32_t value)
{
    if (d->gpe) { gpe_call(d, NPK_GPE_WRITE, phys, value, NULL); return; }
    volatile uint32_t *p = csr_ptr(d, phys);
    if (p) *p = value;
}

uint32_t npk_csr_swap(npk_dev *d, uint32_t phys, uint32_t value)
{
    if (d->gpe) return gpe_call(d, NPK_GPE_SWAP, phys, value, NULL);
    volatile uint32_t *p = csr_ptr(d, phys);
    if (!p) return 0;
#if defined(__arm__)
    uint32_t old;
    __asm__ volatile("swp %0, %1, [%2]" : "=&r"(old) : "r"(value), "r"(p) : "memory");
    return old;
#else
    uint32_t old = *p;
    *p = value;
    return old;
#endif
}

int64_t npk_dev_wait(npk_dev *d)
{
    if (d->gpe) {
        int32_t st;
        uint32_t n = gpe_call(d, NPK_GPE_WAIT, 0, d->last_count, &st);
        if (st < 0) return st;
        d->last_count = n;
        return n;
    }
    uint32_t n;
    ssize_t k;
    do k = read(d->fd, &n, sizeof n); while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof n) return k < 0 ? -errno : -EIO;
    d->last_count = n;
    return n;
}

uint64_t npk_dev_now_ns(npk_dev *d)
{
    uint32_t hi, lo, again;
    do {
        hi = npk_csr_read(d, NPK_XS_INTC_BASE + NPK_XS_INTC_TIME_HI);
        lo = npk_csr_read(d, NPK_XS_INTC_BASE + NPK_XS_INTC_TIME_LO);
        again = npk_csr_read(d, NPK_XS_INTC_BASE + NPK_XS_INTC_TIME_HI);
    } while (hi != again);
    return (uint64_t)hi << 32 | lo;
}

int npk_dev_wait_until(npk_dev *d, uint64_t deadline_ns)
{
    if (d->gpe) {
        int32_t st;
        uint32_t n = gpe_call4(d, NPK_GPE_WAIT_UNTIL, (uint32_t)deadline_ns, d->last_count,
                               (uint32_t)(deadline_ns >> 32), &st);
        if (st < 0) return st;
        d->last_count = n;
        return st;
    }
    uint64_t now = npk_dev_now_ns(d);
    struct pollfd p = {d->fd, POLLIN, 0};
    int rc;
    if (deadline_ns == UINT64_MAX) {
        rc = poll(&p, 1, -1);
    } else {
        uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        rc = ppoll(&p, 1, &ts, NULL);
    }
    if (rc < 0) return -errno;
    if (rc == 0) return 0;
    return npk_dev_wait(d) < 0 ? -EIO : 1;
}

uint32_t npk_queue_get(npk_dev *d, uint32_t me_addr)
{
    return npk_csr_read(d, npk_xs_sram_queue(me_addr));
}

void npk_queue_put(npk_dev *d, uint32_t me_addr, uint32_t element)
{
    npk_csr_write(d, npk_xs_sram_queue(me_addr), element);
}

int npk_ring_get(npk_dev *d, unsigned ring, uint32_t *word)
{
    *word = 0;
    if (!npk_csr_read(d, NPK_XS_RING_BASE + NPK_XS_RING_COUNT + 4 * ring)) return 0;
    *word = npk_csr_read(d, NPK_XS_RING_BASE + 4 * ring);
    return 1;
}

int npk_ring_put(npk_dev *d, unsigned ring, uint32_t word)
{
    if (!npk_csr_read(d, NPK_XS_RING_BASE + NPK_XS_RING_FREE + 4 * ring)) return 0;
    npk_csr_write(d, NPK_XS_RING_BASE + 4 * ring, word);
    return 1;
}
