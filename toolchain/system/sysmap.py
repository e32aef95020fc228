"""The system memory map every router block builds against (microcode/README.md §2, §3),
and the reader of the router's statistics counters in scratch (§5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SysMap:
    # SRAM channel 1: queue descriptors (16 B each: head, tail, count, 0), free list
    qd_base: int = 0x4000_0000
    freelist_q: int = 0x4000_1000
    # SRAM channel 1: packet descriptors, 32 B each, index = buffer handle
    desc_base: int = 0x4001_0000
    desc_shift: int = 5
    n_bufs: int = 4096
    # DRAM: packet buffers, 2 KB each, frame at offset PKT_PAD (0: rbuf_rd is quadword aligned)
    buf_base: int = 0
    buf_shift: int = 11
    pkt_pad: int = 0
    # scratch: statistics and flow control, then ring storage
    stat_port_base: int = 0x0000  # 16 ports x {rx_pkts, rx_bytes, tx_pkts, tx_bytes}
    stat_drop_base: int = 0x0100  # 256 drop counters by code
    stat_exc_base: int = 0x0500  # 256 exception counters by code
    txdone_base: int = 0x0900  # 16 per-port "sent by tx" counters
    batch_count: int = 0x0980  # batch=N: batches taken, messages in them (npk_block.h; 0x0960.. range cache)
    ring_store: int = 0x1000  # ring storage up to the end of scratch (16 KB)
    scratch_bytes: int = 0x4000
    # packet word (README §3.1)
    pw_ttl_le1_bit: int = 27
    pw_src_on_in_subnet_bit: int = 26
    exc_record: int = 1  # record type in exception record LW1 bits 31..24

    def desc_addr(self, index: int) -> int:
        return self.desc_base + (index << self.desc_shift)

    def buf_addr(self, index: int) -> int:
        return self.buf_base + (index << self.buf_shift)

    def qd_addr(self, port: int) -> int:
        return self.qd_base + 16 * port


SYS = SysMap()


def read_counters(chip: Any, ports: int = 16, reasons: Any = None) -> dict[str, Any]:
    """The router's statistics counters in scratch (README §5), by port and by reason
    name: {"ports": [{rx_pkts, rx_bytes, tx_pkts, tx_bytes}...], "drops": {name: n},
    "exceptions": {name: n}} -- nonzero entries only.  `reasons`: the names of the codes
    (an application's, npkit.toolchain.system.app.app_reasons; default: npkit's)."""
    from npkit.emulator.traffic.reasons import load_reasons

    reasons = reasons if reasons is not None else load_reasons()
    port_stats = []
    for p in range(ports):
        vals = [chip.read32("scratch", SYS.stat_port_base + 16 * p + 4 * k) for k in range(4)]
        if any(vals):
            port_stats.append(dict(zip(("port", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes"), [p, *vals], strict=True)))
    by_reason = {}
    for kind, table, base in (("drops", reasons.drops, SYS.stat_drop_base), ("exceptions", reasons.exceptions, SYS.stat_exc_base)):
        counts = {r.name: chip.read32("scratch", base + 4 * r.code) for r in table.values()}
        by_reason[kind] = {k: v for k, v in counts.items() if v}
    return {"ports": port_stats, **by_reason}
CAM_NET, CAM_BCAST, CAM_LOCAL = 1, 2, 3
MAX_PORTS = 5  # 3 CAM entries a port in the parse block's 16-entry CAM


HOST_SRC_BASE = 0x8000_0000  # SRAM channel 2: host mailboxes of the stand-in blocks
HOST_SINK_BASE = 0x8010_0000
HOST_EXC_BASE = 0x8020_0000
# SRAM channel 2: what the control daemon (xscale/npkd) reports to the host
CP_STATS_BASE = 0x8030_0000  # statistics block (xscale/npkd/stats.h)
CP_LOG_BASE = 0x8031_0000  # exception log: count, capacity, then 16-byte records (xscale/npkd/cp.h)
CP_LOG_CAP = 32768
CP_CHANGES_BASE = 0x8040_0000  # route changes the daemon made: count, capacity, 16-byte records
CP_CHANGES_CAP = 4096
# the buffers the daemon owns (a bit a handle): what a daemon started again after a kill
# gives back to the free list (xscale/npkd/cp.h, cp_reclaim)
CP_OWNED_BASE = 0x8042_0000
CP_PLUGIN_LOG_BASE = 0x8046_0000  # plugin loads and unloads (-D classify=flows; xscale/npkd/flows.h)
CP_PLUGIN_LOG_CAP = 1024
CP_OWNED_MAGIC = 0x4E504B4F  # "NPKO": the header's first word once the daemon has cleared the table
