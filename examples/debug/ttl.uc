// ttl.uc: the debugging walk-through's program (docs/debugging.md).
//
// A packet sits in a DRAM buffer (`pktbuf`, initialised below: Ethernet + IPv4 +
// UDP, TTL 64).  Context 0 reads its first 32 bytes, decrements the TTL and
// patches the header checksum incrementally (RFC 1624), then writes bytes 16..31
// back.  The other contexts end at once.
//
//   npk asm examples/debug/ttl.uc -o ttl.elf --list ttl.lst
//   npk debug ttl.elf                      (or the .uc directly)

#define TTL_ONE     0x100               // TTL is bits 15:8 of longword 5 (frame byte 22)

.alloc_mem pktbuf dram 128 8
.init pktbuf 0x02000000 0x00010200 0x00000099 0x08004500 0x00241234 0x00004011 0x9ce50a00 0x0001c0a8 0x010704d2 0x00500010 0x95734e50 0x4b310000 0x00070000

.reg buf one mask lw5 lw6 sum
.reg read $$h0 $$h1 $$h2 $$h3 $$h4 $$h5 $$h6 $$h7
.xfer_order $$h0 $$h1 $$h2 $$h3 $$h4 $$h5 $$h6 $$h7
.reg write $$o0 $$o1 $$o2 $$o3
.xfer_order $$o0 $$o1 $$o2 $$o3
.sig hdr_sig wr_sig

// checksum += ADD (16 bits, end-around carry)
#macro csum_add(CSUM, ADD)
.begin
    .reg carry
    alu[CSUM, CSUM, +, ADD]
    alu_shf[carry, --, b, CSUM, >>16]
    alu[CSUM, CSUM, and, mask]
    alu[CSUM, CSUM, +, carry]
.end
#endm

    br!=ctx[0, idle#]
    immed[buf, pktbuf]
    immed[one, TTL_ONE]
    immed[mask, 0xffff]
    dram[read, $$h0, buf, 0, 4], ctx_swap[hdr_sig]     // frame bytes 0..31
got_header#:
    alu[lw5, $$h5, -, one]              // TTL - 1
    alu_shf[sum, --, b, $$h6, >>16]     // header checksum (bytes 24..25)
    csum_add(sum, one)
    alu_shf[lw6, --, b, $$h6, <<16]
    alu_shf[lw6, --, b, lw6, >>16]
    alu_shf[lw6, lw6, or, sum, <<16]
    alu[$$o0, --, b, $$h4]
    alu[$$o1, --, b, lw5]
    alu[$$o2, --, b, lw6]
    alu[$$o3, --, b, $$h7]
    dram[write, $$o0, buf, 16, 2], ctx_swap[wr_sig]    // bytes 16..31
done#:
    halt
idle#:
    ctx_arb[kill]
