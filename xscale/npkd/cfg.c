/* cfg.c -- reading npkd's configuration (cfg.h). */
#include "cfg.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcheck.h"

void cfg_init(npkd_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->send_redirects = 1;
    c->exc_ring = c->cp_ring = -1;
#define NPKD_OPT_DEFAULT(name, dflt) c->opt.name = (dflt);
    NPKD_OPTIONS(NPKD_OPT_DEFAULT)
#undef NPKD_OPT_DEFAULT
}

void cfg_free(npkd_cfg *c)
{
    free(c->arp);
    free(c->route);
    free(c->chg);
    free(c->flows);
    c->flows = NULL;
    c->arp = NULL;
    c->route = NULL;
    c->chg = NULL;
    c->narp = c->nroute = c->nchg = 0;
}

static const char *skip(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* a decimal or 0x hex number (no locale, no 64-bit division: cheap on the XScale) */
static int parse_num(const char *s, uint64_t *v, const char **end)
{
    s = skip(s);
    if (!is_digit(*s)) return -1;
    uint64_t x = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        int n = 0;
        for (;; s++, n++) {
            int d = is_digit(*s) ? *s - '0' : (*s | 32) >= 'a' && (*s | 32) <= 'f' ? (*s | 32) - 'a' + 10 : -1;
            if (d < 0) break;
            if (x >> 60) return -1;
            x = x << 4 | (uint64_t)d;
        }
        if (!n) return -1;
    } else {
        for (; is_digit(*s); s++) {
            if (x > 0x0FFFFFFFFFFFFFFFull) return -1;
            x = x * 10 + (uint64_t)(*s - '0');
        }
    }
    *v = x;
    if (end) *end = s;
    return 0;
}

int parse_ip(const char *s, uint32_t *ip, const char **end)
{
    while (*s == ' ' || *s == '\t') s++;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (!is_digit(*s)) return -1;
        uint32_t o = (uint32_t)(*s++ - '0');
        if (is_digit(*s)) o = o * 10 + (uint32_t)(*s++ - '0');
        if (is_digit(*s)) o = o * 10 + (uint32_t)(*s++ - '0');
        if (o > 255 || is_digit(*s)) return -1;
        v = v << 8 | o;
        if (i < 3 && *s++ != '.') return -1;
    }
    *ip = v;
    if (end) *end = s;
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = (char)tolower((unsigned char)ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int parse_mac(const char *s, uint8_t mac[6], const char **end)
{
    s = skip(s);
    for (int i = 0; i < 6; i++) {
        int a = hexval(s[0]), b = a < 0 ? -1 : hexval(s[1]);
        if (b < 0) return -1;
        mac[i] = (uint8_t)(a << 4 | b);
        s += 2;
        if (i < 5 && *s++ != ':') return -1;
    }
    if (end) *end = s;
    return 0;
}

static int parse_prefix(const char *s, uint32_t *p, int *len, const char **end)
{
    uint64_t n;
    if (parse_ip(s, p, &s) || *s++ != '/' || parse_num(s, &n, &s) || n > 32) return -1;
    *len = (int)n;
    if (*p & ~lpm_mask(*len)) return -1;
    if (end) *end = s;
    return 0;
}

static int at_end(const char *s)
{
    s = skip(s);
    return *s == 0 || *s == '#' || *s == '\n' || *s == '\r';
}

int port_of_subnet(const npkd_cfg *c, uint32_t ip)
{
    for (int i = 0; i < c->nports; i++)
        if ((ip & c->port[i].mask) == c->port[i].net) return i;
    return -1;
}

const arp_cfg *cfg_arp(const npkd_cfg *c, uint32_t ip)
{
    for (uint32_t i = 0; i < c->narp; i++)
        if (c->arp[i].ip == ip) return &c->arp[i];
    return NULL;
}

int parse_route(const npkd_cfg *c, const char *s, route_cfg *r)
{
    uint64_t port;
    memset(r, 0, sizeof *r);
    if (parse_prefix(s, &r->prefix, &r->len, &s)) return -1;
    s = skip(s);
    if (!strncmp(s, "dev ", 4)) {                 /* PREFIX/LEN dev P: on-link */
        if (parse_num(s + 4, &port, &s) || port >= (uint64_t)c->nports) return -1;
        r->port = (int)port;
        return at_end(s) ? 0 : -1;
    }
    if (!strncmp(s, "via ", 4)) {
        s += 4;
        const char *t = skip(s);
        const char *dot = t;
        while (is_digit(*dot)) dot++;
        if (*dot != '.') {                        /* via P: a port, on-link */
            if (parse_num(t, &port, &s) || port >= (uint64_t)c->nports) return -1;
            r->port = (int)port;
            return at_end(s) ? 0 : -1;
        }
        if (parse_ip(s, &r->next_hop, &s)) return -1;
        s = skip(s);
        if (!strncmp(s, "port ", 5)) {
            if (parse_num(s + 5, &port, &s)) return -1;
            r->port = (int)port;
        } else {
            r->port = port_of_subnet(c, r->next_hop);
        }
    } else {                                      /* route-file form: PREFIX/LEN NEXTHOP PORT */
        if (parse_ip(s, &r->next_hop, &s) || parse_num(s, &port, &s)) return -1;
        r->port = (int)port;
    }
    if (r->port < 0 || r->port >= c->nports) return -1;
    if (r->next_hop && (r->next_hop & c->port[r->port].mask) != c->port[r->port].net) return -1;
    return at_end(s) ? 0 : -1;
}

int cfg_route_problem(const npkd_cfg *c, const route_cfg *r, char *msg, size_t n)
{
    uint32_t addr[NPKD_MAX_PORTS];
    uint8_t len[NPKD_MAX_PORTS];
    for (int i = 0; i < c->nports; i++) {
        addr[i] = c->port[i].addr;
        len[i] = (uint8_t)c->port[i].len;
    }
    return npkd_route_problem(addr, len, c->nports, r->prefix, r->len, r->next_hop, r->port, msg, n);
}

static int push_route(route_cfg **v, uint32_t *n, uint32_t *cap, const route_cfg *r)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? 2 * *cap : 64;
        route_cfg *p = realloc(*v, nc * sizeof *p);
        if (!p) return -1;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = *r;
    return 0;
}

