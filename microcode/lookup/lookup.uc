// lookup.uc -- the lookup block of the pipelined layout (microcode/README.md §4.2).
// In:  RING_IN  (packet word, destination IPv4) from parse.
// Out: RING_OUT (packet word, next-hop index) to hdr_format; no route -> exception.
#include "npk_sys.h"
#include "npk_block.h"
#include "lookup.h"

.reg dst

    npk_thread_setup()
    br!=ctx[0, lookup_loop#]
#ifdef LOOKUP_CAM_CACHE
    cam_clear
#endif
    npk_start_tokens()
lookup_loop#:
    npk_get_input(lookup_loop#)
    alu[dst, --, b, NPK_IN1]
    lookup_body(dst, ow1)
    npk_emit(lookup_loop#)
