"""Ethernet, 802.1Q, ARP, IPv4, UDP, TCP and ICMP headers: build and parse, bytes in and out.

Why plain dataclasses and `struct` rather than a packet library: the generator, the
oracle and the comparator must agree byte for byte with microcode that reads fixed
offsets, so every field here is explicit, nothing is inferred behind the caller's back
except what the docstrings say (lengths and checksums left as `None` are computed).

Addresses: MACs are 6-byte `bytes`; IPv4 addresses are `int` (host order), because the
route lookup, the martian tests and the generator all do arithmetic on them. `mac()`,
`mac_str()`, `ip()` and `ip_str()` convert from and to text.

Checksums: `internet_checksum` is RFC 1071; `checksum_update` is RFC 1624 equation 3,
the incremental update the microcode uses when it decrements the TTL.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys
from array import array
from dataclasses import dataclass, field

ETH_HLEN = 14
ETH_MIN_FRAME = 60  # 64-byte minimum frame less the 4-byte FCS, which pcaps do not carry
ETH_MAX_FRAME = 1514  # 1518 less FCS, untagged
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_ARP = 0x0806
ETHERTYPE_VLAN = 0x8100
ETHERTYPE_IPV6 = 0x86DD

IPPROTO_ICMP = 1
IPPROTO_TCP = 6
IPPROTO_UDP = 17

BROADCAST_MAC = b"\xff" * 6
ZERO_MAC = b"\x00" * 6

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK, TCP_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20

ARP_REQUEST = 1
ARP_REPLY = 2


class PacketError(ValueError):
    """Bytes that cannot be parsed as the header asked for (too short, wrong type)."""


# ---------------------------------------------------------------------------- addresses


def mac(text: str) -> bytes:
    """'02:00:00:00:00:01' (or with '-') -> 6 bytes."""
    parts = text.replace("-", ":").split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {text!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"not a MAC address: {text!r}") from None


def mac_str(value: bytes) -> str:
    return ":".join(f"{b:02x}" for b in value)


def ip(text: str) -> int:
    """'10.0.0.1' -> 0x0a000001 (strict dotted quad: no octal, no short forms)."""
    try:
        return int(ipaddress.IPv4Address(text.strip()))
    except ValueError:
        raise ValueError(f"not an IPv4 address: {text!r}") from None


def ip_str(value: int) -> str:
    return socket.inet_ntoa(value.to_bytes(4, "big"))


def is_group_mac(value: bytes) -> bool:
    """I/G bit set: a broadcast or multicast link-layer destination (IEEE 802 3.2.3)."""
    return bool(value[0] & 1)


# ---------------------------------------------------------------------------- checksums


def ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    """16-bit one's complement sum of `data` (big-endian words, odd length zero-padded).

    Summing native-order words and swapping the folded result is equivalent
    (RFC 1071 2(B), byte-order independence) and lets `array` do the loop in C.
    """
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    total = sum(array("H", bytes(data)))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    if sys.byteorder == "little":
        total = ((total & 0xFF) << 8) | (total >> 8)
    return total


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 checksum: one's complement of the one's complement sum.

    Over a header whose checksum field holds a correct value the result is 0.
    """
    return ~ones_complement_sum(data) & 0xFFFF


def checksum_update(old_checksum: int, old_word: int, new_word: int) -> int:
    """RFC 1624 equation 3: HC' = ~(~HC + ~m + m'), all one's complement 16-bit.

    `old_word`/`new_word` are the 16-bit word (big-endian, aligned at an even header
    offset) before and after the change. Given a checksum that is the canonical full
    computation, the result equals a full recompute (see tests). Equation 3 rather than
    2 because 2 can yield 0xFFFF where a recompute yields 0x0000 (RFC 1624 section 3).
    """
    total = (~old_checksum & 0xFFFF) + (~old_word & 0xFFFF) + (new_word & 0xFFFF)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def checksum_update_bytes(old_checksum: int, old: bytes, new: bytes) -> int:
    """`checksum_update` over an even-length field (e.g. a 4-byte address)."""
    if len(old) != len(new) or len(old) % 2:
        raise ValueError("fields must have the same, even length")
    result = old_checksum
    for i in range(0, len(old), 2):
        result = checksum_update(
            result, int.from_bytes(old[i : i + 2], "big"), int.from_bytes(new[i : i + 2], "big")
        )
    return result


