// fastpath.uc -- parse + lookup + header format in one thread, for the parallel
// layout (README §4.4).  The same macros as the three pipelined blocks: one source.
// In:  RING_IN  (packet word, frame length) from rx.
// Out: RING_OUT (packet word, output port) to the queue manager.
#include "npk_sys.h"
#include "npk_block.h"
#include "parse.h"
#include "lookup.h"
#include "hdr_format.h"

.reg dst nhi

    npk_thread_setup()
    br!=ctx[0, fast_loop#]
    npk_port_lm_init()
    npk_special_cam_init()
    npk_start_tokens()
fast_loop#:
    npk_get_input(fast_loop#)
    parse_body(NPK_IN1, dst)
    .if (kind == OUT_FORWARD)
        lookup_body(dst, nhi)
        .if (kind == OUT_FORWARD)
            hdr_body(nhi, ow1)
        .endif
    .endif
    npk_emit(fast_loop#)
