"""The reference router's control plane: what the control daemon (xscale/npkd/cp.c)
does with every packet the fast path hands it, and the frames it sends.

`RefRouter` (oracle.py) says what the fast path does with a packet on its own.  A whole
router also answers: ICMP errors (RFC 1812 4.3.2, RFC 792), echo replies (the request's IP
options returned as RFC 1812 4.3.3.6 says), ARP (RFC 826), redirects, IP options (RFC 1812
5.2.4), and it forwards what the fast path could not
(held packets once ARP resolves them).  `RouterModel` plays both, in arrival order::

    m = RouterModel(config, options={...}, neighbours={...}, route_changes=[...])
    for pid, (t, port, frame) in enumerate(packets):
        m.process(pid, frame, port, t)
    m.finish()
    m.results[pid].final      # Forward(port, bytes) | Drop(reason) | Except(reason)
    m.emitted                 # [Emitted(port, frame, pid, timestamps, token)]: every frame the
                              # control plane sends (pid: the packet it is about; an ARP
                              # request: the packet whose arrival started the resolution;
                              # timestamps: offsets of IP timestamps it wrote, see
                              # same_but_timestamps)

`final` is the router's verdict on the packet: forwarded (by the fast path or by the
control plane, e.g. a redirect or a held packet), dropped, or consumed by the control
plane (`Except(reason)`: answered, counted or dropped there).  The model follows npkd
step for step (the same rules, the same order, the same bytes: IP identification of
an error = that of the datagram it is about), with one difference: it acts at each
packet's arrival time, the daemon a few microseconds later (behind a backlog of
exceptions, hundreds, and not at all for those a full ring dropped: `follow_arp` takes
the daemon's ARP record, and a caller that knows when the daemon handled a packet takes
the ICMP rate limit's tokens then, `defer_tokens`; an ARP packet teaches this model at
its arrival, and what it taught is taken back if the daemon never took it: `unlearn`,
`taken`); `RouteChange`s apply at
their time, and `alternatives` gives the other table's verdict for packets that arrive
within `change_window_ns` of a change (the fast path may see either, never a mix; the
window grows with the root entries a short route rewrites).

A timed change the daemon had not made when it was killed (one that falls due while no
daemon runs, or one cut by the kill at its journal line) is the restarted daemon's to
make, once it has its route table again (xscale/npkd/README.md "The route table"): from
a kill (`owe`) until the restarted daemon has its table (`caught_up`), timed changes the
daemon had not made are `owed`, and take effect when the daemon's change log says it
made them (`timed_made`, as changes made through its control socket: `add_changes`).
From the restart until then the fast path may get an owed change at any time (the host
learns of it a slice later): packets that arrive meanwhile have the table with it among
their `alternatives`.  The first daemon is no different until it has loaded its table
(`starting`): a change due before then (hundreds of microseconds after the start; 10,000
routes take ~30 ms) is made late, when the change log says.

The daemon's tunables and their defaults are those of xscale/npkd/cfg.h (NPKD_OPTIONS).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any, NamedTuple

from .oracle import Drop, Except, Forward, Outcome, RefRouter, rewrite
from .packet import internet_checksum
from .router_config import RouterConfig
from .routes import Route, RouteTable

CFG_H = Path(__file__).resolve().parents[2] / "xscale" / "npkd" / "cfg.h"
KILLED = "control_killed"  # drop reason: a packet the daemon had when it was killed -- held for ARP, or
# forwarded but still in its send backlog (lost with it; its buffer is not: the daemon started
# again gives it back, xscale/npkd/README.md "Restart"; buffers are no frames, so nothing here
# models them)
CHANGE_WINDOW_NS = 100_000  # a change's time to its last root-entry write (a /9: 128 of them, ~35 us) and more
# npkd's time for each of the 2^(16 - length) root entries a route shorter than /16
# rewrites (~230 ns measured: a /8 made 66 us after its time, a /4 985 us, a /0 14.8 ms),
# doubled for the publication after the change log's record and a busy daemon
ROOT_ENTRY_NS = 500


PLUGIN = Except("plugin")  # the fast path's hand-over to a plugin (-D classify=flows)
PLUGIN_WINDOW_NS = 1_000_000  # a plugin packet handled this long after it came may meet a plugin loaded since


def change_window_ns(length: int) -> int:
    """How long after its time a change of a route of `length` bits may reach the fast
    path: a short route rewrites many root entries (a /0 all 65,536)."""
    return CHANGE_WINDOW_NS + (ROOT_ENTRY_NS << (16 - length) if length < 16 else 0)
ICMP_MAX_IP = 576
BROADCAST_MAC = b"\xff" * 6
EXC = {"arp": 1, "ip_options": 2, "broadcast": 3, "multicast": 4, "local_delivery": 5, "no_route": 6,
       "ttl_expired": 7, "redirect": 8, "arp_miss": 9}  # fmt: skip


def frame_digest(frame: bytes) -> int:
    """FNV-1a over a frame's first 128 bytes: how the daemon's exception log names the
    packet each record is about (xscale/npkd/pkt.c frame_digest)."""
    h = 2166136261
    for b in frame[:128]:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def daemon_defaults() -> dict[str, int]:
    """npkd's tunables with their defaults, read from xscale/npkd/cfg.h (NPKD_OPTIONS)."""
    text = CFG_H.read_text().split("NPKD_OPTIONS(X)", 1)[1].split("typedef", 1)[0]
    return {name: int(value) for name, value in re.findall(r"X\((\w+),\s*(\d+)\)", text)}


# ---- the bytes (xscale/npkd/pkt.c) --------------------------------------------------------------


def _eth_ip(dst_mac: bytes, src_mac: bytes, tos: int, tot_len: int, ident: int, proto: int, src: int,
            dst: int) -> bytearray:  # fmt: skip
    hdr = bytearray(struct.pack("!BBHHHBBHII", 0x45, tos, tot_len, ident, 0, 64, proto, 0, src, dst))
    hdr[10:12] = internet_checksum(bytes(hdr)).to_bytes(2, "big")
    return bytearray(dst_mac + src_mac + b"\x08\x00") + hdr


def _pad(frame: bytearray) -> bytes:
    return bytes(frame) + bytes(max(0, 60 - len(frame)))


def icmp_error(dst_mac: bytes, src_mac: bytes, ip_src: int, orig: bytes, icmp_type: int, code: int,
               aux: int = 0) -> bytes:  # fmt: skip
    """An ICMP error about the received frame `orig` (pkt.c build_icmp_error)."""
    tot = orig[16] << 8 | orig[17]
    quote = min(tot, ICMP_MAX_IP - 28)
    ident = orig[18] << 8 | orig[19]
    src = int.from_bytes(orig[26:30], "big")
    body = bytearray(struct.pack("!BBHI", icmp_type, code, 0, aux)) + orig[14 : 14 + quote]
    body[2:4] = internet_checksum(bytes(body)).to_bytes(2, "big")
    return _pad(_eth_ip(dst_mac, src_mac, 0xC0, 28 + quote, ident, 1, ip_src, src) + body)


def arp_frame(op: int, sha: bytes, spa: int, tha: bytes, tpa: int) -> bytes:
    dst = BROADCAST_MAC if op == 1 else tha
    body = struct.pack("!HHBBH6sI6sI", 1, 0x0800, 6, 4, op, sha, spa, tha if op == 2 else bytes(6), tpa)
    return _pad(bytearray(dst + sha + b"\x08\x06" + body))


def is_arp_request_for(frame: bytes, ip: int) -> bool:
    """Whether `frame` is an ARP request for address `ip` (arp_frame's layout)."""
    return frame[12:14] == b"\x08\x06" and frame[20:22] == b"\x00\x01" and frame[38:42] == ip.to_bytes(4, "big")


def forward_full(frame: bytes, dst_mac: bytes, src_mac: bytes) -> bytes:
    """The forwarding rewrite with the header checksum recomputed (after options)."""
    out = bytearray(frame)
    out[0:6], out[6:12] = dst_mac, src_mac
    out[22] -= 1
    hl = 4 * (out[14] & 0xF)
    out[24:26] = b"\0\0"
    out[24:26] = internet_checksum(bytes(out[14 : 14 + hl])).to_bytes(2, "big")
    return bytes(out)


@dataclass
class Options:
    """What pass 1 of option processing found (pkt.c ip_options_route)."""

    bad: int | None = None  # offending octet (parameter problem pointer)
    rr_at: int = 0
    ts_at: int = 0
    sr_at: int = 0
    strict: bool = False
    source_routed: bool = False
    sr_exhausted: bool = False
    ts_ours: bool = False  # a prespecified timestamp (flag 3) names one of the router's addresses next


def _route_option_bad(i: int, ln: int, p: int, seen: int) -> int | None:
    """The offending octet of a route-recording option at i (length ln, pointer p), or None."""
    if ln < 3:
        return i + 1
    if p < 4 or (p <= ln and p + 3 > ln):
        return i + 2
    return i if seen else None


