/* parse.c -- the words of i3d's configuration and control socket (parse.h). */
#include "parse.h"

#include <stdio.h>
#include <string.h>

int p_split(char *s, char **tok, int max)
{
    int n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') *s++ = 0;
        if (!*s || *s == '#') break;
        if (n == max) return -1;
        tok[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') s++;
    }
    return n;
}

static int hexd(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

/* a number at s (stops at a non-digit): the end, or NULL */
static const char *num(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        for (s += 2; hexd(*s) >= 0; s++, n++) {
            if (x >> 60) return NULL;
            x = x << 4 | (uint64_t)hexd(*s);
        }
    } else {
        for (; *s >= '0' && *s <= '9'; s++, n++) {
            if (x > 0x0FFFFFFFFFFFFFFFull) return NULL;
            x = x * 10 + (uint64_t)(*s - '0');
        }
    }
    if (!n) return NULL;
    *v = x;
    return s;
}

int p_u64(const char *s, uint64_t *v)
{
    const char *e = num(s, v);
    return e && !*e ? 0 : -1;
}

int p_u32(const char *s, uint32_t *v, uint32_t max)
{
    uint64_t x;
    if (p_u64(s, &x) || x > max) return -1;
    *v = (uint32_t)x;
    return 0;
}

static const char *ip_at(const char *s, uint32_t *ip)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t o;
        if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] == 'x')) return NULL;
        s = num(s, &o);
        if (!s || o > 255) return NULL;
        v = v << 8 | (uint32_t)o;
        if (i < 3 && *s++ != '.') return NULL;
    }
    *ip = v;
    return s;
}

int p_ip(const char *s, uint32_t *ip)
{
    const char *e = ip_at(s, ip);
    return e && !*e ? 0 : -1;
}

int p_prefix(const char *s, uint32_t *ip, uint32_t *mask)
{
    if (!strcmp(s, "*") || !strcmp(s, "any")) {
        *ip = *mask = 0;
        return 0;
    }
    const char *e = ip_at(s, ip);
    if (!e) return -1;
    uint64_t len = 32;
    if (*e == '/' && !(e = num(e + 1, &len))) return -1;
    if (*e || len > 32) return -1;
    *mask = ip_mask((int)len);
    return 0;
}

int p_hop(const char *s, uint32_t *ip, uint16_t *udp)
{
    const char *e = ip_at(s, ip);
    uint64_t p;
    if (!e || *e != ':' || !(e = num(e + 1, &p)) || *e || p > 65535) return -1;
    *udp = (uint16_t)p;
    return 0;
}

int p_trigger(const char *s, uint64_t *id, uint8_t *len)
{
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return -1;
    const char *e = num(s, id);
    uint64_t l = 64;
    if (!e || e - s > 18) return -1;
    if (*e == '/' && !(e = num(e + 1, &l))) return -1;
    if (*e || l < 1 || l > 64) return -1;
    *len = (uint8_t)l;
    return 0;
}

i3_slice *p_slice(i3_store *st, const char *s)
{
    uint32_t id;
    if (!p_u32(s, &id, 4095)) return slice_get(st, (uint16_t)id);
    return slice_by_name(st, s);
}

int p_mi(const i3_store *st, uint16_t slice, const char *s)
{
    uint32_t i;
    if (!p_u32(s, &i, I3_MAX_MIS - 1)) return st->mi[i].used && st->mi[i].slice == slice ? (int)i : -1;
    return mi_by_name(st, slice, s);
}

static int port_or_any(const char *s, int32_t *v)
{
    uint32_t x;
    if (!strcmp(s, "*") || !strcmp(s, "any")) return *v = -1, 0;
    if (p_u32(s, &x, 65535)) return -1;
    *v = (int32_t)x;
    return 0;
}

