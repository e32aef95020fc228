/* budget.c -- the XScale core's instruction budget (npkit.xscale.core).
 *
 * A Unicorn block hook, in C so that it costs a few nanoseconds per basic
 * block.  A block entered while `executed` is below `limit` runs and its
 * instruction count (ARM state: 4 bytes each) is added; at the first block
 * entered at or past the limit Unicorn is asked to stop, and it stops before
 * that block, which is not counted (it runs, and counts, on the next start).
 * A run therefore always makes progress and `executed` counts what ran.  The caller
 * passes uc_emu_stop's address, so this library needs no link against
 * libunicorn: it uses the copy the Python binding already loaded. */
#include <stdint.h>
#include <unicorn/unicorn.h>

typedef uc_err (*npk_uc_stop_fn)(uc_engine *uc);

typedef struct npk_xs_budget {
    uint64_t executed;      /* instructions of the blocks entered so far */
    uint64_t limit;         /* stop when executed reaches it */
    uint64_t blocks;
    npk_uc_stop_fn stop;
} npk_xs_budget;

void npk_xs_budget_hook(uc_engine *uc, uint64_t address, uint32_t size, void *user)
{
    npk_xs_budget *b = user;
    (void)address;
    if (b->executed >= b->limit) {
        b->stop(uc);
        return;
    }
    b->executed += size >> 2;
    b->blocks++;
}
