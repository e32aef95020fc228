/* cp.h -- the control plane: what npkd does with each exception record (RFC 1812,
 * 792, 826), the ARP cache and hold queues, ICMP rate limiting, sending frames back
 * through the fast path, the exception log and the statistics.
 *
 * The engine reaches the chip only through npkd_mem (memory windows) and npkd_hw (the
 * scratch rings, the buffer free list and the clock), so the native unit tests run it
 * against plain buffers. */
#ifndef NPKD_CP_H
#define NPKD_CP_H
#include <stdint.h>

#include "cfg.h"
#include "hw.h"
#include "flows.h"
#include "pkt.h"
#include "stats.h"
#include "tables.h"


/* packet word bit 25: a frame the control plane made (README §3.1); its queue_full drop
 * is counted as control_queue_full */
#define PW_CONTROL (1u << 25)

/* the exception log (SRAM, read by the host): header count, capacity; 16-byte records
 *   LW0 digest of the received frame (FNV-1a over its first 128 bytes)
 *   LW1 frame length << 16 | input port << 8 | exception code
 *   LW2 action << 24 | frames the control plane sent about it << 16 | buffer handle
 *   LW3 time handled, microseconds */
enum { ACT_CONSUMED = 1, ACT_FORWARDED = 2, ACT_DROPPED = 3, ACT_HELD = 4 };

/* the table of the buffers the daemon owns (SRAM, cfg `owned`): what survives the daemon
 * when it is killed, so that the next one gives back the buffers its predecessor held
 * (README "Restart").  Header: LW0 magic "NPKO", LW1 capacity (buffers), LW2 messages in
 * the send backlog, LW3 the backlog's first slot; then a bit a buffer handle h: word
 * h / 32, bit h % 32.  The bit is set when the daemon takes a
 * buffer (an exception record's, one off the free list) and cleared when it gives the
 * buffer away (back to the free list, or on the control ring to the queue manager):
 * held for ARP, waiting in the send backlog, or half handled, it is marked.  Set after
 * the take, cleared before the give: were the daemon to die in either gap (it cannot: a
 * kill is taken at a system call, at a wait on the device for gpe, and neither gap has
 * one) a buffer would leak, but none that is no longer its own would be freed.
 *
 * After the bits, two more records of what dies with the daemon, so that whoever looks
 * at the instant it dies (the host's run, the daemon started after it) knows exactly
 * what it had, without a model of its timing:
 *   the send backlog: `capacity` slots of 8 bytes {packet word, output port}; the
 *     LW2 messages from slot LW3 on (wrapping) are those waiting for room on the control
 *     ring, oldest first.  Written as a message joins the backlog, LW2/LW3 as messages
 *     leave it: a daemon that never backlogs never writes here.  (A buffer is in one
 *     message at most, so `capacity` slots always suffice.)
 *   the ARP cache: LW0 entries, then NPKD_ARP_MIRROR entries of 16 bytes {address,
 *     state << 24 | tries << 16 | port, start of the resolution in ns (high, low word)}
 *     in the cache's order, written as each changes (entries past NPKD_ARP_MIRROR are
 *     not).  The resolution's requests are due at start + k * arp_retry_us (k = tries).
 * The first start (and a restart) empties both: LW2, LW3 and the cache's count 0. */
#define NPKD_OWNED_MAGIC 0x4E504B4Fu   /* "NPKO" */
#define NPKD_OWNED_HDR 16u
#define NPKD_ARP_MIRROR 1024u
#define NPKD_OWNED_WORDS(cap) (((cap) + 31u) / 32u)
#define NPKD_BACKLOG_AT(base, cap) ((base) + NPKD_OWNED_HDR + 4u * NPKD_OWNED_WORDS(cap))
#define NPKD_ARPM_AT(base, cap) (NPKD_BACKLOG_AT(base, cap) + 8u * (cap))
#define NPKD_OWNED_BYTES(cap) (NPKD_ARPM_AT(0u, cap) + 16u + 16u * NPKD_ARP_MIRROR)

