// ring_pong.uc: context 0 takes each counter from scratch ring 0, adds one
// and puts it on ring 1 for ring_ping.uc.  It stops after ROUNDS.

#include "ring_pingpong.h"

.reg zero value
.reg write $out
.reg read $in
.sig sig

    br!=ctx[0, idle#]                   // one context does the work
    immed[zero, 0]
wait#:
    scratch[get, $in, zero, RING_TO_PONG, 1], ctx_swap[sig]
    alu[value, --, b, $in]
    beq[wait#]                          // nothing yet
    alu[$out, value, +, 1]
    scratch[put, $out, zero, RING_TO_PING, 1], ctx_swap[sig]
    .if (value < (ROUNDS - 1))
        br[wait#]
    .endif
    halt                                // done: stop the ME
idle#:
    ctx_arb[kill]                       // the other contexts just end
