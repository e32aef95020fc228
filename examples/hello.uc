// hello.uc: the smallest useful thread program.
//
// Every context writes two words to scratch memory: a greeting and its own
// context number, at greeting + 8 * ctx, then stops.
//
//   npk asm examples/hello.uc -o hello.elf --list hello.lst

#define HELLO   0x48454c4c      // "HELL" in ASCII

.alloc_mem greeting scratch 64
.reg ctx addr word
.reg write $out0 $out1
.xfer_order $out0 $out1
.sig done

    local_csr_rd[ACTIVE_CTX_STS]
    immed[ctx, 0]                       // picks up the CSR value
    alu[ctx, ctx, and, 7]               // context number
    alu_shf[addr, --, b, ctx, <<3]      // 8 bytes per context
    immed[word, HELLO]                  // two words: immed_w0 + immed_w1
    alu[$out0, --, b, word]             // (a transfer register cannot take a two-word immed)
    alu[$out1, --, b, ctx]
    scratch[write, $out0, addr, greeting, 2], ctx_swap[done]
    halt
