/* npk_pkt.h -- packet work at C speed for the traffic harness (libnpkpkt.so).
 *
 * Not part of the emulator core: the generator, the oracle and the route tables of
 * npkit.emulator.traffic, written so that their results are bit-identical to the Python
 * reference implementations (emulator/traffic/generator.py, oracle.py, routes.py and
 * toolchain/router/lpm.py), which stay the specification and the fallback:
 *
 *   npk_mt_*      Python's random.Random (MT19937): the same state, the same draws
 *   npk_routes_*  the route file parser (fast path; any doubt -> the Python parser)
 *   npk_rt_*      longest-prefix match over a route set as sorted disjoint intervals
 *   npk_lpm_*     the microcode's 16-8-8 trie built in one pass (LpmTable.build)
 *   npk_gen_*     a port's frame bytes (FrameBuilder) for the common kinds
 *   npk_oracle_*  the reference router's verdict and rewrite (RefRouter.process)
 *
 * No global mutable state: every function works on the structures it is given.
 * Python binds the block between the CDEF markers with cffi (npkit.emulator.pktlib). */
#ifndef NPK_PKT_H
#define NPK_PKT_H
#include <stddef.h>
#include <stdint.h>

/* CDEF-BEGIN */
typedef struct npk_mt {
    uint32_t state[624];
    int32_t index;
} npk_mt;

uint32_t npk_mt_u32(npk_mt *m);
uint32_t npk_mt_bits(npk_mt *m, int k);
uint32_t npk_mt_below(npk_mt *m, uint32_t n);
double npk_mt_random(npk_mt *m);

/* Route file text -> columns.  Returns the number of routes, or -1 when the text needs
 * the Python parser (an error to report with its line, or anything unusual). */
int64_t npk_routes_parse(const char *text, size_t n, uint32_t cap, uint32_t *prefix, uint8_t *length,
                         uint32_t *next_hop, uint32_t *port);

/* A route set as sorted disjoint intervals: starts[i] .. starts[i+1]-1 -> vals[i] (a route
 * index, -1 = no route).  Returns the number of intervals (at most 2n+1), -1 on a
 * duplicate (prefix, length) (dup[0], dup[1]: the two route indices, first one first),
 * -2 on bad input (host bits, length > 32). */
int64_t npk_rt_build(uint32_t n, const uint32_t *prefix, const uint8_t *length, uint32_t *starts,
                     int32_t *vals, uint32_t *dup);
int32_t npk_rt_lookup(const uint32_t *starts, const int32_t *vals, uint32_t count, uint32_t addr);
void npk_rt_lookup_many(const uint32_t *starts, const int32_t *vals, uint32_t count, uint32_t n,
                        const uint32_t *addr, int32_t *out);

/* LpmTable.build() in one pass: root[65536] entries, nodes[] longwords (cap_words), the
 * node pool's high-water mark in 16-byte units.  Returns 0, -1 when the pool is full,
 * -2 on bad input. */
int npk_lpm_build(uint32_t n, const uint32_t *prefix, const uint8_t *length, const uint16_t *nexthop,
                  uint32_t *root, uint32_t *nodes, uint64_t cap_words, uint64_t *high_water);

/* The routes whose next hop is in good[] (sorted) and, via >= 0, whose port is via, and
 * that do not lie inside skip_prefix/skip_len (skip_len 0: none), copied to the out_
 * columns; returns how many. */
uint32_t npk_routes_select(uint32_t n, const uint32_t *prefix, const uint8_t *length, const uint32_t *next_hop,
                           const uint32_t *port, const uint32_t *good, uint32_t ngood, int64_t via,
                           uint32_t skip_prefix, uint8_t skip_len,
                           uint32_t *out_prefix, uint8_t *out_length, uint32_t *out_hop, uint32_t *out_port);

/* Longwords to big-endian byte order, in place (SRAM images are written big-endian). */
void npk_words_to_be(uint32_t *w, uint64_t n);

typedef struct npk_routes {       /* a route table as the generator and the oracle see it */
    const uint32_t *starts;       /* npk_rt_build intervals */
    const int32_t *vals;
    uint32_t count;
    const uint32_t *next_hop;     /* per route: 0 = directly connected */
    const uint16_t *port;
} npk_routes;