def _pseudo_header(src: int, dst: int, proto: int, length: int) -> bytes:
    return struct.pack("!IIBBH", src, dst, 0, proto, length)


# ---------------------------------------------------------------------------- Ethernet


@dataclass
class Vlan:
    """An 802.1Q tag: the frame's EtherType moves after it."""

    vid: int
    pcp: int = 0
    dei: int = 0

    def tci(self) -> int:
        return (self.pcp & 7) << 13 | (self.dei & 1) << 12 | (self.vid & 0xFFF)


@dataclass
class Ethernet:
    """Ethernet II header, optionally with one 802.1Q tag; no FCS (pcaps carry none)."""

    dst: bytes
    src: bytes
    ethertype: int
    vlan: Vlan | None = None

    @property
    def header_len(self) -> int:
        return ETH_HLEN + (4 if self.vlan else 0)

    def pack(self) -> bytes:
        if self.vlan is None:
            return self.dst + self.src + struct.pack("!H", self.ethertype)
        return (
            self.dst
            + self.src
            + struct.pack("!HHH", ETHERTYPE_VLAN, self.vlan.tci(), self.ethertype)
        )

    @classmethod
    def unpack(cls, data: bytes) -> Ethernet:
        if len(data) < ETH_HLEN:
            raise PacketError(f"Ethernet header needs 14 bytes, have {len(data)}")
        (etype,) = struct.unpack_from("!H", data, 12)
        if etype == ETHERTYPE_VLAN:
            if len(data) < ETH_HLEN + 4:
                raise PacketError("802.1Q tag truncated")
            tci, inner = struct.unpack_from("!HH", data, 14)
            tag = Vlan(vid=tci & 0xFFF, pcp=tci >> 13, dei=(tci >> 12) & 1)
            return cls(bytes(data[0:6]), bytes(data[6:12]), inner, tag)
        return cls(bytes(data[0:6]), bytes(data[6:12]), etype)


# ---------------------------------------------------------------------------- ARP


@dataclass
class ARP:
    """ARP for IPv4 over Ethernet (RFC 826): 28 bytes."""

    op: int
    sender_mac: bytes
    sender_ip: int
    target_mac: bytes
    target_ip: int
    htype: int = 1
    ptype: int = ETHERTYPE_IPV4

    LEN = 28

    def pack(self) -> bytes:
        return struct.pack(
            "!HHBBH6sI6sI",
            self.htype,
            self.ptype,
            6,
            4,
            self.op,
            self.sender_mac,
            self.sender_ip,
            self.target_mac,
            self.target_ip,
        )

    @classmethod
    def unpack(cls, data: bytes) -> ARP:
        if len(data) < cls.LEN:
            raise PacketError(f"ARP needs 28 bytes, have {len(data)}")
        htype, ptype, hlen, plen, op, sha, spa, tha, tpa = struct.unpack_from("!HHBBH6sI6sI", data)
        if hlen != 6 or plen != 4:
            raise PacketError(f"ARP hlen/plen {hlen}/{plen}, expected 6/4")
        return cls(op, sha, spa, tha, tpa, htype, ptype)


# ---------------------------------------------------------------------------- IPv4


