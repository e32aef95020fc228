/* ctl.c -- the control socket (ctl.h). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int ctl_open(ctl *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->lfd = -1;
    for (int i = 0; i < CTL_CONNS; i++) c->conn[i].fd = -1;
    if (!path || !path[0]) return 0;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) return -ENAMETOOLONG;
    memcpy(a.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    unlink(path);
    mode_t old = umask(0177);                /* the socket file: srw------- (the runner's only) */
    int bad = bind(fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (bad || listen(fd, 4)) {
        int e = errno;
        close(fd);
        return -e;
    }
    c->lfd = fd;
    return 0;
}

static void drop(ctl_conn *k)
{
    if (k->fd >= 0) close(k->fd);
    free(k->out);
    memset(k, 0, sizeof *k);
    k->fd = -1;
}

void ctl_close(ctl *c)
{
    for (int i = 0; i < CTL_CONNS; i++) drop(&c->conn[i]);
    if (c->lfd >= 0) close(c->lfd);
    c->lfd = -1;
}

static int unsent(const ctl_conn *k)
{
    return k->nout > k->head;
}

/* a whole command line is read and waits for its turn (its answer before it is sent),
 * or the next step of a long answer is due */
static int line_waiting(const ctl_conn *k)
{
    return k->fd >= 0 && !unsent(k) && (k->more || memchr(k->in, '\n', k->nin) != NULL);
}

int ctl_pending(const ctl *c)
{
    for (int i = 0; i < CTL_CONNS; i++)
        if (line_waiting(&c->conn[i])) return 1;
    return 0;
}

int ctl_pollfds(ctl *c, struct pollfd *p, int max)
{
    int n = 0;
    if (c->lfd < 0 || max < 1) return 0;      /* no socket: nothing to look at (and no cost) */
    p[n++] = (struct pollfd){c->lfd, POLLIN, 0};
    for (int i = 0; i < CTL_CONNS && n < max; i++) {
        ctl_conn *k = &c->conn[i];
        if (k->fd < 0) continue;
        /* not read while an answer is unsent; a command already read: wake at once */
        short ev = unsent(k) || line_waiting(k) ? POLLOUT : POLLIN;
        p[n++] = (struct pollfd){k->fd, ev, 0};
    }
    return n;
}

void ctl_printf(ctl_conn *k, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || k->over) return;
    if ((uint32_t)n >= sizeof buf) n = sizeof buf - 1;
    if (k->head) {                             /* what was sent leaves the buffer (once per answer) */
        memmove(k->out, k->out + k->head, k->nout - k->head);
        k->nout -= k->head;
        k->head = 0;
    }
    if ((uint64_t)k->nout + (uint32_t)n > k->out_max) {  /* the bound: the connection is closed (ctl_service) */
        k->over = 1;
        return;
    }
    if (k->nout + (uint32_t)n > k->capout) {
        uint32_t cap = k->capout ? k->capout : 1024;
        while (cap < k->nout + (uint32_t)n) cap *= 2;
        char *p = realloc(k->out, cap);
        if (!p) {
            k->over = 1;
            return;
        }
        k->out = p;
        k->capout = cap;
    }
    memcpy(k->out + k->nout, buf, (size_t)n);
    k->nout += (uint32_t)n;
}

static uint64_t now(const ctl *c)
{
    return c->now_ns ? *c->now_ns : 0;
}

/* send what the socket takes now; 0, or -1 when the connection is gone */
static int flush(ctl *c, ctl_conn *k)
{
    while (unsent(k)) {
        ssize_t w = send(k->fd, k->out + k->head, k->nout - k->head, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                drop(k);
                return -1;
            }
            return 0;
        }
        k->head += (uint32_t)w;
        k->last_ns = now(c);
    }
    k->head = k->nout = 0;
    return 0;
}

int ctl_flush_all(ctl *c)
{
    int all = 1;
    for (int i = 0; i < CTL_CONNS; i++)
        if (c->conn[i].fd >= 0) {
            flush(c, &c->conn[i]);
            all &= !unsent(&c->conn[i]);
        }
    return all;
}

