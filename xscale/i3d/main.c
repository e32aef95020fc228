/* i3d -- the I3 daemon of the SPP's I3 slices (README.md).
 *
 *   i3d [--sram-channel-bytes=N] CONF   on the chip: the xscale placement (/dev/ixp2800) or
 *                                       the gpe placement (the native build, attached to the
 *                                       emulator that started it)
 *   i3d --dry CONF                      no chip: plain memory and the host's clock -- the
 *                                       configuration and the control socket alone (tests,
 *                                       trying commands out)
 *
 * The loop: take exception records (exc.c) a batch at a time; between batches the control
 * socket (npkd's ctl.c: the same limits) and the statistics block; then sleep on the
 * exception interrupt, at most a millisecond of emulated time while a socket is open. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../npkd/ctl.h"
#include "i3d.h"
#include "npk_xscale.h"

typedef struct state {
    i3d d;
    npkd_mem mem;
    npk_dev dev;
    ctl ctl;
    int dry;
    uint64_t now, last_ns;
    uint32_t starts;
} state;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("i3d: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- the chip through the device (or nothing, --dry) ---------------------------------------- */

static int hw_ring_get(void *ctx, int ring, uint32_t *w)
{
    state *s = ctx;
    if (s->dry) return 0;
    *w = npk_csr_read(&s->dev, NPK_XS_RING_BASE + 4u * (uint32_t)ring);   /* an empty ring gets 0 */
    return *w != 0;
}

static int hw_ring_put(void *ctx, int ring, uint32_t w)
{
    state *s = ctx;
    if (!s->dry) npk_csr_write(&s->dev, NPK_XS_RING_BASE + 4u * (uint32_t)ring, w);
    return 1;
}

static uint32_t hw_ring_free(void *ctx, int ring)
{
    state *s = ctx;
    return s->dry ? 1024 : npk_csr_read(&s->dev, NPK_XS_RING_BASE + NPK_XS_RING_FREE + 4u * (uint32_t)ring);
}

static uint32_t hw_queue_get(void *ctx, uint32_t q)
{
    state *s = ctx;
    return s->dry ? 0 : npk_queue_get(&s->dev, q);
}

static void hw_queue_put(void *ctx, uint32_t q, uint32_t e)
{
    state *s = ctx;
    if (!s->dry) npk_queue_put(&s->dev, q, e);
}

static uint64_t host_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* the clock in one device read: the low word, carried into the high word of the last
 * full reading (clock_full at each turn of the loop, so never 4 s apart) */
static uint64_t hw_now(void *ctx)
{
    state *s = ctx;
    if (s->dry) return host_ns();
    uint32_t lo = npk_csr_read(&s->dev, NPK_XS_INTC_BASE + NPK_XS_INTC_TIME_LO);
    uint64_t t = (s->last_ns & ~(uint64_t)0xFFFFFFFFu) | lo;
    if (t < s->last_ns) t += (uint64_t)1 << 32;
    s->last_ns = t;
    return t;
}

static uint64_t clock_full(state *s)
{
    s->last_ns = s->dry ? host_ns() : npk_dev_now_ns(&s->dev);
    return s->last_ns;
}

static void map_memories(state *s, uint32_t sram_ch_bytes)
{
    s->mem.sram_ch_bytes = sram_ch_bytes;
    if (s->dry) {                        /* plain memory: what the daemon writes goes nowhere */
        for (unsigned ch = 0; ch < 4; ch++)
            if (!(s->mem.sram[ch] = calloc(sram_ch_bytes / 4, 4))) die("out of memory");
        return;
    }
    int rc = npk_dev_open(&s->dev);
    if (rc) die("cannot open %s: %s", NPK_XS_DEVICE, strerror(-rc));
    for (unsigned ch = 0; ch < 4; ch++) {
        s->mem.sram[ch] = npk_dev_map(&s->dev, npk_xs_sram_phys(ch, 0), sram_ch_bytes);
        if (!s->mem.sram[ch]) die("cannot map SRAM channel %u", ch);
    }
}

static void map_dram(state *s)
{
    uint32_t bytes = s->d.buf_base + (s->d.n_bufs << s->d.buf_shift);
    s->mem.dram_bytes = bytes;
    s->mem.dram = s->dry ? calloc(bytes ? bytes : 1, 1) : npk_dev_map(&s->dev, NPK_XS_DRAM_BASE, bytes);
    if (!s->mem.dram) die("cannot map DRAM");
}

/* ---- the control socket ------------------------------------------------------------------------ */

static void quiet(void *ctx, const char *text)
{
    (void)ctx;
    if (!strncmp(text, "error", 5)) fprintf(stderr, "i3d: %s", text);
}

static void to_conn(void *ctx, const char *text)
{
    ctl_printf(ctx, "%s", text);
}

static void handle(void *ctx, ctl *c, ctl_conn *k, char *line)
{
    state *s = ctx;
    (void)c;
    i3d_command(&s->d, line, to_conn, k);
    i3d_mirror(&s->d);                   /* before the next record: the host's judge reads it */
    i3d_publish(&s->d, s->starts);
}

/* ---- the loop ---------------------------------------------------------------------------------- */

