/* lpm.h -- the route lookup structure in SRAM, from C: microcode/lookup/LAYOUT.md.
 *
 * The same 16-8-8 leaf-pushed trie that toolchain/router/lpm.py builds, with the same
 * incremental update (LAYOUT.md §7): a /16's new nodes are written into memory no
 * lookup can reach, then one root-entry write publishes them; replaced nodes wait in
 * limbo until lpm_grace().  A full build gives the SRAM image the Python builder gives
 * for the same routes, word for word (tests/xscale/test_npkd.py).
 *
 * Differences from the Python model, by design: the daemon adopts a table the linker
 * or an earlier daemon already wrote (lpm_adopt: the root array, the generation and the
 * pool's high-water mark are read from SRAM), and it finds a /16's current nodes by
 * reading SRAM, not from a copy kept in memory.
 *
 * A daemon started after another (killed, or restarted) adopts with `recover`: the pool
 * units its predecessor had on its free lists or in limbo were listed in that daemon's
 * memory only.  They go into the new limbo as one entry, ahead of anything the new
 * daemon retires.  The walk of the trie in SRAM (lpm_recover_step: the root array and
 * every level-2 DENSE32, in steps the daemon makes between exceptions once its model is
 * loaded, with changes in between if they come) marks every unit a lookup can reach;
 * the grace that frees that limbo entry (finishing the walk first if need be) gives
 * back every unit below the adopted high-water mark that the walk did not reach and the
 * allocator does not hold (LAYOUT.md §7 rule 7).  A daemon adopting the linker's image
 * makes no walk.  Runs of recovered units long enough for a DENSE16 are kept whole
 * (`spare`) and serve any node type before the high-water mark grows; shorter ones
 * become RUNS nodes.  Beyond lpm.py: where it gives up (the pool used up to its end)
 * alloc_node splits a larger free node, and an update that runs out of pool frees the
 * nodes it had written and not yet published and leaves the table as it was: an update
 * writes the new nodes of all the /16s it touches before it publishes any of them.
 * None of this changes a full build or an update that lpm.py can make. */
#ifndef NPKD_LPM_H
#define NPKD_LPM_H
#include <stdint.h>

#include "mem.h"
#include "util.h"

#define LPM_ENTRY_CHILD 0x80000000u
#define LPM_TYPE_SHIFT 28
#define LPM_OFFSET_MASK 0x00FFFFFFu
#define LPM_NH_MASK 0xFFFFu
#define LPM_UNIT 16u
#define LPM_RUNS_MAX 5
#define LPM_ROOT_ENTRIES 65536u
#define LPM_CTL_MAGIC 0x4C504D31u   /* "LPM1" */
#define LPM_CTL_VERSION 1u
enum { LPM_DENSE32 = 0, LPM_DENSE16 = 1, LPM_RUNS = 2 };

/* where the four regions are (byte addresses, sram_map.yaml) */
typedef struct lpm_layout {
    uint32_t ctl, root, nh, nh_cap, nodes, node_bytes;
} lpm_layout;

typedef struct lpm_alloc {
    uint32_t capacity, high_water, in_use;  /* in 16-byte units */
    u32vec free[3];                         /* offsets by node type */
    u32vec limbo;                           /* type << 24 | offset, retired in this order
                                             * (0xFFFFFFFF: what lpm_adopt left to recover) */
    u32vec spare;                           /* recovered runs of >= 32 units: start, length */
    uint32_t adopted;                       /* lpm_adopt's high-water mark, while recovering */
    uint32_t *seen, walk_at;                /* the walk: units reached (a bit each), next root entry */
    uint32_t recovered;                     /* units given back so (statistics) */
} lpm_alloc;

/* a change made in two steps (lpm_prepare, then lpm_commit or lpm_abort) */
typedef struct lpm_pending {
    int active, had, len, wrote;
    uint32_t prefix, old_nh;    /* the route changed, and its next hop before (had) */
    u32vec publish;             /* (/16, new root entry) pairs, in order */
    u32vec placed;              /* nodes written and not yet published: type << 24 | offset */
} lpm_pending;

/* Panama's aggregate route cache (layout parameter lookup=range_cache;
 * toolchain/router/range_cache.py, which these constants must match): a header in scratch
 * {magic, base of the sets, number of sets, mask of the index bits}; each set 16 bytes
 * {lo, hi, next-hop index, 0} with lo and hi addresses whose index bits are 0.  Before a
 * change publishes, every set whose range meets the changed prefix is invalidated (its lo
 * kept in the set's fourth word, then lo = 0xFFFFFFFF: never a hit); after it has
 * published, each is narrowed to the larger part of its old range that lies outside the
 * prefix (whose answers the change did not alter: hi first, then lo, so a read between
 * the two still misses).  Counted at LPM_RC_INVALIDATED and LPM_RC_NARROWED. */
