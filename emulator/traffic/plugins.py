"""The plugins' models: what each plugin the control daemon can load does to a packet
(xscale/plugins/*.c; docs/flows.md, "Plugins").  A plugin gets the frame as the fast
path received it and returns the frame to send on (the daemon then routes it: TTL,
route lookup, next hop's MAC) or None to drop it.  `args` are the integers it was
loaded with; `state` is the plugin's own (per slot), kept between packets.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

Plugin = Callable[[bytes, list[int], dict[str, Any], int], "bytes | None"]


def ip_checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def dscp(frame: bytes, args: list[int], state: dict[str, Any], now_ns: int) -> bytes | None:
    """Re-mark: the DSCP (TOS bits 7..2) becomes args[0] (default 46, EF), ECN kept;
    the header checksum recomputed (xscale/plugins/dscp.c)."""
    del state, now_ns
    value = (args[0] if args else 46) & 0x3F
    f = bytearray(frame)
    f[15] = (value << 2) | (f[15] & 3)
    ihl = (f[14] & 0xF) * 4
    f[24:26] = b"\0\0"
    f[24:26] = struct.pack("!H", ip_checksum(bytes(f[14 : 14 + ihl])))
    return bytes(f)


def meter(frame: bytes, args: list[int], state: dict[str, Any], now_ns: int) -> bytes | None:
    """A token bucket per slot: args[0] bytes a millisecond, args[1] bytes deep; a packet
    (its IP total length) finding too few tokens is dropped (xscale/plugins/meter.c)."""
    rate = args[0] if args else 125_000
    depth = args[1] if len(args) > 1 else 2 * rate
    tokens, last = state.get("tokens", depth), state.get("last", now_ns)
    tokens = min(depth, tokens + (now_ns - last) * rate // 1_000_000)
    size = struct.unpack_from("!H", frame, 16)[0]
    state["last"] = now_ns
    if tokens < size:
        state["tokens"] = tokens
        return None
    state["tokens"] = tokens - size
    return frame


PLUGINS: dict[str, Plugin] = {"dscp": dscp, "meter": meter}
