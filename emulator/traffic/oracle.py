"""The behavioural reference router: what the router must do with each frame.

`RefRouter(config).process(frame, in_port)` returns exactly one of

- `Forward(port, data)`  the frame to transmit on `port`, bytes exactly as on the wire
  (without FCS);
- `Drop(reason)`         silently discarded, reason from microcode/reasons.yaml `drops`;
- `Except(reason)`       handed to the XScale on the exception ring, reason from
  reasons.yaml `exceptions` (named `Except`, not `Exception`, so as not to shadow
  the Python builtin).

It is the oracle of the integration tests, and the router microcode implements the
same rules in the same order, so a disagreement is a bug on one side or the other.
The rules, applied in this order; the first that matches decides (`frame` is the
received Ethernet frame without FCS, `len` its length, offsets from the frame start):

 1. short_frame                  drop  len < 60
 2. oversize_frame               drop  len > 1514
 3. dst_mac_mismatch             drop  dst MAC != receiving port's MAC and I/G bit clear
 4. arp                          exc   EtherType 0x0806
 5. non_ipv4_ethertype           drop  EtherType != 0x0800 (VLAN tags, IPv6, LLC too)
 6. bad_version                  drop  IP version != 4
 7. bad_ihl                      drop  IHL < 5
 8. bad_total_length             drop  total length < IHL*4
 9. ip_truncated                 drop  total length > len - 14
10. bad_checksum                 drop  checksum over IHL*4 header bytes != 0
11. ip_options                   exc   IHL > 5
12. martian_dst                  drop  dst in 0/8, 127/8, 240/4 except 255.255.255.255
13. obsolete_broadcast           drop  dst == network address of an attached subnet
14. broadcast                    exc   dst == 255.255.255.255 or an attached subnet's
                                       broadcast address
15. multicast                    exc   dst in 224/4
16. link_broadcast_unicast_ip    drop  dst MAC I/G bit set (IP dst is unicast by now)
17. local_delivery               exc   dst == any of the router's port addresses
18. martian_src                  drop  src in 0/8, 127/8, 224/4, 240/4, or an attached
                                       subnet's broadcast address
19. no_route                     exc   no route (route file + connected subnets) for dst
20. ttl_expired                  exc   TTL <= 1
21. redirect                     exc   send_redirects, route port == in_port, and src on
                                       in_port's subnet
22. arp_miss                     exc   next hop (route next hop; dst itself for connected /
                                       0.0.0.0 routes) has no ARP entry
23. forward: copy the frame, same length (Ethernet padding kept); dst MAC := next hop's
    MAC; src MAC := output port's MAC; TTL := TTL - 1; header checksum updated by
    RFC 1624 equation 3 on the 16-bit word at IP offset 8 (TTL, protocol):
    HC' = ~(~HC + ~m + m') in one's complement arithmetic. For a received header whose
    checksum is the canonical value this equals a full recompute (tested).

The RFC 1812 section behind each rule, and the reasons for the order, are in
microcode/reasons.yaml; a test checks that this list and the YAML's `step`s agree.
Frames are handled whole: no fragmentation is ever needed because every port has the
same 1500-byte MTU and longer frames are dropped at rule 2.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from .packet import ETHERTYPE_ARP, ETHERTYPE_IPV4, checksum_update, internet_checksum
from .reasons import load_reasons
from .router_config import RouterConfig


@dataclass(frozen=True)
class Forward:
    port: int
    data: bytes
    kind: Literal["forward"] = "forward"

    @property
    def reason(self) -> str:
        return ""


@dataclass(frozen=True)
class Drop:
    reason: str
    kind: Literal["drop"] = "drop"


@dataclass(frozen=True)
class Except:
    reason: str
    kind: Literal["exception"] = "exception"


Outcome = Forward | Drop | Except

_CLASS_E = 0xF0000000
_MULTICAST_LO, _MULTICAST_HI = 0xE0000000, 0xF0000000
_LIMITED_BCAST = 0xFFFFFFFF


class RefRouter:
    """Reference router for one configuration. Stateless per packet."""

    def __init__(self, config: RouterConfig) -> None:
        self.config = config
        self.ports = config.ports
        self.arp = config.arp
        self.own = set(config.addresses)
        self.subnet_zero = {p.network for p in config.ports}
        self.subnet_bcast = {p.broadcast for p in config.ports}
        reasons = load_reasons()
        names = {r.name for r in reasons.in_order()}
        missing = names - _RULE_NAMES
        if missing:  # reasons.yaml grew a rule this oracle does not implement
            raise RuntimeError(f"oracle does not implement: {', '.join(sorted(missing))}")

    def process(self, frame: bytes, in_port: int) -> Outcome:
        if not 0 <= in_port < len(self.ports):
            raise ValueError(f"in_port {in_port}: the router has ports 0..{len(self.ports) - 1}")
        if not isinstance(frame, bytes):
            frame = bytes(frame)
        n = len(frame)
        if n < 60:
            return Drop("short_frame")
        if n > 1514:
            return Drop("oversize_frame")
        port = self.ports[in_port]
        group = frame[0] & 1
        if not group and frame[0:6] != port.mac:
            return Drop("dst_mac_mismatch")
        ethertype = frame[12] << 8 | frame[13]
        if ethertype == ETHERTYPE_ARP:
            return Except("arp")
        if ethertype != ETHERTYPE_IPV4:
            return Drop("non_ipv4_ethertype")

        vihl = frame[14]
        if vihl >> 4 != 4:
            return Drop("bad_version")
        ihl = vihl & 0xF
        if ihl < 5:
            return Drop("bad_ihl")
        total = frame[16] << 8 | frame[17]
        if total < ihl * 4:
            return Drop("bad_total_length")
        if total > n - 14:
            return Drop("ip_truncated")
        if internet_checksum(frame[14 : 14 + ihl * 4]) != 0:
            return Drop("bad_checksum")
        if ihl > 5:
            return Except("ip_options")

        src, dst = struct.unpack_from("!II", frame, 26)
        top = dst >> 24
        if top == 0 or top == 127 or (dst >= _CLASS_E and dst != _LIMITED_BCAST):
            return Drop("martian_dst")
        if dst in self.subnet_zero:
            return Drop("obsolete_broadcast")
        if dst == _LIMITED_BCAST or dst in self.subnet_bcast:
            return Except("broadcast")
        if _MULTICAST_LO <= dst < _MULTICAST_HI:
            return Except("multicast")
        if group:
            return Drop("link_broadcast_unicast_ip")
        if dst in self.own:
            return Except("local_delivery")
        stop = src >> 24
        if stop == 0 or stop == 127 or src >= _MULTICAST_LO or src in self.subnet_bcast:
            return Drop("martian_src")

        route = self.config.lookup(dst)
        if route is None:
            return Except("no_route")
        ttl = frame[22]
        if ttl <= 1:
            return Except("ttl_expired")
        if self.config.send_redirects and route.port == in_port and port.on_subnet(src):
            return Except("redirect")
        next_hop = dst if route.direct else route.next_hop
        nh_mac = self.arp.get(next_hop)
        if nh_mac is None:
            return Except("arp_miss")
        return Forward(route.port, rewrite(frame, nh_mac, self.ports[route.port].mac))


def flow_of(frame: bytes, in_port: int) -> bytes:
    """The flow a frame belongs to, for order: its input port, IP protocol, and source and
    destination address (bytes 23 and 26..33, which forwarding does not change, so the
    input frame and its output give the same key).  Packets of one flow must leave in
    the order they came (RFC 1812 5.2 preamble); the parallel layout's rx steers by a hash
    of the addresses, so a flow stays on one fast-path ME (microcode/README.md §3.4)."""
    return bytes((in_port,)) + frame[23:24] + frame[26:34]


def rewrite(frame: bytes, dst_mac: bytes, src_mac: bytes) -> bytes:
    """Rule 23: the forwarding transformation of a validated IPv4 frame."""
    out = bytearray(frame)
    out[0:6] = dst_mac
    out[6:12] = src_mac
    ttl, proto, old_ck = frame[22], frame[23], frame[24] << 8 | frame[25]
    out[22] = ttl - 1
    new_ck = checksum_update(old_ck, ttl << 8 | proto, (ttl - 1) << 8 | proto)
    out[24] = new_ck >> 8
    out[25] = new_ck & 0xFF
    return bytes(out)


_RULE_NAMES = {
    "short_frame", "oversize_frame", "dst_mac_mismatch", "arp", "non_ipv4_ethertype",
    "bad_version", "bad_ihl", "bad_total_length", "ip_truncated", "bad_checksum",
    "ip_options", "martian_dst", "obsolete_broadcast", "broadcast", "multicast",
    "link_broadcast_unicast_ip", "local_delivery", "martian_src", "no_route",
    "ttl_expired", "redirect", "arp_miss",
}  # fmt: skip
