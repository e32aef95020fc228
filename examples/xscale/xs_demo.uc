// xs_demo.uc: the microengine side of the XScale demo (xs_demo.c).  Context 0
// waits until the XScale says it listens (a scratch flag), lets some time pass
// (longer than an XScale quantum, so the XScale is asleep), fills a scratch word
// and two SRAM words, raises XSCALE_INT_A, then polls the answer ring until the
// XScale's answer arrives and stores it in SRAM.

#include "xs_demo.h"

.reg zero addr val count
.reg write $w
.reg read $r
.sig s_scr s_sram s_get s_put

    br!=ctx[0, idle#]
    immed[zero, 0]
    immed[addr, XS_SCR_READY_ADDR]
    .repeat                              // the XScale boots Linux userland first
        scratch[read, $r, zero, addr, 1], ctx_swap[s_scr]
        alu[val, --, b, $r]
    .until (val != 0)
    immed[count, XS_DELAY_LOOPS]
    .while (count > 0)
        alu[count, count, -, 1]
    .endw
    immed[val, (XS_SCR_MAGIC & 0xFFFF)]
    immed_w1[val, ((XS_SCR_MAGIC >> 16) & 0xFFFF)]
    alu[$w, --, b, val]
    immed[addr, XS_SCR_MAGIC_ADDR]
    scratch[write, $w, zero, addr, 1], ctx_swap[s_scr]
    immed[val, (XS_SRAM_MAGIC & 0xFFFF)]
    immed_w1[val, ((XS_SRAM_MAGIC >> 16) & 0xFFFF)]
    alu[$w, --, b, val]
    immed[addr, XS_SRAM_MAGIC_ADDR]
    sram[write, $w, zero, addr, 1], ctx_swap[s_sram]
    immed[val, XS_REQUEST]
    alu[$w, --, b, val]
    immed[addr, XS_SRAM_REQUEST]
    sram[write, $w, zero, addr, 1], ctx_swap[s_sram]
    cap[fast_wr, 0, XSCALE_INT_A]        // wake the XScale
    immed[addr, (XS_ANSWER_RING << 2)]
    .repeat                              // an empty ring reads as 0
        scratch[get, $r, zero, addr, 1], ctx_swap[s_get]
        alu[val, --, b, $r]
    .until (val != 0)
    alu[$w, --, b, val]
    immed[addr, XS_SRAM_ANSWER]
    sram[write, $w, zero, addr, 1], ctx_swap[s_sram]
    halt
idle#:
    ctx_arb[kill]
