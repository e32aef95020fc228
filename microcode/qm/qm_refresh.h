// qm_refresh.h -- the port-ready flow control's refresh (microcode/README.md §4.5),
// as microcode/qm/qm.uc has it, for the scheduler variants qm_drr.uc / qm_dfq.uc
// (qm.uc keeps its own copy: the default router's source is left as it was).
// Uses local memory index0 (the port records, 32 B at
// 32 * port: +8 elements out of the TBUF, +20 elements in the PHY FIFO).
#ifndef QM_REFRESH_H
#define QM_REFRESH_H
#if (NPORTS > 5)
#error "qm_refresh: at most 5 ports (the parse CAM's limit too)"
#endif
#macro qm_refresh()
.begin
    .reg qa qv qs
    .reg read $qd0 $qd1 $qd2 $qd3 $qd4
    .xfer_order $qd0 $qd1 $qd2 $qd3 $qd4
    .reg read $qp0 $qp1 $qp2 $qp3 $qp4
    .xfer_order $qp0 $qp1 $qp2 $qp3 $qp4
    .sig s_qp s_qd
    immed[qa, TXDONE_BASE]
    scratch[read, $qd0, qa, 0, NPORTS], ctx_swap[s_qd]
#ifdef MSF_TX
    immed[qa, 0x400]
    msf[read, $qp0, qa, 0, NPORTS], ctx_swap[s_qp]
#endif
    qm_refresh_port(0, $qd0, $qp0)
#if (NPORTS > 1)
    qm_refresh_port(1, $qd1, $qp1)
#endif
#if (NPORTS > 2)
    qm_refresh_port(2, $qd2, $qp2)
#endif
#if (NPORTS > 3)
    qm_refresh_port(3, $qd3, $qp3)
#endif
#if (NPORTS > 4)
    qm_refresh_port(4, $qd4, $qp4)
#endif
.end
#endm

#macro qm_refresh_port(P, TD, PS)
    immed[qa, (32 * P)]
    local_csr_wr[ACTIVE_LM_ADDR_0, qa]
#ifdef MSF_TX
    alu_shf[qv, --, b, PS, >>16]
    immed[qs, QM_FIFO_BYTES]
    alu[qs, qs, -, qv]
    alu_shf[qs, --, b, qs, >>6]
    alu[*l$index0[5], --, b, qs]
#else
    nop
    nop
    nop
#endif
    alu[*l$index0[2], --, b, TD]
#endm

#endif
