"""The router's scratch statistics (microcode/README.md §5) decode by port and reason name."""

from __future__ import annotations

from npkit.emulator.binding import Chip
from npkit.emulator.traffic.reasons import load_reasons
from npkit.toolchain.system.sysmap import SYS, read_counters


def test_counters_decode_by_port_and_reason() -> None:
    chip = Chip("ixp2800")
    reasons = load_reasons()
    bad_sum = reasons.drops["bad_checksum"].code
    ttl = reasons.exceptions["ttl_expired"].code
    base = SYS.stat_port_base + 16 * 2
    for k, v in enumerate((10, 780, 9, 702)):  # port 2: rx pkts, rx bytes, tx pkts, tx bytes
        chip.write32("scratch", base + 4 * k, v)
    chip.write32("scratch", SYS.stat_drop_base + 4 * bad_sum, 3)
    chip.write32("scratch", SYS.stat_exc_base + 4 * ttl, 1)
    c = read_counters(chip)
    assert c["ports"] == [{"port": 2, "rx_pkts": 10, "rx_bytes": 780, "tx_pkts": 9, "tx_bytes": 702}]
    assert c["drops"] == {"bad_checksum": 3}
    assert c["exceptions"] == {"ttl_expired": 1}