int cfg_load_routes(npkd_cfg *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    c->nroute = 0;
    char line[512];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (at_end(line)) continue;
        route_cfg r;
        if (parse_route(c, line, &r)) {
            snprintf(err, errlen, "%s:%d: bad route (PREFIX/LEN NEXTHOP PORT)", path, ln);
            rc = -1;
            break;
        }
        if (push_route(&c->route, &c->nroute, &c->caproute, &r)) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (!rc) snprintf(c->routes_path, sizeof c->routes_path, "%s", path);
    return rc;
}

static int arp_cmp(const void *a, const void *b)
{
    uint32_t x = ((const arp_cfg *)a)->ip, y = ((const arp_cfg *)b)->ip;
    return (x > y) - (x < y);
}

/* copy a path (trimmed at the end of the line); -1 when empty or too long */
static int copy_path(char *dst, const char *s)
{
    s = skip(s);
    size_t n = strcspn(s, "\r\n");
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (!n || n >= NPKD_PATH) return -1;
    memcpy(dst, s, n);
    dst[n] = 0;
    return 0;
}

static int word(const char *s, char *out, size_t n, const char **end)
{
    s = skip(s);
    size_t i = 0;
    while (*s && !isspace((unsigned char)*s)) {
        if (i + 1 >= n) return -1;
        out[i++] = *s++;
    }
    out[i] = 0;
    if (end) *end = s;
    return i ? 0 : -1;
}

static int nums(const char *s, uint64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (parse_num(s, &v[i], &s)) return -1;
    return at_end(s) ? 0 : -1;
}

/* flows BASE AUX BUCKETS MULT_HI MULT_LO | pluginlog BASE CAP | plugin SLOT NAME [ARG...] |
 * flowidle US */
