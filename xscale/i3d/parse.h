/* parse.h -- the words of i3d's configuration and control socket (one syntax for both:
 * i3cfg.h, cmd.h).  Every parser returns 0, or -1 with a message in why. */
#ifndef I3D_PARSE_H
#define I3D_PARSE_H
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define P_MAX_TOKENS 40

/* split s in place at blanks: the number of tokens (at most max; more: -1) */
int p_split(char *s, char **tok, int max);
int p_u64(const char *s, uint64_t *v);                   /* decimal or 0x hex, whole token */
int p_u32(const char *s, uint32_t *v, uint32_t max);
int p_ip(const char *s, uint32_t *ip);                   /* a.b.c.d, whole token */
int p_prefix(const char *s, uint32_t *ip, uint32_t *mask);   /* a.b.c.d[/len] or * */
int p_hop(const char *s, uint32_t *ip, uint16_t *udp);   /* a.b.c.d:port */
int p_trigger(const char *s, uint64_t *id, uint8_t *len);    /* 0xHEX[/len] */
/* a slice by id or name */
i3_slice *p_slice(i3_store *st, const char *s);
/* a meta-interface of slice `slice` by name or index */
int p_mi(const i3_store *st, uint16_t slice, const char *s);
/* a filter's words after its slice (spp.md §3 field names):
 *   trigger 0xID[/LEN] | dst P | src P | proto tcp|udp|icmp|N|* | dport N|* | sport N|*
 *   in MI | out MI | next_hop A.B.C.D:PORT | action forward|gpe|drop | slow
 * `slow`: the daemon keeps it (GPE path) but puts no TCAM filter in */
int p_filter(i3_store *st, i3_slice *sl, char **tok, int n, i3_filter *f, char *why, size_t wn);
void p_fmt_ip(char *b, uint32_t a);                      /* 16 bytes */
/* a filter as p_filter reads it (without its slice) */
void p_fmt_filter(char *b, size_t n, const i3_store *st, const i3_filter *f);
#endif
