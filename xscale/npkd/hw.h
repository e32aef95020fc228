/* hw.h -- the chip's rings, SRAM queues and clock as a control daemon reaches them: the
 * XScale's device (npkd.c, i3d/main.c) or a unit test's stand-ins.  npkd's cp and the I3
 * daemon (xscale/i3d, i3d_hw) take the same table. */
#ifndef NPKD_HW_H
#define NPKD_HW_H
#include <stdint.h>

typedef struct npkd_hw {
    void *ctx;
    int (*ring_get)(void *ctx, int ring, uint32_t *word);      /* 1 got a word, 0 empty */
    int (*ring_put)(void *ctx, int ring, uint32_t word);
    uint32_t (*ring_free)(void *ctx, int ring);                 /* words of room */
    uint32_t (*queue_get)(void *ctx, uint32_t queue);           /* SRAM dequeue: element or 0 */
    void (*queue_put)(void *ctx, uint32_t queue, uint32_t element);
    uint64_t (*now_ns)(void *ctx);                              /* emulated time */
} npkd_hw;

#endif
