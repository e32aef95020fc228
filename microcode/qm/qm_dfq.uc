// qm_dfq.uc -- Panama's discretized fair queuing link scheduler (seed 000; docs/schedulers.md;
// layout parameter qm: dfq): the engine of qm_drr.uc with a queue per real-time
// connection (key = connection id, up to 16,384) and quantum = reserved rate x T.
#define QM_DFQ
#include "qm_drr.uc"
