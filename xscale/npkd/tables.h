/* tables.h -- the router's lookup tables: the trie (lpm.h) and the next-hop table
 * (LAYOUT.md §5), filled from the configuration as toolchain/router/loader.py's
 * build_tables fills them (same entries, same order, same indices). */
#ifndef NPKD_TABLES_H
#define NPKD_TABLES_H
#include <stdint.h>
#include <stdio.h>

#include "cfg.h"
#include "lpm.h"

#define NH_NO_ROUTE 0x80u
#define NH_LOCAL 0x40u
#define NH_ARP_MISS 0x20u
#define NH_BROADCAST 0x10u
#define NH_DIRECT 0x08u
#define NH_EXCEPTION (NH_NO_ROUTE | NH_LOCAL | NH_ARP_MISS | NH_BROADCAST)

typedef struct nh_entry {
    uint32_t port, flags;
    uint8_t dst[6], src[6];
    uint32_t next_hop;          /* ARP_MISS entries: the address to resolve (0 = the destination) */
} nh_entry;

typedef struct nh_table {
    nh_entry *e;
    uint32_t *via;              /* the next hop each entry was made for (loader.py next_hop_ip) */
    uint32_t n, cap, last;      /* last: the entry interned last (routes come in runs) */
    u32map by_hash;             /* hash of the encoded entry -> first index with it */
} nh_table;

#define TABLES_GRACE_MARKS 16
typedef struct tables {
    lpm trie;
    nh_table nh;
    npkd_mem *mem;
    const npkd_cfg *cfg;
    /* The grace of replaced trie nodes (LAYOUT.md §7 rule 4), when `clock` is set (the
     * daemon: emulated ns, read afresh).  Before each change the daemon notes how many
     * nodes are in limbo and when (a mark: they were all retired before then), and frees
     * the limbo's first n entries of the latest mark at least opt.lpm_grace_us old: a
     * node is reused once a change comes a grace period after one that saw it in limbo.
     * After a restart the limbo's first entry (what the previous daemon left: lpm_adopt)
     * is marked with `started_ns`, when this daemon started: its predecessor wrote nothing
     * after that.  Without a clock the caller calls lpm_grace. */
    uint64_t (*clock)(void *ctx);
    void *clock_ctx;
    uint64_t started_ns;
    struct {
        uint32_t n;
        uint64_t at;
    } marks[TABLES_GRACE_MARKS];  /* oldest first; when full, newer nodes wait for a later mark */
    uint32_t nmarks;
    int pend_nh;                  /* a prepared change's new next-hop entry (-1: none) */
} tables;

void nh_encode(const nh_entry *e, uint32_t w[4]);
void nh_decode(const uint32_t w[4], nh_entry *e);
void nh_read(npkd_mem *m, const lpm_layout *l, uint32_t index, nh_entry *e);   /* from SRAM */
void nh_write(npkd_mem *m, const lpm_layout *l, uint32_t index, const nh_entry *e);

int tables_init(tables *t, const npkd_cfg *cfg, npkd_mem *mem);
void tables_free(tables *t);
/* Loading in steps: from cfg (ports, static ARP, the route file) as build_tables does,
 * then, after a restart, the journal of route changes the previous instance wrote (one
 * line each, appended as they happen, each before its change is published: add/del of
 * routes, adj/unadj of ARP-learnt /32s; cp.c commit_change), replayed in order.  Every
 * line written is of a change then made (a kill at its write leaves no line), so a line
 * the replay cannot apply is an error.  A timed change's line carries its index in the
 * configuration ("timed N add ...", or "timed N" alone for one that failed: cp.h
 * cp_timed_change); lines without it (socket changes, ARP, a journal of an older npkd)
 * replay as before.  The daemon makes timed changes in index order, so those below
 * `timed_done` were all dealt with; the ones from there on it has still to make.  write = 1: lay the whole image out in SRAM (the linker's job;
 * tests and `npkd --build-image`); write = 0: the model only, then adopt what SRAM
 * holds and check that its next-hop table is this one.  A restart puts learnt ARP
 * state back to unresolved (`learnt`: the /32s withdrawn, to journal) and adopts the
 * trie with recovery (lpm_adopt): the caller makes the walk (lpm_recover_step). */
typedef struct tables_load {
    int phase, write, restart;
    FILE *f, *journal;
    uint32_t line, jline, reverted;
    /* told once a restart has withdrawn learnt ARP state (its SRAM writes made), with the
     * clock then (ns; 0 without one): the host that reads what the daemon records of it
     * (a change log record, cp.h cp_log_withdrawal) knows the fast path had every write
     * by that time -- at the latest by the start of the core's stretch of time then
     * (XScaleHost.visible_from) -- and sees the record before packets that came later */
    void (*on_withdraw)(void *ctx, uint64_t at_ns);
    void *on_withdraw_ctx;
    uint32_t timed_done;      /* 1 + the highest index of a timed change the journal marks */
    /* the journal's whole lines (bytes), and whether more followed: the start of a line
     * whose write was cut (a kill, a full disk), not applied (its change was never
     * acknowledged) and cut off the file before the daemon appends to it (npkd.c) */
    uint64_t jbytes;
    int torn;
    u32vec learnt;
    char err[NPKD_PATH + 100];
} tables_load;
int tables_load_begin(tables *t, tables_load *L, int write, const char *journal);
int tables_load_step(tables *t, tables_load *L, uint32_t budget);   /* 1 done, 0 more, <0 error */
void tables_load_end(tables_load *L);
/* Fill from cfg (ports, static ARP, cfg->route).  write = 1: lay the whole image out
 * in SRAM (the linker's job; used by tests and `npkd --build-image`); write = 0: the
 * model only, then adopt what SRAM holds and check the next-hop table there equals it
 * (1 if it differs).  0 ok, negative error, message in err. */
int tables_build(tables *t, int write, char *err, size_t errlen);
/* A route while the fast path runs (LAYOUT.md §7 rule 5: a new next-hop entry first):
 * 0 ok, negative as lpm_add (-2 also: the next-hop table full). */
int tables_add_route(tables *t, const route_cfg *r);
int tables_del_route(tables *t, uint32_t prefix, int len);
/* a route with a given next-hop entry (an ARP-learnt adjacency /32) */
int tables_add_entry_route(tables *t, const route_cfg *r, const nh_entry *e);
/* The same in two steps (lpm_prepare): prepare does all that can fail (the next-hop
 * table's room, the trie's checks and new nodes) and on an error leaves everything as
 * it was; then exactly one of commit (the new next-hop entry, then the trie's root
 * entries: SRAM writes that cannot fail) or abort.  The daemon writes its journal line
 * in between (cp.c: write-ahead). */
int tables_prepare_route(tables *t, const route_cfg *r);
int tables_prepare_entry_route(tables *t, const route_cfg *r, const nh_entry *e);
int tables_prepare_del(tables *t, uint32_t prefix, int len);
void tables_commit(tables *t);
void tables_abort(tables *t);
/* the index of an entry, appended when new (restoring a persisted table) */
int tables_intern(tables *t, const nh_entry *e, uint32_t via);
/* the entry a configured route gets (loader.py route_entry) */
void route_entry(const npkd_cfg *cfg, const route_cfg *r, nh_entry *e);
#endif
