/* i3cfg.c -- i3d's configuration, written by npkit (npkit.toolchain.system.i3d.i3d_conf)
 * from the SPP application's slice file, the chip config's TCAM and the system map; one
 * directive a line, numbers decimal or 0x hex, `#` starts a comment:
 *
 *   sys DESC_BASE DESC_SHIFT N_BUFS BUF_BASE BUF_SHIFT FREELIST_Q
 *   rings EXCEPTIONS CONTROL [RELAY [BACK]]  scratch rings: records in, frames out, and where
 *                                         records of other slices go (npkd's ring)
 *   tcam ENTRY0 ENTRIES FIRST COUNT       TCAM entry 0's SRAM address, its entries, the
 *                                         daemon's own [FIRST, FIRST + COUNT)
 *   mitable BASE ROWS [GEN]               the meta-interface table (spp.md §4.1): its rows, its generation word
 *   port INDEX MAC                        a physical port's MAC (outgoing Ethernet source)
 *   arp A.B.C.D MAC                       a next hop's MAC
 *   slice INDEX ID NAME ipv4|i3 SHARE_PPM
 *   mi INDEX SLICE NAME PORT A.B.C.D:UDP  a meta-interface (global index)
 *   ring SLICE NODE_ID PREDECESSOR BLOCK  an i3 slice's range and its finger block
 *   finger SLICE K OUT A.B.C.D:UDP [node ID]
 *   filter SLICE ENTRY|- FIELDS...        a filter of the slice file (in TCAM entry ENTRY,
 *                                         or - for none): FIELDS as `npk filter add`
 *   stats BASE                            the statistics block (i3d.h)
 *   socket PATH                           the control socket
 *   option NAME VALUE                     tunables (i3d.h I3D_OPTIONS)
 *   at NS COMMAND...                      a control command made at emulated time NS (ns;
 *                                         in ascending order) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "i3d.h"
#include "parse.h"

static int mac_of(const char *s, uint8_t m[6])
{
    unsigned v[6];
    char tail;
    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) return -1;
    for (int i = 0; i < 6; i++) m[i] = (uint8_t)v[i];
    return 0;
}

static int nums(char **tok, int n, uint32_t *v)
{
    for (int i = 0; i < n; i++)
        if (p_u32(tok[i], &v[i], 0xFFFFFFFFu)) return i + 1;
    return 0;
}

#define FAIL(...) return snprintf(err, n, __VA_ARGS__), -1

static int d_slice(i3d *d, char **t, int k, char *err, size_t n)
{
    i3_slice sl;
    uint32_t idx, id, ppm;
    memset(&sl, 0, sizeof sl);
    if (k != 6 || p_u32(t[1], &idx, 254) || p_u32(t[2], &id, 4095) || p_u32(t[5], &ppm, 1000000))
        FAIL("slice INDEX ID NAME ipv4|i3 SHARE_PPM");
    if (strlen(t[3]) >= I3_NAME) FAIL("slice name %s: at most %d characters", t[3], I3_NAME - 1);
    sl.index = (uint8_t)idx;
    sl.id = (uint16_t)id;
    sl.share_ppm = ppm;
    strcpy(sl.name, t[3]);
    sl.code = !strcmp(t[4], "i3") ? CODE_I3 : !strcmp(t[4], "ipv4") ? CODE_IPV4 : 0;
    sl.ring.self = 1;                      /* until its ring line: not the predecessor */
    return slice_add(&d->st, &sl, err, n);
}

static int d_mi(i3d *d, char **t, int k, char *err, size_t n)
{
    i3_mi m;
    uint32_t idx, sid, port;
    memset(&m, 0, sizeof m);
    if (k != 6 || p_u32(t[1], &idx, I3_MAX_MIS - 1) || p_u32(t[2], &sid, 4095) || p_u32(t[4], &port, 255) ||
        p_hop(t[5], &m.ip, &m.udp))
        FAIL("mi INDEX SLICE NAME PORT A.B.C.D:UDP");
    if (!slice_get(&d->st, (uint16_t)sid)) FAIL("mi: no slice %u (its slice line first)", sid);
    if (strlen(t[3]) >= I3_NAME) FAIL("mi name %s: at most %d characters", t[3], I3_NAME - 1);
    strcpy(m.name, t[3]);
    m.slice = (uint16_t)sid;
    m.port = (uint8_t)port;
    return mi_add(&d->st, (int)idx, &m, err, n) < 0 ? -1 : 0;
}