#define NPKD_SCRATCH_BYTES 0x4000u
#define LPM_RC_HDR 0x0960u
#define LPM_RC_MAGIC 0x52434131u          /* "RCA1" */
#define LPM_RC_INVALIDATED 0x0978u
#define LPM_RC_NARROWED 0x097Cu
#define LPM_RC_MAX_SETS 256u
typedef struct lpm_rc_change {
    uint32_t sets[LPM_RC_MAX_SETS / 32];    /* the sets this change invalidated, a bit each */
    uint32_t plo, phi;                      /* the prefix's masked addresses lie in [plo, phi] */
} lpm_rc_change;
/* sets invalidated; `c` (may be NULL) records them for lpm_rc_narrow */
uint32_t lpm_rc_invalidate(npkd_mem *mem, uint32_t prefix, int len, lpm_rc_change *c);
uint32_t lpm_rc_narrow(npkd_mem *mem, const lpm_rc_change *c);          /* sets narrowed */

typedef struct lpm {
    lpm_layout lay;
    npkd_mem *mem;
    u32map routes[33];          /* by length: prefix -> next-hop index */
    u32vec *inner16;            /* per /16: (prefix, length) pairs of routes longer than /16 */
    u32map inner24_at;          /* /24 -> index into inner24 */
    u32vec *inner24;            /* (prefix, length) pairs of routes longer than /24 */
    uint32_t n24, cap24;
    int8_t *short_len;          /* per /16: length of the best route <= /16, -1 none */
    uint16_t *short_nh;
    uint32_t *root;             /* the root array while building (then it lives in SRAM) */
    lpm_alloc alloc;
    uint32_t generation;
    int built;
    uint32_t nroutes;
    lpm_pending pend;
    lpm_rc_change rc;           /* the range cache's sets the change in commit invalidated */
    /* planning scratch */
    uint16_t vals[256];
    uint8_t has_child[256];
    uint16_t (*child)[256];     /* [256][256] */
} lpm;

int lpm_init(lpm *t, const lpm_layout *lay, npkd_mem *mem);   /* 0, -1 out of memory */
void lpm_free(lpm *t);
/* Add or replace a route.  Before lpm_build/lpm_adopt the model only; after it the
 * ordered SRAM writes happen.  0 ok, -1 bad prefix/index, -2 node pool full, -3 no memory. */
int lpm_add(lpm *t, uint32_t prefix, int len, uint32_t nh);
int lpm_del(lpm *t, uint32_t prefix, int len);                /* as lpm_add; -4 no such route */
/* lpm_add (add = 1) / lpm_del (add = 0) in two steps, for a caller that must record the
 * change between what can fail and what a lookup sees (the daemon's write-ahead journal).
 * lpm_prepare does everything that can fail: the checks, the model, the new nodes of
 * every /16 the change touches, written where no lookup reaches them; it returns as
 * lpm_add/lpm_del, and on an error leaves the model and what lookups see as they were
 * (nothing to commit or abort).  lpm_commit publishes (root entries, old nodes to limbo,
 * the generation): SRAM writes only, it cannot fail.  lpm_abort instead gives the new
 * nodes back and puts the model back.  Before lpm_build/lpm_adopt: the model at once
 * (commit and abort do nothing).  One change at a time. */
int lpm_prepare(lpm *t, uint32_t prefix, int len, int add, uint32_t nh);
void lpm_commit(lpm *t);
void lpm_abort(lpm *t);
int lpm_get(const lpm *t, uint32_t prefix, int len, uint32_t *nh);  /* 1 found */
/* the whole structure from scratch: control header, nodes, root array */
int lpm_build(lpm *t);
/* take over the structure SRAM holds (built from the same routes): -1 if lpm_ctl is not
 * an LPM1 header, -3 no memory.  recover: another daemon wrote it, and the units it had
 * free or in limbo are to be found again: the walk (lpm_recover_step, in steps; what is
 * left of it at the latest in the grace) and the grace that frees the limbo's first
 * entry; 0: the linker wrote it (a full build leaves no unit unreachable). */
int lpm_adopt(lpm *t, int recover);
/* more of that walk, `budget` SRAM words: 1 complete (or none), 0 more, -1 no memory */
int lpm_recover_step(lpm *t, uint32_t budget);
static inline int lpm_walking(const lpm *t)
{
    return t->alloc.adopted && t->alloc.walk_at < LPM_ROOT_ENTRIES;
}
/* LAYOUT.md §7 rule 4: every lookup that began before the last update has ended; the
 * nodes in limbo become free.  lpm_grace_upto: only the first n of limbo's entries (the
 * ones retired before a moment every lookup begun since has outlived). */
void lpm_grace(lpm *t);
void lpm_grace_upto(lpm *t, uint32_t n);
/* reference longest match over the route set: 1 found (prefix/len/next hop out) */
int lpm_match(const lpm *t, uint32_t addr, uint32_t *prefix, int *len, uint32_t *nh);
/* the walk the lookup microblock does (LAYOUT.md §4), on SRAM: next-hop index, 0 = none */
uint32_t lpm_walk(npkd_mem *m, const lpm_layout *l, uint32_t addr);

static inline uint32_t lpm_mask(int len)
{
    return len ? (uint32_t)(0xFFFFFFFFull << (32 - len)) : 0;
}
#endif
