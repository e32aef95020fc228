/* ctl.c -- the control socket (ctl.h). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4)) {
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

int ctl_pollfds(ctl *c, struct pollfd *p, int max)
{
    int n = 0;
    if (c->lfd >= 0 && n < max) p[n++] = (struct pollfd){c->lfd, POLLIN, 0};
    for (int i = 0; i < CTL_CONNS && n < max; i++)
        if (c->conn[i].fd >= 0)
            p[n++] = (struct pollfd){c->conn[i].fd, (short)(POLLIN | (c->conn[i].nout ? POLLOUT : 0)), 0};
    return n;
}

void ctl_printf(ctl_conn *k, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((uint32_t)n >= sizeof buf) n = sizeof buf - 1;
    if (k->nout + (uint32_t)n > k->capout) {
        uint32_t cap = k->capout ? k->capout : 1024;
        while (cap < k->nout + (uint32_t)n) cap *= 2;
        char *p = realloc(k->out, cap);
        if (!p) return;
        k->out = p;
        k->capout = cap;
    }
    memcpy(k->out + k->nout, buf, (size_t)n);
    k->nout += (uint32_t)n;
}

static void flush(ctl_conn *k)
{
    while (k->nout) {
        ssize_t w = send(k->fd, k->out, k->nout, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) drop(k);
            return;
        }
        memmove(k->out, k->out + w, k->nout - (uint32_t)w);
        k->nout -= (uint32_t)w;
    }
}

int ctl_flush_all(ctl *c)
{
    int all = 1;
    for (int i = 0; i < CTL_CONNS; i++)
        if (c->conn[i].fd >= 0) {
            flush(&c->conn[i]);
            all &= c->conn[i].nout == 0;
        }
    return all;
}

void ctl_service(ctl *c)
{
    if (c->lfd < 0) return;
    for (;;) {
        int fd = accept(c->lfd, NULL, NULL);
        if (fd < 0) break;
        int slot = -1;
        for (int i = 0; i < CTL_CONNS; i++)
            if (c->conn[i].fd < 0) slot = i;
        if (slot < 0) {
            const char *busy = "error: too many connections\n";
            if (send(fd, busy, strlen(busy), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) { /* nothing to do */ }
            close(fd);
            continue;
        }
        c->conn[slot].fd = fd;
    }
    for (int i = 0; i < CTL_CONNS; i++) {
        ctl_conn *k = &c->conn[i];
        if (k->fd < 0) continue;
        for (;;) {
            ssize_t r = recv(k->fd, k->in + k->nin, sizeof k->in - 1 - k->nin, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                flush(k);
                drop(k);
                break;
            }
            if (r < 0) break;
            k->nin += (uint32_t)r;
            k->in[k->nin] = 0;
            char *nl;
            while (k->fd >= 0 && (nl = memchr(k->in, '\n', k->nin))) {
                *nl = 0;
                if (nl > k->in && nl[-1] == '\r') nl[-1] = 0;
                c->handle(c->ctx, c, k, k->in);
                uint32_t used = (uint32_t)(nl + 1 - k->in);
                memmove(k->in, nl + 1, k->nin - used);
                k->nin -= used;
            }
            if (k->nin >= sizeof k->in - 1) {         /* a line too long: answer and forget it */
                ctl_printf(k, "error: line too long\n");
                k->nin = 0;
            }
        }
        if (k->fd >= 0) flush(k);
    }
}
