// lookup_flows.uc -- the pipelined lookup block with the flow table in front of the
// route lookup (`-D classify=flows`, docs/flows.md): classify.h, then lookup.h for the
// packets no flow entry decided.  In and out as lookup.uc.
#include "npk_sys.h"
#include "npk_block.h"
#include "lookup.h"
#include "classify.h"

.reg dst hit

    npk_thread_setup()
    br!=ctx[0, lookup_loop#]
#if defined(LOOKUP_CAM_CACHE) || defined(CLASSIFY_CAM_CACHE)
    cam_clear
#endif
    npk_start_tokens()
lookup_loop#:
    npk_get_input(lookup_loop#)
    alu[dst, --, b, NPK_IN1]
    classify_body(dst, ow1, hit)
    .if (hit == 0)
        lookup_body(dst, ow1)
    .endif
    npk_emit(lookup_loop#)