typedef struct exc_info {
    uint32_t pw, handle, len, in_port, reason, digest, sent;
} exc_info;

typedef struct hold_item {
    exc_info x;
    uint8_t generated;      /* a frame the control plane made (no log record, no TTL) */
    uint8_t full;           /* recompute the IP checksum (options were processed) */
    uint8_t counter;        /* generated: the ICMP sent counter that counts it when it leaves */
} hold_item;

enum { ARP_NONE = 0, ARP_INCOMPLETE = 1, ARP_REACHABLE = 2 };

typedef struct arp_ent {
    uint32_t ip;
    uint8_t mac[6];
    uint8_t state, tries, port;
    uint8_t gateway_installed, adjacency_installed;
    uint8_t adjacency_pending;  /* a /32 to install once the route model is loaded */
    uint64_t expires, next_try;
    hold_item *hold;
    uint32_t nhold;
} arp_ent;

typedef struct cp {
    const npkd_cfg *cfg;
    npkd_mem *mem;
    tables *tab;
    npkd_hw hw;
    int tables_ready;                       /* the route model is loaded */
    uint32_t own[NPKD_MAX_PORTS];
    u32map arp_at;                          /* ip -> index in arp */
    arp_ent *arp;
    uint32_t narp, caparp;
    uint64_t bucket, bucket_ns;             /* ICMP tokens x 1e9, last refill */
    uint32_t *backlog;                      /* messages waiting for room on the control ring */
    uint32_t bl_head, bl_n, bl_cap;
    uint32_t bl_slot;                       /* the backlog's first slot in its SRAM record */
    uint32_t stats[ST_COUNT];
    uint32_t recovered_seen;                /* trie units recovered, in stats already */
    uint32_t log_count;
    uint64_t next_age_scan;
    uint32_t epoch_ms_of_day;               /* realtime at emulated 0, ms since midnight UT */
    uint8_t frame[2048], quote[2048];
    int (*ensure_tables)(void *ctx);        /* finish loading the route model now */
    void *ensure_ctx;
    /* persist a route change (one line), before it is made (cp.c commit_change):
     * 0, or -1 when it could not be written (the change is then not made) */
    int (*journal)(void *ctx, const char *line);
    uint32_t timed_mark;                    /* 1 + the index of the timed change being made, else 0 */
    /* an application's exception actions by code (NPKD_EXC_*), read from NPKD_APP_EXCEPTIONS
     * beside the route file when the first code npkit does not know comes (NULL until then) */
    const uint8_t *app_exc;
#ifdef NPK_GPE
    int spp_mode;                           /* SPP mode (spp.c): the exceptions file read at start */
    uint32_t relay_pw;                      /* a relayed record's first word, its second not yet */
#endif
    flow_table *fl;                         /* -D classify=flows (flows.h), else NULL */
} cp;

/* An application's exception reasons (its reasons.yaml `control:`), one a line in the file
 * NPKD_APP_EXCEPTIONS in the route file's directory, written by npkit.toolchain.system.control:
 *   CODE consume      the packet is counted (its log record) and freed
 *   CODE forward      routed as the fast path routes it (TTL decremented) and sent, or held for ARP
 * Read only when a code npkd does not know arrives, so that a router without such reasons
 * runs the code it ran before.  A code the file does not name is dropped as before
 * (exc_unknown). */
#define NPKD_APP_EXCEPTIONS "npkd.exceptions"
enum { NPKD_EXC_NONE = 0, NPKD_EXC_CONSUME = 1, NPKD_EXC_FORWARD = 2, NPKD_EXC_SPP = 3 };
/* ... "CODE spp": SPP mode (spp.c); the file's `spp_mi PORT IP UDP` and `spp_local PREFIX
 * LEN` lines (addresses in hex) are kept after the 256 actions (NPKD_APP_SPP) */
