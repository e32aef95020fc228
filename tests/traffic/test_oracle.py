"""The reference router, one test per rule, each with the packet and the outcome
RFC 1812 (or the noted standard) requires. Example router: port P is 10.0.P.1/24 with
MAC 02:4e:50:00:00:0P; routes in examples/traffic/routes.txt."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from npkit.emulator.traffic.oracle import Drop, Except, Forward, RefRouter
from npkit.emulator.traffic.packet import (
    ARP,
    ARP_REQUEST,
    BROADCAST_MAC,
    ETHERTYPE_ARP,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IPPROTO_UDP,
    UDP,
    Ethernet,
    IPv4,
    Vlan,
    internet_checksum,
    ip,
    ipv4_frame,
    mac,
)
from npkit.emulator.traffic.router_config import RouterConfig

PORT_MAC = [mac(f"02:4e:50:00:00:0{p}") for p in range(5)]
HOST = mac("02:00:00:ff:00:00")
ROUTED = "1.2.4.1"  # 1.2.0.0/16 -> 10.0.1.2 port 1


def frame(
    dst: str = ROUTED, src: str = "198.18.0.1", *, in_port: int = 0, ttl: int = 64,
    eth_dst: bytes | None = None, length: int = 60, **ip_fields: int | bytes | None,
) -> bytes:
    """A UDP frame to the router on `in_port`, zero-padded to `length` bytes."""
    hdr = IPv4(ip(src), ip(dst), IPPROTO_UDP, ttl=ttl, **ip_fields)  # type: ignore[arg-type]
    raw = ipv4_frame(Ethernet(eth_dst or PORT_MAC[in_port], HOST, ETHERTYPE_IPV4), hdr,
                     UDP(1000, 2000), b"payload", pad=False)
    return raw + bytes(max(0, length - len(raw)))


def run(router: RefRouter, data: bytes, in_port: int = 0) -> Forward | Drop | Except:
    return router.process(data, in_port)


# ---- 1-2: frame size (IEEE 802.3) ------------------------------------------------------


def test_01_short_frame(router: RefRouter) -> None:
    """802.3 4.2.4.2.2: a frame under 64 bytes (60 without FCS) is a fragment."""
    assert run(router, frame()[:59]) == Drop("short_frame")
    assert isinstance(run(router, frame(length=60)), Forward)


def test_02_oversize_frame(router: RefRouter) -> None:
    """802.3 maxUntaggedFrameSize 1518 (1514 without FCS); the ports' MTU is 1500."""
    assert run(router, frame(length=1515)) == Drop("oversize_frame")
    assert isinstance(run(router, frame(length=1514)), Forward)


# ---- 3-5: link layer ------------------------------------------------------------------


def test_03_dst_mac_mismatch(router: RefRouter) -> None:
    """Address recognition: unicast frames for another station are not received, even the
    MAC of another port of this router."""
    assert run(router, frame(eth_dst=mac("02:11:22:33:44:55"))) == Drop("dst_mac_mismatch")
    assert run(router, frame(eth_dst=PORT_MAC[1]), 0) == Drop("dst_mac_mismatch")


def test_04_arp(router: RefRouter) -> None:
    """RFC 826 / RFC 1812 3.3.2: ARP goes to the control plane; the MAC filter applies
    first (an ARP reply to another station is not ours)."""
    arp = ARP(ARP_REQUEST, HOST, ip("10.0.0.9"), bytes(6), ip("10.0.0.1")).pack()
    request = Ethernet(BROADCAST_MAC, HOST, ETHERTYPE_ARP).pack() + arp
    assert run(router, request + bytes(60 - len(request))) == Except("arp")
    other = Ethernet(mac("02:11:22:33:44:55"), HOST, ETHERTYPE_ARP).pack() + arp
    assert run(router, other + bytes(18)) == Drop("dst_mac_mismatch")


def test_05_non_ipv4_ethertype(router: RefRouter) -> None:
    """RFC 1812 5.2.2: the rules cover IPv4; other protocols, VLAN-tagged frames and
    802.3 length/LLC frames are not routed (and the control plane has no use for them)."""
    ipv6 = Ethernet(PORT_MAC[0], HOST, ETHERTYPE_IPV6).pack() + b"\x60" + bytes(59)
    assert run(router, ipv6) == Drop("non_ipv4_ethertype")
    inner = frame()
    tagged = Ethernet(PORT_MAC[0], HOST, ETHERTYPE_IPV4, Vlan(10)).pack() + inner[14:]
    assert run(router, tagged) == Drop("non_ipv4_ethertype")
    llc = inner[:12] + struct.pack("!H", 46) + inner[14:]
    assert run(router, llc) == Drop("non_ipv4_ethertype")


# ---- 6-10: IPv4 header validation, RFC 1812 5.2.2 --------------------------------------


