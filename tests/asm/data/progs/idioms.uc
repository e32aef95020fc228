// Exercises the idioms of real IXP receive/transmit microcode (written for
// npkit's tests): a signal pipeline between contexts through SAME_ME_SIGNAL,
// MSF fast writes, per-channel state in local memory, RBUF-to-DRAM copies
// with indirect references, scratch rings, a CAP interrupt, input-state tests.

#define FREELIST_CSR        0x0030
#define ELEMENT_DONE_CSR    0x0044
#define STATE_SHIFT         5
#define STATE_FLAGS         *l$index0[0]
#define STATE_LEN           *l$index0[1]

.sig volatile pipe_a
.sig volatile pipe_b
.sig arrived
.reg freelist_cmd
.reg read $st0, $st1
.xfer_order $st0 $st1
.reg zero

.begin
    .reg t1 t2
    immed[freelist_cmd, FREELIST_CSR]
    immed_w1[freelist_cmd, (&$st0 | (&arrived << 12))]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t1, 0]
    alu[t2, t1, and, 0x1f]
    alu_shf[freelist_cmd, freelist_cmd, or, t2, <<20]
.end
    immed[zero, 0]
.begin
    br!=ctx[0, main_loop#]
.end
.begin
    .reg idx lmaddr
    immed[idx, 0]
clear_state#:
    alu_shf[lmaddr, --, b, idx, <<STATE_SHIFT]
    local_csr_wr[ACTIVE_LM_ADDR_0, lmaddr]
    nop
    nop
    nop
    immed[STATE_FLAGS, 0]
    alu[idx, idx, +, 1]
    alu[--, idx, and, 0x20]
    beq[clear_state#]
    local_csr_wr[SAME_ME_SIGNAL, (&pipe_a << 3)]
    .set_sig pipe_a
.end

main_loop#:
.begin
    ctx_arb[pipe_a]
    local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&pipe_a << 3))]
    msf[fast_wr, --, freelist_cmd, 0]
    .set_sig arrived
    ctx_arb[arrived]
    .set $st0 $st1
.end
.begin
    alu_shf[--, 0x1b, and, $st0, >>8]
    bne[fail#]
.end
.begin
    .reg chan
    alu[chan, $st0, and, 0x1f]
    alu_shf[chan, --, b, chan, <<STATE_SHIFT]
    local_csr_wr[ACTIVE_LM_ADDR_0, chan]
    nop
    nop
    nop
.end
.begin
    .reg len buf elem size t
    .sig copied
    alu[len, --, b, STATE_LEN]
    alu_shf[t, 0xff, and, $st0, >>16]
    alu[STATE_LEN, len, +, t]
    .begin
        .sig got
        .reg read $h
rx_retry#:
        scratch[get, $h, zero, 0, 1], ctx_swap[got]
        alu[buf, --, b, $h]
        beq[rx_retry#]
    .end
    alu_shf[elem, 0x7f, and, $st0, >>24]
    alu_shf[size, 0xff, and, $st0, >>16]
    alu[size, size, -, 1]
    alu_shf[size, 0x10, or, size, >>3]
    alu_shf[t, 0x10, or, size, <<21]
    alu_shf[t, t, or, elem, <<11]
    alu_shf[--, t, or, 1, <<18]
    dram[rbuf_rd, --, buf, len, max_8], indirect_ref, sig_done[copied]
    ctx_arb[copied]
    alu[t, ELEMENT_DONE_CSR, or, elem, <<16]
    msf[fast_wr, --, t, 0]
    .begin
        .reg write $out
        .sig put_done
        br_inp_state[SCR_Ring1_Status, fail#]
        alu[$out, --, b, buf]
        scratch[put, $out, zero, 4, 1], ctx_swap[put_done]
        cap[fast_wr, 0, XSCALE_INT_A]
    .end
.end
    ctx_arb[pipe_b]
    local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&pipe_b << 3))]
    br[main_loop#]
fail#:
    halt