static void accept_all(ctl *c)
{
    for (;;) {
        int fd = accept(c->lfd, NULL, NULL);
        if (fd < 0) break;
        int slot = -1;
        for (int i = 0; i < CTL_CONNS; i++)
            if (c->conn[i].fd < 0) slot = i;
        if (slot < 0) {                         /* full: the one idle the longest makes room */
            slot = 0;
            for (int i = 1; i < CTL_CONNS; i++)
                if (c->conn[i].last_ns < c->conn[slot].last_ns) slot = i;
            drop(&c->conn[slot]);
            c->n.evicted++;
        }
        c->conn[slot].fd = fd;
        c->conn[slot].last_ns = now(c);
        c->conn[slot].out_max = c->out_max;
        c->n.accepted++;
    }
}

/* the complete lines read so far, at most `budget` of them; the number run */
static int run_lines(ctl *c, ctl_conn *k, int budget)
{
    int ran = 0;
    char *nl;
    while (k->fd >= 0 && !unsent(k) && !k->more && ran < budget && (nl = memchr(k->in, '\n', k->nin))) {
        uint32_t used = (uint32_t)(nl + 1 - k->in);
        size_t len = (size_t)(nl - k->in);
        *nl = 0;
        if (len && k->in[len - 1] == '\r') k->in[--len] = 0;
        if (k->skipping) {                      /* the tail of an over-long line: not a command */
            k->skipping = 0;
        } else if (memchr(k->in, 0, len)) {
            ctl_printf(k, "error: the command has a NUL byte\n");
            ran++;
        } else {
            c->handle(c->ctx, c, k, k->in);
            ran++;
        }
        memmove(k->in, nl + 1, k->nin - used);
        k->nin -= used;
        if (k->over) {
            drop(k);
            c->n.overflow_closed++;
            break;
        }
        if (flush(c, k)) break;
    }
    return ran;
}

static void serve(ctl *c, ctl_conn *k)
{
    if (flush(c, k) || unsent(k)) return;      /* not read until its answer is sent */
    if (k->more) {                             /* a long answer: its next step, and nothing else */
        if (!k->more(c->ctx, k)) k->more = NULL;
        if (k->over) {
            drop(k);
            c->n.overflow_closed++;
        } else {
            flush(c, k);
        }
        return;
    }
    int budget = CTL_LINES_PER_TURN;
    budget -= run_lines(c, k, budget);
    while (k->fd >= 0 && budget > 0 && !unsent(k) && !k->more && k->nin < sizeof k->in - 1) {
        ssize_t r = recv(k->fd, k->in + k->nin, sizeof k->in - 1 - k->nin, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            drop(k);
            return;
        }
        if (r < 0) return;
        k->last_ns = now(c);
        k->nin += (uint32_t)r;
        k->in[k->nin] = 0;
        if (k->skipping && !memchr(k->in, '\n', k->nin)) k->nin = 0;   /* still the long line */
        budget -= run_lines(c, k, budget);
        if (k->fd >= 0 && k->nin >= sizeof k->in - 1 && !memchr(k->in, '\n', k->nin)) {
            if (!k->skipping) {                 /* too long: answered, discarded to its newline */
                ctl_printf(k, "error: line too long (at most %u bytes)\n", (unsigned)(CTL_LINE - 2));
                c->n.lines_too_long++;
                budget--;
            }
            k->skipping = 1;
            k->nin = 0;
            if (flush(c, k)) return;
        }
    }
}

void ctl_service(ctl *c)
{
    if (c->lfd < 0) return;
    accept_all(c);
    uint64_t t = now(c);
    for (int i = 0; i < CTL_CONNS; i++) {      /* the idle ones first, then the others' commands */
        ctl_conn *k = &c->conn[i];
        if (k->fd >= 0 && c->idle_ns && t > k->last_ns && t - k->last_ns > c->idle_ns) {
            drop(k);
            c->n.idle_closed++;
        }
    }
    for (int i = 0; i < CTL_CONNS; i++)
        if (c->conn[i].fd >= 0) serve(c, &c->conn[i]);
}