static int flow_directive(flow_cfg *f, const char *key, const char *s)
{
    uint64_t v[5];
    char name[64];
    if (!strcmp(key, "flows")) {
        if (nums(s, v, 5) || !v[2] || (v[2] & (v[2] - 1)) || v[2] > 16384) return -1;
        f->key_base = (uint32_t)v[0];
        f->aux_base = (uint32_t)v[1];
        f->buckets = (uint32_t)v[2];
        f->mult_hi = v[3];
        f->mult_lo = v[4];
        return 0;
    }
    if (!strcmp(key, "flowidle")) {
        if (nums(s, v, 1)) return -1;
        f->idle_us = v[0];
        return 0;
    }
    if (!strcmp(key, "pluginlog")) {
        if (nums(s, v, 2)) return -1;
        f->log_base = (uint32_t)v[0];
        f->log_cap = (uint32_t)v[1];
        return 0;
    }
    if (f->nplugin_init >= 16 || parse_num(s, &v[0], &s) || !v[0] || v[0] > 15) return -1;   /* at most 4 args */
    if (word(s, name, sizeof name, &s) || strlen(name) >= sizeof f->plugin_init[0].name) return -1;
    uint32_t n = 0;
    while (n < 4 && !at_end(s)) {
        if (parse_num(s, &v[1], &s)) return -1;
        f->plugin_init[f->nplugin_init].args[n++] = (uint32_t)v[1];
    }
    if (!at_end(s)) return -1;
    f->plugin_init[f->nplugin_init].slot = (uint32_t)v[0];
    f->plugin_init[f->nplugin_init].nargs = n;
    memcpy(f->plugin_init[f->nplugin_init].name, name, strlen(name) + 1);
    f->nplugin_init++;
    return 0;
}

