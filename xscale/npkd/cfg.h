/* cfg.h -- npkd's configuration file, written by `npk link` (npkit.toolchain.system.control)
 * from the router configuration and the system map, one directive a line:
 *
 *   port INDEX A.B.C.D LEN MAC            the router's ports (index = position)
 *   arp A.B.C.D MAC                       static ARP entries
 *   routes PATH                           route file: "PREFIX/LEN NEXTHOP PORT" lines, # comments
 *   redirects 0|1                         send_redirects (RFC 1812 5.2.7.2)
 *   lpm CTL ROOT NH NH_CAP NODES NODE_BYTES          LAYOUT.md / sram_map.yaml
 *   sys DESC_BASE DESC_SHIFT N_BUFS BUF_BASE BUF_SHIFT FREELIST_Q STAT_EXC_BASE
 *   rings EXCEPTIONS CONTROL              scratch ring numbers
 *   log BASE CAPACITY                     the exception log the host reads (SRAM)
 *   changelog BASE CAPACITY               the log of route changes made (SRAM)
 *   stats BASE                            the statistics block (SRAM)
 *   owned BASE CAPACITY                   the table of the buffers the daemon owns (SRAM,
 *                                         cp.h): a bit for each of CAPACITY >= N_BUFS handles
 *   option NAME VALUE                     tunables (npkd.h: NPKD_OPTIONS)
 *   change AT_NS add PREFIX/LEN NEXTHOP PORT | change AT_NS del PREFIX/LEN
 *   state PATH                            where the route table is persisted
 *   socket PATH                           the control socket (Unix)
 * Numbers are decimal or 0x hex.  Unknown directives are errors. */
#ifndef NPKD_CFG_H
#define NPKD_CFG_H
#include <stddef.h>
#include <stdint.h>

#include "lpm.h"

#define NPKD_MAX_PORTS 8
#define NPKD_PATH 512

typedef struct port_cfg {
    uint32_t addr, mask, net, bcast;
    int len;
    uint8_t mac[6];
} port_cfg;

typedef struct arp_cfg {
    uint32_t ip;
    uint8_t mac[6];
} arp_cfg;

typedef struct route_cfg {
    uint32_t prefix, next_hop;
    int len, port;
} route_cfg;

typedef struct timed_change {
    uint64_t at_ns;
    int add;
    route_cfg r;
} timed_change;

typedef struct sys_cfg {
    uint32_t desc_base, desc_shift, n_bufs, buf_base, buf_shift, freelist_q, stat_exc_base;
} sys_cfg;

/* tunables: name, field, default (see the README of xscale/npkd) */
#define NPKD_OPTIONS(X)                                                                 \
    X(icmp_rate, 200000)        /* ICMP errors a second (token bucket refill) */       \
    X(icmp_burst, 500)          /* bucket depth */                                       \
    X(arp_retry_us, 200)        /* between ARP requests for an unresolved next hop */    \
    X(arp_tries, 3)             /* requests before the next hop is unreachable */         \
    X(arp_hold, 16)             /* packets held per unresolved next hop */                \
    X(arp_age_ms, 60000)        /* a learnt ARP entry expires after this long */          \
    X(closed_ports_only, 1)     /* UDP to the router: every port is closed */             \
    X(batch, 16)                /* exception records taken before other work (and a yield) */ \
    X(epoch_s, 1700000000)      /* realtime at emulated time 0 (IP timestamps) */          \
    X(load_chunk, 512)          /* routes loaded between two looks at the exception ring */ \
    X(lpm_grace_us, 1000)       /* a replaced trie node is reused no sooner (LAYOUT.md §7) */ \
    X(ctl_idle_us, 100000)      /* a control connection idle this long is closed (emulated) */ \
    X(ctl_answer_max, 1048576)  /* a control answer's bytes at most (past it: closed) */

typedef struct npkd_opts {
#define NPKD_OPT_FIELD(name, dflt) uint32_t name;
    NPKD_OPTIONS(NPKD_OPT_FIELD)
#undef NPKD_OPT_FIELD
} npkd_opts;

/* -D classify=flows: the flow table in SRAM (flows.h) and the plugins loaded at start; only
 * an image with the table has these lines, so the router without it is the one it was */
typedef struct flow_cfg {
    uint32_t key_base, aux_base, buckets;
    uint64_t mult_hi, mult_lo;
    struct { uint32_t slot, args[4], nargs; char name[16]; } plugin_init[16];
    uint32_t nplugin_init;
    uint32_t log_base, log_cap;
    uint64_t idle_us;                       /* idle expiry (0: never) */
} flow_cfg;

/* SPP mode (docs/spp.md §12): the IPv4 slices' slow path on the GPE.  Records come from
 * i3d (its relay ring); the frame is the substrate's (Ethernet, outer IPv4, UDP, the
 * inner IPv4 packet); answers go back encapsulated for the input meta-interface.  Read
 * from the application's exceptions file (cp.h NPKD_APP_EXCEPTIONS: `spp_mi` and
 * `spp_local` lines, code action `spp`), so the router's npkd_cfg stays as it is. */
#define NPKD_SPP_MAX_MI 32
#define NPKD_SPP_MAX_LOCAL 16
typedef struct spp_cfg {
    uint32_t nmi, nlocal;
    struct { uint32_t port, ip, udp; } mi[NPKD_SPP_MAX_MI];    /* the IPv4 slices' meta-interfaces */
    struct { uint32_t prefix, len; } local[NPKD_SPP_MAX_LOCAL]; /* the slices' addresses on the GPE */
} spp_cfg;

typedef struct npkd_cfg {
    port_cfg port[NPKD_MAX_PORTS];
    int nports;
    arp_cfg *arp;
    uint32_t narp, caparp;
    route_cfg *route;
    uint32_t nroute, caproute;
    timed_change *chg;
    uint32_t nchg, capchg;
    int send_redirects;
    lpm_layout lay;
    sys_cfg sys;
    int exc_ring, cp_ring;
    uint32_t log_base, log_cap, stats_base, changelog_base, changelog_cap;
    uint32_t owned_base, owned_cap;         /* owned_cap 0: no table (nothing reclaimed) */
    npkd_opts opt;
    struct flow_cfg *flows;                 /* -D classify=flows, else NULL (allocated by its lines) */
    char routes_path[NPKD_PATH], state_path[NPKD_PATH], socket_path[NPKD_PATH];
} npkd_cfg;

void cfg_init(npkd_cfg *c);
void cfg_free(npkd_cfg *c);
/* 0, or -1 with a message "FILE:LINE: what" in err */
int cfg_load(npkd_cfg *c, const char *path, char *err, size_t errlen);
/* a route file into c->route (replacing it) */
int cfg_load_routes(npkd_cfg *c, const char *path, char *err, size_t errlen);
/* one "PREFIX/LEN NEXTHOP PORT" line (also "PREFIX/LEN via NEXTHOP [port P]" and
 * "PREFIX/LEN dev P"): 0 ok, -1 malformed; next hop 0 = on-link */
int parse_route(const npkd_cfg *c, const char *s, route_cfg *r);
int parse_ip(const char *s, uint32_t *ip, const char **end);
int parse_mac(const char *s, uint8_t mac[6], const char **end);
/* rcheck.h's rules for this configuration's ports: 0, or 1 with the problem in msg */
int cfg_route_problem(const npkd_cfg *c, const route_cfg *r, char *msg, size_t n);
int port_of_subnet(const npkd_cfg *c, uint32_t ip);   /* -1 none */
const arp_cfg *cfg_arp(const npkd_cfg *c, uint32_t ip);
#endif