def _options_scan(frame: bytes | bytearray, own: set[int] | frozenset[int]) -> Options:
    """Pass 1 without changing anything (pkt.c options_scan): every option checked, where
    each one acted on starts, whether a prespecified timestamp names one of `own` next."""
    h = 14
    hl = 4 * (frame[h] & 0xF)
    r = Options()
    i = 20
    while i < hl:
        t = frame[h + i]
        if t == 0:
            break
        if t == 1:
            i += 1
            continue
        if i + 1 >= hl:
            return Options(bad=i)
        ln = frame[h + i + 1]
        if ln < 2 or i + ln > hl:
            return Options(bad=i + 1)
        p = frame[h + i + 2] if ln >= 3 else 0
        if t in (7, 131, 137):                      # record route, loose / strict source route
            bad = _route_option_bad(i, ln, p, r.rr_at if t == 7 else r.sr_at)
            if bad is not None:
                return Options(bad=bad)
            if t == 7:
                r.rr_at = i
            else:
                r.sr_at = i
                r.strict = t == 137
        elif t == 68:
            if ln < 4:
                return Options(bad=i + 1)
            if p < 5:
                return Options(bad=i + 2)
            flg = frame[h + i + 3] & 0xF
            if flg not in (0, 1, 3):
                return Options(bad=i + 3)
            if p <= ln and p + (3 if flg == 0 else 7) > ln:
                return Options(bad=i + 2)
            if p > ln and frame[h + i + 3] >> 4 == 15:
                return Options(bad=i + 3)
            if r.ts_at:
                return Options(bad=i)
            r.ts_at = i
            r.ts_ours = flg == 3 and p <= ln and int.from_bytes(frame[h + i + p - 1 : h + i + p + 3], "big") in own
        i += ln
    return r


def options_route(frame: bytearray, own: set[int]) -> Options:
    """Pass 1 (pkt.c ip_options_route): the options checked, and a source route addressed
    to the router and not used up moves the destination to its next address -- on past
    next addresses that are the router's too (each such hop made here, its address left
    in the route as the one recorded, the options checked again)."""
    h = 14
    while True:
        r = _options_scan(frame, own)
        if r.bad is not None:
            return r
        if not r.sr_at or int.from_bytes(frame[h + 16 : h + 20], "big") not in own:
            r.strict = False
            return r
        i = r.sr_at
        ln, p = frame[h + i + 1], frame[h + i + 2]
        if p > ln:
            r.sr_exhausted = True
            return r
        frame[h + 16 : h + 20] = frame[h + i + p - 1 : h + i + p + 3]
        r.source_routed = True
        if int.from_bytes(frame[h + 16 : h + 20], "big") not in own:
            return r
        frame[h + i + 2] = p + 4


def options_record(frame: bytearray, r: Options, out_addr: int, ts_ms: int) -> list[int]:
    """Pass 2 (pkt.c ip_options_record); returns the offsets of timestamps written."""
    h = 14
    ts_at: list[int] = []
    a = out_addr.to_bytes(4, "big")
    if r.source_routed:
        i = r.sr_at
        p = frame[h + i + 2]
        frame[h + i + p - 1 : h + i + p + 3] = a
        frame[h + i + 2] = p + 4
    if r.rr_at:
        i = r.rr_at
        ln, p = frame[h + i + 1], frame[h + i + 2]
        if p <= ln:
            frame[h + i + p - 1 : h + i + p + 3] = a
            frame[h + i + 2] = p + 4
    if r.ts_at:
        i = r.ts_at
        ln, p, flg = frame[h + i + 1], frame[h + i + 2], frame[h + i + 3] & 0xF
        ts = ts_ms.to_bytes(4, "big")
        if p > ln:
            frame[h + i + 3] = (frame[h + i + 3] + 0x10) & 0xFF
        elif flg == 0:
            frame[h + i + p - 1 : h + i + p + 3] = ts
            ts_at.append(h + i + p - 1)
            frame[h + i + 2] = p + 4
        elif flg == 1:
            frame[h + i + p - 1 : h + i + p + 3] = a
            frame[h + i + p + 3 : h + i + p + 7] = ts
            ts_at.append(h + i + p + 3)
            frame[h + i + 2] = p + 8
        elif r.ts_ours:                                # prespecified: one of ours is next
            frame[h + i + p + 3 : h + i + p + 7] = ts
            ts_at.append(h + i + p + 3)
            frame[h + i + 2] = p + 8
    return ts_at


def _return_route(opt: bytes, src: int, own: set[int] | frozenset[int]) -> tuple[bytes, int | None]:
    """The return route of a used-up source route `opt` from `src` (pkt.c return_route):
    the option (b"" when there is no hop back) and the reply's first hop."""
    ln, p = opt[1], opt[2]
    k = max(0, min(p, ln + 1) - 4) // 4                       # the addresses before the pointer
    hops = [opt[3 + 4 * j : 7 + 4 * j] for j in range(k)]
    if hops and int.from_bytes(hops[0], "big") == src:        # RFC 1122 3.2.1.8 case B: src named first
        hops = hops[1:]
    while hops and int.from_bytes(hops[-1], "big") in own:   # hops the router made to itself
        hops.pop()
    if not hops:
        return b"", None
    back = [*reversed(hops[:-1]), src.to_bytes(4, "big")]
    return bytes([opt[0], 3 + 4 * len(back), 4]) + b"".join(back), int.from_bytes(hops[-1], "big")


def _reply_options(req: bytes, r: Options, own: set[int] | frozenset[int]) -> tuple[bytes, int, int, int | None]:
    """The echo reply's options (pkt.c reply_options): the return route of a source route,
    Record Route, Timestamp as received, EOL-padded; where RR and TS start in the reply's
    header (0: none) and the first hop of the return route (None: none).  NOP, EOL and
    other options are not returned (the C comment says why)."""
    h = 14
    src = int.from_bytes(req[26:30], "big")
    out, hop, rr_at, ts_at = b"", None, 0, 0
    if r.sr_at:
        out, hop = _return_route(req[h + r.sr_at : h + r.sr_at + req[h + r.sr_at + 1]], src, own)
    if r.rr_at:
        rr_at = 20 + len(out)
        out += req[h + r.rr_at : h + r.rr_at + req[h + r.rr_at + 1]]
    if r.ts_at:
        ts_at = 20 + len(out)
        out += req[h + r.ts_at : h + r.ts_at + req[h + r.ts_at + 1]]
    return out + bytes(-len(out) % 4), rr_at, ts_at, hop


def echo_reply_route(req: bytes, own: set[int] | frozenset[int] = frozenset()) -> tuple[int, bool] | None:
    """Where the echo reply to `req` goes first and whether that route back is strict
    (pkt.c echo_reply_route; own: the router's addresses); None: malformed options."""
    r = _options_scan(req, frozenset())
    if r.bad is not None:
        return None
    _opts, _rr, _ts, hop = _reply_options(req, r, own)
    if hop is None:
        return int.from_bytes(req[26:30], "big"), False
    return hop, r.strict


def echo_reply(dst_mac: bytes, src_mac: bytes, req: bytes, own: set[int] | frozenset[int] = frozenset(),
               out_addr: int = 0, ts_ms: int = 0) -> tuple[bytes, list[int]] | None:  # fmt: skip
    """The Echo Reply to the request `req` (pkt.c build_echo_reply): its ICMP message
    whole, from the address asked; the request's options returned as RFC 1122 3.2.2.6 /
    RFC 1812 4.3.3.6 say (a used-up source route reversed, the reply to its first hop;
    Record Route and Timestamp with this router added: out_addr, ts_ms; own: the router's
    addresses).  With the offsets of the timestamps written; None: malformed options."""
    r = _options_scan(req, own)
    if r.bad is not None:
        return None
    opts, rr_at, ts_at, hop = _reply_options(req, r, own)
    tot = req[16] << 8 | req[17]
    hl = 4 * (req[14] & 0xF)
    body = bytearray(req[14 + hl : 14 + tot])
    body[0] = 0
    body[1] = 0
    body[2:4] = b"\0\0"
    body[2:4] = internet_checksum(bytes(body)).to_bytes(2, "big")
    src, dst = struct.unpack_from("!II", req, 26)
    to = src if hop is None else hop
    frame = _eth_ip(dst_mac, src_mac, req[15], 20 + len(opts) + len(body), req[18] << 8 | req[19], 1, dst, to)
    stamps: list[int] = []
    if opts:
        frame[14] = 0x40 | (20 + len(opts)) // 4
        frame[34:34] = opts
        stamps = options_record(frame, Options(rr_at=rr_at, ts_at=ts_at, ts_ours=r.ts_ours), out_addr, ts_ms)
        frame[24:26] = b"\0\0"
        frame[24:26] = internet_checksum(bytes(frame[14 : 34 + len(opts)])).to_bytes(2, "big")
    return _pad(frame + body), stamps


TS_TOLERANCE_MS = 20  # IP timestamps the control plane writes: its clock, up to this much after arrival


