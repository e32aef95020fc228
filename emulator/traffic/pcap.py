"""libpcap capture files: a streaming writer and a reader.

Why libpcap and not pcapng: it is the format tcpdump, Wireshark, tshark and every
replay tool read, it is trivially streamable, and its nanosecond variant (magic
0xa1b23c4d) holds the emulator's timestamps without rounding.

- Writer: nanosecond resolution by default, little-endian, link type 1 (Ethernet).
- Reader: both resolutions (0xa1b2c3d4 microseconds, 0xa1b23c4d nanoseconds) in either
  byte order; timestamps always come back as integer nanoseconds.
- Records are `PcapRecord(timestamp_ns, data)`. Frames carry no FCS.

What the reader accepts is what libpcap's savefile reader (sf-pcap.c: pcap_check_header,
pcap_next_packet; checked against libpcap 1.10.3) accepts, and it refuses what that
refuses, with the byte where it went wrong:

- versions 2.0 to 2.4 only (older: "archaic"; newer: unsupported).  Files before 2.3
  have the captured and original lengths of each record the other way round, and 2.3
  files may have them so: libpcap swaps them (always before 2.3; in 2.3 when the
  captured length is the greater), and so does this reader.
- a record that claims more than MAX_RECORD captured bytes is an error (libpcap:
  "invalid packet capture length"); one cut short by the end of the file too
  ("truncated dump file").

Three kinds of record libpcap passes on without a word are not frames a port can be
given as they are; each is counted and warned about when the file is closed (`warn`,
one line a kind, with the first record's byte offset):

- a captured length over the file's snapshot length: libpcap keeps the first snaplen
  bytes and skips the rest (a file written with a wrong snaplen); so does this reader;
- a captured length over the original length (a frame longer than it was on the wire):
  its captured bytes are the frame;
- a record of no captured bytes: no frame, so it is skipped (not a packet of the run).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable, Iterator
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


def warn_stderr(message: str) -> None:
    """How a reader warns by default: a line on standard error."""
    print(f"warning: {message}", file=sys.stderr)


def _lengths_swapped(major: int, minor: int) -> int:
    """libpcap's rule for a file of version major.minor: 1 captured and original lengths
    swapped, 0 maybe (swapped where the captured one is the greater), -1 never."""
    if major == 2 and minor < 3:
        return 1
    return 0 if (major, minor) == (2, 3) else -1


class PcapReader:
    """Iterate a libpcap file's records (module docstring: what it accepts). Attributes
    after opening: `nanosecond`, `snaplen`, `linktype`, `version`; as it iterates
    `truncated` (records whose captured length is shorter than their original length,
    as a capture with a snaplen makes them), and the records warned about: `over_snaplen`,
    `over_original`, `empty` (skipped).  `warn` gets the warnings (default: stderr)."""

    def __init__(self, source: str | Path | BinaryIO, warn: Callable[[str], None] | None = None) -> None:
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
        major, minor = struct.unpack(self._order + "HH", head[4:8])
        self.version = (major, minor)
        if major < 2:
            raise PcapError(f"{self.name}: byte 4: pcap version {major}.{minor}, an archaic format libpcap does not read")
        if major != 2 or minor > 4:
            raise PcapError(f"{self.name}: byte 4: pcap version {major}.{minor}; libpcap reads 2.0 to 2.4")
        self._swapped = _lengths_swapped(major, minor)
        self._snapshot = self.snaplen if 0 < self.snaplen <= MAX_RECORD else MAX_RECORD  # (pcap_adjust_snapshot)
        self._rec = struct.Struct(self._order + "IIII")
        self.truncated = 0
        self.over_snaplen = self.over_original = self.empty = 0
        self._first: dict[str, int] = {}  # kind -> byte offset of its first record
        self.warn = warn_stderr if warn is None else warn
        self._warned = False

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
                raise PcapError(f"{self.name}: record header at byte {offset} cut short: the file ends after "
                                f"{len(head)} of its 16 bytes")  # fmt: skip
            sec, frac, incl, orig = rec.unpack(head)
            if self._swapped > 0 or (self._swapped == 0 and incl > orig):
                incl, orig = orig, incl
            if incl > MAX_RECORD:  # a corrupt length must not become a 4 GB read
                raise PcapError(f"{self.name}: record at byte {offset} claims {incl} captured bytes "
                                f"(at most {MAX_RECORD}): a corrupt capture")  # fmt: skip
            data = read(incl)
            if len(data) < incl:
                raise PcapError(f"{self.name}: record at byte {offset} cut short: it claims {incl} captured "
                                f"bytes, the file ends after {len(data)}")  # fmt: skip
            at, offset = offset, offset + 16 + incl
            if incl > self._snapshot or incl > orig or not incl:
                data = self._odd(at, data, orig)
                if not data:
                    continue
            elif incl < orig:
                self.truncated += 1
            yield PcapRecord(sec * 1_000_000_000 + frac * scale, data)

    def _odd(self, at: int, data: bytes, orig: int) -> bytes:
        """A record libpcap passes on but a port cannot take as it is (module docstring):
        counted, and its data as this reader passes it on (b"": skipped)."""
        if not data:
            kind, self.empty = "empty", self.empty + 1
        elif len(data) > self._snapshot:
            kind, self.over_snaplen = "over_snaplen", self.over_snaplen + 1
            data = data[: self._snapshot]
        else:
            kind, self.over_original = "over_original", self.over_original + 1
        self._first.setdefault(kind, at)
        return data

    def warnings(self) -> list[str]:
        """One line a kind of record warned about (module docstring), with counts."""
        first = self._first
        out = []
        if self.over_snaplen:
            out.append(f"{self.name}: {self.over_snaplen} record(s) capture more than the file's snaplen of "
                       f"{self.snaplen} bytes (first at byte {first['over_snaplen']}): only the first "
                       f"{self._snapshot} bytes of each are sent, as libpcap reads them")  # fmt: skip
        if self.over_original:
            out.append(f"{self.name}: {self.over_original} record(s) capture more bytes than their original "
                       f"length (first at byte {first['over_original']}): the captured bytes are sent")  # fmt: skip
        if self.empty:
            out.append(f"{self.name}: {self.empty} record(s) of no captured bytes (first at byte "
                       f"{first['empty']}) skipped: no frame to send")  # fmt: skip
        return out

    def close(self) -> None:
        if not self._warned:
            self._warned = True
            for line in self.warnings():
                self.warn(line)
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
