/* cmd.c -- i3d's control commands (`npk slice`, `npk filter`, `npk finger` over the
 * control socket; the answer's last line is "ok" or "error: ...").
 *
 *   slice show [SLICE]
 *   slice add ID NAME ipv4|i3 [share PPM] [index I] [mi NAME PORT A.B.C.D:UDP]...
 *             [node ID pred ID]
 *   slice del SLICE                    (refused while it has filters)
 *   filter show [SLICE]
 *   filter add SLICE FIELDS...         (parse.h p_filter; answers "filter N entry E|gpe")
 *   filter del N | filter fast N | filter slow N   (put its TCAM filter in / take it out,
 *                                      keep it); ... slice SLICE: every filter of the slice
 *   finger show SLICE
 *   finger set SLICE K OUT A.B.C.D:UDP [node ID] | finger del SLICE K
 *   node add SLICE ID OUT A.B.C.D:UDP | node del SLICE ID   (fingers follow the nodes)
 *   stats
 * SLICE is an id or a name; MI a meta-interface name (or index) of that slice. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "i3d.h"
#include "parse.h"

typedef struct reply {
    i3d_out out;
    void *ctx;
} reply;

__attribute__((format(printf, 2, 3))) static void say(reply *r, const char *fmt, ...)
{
    char b[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    r->out(r->ctx, b);
}

static void fail(i3d *d, reply *r, const char *why)
{
    d->stats[I3S_control_errors]++;
    say(r, "error: %s\n", why);
}

/* ---- slices ---------------------------------------------------------------------------------- */

static void show_slice(i3d *d, reply *r, const i3_slice *sl)
{
    char line[600], a[16];
    size_t at = (size_t)snprintf(line, sizeof line, "slice %u name %s index %u code %s share_ppm %u filters %u",
                                 sl->id, sl->name, sl->index, sl->code == CODE_I3 ? "i3" : "ipv4", sl->share_ppm,
                                 flt_count_slice(&d->st, sl->id));
    for (int i = 0; i < I3_MAX_MIS && at < sizeof line; i++) {
        const i3_mi *m = &d->st.mi[i];
        if (!m->used || m->slice != sl->id) continue;
        p_fmt_ip(a, m->ip);
        at += (size_t)snprintf(line + at, sizeof line - at, " mi %s:%d:%u:%s:%u", m->name, i, m->port, a, m->udp);
    }
    if (sl->code == CODE_I3 && at < sizeof line)
        snprintf(line + at, sizeof line - at, " node 0x%016llx pred 0x%016llx", (unsigned long long)sl->ring.self,
                 (unsigned long long)sl->ring.pred);
    say(r, "%s\n", line);
}

/* a meta-interface table row (spp.md §4.1): the valid word last (cleared first to remove) */
static void mi_row(i3d *d, int i, int valid)
{
    if (!d->mitable || (uint32_t)i >= d->mirows) return;
    uint32_t a = d->mitable + 16u * (uint32_t)i;
    npkd_sram_wr(d->mem, a + 12, 0);
    if (!valid) return;
    const i3_mi *m = &d->st.mi[i];
    const i3_slice *sl = slice_get(&d->st, m->slice);
    npkd_sram_wr(d->mem, a, m->ip);
    npkd_sram_wr(d->mem, a + 4, (uint32_t)m->udp << 16 | (uint32_t)m->port << 8 | (sl ? sl->code : 0));
    npkd_sram_wr(d->mem, a + 8, (uint32_t)m->slice << 16 | (sl ? sl->index : 0));
    npkd_sram_wr(d->mem, a + 12, 0x80000000u);
}

/* the table's generation word (spp.md §4.1): bumped after the rows of a slice went in or
 * out, so that the spp block copies the table into its local memory again */
static void mi_publish(i3d *d)
{
    if (!d->migen) return;
    npkd_sram_wr(d->mem, d->migen, npkd_sram_rd(d->mem, d->migen) + 1u);
}

/* a daemon started again: the rows its predecessor added (`slice add`) are unknown to this
 * one -- out of the demux (the link's rows, in its store, stay).  Returns the rows cleared. */
int i3d_mi_sync(i3d *d)
{
    int n = 0;
    for (uint32_t i = 0; d->mitable && i < d->mirows; i++) {
        uint32_t a = d->mitable + 16u * i;
        if (!(npkd_sram_rd(d->mem, a + 12) >> 31) || (i < I3_MAX_MIS && d->st.mi[i].used)) continue;
        npkd_sram_wr(d->mem, a + 12, 0);
        n++;
    }
    if (n) mi_publish(d);
    return n;
}