def test_06_bad_version(router: RefRouter) -> None:
    """5.2.2 (3): version must be 4 (checksum valid, so only the version is wrong)."""
    assert run(router, frame(version=6)) == Drop("bad_version")


def test_07_bad_ihl(router: RefRouter) -> None:
    """5.2.2 (4): IHL must be at least 5."""
    assert run(router, frame(ihl=4)) == Drop("bad_ihl")
    assert run(router, frame(ihl=0)) == Drop("bad_ihl")


def test_08_bad_total_length(router: RefRouter) -> None:
    """5.2.2 (5): total length must hold the header."""
    assert run(router, frame(total_length=19)) == Drop("bad_total_length")


def test_09_ip_truncated_and_padding(router: RefRouter) -> None:
    """5.2.2 (1) for the whole datagram: it must fit in the frame. Ethernet padding
    after a shorter datagram is normal and is forwarded as received."""
    assert run(router, frame(total_length=47)) == Drop("ip_truncated")  # 46 bytes available
    padded = frame(total_length=36)  # 20 + 8 + 8: the rest of the 60 bytes is padding
    out = run(router, padded)
    assert isinstance(out, Forward) and len(out.data) == 60 and out.data[50:] == padded[50:]


def test_10_bad_checksum(router: RefRouter) -> None:
    """5.2.2 (2): the header checksum must be correct."""
    good = frame()
    bad = bytearray(good)
    bad[25] ^= 0x01
    assert run(router, bytes(bad)) == Drop("bad_checksum")


# ---- 11: options ----------------------------------------------------------------------


def test_11_ip_options(router: RefRouter) -> None:
    """4.2.2.1, 5.2.3: options are processed by the control plane, before the
    local-delivery decision (a source route can change it), and before TTL checks."""
    ra = b"\x94\x04\x00\x00"
    assert run(router, frame(options=ra)) == Except("ip_options")
    assert run(router, frame("10.0.0.1", options=ra)) == Except("ip_options")
    assert run(router, frame(ttl=1, options=ra)) == Except("ip_options")


# ---- 12-18: addresses -----------------------------------------------------------------


def test_12_martian_dst(router: RefRouter) -> None:
    """5.3.7: no forwarding to network 0, 127 or class E (255.255.255.255 excepted)."""
    for dst in ("0.1.2.3", "0.0.0.0", "127.0.0.1", "240.0.0.1", "255.255.255.254"):
        assert run(router, frame(dst)) == Drop("martian_dst"), dst


def test_13_obsolete_broadcast(router: RefRouter) -> None:
    """4.2.3.1: {attached prefix, 0} is an obsolete broadcast, SHOULD be discarded."""
    assert run(router, frame("10.0.2.0")) == Drop("obsolete_broadcast")


def test_14_broadcast(router: RefRouter) -> None:
    """5.3.5.1: limited broadcasts are received, never forwarded; 5.3.5.2 + RFC 2644:
    directed broadcasts to attached subnets are received, not forwarded by default."""
    assert run(router, frame("255.255.255.255", eth_dst=BROADCAST_MAC)) == Except("broadcast")
    assert run(router, frame("10.0.3.255")) == Except("broadcast")
    # DHCP DISCOVER: source 0.0.0.0 is legitimate here (4.2.2.11)
    assert run(router, frame("255.255.255.255", "0.0.0.0", eth_dst=BROADCAST_MAC)) == Except(
        "broadcast")


def test_15_multicast(router: RefRouter) -> None:
    """5.2.3 / 5.2.1.3: multicast goes to the control plane; no multicast forwarding."""
    assert run(router, frame("224.0.0.5", eth_dst=mac("01:00:5e:00:00:05"))) == Except(
        "multicast")
    assert run(router, frame("239.1.2.3")) == Except("multicast")


def test_16_link_broadcast_unicast_ip(router: RefRouter) -> None:
    """5.3.4: a packet received as a link broadcast/multicast with a unicast IP
    destination is not forwarded (SHOULD silently discard), even one to the router."""
    assert run(router, frame(eth_dst=BROADCAST_MAC)) == Drop("link_broadcast_unicast_ip")
    assert run(router, frame(eth_dst=mac("01:00:5e:01:02:03"))) == Drop(
        "link_broadcast_unicast_ip")
    assert run(router, frame("10.0.0.1", eth_dst=BROADCAST_MAC)) == Drop(
        "link_broadcast_unicast_ip")


def test_17_local_delivery(router: RefRouter) -> None:
    """5.2.3: any of the router's addresses, on any port; TTL is not checked (5.3.1)."""
    assert run(router, frame("10.0.0.1")) == Except("local_delivery")
    assert run(router, frame("10.0.3.1"), 0) == Except("local_delivery")
    assert run(router, frame("10.0.0.1", ttl=1)) == Except("local_delivery")
    assert run(router, frame("10.0.0.1", "0.0.0.0")) == Except("local_delivery")