static int d_ring(i3d *d, char **t, int k, char *err, size_t n)
{
    uint64_t self, pred;
    uint32_t block;
    i3_slice *sl = k == 5 ? p_slice(&d->st, t[1]) : NULL;
    if (k != 5 || p_u64(t[2], &self) || p_u64(t[3], &pred) || p_u32(t[4], &block, 0xFFFFFFFFu))
        FAIL("ring SLICE NODE_ID PREDECESSOR BLOCK");
    if (!sl || sl->code != CODE_I3) FAIL("ring: %s is not an i3 slice", t[1]);
    if (self == pred) FAIL("ring: the node id must differ from its predecessor's");
    sl->ring.self = self;
    sl->ring.pred = pred;
    sl->ring.block = block;
    return 0;
}

static int d_finger(i3d *d, char **t, int k, char *err, size_t n)
{
    uint32_t kk;
    i3_finger g;
    memset(&g, 0, sizeof g);
    i3_slice *sl = k >= 5 ? p_slice(&d->st, t[1]) : NULL;
    if ((k != 5 && k != 7) || p_u32(t[2], &kk, I3_FINGERS - 1) || p_hop(t[4], &g.hop.ip, &g.hop.udp) ||
        (k == 7 && (strcmp(t[5], "node") || p_u64(t[6], &g.node))))
        FAIL("finger SLICE K OUT A.B.C.D:UDP [node ID]");
    if (!sl || sl->code != CODE_I3) FAIL("finger: %s is not an i3 slice", t[1]);
    int out = p_mi(&d->st, sl->id, t[3]);
    if (out < 0) FAIL("finger: %s is not a meta-interface of slice %u", t[3], sl->id);
    g.hop.out = (uint8_t)out;
    g.valid = 1;
    sl->ring.finger[kk] = g;
    return 0;
}

static int d_filter(i3d *d, char **t, int k, char *err, size_t n)
{
    i3_slice *sl = k >= 3 ? p_slice(&d->st, t[1]) : NULL;
    uint32_t e = 0;
    if (k < 3 || (strcmp(t[2], "-") && p_u32(t[2], &e, 0xFFFFFFFFu))) FAIL("filter SLICE ENTRY|- FIELDS...");
    if (!sl) FAIL("filter: no slice %s", t[1]);
    i3_filter f;
    if (p_filter(&d->st, sl, t + 3, k - 3, &f, err, n)) return -1;
    f.fast = strcmp(t[2], "-") != 0;
    uint32_t h = flt_add(&d->st, &f, err, n);
    if (!h) return -1;
    if (f.fast) flt_get(&d->st, h)->entry = (int32_t)e;   /* adopted in i3d_ready */
    return 0;
}