static void wait_for_work(state *s)
{
    if (s->dry) {
        s->d.now = host_ns();
        struct pollfd p[1 + CTL_CONNS];
        int n = ctl_pollfds(&s->ctl, p, 1 + CTL_CONNS);
        if (poll(p, (nfds_t)n, 100) < 0 && errno != EINTR) die("poll failed: %s", strerror(errno));
        return;
    }
#ifdef NPK_GPE
    uint64_t deadline = s->ctl.lfd >= 0 ? s->now + 1000000u : UINT64_MAX;   /* look at the socket */
    if (i3d_timed_next(&s->d) < deadline) deadline = i3d_timed_next(&s->d);
    if (s->d.back_ring >= 0 && s->now < s->d.back_until && s->now + 2000u < deadline)
        deadline = s->now + 2000u;     /* the other daemon's answers: looked for every 2 us */
    if (s->ctl.lfd >= 0 && ctl_pending(&s->ctl)) return;   /* a command read waits for its turn */
    if (npk_dev_wait_until(&s->dev, deadline) < 0) die("device wait failed");
#else
    struct pollfd p[2 + CTL_CONNS];
    p[0] = (struct pollfd){s->dev.fd, POLLIN, 0};
    int n = 1 + ctl_pollfds(&s->ctl, p + 1, 1 + CTL_CONNS);
    uint64_t next = i3d_timed_next(&s->d);
    if (s->d.back_ring >= 0 && s->now < s->d.back_until && s->now + 2000u < next) next = s->now + 2000u;
    uint64_t left = next > s->now ? next - s->now : 0;
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    int rc = ppoll(p, (nfds_t)n, next == UINT64_MAX ? NULL : &ts, NULL);
    if (rc < 0 && errno != EINTR) die("poll failed: %s", strerror(errno));
    if (rc > 0 && (p[0].revents & POLLIN) && npk_dev_wait(&s->dev) < 0) die("device read failed");
#endif
}

static int run(state *s)
{
    for (;;) {
        s->now = s->d.now = clock_full(s);
        i3d_timed_due(&s->d);           /* first: a change is made at its time, not after a batch */
        int n = i3d_poll(&s->d, (int)s->d.opt.batch);
        if (s->d.back_ring >= 0) i3d_back(&s->d);
        s->now = s->d.now = hw_now(s);  /* the socket's commands are stamped with the clock of then */
        ctl_service(&s->ctl);
        i3d_publish(&s->d, s->starts);
        if (n >= (int)s->d.opt.batch) {
            sched_yield();      /* busy: still a point where the kernel can act (a signal, a kill) */
            continue;
        }
        s->now = hw_now(s);
        wait_for_work(s);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static state s;
    char err[700];
    const char *conf = NULL;
    uint32_t sram_ch = 8u << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dry")) s.dry = 1;
        else if (!strncmp(argv[i], "--sram-channel-bytes=", 21)) sram_ch = (uint32_t)strtoul(argv[i] + 21, NULL, 0);
        else if (argv[i][0] != '-' && !conf) conf = argv[i];
        else die("usage: i3d [--dry] [--sram-channel-bytes=N] CONF");
    }
    if (!conf) die("usage: i3d [--dry] [--sram-channel-bytes=N] CONF");
    map_memories(&s, sram_ch);
    i3d_hw hw = {&s, hw_ring_get, hw_ring_put, hw_ring_free, hw_queue_get, hw_queue_put, hw_now};
    i3d_init(&s.d, &s.mem, &hw);
    if (i3d_conf_load(&s.d, conf, err, sizeof err)) die("%s", err);
    map_dram(&s);
    if (s.d.opt.slow_slice) {          /* that slice's packets take the GPE path */
        char line[64];
        snprintf(line, sizeof line, "filter slow slice %u", s.d.opt.slow_slice);
        i3d_command(&s.d, line, quiet, NULL);
    }
    if (s.d.stats_base && npkd_sram_rd(&s.mem, s.d.stats_base) == I3D_STATS_MAGIC) {   /* started again */
        s.starts = npkd_sram_rd(&s.mem, s.d.stats_base + 12);
        s.d.log_count = npkd_sram_rd(&s.mem, s.d.stats_base + I3D_LOG_OFF);
        for (int i = 0; i < I3S_COUNT; i++)      /* the counters go on from where they were */
            s.d.stats[i] += npkd_sram_rd(&s.mem, s.d.stats_base + I3D_STATS_HDR + 4u * (uint32_t)i);
        uint32_t b = s.d.stats_base + I3D_LAT_OFF;
        s.d.lat_n = npkd_sram_rd(&s.mem, b);
        s.d.lat_max = npkd_sram_rd(&s.mem, b + 4);
        s.d.lat_sum = (uint64_t)npkd_sram_rd(&s.mem, b + 8) << 32 | npkd_sram_rd(&s.mem, b + 12);
    }
    i3d_mirror(&s.d);
    s.starts++;
    /* a daemon started again (killed before): the filters its predecessor put in over the
     * socket are unknown to this one -- out of the TCAM, before anything else; the timed
     * commands due are made again at the first turn.  (The first start has only the link's.) */
    if (s.starts > 1) s.d.stats[I3S_stale_filters_cleared] = fast_clear_own(&s.d.fp);
    if (s.starts > 1) i3d_mi_sync(&s.d);     /* ... and the meta-interfaces of slices it added */
    s.now = clock_full(&s);
    int rc = ctl_open(&s.ctl, s.d.socket_path);
    if (rc) die("control socket %s: %s", s.d.socket_path, strerror(-rc));
    s.ctl.handle = handle;
    s.ctl.ctx = &s;
    s.ctl.now_ns = &s.now;
    s.ctl.idle_ns = (uint64_t)s.d.opt.ctl_idle_us * 1000u;
    s.ctl.out_max = s.d.opt.ctl_answer_max;
    i3d_publish(&s.d, s.starts);
    if (s.dry) {
        printf("i3d: ready (dry), socket %s\n", s.d.socket_path);
        fflush(stdout);
    }
    rc = run(&s);
    ctl_close(&s.ctl);
    return rc;
}