static int next_index(i3d *d)
{
    for (int i = 0; i < 255; i++)
        if (!slice_by_index(&d->st, (uint8_t)i)) return i;
    return -1;
}

static void slice_add_cmd(i3d *d, reply *r, char **t, int k)
{
    char why[300];
    i3_slice sl;
    uint32_t id, v;
    memset(&sl, 0, sizeof sl);
    if (k < 5 || p_u32(t[2], &id, 4095)) {
        fail(d, r, "slice add ID NAME ipv4|i3 [share PPM] [index I] "
                   "[mi NAME PORT A.B.C.D:UDP]... [node ID pred ID]");
        return;
    }
    if (strlen(t[3]) >= I3_NAME) {
        fail(d, r, "a slice name has at most 32 characters");
        return;
    }
    sl.id = (uint16_t)id;
    strcpy(sl.name, t[3]);
    sl.code = !strcmp(t[4], "i3") ? CODE_I3 : !strcmp(t[4], "ipv4") ? CODE_IPV4 : 0;
    int index = next_index(d), nmi = 0, have_node = 0;
    i3_mi mis[8];
    for (int i = 5; i < k; i++) {
        if (!strcmp(t[i], "share") && i + 1 < k && !p_u32(t[i + 1], &v, 1000000)) {
            sl.share_ppm = v, i++;
        } else if (!strcmp(t[i], "index") && i + 1 < k && !p_u32(t[i + 1], &v, 254)) {
            index = (int)v, i++;
        } else if (!strcmp(t[i], "mi") && i + 3 < k && nmi < 8) {
            i3_mi *m = &mis[nmi++];
            memset(m, 0, sizeof *m);
            if (strlen(t[i + 1]) >= I3_NAME || p_u32(t[i + 2], &v, 255) || p_hop(t[i + 3], &m->ip, &m->udp)) {
                fail(d, r, "mi NAME PORT A.B.C.D:UDP");
                return;
            }
            strcpy(m->name, t[i + 1]);
            m->port = (uint8_t)v;
            m->slice = sl.id;
            i += 3;
        } else if (!strcmp(t[i], "node") && i + 3 < k && !strcmp(t[i + 2], "pred") &&
                   !p_u64(t[i + 1], &sl.ring.self) && !p_u64(t[i + 3], &sl.ring.pred)) {
            have_node = 1, i += 3;
        } else {
            snprintf(why, sizeof why, "cannot read '%s' (share PPM, index I, mi NAME PORT A.B.C.D:UDP, node ID pred ID)", t[i]);
            fail(d, r, why);
            return;
        }
    }
    if (index < 0) {
        fail(d, r, "no free slice index");
        return;
    }
    if (sl.code == CODE_I3 && !have_node) {
        fail(d, r, "an i3 slice needs node ID pred ID");
        return;
    }
    sl.index = (uint8_t)index;
    for (int i = 0; i < nmi; i++)
        if (mi_of(&d->st, mis[i].port, mis[i].ip, mis[i].udp) >= 0) {
            fail(d, r, "a meta-interface is taken");
            return;
        }
    if (slice_add(&d->st, &sl, why, sizeof why)) {
        fail(d, r, why);
        return;
    }
    for (int i = 0; i < nmi; i++) {
        int at = mi_add(&d->st, -1, &mis[i], why, sizeof why);
        if (at >= 0 && d->mitable && (uint32_t)at >= d->mirows) {
            for (int j = 0; j < I3_MAX_MIS; j++)
                if (d->st.mi[j].used && d->st.mi[j].slice == sl.id) mi_row(d, j, 0);
            mi_publish(d);
            slice_del(&d->st, sl.id, why, sizeof why);
            fail(d, r, "the meta-interface table is full");
            return;
        }
        if (at < 0) {
            slice_del(&d->st, sl.id, why, sizeof why);
            fail(d, r, "meta-interfaces: no room, or a name twice");
            return;
        }
        mi_row(d, at, 1);
    }
    if (nmi) mi_publish(d);
    i3_slice *in = slice_get(&d->st, sl.id);
    show_slice(d, r, in);
    say(r, "ok\n");
}

