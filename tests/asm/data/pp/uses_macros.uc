#include "macros.h"
    add_const(r0, r1, 4)
    wait_loop(10)
    wait_loop(20)
