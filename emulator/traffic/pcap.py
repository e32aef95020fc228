"""libpcap capture files: a streaming writer and a reader.

Why libpcap and not pcapng: it is the format tcpdump, Wireshark, tshark and every
replay tool read, it is trivially streamable, and its nanosecond variant (magic
0xa1b23c4d) holds the emulator's timestamps without rounding.

- Writer: nanosecond resolution by default, little-endian, link type 1 (Ethernet).
- Reader: both resolutions (0xa1b2c3d4 microseconds, 0xa1b23c4d nanoseconds) in either
  byte order; timestamps always come back as integer nanoseconds.
- Records are `PcapRecord(timestamp_ns, data)`. Frames carry no FCS.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple, Self

from npkit.asm.base.reading import InputError, open_regular

MAGIC_USEC = 0xA1B2C3D4
MAGIC_NSEC = 0xA1B23C4D
PCAPNG_MAGIC = 0x0A0D0D0A


def looks_like_pcap(path: str | Path) -> bool:
    """The file starts with a pcap or pcapng magic number (either byte order)."""
    try:
        with open_regular(path, what="pcap") as f:
            head = f.read(4)
    except (OSError, InputError):
        return False
    if len(head) < 4:
        return False
    return any(struct.unpack(order + "I", head)[0] in (MAGIC_USEC, MAGIC_NSEC, PCAPNG_MAGIC) for order in "<>")
LINKTYPE_ETHERNET = 1
DEFAULT_SNAPLEN = 262144
MAX_RECORD = 262144  # largest captured length a record may claim (tcpdump's largest snaplen)


class PcapError(ValueError):
    """A file that is not a readable libpcap capture, with where it went wrong."""


class PcapRecord(NamedTuple):
    timestamp_ns: int
    data: bytes


class PcapWriter:
    """Streaming libpcap writer; use as a context manager or call close().

    >>> with PcapWriter("out.pcap") as w:          # doctest: +SKIP
    ...     w.write(672, frame_bytes)
    """

    def __init__(
        self,
        dest: str | Path | BinaryIO,
        nanosecond: bool = True,
        snaplen: int = DEFAULT_SNAPLEN,
        linktype: int = LINKTYPE_ETHERNET,
    ) -> None:
        if isinstance(dest, (str, Path)):
            self._file: BinaryIO = open(dest, "wb")  # noqa: SIM115 - closed in close()
            self._owns = True
        else:
            self._file = dest
            self._owns = False
        self.nanosecond = nanosecond
        self.snaplen = snaplen
        self.count = 0
        magic = MAGIC_NSEC if nanosecond else MAGIC_USEC
        self._file.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        self._rec = struct.Struct("<IIII")
        self._div = 1_000_000_000 if nanosecond else 1_000_000

    def write(self, timestamp_ns: int, data: bytes) -> None:
        """Append one record; data longer than snaplen is truncated (orig_len kept)."""
        if timestamp_ns < 0:
            raise ValueError("pcap timestamps cannot be negative")
        sec, frac = divmod(timestamp_ns, 1_000_000_000)
        if not self.nanosecond:
            frac //= 1000
        incl = min(len(data), self.snaplen)
        self._file.write(self._rec.pack(sec, frac, incl, len(data)))
        self._file.write(data[:incl] if incl < len(data) else data)
        self.count += 1

    def write_all(self, records: Iterable[tuple[int, bytes]]) -> None:
        for ts, data in records:
            self.write(ts, data)

    def close(self) -> None:
        if self._owns:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PcapReader:
    """Iterate a libpcap file's records. Attributes after opening: `nanosecond`,
    `snaplen`, `linktype`, and after iteration `truncated` (records whose captured
    length is shorter than their original length)."""

    def __init__(self, source: str | Path | BinaryIO) -> None:
        if isinstance(source, (str, Path)):
            self._file: BinaryIO = open_regular(source, error=PcapError, what="pcap")  # closed in close()
            self._owns = True
            self.name = str(source)
        else:
            self._file = source
            self._owns = False
            self.name = getattr(source, "name", "<stream>")
        head = self._file.read(24)
        if len(head) < 24:
            raise PcapError(f"{self.name}: {len(head)} bytes, too short for a pcap header")
        (magic_le,) = struct.unpack("<I", head[:4])
        for order in ("<", ">"):
            (magic,) = struct.unpack(order + "I", head[:4])
            if magic in (MAGIC_USEC, MAGIC_NSEC):
                self._order = order
                break
        else:
            if magic_le == PCAPNG_MAGIC:
                raise PcapError(
                    f"{self.name}: pcapng is not supported; convert with "
                    "'editcap -F pcap IN OUT' (or 'tshark -F pcap')"
                )
            raise PcapError(f"{self.name}: bad magic 0x{magic_le:08x}, not a pcap file")
        self.nanosecond = magic == MAGIC_NSEC
        _, _, _, _, _, self.snaplen, self.linktype = struct.unpack(self._order + "IHHiIII", head)
        if self.linktype != LINKTYPE_ETHERNET:
            # (a raw-IP or Wi-Fi capture read as Ethernet would be garbage frames)
            raise PcapError(f"{self.name}: link type {self.linktype}, not Ethernet ({LINKTYPE_ETHERNET}): "
                            "the ports carry Ethernet frames")  # fmt: skip
        self._rec = struct.Struct(self._order + "IIII")
        self.truncated = 0

    def __iter__(self) -> Iterator[PcapRecord]:
        scale = 1 if self.nanosecond else 1000
        rec = self._rec
        read = self._file.read
        offset = 24
        while True:
            head = read(16)
            if not head:
                return
            if len(head) < 16:
                raise PcapError(f"{self.name}: record header cut short at byte {offset}")
            sec, frac, incl, orig = rec.unpack(head)
            if incl > MAX_RECORD:  # a corrupt length must not become a 4 GB read
                raise PcapError(f"{self.name}: record at byte {offset} claims {incl} captured bytes "
                                f"(at most {MAX_RECORD}): a corrupt capture")  # fmt: skip
            data = read(incl)
            if len(data) < incl:
                raise PcapError(f"{self.name}: record data cut short at byte {offset + 16}")
            if incl < orig:
                self.truncated += 1
            offset += 16 + incl
            yield PcapRecord(sec * 1_000_000_000 + frac * scale, data)

    def close(self) -> None:
        if self._owns:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_pcap(path: str | Path) -> list[PcapRecord]:
    """All records of a capture, in file order."""
    with PcapReader(path) as reader:
        return list(reader)


def write_pcap(
    path: str | Path, records: Iterable[tuple[int, bytes]], nanosecond: bool = True
) -> int:
    """Write records to a new file; returns how many were written."""
    with PcapWriter(path, nanosecond=nanosecond) as writer:
        writer.write_all(records)
        return writer.count