@dataclass
class IPv4:
    """IPv4 header (RFC 791). `ihl`, `total_length` and `checksum` left as None are
    computed by `pack`; set them to build deliberately malformed headers."""

    src: int
    dst: int
    protocol: int
    ttl: int = 64
    tos: int = 0
    identification: int = 0
    flags: int = 0  # 3 bits: reserved, DF (2), MF (1)
    fragment_offset: int = 0  # in 8-byte units
    options: bytes = b""
    version: int = 4
    ihl: int | None = None
    total_length: int | None = None
    checksum: int | None = None

    @property
    def header_len(self) -> int:
        """Bytes actually occupied by the header (20 + options, padded to 4)."""
        return 20 + (len(self.options) + 3) // 4 * 4

    def pack(self, payload_len: int = 0) -> bytes:
        opts = self.options + b"\x00" * (-len(self.options) % 4)
        ihl = self.ihl if self.ihl is not None else (20 + len(opts)) // 4
        total = self.total_length if self.total_length is not None else 20 + len(opts) + payload_len
        header = bytearray(
            struct.pack(
                "!BBHHHBBHII",
                (self.version & 0xF) << 4 | (ihl & 0xF),
                self.tos,
                total & 0xFFFF,
                self.identification & 0xFFFF,
                (self.flags & 7) << 13 | (self.fragment_offset & 0x1FFF),
                self.ttl & 0xFF,
                self.protocol & 0xFF,
                0,
                self.src,
                self.dst,
            )
            + opts
        )
        cksum = self.checksum if self.checksum is not None else internet_checksum(header)
        struct.pack_into("!H", header, 10, cksum)
        return bytes(header)

    @classmethod
    def unpack(cls, data: bytes) -> IPv4:
        """Parse the header at the start of `data`; options are taken per IHL."""
        if len(data) < 20:
            raise PacketError(f"IPv4 header needs 20 bytes, have {len(data)}")
        vihl, tos, total, ident, frag, ttl, proto, cksum, src, dst = struct.unpack_from(
            "!BBHHHBBHII", data
        )
        ihl = vihl & 0xF
        hlen = max(ihl * 4, 20)
        if len(data) < hlen:
            raise PacketError(f"IPv4 IHL {ihl} needs {hlen} bytes, have {len(data)}")
        return cls(
            src=src,
            dst=dst,
            protocol=proto,
            ttl=ttl,
            tos=tos,
            identification=ident,
            flags=frag >> 13,
            fragment_offset=frag & 0x1FFF,
            options=bytes(data[20:hlen]),
            version=vihl >> 4,
            ihl=ihl,
            total_length=total,
            checksum=cksum,
        )


# ---------------------------------------------------------------------------- L4


@dataclass
class UDP:
    """UDP header (RFC 768). A None checksum is computed over the pseudo-header."""

    sport: int
    dport: int
    length: int | None = None
    checksum: int | None = None

    LEN = 8

    def pack(self, payload: bytes, src: int, dst: int) -> bytes:
        length = self.length if self.length is not None else 8 + len(payload)
        seg = bytearray(struct.pack("!HHHH", self.sport, self.dport, length, 0) + payload)
        if self.checksum is not None:
            cksum = self.checksum
        else:
            cksum = internet_checksum(_pseudo_header(src, dst, IPPROTO_UDP, len(seg)) + seg)
            cksum = cksum or 0xFFFF  # 0 means "no checksum" in UDP (RFC 768)
        struct.pack_into("!H", seg, 6, cksum)
        return bytes(seg)

    @classmethod
    def unpack(cls, data: bytes) -> UDP:
        if len(data) < 8:
            raise PacketError(f"UDP header needs 8 bytes, have {len(data)}")
        sport, dport, length, cksum = struct.unpack_from("!HHHH", data)
        return cls(sport, dport, length, cksum)


@dataclass
class TCP:
    """TCP header (RFC 9293) with optional options; None checksum is computed."""

    sport: int
    dport: int
    seq: int = 0
    ack: int = 0
    flags: int = TCP_ACK
    window: int = 65535
    urgent: int = 0
    options: bytes = b""
    checksum: int | None = None

    @property
    def header_len(self) -> int:
        return 20 + (len(self.options) + 3) // 4 * 4

    def pack(self, payload: bytes, src: int, dst: int) -> bytes:
        opts = self.options + b"\x00" * (-len(self.options) % 4)
        offset = (20 + len(opts)) // 4
        seg = bytearray(
            struct.pack(
                "!HHIIBBHHH",
                self.sport,
                self.dport,
                self.seq & 0xFFFFFFFF,
                self.ack & 0xFFFFFFFF,
                offset << 4,
                self.flags & 0xFF,
                self.window,
                0,
                self.urgent,
            )
            + opts
            + payload
        )
        if self.checksum is not None:
            cksum = self.checksum
        else:
            cksum = internet_checksum(_pseudo_header(src, dst, IPPROTO_TCP, len(seg)) + seg)
        struct.pack_into("!H", seg, 16, cksum)
        return bytes(seg)

    @classmethod
    def unpack(cls, data: bytes) -> TCP:
        if len(data) < 20:
            raise PacketError(f"TCP header needs 20 bytes, have {len(data)}")
        sport, dport, seq, ack, off, flags, window, cksum, urg = struct.unpack_from(
            "!HHIIBBHHH", data
        )
        hlen = (off >> 4) * 4
        if hlen < 20 or len(data) < hlen:
            raise PacketError(f"TCP data offset {off >> 4} invalid for {len(data)} bytes")
        return cls(sport, dport, seq, ack, flags, window, urg, bytes(data[20:hlen]), cksum)