static int directive(npkd_cfg *c, const char *s, char *err, size_t errlen)
{
    char key[32], name[64];
    uint64_t v[8];
    if (word(s, key, sizeof key, &s)) return -1;
    if (!strcmp(key, "port")) {
        uint32_t ip;
        uint8_t mac[6];
        if (parse_num(s, &v[0], &s) || parse_ip(s, &ip, &s) || parse_num(s, &v[1], &s) ||
            parse_mac(s, mac, &s) || !at_end(s) || v[0] != (uint64_t)c->nports || c->nports >= NPKD_MAX_PORTS ||
            v[1] > 30)
            return -1;
        port_cfg *p = &c->port[c->nports++];
        p->addr = ip;
        p->len = (int)v[1];
        p->mask = lpm_mask(p->len);
        p->net = ip & p->mask;
        p->bcast = p->net | ~p->mask;
        memcpy(p->mac, mac, 6);
        return 0;
    }
    if (!strcmp(key, "arp")) {
        arp_cfg a;
        if (parse_ip(s, &a.ip, &s) || parse_mac(s, a.mac, &s) || !at_end(s)) return -1;
        if (c->narp == c->caparp) {
            uint32_t nc = c->caparp ? 2 * c->caparp : 16;
            arp_cfg *p = realloc(c->arp, nc * sizeof *p);
            if (!p) return -1;
            c->arp = p;
            c->caparp = nc;
        }
        c->arp[c->narp++] = a;
        return 0;
    }
    if (!strcmp(key, "routes")) {
        return copy_path(c->routes_path, s);     /* read by the loader */
    }
    if (!strcmp(key, "state") || !strcmp(key, "socket")) {
        return copy_path(key[1] == 't' ? c->state_path : c->socket_path, s);
    }
    if (!strcmp(key, "redirects")) {
        if (nums(s, v, 1) || v[0] > 1) return -1;
        c->send_redirects = (int)v[0];
        return 0;
    }
    if (!strcmp(key, "lpm")) {
        if (nums(s, v, 6)) return -1;
        c->lay = (lpm_layout){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3], (uint32_t)v[4],
                              (uint32_t)v[5]};
        return 0;
    }
    if (!strcmp(key, "sys")) {
        if (nums(s, v, 7)) return -1;
        c->sys = (sys_cfg){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3], (uint32_t)v[4],
                           (uint32_t)v[5], (uint32_t)v[6]};
        return 0;
    }
    if (!strcmp(key, "rings")) {
        if (nums(s, v, 2) || v[0] > 15 || v[1] > 15) return -1;
        c->exc_ring = (int)v[0];
        c->cp_ring = (int)v[1];
        return 0;
    }
    if (!strcmp(key, "log")) {
        if (nums(s, v, 2) || !v[1]) return -1;
        c->log_base = (uint32_t)v[0];
        c->log_cap = (uint32_t)v[1];
        return 0;
    }
    if (!strcmp(key, "changelog")) {
        if (nums(s, v, 2) || !v[1]) return -1;
        c->changelog_base = (uint32_t)v[0];
        c->changelog_cap = (uint32_t)v[1];
        return 0;
    }
    if (!strcmp(key, "stats")) {
        if (nums(s, v, 1)) return -1;
        c->stats_base = (uint32_t)v[0];
        return 0;
    }
    if (!strcmp(key, "option")) {
        if (word(s, name, sizeof name, &s) || nums(s, v, 1) || v[0] > 0xFFFFFFFFu) return -1;
#define NPKD_OPT_SET(oname, dflt)                                                             \
    if (!strcmp(name, #oname)) {                                                              \
        c->opt.oname = (uint32_t)v[0];                                                        \
        return 0;                                                                             \
    }
        NPKD_OPTIONS(NPKD_OPT_SET)
#undef NPKD_OPT_SET
        snprintf(err, errlen, "unknown option %s", name);
        return -2;
    }
    if (!strcmp(key, "change")) {
        timed_change t;
        memset(&t, 0, sizeof t);
        if (parse_num(s, &t.at_ns, &s) || word(s, name, sizeof name, &s)) return -1;
        if (!strcmp(name, "add")) {
            t.add = 1;
            if (parse_route(c, s, &t.r)) return -1;
            if (cfg_route_problem(c, &t.r, err, errlen)) return -2;
            if (npkd_change_problem(t.r.prefix, t.r.len, err, errlen)) return -2;
        } else if (!strcmp(name, "del")) {
            if (parse_prefix(s, &t.r.prefix, &t.r.len, &s) || !at_end(s)) return -1;
            if (npkd_change_problem(t.r.prefix, t.r.len, err, errlen)) return -2;
        } else {
            return -1;
        }
        if (c->nchg == c->capchg) {
            uint32_t nc = c->capchg ? 2 * c->capchg : 16;
            timed_change *p = realloc(c->chg, nc * sizeof *p);
            if (!p) return -1;
            c->chg = p;
            c->capchg = nc;
        }
        c->chg[c->nchg++] = t;
        return 0;
    }
    if (!strcmp(key, "owned")) {
        if (nums(s, v, 2) || !v[1] || v[1] > 0x10000u) return -1;    /* handles are 16 bits */
        c->owned_base = (uint32_t)v[0];
        c->owned_cap = (uint32_t)v[1];
        return 0;
    }
    if (!strcmp(key, "flows") || !strcmp(key, "pluginlog") || !strcmp(key, "plugin") || !strcmp(key, "flowidle")) {
        if (!c->flows && !(c->flows = calloc(1, sizeof *c->flows))) return -1;
        return flow_directive(c->flows, key, s);
    }
    snprintf(err, errlen, "unknown directive '%s'", key);
    return -2;
}

int cfg_load(npkd_cfg *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024], why[400];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (at_end(line)) continue;
        why[0] = 0;
        int r = directive(c, line, why, sizeof why);
        if (r) {
            snprintf(err, errlen, "%s:%d: %s", path, ln, why[0] ? why : "malformed line");
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (!rc && (!c->nports || c->exc_ring < 0 || !c->lay.node_bytes || !c->sys.n_bufs)) {
        snprintf(err, errlen, "%s: needs port, lpm, sys and rings lines", path);
        rc = -1;
    }
    if (!rc && c->owned_cap && c->owned_cap < c->sys.n_bufs) {
        snprintf(err, errlen, "%s: the owned table has room for %u buffers, sys has %u", path, c->owned_cap,
                 c->sys.n_bufs);
        rc = -1;
    }
    if (!rc) qsort(c->arp, c->narp, sizeof *c->arp, arp_cmp);
    return rc;
}
