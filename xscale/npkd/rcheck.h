/* rcheck.h -- what is wrong with a route for the router's ports: the one set of rules
 * for routes whichever way they arrive (the route file and the router config, checked by
 * npkit.emulator.traffic.routes.route_problem; the traffic spec's route_changes; timed
 * changes in npkd's configuration and `add` on the control socket, checked here).  The
 * two implementations give the same verdict and the same message for every route:
 * tests/xscale/test_route_rules.py runs one corpus through both.
 *
 * In order, the first that applies:
 *   the port does not exist;
 *   the prefix repeats a port's connected subnet;
 *   a /32 of an address the router answers itself (a port's address or subnet broadcast,
 *   255.255.255.255);
 *   the prefix lies in a block the fast path never forwards to (0.0.0.0/8, 127.0.0.0/8,
 *   240.0.0.0/4: martian_dst; 224.0.0.0/4: multicast; microcode/reasons.yaml);
 *   the next hop is not on the port's subnet, or is an address of the router's own. */
#ifndef NPKD_RCHECK_H
#define NPKD_RCHECK_H
#include <stddef.h>
#include <stdint.h>

/* 0 when the route is acceptable; else 1 with the problem in msg (NUL-terminated).
 * ports: addr[i] and len[i] of port i. */
int npkd_route_problem(const uint32_t *port_addr, const uint8_t *port_len, int nports, uint32_t prefix, int len,
                       uint32_t next_hop, int port, char *msg, size_t msglen);
/* A change made while the router runs (a timed change, `add`/`del` on the socket) of a
 * prefix shorter than /NPKD_CHANGE_MIN_LEN: 1 with the message (such a change rewrites
 * up to 65,536 of the trie's root entries in one go, holding up the exception path for
 * many milliseconds); 0 otherwise.  Python: routes.change_problem. */
#define NPKD_CHANGE_MIN_LEN 4
int npkd_change_problem(uint32_t prefix, int len, char *msg, size_t msglen);
#endif
