"""The plugins' models (npkit.emulator.traffic.plugins, the judge's view of
xscale/npkd/plugins.c): the DSCP re-marker keeps ECN and leaves a valid header checksum;
the meter passes a burst up to its depth, drops past it, and refills at its rate."""

from __future__ import annotations

import struct

from npkit.emulator.traffic.plugins import PLUGINS, ip_checksum


def _frame(tos: int = 0x03, total: int = 100) -> bytes:
    f = bytearray(14 + total)
    f[12:14] = b"\x08\x00"
    f[14], f[15], f[22], f[23] = 0x45, tos, 64, 17
    f[16:18] = struct.pack("!H", total)
    f[26:34] = bytes([198, 18, 0, 1, 10, 0, 1, 10])
    f[24:26] = struct.pack("!H", ip_checksum(bytes(f[14:34])))
    return bytes(f)


def test_dscp_remarks_and_keeps_the_checksum_valid() -> None:
    out = PLUGINS["dscp"](_frame(tos=0x03), [10], {}, 0)
    assert out is not None and out[15] == (10 << 2) | 0x03
    assert ip_checksum(out[14:34]) == 0
    assert PLUGINS["dscp"](_frame(), [], {}, 0)[15] >> 2 == 46  # type: ignore[index]


def test_meter_drops_over_rate_and_refills() -> None:
    meter, state = PLUGINS["meter"], {}
    args = [1000, 300]  # 1000 bytes a ms, 300 bytes deep: three 100-byte packets at once
    sent = [meter(_frame(total=100), args, state, 0) is not None for _ in range(5)]
    assert sent == [True, True, True, False, False]
    assert meter(_frame(total=100), args, state, 100_000) is not None   # 0.1 ms: 100 bytes back
    assert meter(_frame(total=100), args, state, 100_000) is None