static void slice_cmd(i3d *d, reply *r, char **t, int k)
{
    char why[300];
    if (k >= 2 && !strcmp(t[1], "show")) {
        if (k == 3) {
            i3_slice *sl = p_slice(&d->st, t[2]);
            if (!sl) {
                fail(d, r, "no such slice");
                return;
            }
            show_slice(d, r, sl);
        } else {
            for (int idx = 0; idx < 256; idx++)
                for (int i = 0; i < I3_MAX_SLICES; i++)
                    if (d->st.slice[i].id && d->st.slice[i].index == idx) show_slice(d, r, &d->st.slice[i]);
        }
        say(r, "ok\n");
        return;
    }
    if (k >= 2 && !strcmp(t[1], "add")) {
        slice_add_cmd(d, r, t, k);
        return;
    }
    if (k == 3 && !strcmp(t[1], "del")) {
        i3_slice *sl = p_slice(&d->st, t[2]);
        if (!sl) {
            fail(d, r, "no such slice");
            return;
        }
        uint16_t id = sl->id;
        if (flt_count_slice(&d->st, id)) {
            snprintf(why, sizeof why, "slice %u still has %u filter(s): delete them first", id, flt_count_slice(&d->st, id));
            fail(d, r, why);
            return;
        }
        for (int i = 0; i < I3_MAX_MIS; i++)
            if (d->st.mi[i].used && d->st.mi[i].slice == id) mi_row(d, i, 0);   /* out of the demux first */
        mi_publish(d);
        if (slice_del(&d->st, id, why, sizeof why)) {
            fail(d, r, why);
            return;
        }
        say(r, "ok\n");
        return;
    }
    fail(d, r, "slice show [SLICE] | slice add ... | slice del SLICE");
}

/* ---- filters --------------------------------------------------------------------------------- */

static void show_filter(i3d *d, reply *r, const i3_filter *f)
{
    char text[400];
    p_fmt_filter(text, sizeof text, &d->st, f);
    if (f->entry >= 0)
        say(r, "filter %u slice %u entry %d %s hits %u\n", f->handle, f->slice, f->entry, text, f->hits);
    else
        say(r, "filter %u slice %u entry - %s hits %u\n", f->handle, f->slice, text, f->hits);
}

/* A filter into the TCAM.  The mirror is published first, with the filter marked fast:
 * whoever judges a frame the fast path forwards by the new entry already has it (the
 * daemon may be stopped between any two of its writes).  Removals publish after. */
static int install(i3d *d, i3_filter *f)
{
    f->fast = 1;
    i3d_mirror(d);
    if (fast_filter_install(&d->fp, &d->st, f)) {
        d->stats[I3S_tcam_full]++;
        return -1;
    }
    d->stats[I3S_filters_installed]++;
    d->changed_ns = d->hw.now_ns(d->hw.ctx);       /* the entry is valid from here */
    return 0;
}

static void uninstall(i3d *d, i3_filter *f)
{
    if (f->entry < 0) return;
    fast_filter_remove(&d->fp, f);
    d->stats[I3S_filters_removed]++;
    d->changed_ns = d->hw.now_ns(d->hw.ctx);
}

/* del, fast or slow one filter: 0, or -1 after an error line */
static int filter_verb(i3d *d, reply *r, const char *verb, i3_filter *f)
{
    if (!strcmp(verb, "fast")) {
        if (f->entry < 0 && install(d, f)) {
            fail(d, r, "no free TCAM entry");
            return -1;
        }
        f->fast = 1;
        show_filter(d, r, f);
        return 0;
    }
    uninstall(d, f);                                  /* out of the TCAM first */
    f->fast = 0;
    if (!strcmp(verb, "del")) flt_remove(&d->st, f->handle);
    else show_filter(d, r, f);
    return 0;
}