int p_filter(i3_store *st, i3_slice *sl, char **tok, int n, i3_filter *f, char *why, size_t wn)
{
    memset(f, 0, sizeof *f);
    f->slice = sl->id;
    f->code = sl->code;
    f->action = FA_FORWARD;
    f->fast = 1;
    f->in = -1;
    f->proto = f->dport = f->sport = -1;
    f->entry = -1;
    int have_out = 0, have_hop = 0, have_trig = 0;
    for (int i = 0; i < n; i++) {
        const char *k = tok[i], *v = i + 1 < n ? tok[i + 1] : NULL;
        if (!strcmp(k, "slow")) {
            f->fast = 0;
            continue;
        }
        if (!v) return snprintf(why, wn, "%s: a value must follow", k), -1;
        i++;
        int bad = 0;
        if (!strcmp(k, "trigger") && sl->code == CODE_I3) {
            bad = p_trigger(v, &f->id, &f->len);
            have_trig = !bad;
        } else if (!strcmp(k, "dst") && sl->code == CODE_IPV4) {
            bad = p_prefix(v, &f->dst, &f->dst_mask);
        } else if (!strcmp(k, "src") && sl->code == CODE_IPV4) {
            bad = p_prefix(v, &f->src, &f->src_mask);
        } else if (!strcmp(k, "proto") && sl->code == CODE_IPV4) {
            uint32_t x;
            if (!strcmp(v, "tcp")) f->proto = 6;
            else if (!strcmp(v, "udp")) f->proto = 17;
            else if (!strcmp(v, "icmp")) f->proto = 1;
            else if (!strcmp(v, "*") || !strcmp(v, "any")) f->proto = -1;
            else if (!(bad = p_u32(v, &x, 255))) f->proto = (int32_t)x;
        } else if (!strcmp(k, "dport") && sl->code == CODE_IPV4) {
            bad = port_or_any(v, &f->dport);
        } else if (!strcmp(k, "sport") && sl->code == CODE_IPV4) {
            bad = port_or_any(v, &f->sport);
        } else if (!strcmp(k, "in")) {
            int m = p_mi(st, sl->id, v);
            bad = m < 0;
            f->in = (int16_t)m;
        } else if (!strcmp(k, "out")) {
            int m = p_mi(st, sl->id, v);
            bad = m < 0;
            f->to.out = (uint8_t)(m < 0 ? 0 : m);
            have_out = !bad;
        } else if (!strcmp(k, "next_hop") || !strcmp(k, "via")) {
            bad = p_hop(v, &f->to.ip, &f->to.udp);
            have_hop = !bad;
        } else if (!strcmp(k, "action")) {
            if (!strcmp(v, "forward")) f->action = FA_FORWARD;
            else if (!strcmp(v, "gpe")) f->action = FA_GPE;
            else if (!strcmp(v, "drop")) f->action = FA_DROP;
            else bad = 1;
        } else {
            return snprintf(why, wn, "'%s' is not a field of an %s filter", k, sl->code == CODE_I3 ? "i3" : "ipv4"), -1;
        }
        if (bad) {
            const char *what = !strcmp(k, "in") || !strcmp(k, "out") ? "a meta-interface of the slice (name or index)"
                               : !strcmp(k, "trigger") ? "0x + up to 16 hex digits [/len 1..64]"
                               : !strcmp(k, "next_hop") || !strcmp(k, "via") ? "a.b.c.d:port"
                               : !strcmp(k, "action") ? "forward, gpe or drop"
                               : "a prefix a.b.c.d[/len], a number or *";
            return snprintf(why, wn, "%s %s: %s", k, v, what), -1;
        }
    }
    if (sl->code == CODE_I3 && !have_trig) return snprintf(why, wn, "an i3 filter needs trigger 0xID[/LEN]"), -1;
    if (f->action == FA_FORWARD && (!have_out || !have_hop))
        return snprintf(why, wn, "a forwarding filter needs out MI and next_hop A.B.C.D:PORT"), -1;
    return 0;
}

void p_fmt_ip(char *b, uint32_t a)
{
    snprintf(b, 16, "%u.%u.%u.%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255);
}

static int mask_len(uint32_t m)
{
    int n = 0;
    while (n < 32 && (m >> (31 - n) & 1)) n++;
    return n;
}

void p_fmt_filter(char *b, size_t n, const i3_store *st, const i3_filter *f)
{
    char a[16], c[16];
    size_t at = 0;
#define PUT(...) at += (size_t)snprintf(b + at, at < n ? n - at : 0, __VA_ARGS__)
    b[0] = 0;
    if (f->code == CODE_I3) {
        PUT("trigger 0x%016llx", (unsigned long long)f->id);
        if (f->len != 64) PUT("/%u", f->len);
    } else {
        p_fmt_ip(a, f->dst);
        p_fmt_ip(c, f->src);
        PUT("dst %s/%d src %s/%d", a, mask_len(f->dst_mask), c, mask_len(f->src_mask));
        if (f->proto >= 0) PUT(" proto %d", f->proto);
        if (f->dport >= 0) PUT(" dport %d", f->dport);
        if (f->sport >= 0) PUT(" sport %d", f->sport);
    }
    if (f->in >= 0) PUT(" in %s", st->mi[f->in].name);
    if (f->action == FA_FORWARD) {
        p_fmt_ip(a, f->to.ip);
        PUT(" out %s next_hop %s:%u", st->mi[f->to.out].name, a, f->to.udp);
    } else {
        PUT(" action %s", f->action == FA_GPE ? "gpe" : "drop");
    }
    if (!f->fast) PUT(" slow");
#undef PUT
    if (at >= n && n) b[n - 1] = 0;
}
