/* fast.h -- the I3 daemon's writes into the fast path while traffic runs: filters in the
 * TCAM (docs/tcam.md: entry i at TCAM_BASE + i * 128, key | mask | result | control) with
 * the key and result of docs/spp.md §5, and the I3 slices' Chord finger blocks in SRAM
 * (docs/spp.md §4.2).
 *
 * The update order, so that no lookup ever sees half an entry (the MEs may read an entry
 * between any two of the daemon's word writes):
 *   TCAM filter:  the entry is invalidated first (control word 0) whatever it held; then
 *                 its result, its key and its mask; then the control word with the valid
 *                 bit.  Removal: the control word alone.  A lookup meanwhile matches the
 *                 old filter, none, or the new one whole; a packet with no single match
 *                 is an exception, and the daemon forwards it by its own store -- to the
 *                 same next hop.
 *   finger k:     word 0 without the valid bit, word 1 (next hop address), words 2-3
 *                 (the node's id), then word 0 with the valid bit; the block header's
 *                 count of valid fingers after.  Removal: word 0 cleared.  Meanwhile
 *                 packets that need finger k are exceptions (i3_no_finger), which the
 *                 daemon routes by its own table. */
#ifndef I3D_FAST_H
#define I3D_FAST_H
#include <stddef.h>
#include <stdint.h>

#include "../npkd/mem.h"
#include "store.h"

/* docs/tcam.md, microcode/include/tcam.h */
#define TC_ENTRY_BYTES 128u
#define TC_E_KEY 0u
#define TC_E_MASK 36u
#define TC_E_RESULT 72u
#define TC_E_CONTROL 80u
#define TC_VALID 0x80000000u
#define TC_KEY_LW_MAX 9u
/* docs/spp.md §5: the key is 5 longwords (144 bits), the result 2 */
#define SPP_KEY_LW 5u
#define SPP_FORMAT 1u

typedef struct fast {
    npkd_mem *mem;
    uint32_t tcam_base;          /* ME SRAM address of entry 0 (TCAM_BASE + TCAM_ENTRY_OFF) */
    uint32_t entries;            /* the TCAM's */
    uint32_t first, count;       /* the entries the daemon owns: [first, first + count) */
    uint8_t *used;               /* [entries]: in use (the slice file's rows too) */
    uint64_t writes;
    /* every word written, in order (unit tests hold the order to the rules above) */
    void (*on_write)(void *ctx, uint32_t addr, uint32_t value);
    void *on_write_ctx;
} fast;

int fast_init(fast *f, npkd_mem *mem, uint32_t tcam_base, uint32_t entries, uint32_t first, uint32_t count);
void fast_free(fast *f);

/* the key, mask (SPP_KEY_LW longwords) and result (2) of a filter (spp.md §5) */
void fast_filter_words(const i3_store *s, const i3_filter *t, uint32_t *key, uint32_t *mask, uint32_t *result);
/* a filter that the link put in entry e already (the slice file's rows): marked used */
void fast_filter_adopt(fast *f, i3_filter *t, uint32_t e);
/* a filter into a free entry of the daemon's (t->entry set): 0, or -1 none free */
int fast_filter_install(fast *f, const i3_store *s, i3_filter *t);
/* the filter out of the TCAM (t->entry = -1); nothing when it has none */
void fast_filter_remove(fast *f, i3_filter *t);
uint32_t fast_filters_used(const fast *f);
/* at start: every valid entry of the daemon's own range invalidated (a daemon before this
 * one, killed, left filters the new one does not know); returns how many */
uint32_t fast_clear_own(fast *f);

/* finger k of an I3 slice as g says (valid 0: removed), then its block's count */
void fast_finger_write(fast *f, const i3_slice *sl, int k, const i3_finger *g);
/* the whole block: header (slice id, count, node id, predecessor) and every finger */
void fast_ring_write(fast *f, const i3_slice *sl);
#endif
