"""libpcap files: round trips, both resolutions and byte orders, and tshark agreeing."""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from npkit.emulator.traffic.pcap import (
    MAGIC_NSEC,
    MAGIC_USEC,
    PcapError,
    PcapReader,
    PcapRecord,
    PcapWriter,
    read_pcap,
    write_pcap,
)

RECORDS = [
    (0, bytes(range(60))),
    (672, b"\xaa" * 60),
    (1_000_000_123, b"\x01" * 1514),
    (3_600_000_000_001, b"\x02" * 78),
]


def test_nanosecond_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "a.pcap"
    assert write_pcap(path, RECORDS) == 4
    assert path.read_bytes()[:4] == struct.pack("<I", MAGIC_NSEC)
    assert read_pcap(path) == [PcapRecord(t, d) for t, d in RECORDS]


def test_microsecond_write_truncates_to_microseconds(tmp_path: Path) -> None:
    path = tmp_path / "us.pcap"
    write_pcap(path, RECORDS, nanosecond=False)
    with PcapReader(path) as reader:
        assert not reader.nanosecond
        got = list(reader)
    assert [r.timestamp_ns for r in got] == [0, 0, 1_000_000_000, 3_600_000_000_000]
    assert [r.data for r in got] == [d for _, d in RECORDS]


def test_reads_big_endian_microsecond_file() -> None:
    # as written by a big-endian host: magic a1b2c3d4 in network order
    head = struct.pack(">IHHiIII", MAGIC_USEC, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack(">IIII", 5, 250, 3, 3) + b"abc"
    reader = PcapReader(io.BytesIO(head + rec))
    assert reader.linktype == 1 and reader.snaplen == 65535
    assert list(reader) == [PcapRecord(5_000_250_000, b"abc")]


def test_streaming_writer_to_file_object() -> None:
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        w.write(10, b"x" * 70)
        w.write(20, b"y" * 70)
    assert w.count == 2
    buf.seek(0)
    assert [r.timestamp_ns for r in PcapReader(buf)] == [10, 20]


def test_snaplen_truncation_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "snap.pcap"
    with PcapWriter(path, snaplen=64) as w:
        w.write(0, b"z" * 100)
    with PcapReader(path) as r:
        recs = list(r)
        assert r.truncated == 1
    assert recs[0].data == b"z" * 64


def test_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00" * 24)
    with pytest.raises(PcapError, match="bad magic"):
        read_pcap(bad)
    ng = tmp_path / "ng.pcap"
    ng.write_bytes(struct.pack("<I", 0x0A0D0D0A) + b"\x00" * 28)
    with pytest.raises(PcapError, match="pcapng"):
        read_pcap(ng)
    cut = tmp_path / "cut.pcap"
    write_pcap(cut, RECORDS[:2])
    cut.write_bytes(cut.read_bytes()[:-10])
    with pytest.raises(PcapError, match="cut short"):
        read_pcap(cut)
    with pytest.raises(ValueError):
        PcapWriter(io.BytesIO()).write(-1, b"")
    raw = io.BytesIO()
    PcapWriter(raw, linktype=101).write(0, b"\x45" + b"\x00" * 19)   # raw IP, not Ethernet
    with pytest.raises(PcapError, match="link type 101, not Ethernet"):
        PcapReader(io.BytesIO(raw.getvalue()))


def _tshark(path: Path) -> list[tuple[Decimal, int]]:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is installed by `make` (Debian package tshark)"
    out = subprocess.run(
        [tshark, "-r", str(path), "-T", "fields", "-e", "frame.time_epoch", "-e", "frame.len"],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return [(Decimal(t), int(n)) for t, n in rows]


@pytest.mark.parametrize("nanosecond", [True, False])
def test_tshark_reads_our_files(tmp_path: Path, nanosecond: bool) -> None:
    path = tmp_path / "t.pcap"
    write_pcap(path, RECORDS, nanosecond=nanosecond)
    rows = _tshark(path)
    ours = read_pcap(path)
    assert len(rows) == len(ours) == len(RECORDS)
    for (epoch, length), rec in zip(rows, ours, strict=True):
        assert epoch * 1_000_000_000 == rec.timestamp_ns
        assert length == len(rec.data)


def test_tshark_agrees_with_generated_traffic(tmp_path: Path) -> None:
    """Generated pcaps: same count, timestamps and lengths in tshark, and Wireshark's own
    checksum validation agrees (bad only where the generator meant it)."""
    from npkit.emulator.traffic.generator import write_traffic
    from npkit.emulator.traffic.spec import spec_from_dict

    from .conftest import EXAMPLES, ROUTER_YAML

    spec = spec_from_dict({"seed": 4, "router": str(ROUTER_YAML), "count": 60, "defaults": {
        "size": {"uniform": [78, 600]}, "protocol": {"udp": 1, "tcp": 1, "tunnel": 1},
        "mix": {"options": 0.1, "bad_checksum": 0.1}}}, EXAMPLES)
    write_traffic(spec, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    kinds = [manifest["kinds"][k] for k, p in zip(manifest["packets"]["kind"],
                                                   manifest["packets"]["port"], strict=True)
             if p == 0]
    path = tmp_path / "port0.pcap"
    out = subprocess.run(
        [shutil.which("tshark") or "tshark", "-r", str(path), "-o", "ip.check_checksum:TRUE",
         "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-T", "fields",
         "-e", "frame.time_epoch", "-e", "frame.len", "-e", "ip.checksum.status",
         "-e", "udp.checksum.status", "-e", "tcp.checksum.status"],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    ours = read_pcap(path)
    assert len(rows) == len(ours) == len(kinds) == 60
    for (epoch, length, ip_ok, udp_ok, tcp_ok), rec, kind in zip(rows, ours, kinds, strict=True):
        assert Decimal(epoch) * 1_000_000_000 == rec.timestamp_ns
        assert int(length) == len(rec.data)
        assert ip_ok.split(",")[0] == ("0" if kind == "bad_checksum" else "1")  # 1 = good
        assert (udp_ok or tcp_ok).split(",")[0] == "1"
