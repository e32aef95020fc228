// parse.uc -- the parse block of the pipelined layout (microcode/README.md §4.1).
// In:  RING_IN  messages (packet word, frame length) from rx.
// Out: RING_OUT messages (packet word with flags, destination IPv4) to lookup;
//      drops and exceptions as npk_emit does them.
#include "npk_sys.h"
#include "npk_block.h"
#include "parse.h"

.reg dst

    npk_thread_setup()
    br!=ctx[0, parse_loop#]
    npk_port_lm_init()
    npk_special_cam_init()
    npk_start_tokens()
parse_loop#:
    npk_get_input(parse_loop#)
    parse_body(NPK_IN1, dst)
    alu[ow1, --, b, dst]
    npk_emit(parse_loop#)