def test_18_martian_src(router: RefRouter) -> None:
    """5.3.7 / 4.2.2.11: no forwarding of packets from network 0 or 127, from a
    multicast, class E or broadcast source."""
    for src in ("0.0.0.0", "0.1.2.3", "127.0.0.1", "224.1.1.1", "240.0.0.1",
                "255.255.255.255", "10.0.1.255"):
        assert run(router, frame(src=src)) == Drop("martian_src"), src


# ---- 19-22: forwarding decisions ------------------------------------------------------


def test_19_no_route(router: RefRouter) -> None:
    """5.2.4, 5.2.7.1: no route -> ICMP unreachable; the lookup precedes the TTL test
    (5.2.1.2 steps 5-7), so TTL 1 without a route is still no_route."""
    assert run(router, frame("2.2.2.2")) == Except("no_route")
    assert run(router, frame("2.2.2.2", ttl=1)) == Except("no_route")


def test_20_ttl_expired(router: RefRouter) -> None:
    """5.3.1: a forwarded packet whose TTL would reach 0 is not forwarded (ICMP time
    exceeded); TTL 2 leaves with TTL 1."""
    assert run(router, frame(ttl=1)) == Except("ttl_expired")
    assert run(router, frame(ttl=0)) == Except("ttl_expired")
    out = run(router, frame(ttl=2))
    assert isinstance(out, Forward) and out.data[22] == 1


def test_21_redirect(config: RouterConfig) -> None:
    """5.2.7.2 / 4.3.3.2: out the interface it came in, source on that subnet -> the
    control plane sends a host redirect (and forwards). Not when redirects are off, and
    not when the source is elsewhere (then it is plain hairpin forwarding)."""
    router = RefRouter(config)
    to_port0 = "1.9.9.9"  # 1.0.0.0/8 -> 10.0.0.2, port 0
    assert router.process(frame(to_port0, "10.0.0.50"), 0) == Except("redirect")
    hairpin = router.process(frame(to_port0, "198.18.0.1"), 0)
    assert isinstance(hairpin, Forward) and hairpin.port == 0
    quiet = RouterConfig.from_dict({**config.to_dict(), "send_redirects": False})
    assert isinstance(RefRouter(quiet).process(frame(to_port0, "10.0.0.50"), 0), Forward)


def test_22_arp_miss(router: RefRouter) -> None:
    """5.2.1.2 step 10: no link address for the next hop -> control plane resolves it.
    44.0.0.0/8's next hop 10.0.2.77 has no ARP entry; nor does on-link host 10.0.4.99."""
    assert run(router, frame("44.1.2.3")) == Except("arp_miss")
    assert run(router, frame("10.0.4.99")) == Except("arp_miss")


# ---- 23: forward ----------------------------------------------------------------------


def test_23_forward_rewrites_exactly_mac_ttl_checksum(router: RefRouter) -> None:
    """5.2.1.2, 5.3.1: TTL - 1, checksum updated, Ethernet rewritten; nothing else."""
    original = frame(ROUTED, length=100)
    out = run(router, original, 0)
    assert isinstance(out, Forward) and out.port == 1
    data = out.data
    assert len(data) == len(original)
    assert data[0:6] == mac("02:00:0a:00:01:02")  # ARP entry of next hop 10.0.1.2
    assert data[6:12] == PORT_MAC[1]
    assert data[22] == original[22] - 1
    assert internet_checksum(data[14:34]) == 0
    changed = [i for i in range(len(data)) if data[i] != original[i]]
    assert set(changed) <= set(range(12)) | {22, 24, 25}


def test_23_forward_longest_match_and_on_link_host(router: RefRouter) -> None:
    assert run(router, frame("1.2.3.200")).port == 4  # the /32 beats /25, /24, /16, /8
    on_link = run(router, frame("10.0.4.10"))  # connected subnet: next hop is dst itself
    assert isinstance(on_link, Forward) and on_link.port == 4
    assert on_link.data[0:6] == mac("02:00:0a:00:04:0a")


@given(
    ttl=st.integers(2, 255), tos=st.integers(0, 255), ident=st.integers(0, 65535),
    flags=st.integers(0, 7), frag=st.integers(0, 8191), pad=st.integers(60, 200),
)
def test_forward_checksum_equals_full_recompute(
    router: RefRouter, ttl: int, tos: int, ident: int, flags: int, frag: int, pad: int
) -> None:
    original = frame(ttl=ttl, tos=tos, identification=ident, flags=flags,
                     fragment_offset=frag, length=pad)
    out = router.process(original, 0)
    assert isinstance(out, Forward)
    header = bytearray(out.data[14:34])
    got = header[10:12]
    header[10:12] = b"\x00\x00"
    assert int.from_bytes(got, "big") == internet_checksum(header)
