/* flows.h -- the flow table of `-D classify=flows` in SRAM (microcode/classify/classify.h,
 * npkit.emulator.traffic.flows: one layout, one hash) and the plugins the daemon runs for
 * the flows bound to them (docs/flows.md).
 *
 * A plugin is a C function of this program (plugins.c: its registry), loaded at run time
 * into a slot 1..15 with its arguments (`plugin load SLOT NAME [ARGS]`) and unloaded
 * (`plugin unload SLOT`) between two packets: the fast path never stops, and a bound
 * flow's packets meet whatever the slot holds when the daemon takes them (an empty
 * slot passes them on unchanged).  A flow is bound to a slot by its entry's action
 * (plugin, arg = slot): `flow add ... plugin N` or `plugin bind N FLOW`. */
#ifndef NPKD_FLOWS_H
#define NPKD_FLOWS_H
#include <stddef.h>
#include <stdint.h>

#include "mem.h"

#define FLOW_SLOTS 16
#define FLOW_ARGS 4
enum { FLOW_ACT_NONE = 0, FLOW_ACT_COUNT = 1, FLOW_ACT_ROUTE = 2, FLOW_ACT_PLUGIN = 3 };

/* 1: send the (possibly changed) frame on; 0: drop it.  state: the slot's, zeroed at load */
typedef int (*plugin_fn)(uint8_t *frame, uint32_t len, const uint32_t *args, uint32_t nargs, uint64_t *state,
                         uint64_t now_ns);
typedef struct plugin_def {
    const char *name;
    plugin_fn fn;
    const char *what;
} plugin_def;

extern const plugin_def npkd_plugins[];     /* plugins.c; ends with a NULL name */
const plugin_def *plugin_by_name(const char *name);

typedef struct plugin_slot {
    const plugin_def *def;                  /* NULL: empty */
    uint32_t args[FLOW_ARGS], nargs;
    uint64_t state[4];
    uint32_t packets, dropped, loads;
} plugin_slot;

typedef struct flow_table {
    uint32_t key_base, aux_base, buckets;   /* buckets 0: the image has no flow table */
    uint64_t mult_hi, mult_lo;              /* the hash unit's 128-bit multiplier */
    plugin_slot slot[FLOW_SLOTS];
    uint32_t passthrough, added, deleted;
    /* the plugin log in SRAM, for the host: {count, capacity, 0, 0}, then 32-byte records,
     * each written before the change it records is published: {time us, slot << 24 |
     * loaded << 16 | nargs, args[4], name[8]} (a plugin loaded or unloaded), or {time us,
     * 1 << 28, src, dst, ports, proto << 24 | action << 16 | arg, 0, 0} (a flow's entry
     * as it is from then on; action 0: deleted) */
    uint32_t log_base, log_cap;
    /* idle expiry: every idle_ns (0: never) an entry whose packet counter has not moved
     * since the scan before is deleted -- idle for between idle_ns and twice that */
    uint64_t idle_ns, next_scan;
    uint32_t *seen;                         /* 2 * buckets: the counter at the last scan (~0: new) */
    uint32_t expired;
} flow_table;

typedef struct flow_key {
    uint32_t src, dst, ports, proto;        /* ports: sport << 16 | dport */
} flow_key;

uint32_t flow_bucket(const flow_table *t, const flow_key *k);
/* the key the classify step reads from a frame (bytes 16..39); -1 if not IPv4 */
int flow_key_of(const uint8_t *f, uint32_t len, flow_key *k);
/* entry index (2 * bucket + way) and its action word, or -1 */
int flow_find(const flow_table *t, npkd_mem *m, const flow_key *k, uint32_t *word);
/* 0 added; -1 no table; -2 already there; -3 its bucket is full */
int flow_add(flow_table *t, npkd_mem *m, const flow_key *k, uint32_t action, uint32_t arg, uint64_t now_ns);
/* the entry's action becomes action/arg (added if absent); 0, or flow_add's errors */
int flow_rebind(flow_table *t, npkd_mem *m, const flow_key *k, uint32_t action, uint32_t arg, uint64_t now_ns);
/* 0 deleted, -1 no table, -4 no such flow */
int flow_del(flow_table *t, npkd_mem *m, const flow_key *k, uint64_t now_ns);
/* idle expiry (flow_table.idle_ns): the scan when it is due; its next time (UINT64_MAX: off) */
void flow_scan(flow_table *t, npkd_mem *m, uint64_t now_ns);
uint64_t flow_deadline(const flow_table *t);
void flow_set_idle(flow_table *t, uint64_t idle_ns, uint64_t now_ns);
/* the table's generation + 1 (after a change: the fast path's flow caches let go) */
void flow_changed(const flow_table *t, npkd_mem *m);
/* "SRC DST PROTO [SPORT DPORT]" -> key; the rest of the line in *rest.  0 or -1 */
int flow_parse_key(const char *s, flow_key *k, const char **rest);
int plugin_load(flow_table *t, uint32_t slot, const char *name, const uint32_t *args, uint32_t nargs);
/* the slot as it now is into the plugin log (after a load or an unload) */
void plugin_logged(const flow_table *t, npkd_mem *m, uint32_t slot, uint64_t now_ns);
#endif
