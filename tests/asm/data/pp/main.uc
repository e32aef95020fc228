// Fixture: include search order and include guards.
#include "which.h"
#include <which_angle.h>
#include "guarded.h"
#include "guarded.h"
#include "sub/nested.h"
main_done#:
    ctx_arb[kill]
