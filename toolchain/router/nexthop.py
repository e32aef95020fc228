"""Next-hop table entries: 4 longwords (16 bytes) each, one sram[read, ..., 4].

    LW0  bits 31..24 flags, bits 23..16 output port, bits 15..0 reserved (0)
    LW1  new Ethernet header bytes 0..3   (destination MAC bytes 0..3);
         in an ARP_MISS entry: the next-hop IPv4 address to resolve (0 = the destination)
    LW2  new Ethernet header bytes 4..7   (destination MAC bytes 4..5, source MAC bytes 0..1)
    LW3  new Ethernet header bytes 8..11  (source MAC bytes 2..5)

LW1..LW3 are the first 12 bytes of the outgoing frame in wire order, packed big-endian
(byte n of the frame in bits 31..24 of its longword when n % 4 == 0): the header-format
block copies them over the frame unchanged.  See microcode/lookup/LAYOUT.md §5.
"""

from __future__ import annotations

from dataclasses import dataclass

# flags (LW0 bits 31..24). Any of EXCEPTION_FLAGS set: hand the packet to the XScale.
NO_ROUTE = 0x80  # no route (entry 0)
LOCAL = 0x40  # destination is one of the router's own addresses
ARP_MISS = 0x20  # next hop has no ARP entry; MAC fields are zero
BROADCAST = 0x10  # directed broadcast of an attached subnet, or 255.255.255.255
DIRECT = 0x08  # informational: connected route (next hop = the destination itself)
EXCEPTION_FLAGS = NO_ROUTE | LOCAL | ARP_MISS | BROADCAST

FLAG_NAMES = {
    NO_ROUTE: "no_route",
    LOCAL: "local",
    ARP_MISS: "arp_miss",
    BROADCAST: "broadcast",
    DIRECT: "direct",
}

ZERO_MAC = bytes(6)


@dataclass(frozen=True)
class NextHop:
    port: int
    dst_mac: bytes = ZERO_MAC
    src_mac: bytes = ZERO_MAC
    flags: int = 0
    next_hop: int = 0  # ARP_MISS entries only: IPv4 the XScale must resolve (0 = destination)

    def __post_init__(self) -> None:
        if self.next_hop and not self.flags & ARP_MISS:
            raise ValueError("next_hop is stored only in ARP_MISS entries")
        if self.flags & ARP_MISS and self.dst_mac != ZERO_MAC:
            raise ValueError("an ARP_MISS entry has no destination MAC")
        if not 0 <= self.port <= 0xFF:
            raise ValueError(f"port {self.port} outside 0..255")
        if len(self.dst_mac) != 6 or len(self.src_mac) != 6:
            raise ValueError("MAC addresses are 6 bytes")
        if not 0 <= self.flags <= 0xFF:
            raise ValueError(f"flags {self.flags:#x} outside 0..0xff")

    @property
    def is_exception(self) -> bool:
        return bool(self.flags & EXCEPTION_FLAGS)

    def flag_names(self) -> list[str]:
        return [name for bit, name in FLAG_NAMES.items() if self.flags & bit]

    def encode(self) -> tuple[int, int, int, int]:
        """Four longwords (uint32) as stored in SRAM."""
        hdr = self.dst_mac + self.src_mac
        return (
            (self.flags << 24) | (self.port << 16),
            self.next_hop if self.flags & ARP_MISS else int.from_bytes(hdr[0:4], "big"),
            int.from_bytes(hdr[4:8], "big"),
            int.from_bytes(hdr[8:12], "big"),
        )

    @classmethod
    def decode(cls, words: tuple[int, int, int, int] | list[int]) -> NextHop:
        if len(words) != 4:
            raise ValueError("a next-hop entry is 4 longwords")
        if words[0] & 0xFFFF:
            raise ValueError(f"next-hop LW0 reserved bits set: {words[0]:#010x}")
        flags = (words[0] >> 24) & 0xFF
        miss = bool(flags & ARP_MISS)
        hdr = b"".join(int(w).to_bytes(4, "big") for w in words[1:])
        if miss:
            hdr = bytes(4) + hdr[4:]
        return cls(
            port=(words[0] >> 16) & 0xFF,
            dst_mac=hdr[0:6],
            src_mac=hdr[6:12],
            flags=flags,
            next_hop=words[1] if miss else 0,
        )


NO_ROUTE_ENTRY = NextHop(port=0, flags=NO_ROUTE)


class NextHopTable:
    """Deduplicating next-hop table; index 0 is always the NO_ROUTE entry."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: list[NextHop] = [NO_ROUTE_ENTRY]
        self._index: dict[NextHop, int] = {NO_ROUTE_ENTRY: 0}

    def intern(self, entry: NextHop) -> int:
        """Index of `entry`, appending it if new."""
        index = self._index.get(entry)
        if index is None:
            if len(self.entries) >= self.capacity:
                raise ValueError(f"next-hop table full ({self.capacity} entries)")
            index = len(self.entries)
            self.entries.append(entry)
            self._index[entry] = index
        return index

    def __len__(self) -> int:
        return len(self.entries)

    def writes(self, nh_base: int) -> list[tuple[int, int]]:
        """(address, value) for every entry; write these before any trie entry uses them."""
        out = []
        for i, entry in enumerate(self.entries):
            for j, word in enumerate(entry.encode()):
                out.append((nh_base + 16 * i + 4 * j, word))
        return out