def same_but_timestamps(want: bytes, offsets: list[int], got: bytes, tolerance_ms: int = TS_TOLERANCE_MS) -> bool:
    """`got` is `want` but for IP timestamps (RFC 791) at `offsets`, which are the control
    plane's clock when it handled the packet: up to `tolerance_ms` after the model's
    (arrival) value; the header checksum must then be right for the bytes sent."""
    if not offsets or len(got) != len(want) or len(got) < 34:
        return False
    g, w = bytearray(got), bytearray(want)
    for off in offsets:
        delta = (int.from_bytes(g[off : off + 4], "big") - int.from_bytes(w[off : off + 4], "big")) % 86_400_000
        if delta > tolerance_ms:
            return False
        g[off : off + 4] = w[off : off + 4]
    hl = 4 * (got[14] & 0xF)
    if internet_checksum(got[14 : 14 + hl]) != 0:
        return False
    g[24:26] = w[24:26]
    return g == w


# ---- the model ------------------------------------------------------------------------------------


class Emitted(NamedTuple):
    """A frame the control plane sends."""

    port: int
    frame: bytes
    pid: int  # the packet it is about (an ARP request: the one whose arrival started the resolution)
    timestamps: tuple[int, ...] = ()  # offsets of IP timestamps written with the control plane's clock
    token: bool = False  # an ICMP error sent only if the rate limit has a token then (`defer_tokens`)


class DaemonArp(NamedTuple):
    """An entry of the daemon's ARP cache as it records it in SRAM (xscale/npkd/cp.h;
    npkit.toolchain.system.control.arp_record)."""

    state: str  # none | incomplete | reachable
    tries: int
    start_ns: int  # when its resolution began


class _Held(NamedTuple):
    """A frame waiting for ARP: a packet to forward or one the control plane made."""

    pid: int  # -1: none
    frame: bytes
    generated: bool
    full: bool  # forwarded after options: the header checksum recomputed
    timestamps: tuple[int, ...] = ()  # generated: as Emitted's


@dataclass
class CpResult:
    """The router's verdict on one packet."""

    fast: Outcome  # what the fast path did with it
    final: Outcome | None = None  # None while held for ARP
    reason: str = ""  # the exception reason, when the fast path excepted it
    learnt_hop: bool = False  # forwarded through a next hop the control plane resolved: until the
    #                           daemon has installed it, the fast path may still except it (arp_miss)
    timestamps: list[int] = field(default_factory=list)  # offsets of IP timestamps in the forwarded frame
    held_for: int = -1  # the next hop whose resolution it was held for (-1: never held)
    held_in: int = -1  # ... and which of this model's resolutions of it (_Arp.round)
    hold_full: int = -1  # the next hop whose full hold queue dropped it, by this model's count (-1: none)
    installed: int = -1  # the next hop whose MAC forwarding it put in the fast path (-1: none)
    alternatives: list[Outcome] = field(default_factory=list)  # near a route change: the other table's
    by_daemon: list[Outcome] = field(default_factory=list)  # round a plugin near a change: the daemon's
    #   forwards it may have made instead (the plugin before or after; not the fast path's: `alternatives`)
    routed: Outcome | None = None  # the fast path's outcome but for the flow table (-D classify=flows)
    arrived: int = 0  # when it came (the flow table and the plugins as they were then)


@dataclass
class _Arp:
    ip: int
    port: int
    mac: bytes = bytes(6)
    state: str = "none"  # none | incomplete | reachable
    tries: int = 0
    starter: int = -1  # the packet whose arrival started the resolution (its requests count for it)
    round: int = 0  # how many resolutions of the address this model has begun (CpResult.held_in)
    start: int = 0  # when the resolution began: the packet's arrival, until `follow_arp` says the daemon's time
    confirmed: bool = False  # start is the daemon's (follow_arp)
    next_try: int = 0
    expires: int = 0
    hold: list[_Held] = field(default_factory=list)
    gave_up: int = -1  # when its last resolution was given up
    ended: int = -1  # ... when its last resolution ended, given up or answered
    unconfirmed_hold: list[int] = field(default_factory=list)  # the packets of that one if the daemon
    #   never confirmed it: it may have taken them late, and begin one for them now (follow_arp)
    unconfirmed: list[int] = field(default_factory=list)  # the starters of such ones since the last
    #   the daemon confirmed, whose requests are the daemon's only if it makes them late (follow_arp)
    made_late: set[int] = field(default_factory=set)  # ... those it was seen making late
    shadow: int = -1  # the start of a resolution the daemon makes late for another packet of such
    #   a one, followed by its record alone (follow_arp); -1: none
    shadow_tries: int = 0  # ... the requests of it this model has sent
    late_start: int = -1  # the start of the last resolution the daemon was seen making late (follow_arp)
    given_up: list[_Held] = field(default_factory=list)  # what that give-up let go of (kill: `_ungive`)
    given_up_frames: list[Emitted] = field(default_factory=list)  # ... and the errors it sent about them
    taught_by: int = -1  # the ARP packet it learnt its MAC from, until the daemon is known to have taken it


@dataclass
class _Taught:
    """What an ARP packet taught this model at its arrival, before the daemon took it
    (`unlearn` takes it back)."""

    before: _Arp  # the entry as it was (a copy; state "none" and no MAC if there was none)
    had: bool  # the fast path had a MAC for the address then (if not, any it has now came from this)
    released: list[_Held]  # the packets its resolution let go of