static void filter_cmd(i3d *d, reply *r, char **t, int k)
{
    char why[300];
    uint32_t h;
    if (k >= 2 && !strcmp(t[1], "show")) {
        i3_slice *sl = k == 3 ? p_slice(&d->st, t[2]) : NULL;
        if (k == 3 && !sl) {
            fail(d, r, "no such slice");
            return;
        }
        for (uint32_t i = 0; i < d->st.nflt; i++)
            if (!sl || d->st.flt[i].slice == sl->id) show_filter(d, r, &d->st.flt[i]);
        say(r, "ok\n");
        return;
    }
    if (k >= 3 && !strcmp(t[1], "add")) {
        i3_slice *sl = p_slice(&d->st, t[2]);
        i3_filter f;
        if (!sl) {
            fail(d, r, "no such slice");
            return;
        }
        if (p_filter(&d->st, sl, t + 3, k - 3, &f, why, sizeof why)) {
            fail(d, r, why);
            return;
        }
        h = flt_add(&d->st, &f, why, sizeof why);
        if (!h) {
            fail(d, r, why);
            return;
        }
        i3_filter *in = flt_get(&d->st, h);
        if (in->fast && install(d, in)) in->fast = 0;      /* no free entry: the GPE's alone */
        show_filter(d, r, in);
        say(r, "ok\n");
        return;
    }
    if ((k == 3 || (k == 4 && !strcmp(t[2], "slice"))) &&
        (!strcmp(t[1], "del") || !strcmp(t[1], "fast") || !strcmp(t[1], "slow"))) {
        if (k == 3) {                                      /* one filter, by its handle */
            i3_filter *f = p_u32(t[2], &h, 0xFFFFFFFFu) ? NULL : flt_get(&d->st, h);
            if (!f) {
                fail(d, r, "no such filter (filter show lists them)");
                return;
            }
            if (filter_verb(d, r, t[1], f) == 0) say(r, "ok\n");
            return;
        }
        i3_slice *sl = p_slice(&d->st, t[3]);             /* every filter of a slice */
        if (!sl) {
            fail(d, r, "no such slice");
            return;
        }
        for (uint32_t i = 0; i < d->st.nflt;) {
            i3_filter *f = &d->st.flt[i];
            uint32_t n = d->st.nflt;
            if (f->slice != sl->id) {
                i++;
                continue;
            }
            if (filter_verb(d, r, t[1], f)) return;
            if (d->st.nflt == n) i++;                      /* del removed it: the next moved here */
        }
        say(r, "ok\n");
        return;
    }
    fail(d, r, "filter show [SLICE] | filter add SLICE FIELDS... | filter del|fast|slow N | ... slice SLICE");
}

/* ---- fingers and nodes ------------------------------------------------------------------------- */

static void set_finger(i3d *d, i3_slice *sl, int k, const i3_finger *g)
{
    sl->ring.finger[k] = *g;
    fast_finger_write(&d->fp, sl, k, g);
    d->stats[I3S_fingers_written]++;
}

static void refingers(i3d *d, i3_slice *sl)
{
    i3_finger f[I3_FINGERS];
    fingers_compute(&sl->ring, f);
    for (int k = 0; k < I3_FINGERS; k++)
        if (memcmp(&f[k], &sl->ring.finger[k], sizeof f[k])) set_finger(d, sl, k, &f[k]);
}

static void finger_cmd(i3d *d, reply *r, char **t, int k)
{
    char a[16], why[300];
    uint32_t kk;
    i3_slice *sl = k >= 3 ? p_slice(&d->st, t[2]) : NULL;
    if (k >= 3 && (!sl || sl->code != CODE_I3)) {
        fail(d, r, "no such i3 slice");
        return;
    }
    if (k == 3 && !strcmp(t[1], "show")) {
        say(r, "slice %u node 0x%016llx pred 0x%016llx\n", sl->id, (unsigned long long)sl->ring.self,
            (unsigned long long)sl->ring.pred);
        for (int i = 0; i < I3_FINGERS; i++) {
            const i3_finger *g = &sl->ring.finger[i];
            if (!g->valid) continue;
            p_fmt_ip(a, g->hop.ip);
            say(r, "finger %d out %s next_hop %s:%u node 0x%016llx\n", i, d->st.mi[g->hop.out].name, a, g->hop.udp,
                (unsigned long long)g->node);
        }
        say(r, "ok\n");
        return;
    }
    if ((k == 6 || k == 8) && !strcmp(t[1], "set") && !p_u32(t[3], &kk, I3_FINGERS - 1)) {
        i3_finger g;
        memset(&g, 0, sizeof g);
        int out = p_mi(&d->st, sl->id, t[4]);
        if (out < 0 || p_hop(t[5], &g.hop.ip, &g.hop.udp) || (k == 8 && (strcmp(t[6], "node") || p_u64(t[7], &g.node)))) {
            fail(d, r, "finger set SLICE K OUT A.B.C.D:UDP [node ID] (OUT: a meta-interface of the slice)");
            return;
        }
        g.hop.out = (uint8_t)out;
        g.valid = 1;
        set_finger(d, sl, (int)kk, &g);
        say(r, "ok\n");
        return;
    }
    if (k == 4 && !strcmp(t[1], "del") && !p_u32(t[3], &kk, I3_FINGERS - 1)) {
        i3_finger g;
        memset(&g, 0, sizeof g);
        set_finger(d, sl, (int)kk, &g);
        say(r, "ok\n");
        return;
    }
    (void)why;
    fail(d, r, "finger show SLICE | finger set SLICE K OUT A.B.C.D:UDP [node ID] | finger del SLICE K");
}

