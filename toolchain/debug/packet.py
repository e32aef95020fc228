"""Finding and decoding the packet a thread works on.

Convention (docs/debugging.md, "Which packet"):

* `packet EXPR` -- EXPR (registers by `.reg` or physical name, numbers, arithmetic) is
  the DRAM byte address of the packet buffer, e.g. `packet buf`, `packet 0x100000`,
  `packet (pw & 0xffff) << 11`.
* `packet` alone -- the image's metadata may name the expression
  (`image.meta["debug"]["packet"]`, a string, written by the linker for the router);
  otherwise the first `.reg` of the current thread's program named `pkt_addr`, `pkt`,
  `buf_addr` or `buf` is the address.
* The frame may start a few bytes into the buffer (the router keeps 2 bytes of pad so the
  IP header is longword aligned): `pad N` says so; without it the decoder takes offset 0,
  or 2 when only offset 2 has a known EtherType at bytes 12-13.
* The length is `len N`, else the IPv4 total length + Ethernet header (at most 1514),
  else 64 bytes.
"""

from __future__ import annotations

from npkit.emulator.traffic.packet import (
    ETHERTYPE_ARP,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    ETHERTYPE_VLAN,
    internet_checksum,
    ip_str,
    mac_str,
    parse_frame,
)

CONVENTION_REGS = ("pkt_addr", "pkt", "buf_addr", "buf")
TAG = b"NPK1"  # the traffic generator's payload tag: TAG + 32-bit packet id (big-endian)
_KNOWN_TYPES = (ETHERTYPE_IPV4, ETHERTYPE_ARP, ETHERTYPE_VLAN, ETHERTYPE_IPV6)


def guess_pad(head: bytes) -> int:
    def etype(off: int) -> int:
        return int.from_bytes(head[off + 12 : off + 14], "big") if len(head) >= off + 14 else -1

    if etype(0) not in _KNOWN_TYPES and etype(2) in _KNOWN_TYPES:
        return 2
    return 0


def frame_length(head: bytes) -> int:
    """Bytes of the frame per its headers (IPv4 total length), 64 when unknown."""
    try:
        p = parse_frame(head)
    except Exception:  # noqa: BLE001 - shorter than an Ethernet header
        return 64
    if p.ip is not None and p.ip.total_length:
        return max(60, min(1514, p.l3_offset + p.ip.total_length))
    return 64


def hexdump(data: bytes, base: int = 0, width: int = 16) -> list[str]:
    out = []
    for i in range(0, len(data), width):
        chunk = data[i : i + width]
        hx = " ".join(f"{b:02x}" for b in chunk)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"  {base + i:08x}  {hx:<{width * 3 - 1}}  {asc}")
    return out


def decode(frame: bytes) -> list[str]:
    """Readable lines for an Ethernet frame (IPv4 fields, checksum verdict, L4 ports)."""
    if len(frame) < 14:
        return [f"  {len(frame)} bytes: too short for an Ethernet header"]
    p = parse_frame(frame)
    e = p.eth
    lines = [f"  ethernet  dst {mac_str(e.dst)}  src {mac_str(e.src)}  type 0x{e.ethertype:04x}"
             + (f"  vlan {e.vlan.vid}" if e.vlan else "")]  # fmt: skip
    if p.arp is not None:
        a = p.arp
        lines.append(f"  arp       op {a.op}  sender {mac_str(a.sender_mac)} {ip_str(a.sender_ip)}"
                     f"  target {mac_str(a.target_mac)} {ip_str(a.target_ip)}")  # fmt: skip
    if p.ip is not None:
        h = p.ip
        hdr = frame[p.l3_offset : p.l3_offset + max((h.ihl or 5) * 4, 20)]
        ok = internet_checksum(hdr) == 0
        lines.append(f"  ipv4      {ip_str(h.src)} -> {ip_str(h.dst)}  ttl {h.ttl}  proto {h.protocol}"
                     f"  len {h.total_length}  ihl {h.ihl}  id 0x{h.identification:04x}"
                     f"  checksum 0x{h.checksum or 0:04x} ({'ok' if ok else 'BAD'})")  # fmt: skip
        if h.options:
            lines.append(f"  options   {h.options.hex()}")
    if p.udp is not None:
        lines.append(f"  udp       {p.udp.sport} -> {p.udp.dport}  len {p.udp.length}")
    if p.tcp is not None:
        lines.append(f"  tcp       {p.tcp.sport} -> {p.tcp.dport}  flags 0x{p.tcp.flags:02x}")
    if p.icmp is not None:
        lines.append(f"  icmp      type {p.icmp.type} code {p.icmp.code}")
    if p.error:
        lines.append(f"  error     {p.error}")
    return lines


def traffic_id(frame: bytes) -> int | None:
    """The generator's packet id: b"NPK1" + 32-bit id at the start of the payload."""
    i = frame.find(b"NPK1")
    if i < 0 or i + 8 > len(frame):
        return None
    return int.from_bytes(frame[i + 4 : i + 8], "big")