#define NPKD_APP_SPP(app_exc) ((const spp_cfg *)((app_exc) + 256))

int cp_init(cp *c, const npkd_cfg *cfg, npkd_mem *mem, tables *tab, const npkd_hw *hw);
void cp_free(cp *c);
/* take up to max records off the exception ring and act on each; returns how many */
int cp_poll(cp *c, int max);
/* ARP retries and failures, ageing, the send backlog */
void cp_timers(cp *c);
/* the next time cp_timers has something to do (UINT64_MAX: nothing) */
uint64_t cp_deadline(const cp *c);
void cp_publish(cp *c, uint32_t state, uint32_t starts);
/* at start-up, before the first record.  `restart`: a daemon ran before this one since
 * the chip was loaded (the statistics block says so): give back to the free list every
 * buffer the owned table marks (what that daemon held when it died), count them
 * (buffers_reclaimed) and clear the table.  The first start (or a table without its
 * header) clears the table, frees nothing (what SRAM held is no daemon's) and writes the
 * header.  A restart also counts what its predecessor's send backlog held (the SRAM
 * record: killed_backlog_own, killed_backlog_forwarded): frames that never left.  Both
 * empty the records of the backlog and the ARP cache.  Returns the buffers given back. */
uint32_t cp_reclaim(cp *c, int restart);
/* route changes: 0 ok, negative error (as tables_add_route / tables_del_route; -7 the
 * route model could not be loaded, -9 the journal could not be written), made
 * write-ahead (cp.c commit_change); source (for the change log): CHG_TIMED, CHG_SOCKET */
enum { CHG_TIMED = 1, CHG_SOCKET = 2, CHG_TIMED_FAILED = 3, CHG_WITHDRAWN = 4 };
int cp_route_add(cp *c, const route_cfg *r, int source);
int cp_route_del(cp *c, uint32_t prefix, int len, int source);
/* timed change number `index` of the configuration (source CHG_TIMED), counted in
 * timed_changes: its journal line carries the index ("timed N add ..."), so that a
 * restarted daemon knows which its predecessors made (tables.h: timed_done); one that
 * fails is journalled as dealt with all the same ("timed N" alone, after the failure),
 * not to be tried again, and has a change log record of source CHG_TIMED_FAILED (the
 * change tried), so that the host knows each timed change dealt with, made or not.
 * Returns as cp_route_add. */
int cp_timed_change(cp *c, const timed_change *t, uint32_t index);
/* Restarted daemon number `starts` withdrew the ARP state its predecessors had put in
 * the fast path, done by `at_ns` (tables_load on_withdraw): a change log record of
 * source CHG_WITHDRAWN stamped then, `starts` in place of the prefix and the nanoseconds
 * past the record's microsecond in place of the next hop -- so the host knows from when
 * the fast path excepts packets to the next hops learnt before, not only that it has by
 * its next look. */
void cp_log_withdrawal(cp *c, uint64_t at_ns, uint32_t starts);
/* "A.B.C.D" and "A.B.C.D/LEN via N.N.N.N port P" / "... dev P", without printf */
char *fmt_ip(char *b, uint32_t a);
char *fmt_route(char *b, const route_cfg *r);
/* one exception record (exposed for the unit tests) */
void cp_exception(cp *c, uint32_t pw, uint32_t rec);
/* spp.c: a record in SPP mode (cfg->spp; docs/spp.md §12), from the application-exception
 * path: answered, logged, its buffer sent or freed; 1 */
int spp_exception(cp *c, exc_info *x, uint8_t *f, const spp_cfg *s);
#ifdef NPK_GPE
/* SPP mode: read the exceptions file now; 1 when it names the SPP's meta-interfaces */
int cp_spp_start(cp *c);
#endif
const char *cp_stat_name(int i);
/* the route model is loaded: install what waited for it */
void cp_tables_ready(cp *c);
#endif
