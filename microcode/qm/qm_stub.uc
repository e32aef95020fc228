// qm_stub.uc -- the queue manager's stub variant (seed 003's factor B): messages
// pass from RING_IN to RING_OUT unchanged and in order, no queues, no scheduling.
#include "npk_sys.h"
#include "npk_block.h"

    npk_thread_setup()
    br!=ctx[0, stub_loop#]
    npk_start_tokens()
stub_loop#:
    npk_get_input(stub_loop#)
    alu[ow1, --, b, $i1]
    immed[kind, OUT_FORWARD]
    npk_emit(stub_loop#)
