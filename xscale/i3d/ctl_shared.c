/* ctl_shared.c -- the control socket is npkd's (xscale/npkd/ctl.c: the same protocol,
 * conventions and limits), compiled into i3d from its one source. */
#include "../npkd/ctl.c"
