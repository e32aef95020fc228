// hdr_format.uc -- the header-format block of the pipelined layout (README §4.3).
// In:  RING_IN  (packet word, next-hop index) from lookup.
// Out: RING_OUT (packet word, output port) to the queue manager.
#include "npk_sys.h"
#include "npk_block.h"
#include "hdr_format.h"

.reg nhi

    npk_thread_setup()
    br!=ctx[0, hdr_loop#]
    npk_start_tokens()
hdr_loop#:
    npk_get_input(hdr_loop#)
    alu[nhi, --, b, NPK_IN1]
    hdr_body(nhi, ow1)
    npk_emit(hdr_loop#)