class RouterModel:
    """Fast path (RefRouter) + control plane (npkd), packet by packet in arrival order."""

    def __init__(self, config: RouterConfig, *, options: dict[str, int] | None = None,
                 neighbours: dict[int, bytes] | None = None, route_changes: list[Any] | None = None,
                 app_actions: dict[str, str] | None = None) -> None:  # fmt: skip
        """`app_actions`: an application's exception reasons -> what the daemon does with
        them ("consume": nothing more; "forward": routed and sent as arp_miss is, TTL
        decremented: npkd's `exception CODE ACTION`)."""
        self.cfg = config
        self.app_actions = dict(app_actions or {})
        self.opt = {**daemon_defaults(), **(options or {})}
        self._table: RouteTable | None = None  # the route table once a change made it differ from config's
        self._alt_cache: dict[tuple[int, int], RouteTable] = {}  # (change, changes applied) -> the other table
        self._initial: set[tuple[int, int]] | None = None
        self.fast = RefRouter(config)
        self.fast.lookup = self.lookup
        self.fast.arp = dict(config.arp)          # what the fast path resolves (static + installed)
        self.static = dict(config.arp)
        self.own = {p.address for p in config.ports}
        self.net_bcast = {p.network for p in config.ports} | {p.broadcast for p in config.ports}
        self.cache: dict[int, _Arp] = {}
        self.bucket = self.opt["icmp_burst"] * 10**9
        self.bucket_ns = 0
        # ICMP errors leave the rate limit's bucket to whoever knows when the daemon sent
        # them (`take_token`): a daemon behind a backlog of exceptions sends them late, and
        # never about the packets a full exception ring dropped, which this model, acting at
        # arrival, also handled (ControlJudge)
        self.defer_tokens = False
        self.changes = sorted(route_changes or [], key=lambda c: c.at_ns)
        self._next_change = 0
        self.timed = list(self.changes)  # the timed changes, in the daemon's order (its index)
        self._timed_index = {id(c): k for k, c in enumerate(self.timed)}
        self.timed_done: set[int] = set()  # ... made (or tried) by a daemon, by its change log (timed_made)
        self._timed_next = 0  # the daemon makes them in order: its next record is of one from here
        self.owing = False  # from a kill until the restarted daemon has its route table (owe, caught_up)
        self.owed: list[int] = []  # timed changes due while owing, not made: the daemon's change log says when
        self._owed_from: int | None = None  # ... the restarted daemon may make them from here on (restart)
        self.neighbours = dict(neighbours or {})
        self.results: dict[int, CpResult] = {}
        self.emitted: list[Emitted] = []
        self.now = 0
        self.epoch_ms_of_day = (self.opt["epoch_s"] % 86400) * 1000
        self.down = False  # the daemon killed and not started again (`kill`, `restart`)
        self.told: list[tuple[int, int, bool]] = []  # what follow_arp said at the kill, for the caller
        self.retracted: list[Emitted] = []  # ARP requests sent here that the daemon had not sent when killed (kill)
        self.untold: list[Emitted] = []  # errors sent here about held packets the daemon had not given up (kill)
        self._withdrawals: list[int] = []  # when a restarted daemon withdraws learnt ARP state (withdraw_at)
        self._deferred: list[tuple[int, CpResult, bytes, int]] = []  # excepted while it was down
        # ARP packets this model learnt a MAC from at their arrival that the daemon is not yet
        # known to have taken from the exception ring (`taken`, `unlearn`), by packet id
        self.untaken: dict[int, _Taught] = {}
        self.unsent: list[Emitted] = []  # frames of its own an answer let go of that `unlearn` held again
        self.flows: Any = None  # -D classify=flows: the flow table's model (flows.FlowModel), its plugins
        self._plugin_pending: dict[int, tuple[bytes, int]] = {}  # plugin packets of the last PLUGIN_WINDOW_NS

    @property
    def routes(self) -> RouteTable:
        """The route table as it is now (made on the first change: until then the
        config's, looked up in C)."""
        if self._table is None:
            self._table = RouteTable(self.cfg.all_routes)
        return self._table

    def lookup(self, addr: int) -> Route | None:
        """Longest-prefix match in the table as it is now."""
        return self._table.lookup(addr) if self._table is not None else self.cfg.lookup(addr)

    def add_changes(self, changes: list[Any]) -> None:
        """More route changes (made through the daemon's control socket, as the run learns
        of them): at their time, or now if that has passed for the model."""
        late = [dc_replace(c, at_ns=self.now) if c.at_ns < self.now else c for c in changes]
        self.changes = sorted([*self.changes, *late], key=lambda c: c.at_ns)
        self._alt_cache.clear()

    # -- time
    def advance(self, t: int, daemon: dict[int, DaemonArp] | None = None, early_ns: int = 0) -> None:
        """Timers and route changes up to time t, in time order.  `daemon` (at a kill):
        what the daemon's ARP cache was at t (`kill`): an ARP retry or give-up is done
        only if the daemon had done it -- also one due up to `early_ns` after t, which
        the daemon, its clock ahead of the chip's within a quantum, may have made."""
        held_back: set[int] = set()
        while True:
            events: list[tuple[int, int, Any]] = []
            if self._next_change < len(self.changes):
                events.append((self.changes[self._next_change].at_ns, 0, None))
            if self._withdrawals:
                events.append((self._withdrawals[0], 3, None))
            for e in self.cache.values():
                if e.ip in held_back:
                    continue
                if e.state == "incomplete":
                    events.append((e.next_try, 1, e))
                elif e.state == "reachable" and e.expires:
                    events.append((e.expires, 2, e))
            due = [ev for ev in events if ev[0] <= t or (daemon is not None and ev[1] == 1 and ev[0] <= t + early_ns)]
            if not due:
                break
            when, kind, e = min(due, key=lambda ev: (ev[0], ev[1]))
            self.now = max(self.now, min(when, t))
            if kind == 0:
                c = self.changes[self._next_change]
                k = self._timed_index.get(id(c))
                if self.owing and k is not None and k not in self.timed_done:
                    del self.changes[self._next_change]   # the daemon's, when it makes it
                    self.owed.append(k)
                else:
                    self._apply_change(c)
                    self._next_change += 1
                self._alt_cache.clear()
            elif kind == 1 and daemon is not None and not self._daemon_did(e, daemon.get(e.ip)):
                held_back.add(e.ip)
                continue
            elif kind == 3:
                self._withdrawals.pop(0)
                self.withdraw_learnt()
            elif kind == 1:
                if e.tries < self.opt["arp_tries"]:
                    e.tries += 1
                    e.next_try += self.opt["arp_retry_us"] * 1000
                    self._arp_request(e)
                else:
                    self._unresolved(e)
            else:
                e.state = "none"
                if e.ip not in self.static:
                    self.fast.arp.pop(e.ip, None)
        self.now = max(self.now, t)

    # -- timed changes across a kill
    def timed_made(self, made: Any) -> Any | None:
        """A timed change the daemon made, from its change log (a RouteChange at the time
        it made it): which of the configured ones it is (`_dealt_with`).  One owed, or
        (while owing) one not yet applied here, takes effect at that time: returned, as
        applied (None: it applies at its own time, or no configured change is that one)."""
        k = self._dealt_with(made)
        if k is None:
            return None
        c = self.timed[k]
        if k in self.owed:
            self.owed.remove(k)
        elif self.owing and any(x is c for x in self.changes[self._next_change :]):
            self.changes = [x for x in self.changes if x is not c]
        else:
            return None
        now = dc_replace(c, at_ns=made.at_ns)
        self.add_changes([now])
        return now

    def timed_failed(self, tried: Any) -> None:
        """A timed change the daemon tried and failed (its change log's record of it): dealt
        with, owed no more.  Its effect here is none: the change failed in this model too
        at its time (no such route), or is the daemon's alone (out of room)."""
        k = self._dealt_with(tried)
        if k is not None and k in self.owed:
            self.owed.remove(k)

    def _dealt_with(self, record: Any) -> int | None:
        """Which configured timed change a change log record is of: the next in order with
        the same route (the daemon deals with them in order, each with one record), now
        marked as dealt with."""
        key = (record.op, record.prefix, record.length, record.next_hop)
        k = next((i for i in range(self._timed_next, len(self.timed))
                  if (self.timed[i].op, self.timed[i].prefix, self.timed[i].length, self.timed[i].next_hop) == key),
                 None)  # fmt: skip
        if k is not None:
            self._timed_next = k + 1
            self.timed_done.add(k)
        return k

    def owe(self) -> None:
        """The daemon is dead, having made the timed changes `timed_made` was told of: the
        others are owed from now on, the restarted daemon's to make.  One this model
        applied already (it was due, the daemon killed before it made it) is taken back."""
        self.owing = True
        applied = self.changes[: self._next_change]
        undo = [c for c in applied if (k := self._timed_index.get(id(c))) is not None and k not in self.timed_done]
        if not undo:
            return
        for c in undo:
            self.owed.append(self._timed_index[id(c)])
        keep = [c for c in applied if all(c is not u for u in undo)]
        self.changes = keep + self.changes[self._next_change :]
        self._next_change = len(keep)
        self._table = None
        self._alt_cache.clear()
        for c in keep:
            self._apply_route(c)

    def starting(self) -> None:
        """The first daemon is still to load its route table: like a restarted one, it
        makes no timed change before it has it, and those that fall due meanwhile are
        owed (`caught_up`: it has it)."""
        self.owing = True
        self._owed_from = 0

    def caught_up(self, t: int) -> None:
        """The restarted daemon has its route table (seen by t): it makes the timed changes
        due from then on at their time.  Those due by t that it has not made are owed
        (those this model has not reached yet too: the timers wait for `advance`)."""
        self.owing = False
        later = self.changes[self._next_change :]
        due = [c for c in later if c.at_ns <= t and self._timed_index.get(id(c)) is not None
               and self._timed_index[id(c)] not in self.timed_done]  # fmt: skip
        if due:
            self.owed += [self._timed_index[id(c)] for c in due]
            self.changes = self.changes[: self._next_change] + [c for c in later if all(c is not d for d in due)]
            self._alt_cache.clear()

    def _daemon_did(self, e: _Arp, d: DaemonArp | None) -> bool:
        """Had the daemon made e's next ARP timer event (a retry, or the give-up after the
        last one), by its record d of the entry?"""
        if d is None or not d.tries or d.start_ns < e.start:     # it never began this resolution
            return False
        if e.tries < self.opt["arp_tries"]:
            return d.tries > e.tries                  # (answered since, or given up: tries as they were)
        return d.state == "none"                      # given up

    def follow_arp(self, daemon: dict[int, DaemonArp], late: dict[int, bool] | None = None) -> list[tuple[int, int, bool]]:
        """The daemon's ARP cache (its record in SRAM, xscale/npkd/cp.h): a resolution the
        daemon began has its requests due from the time it began it, not from the packet's
        arrival (it handles the packet microseconds later, or, behind a backlog of
        exceptions, hundreds): this model's resolutions under way take the daemon's time,
        so that their retries and give-ups fall at the daemon's instants (what a kill cuts:
        `kill`).  The daemon may also have begun one earlier, for a packet this model
        forwarded through a MAC a restarted daemon had just withdrawn (`withdraw_at`: up
        to a quantum late): one begun after this model's last resolution of the entry
        ended is that one.  Its requests are about no one packet from then on (pid -1):
        the daemon sends them whichever packet began it -- the one this model began it
        for may never have reached the daemon (a full exception ring).

        A resolution the daemon began after this model's had ended is one this model did
        not make: a packet it held in that one the daemon took from the exception ring
        only after it ended (behind a backlog), and resolves afresh.  This model makes it
        too, with the requests the daemon has sent; the packet's fate is the first
        resolution's (given up, as this one will be, unless an answer comes).  One this
        model answered before the daemon began it the daemon makes with the requests it
        sends until it takes the answer.  If the daemon never confirmed the first one, it
        never made it: it took the packet only now.  So a resolution under way here is
        not the daemon's when the daemon began its one for a packet of that first
        resolution (`late`: such addresses, as the caller finds the packets in the
        daemon's hands, and whether the packet that first one was begun for is among
        them).  If it is, the requests this model sent about that packet are the late
        one's; if not, the daemon took that packet into another resolution, and this
        model sends the late one's requests as the record counts them (its `shadow`).

        Returns, for the resolutions the daemon confirmed or replaced, (the packet their
        requests so far are about, the address, whether the daemon sent them)."""
        step = self.opt["arp_retry_us"] * 1000
        told: list[tuple[int, int, bool]] = []
        late = late or {}
        for e in self.cache.values():
            d = daemon.get(e.ip)
            if d is not None and d.start_ns == e.shadow:
                self._shadow(e, d)
                continue
            if d is None or (d.start_ns <= e.ended and not self._begun_unseen(e, d)):
                continue
            if e.state == "reachable" and e.unconfirmed_hold:
                # answered here before the daemon, behind its backlog, began it: its
                # requests until it took the answer (this model's count them from its own)
                while e.tries < d.tries:
                    e.tries += 1
                    self._arp_request(e, about=-1)
            if d.state != "incomplete":
                continue
            if e.state == "incomplete" and not e.confirmed:
                if e.ip in late:
                    e.late_start = d.start_ns
                    if late[e.ip]:
                        e.made_late.add(e.unconfirmed[-1])
                    else:
                        e.shadow, e.shadow_tries = d.start_ns, 0
                        self._shadow(e, d)
                    continue
                told += self._unmade(e)
                told.append((e.starter, e.ip, True))
                e.start, e.confirmed = d.start_ns, True
                e.next_try = d.start_ns + e.tries * step
            elif e.state == "none" and e.ended >= 0 and d.tries:
                told += self._unmade(e)
                self._adopt(e, d)
        return told

    def _adopt(self, e: _Arp, d: DaemonArp) -> None:
        """The daemon's resolution d of e's address, begun for no packet this model holds
        (follow_arp): this model makes it too, with the requests the daemon has sent."""
        e.state, e.start, e.confirmed, e.starter = "incomplete", d.start_ns, True, -1
        e.round += 1
        e.tries, e.next_try = d.tries, d.start_ns + d.tries * self.opt["arp_retry_us"] * 1000
        for _ in range(d.tries):
            self._arp_request(e)

    @staticmethod
    def _begun_unseen(e: _Arp, d: DaemonArp) -> bool:
        """Whether d is a resolution the daemon began while this model's last one of e,
        never confirmed, was under way, first seen after that one ended (its record is
        read once a slice): the daemon's, to be made here as one begun after it
        (follow_arp), not an old one -- unless it was seen, as one made late."""
        return (e.state == "none" and not e.confirmed and d.state == "incomplete" and e.start < d.start_ns <= e.ended
                and d.start_ns != e.late_start)  # fmt: skip

    def _shadow(self, e: _Arp, d: DaemonArp) -> None:
        """The requests of the daemon's resolution d, followed by its record alone (e.shadow),
        as it counts them; it ends when the record does."""
        while e.shadow_tries < d.tries:
            e.shadow_tries += 1
            self._arp_request(e, about=-1)
        if d.state != "incomplete":
            e.shadow = -1

    @staticmethod
    def _unmade(e: _Arp) -> list[tuple[int, int, bool]]:
        """The resolutions of e that ended here before the daemon began any, that it was not
        seen making late, now that it has begun one after them: it never made them (the
        packets they held it took into this one, or never took: a full exception ring).
        Their requests are not expected (follow_arp's (packet, address, False))."""
        current = e.starter if e.state == "incomplete" else None   # (under way: not one that ended)
        out = [(pid, e.ip, False) for pid in e.unconfirmed if pid not in e.made_late and pid != current]
        e.unconfirmed, e.made_late = [], set()
        return out

    def follows(self) -> bool:
        """Whether the daemon's ARP record may change this model's (`follow_arp`): a
        resolution under way still has a packet's arrival for its start, or one has ended
        (the daemon may begin another for a packet it took late), or one ended here before
        the daemon confirmed it."""
        return any((e.state == "incomplete" and not e.confirmed) or (e.state == "none" and e.ended >= 0) or e.shadow >= 0
                   or (e.state == "reachable" and e.unconfirmed_hold) for e in self.cache.values())  # fmt: skip

    def finish(self, t: int | None = None) -> None:
        """Run the timers out (held packets resolved or given up)."""
        horizon = t if t is not None else self.now + 10**12
        pending = [e.next_try for e in self.cache.values() if e.state == "incomplete"]
        while pending and min(pending) <= horizon:
            self.advance(min(pending))
            pending = [e.next_try for e in self.cache.values() if e.state == "incomplete"]

    def pending(self) -> set[int]:
        """The packets the control plane may still send frames about: those whose ARP
        resolution is under way (retries) or whose frames wait for one (held)."""
        out: set[int] = set()
        for e in self.cache.values():
            if e.state == "incomplete":
                out.add(e.starter)
                out.update(item.pid for item in e.hold)
        return out

    def kill(self, t: int, daemon: dict[int, DaemonArp] | None = None, early_ns: int = 0,
             late: dict[int, bool] | None = None) -> list[int]:
        """The daemon killed at t: what it held for ARP is lost with it (the packets get
        Drop(KILLED); their ids are returned), its timers stop, and the exceptions that
        come until `restart` wait for the daemon started again.

        `daemon`: its ARP cache at the instant it died (its record in SRAM), which decides
        the timers due by then.  This model's clock is not the daemon's: it sleeps to a
        deadline and wakes at or after it, and a kill is taken at its next system call --
        at the instant of a retry it is still asleep, and is killed before it sends it.  So
        the timers due up to t are done here only as far as the daemon had done them: a
        retry only if its record counts the try, a give-up only if its record no longer
        shows the resolution under way; a retry this model made before it learnt of the
        kill that the record does not count is taken back (`retracted`: the frames, for
        the caller, which may have expected them already).  The other way, the XScale
        runs a quantum at a time with its clock ahead of the chip's, so its record may
        count a retry due up to `early_ns` after t: that one is done too.  The packets
        this model held that the daemon had not yet taken from the ring are the caller's
        to tell (`defer`); what `follow_arp` said about the daemon's record (and `late`, as
        the caller finds the packets in the dead daemon's hands), `told`."""
        if daemon is not None:
            self.told = self.follow_arp(daemon, late)
        self.advance(t, daemon, early_ns)
        if daemon is not None:
            self._ungive(daemon)
            self._retract(daemon)
        lost = []
        for e in self.cache.values():
            for item in e.hold:
                res = self.results.get(item.pid)
                if not item.generated and res is not None:
                    res.final = Drop(KILLED)
                    lost.append(item.pid)
            e.hold = []
            e.shadow = -1
            if e.state == "incomplete":
                e.state = "none"
        self.down = True
        self._owed_from = None
        return lost

    def uninstall(self, pid: int) -> None:
        """Packet `pid`, which this model forwarded from the cache, putting its next hop's
        MAC in the fast path, never reached the daemon that would have done so (killed
        first): the MAC leaves the fast path again, unless it is known there since."""
        res = self.results.get(pid)
        hop = res.installed if res is not None else -1
        if hop >= 0 and not any(r.installed == hop and r.final is not None for p, r in self.results.items() if p != pid):
            self.fast.arp.pop(hop, None)
        if res is not None:
            res.installed = -1

    def defer(self, pid: int, frame: bytes, in_port: int) -> None:
        """Packet `pid`, held for ARP here when the daemon was killed (`kill` dropped it),
        or already given up or forwarded here, was still on the exception ring, not taken
        by the daemon: it waits for the one started again, as the exceptions that come
        while none runs do (`restart`)."""
        res = self.results[pid]
        res.final = None
        self._deferred.append((pid, res, frame, in_port))

    def _retract(self, daemon: dict[int, DaemonArp]) -> None:
        """ARP requests this model sent that the dying daemon had not (kill)."""
        for e in self.cache.values():
            d = daemon.get(e.ip)
            if e.state != "incomplete" or d is None or d.state != "incomplete" or d.start_ns < e.start or d.tries >= e.tries:
                continue
            p = self.cfg.ports[e.port]
            for _ in range(e.tries - d.tries):
                self.retracted.append(Emitted(e.port, arp_frame(1, p.mac, p.address, bytes(6), e.ip), e.starter))
            e.tries = d.tries

    def _ungive(self, daemon: dict[int, DaemonArp]) -> None:
        """Give-ups this model made that the dying daemon had not (kill): a daemon behind
        its deadline -- busy with the exception ring, or asleep a little past it -- still
        held those packets when it died, so they are lost with it, not answered.  Its
        record shows the resolution under way still, begun no later than the model gave
        it up (one begun after is a later resolution).  The errors sent about them are
        taken back (`untold`: the caller may hold them as expected) with their tokens."""
        for e in self.cache.values():
            d = daemon.get(e.ip)
            if e.state != "none" or e.gave_up < 0 or d is None or d.state != "incomplete" or not e.start <= d.start_ns <= e.gave_up:
                continue
            e.state, e.hold = "incomplete", e.given_up + e.hold  # (retries it had not made: _retract)
            for item in e.given_up:
                res = self.results.get(item.pid)
                if not item.generated and res is not None:
                    res.final = None
            self.untold += e.given_up_frames
            for em in e.given_up_frames:
                if not em.token:  # (a deferred one took its token when the judge expected it: its to give back)
                    self.give_back_token()
            e.given_up, e.given_up_frames, e.gave_up = [], [], -1

    def restart(self, t: int) -> None:
        """The daemon started again at t: ARP afresh (an empty cache; what the old one
        learnt stays in the fast path until `withdraw_learnt`), a full ICMP bucket; then
        the exceptions that waited, in order."""
        self.now = max(self.now, t)
        self.cache.clear()
        self.bucket = self.opt["icmp_burst"] * 10**9
        self.bucket_ns = self.now
        self.down = False
        self._owed_from = t
        self.untaken.clear()  # (what they taught went with the cache)
        waiting, self._deferred = sorted(self._deferred, key=lambda w: w[0]), []  # (the ring's order)
        for pid, res, frame, in_port in waiting:
            self._handler(res.reason)(pid, res, bytearray(frame), in_port)

    def withdraw_at(self, t: int) -> None:
        """The restarted daemon took the MACs its predecessor learnt out of the fast path
        at t (its change log says when): `withdraw_learnt` then, in time order with the
        packets and timers (at once if this model is past t)."""
        if t <= self.now:
            self.withdraw_learnt()
        else:
            self._withdrawals.append(t)
            self._withdrawals.sort()

    def withdraw_learnt(self) -> None:
        """The restarted daemon has loaded its route table and taken out of the fast path
        the MACs its predecessor learnt (learnt /32s deleted, gateway entries back to
        ARP_MISS): the fast path knows the static entries and what it learnt since."""
        self.fast.arp = dict(self.static)
        for e in self.cache.values():
            if e.state == "reachable":
                self.fast.arp[e.ip] = e.mac

    def _apply_change(self, c: Any) -> None:
        self._apply_route(c)
        if c.op == "del":
            return
        e = self.cache.get(c.next_hop)
        if c.next_hop and e is not None and e.state == "reachable":
            self.fast.arp[c.next_hop] = e.mac

    def _apply_route(self, c: Any) -> None:
        self._apply_to(self.routes, c)

    @staticmethod
    def _apply_to(table: RouteTable, c: Any) -> None:
        if (c.prefix, c.length) in table:
            table.remove(c.prefix, c.length)
        if c.op == "add":
            table.add(Route(c.prefix, c.length, c.next_hop, c.port))

    # -- packets
    def process(self, pid: int, frame: bytes, in_port: int, t: int, fast: Outcome | None = None) -> CpResult:
        """What the router does with packet `pid`; `fast`: the fast path's outcome when the
        caller knows it better (an application's rule decided it), else RefRouter's."""
        self.advance(t)
        fast = fast if fast is not None else self.fast.process(frame, in_port)
        flow_alts: list[Outcome] = []
        routed = fast
        if self.flows is not None:  # the flow table decides before the route lookup
            fast, flow_alts = self.flows.compose(fast, frame, in_port, t, self.flows.window_ns)
        res = CpResult(fast)
        res.arrived, res.routed = t, routed
        self.results[pid] = res
        self._alternatives(res, frame, in_port, t)
        res.alternatives += flow_alts
        if any(o == PLUGIN for o in flow_alts) and fast != PLUGIN:
            self._bound_near(res, frame, t)
        if not isinstance(fast, Except):
            res.final = fast
            if isinstance(fast, Forward):    # through a next hop the control plane learnt and installed?
                dst = int.from_bytes(frame[30:34], "big")
                route = self.lookup(dst)
                hop = dst if route is None or route.direct else route.next_hop
                res.learnt_hop = hop not in self.static
            return res
        res.reason = fast.reason
        if self.down:  # on the exception ring until the daemon is started again
            self._deferred.append((pid, res, frame, in_port))
            return res
        self._handler(fast.reason)(pid, res, bytearray(frame), in_port)
        return res

    def _handler(self, reason: str) -> Any:
        """The control plane's handling of an exception reason: npkit's (`_on_<reason>`),
        or an application's (its `control:` action)."""
        action = self.app_actions.get(reason)
        if action is None:
            return getattr(self, f"_on_{reason}")
        return self._on_app_forward if action == "forward" else self._on_app_consume

    def take_exception(self, pid: int, frame: bytes, in_port: int, alt: Except, arrived: int | None = None) -> CpResult:
        """Packet `pid`, judged by one table near a route change, met the other in the fast
        path and was excepted (`alt`, one of its alternatives; the daemon's log says so):
        the control plane handles it now, as the daemon did.  `arrived`: its arrival, for
        a packet the daemon held for ARP (it logs one when the hold ends): one whose next
        hop's resolution was given up since then was held in it and given up with it."""
        res = self.results[pid]
        res.fast, res.reason, res.final = alt, alt.reason, None
        if arrived is not None and alt.reason == "arp_miss" and self._given_up_since(frame, arrived):
            self._icmp_error(pid, frame, 3, 1)
            res.final = Except(res.reason)
            return res
        self._handler(alt.reason)(pid, res, bytearray(frame), in_port)
        return res

    def _given_up_since(self, frame: bytes, t: int) -> bool:
        """Whether the resolution of the next hop to frame's destination was given up at or
        after t (none under way now)."""
        route = self._route_to(int.from_bytes(frame[30:34], "big"))
        e = self.cache.get(route[2]) if route is not None and route[1] is None else None
        return e is not None and e.state == "none" and e.gave_up >= t

    def _alternatives(self, res: CpResult, frame: bytes, in_port: int, t: int) -> None:
        """Near a route change the fast path may still (or already) use the other table."""
        for k, c in enumerate(self.changes):
            if not -CHANGE_WINDOW_NS // 5 <= t - c.at_ns <= change_window_ns(c.length):
                continue
            other = self._alt_cache.get((k, self._next_change))
            if other is None:
                other = self._alt_cache[(k, self._next_change)] = self._other_table(k)
            self._alternative(res, other, frame, in_port)
        if self.owed and self._owed_from is not None and t >= self._owed_from:
            for k in self.owed:  # the restarted daemon makes it once it has its table: from any time now
                other = self._alt_cache.get((-1 - k, self._next_change))
                if other is None:
                    other = self._alt_cache[(-1 - k, self._next_change)] = RouteTable(list(self.routes))
                    self._apply_to(other, self.timed[k])
                self._alternative(res, other, frame, in_port)

    def _alternative(self, res: CpResult, other: RouteTable, frame: bytes, in_port: int) -> None:
        self.fast.lookup = other.lookup
        try:
            res.alternatives.append(self.fast.process(frame, in_port))
        finally:
            self.fast.lookup = self.lookup

    def _other_table(self, k: int) -> RouteTable:
        """The table the fast path may still (or already) use around change k."""
        c = self.changes[k]
        other = RouteTable(list(self.routes))
        if k < self._next_change:          # applied: its prefix as it was before it
            # (a later change may have withdrawn or replaced the prefix again: an add
            # and a delete of one route within the window, a route-add storm)
            if (c.prefix, c.length) in other:
                other.remove(c.prefix, c.length)
            prev = self._route_before(k)
            if prev is not None:
                other.add(prev)
        else:                              # not yet: the table after it
            self._apply_to(other, c)
        return other

    def _initial_prefixes(self) -> set[tuple[int, int]]:
        if self._initial is None:
            self._initial = set(zip(self.cfg.all_routes.prefix, self.cfg.all_routes.length, strict=True))
        return self._initial

    def _initial_route(self, prefix: int, length: int) -> Route:
        return next(r for r in self.cfg.routes if (r.prefix, r.length) == (prefix, length))

    def _route_before(self, k: int) -> Route | None:
        c = self.changes[k]
        for ch in reversed(self.changes[:k]):
            if (ch.prefix, ch.length) == (c.prefix, c.length):
                return Route(ch.prefix, ch.length, ch.next_hop, ch.port) if ch.op == "add" else None
        if (c.prefix, c.length) in self._initial_prefixes():
            return self._initial_route(c.prefix, c.length)
        return None

    # -- routing the router's own datagrams (cp.c route_to)
    def _route_to(self, dst: int) -> tuple[int, bytes | None, int] | None:
        if dst in self.own or dst in self.net_bcast or dst == 0xFFFFFFFF:
            return None
        r = self.lookup(dst)
        if r is None:
            return None
        hop = dst if r.direct else r.next_hop
        if hop in self.fast.arp:  # the fast path's next hop has a MAC: the daemon takes it, whoever put it
            return r.port, self.fast.arp[hop], hop  # there (a restarted one: its predecessor, until withdrawn)
        e = self.cache.get(hop)
        return r.port, (e.mac if e is not None and e.state == "reachable" else None), hop

    def _emit(self, route: tuple[int, bytes | None, int], frame: bytes, pid: int,
              timestamps: tuple[int, ...] = (), token: bool = False) -> None:  # fmt: skip
        port, mac, hop = route
        if mac is not None:
            self.emitted.append(Emitted(port, mac + frame[6:], pid, timestamps, token))
            return
        self._hold(self._entry(hop, port), _Held(pid, frame, True, False, timestamps))

    def _may_send_error(self, f: bytes) -> bool:
        src, dst = struct.unpack_from("!II", f, 26)
        frag = f[20] << 8 | f[21]
        if f[0] & 1 or frag & 0x1FFF:
            return False
        if src >> 24 in (0, 127) or src >= 0xE0000000 or src in self.net_bcast:
            return False
        if dst >= 0xE0000000 or dst in self.net_bcast:
            return False
        hl = 4 * (f[14] & 0xF)
        return not (f[23] == 1 and len(f) > 14 + hl and f[14 + hl] in (3, 4, 5, 11, 12))

    def take_token(self, at_ns: int) -> bool:
        """A token of the ICMP rate limit at time `at_ns` (False: none, the error is not sent)."""
        cap = self.opt["icmp_burst"] * 10**9
        if at_ns > self.bucket_ns:
            self.bucket = min(cap, self.bucket + (at_ns - self.bucket_ns) * self.opt["icmp_rate"])
            self.bucket_ns = at_ns
        if self.bucket < 10**9:
            return False
        self.bucket -= 10**9
        return True

    def give_back_token(self) -> None:
        """A token taken for an error that, it turns out, was not sent."""
        self.bucket = min(self.opt["icmp_burst"] * 10**9, self.bucket + 10**9)

    def _icmp_error(self, pid: int, f: bytes, icmp_type: int, code: int, aux: int = 0) -> None:
        if not self._may_send_error(f):
            return
        src = int.from_bytes(f[26:30], "big")
        route = self._route_to(src)
        if route is None:
            return
        deferred = self.defer_tokens and route[1] is not None  # (one held for ARP takes it now)
        if not deferred and not self.take_token(self.now):
            return
        port = self.cfg.ports[route[0]]
        self._emit(route, icmp_error(bytes(6), port.mac, port.address, f, icmp_type, code, aux), pid, token=deferred)

    # -- ARP
    def _entry(self, ip: int, port: int) -> _Arp:
        e = self.cache.get(ip)
        if e is None:
            e = self.cache[ip] = _Arp(ip, port)
        return e

    def _arp_request(self, e: _Arp, about: int | None = None) -> None:
        p = self.cfg.ports[e.port]
        if about is None:
            about = -1 if e.confirmed else e.starter  # (follow_arp)
        self.emitted.append(Emitted(e.port, arp_frame(1, p.mac, p.address, bytes(6), e.ip), about))

    def _hold(self, e: _Arp, item: _Held) -> None:
        if e.state == "reachable":
            self._release(e, item)
            return
        pid = item.pid
        if len(e.hold) >= self.opt["arp_hold"]:
            res = self.results.get(pid)
            if not item.generated and res is not None:
                res.final, res.hold_full = Except(res.reason), e.ip
        else:
            e.hold.append(item)
            res = self.results.get(pid)
            if not item.generated and res is not None:
                res.held_for, res.held_in = e.ip, e.round + (e.state == "none")
        if e.state == "none":
            e.state = "incomplete"
            e.round += 1
            e.starter = pid
            e.start, e.confirmed = self.now, False
            e.tries = 1
            e.next_try = self.now + self.opt["arp_retry_us"] * 1000
            self._arp_request(e)

    def _release(self, e: _Arp, item: _Held) -> None:
        pid, frame, generated, full, stamps = item
        if generated:
            self.emitted.append(Emitted(e.port, e.mac + frame[6:], pid, stamps))
            return
        src_mac = self.cfg.ports[e.port].mac
        out = forward_full(frame, e.mac, src_mac) if full else rewrite(frame, e.mac, src_mac)
        res = self.results.get(pid)
        if res is not None:  # (a driver may have let go of a packet the router finished with)
            res.final = Forward(e.port, out)
            res.learnt_hop = True

    @staticmethod
    def _ended(e: _Arp) -> None:
        e.unconfirmed_hold = [] if e.confirmed else [item.pid for item in e.hold if not item.generated]
        if not e.confirmed and e.starter >= 0:
            e.unconfirmed.append(e.starter)

    def given_up_before(self, pid: int) -> bool:
        """The daemon's log says packet `pid` was given up with packets it held before it for
        the same next hop: it took the packet into a resolution under way, which it gave
        up.  This model, acting at the packet's arrival, had given that one up already
        (the daemon gives up behind its deadline: busy with the ring, or asleep a little
        past it) and holds the packet in a resolution of its own that the daemon never
        confirmed: the packet leaves it, given up now (its ICMP error), and a resolution
        begun for it is begun afresh for the next packet held (none: it is no more; its
        requests so far, about this packet, are the caller's to take back).  Returns
        whether this model held the packet so."""
        res = self.results.get(pid)
        e = self.cache.get(res.held_for) if res is not None and res.final is None else None
        item = next((h for h in e.hold if h.pid == pid and not h.generated), None) if e is not None else None
        if e is None or item is None or e.state != "incomplete" or e.confirmed:
            return False
        e.hold.remove(item)
        res.final = Except(res.reason)
        self._icmp_error(pid, item.frame, 3, 1)
        if e.starter == pid:
            rest, e.hold = e.hold, []
            e.state, e.tries, e.starter = "none", 0, -1
            for h in rest:
                self._hold(e, h)
        return True

    def held_after_all(self, pid: int, frame: bytes, forwarded: bool) -> None:
        """Packet `pid`, which this model dropped at its next hop's full hold queue, the
        daemon held (its log says so): a daemon behind the exception ring takes packets
        later than they came, so its queue holds other packets than this model's, counted
        at their arrival.  The daemon's hold ended as its log says: given up (the ICMP
        error it sent), or answered (`forwarded`: through the MAC the answer gave)."""
        res = self.results.get(pid)
        if res is None or res.hold_full < 0:
            return
        e, res.hold_full = self.cache.get(res.hold_full), -1
        if not forwarded:
            self._icmp_error(pid, frame, 3, 1)
        elif e is not None and any(e.mac):
            src_mac = self.cfg.ports[e.port].mac
            res.final, res.learnt_hop = Forward(e.port, rewrite(frame, e.mac, src_mac)), True

    def dropped_from_hold(self, pid: int) -> Outcome | None:
        """Packet `pid`, which this model held for ARP, the daemon dropped at the full hold
        queue (its log says so; `held_after_all` the other way round): it leaves this
        model's queue, dropped.  Returns the outcome this model had given it (the frames
        sent about it are the caller's to take back)."""
        res = self.results.get(pid)
        if res is None or res.held_for < 0:
            return None
        was, res.final = res.final, Except(res.reason)
        e = self.cache.get(res.held_for)
        item = next((h for h in e.hold if h.pid == pid and not h.generated), None) if e is not None else None
        if e is not None and item is not None:
            e.hold.remove(item)
        return was

    def taken(self, pid: int) -> None:
        """The daemon took ARP packet `pid` from the exception ring (its log record says so):
        what it taught this model stands."""
        taught = self.untaken.pop(pid, None)
        if taught is not None:
            e = self.cache.get(taught.before.ip)
            if e is not None and e.taught_by == pid:
                e.taught_by = -1

    def unlearn(self, pid: int) -> list[int]:
        """ARP packet `pid`, which taught this model a MAC at its arrival, never reached the
        daemon: a full exception ring dropped it, or the daemon was killed before it took
        it (the one started again takes it: the caller's `defer`).  The daemon learnt
        nothing from it, so neither does this model: the entry is as it was before (a
        resolution under way goes on, its retries as the daemon makes them), the MAC
        leaves the fast path if it went there then, and the packets the answer let go of
        are held again (returned: their forwarding is the caller's to take back; frames
        of its own it let go of: `unsent`, for the caller to expect no more).  A later
        ARP packet that taught the entry again keeps what it taught (nothing done)."""
        taught = self.untaken.pop(pid, None)
        if taught is None:
            return []
        ip = taught.before.ip
        e = self.cache.get(ip)
        if e is None or e.taught_by != pid or e.state != "reachable":
            return []
        before = taught.before
        if not taught.had and ip not in self.static:  # (installed when it resolved, or from the cache since)
            self.fast.arp.pop(ip, None)
        mac, restored = e.mac, dc_replace(before, hold=[])
        self.cache[ip] = restored
        held = []
        for item in taught.released:
            res = self.results.get(item.pid)
            if item.generated:
                restored.hold.append(item)
                self.unsent.append(Emitted(e.port, mac + item.frame[6:], item.pid, item.timestamps))
            elif res is not None and isinstance(res.final, Forward):
                restored.hold.append(item)
                res.final, res.learnt_hop = None, False
                held.append(item.pid)
        return held

    def _resolved(self, e: _Arp) -> None:
        self._ended(e)
        e.ended = self.now
        self.fast.arp[e.ip] = e.mac
        for item in e.hold:
            self._release(e, item)
        e.hold = []

    def _unresolved(self, e: _Arp) -> None:
        self._ended(e)
        e.given_up, first = list(e.hold), len(self.emitted)
        for item in e.hold:
            if item.generated:
                continue
            self._icmp_error(item.pid, item.frame, 3, 1)
            res = self.results.get(item.pid)
            if res is not None:
                res.final = Except(res.reason)
        e.given_up_frames = self.emitted[first:]
        e.hold = []
        e.state = "none"
        e.gave_up = e.ended = self.now

    def _on_arp(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except("arp")
        if len(f) < 42 or f[14:20] != b"\x00\x01\x08\x00\x06\x04":
            return
        op = f[20] << 8 | f[21]
        if op not in (1, 2):
            return
        sha, spa, tpa = bytes(f[22:28]), int.from_bytes(f[28:32], "big"), int.from_bytes(f[38:42], "big")
        p = self.cfg.ports[in_port]
        for_me = tpa == p.address
        probe = spa == 0  # RFC 5227 probe: answered when for us, nothing learnt
        if sha[0] & 1 or (probe and op != 1) or (
                not probe and (not p.on_subnet(spa) or spa in (p.address, p.network, p.broadcast))):  # fmt: skip
            return
        e = None if probe else self.cache.get(spa)
        if not probe and spa not in self.static and (e is not None or for_me):
            e = self._entry(spa, in_port)
            was = e.state
            taught = _Taught(dc_replace(e, hold=list(e.hold), unconfirmed=list(e.unconfirmed), made_late=set(e.made_late)),
                             spa in self.fast.arp,
                             list(e.hold) if was == "incomplete" else [])  # fmt: skip
            e.mac, e.state, e.port = sha, "reachable", in_port
            e.expires = self.now + self.opt["arp_age_ms"] * 1_000_000
            if was == "incomplete":
                self._resolved(e)
            e.taught_by = pid
            self.untaken[pid] = taught
        if op == 1 and for_me:
            self.emitted.append(Emitted(in_port, arp_frame(2, p.mac, p.address, sha, spa), pid))

    # -- exceptions
    def _forward(self, pid: int, res: CpResult, f: bytes, full: bool) -> None:
        dst = int.from_bytes(f[30:34], "big")
        route = self._route_to(dst)
        if route is None:
            res.final = Except(res.reason)
            return
        port, mac, hop = route
        if mac is not None:
            if hop not in self.static:
                if hop not in self.fast.arp:
                    res.installed = hop
                self.fast.arp[hop] = mac         # known from the cache: installed
                res.learnt_hop = True
            src_mac = self.cfg.ports[port].mac
            res.final = Forward(port, forward_full(f, mac, src_mac) if full else rewrite(f, mac, src_mac))
            return
        self._hold(self._entry(hop, port), _Held(pid, bytes(f), False, full))

    def _on_app_consume(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except(res.reason)

    def _on_app_forward(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        self._forward(pid, res, bytes(f), True)

    def _on_arp_miss(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        self._forward(pid, res, bytes(f), False)

    def _on_redirect(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        dst = int.from_bytes(f[30:34], "big")
        r = self.lookup(dst)
        gw = (dst if r.direct else r.next_hop) if r is not None and self.cfg.send_redirects else 0
        quote = bytes(f)
        self._forward(pid, res, quote, False)
        if gw:
            self._icmp_error(pid, quote, 5, 1, gw)

    def _on_plugin(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        """npkd's plugin_packet (cp.c): the flow's slot's plugin (flows.FlowModel.plugin_frame:
        the plugins loaded at the daemon's start), then TTL and the route, forwarded."""
        res.final = Except("plugin")
        frame = bytes(f)
        t = res.arrived
        self._plugin_pending[pid] = (frame, t)
        for old in [p for p, (_, at) in self._plugin_pending.items() if at < t - PLUGIN_WINDOW_NS]:
            del self._plugin_pending[old]
        for state in self.flows.states_near(frame, t, PLUGIN_WINDOW_NS):
            self._plugin_alternative(res, frame, state, t)
        for state in self.flows.slot_states_near(frame, t):  # bound to another slot near then
            self._plugin_alternative(res, frame, state, t)
        out = self.flows.plugin_frame(frame, t)
        if out is None:
            return
        if out[22] <= 1:
            self._icmp_error(pid, out, 11, 0)
            return
        self._forward(pid, res, out, True)

    def flow_changed_near(self, pid: int, frame: bytes, in_port: int) -> bool:
        """A flow change read after packet `pid` was judged, near its arrival (the daemon's
        log comes at the end of a slice; the fast path may have met the change while the
        packet was still inside the chip): the outcomes by the tables near its arrival are
        allowed too.  Whether the fast path may have handed it to a plugin after all."""
        res = self.results.get(pid)
        if res is None or self.flows is None or res.routed is None:
            return False
        main, alts = self.flows.compose(res.routed, frame, in_port, res.arrived, self.flows.window_ns)
        for o in (main, *alts):
            if o != res.fast and o not in res.alternatives:
                res.alternatives.append(o)
        if res.fast == PLUGIN or PLUGIN not in res.alternatives:
            return False
        self._bound_near(res, frame, res.arrived)
        return True

    def _bound_near(self, res: CpResult, frame: bytes, t: int) -> None:
        """A packet of a flow bound to a plugin (or unbound) near its arrival, judged by the
        table without the binding: the fast path may have excepted it after all, and the
        daemon's forward round the slot's plugin may leave before its log record comes
        (`by_daemon`)."""
        for state in self.flows.slot_states_near(frame, t):
            self._plugin_alternative(res, frame, state, t)

    def plugin_changed(self, at_ns: int, slot: int, state: dict[str, Any] | None) -> None:
        """The daemon loaded (or emptied) a plugin slot at `at_ns`: the model's slot
        follows, and the packets of its flows that came near then may have met the new
        plugin (or still the old one): both are allowed (`alternatives`)."""
        self.flows.plugin_changed(at_ns, slot, state)
        for pid, (frame, t) in self._plugin_pending.items():
            if t >= at_ns - PLUGIN_WINDOW_NS and self.flows.slot_of(frame, t) == slot and pid in self.results:
                self._plugin_alternative(self.results[pid], frame, state, t)

    def _plugin_alternative(self, res: CpResult, frame: bytes, state: dict[str, Any] | None, t: int) -> None:
        out = self.flows.plugin_frame(frame, t, state=state, use_state=True)
        if out is None or out[22] <= 1:
            return
        route = self._route_to(int.from_bytes(out[30:34], "big"))
        if route is None or route[1] is None:
            return
        port, mac, _ = route
        res.by_daemon.append(Forward(port, forward_full(out, mac, self.cfg.ports[port].mac)))

    def _on_no_route(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except("no_route")
        self._icmp_error(pid, bytes(f), 3, 0)

    def _on_ttl_expired(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except("ttl_expired")
        self._icmp_error(pid, bytes(f), 11, 0)

    def _on_broadcast(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except("broadcast")

    def _on_multicast(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except("multicast")

    def _on_local_delivery(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        res.final = Except(res.reason)
        self._local(pid, bytes(f))

    def _local(self, pid: int, f: bytes) -> None:
        frag = f[20] << 8 | f[21]
        if frag & 0x1FFF:
            return
        hl = 4 * (f[14] & 0xF)
        tot = f[16] << 8 | f[17]
        off, l4 = 14 + hl, tot - hl
        if f[23] == 1 and l4 >= 8 and f[off] == 8 and not frag & 0x2000:
            if internet_checksum(f[off : off + l4]) == 0 and not f[0] & 1:
                self._echo(pid, f)
            return
        if f[23] == 17 and self.opt["closed_ports_only"]:
            self._icmp_error(pid, f, 3, 3)
        elif f[23] not in (1, 17):  # no transport but UDP here (TCP included): Protocol Unreachable
            self._icmp_error(pid, f, 3, 2)

    def _unicast(self, a: int) -> bool:
        """cp.c: ip_is_unicast_src and not own_or_bcast."""
        return not (a >> 24 in (0, 127) or a >= 0xE0000000 or a in self.net_bcast)

    def _ts_ms(self) -> int:
        """The control plane's clock for IP timestamps: ms since midnight UT (cp.c ts_ms)."""
        return (self.epoch_ms_of_day + self.now // 1_000_000) % 86_400_000

    def _echo(self, pid: int, f: bytes) -> None:
        """An Echo Request to the router, checksum right, not link broadcast (cp.c
        echo_request): the reply to the request's source or along the return route of the
        source route it used up; a strict one's first hop must be on-link."""
        back = echo_reply_route(f, self.own)
        if not self._unicast(int.from_bytes(f[26:30], "big")) or back is None or not self._unicast(back[0]):
            return
        to, strict = back
        route = self._route_to(to)
        hop = self.lookup(to)
        if route is None or hop is None or (strict and not hop.direct):
            return
        port = self.cfg.ports[route[0]]
        made = echo_reply(bytes(6), port.mac, f, self.own, port.address, self._ts_ms())
        if made is not None:
            self._emit(route, made[0], pid, tuple(made[1]))

    def _on_ip_options(self, pid: int, res: CpResult, f: bytearray, in_port: int) -> None:
        quote = bytes(f)
        res.final = Except("ip_options")
        r = options_route(f, self.own)
        if r.bad is not None:
            self._icmp_error(pid, quote, 12, 0, r.bad << 24)
            return
        src, dst = struct.unpack_from("!II", f, 26)
        subnet_zero = dst in {p.network for p in self.cfg.ports}
        subnet_bcast = dst in {p.broadcast for p in self.cfg.ports}
        if dst >> 24 in (0, 127) or (dst >= 0xF0000000 and dst != 0xFFFFFFFF) or subnet_zero:
            return
        if dst == 0xFFFFFFFF or subnet_bcast or dst >= 0xE0000000 or f[0] & 1:
            return
        if dst in self.own:
            self._local(pid, bytes(f))
            return
        if src >> 24 in (0, 127) or src >= 0xE0000000 or src in {p.broadcast for p in self.cfg.ports}:
            return
        route = self.lookup(dst)
        if route is None or dst in self.net_bcast:
            self._icmp_error(pid, quote, 3, 0)
            return
        if r.strict and not route.direct:
            self._icmp_error(pid, quote, 3, 5)
            return
        if f[22] <= 1:
            self._icmp_error(pid, quote, 11, 0)
            return
        res.timestamps = options_record(f, r, self.cfg.ports[route.port].address, self._ts_ms())
        self._forward(pid, res, bytes(f), True)
