// Shared state in absolute registers (one copy for all eight contexts), a
// transfer register used as an address, instructions continued on the next
// line, a credit loop with unsigned compares.  Written for npkit's tests.

#define SEQ_CSR         0x0060
#define WINDOW          128
#define LOW_WATER       96

.sig volatile turn
.reg @last_seq @in_flight @next_slot @pending
.reg zero

    immed[zero, 0]
    .begin
        .reg read $seq
        .sig got
    drain#:
        msf[read, $seq, zero, SEQ_CSR, 1], ctx_swap[got]
        alu_shf[--, --, b, $seq, >>31]
        beq[drain#]
        alu[@last_seq, --, b, $seq]
    .end
    immed[@in_flight, 0]
    alu[@next_slot, @last_seq, and,
                (WINDOW - 1)]
    immed[@pending, 0]

main#:
    .begin
        .reg read $d0 $d1 $d2
        .xfer_order $d0 $d1 $d2
        .reg slot size
        .sig got
        ctx_arb[turn]
        alu[--, --, b, @pending]
        bne[have_work#]
    fetch#:
        scratch[get, $d0, zero, 8, 1], ctx_swap[got]
        alu[@pending, --, b, $d0]
        beq[fetch#]
        sram[read, $d0, $d0, 0, 3], ctx_swap[got]
        alu[size, $d1, +, $d2]
    have_work#:
        alu[slot, --, b, @next_slot]
        alu[@next_slot, @next_slot, +, 1]
        alu[@next_slot, @next_slot, and, (WINDOW - 1)]
        .while (@in_flight > LOW_WATER)
            ctx_arb[voluntary]
        .endw
        alu[@in_flight, @in_flight, +, 1]
        alu_shf[size, size, or, slot, <<3]
        local_csr_wr[SAME_ME_SIGNAL, (0x80 | (&turn << 3))]
    .end
    br[main#]