typedef struct npk_arp {          /* sorted next-hop addresses and their MACs */
    const uint32_t *ip;
    const uint8_t *mac;           /* 6 bytes each */
    uint32_t n;
} npk_arp;

typedef struct npk_rport {
    uint32_t address, network, netmask, broadcast;
    uint8_t mac[6];
} npk_rport;

typedef struct npk_router {
    uint32_t nports;
    const npk_rport *ports;
    npk_routes routes;
    npk_arp arp;
    int send_redirects;
} npk_router;

/* The oracle's verdicts.  kind: 0 forward, 1 drop, 2 exception; reason: an
 * NPK_R_* code (below); port: the output port of a forward.  out gets every frame,
 * rewritten when forwarded (same offsets and lengths as the input). */
void npk_oracle_run(const npk_router *r, uint32_t n, const uint8_t *data, const uint64_t *off,
                    const uint16_t *len, const uint8_t *in_port, uint8_t *kind, uint8_t *reason,
                    uint8_t *port, uint8_t *out);

/* Load by port: for each frame i (only those with kind[i] == want, kind not NULL), bits[p]
 * += 8 * (len[i] + over[p]) and pkts[p] += 1, p = port[i]; over: the bytes the wire adds
 * to a frame of each of the 256 ports (preamble, FCS, gap).  The harness's offered and
 * demanded load, a window at a time. */
void npk_port_load(uint32_t n, const uint8_t *port, const uint16_t *len, const uint8_t *kind, uint8_t want,
                   const uint32_t *over, uint64_t *bits, uint64_t *pkts);

/* The id a frame's b"NPK1" tag carries (first occurrence, 8 bytes inside the frame), -1 if none. */
int64_t npk_tag_id(const uint8_t *frame, uint32_t len);
void npk_tag_ids(uint32_t n, const uint8_t *data, const uint64_t *off, const uint16_t *len, int64_t *out);

typedef struct npk_gen {
    npk_mt rng;                   /* the port's content stream */
    uint32_t ident;
    uint8_t src_mac[6], me_mac[6];
    uint32_t nprotos;             /* protocols with weight > 0: 0 udp, 1 tcp, 2 tunnel */
    uint8_t protos[3];
    double proto_cum[3];
    double proto_total;
    uint32_t pool_n;              /* destinations: prefixes and lengths */
    const uint32_t *pool_prefix;
    const uint8_t *pool_len;
    int forwardable;              /* the router's own table: draw until it forwards */
    int via_port;                 /* -1: any */
    const npk_router *router;
    const uint32_t *not_unicast;  /* sorted: own, network and broadcast addresses */
    uint32_t n_not_unicast;
} npk_gen;

/* Build frames kind[i] (NPK_K_*) of lens[i] bytes with ids pid[i] into out at off[i],
 * in order, until one the C builder does not do (returns its index; n when all done),
 * or -1 - i when frame i cannot be drawn (no forwardable destination after 100 tries:
 * the Python builder raises the error). */
int64_t npk_gen_frames(npk_gen *g, uint32_t n, const uint8_t *kind, const uint16_t *lens,
                       const uint32_t *pid, uint8_t *out, const uint64_t *off);
/* The departure ledger: frames that left, matched to their input packets by the
 * generator's tag and accounted (fates, forwarded counts, duplicates, conflicts), and,
 * where the window has the oracle's verdicts, compared (outcome, port, bytes), timed and
 * checked for flow order -- what TrafficRun.departed and RouterRun do frame by frame,
 * for every frame whose tag names a packet still held; the others are left to Python. */
typedef struct npk_chunkv {
    uint64_t first, end, pushed;      /* ids first .. end-1; pushed: how many went to the MSF */
    uint8_t *fate;                    /* bit 0 forwarded, 1 dropped, 2 excepted */
    const int64_t *tags;
    const uint64_t *times;
    const uint8_t *ports;
    const uint64_t *off;
    const uint16_t *lens;
    const uint8_t *vkind, *vport, *vout;   /* the oracle's verdicts; NULL: none; a vkind of
                                             NPK_V_PYTHON leaves the packet to Python */
    int64_t left;                     /* packets without a fate */
    const uint8_t *data;              /* the input frames (at off); NULL: the flow key is read
                                         from the departing frame (a router keeps the addresses;
                                         an application that rewrites them, the SPP's tunnels or a
                                         load balancer, needs its input's) */
} npk_chunkv;