static void node_cmd(i3d *d, reply *r, char **t, int k)
{
    char why[300];
    uint64_t id;
    i3_slice *sl = k >= 4 ? p_slice(&d->st, t[2]) : NULL;
    if (k >= 4 && (!sl || sl->code != CODE_I3)) {
        fail(d, r, "no such i3 slice");
        return;
    }
    if (k == 6 && !strcmp(t[1], "add") && !p_u64(t[3], &id)) {
        i3_hop hop;
        int out = p_mi(&d->st, sl->id, t[4]);
        if (out < 0 || p_hop(t[5], &hop.ip, &hop.udp)) {
            fail(d, r, "node add SLICE ID OUT A.B.C.D:UDP");
            return;
        }
        hop.out = (uint8_t)out;
        if (node_add(&sl->ring, id, &hop, why, sizeof why)) {
            fail(d, r, why);
            return;
        }
        refingers(d, sl);
        say(r, "ok\n");
        return;
    }
    if (k == 4 && !strcmp(t[1], "del") && !p_u64(t[3], &id)) {
        if (!node_del(&sl->ring, id)) {
            fail(d, r, "no such node");
            return;
        }
        refingers(d, sl);
        say(r, "ok\n");
        return;
    }
    fail(d, r, "node add SLICE ID OUT A.B.C.D:UDP | node del SLICE ID");
}

void i3d_command(i3d *d, char *line, i3d_out out, void *ctx)
{
    reply r = {out, ctx};
    char *t[P_MAX_TOKENS];
    d->stats[I3S_control_requests]++;
    int k = p_split(line, t, P_MAX_TOKENS);
    if (k < 0) {
        fail(d, &r, "too many words");
        return;
    }
    if (k == 0) {
        fail(d, &r, "an empty command (slice, filter, finger, node, stats)");
        return;
    }
    if (!strcmp(t[0], "slice")) {
        slice_cmd(d, &r, t, k);
        return;
    }
    if (!strcmp(t[0], "filter")) {
        filter_cmd(d, &r, t, k);
        return;
    }
    if (!strcmp(t[0], "finger")) {
        finger_cmd(d, &r, t, k);
        return;
    }
    if (!strcmp(t[0], "node")) {
        node_cmd(d, &r, t, k);
        return;
    }
    if (!strcmp(t[0], "stats") && k == 1) {
        for (int i = 0; i < I3S_COUNT; i++) say(&r, "%s %u\n", i3d_stat_name(i), d->stats[i]);
        say(&r, "tcam_entries_used %u\ngpe_delay_samples %llu\ngpe_delay_max_ns %llu\n", fast_filters_used(&d->fp),
            (unsigned long long)d->lat_n, (unsigned long long)d->lat_max);
        say(&r, "ok\n");
        return;
    }
    char why[300];
    snprintf(why, sizeof why, "unknown command '%s' (slice, filter, finger, node, stats)", t[0]);
    fail(d, &r, why);
}

static void to_stderr(void *ctx, const char *text)
{
    (void)ctx;
    fputs(text, stderr);
}

int i3d_timed_due(i3d *d)
{
    int n = 0;
    while (d->next_timed < d->ntimed && d->timed[d->next_timed].at_ns <= d->now) {
        char line[I3D_TIMED_LINE];
        memcpy(line, d->timed[d->next_timed++].line, sizeof line);
        fprintf(stderr, "i3d: at %llu ns: %s\n", (unsigned long long)d->now, line);
        i3d_command(d, line, to_stderr, NULL);
        n++;
    }
    if (n) i3d_mirror(d);
    return n;
}

uint64_t i3d_timed_next(const i3d *d)
{
    return d->next_timed < d->ntimed ? d->timed[d->next_timed].at_ns : UINT64_MAX;
}
