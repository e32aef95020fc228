/* rcheck.c -- the route rules (rcheck.h); messages word for word those of
 * emulator/traffic/routes.py route_problem. */
#include "rcheck.h"

#include <stdio.h>

static uint32_t mask_of(int len)
{
    return len <= 0 ? 0 : len >= 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> len);
}

static void ip_text(char *b, uint32_t a)
{
    snprintf(b, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* what address a is to the router ("port 2's own address"), or 0 */
static int own(const uint32_t *port_addr, const uint8_t *port_len, int nports, uint32_t a, char *what, size_t n)
{
    int found = 0;
    for (int i = 0; i < nports; i++) {
        uint32_t m = mask_of(port_len[i]), bcast = (port_addr[i] & m) | ~m;
        if (a == port_addr[i]) found = snprintf(what, n, "port %d's own address", i) > 0;
        if (a == bcast) found = snprintf(what, n, "port %d's subnet broadcast address", i) > 0;
    }
    if (a == 0xFFFFFFFFu) found = snprintf(what, n, "the limited broadcast address") > 0;
    return found;
}

static const struct {
    uint32_t net;
    int len;
    const char *what;
} NEVER[] = {
    {0x00000000u, 8, "network 0"},
    {0x7F000000u, 8, "loopback"},
    {0xE0000000u, 4, "multicast"},
    {0xF0000000u, 4, "reserved, class E"},
};

int npkd_route_problem(const uint32_t *port_addr, const uint8_t *port_len, int nports, uint32_t prefix, int len,
                       uint32_t next_hop, int port, char *msg, size_t msglen)
{
    char p[16], h[16], what[64];
    ip_text(p, prefix);
    ip_text(h, next_hop);
    if (port < 0 || port >= nports) {
        snprintf(msg, msglen, "port %d does not exist (ports 0..%d)", port, nports - 1);
        return 1;
    }
    for (int i = 0; i < nports; i++) {
        uint32_t m = mask_of(port_len[i]);
        if (len == port_len[i] && prefix == (port_addr[i] & m)) {
            snprintf(msg, msglen, "repeats the connected subnet of port %d", i);
            return 1;
        }
    }
    if (len == 32 && own(port_addr, port_len, nports, prefix, what, sizeof what)) {
        snprintf(msg, msglen, "%s is %s; the router answers it itself, so this route would never be used", p, what);
        return 1;
    }
    for (size_t i = 0; i < sizeof NEVER / sizeof NEVER[0]; i++)
        if (len >= NEVER[i].len && (prefix & mask_of(NEVER[i].len)) == NEVER[i].net) {
            char b[16];
            ip_text(b, NEVER[i].net);
            snprintf(msg, msglen, "%s/%d lies in %s/%d (%s), which the router never forwards to", p, len, b,
                     NEVER[i].len, NEVER[i].what);
            return 1;
        }
    if (next_hop) {
        uint32_t m = mask_of(port_len[port]), net = port_addr[port] & m;
        if ((next_hop & m) != net) {
            char b[16];
            ip_text(b, net);
            snprintf(msg, msglen, "next hop %s is not on port %d's subnet %s/%d", h, port, b, port_len[port]);
            return 1;
        }
        if (own(port_addr, port_len, nports, next_hop, what, sizeof what)) {
            snprintf(msg, msglen, "next hop %s is %s", h, what);
            return 1;
        }
    }
    return 0;
}

int npkd_change_problem(uint32_t prefix, int len, char *msg, size_t msglen)
{
    if (len >= NPKD_CHANGE_MIN_LEN) return 0;
    char p[16];
    ip_text(p, prefix);
    snprintf(msg, msglen,
             "%s/%d is shorter than /%d: changed while the router runs it would rewrite %u of the 65536 root "
             "entries at once and hold up the exception path; put it in the route table",
             p, len, NPKD_CHANGE_MIN_LEN, 1u << (16 - len));
    return 1;
}