typedef struct npk_flow {
    uint8_t key[12];                  /* input port, length, protocol, source, destination */
    int64_t pid;                      /* the last id of the flow that left; -1: empty slot */
} npk_flow;

typedef struct npk_ledger {
    uint64_t forwarded[64];           /* by input port */
    uint64_t tx_bits[64];             /* by output port, frames that left before tx_until */
    uint32_t over[64];                /* wire bytes a frame costs beyond its bytes, by port */
    uint64_t tx_until;
    uint64_t duplicates, conflicts;
    int64_t first_duplicate, first_conflict;
    uint64_t matched, wrong_outcome, wrong_port, wrong_bytes, reordered;
    npk_flow *flows;                  /* open addressing, a power of two */
    uint64_t cap, used;
    uint32_t own[16];                 /* the router's own addresses: frames it makes itself */
    uint32_t n_own;                   /* (ARP, IPv4 from one of them) are left to Python, slow 2 */
} npk_ledger;

npk_ledger *npk_ledger_new(void);
void npk_ledger_free(npk_ledger *l);
/* 1 when a packet of flow `key` with a higher id left before `pid`; records pid */
int npk_flow_check(npk_ledger *l, const uint8_t *frame, uint32_t len, uint32_t in_port, int64_t pid);
/* forget flows whose last id is below cut (no packet older than cut is still to leave) */
uint64_t npk_flow_evict(npk_ledger *l, int64_t cut);
/* Account n frames (port, departure ns, length, offset into data).  chunks sorted by first.
 * pid[i]: the input packet (-1: left to Python, slow[i] = 1; a frame the router made
 * itself, with n_own: slow[i] = 2); lat[i]: departure - arrival of compared frames (-1:
 * none).  Returns how many were left to Python, -1 on no memory. */
int64_t npk_depart(npk_ledger *l, npk_chunkv *chunks, uint32_t nchunks, uint64_t pushed, uint32_t n,
                   const uint8_t *port, const uint64_t *t, const uint16_t *len, const uint64_t *off,
                   const uint8_t *data, uint8_t *slow, int64_t *pid, int64_t *lat);
/* CDEF-END */

/* a verdict kind (next to the oracle's 0 forward, 1 drop, 2 exception): Python judges it */
#define NPK_V_PYTHON 3

/* internal: whether v is in the sorted array a[0..n) */
int npk_in_sorted(const uint32_t *a, uint32_t n, uint32_t v);

/* reasons (oracle.py's rule names; Python maps them to reasons.yaml) */
enum {
    NPK_R_NONE, NPK_R_SHORT_FRAME, NPK_R_OVERSIZE_FRAME, NPK_R_DST_MAC_MISMATCH, NPK_R_ARP,
    NPK_R_NON_IPV4_ETHERTYPE, NPK_R_BAD_VERSION, NPK_R_BAD_IHL, NPK_R_BAD_TOTAL_LENGTH,
    NPK_R_IP_TRUNCATED, NPK_R_BAD_CHECKSUM, NPK_R_IP_OPTIONS, NPK_R_MARTIAN_DST,
    NPK_R_OBSOLETE_BROADCAST, NPK_R_BROADCAST, NPK_R_MULTICAST, NPK_R_LINK_BROADCAST_UNICAST_IP,
    NPK_R_LOCAL_DELIVERY, NPK_R_MARTIAN_SRC, NPK_R_NO_ROUTE, NPK_R_TTL_EXPIRED, NPK_R_REDIRECT,
    NPK_R_ARP_MISS
};

/* generator kinds the C builder does (spec.KINDS indices are mapped by Python) */
enum { NPK_K_OTHER = 0, NPK_K_NORMAL = 1, NPK_K_TTL_EXPIRING = 2, NPK_K_OPTIONS = 3, NPK_K_RUNT = 4 };

#endif
