// ring_ping.uc: context 0 of one ME serves a counter to ring_pong.uc on
// another ME through scratch ring 0 and waits for it to come back, one
// higher, on ring 1, then adds one itself; when the counter reaches ROUNDS
// it halts the ME.  Other contexts end at once.

#include "ring_pingpong.h"

.reg zero count
.reg write $out
.reg read $in
.sig put_sig get_sig

    br!=ctx[0, idle#]                   // one context does the work
    immed[zero, 0]
    immed[count, 1]
    .while (count < ROUNDS)
        alu[$out, --, b, count]
        scratch[put, $out, zero, RING_TO_PONG, 1], ctx_swap[put_sig]
        .repeat                         // an empty ring reads as 0
            scratch[get, $in, zero, RING_TO_PING, 1], ctx_swap[get_sig]
            alu[count, --, b, $in]
        .until (count != 0)
        alu[count, count, +, 1]
    .endw
    halt                                // done: stop the ME
idle#:
    ctx_arb[kill]                       // the other contexts just end
