/* npk_gpe_proto.h -- the link between a gpe-placed program and the emulator
 * (npkit.xscale.gpe).  One fixed-size message each way on a Unix stream
 * socket, host byte order: the program sends a request, the emulator answers
 * with the same struct (op = status: 0 or -errno, value = result) once the
 * request has taken effect in emulated time (link latency included). */
#ifndef NPK_GPE_PROTO_H
#define NPK_GPE_PROTO_H
#include <stdint.h>

enum {
    NPK_GPE_READ = 1,   /* addr = physical CSR address; value back */
    NPK_GPE_WRITE = 2,  /* addr, value */
    NPK_GPE_SWAP = 3,   /* addr, value; old word back */
    NPK_GPE_WAIT = 4,   /* value = last count seen; blocks until the interrupt count differs */
    NPK_GPE_WAIT_UNTIL = 5  /* as WAIT, or until the emulated time addr | pad << 32 (ns):
                             * status 1 interrupt, 0 deadline */
};

typedef struct npk_gpe_msg {
    uint32_t op;
    uint32_t addr;
    uint32_t value;
    uint32_t pad;
} npk_gpe_msg;
#endif
