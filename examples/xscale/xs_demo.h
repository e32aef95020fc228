// xs_demo.h -- shared by xs_demo.uc (microengine) and xs_demo.c (XScale): where
// the two sides meet.  Plain #defines, read by both the C compiler and the
// microcode preprocessor.
#ifndef XS_DEMO_H
#define XS_DEMO_H
#define XS_SCR_MAGIC_ADDR   0x40        // scratch byte address the ME fills
#define XS_SCR_MAGIC        0x5C7A7C11
#define XS_SCR_READY_ADDR   0x44        // the XScale sets it when it listens
#define XS_SRAM_MAGIC_ADDR  0x1000      // SRAM channel 0 byte addresses
#define XS_SRAM_MAGIC       0x5A3B0001
#define XS_SRAM_REQUEST     0x1004      // the question the ME asks
#define XS_SRAM_ANSWER      0x1008      // where the ME stores the XScale's answer
#define XS_SRAM_COUNTER     0x100C      // bumped by the XScale's SRAM atomics
#define XS_REQUEST          41
#define XS_DELAY_LOOPS      8000        // ME loop rounds between "XScale listens" and the interrupt
#define XS_ANSWER_RING      5           // scratch ring XScale -> ME
#define XS_ANSWER_RING_BASE 0x2000      // its scratch base (bytes) and size (words)
#define XS_ANSWER_RING_SIZE 64
#endif
