"""Header building and parsing, and the Internet checksum (RFC 1071, RFC 1624)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npkit.emulator.traffic.packet import (
    ARP,
    ARP_REQUEST,
    ETHERTYPE_ARP,
    ETHERTYPE_IPV4,
    ICMP,
    IPPROTO_ICMP,
    IPPROTO_TCP,
    IPPROTO_UDP,
    TCP,
    TCP_SYN,
    UDP,
    Ethernet,
    IPv4,
    PacketError,
    Vlan,
    arp_frame,
    checksum_update,
    checksum_update_bytes,
    internet_checksum,
    ip,
    ip_str,
    ipv4_frame,
    mac,
    mac_str,
    ones_complement_sum,
    parse_frame,
)

A, B = mac("02:00:00:00:00:01"), mac("02:00:00:00:00:02")


def test_address_text_round_trip() -> None:
    assert ip("10.0.0.1") == 0x0A000001
    assert ip_str(0xC0A80001) == "192.168.0.1"
    assert mac_str(mac("02-4E-50-00-00-0a")) == "02:4e:50:00:00:0a"
    for bad in ("10.0.1", "10.0.0.256", "010.0.0.1", "x"):
        with pytest.raises(ValueError):
            ip(bad)
    with pytest.raises(ValueError):
        mac("02:00:00:00:00")


def test_rfc1071_example_sum() -> None:
    # RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2
    assert ones_complement_sum(bytes.fromhex("0001f203f4f5f6f7")) == 0xDDF2
    # odd length is padded with a zero byte
    assert ones_complement_sum(b"\x01") == 0x0100


def test_known_ipv4_header_checksum() -> None:
    # a widely used worked example: 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7
    hdr = IPv4(ip("192.168.0.1"), ip("192.168.0.199"), IPPROTO_UDP, flags=2).pack(0x73 - 20)
    assert hdr.hex() == "450000730000400040" "11b861c0a80001c0a800c7"
    assert internet_checksum(hdr) == 0


def test_ipv4_options_set_ihl_and_round_trip() -> None:
    hdr = IPv4(ip("1.2.3.4"), ip("5.6.7.8"), IPPROTO_UDP, ttl=9, options=b"\x94\x04\x00\x00")
    raw = hdr.pack(8)
    assert raw[0] == 0x46 and len(raw) == 24
    back = IPv4.unpack(raw)
    assert (back.ihl, back.options, back.ttl, back.total_length) == (6, b"\x94\x04\x00\x00", 9, 32)
    assert internet_checksum(raw) == 0


def test_ipv4_deliberately_malformed_fields_are_kept() -> None:
    raw = IPv4(1, 2, IPPROTO_UDP, version=6, ihl=4, total_length=7, checksum=0xBEEF).pack()
    assert raw[0] == 0x64 and raw[2:4] == b"\x00\x07" and raw[10:12] == b"\xbe\xef"


def test_udp_and_tcp_checksums_verify_over_pseudo_header() -> None:
    src, dst = ip("198.18.0.1"), ip("1.2.3.4")
    for proto, l4 in ((IPPROTO_UDP, UDP(1234, 53)), (IPPROTO_TCP, TCP(1234, 80, seq=7,
                                                                        flags=TCP_SYN))):
        seg = l4.pack(b"hello", src, dst)
        pseudo = struct.pack("!IIBBH", src, dst, 0, proto, len(seg))
        assert internet_checksum(pseudo + seg) == 0


def test_frame_build_parse_round_trip() -> None:
    frame = ipv4_frame(Ethernet(A, B, ETHERTYPE_IPV4),
                       IPv4(ip("198.18.0.1"), ip("1.2.3.4"), IPPROTO_TCP, ttl=33),
                       TCP(1000, 2000, seq=5, ack=6), b"data")
    assert len(frame) == 60  # padded to the Ethernet minimum
    p = parse_frame(frame)
    assert p.eth.dst == A and p.eth.src == B and p.ip is not None and p.tcp is not None
    assert (p.ip.ttl, p.tcp.sport, p.tcp.dport, p.tcp.seq, p.tcp.ack) == (33, 1000, 2000, 5, 6)
    assert frame[p.payload_offset : p.payload_offset + 4] == b"data"


def test_vlan_tag_round_trip() -> None:
    eth = Ethernet(A, B, ETHERTYPE_IPV4, Vlan(vid=100, pcp=5))
    raw = eth.pack()
    assert len(raw) == 18 and raw[12:14] == b"\x81\x00"
    back = Ethernet.unpack(raw)
    assert back.vlan == Vlan(100, 5, 0) and back.ethertype == ETHERTYPE_IPV4


def test_arp_round_trip() -> None:
    arp = ARP(ARP_REQUEST, A, ip("10.0.0.9"), bytes(6), ip("10.0.0.1"))
    frame = arp_frame(Ethernet(b"\xff" * 6, A, ETHERTYPE_ARP), arp)
    assert len(frame) == 60
    assert parse_frame(frame).arp == arp


def test_icmp_checksum() -> None:
    msg = ICMP(8, 0, b"\x00\x01\x00\x02").pack(b"ping")
    assert internet_checksum(msg) == 0
    frame = ipv4_frame(Ethernet(A, B, ETHERTYPE_IPV4), IPv4(1, 2, IPPROTO_ICMP),
                       ICMP(8, 0), b"x")
    assert parse_frame(frame).icmp is not None


def test_parse_reports_truncation_instead_of_raising() -> None:
    frame = Ethernet(A, B, ETHERTYPE_IPV4).pack() + b"\x45\x00"
    assert parse_frame(frame).error is not None
    with pytest.raises(PacketError):
        IPv4.unpack(b"\x45" * 10)


@st.composite
def ipv4_headers(draw: st.DrawFn) -> bytes:
    options = draw(st.binary(max_size=40).map(lambda b: b[: len(b) // 4 * 4]))
    hdr = IPv4(
        src=draw(st.integers(0, 2**32 - 1)),
        dst=draw(st.integers(0, 2**32 - 1)),
        protocol=draw(st.integers(0, 255)),
        ttl=draw(st.integers(0, 255)),
        tos=draw(st.integers(0, 255)),
        identification=draw(st.integers(0, 65535)),
        flags=draw(st.integers(0, 7)),
        fragment_offset=draw(st.integers(0, 8191)),
        options=options,
    )
    return hdr.pack(draw(st.integers(0, 1480)))


@given(ipv4_headers(), st.data())
def test_rfc1624_update_equals_full_recompute(header: bytes, data: st.DataObject) -> None:
    """Changing any 16-bit header word: equation 3 gives what recomputing gives."""
    word = data.draw(st.integers(0, len(header) // 2 - 1).filter(lambda w: w != 5))
    new_value = data.draw(st.integers(0, 0xFFFF))
    off = 2 * word
    old_value = int.from_bytes(header[off : off + 2], "big")
    old_ck = int.from_bytes(header[10:12], "big")
    changed = bytearray(header)
    changed[off : off + 2] = new_value.to_bytes(2, "big")
    changed[10:12] = b"\x00\x00"
    full = internet_checksum(changed)
    assert checksum_update(old_ck, old_value, new_value) == full


@given(ipv4_headers())
def test_rfc1624_ttl_decrement_equals_full_recompute(header: bytes) -> None:
    ttl, proto = header[8], header[9]
    if ttl == 0:
        return
    old_ck = int.from_bytes(header[10:12], "big")
    changed = bytearray(header)
    changed[8] = ttl - 1
    changed[10:12] = b"\x00\x00"
    inc = checksum_update(old_ck, ttl << 8 | proto, (ttl - 1) << 8 | proto)
    assert inc == internet_checksum(changed)
    changed[10:12] = inc.to_bytes(2, "big")
    assert internet_checksum(changed) == 0


@given(ipv4_headers(), st.integers(0, 2**32 - 1))
def test_rfc1624_address_rewrite(header: bytes, new_dst: int) -> None:
    old_ck = int.from_bytes(header[10:12], "big")
    changed = bytearray(header)
    changed[16:20] = new_dst.to_bytes(4, "big")
    inc = checksum_update_bytes(old_ck, header[16:20], bytes(changed[16:20]))
    changed[10:12] = b"\x00\x00"
    assert inc == internet_checksum(changed)


def test_rfc1624_section3_example() -> None:
    # RFC 1624 section 3: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285 gives HC' = 0x0000
    assert checksum_update(0xDD2F, 0x5555, 0x3285) == 0x0000
