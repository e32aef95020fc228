/* ctl.h -- the control socket: a Unix stream socket, one command a line, each answer
 * ending with a line "ok" or "error: ..." (the protocol of `npk route`):
 *   add PREFIX/LEN via NEXTHOP [port P] | add PREFIX/LEN NEXTHOP PORT | add PREFIX/LEN dev P
 *   del PREFIX/LEN
 *   show [A.B.C.D]        every route, or the one an address matches
 *   stats                 "name value" lines
 *   arp                   the ARP cache
 *   restart               persist the table and exit with status 75 (the host restarts it) */
#ifndef NPKD_CTL_H
#define NPKD_CTL_H
#include <poll.h>
#include <stdint.h>

#define CTL_CONNS 4

typedef struct ctl_conn {
    int fd;
    char in[512];
    uint32_t nin;
    char *out;
    uint32_t nout, capout;
} ctl_conn;

typedef struct ctl {
    int lfd;
    ctl_conn conn[CTL_CONNS];
    /* the command handler appends its answer with ctl_printf */
    void (*handle)(void *ctx, struct ctl *c, ctl_conn *k, char *line);
    void *ctx;
} ctl;

int ctl_open(ctl *c, const char *path);      /* 0, or -errno; path "" = no socket */
void ctl_close(ctl *c);
int ctl_pollfds(ctl *c, struct pollfd *p, int max);
void ctl_service(ctl *c);                    /* accept, read, answer; never blocks */
void ctl_printf(ctl_conn *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ctl_flush_all(ctl *c);                   /* best effort; 1 when everything was written */
#endif
