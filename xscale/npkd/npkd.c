/* npkd -- the router's control daemon (xscale/npkd/README.md).
 *
 *   npkd CONF                     run on the chip (xscale placement: /dev/ixp2800; gpe
 *                                 placement: the native build attached to the emulator)
 *   npkd --build-image OUT CONF   lay the lookup tables of CONF out as an SRAM image file
 *
 * The loop: take exception records (cp.c) as long as there are any, a batch at a time;
 * between batches the ARP timers, timed route changes, the control socket and, while
 * the route table is still being loaded, a chunk of it; then sleep on the exception
 * interrupt (microcode raises XSCALE_INT_A when it puts a record) until the next timer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg.h"
#include "cp.h"
#include "ctl.h"
#include "image.h"
#include "rcheck.h"
#include "npk_xscale.h"
#include "tables.h"

#define EXIT_RESTART 75

typedef struct npkd_state {
    npkd_cfg cfg;
    npkd_mem mem;
    npk_dev dev;
    tables tab;
    tables_load load;
    cp cp;
    ctl ctl;
    uint64_t now;
    uint32_t next_change, starts, state;
    uint64_t late_before;       /* a timed change due before this was owed by a predecessor, or fell
                                 * due before the first daemon started */
    int restart, journal_fd;
    uint64_t journal_len;       /* the bytes of whole lines in the journal */
    int load_eagerly;           /* build the route model now (else on the first change) */
} npkd_state;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("npkd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- the chip through the device ------------------------------------------------------- */

static int hw_ring_get(void *ctx, int ring, uint32_t *w)
{
    npkd_state *d = ctx;
    *w = npk_csr_read(&d->dev, NPK_XS_RING_BASE + 4u * (uint32_t)ring);   /* an empty ring gets 0 */
    return *w != 0;
}

static int hw_ring_put(void *ctx, int ring, uint32_t w)
{
    npkd_state *d = ctx;
    npk_csr_write(&d->dev, NPK_XS_RING_BASE + 4u * (uint32_t)ring, w);
    return 1;
}

static uint32_t hw_ring_free(void *ctx, int ring)
{
    npkd_state *d = ctx;
    return npk_csr_read(&d->dev, NPK_XS_RING_BASE + NPK_XS_RING_FREE + 4u * (uint32_t)ring);
}

static uint32_t hw_queue_get(void *ctx, uint32_t q)
{
    return npk_queue_get(&((npkd_state *)ctx)->dev, q);
}

static void hw_queue_put(void *ctx, uint32_t q, uint32_t e)
{
    npk_queue_put(&((npkd_state *)ctx)->dev, q, e);
}

static uint64_t hw_now(void *ctx)
{
    return ((npkd_state *)ctx)->now;            /* read once a turn of the loop */
}

static uint64_t clock_now(void *ctx)
{
    return npk_dev_now_ns(&((npkd_state *)ctx)->dev);   /* read afresh (tables.h: grace) */
}

static volatile uint32_t *map_scratch(void *ctx, uint32_t *bytes)
{
    npkd_state *d = ctx;
    *bytes = NPKD_SCRATCH_BYTES;
    return npk_dev_map(&d->dev, NPK_XS_SCRATCH_BASE, NPKD_SCRATCH_BYTES);
}

static void map_memories(npkd_state *d, uint32_t sram_ch_bytes, uint32_t dram_bytes)
{
    int rc = npk_dev_open(&d->dev);
    if (rc) die("cannot open %s: %s", NPK_XS_DEVICE, strerror(-rc));
    d->mem.sram_ch_bytes = sram_ch_bytes;
    for (unsigned ch = 0; ch < 4; ch++) {
        d->mem.sram[ch] = npk_dev_map(&d->dev, npk_xs_sram_phys(ch, 0), sram_ch_bytes);
        if (!d->mem.sram[ch]) die("cannot map SRAM channel %u", ch);
    }
    d->mem.dram = npk_dev_map(&d->dev, NPK_XS_DRAM_BASE, dram_bytes);
    d->mem.dram_bytes = dram_bytes;
    if (!d->mem.dram) die("cannot map DRAM");
    d->mem.map_scratch = map_scratch;   /* the range cache (lpm.c): mapped at the first route change */
    d->mem.map_ctx = d;
}

/* ---- route table ------------------------------------------------------------------------ */

/* the journal of route changes (cfg `state`): appended a line at a time, each before
 * its change is made (cp.c commit_change), replayed by the next instance after a
 * restart (tables.h) */
static int journal_write(void *ctx, const char *line)
{
    npkd_state *d = ctx;
    if (d->journal_fd < 0) return 0;
    size_t n = strlen(line);
    ssize_t w = write(d->journal_fd, line, n);
    if (w == (ssize_t)n) {
        d->journal_len += n;
        return 0;
    }
    /* a part of the line: taken back, so that the next line does not run on from it (a
     * kill before this leaves it for the replay, which drops a torn last line) */
    if (w > 0 && ftruncate(d->journal_fd, (off_t)d->journal_len)) w = -1;
    fprintf(stderr, "npkd: cannot write the route journal\n");
    return -1;
}

static void log_withdrawal(void *ctx, uint64_t at_ns)
{
    npkd_state *d = ctx;
    cp_log_withdrawal(&d->cp, at_ns, d->starts);
}

static int load_some(npkd_state *d, uint32_t budget)
{
    if (d->cp.tables_ready) return 1;
    int rc = tables_load_step(&d->tab, &d->load, budget);
    if (rc < 0) die("route table: %s", d->load.err);
    if (rc == 1) {
        d->state = 2;
        if (d->cfg.state_path[0]) {
            d->journal_fd = open(d->cfg.state_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (d->journal_fd < 0) fprintf(stderr, "npkd: cannot open %s\n", d->cfg.state_path);
            d->journal_len = d->load.jbytes;
            if (d->journal_fd >= 0 && d->load.torn && ftruncate(d->journal_fd, (off_t)d->load.jbytes))
                die("cannot cut the torn end of %s", d->cfg.state_path);
        }
        /* ARP starts afresh: journalled.  These lines come after the /32s left SRAM
         * (tables.c revert_learnt), not before; a kill at one of them is harmless all
         * the same: the next instance replays the `adj` line, counts the /32 as learnt
         * and withdraws it again, from a model and a trie that no longer have it. */
        for (uint32_t i = 0; i < d->load.learnt.n; i++) {
            route_cfg r = {d->load.learnt.v[i], 0, 32, 0};
            char line[48];
            fmt_ip(line + 6, r.prefix);
            memcpy(line, "unadj ", 6);
            strcat(line, "\n");
            journal_write(d, line);
        }
        /* A restart: the journal says which timed changes the daemons before this one
         * made (or tried); the others are this one's, at once if they are due (falling
         * due while no daemon ran, or cut by a kill at their journal line). */
        if (d->starts > 1 && d->cfg.state_path[0]) {
            d->next_change = d->load.timed_done < d->cfg.nchg ? d->load.timed_done : d->cfg.nchg;
            d->late_before = d->now;
        }
        tables_load_end(&d->load);
        cp_tables_ready(&d->cp);
        cp_publish(&d->cp, d->state, d->starts);
    }
    return rc;
}

static int ensure_tables(void *ctx)
{
    npkd_state *d = ctx;
    while (!load_some(d, UINT32_MAX)) {
    }
    return 0;
}

static void timed_changes(npkd_state *d)
{
    while (d->next_change < d->cfg.nchg && d->cfg.chg[d->next_change].at_ns <= d->now) {
        uint32_t k = d->next_change++;
        const timed_change *t = &d->cfg.chg[k];
        int rc = cp_timed_change(&d->cp, t, k);
        if (rc) fprintf(stderr, "npkd: timed change %u failed (%d)\n", k, rc);
        if (t->at_ns < d->late_before) d->cp.stats[ST_timed_late]++;
    }
}

/* ---- control socket commands ------------------------------------------------------------------ */

static void show_entry(npkd_state *d, ctl_conn *k, uint32_t prefix, int len, uint32_t idx)
{
    char p[16], v[16];
    nh_entry e;
    nh_read(&d->mem, &d->cfg.lay, idx, &e);
    fmt_ip(p, prefix);
    fmt_ip(v, idx < d->tab.nh.n ? d->tab.nh.via[idx] : 0);
    ctl_printf(k, "%s/%d via %s port %u index %u flags 0x%02x%s\n", p, len, v, e.port, idx, e.flags,
               e.flags & NH_ARP_MISS ? " unresolved" : "");
}

/* `show`: the next SHOW_STEP routes of the table (by length, then slot), one step a turn
 * of the loop and only once the previous step has been sent: a table of any size, and a
 * client that reads slowly or never, cost the exception path one step at most.  Routes
 * changed meanwhile may be listed as they were or as they are. */
#define SHOW_STEP 8
static int show_more(void *ctx, ctl_conn *k)
{
    npkd_state *d = ctx;
    uint32_t shown = 0, n = k->cursor[0], i = k->cursor[1];
    for (; n <= 32; n++, i = 0) {
        const u32map *m = &d->tab.trie.routes[n];
        for (; i < m->cap; i++) {
            if (!m->used[i]) continue;
            if (shown++ == SHOW_STEP) {
                k->cursor[0] = n;
                k->cursor[1] = i;
                return 1;
            }
            show_entry(d, k, m->key[i], (int)n, m->val[i]);
        }
    }
    ctl_printf(k, "ok\n");
    return 0;
}

/* `npk flow` and `npk plugin` (-D classify=flows; flows.h) */
static void flow_cmd(npkd_state *d, ctl_conn *k, const char *line)
{
    flow_table *t = d->cp.fl;
    flow_key key;
    const char *rest;
    if (!t) {
        ctl_printf(k, "error: this image has no flow table (link it with -D classify=flows)\n");
        return;
    }
    if (!strncmp(line, "add ", 4)) {
        if (flow_parse_key(line + 4, &key, &rest)) {
            ctl_printf(k, "error: cannot read the flow '%s' (SRC DST PROTO [SPORT DPORT] count|plugin N)\n", line + 4);
            return;
        }
        uint32_t action = FLOW_ACT_COUNT, arg = 0;
        if (!strncmp(rest, "plugin ", 7)) {
            action = FLOW_ACT_PLUGIN;
            arg = (uint32_t)strtoul(rest + 7, NULL, 10);
            if (arg < 1 || arg >= FLOW_SLOTS) {
                ctl_printf(k, "error: plugin slot: 1..%d\n", FLOW_SLOTS - 1);
                return;
            }
        } else if (strcmp(rest, "count") && *rest) {
            ctl_printf(k, "error: action '%s': count or plugin N (a route entry is declared in flows.yaml)\n", rest);
            return;
        }
        int rc = flow_add(t, &d->mem, &key, action, arg, d->cp.hw.now_ns(d->cp.hw.ctx));
        ctl_printf(k, rc == -2 ? "error: the flow is there already\n" : rc == -3 ? "error: its bucket is full\n" : "ok\n");
        return;
    }
    if (!strncmp(line, "del ", 4)) {
        if (flow_parse_key(line + 4, &key, &rest) || *rest) {
            ctl_printf(k, "error: cannot read the flow '%s' (SRC DST PROTO [SPORT DPORT])\n", line + 4);
            return;
        }
        ctl_printf(k, flow_del(t, &d->mem, &key, d->cp.hw.now_ns(d->cp.hw.ctx)) ? "error: no such flow\n" : "ok\n");
        return;
    }
    if (!strncmp(line, "idle ", 5)) {            /* idle US: expire entries idle that long (0: never) */
        char *e;
        unsigned long long us = strtoull(line + 5, &e, 10);
        if (e == line + 5 || *e) {
            ctl_printf(k, "error: flow idle US (microseconds; 0: entries never expire)\n");
            return;
        }
        flow_set_idle(t, 1000ull * us, d->cp.hw.now_ns(d->cp.hw.ctx));
        ctl_printf(k, "ok\n");
        return;
    }
    if (!strcmp(line, "show")) {
        static const char *acts[] = {"none", "count", "route", "plugin"};
        for (uint32_t e = 0; e < 2 * t->buckets; e++) {
            uint32_t a = t->key_base + 16 * e, w = npkd_sram_rd(&d->mem, a + 12), act = (w >> 16) & 0xFF;
            if (!act || act > 3) continue;
            char s[16], ds[16];
            fmt_ip(s, npkd_sram_rd(&d->mem, a));
            fmt_ip(ds, npkd_sram_rd(&d->mem, a + 4));
            uint32_t ports = npkd_sram_rd(&d->mem, a + 8), aux = t->aux_base + 32 * e;
            ctl_printf(k, "%s %s %u %u %u %s %u packets %u bytes %u\n", s, ds, w >> 24, ports >> 16, ports & 0xFFFF,
                       acts[act], w & 0xFFFF, npkd_sram_rd(&d->mem, aux), npkd_sram_rd(&d->mem, aux + 4));
        }
        ctl_printf(k, "ok\n");
        return;
    }
    ctl_printf(k, "error: unknown flow command '%s' (add, del, show, idle)\n", line);
}

static void plugin_cmd(npkd_state *d, ctl_conn *k, const char *line)
{
    flow_table *t = d->cp.fl;
    if (!t) {
        ctl_printf(k, "error: this image has no flow table (link it with -D classify=flows)\n");
        return;
    }
    if (!strcmp(line, "list")) {
        for (const plugin_def *p = npkd_plugins; p->name; p++) ctl_printf(k, "plugin %s: %s\n", p->name, p->what);
        for (uint32_t i = 1; i < FLOW_SLOTS; i++) {
            const plugin_slot *s = &t->slot[i];
            if (s->def || s->loads)
                ctl_printf(k, "slot %u %s packets %u dropped %u loads %u\n", i, s->def ? s->def->name : "-",
                           s->packets, s->dropped, s->loads);
        }
        ctl_printf(k, "passthrough %u\nok\n", t->passthrough);
        return;
    }
    char *e;
    if (!strncmp(line, "load ", 5)) {
        unsigned long slot = strtoul(line + 5, &e, 10);
        char name[16] = {0};
        uint32_t args[FLOW_ARGS], n = 0;
        while (*e == ' ') e++;
        size_t len = strcspn(e, " ");
        if (len == 0 || len >= sizeof name) {
            ctl_printf(k, "error: plugin load SLOT NAME [ARGS]\n");
            return;
        }
        memcpy(name, e, len);
        e += len;
        while (*e == ' ') e++;
        while (*e && n < FLOW_ARGS) {
            char *x;
            args[n++] = (uint32_t)strtoul(e, &x, 0);
            if (x == e) break;
            e = x;
            while (*e == ' ') e++;
        }
        int rc = plugin_load(t, (uint32_t)slot, name, args, n);
        if (!rc) plugin_logged(t, &d->mem, (uint32_t)slot, d->cp.hw.now_ns(d->cp.hw.ctx));
        ctl_printf(k, rc == -2 ? "error: no plugin '%s' (plugin list)\n" : rc ? "error: slot 1..15, at most 4 args%s\n" : "ok%s\n",
                   rc ? name : "");
        return;
    }
    if (!strncmp(line, "unload ", 7)) {
        unsigned long slot = strtoul(line + 7, &e, 10);
        if (slot < 1 || slot >= FLOW_SLOTS || !t->slot[slot].def) {
            ctl_printf(k, "error: slot %lu holds no plugin\n", slot);
            return;
        }
        t->slot[slot].def = NULL;                  /* between two packets: the next passes unchanged */
        plugin_logged(t, &d->mem, (uint32_t)slot, d->cp.hw.now_ns(d->cp.hw.ctx));
        ctl_printf(k, "ok\n");
        return;
    }
    if (!strncmp(line, "bind ", 5)) {             /* bind SLOT FLOW: the flow's entry goes to the slot */
        unsigned long slot = strtoul(line + 5, &e, 10);
        flow_key key;
        const char *rest;
        if (slot < 1 || slot >= FLOW_SLOTS || flow_parse_key(e, &key, &rest) || *rest) {
            ctl_printf(k, "error: plugin bind SLOT SRC DST PROTO [SPORT DPORT]\n");
            return;
        }
        int rc = flow_rebind(t, &d->mem, &key, FLOW_ACT_PLUGIN, (uint32_t)slot, d->cp.hw.now_ns(d->cp.hw.ctx));
        if (rc) {
            ctl_printf(k, "error: its bucket is full\n");
            return;
        }
        ctl_printf(k, "ok\n");
        return;
    }
    ctl_printf(k, "error: unknown plugin command '%s' (list, load, unload, bind)\n", line);
}

static void handle(void *ctx, ctl *c, ctl_conn *k, char *line)
{
    npkd_state *d = ctx;
    d->cp.stats[ST_control_requests]++;
    while (*line == ' ') line++;
    if (!strncmp(line, "add ", 4)) {
        route_cfg r;
        if (parse_route(&d->cfg, line + 4, &r)) {
            ctl_printf(k, "error: cannot read the route '%s' (PREFIX/LEN via NEXTHOP [port P])\n", line + 4);
            return;
        }
        char why[200];
        if (cfg_route_problem(&d->cfg, &r, why, sizeof why) ||   /* the rules every route meets */
            npkd_change_problem(r.prefix, r.len, why, sizeof why)) {
            d->cp.stats[ST_route_errors]++;
            ctl_printf(k, "error: %s\n", why);
            return;
        }
        int rc = cp_route_add(&d->cp, &r, CHG_SOCKET);
        ctl_printf(k, rc ? "error: route not added (%d)\n" : "ok\n", rc);
        return;
    }
    if (!strncmp(line, "del ", 4)) {
        route_cfg r;
        char buf[64];
        snprintf(buf, sizeof buf, "%s dev 0", line + 4);
        if (parse_route(&d->cfg, buf, &r)) {
            ctl_printf(k, "error: cannot read the prefix '%s'\n", line + 4);
            return;
        }
        char why[200];
        if (npkd_change_problem(r.prefix, r.len, why, sizeof why)) {
            d->cp.stats[ST_route_errors]++;
            ctl_printf(k, "error: %s\n", why);
            return;
        }
        int rc = cp_route_del(&d->cp, r.prefix, r.len, CHG_SOCKET);
        ctl_printf(k, rc == -4 ? "error: no such route\n" : rc ? "error: route not deleted (%d)\n" : "ok\n", rc);
        return;
    }
    if (!strncmp(line, "show", 4) && (line[4] == 0 || line[4] == ' ')) {
        ensure_tables(d);
        uint32_t a, prefix, nh;
        int len;
        const char *rest = line + 4, *end;
        while (*rest == ' ') rest++;
        if (*rest) {                              /* show A.B.C.D: that address, or an error */
            if (parse_ip(rest, &a, &end) || end[strspn(end, " ")]) {
                ctl_printf(k, "error: cannot read the address '%s' (show [A.B.C.D])\n", rest);
                return;
            }
            if (lpm_match(&d->tab.trie, a, &prefix, &len, &nh)) show_entry(d, k, prefix, len, nh);
            uint32_t walked = lpm_walk(&d->mem, &d->cfg.lay, a);
            ctl_printf(k, "fast path: index %u\nok\n", walked);
            return;
        }
        k->cursor[0] = k->cursor[1] = 0;          /* the whole table: in steps (show_more) */
        k->more = show_more;
        return;
    }
    if (!strcmp(line, "stats")) {
        cp_publish(&d->cp, d->state, d->starts);
        ctl_printf(k, "state %s\nstarts %u\n", d->cp.tables_ready ? "ready" : "loading", d->starts);
        for (int i = 0; i < ST_COUNT; i++) ctl_printf(k, "%s %u\n", cp_stat_name(i), d->cp.stats[i]);
        const ctl_counts *n = &c->n;              /* the socket's own (ctl.h: its limits) */
        ctl_printf(k, "control_accepted %u\ncontrol_evicted %u\ncontrol_idle_closed %u\n"
                      "control_overflow_closed %u\ncontrol_lines_too_long %u\n",
                   n->accepted, n->evicted, n->idle_closed, n->overflow_closed, n->lines_too_long);
        ctl_printf(k, "ok\n");
        return;
    }
    if (!strcmp(line, "arp")) {
        for (uint32_t i = 0; i < d->cp.narp; i++) {
            const arp_ent *e = &d->cp.arp[i];
            char ip[16];
            fmt_ip(ip, e->ip);
            ctl_printf(k, "%s %02x:%02x:%02x:%02x:%02x:%02x port %u %s\n", ip, e->mac[0], e->mac[1], e->mac[2],
                       e->mac[3], e->mac[4], e->mac[5], e->port,
                       e->state == ARP_REACHABLE ? "reachable" : e->state == ARP_INCOMPLETE ? "incomplete" : "none");
        }
        ctl_printf(k, "ok\n");
        return;
    }
    if (!strncmp(line, "flow ", 5)) {
        flow_cmd(d, k, line + 5);
        return;
    }
    if (!strncmp(line, "plugin ", 7)) {
        plugin_cmd(d, k, line + 7);
        return;
    }
    if (!strcmp(line, "restart")) {
        ensure_tables(d);
        ctl_printf(k, "ok restarting\n");
        d->restart = 1;
        return;
    }
    ctl_printf(k, "error: unknown command '%s' (add, del, show, stats, arp, restart, flow, plugin)\n", line);
}

/* ---- the loop ------------------------------------------------------------------------------------- */

static void wait_for_work(npkd_state *d, uint64_t deadline)
{
    d->now = npk_dev_now_ns(&d->dev);        /* the turn of the loop took time: sleep to the deadline */
#ifdef NPK_GPE
    if (d->ctl.lfd >= 0 && deadline > d->now + 1000000u) deadline = d->now + 1000000u;   /* look at the socket */
    if (d->cp.spp_mode && deadline > d->now + 5000u) deadline = d->now + 5000u;   /* i3d's relay: no interrupt */
    if (d->ctl.lfd >= 0 && ctl_pending(&d->ctl)) return;   /* a command read waits for its turn */
    if (npk_dev_wait_until(&d->dev, deadline) < 0) die("device wait failed");
#else
    struct pollfd p[1 + 1 + CTL_CONNS];
    p[0] = (struct pollfd){d->dev.fd, POLLIN, 0};
    int n = 1 + ctl_pollfds(&d->ctl, p + 1, 1 + CTL_CONNS);
    int rc;
    if (deadline == UINT64_MAX) {
        rc = poll(p, (nfds_t)n, -1);
    } else {
        uint64_t left = deadline > d->now ? deadline - d->now : 0;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        rc = ppoll(p, (nfds_t)n, &ts, NULL);
    }
    if (rc < 0 && errno != EINTR) die("poll failed: %s", strerror(errno));
    if (rc > 0 && (p[0].revents & POLLIN) && npk_dev_wait(&d->dev) < 0) die("device read failed");
#endif
}

static int run(npkd_state *d)
{
    npkd_cfg *g = &d->cfg;
    for (;;) {
        d->now = npk_dev_now_ns(&d->dev);
        int n = cp_poll(&d->cp, (int)g->opt.batch);
        d->cp.stats[ST_wakeups]++;
        cp_timers(&d->cp);
        timed_changes(d);
        ctl_service(&d->ctl);
        if (d->restart && ctl_flush_all(&d->ctl)) return EXIT_RESTART;
        cp_publish(&d->cp, d->state, d->starts);   /* the host reads it at any time */
        /* the route model in steps, and after a restart (which loads eagerly) the walk that
         * finds the trie's units the previous daemon had free (LAYOUT.md §7 rule 7) */
        if (d->load_eagerly && (!d->cp.tables_ready || lpm_walking(&d->tab.trie))) {
            if (!d->cp.tables_ready)
                load_some(d, g->opt.load_chunk);
            else
                lpm_recover_step(&d->tab.trie, 16 * g->opt.load_chunk);
            continue;
        }
        if (n >= (int)g->opt.batch || d->restart) {
            sched_yield();      /* busy: still a point where the kernel can act (a signal, a kill) */
            continue;
        }
        uint64_t deadline = cp_deadline(&d->cp);
        if (d->next_change < g->nchg && g->chg[d->next_change].at_ns < deadline) deadline = g->chg[d->next_change].at_ns;
        if (d->cp.bl_n && d->now + 10000u < deadline) deadline = d->now + 10000u;   /* the ring had no room */
        wait_for_work(d, deadline);
    }
}

int main(int argc, char **argv)
{
    static npkd_state d;
    char err[700];
    const char *image = NULL, *conf = NULL;
    uint32_t sram_ch = 8u << 20, dram = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--build-image") && i + 1 < argc) image = argv[++i];
        else if (!strncmp(argv[i], "--sram-channel-bytes=", 21)) sram_ch = (uint32_t)strtoul(argv[i] + 21, NULL, 0);
        else if (argv[i][0] != '-' && !conf) conf = argv[i];
        else die("usage: npkd [--build-image OUT] [--sram-channel-bytes=N] CONF");
    }
    if (!conf) die("usage: npkd [--build-image OUT] [--sram-channel-bytes=N] CONF");
    cfg_init(&d.cfg);
    if (cfg_load(&d.cfg, conf, err, sizeof err)) die("%s", err);
    if (image) {
        if (build_image(&d.cfg, image, err, sizeof err)) die("%s", err);
        return 0;
    }
    dram = d.cfg.sys.buf_base + (d.cfg.sys.n_bufs << d.cfg.sys.buf_shift);
    map_memories(&d, sram_ch, dram);
    d.now = npk_dev_now_ns(&d.dev);
    int again = d.cfg.stats_base && npkd_sram_rd(&d.mem, d.cfg.stats_base) == NPKD_STATS_MAGIC;
    if (again) d.starts = npkd_sram_rd(&d.mem, d.cfg.stats_base + 12);
    d.starts++;
    if (tables_init(&d.tab, &d.cfg, &d.mem)) die("out of memory");
    d.tab.clock = clock_now;
    d.tab.clock_ctx = &d;
    d.tab.started_ns = d.now;
    npkd_hw hw = {&d, hw_ring_get, hw_ring_put, hw_ring_free, hw_queue_get, hw_queue_put, hw_now};
    cp_init(&d.cp, &d.cfg, &d.mem, &d.tab, &hw);
    if (again)                         /* a restart: the counters go on from where they were */
        for (uint32_t i = 0; i < ST_COUNT; i++)
            d.cp.stats[i] = npkd_sram_rd(&d.mem, d.cfg.stats_base + NPKD_STATS_HDR + 4 * i);
    d.cp.stats[ST_holding] = d.cp.stats[ST_tx_backlog] = 0;
    cp_reclaim(&d.cp, again);          /* the buffers a killed predecessor held: back to the free list */
    d.cp.ensure_tables = ensure_tables;
    d.cp.ensure_ctx = &d;
    d.cp.journal = journal_write;
    d.journal_fd = -1;
    d.cp.epoch_ms_of_day = (uint32_t)(d.cfg.opt.epoch_s % 86400u) * 1000u;
    if (tables_load_begin(&d.tab, &d.load, 0, d.cfg.state_path)) die("%s", d.load.err);
    if (d.starts > 1) d.load.restart = 1;
    d.load.on_withdraw = log_withdrawal;
    d.load.on_withdraw_ctx = &d;
    /* The fast path's table is in SRAM already (the linker wrote it, or the previous
     * instance): the daemon serves exceptions from it at once.  Its own model of the
     * table (to change it) is built in the background between exceptions when routes may
     * change (timed changes, a control socket, a restart to recover from); otherwise on
     * the first change that needs it. */
    d.load_eagerly = d.cfg.nchg > 0 || d.cfg.socket_path[0] || d.starts > 1;
    d.state = d.load_eagerly ? 1 : 3;
    int rc = ctl_open(&d.ctl, d.cfg.socket_path);
    if (rc) die("control socket %s: %s", d.cfg.socket_path, strerror(-rc));
    d.ctl.handle = handle;
    d.ctl.ctx = &d;
    d.ctl.now_ns = &d.now;
    d.ctl.idle_ns = (uint64_t)d.cfg.opt.ctl_idle_us * 1000u;
    d.ctl.out_max = d.cfg.opt.ctl_answer_max;
    if (d.starts > 1 && d.cfg.state_path[0])
        d.next_change = d.cfg.nchg;    /* none until the journal says which are still to make (load_some) */
    else if (d.starts == 1)            /* the first start: those due before it are made late, not skipped */
        d.late_before = d.now;
    else                               /* started again with no journal: the past ones are taken as made */
        while (d.next_change < d.cfg.nchg && d.cfg.chg[d.next_change].at_ns < d.now) d.next_change++;
#ifdef NPK_GPE
    cp_spp_start(&d.cp);               /* SPP mode (spp.c): beside i3d, records on its relay ring */
#endif
    cp_publish(&d.cp, d.state, d.starts);
    rc = run(&d);
    ctl_close(&d.ctl);
    return rc;
}