int i3d_conf_line(i3d *d, char *line, char *err, size_t n)
{
    char *t[P_MAX_TOKENS];
    uint32_t v[8];
    int k = p_split(line, t, P_MAX_TOKENS);
    if (k < 0) FAIL("too many words");
    if (k == 0) return 0;
    const char *w = t[0];
    if (!strcmp(w, "sys")) {
        if (k != 7 || nums(t + 1, 6, v)) FAIL("sys DESC_BASE DESC_SHIFT N_BUFS BUF_BASE BUF_SHIFT FREELIST_Q");
        d->desc_base = v[0], d->desc_shift = v[1], d->n_bufs = v[2], d->buf_base = v[3], d->buf_shift = v[4];
        d->freelist_q = v[5];
        return 0;
    }
    if (!strcmp(w, "rings")) {
        if (k < 3 || k > 5 || nums(t + 1, k - 1, v) || v[0] > 15 || v[1] > 15 || (k >= 4 && v[2] > 15) ||
            (k == 5 && v[3] > 15))
            FAIL("rings EXCEPTIONS CONTROL [RELAY [BACK]] (scratch rings 0..15)");
        d->exc_ring = (int)v[0], d->cp_ring = (int)v[1], d->relay_ring = k >= 4 ? (int)v[2] : -1;
        d->back_ring = k == 5 ? (int)v[3] : -1;
        return 0;
    }
    if (!strcmp(w, "tcam")) {
        if (k != 5 || nums(t + 1, 4, v) || v[1] > 65536 || v[2] > v[1]) FAIL("tcam ENTRY0 ENTRIES FIRST COUNT");
        if (fast_init(&d->fp, d->mem, v[0], v[1], v[2], v[3])) FAIL("out of memory");
        return 0;
    }
    if (!strcmp(w, "mitable")) {
        if ((k != 3 && k != 4) || nums(t + 1, k - 1, v) || v[1] > I3_MAX_MIS)
            FAIL("mitable BASE ROWS [GENERATION_ADDRESS] (rows at most %d)", I3_MAX_MIS);
        d->mitable = v[0], d->mirows = v[1], d->migen = k == 4 ? v[2] : 0;
        return 0;
    }
    if (!strcmp(w, "port")) {
        if (k != 3 || p_u32(t[1], &v[0], I3D_MAX_PORTS - 1) || mac_of(t[2], d->port_mac[v[0]]))
            FAIL("port INDEX MAC (index 0..%d)", I3D_MAX_PORTS - 1);
        if (v[0] + 1 > d->nports) d->nports = v[0] + 1;
        return 0;
    }
    if (!strcmp(w, "arp")) {
        if (d->narp == I3D_MAX_ARP) FAIL("at most %d arp lines", I3D_MAX_ARP);
        if (k != 3 || p_ip(t[1], &d->arp[d->narp].ip) || mac_of(t[2], d->arp[d->narp].mac)) FAIL("arp A.B.C.D MAC");
        d->narp++;
        return 0;
    }
    if (!strcmp(w, "slice")) return d_slice(d, t, k, err, n);
    if (!strcmp(w, "mi")) return d_mi(d, t, k, err, n);
    if (!strcmp(w, "ring")) return d_ring(d, t, k, err, n);
    if (!strcmp(w, "finger")) return d_finger(d, t, k, err, n);
    if (!strcmp(w, "filter")) return d_filter(d, t, k, err, n);
    if (!strcmp(w, "stats")) {
        if (k != 2 || p_u32(t[1], &d->stats_base, 0xFFFFFFFFu)) FAIL("stats BASE");
        return 0;
    }
    if (!strcmp(w, "socket")) {
        if (k != 2 || strlen(t[1]) >= I3D_PATH) FAIL("socket PATH (at most %d bytes)", I3D_PATH - 1);
        strcpy(d->socket_path, t[1]);
        return 0;
    }
    if (!strcmp(w, "at")) {
        uint64_t at;
        if (k < 3 || p_u64(t[1], &at)) FAIL("at NS COMMAND...");
        if (d->ntimed == I3D_TIMED_MAX) FAIL("at most %d timed commands", I3D_TIMED_MAX);
        if (d->ntimed && at < d->timed[d->ntimed - 1].at_ns) FAIL("timed commands go in ascending time");
        i3d_timed *x = &d->timed[d->ntimed];
        x->at_ns = at;
        x->line[0] = 0;
        for (int i = 2; i < k; i++) {
            if (strlen(x->line) + strlen(t[i]) + 2 > I3D_TIMED_LINE) FAIL("the command is too long");
            if (i > 2) strcat(x->line, " ");
            strcat(x->line, t[i]);
        }
        d->ntimed++;
        return 0;
    }
    if (!strcmp(w, "option")) {
        if (k != 3 || p_u32(t[2], &v[0], 0xFFFFFFFFu)) FAIL("option NAME VALUE");
#define I3D_OPT_SET(name, dflt)       \
    if (!strcmp(t[1], #name)) {       \
        d->opt.name = v[0];           \
        return 0;                     \
    }
        I3D_OPTIONS(I3D_OPT_SET)
#undef I3D_OPT_SET
        FAIL("no option %s", t[1]);
    }
    FAIL("unknown directive '%s'", w);
}

int i3d_conf_load(i3d *d, const char *path, char *err, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) FAIL("%s: cannot open", path);
    char line[1024], why[400];
    int no = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        no++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, n, "%s:%d: line too long", path, no);
            rc = -1;
            break;
        }
        if (i3d_conf_line(d, line, why, sizeof why)) {
            snprintf(err, n, "%s:%d: %s", path, no, why);
            rc = -1;
            break;
        }
    }
    fclose(f);
    return rc ? rc : i3d_ready(d, err, n);
}

int i3d_ready(i3d *d, char *err, size_t n)
{
    if (d->exc_ring < 0 || d->cp_ring < 0) FAIL("no rings line");
    if (!d->fp.used && !d->fp.entries && fast_init(&d->fp, d->mem, 0, 0, 0, 0)) FAIL("out of memory");
    for (uint32_t i = 0; i < d->st.nflt; i++) {
        i3_filter *f = &d->st.flt[i];
        if (f->entry < 0) continue;
        uint32_t e = (uint32_t)f->entry;
        f->entry = -1;
        if (e >= d->fp.entries || d->fp.used[e]) FAIL("filter %u: TCAM entry %u is not free", f->handle, e);
        fast_filter_adopt(&d->fp, f, e);
    }
    return 0;
}
#undef FAIL