@dataclass
class ICMP:
    """ICMP header (RFC 792): type, code, checksum and the 4 type-specific bytes."""

    type: int
    code: int
    rest: bytes = b"\x00\x00\x00\x00"
    checksum: int | None = None

    def pack(self, payload: bytes = b"") -> bytes:
        msg = bytearray(struct.pack("!BBH4s", self.type, self.code, 0, self.rest) + payload)
        cksum = self.checksum if self.checksum is not None else internet_checksum(msg)
        struct.pack_into("!H", msg, 2, cksum)
        return bytes(msg)

    @classmethod
    def unpack(cls, data: bytes) -> ICMP:
        if len(data) < 8:
            raise PacketError(f"ICMP header needs 8 bytes, have {len(data)}")
        t, c, cksum, rest = struct.unpack_from("!BBH4s", data)
        return cls(t, c, rest, cksum)


# ---------------------------------------------------------------------------- frames


def pad_frame(data: bytes, minimum: int = ETH_MIN_FRAME) -> bytes:
    """Zero-pad to the Ethernet minimum, as a sending MAC does."""
    return data if len(data) >= minimum else data + b"\x00" * (minimum - len(data))


def ipv4_frame(
    eth: Ethernet,
    ip_header: IPv4,
    l4: UDP | TCP | ICMP | None = None,
    payload: bytes = b"",
    pad: bool = True,
) -> bytes:
    """Ethernet + IPv4 (+ L4) + payload, lengths and checksums filled in, padded to 60."""
    if isinstance(l4, (UDP, TCP)):
        body = l4.pack(payload, ip_header.src, ip_header.dst)
    elif isinstance(l4, ICMP):
        body = l4.pack(payload)
    else:
        body = payload
    frame = eth.pack() + ip_header.pack(len(body)) + body
    return pad_frame(frame) if pad else frame


def arp_frame(eth: Ethernet, arp: ARP, pad: bool = True) -> bytes:
    frame = eth.pack() + arp.pack()
    return pad_frame(frame) if pad else frame


@dataclass
class Parsed:
    """What `parse_frame` could make of a frame. Fields past an `error` are None."""

    eth: Ethernet
    l3_offset: int
    arp: ARP | None = None
    ip: IPv4 | None = None
    l4_offset: int | None = None
    udp: UDP | None = None
    tcp: TCP | None = None
    icmp: ICMP | None = None
    payload_offset: int | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def parse_frame(data: bytes) -> Parsed:
    """Best-effort parse for display and comparison: never raises past the Ethernet header."""
    eth = Ethernet.unpack(data)
    off = eth.header_len
    result = Parsed(eth=eth, l3_offset=off)
    try:
        if eth.ethertype == ETHERTYPE_ARP:
            result.arp = ARP.unpack(data[off:])
        elif eth.ethertype == ETHERTYPE_IPV4:
            hdr = IPv4.unpack(data[off:])
            result.ip = hdr
            l4 = off + max((hdr.ihl or 5) * 4, 20)
            result.l4_offset = l4
            if hdr.fragment_offset:
                return result
            if hdr.protocol == IPPROTO_UDP:
                result.udp = UDP.unpack(data[l4:])
                result.payload_offset = l4 + 8
            elif hdr.protocol == IPPROTO_TCP:
                result.tcp = TCP.unpack(data[l4:])
                result.payload_offset = l4 + result.tcp.header_len
            elif hdr.protocol == IPPROTO_ICMP:
                result.icmp = ICMP.unpack(data[l4:])
                result.payload_offset = l4 + 8
    except PacketError as exc:
        result.error = str(exc)
    return result
