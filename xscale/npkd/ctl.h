/* ctl.h -- the control socket: a Unix stream socket, one command a line, each answer
 * ending with a line "ok" or "error: ..." (the protocol of `npk route`):
 *   add PREFIX/LEN via NEXTHOP [port P] | add PREFIX/LEN NEXTHOP PORT | add PREFIX/LEN dev P
 *   del PREFIX/LEN
 *   show [A.B.C.D]        every route, or the one an address matches
 *   stats                 "name value" lines
 *   arp                   the ARP cache
 *   restart               persist the table and exit with status 75 (the host restarts it)
 *
 * Limits (README.md "The control socket"), so that no client can hold up the exception
 * path or lock the others out:
 *   - CTL_CONNS connections; one more evicts the one idle the longest (counted);
 *   - a connection with no byte read or written for the option ctl_idle_us (emulated
 *     time) is closed (counted);
 *   - a line is at most CTL_LINE - 1 bytes: a longer one is answered "error: line too
 *     long" and discarded up to its newline (none of its bytes runs as a command); a
 *     line with a NUL byte is an error;
 *   - a connection's commands are read only once its previous answer is sent (a client
 *     that never reads stops being read, its sends block in its own kernel), at most
 *     CTL_LINES_PER_TURN a turn of the daemon's loop;
 *   - an answer is at most the option ctl_answer_max bytes: past it the connection is
 *     closed (counted); a long one (`show` of the whole table) is made in steps, one a
 *     turn, each once the one before has been sent (ctl_conn.more). */
#ifndef NPKD_CTL_H
#define NPKD_CTL_H
#include <poll.h>
#include <stdint.h>

#define CTL_CONNS 4
#define CTL_LINE 512
#define CTL_LINES_PER_TURN 1

typedef struct ctl_conn {
    int fd;
    int skipping;               /* discarding the rest of an over-long line */
    int over;                   /* its answer passed ctl.out_max */
    uint32_t out_max;
    char in[CTL_LINE];
    uint32_t nin;
    char *out;
    uint32_t head, nout, capout; /* unsent: out[head .. nout) */
    uint64_t last_ns;           /* when it last made progress (a byte read or written) */
    /* a long answer made in steps, one a turn once the previous step is sent (the
     * handler sets it; it returns 1 while there is more, 0 when it has ended the answer) */
    int (*more)(void *ctx, struct ctl_conn *k);
    uint32_t cursor[2];
} ctl_conn;

typedef struct ctl_counts {
    uint32_t accepted, evicted, idle_closed, overflow_closed, lines_too_long;
} ctl_counts;

typedef struct ctl {
    int lfd;
    ctl_conn conn[CTL_CONNS];
    /* the command handler appends its answer with ctl_printf */
    void (*handle)(void *ctx, struct ctl *c, ctl_conn *k, char *line);
    void *ctx;
    const uint64_t *now_ns;     /* the daemon's clock (emulated ns), read at each service */
    uint64_t idle_ns;           /* 0: no idle timeout */
    uint32_t out_max;           /* an answer's bytes at most */
    ctl_counts n;
} ctl;

int ctl_open(ctl *c, const char *path);      /* 0, or -errno; path "" = no socket; mode 0600 */
void ctl_close(ctl *c);
int ctl_pollfds(ctl *c, struct pollfd *p, int max);   /* a connection with a command waiting: POLLOUT too */
void ctl_service(ctl *c);                    /* accept, read, answer; never blocks */
int ctl_pending(const ctl *c);               /* 1: a read command waits for its turn */
void ctl_printf(ctl_conn *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ctl_flush_all(ctl *c);                   /* best effort; 1 when everything was written */
#endif
