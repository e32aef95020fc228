// fastpath_flows.uc -- the parallel layout's fast path with the flow table between parse
// and the route lookup (`-D classify=flows`, docs/flows.md): parse.h, classify.h,
// lookup.h (when no flow entry decided), hdr_format.h.  In and out as fastpath.uc.
#include "npk_sys.h"
#include "npk_block.h"
#include "parse.h"
#include "lookup.h"
#include "hdr_format.h"
#include "classify.h"

.reg dst nhi hit

    npk_thread_setup()
    br!=ctx[0, fast_loop#]
    npk_port_lm_init()
    npk_special_cam_init()
    npk_start_tokens()
fast_loop#:
    npk_get_input(fast_loop#)
    parse_body(NPK_IN1, dst)
    .if (kind == OUT_FORWARD)
        classify_body(dst, nhi, hit)
        .if (hit == 0)
            lookup_body(dst, nhi)
        .endif
        .if (kind == OUT_FORWARD)
            hdr_body(nhi, ow1)
        .endif
    .endif
    npk_emit(fast_loop#)
