"""The pcap reader accepts what libpcap's savefile reader accepts and refuses what it
refuses; records libpcap passes on that a port cannot take as they are (a captured length
over the original length or over the snaplen, no captured bytes) are counted and warned
about (issue 48, "Inputs that exhaust the machine").  libpcap itself (through ctypes)
reads every file here too, and the two must agree."""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from npkit.emulator.traffic.pcap import MAGIC_NSEC, MAGIC_USEC, PcapError, PcapReader, PcapRecord

from ..router.test_ci_policy import MIN64, npk

FRAMES = [bytes([k]) * 60 for k in range(1, 5)]


def _file(order: str = "<", magic: int = MAGIC_NSEC, version: tuple[int, int] = (2, 4), snaplen: int = 65535,
          lengths: list[tuple[int, int]] | None = None, tail: bytes = b"") -> bytes:  # fmt: skip
    """A capture of FRAMES at 1 us apart; `lengths`: each record's (captured, original)
    length fields as written (the data: as many of the frame's bytes as libpcap takes the
    captured length to be, for the version)."""
    out = bytearray(struct.pack(order + "IHHiIII", magic, *version, 0, 0, snaplen, 1))
    for k, f in enumerate(FRAMES):
        incl, orig = lengths[k] if lengths else (len(f), len(f))
        frac = 1000 * k if magic == MAGIC_NSEC else k
        took = orig if version < (2, 3) else min(incl, orig) if version == (2, 3) else incl
        out += struct.pack(order + "IIII", 7, frac, incl, orig) + f[:took]
    return bytes(out) + tail


def _read(data: bytes) -> tuple[list[PcapRecord], PcapReader, list[str]]:
    said: list[str] = []
    r = PcapReader(io.BytesIO(data), warn=said.append)
    recs = list(r)
    r.close()
    return recs, r, said


def _libpcap(path: Path) -> tuple[list[tuple[int, int]], str]:
    """(captured length, original length) of each record libpcap 1.x reads from `path`,
    and its error ("" at a clean end)."""
    name = ctypes.util.find_library("pcap")
    assert name, "libpcap is installed by `make` (Debian package libpcap0.8, a dependency of tshark)"
    lib = ctypes.CDLL(name)

    class Hdr(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long), ("caplen", ctypes.c_uint32),
                    ("len", ctypes.c_uint32)]  # fmt: skip

    lib.pcap_open_offline.restype = ctypes.c_void_p
    lib.pcap_open_offline.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.pcap_next_ex.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(Hdr)), ctypes.POINTER(ctypes.c_void_p)]
    lib.pcap_geterr.restype = ctypes.c_char_p
    lib.pcap_geterr.argtypes = [ctypes.c_void_p]
    lib.pcap_close.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(512)
    p = lib.pcap_open_offline(str(path).encode(), err)
    if not p:
        return [], err.value.decode()
    got, msg = [], ""
    while True:
        h, d = ctypes.POINTER(Hdr)(), ctypes.c_void_p()
        r = lib.pcap_next_ex(p, ctypes.byref(h), ctypes.byref(d))
        if r != 1:
            msg = "" if r == -2 else lib.pcap_geterr(p).decode()
            break
        got.append((h.contents.caplen, h.contents.len))
    lib.pcap_close(p)
    return got, msg


@pytest.mark.parametrize("magic", [MAGIC_USEC, MAGIC_NSEC], ids=["usec", "nsec"])
@pytest.mark.parametrize("order", ["<", ">"], ids=["little", "big"])
def test_both_byte_orders_and_resolutions_read_alike(tmp_path: Path, order: str, magic: int) -> None:
    recs, r, said = _read(_file(order, magic))
    assert [x.data for x in recs] == FRAMES and said == []
    assert [x.timestamp_ns for x in recs] == [7_000_000_000 + 1000 * k for k in range(4)]
    assert r.nanosecond == (magic == MAGIC_NSEC)
    (tmp_path / "a.pcap").write_bytes(_file(order, magic))
    assert _libpcap(tmp_path / "a.pcap") == ([(60, 60)] * 4, "")


@pytest.mark.parametrize("version", [(1, 0), (2, 5), (3, 0)])
def test_versions_libpcap_refuses_are_refused(tmp_path: Path, version: tuple[int, int]) -> None:
    (tmp_path / "v.pcap").write_bytes(_file(version=version))
    assert _libpcap(tmp_path / "v.pcap")[0] == []  # libpcap does not open it
    with pytest.raises(PcapError, match=rf"v.pcap: byte 4: pcap version {version[0]}\.{version[1]}"):
        PcapReader(tmp_path / "v.pcap")


def test_lengths_the_other_way_round_before_version_2_4(tmp_path: Path) -> None:
    """Before 2.3 every record has (original, captured); in 2.3 those with the captured
    length the greater: libpcap swaps them back."""
    cases = {(2, 2): [(60, 60), (100, 60), (60, 60), (70, 60)], (2, 3): [(60, 60), (90, 60), (60, 60), (60, 60)]}
    for version, lengths in cases.items():
        data = _file(version=version, lengths=lengths)
        recs, _, said = _read(data)
        assert [x.data for x in recs] == FRAMES and said == [], version
        (tmp_path / "s.pcap").write_bytes(data)
        got, msg = _libpcap(tmp_path / "s.pcap")
        assert msg == "" and [c for c, _ in got] == [60] * 4, (version, got)


def test_captured_over_original_length_is_sent_and_warned(tmp_path: Path) -> None:
    data = _file(lengths=[(60, 60), (60, 50), (60, 60), (60, 40)])
    recs, r, said = _read(data)
    assert [x.data for x in recs] == FRAMES and r.over_original == 2
    assert said == ["<stream>: 2 record(s) capture more bytes than their original length (first at byte 100): "
                    "the captured bytes are sent"]  # fmt: skip
    (tmp_path / "o.pcap").write_bytes(data)
    assert _libpcap(tmp_path / "o.pcap") == ([(60, 60), (60, 50), (60, 60), (60, 40)], "")


def test_captured_over_snaplen_is_cut_as_libpcap_cuts_it(tmp_path: Path) -> None:
    data = _file(snaplen=48)
    recs, r, said = _read(data)
    assert [x.data for x in recs] == [f[:48] for f in FRAMES] and r.over_snaplen == 4
    assert len(said) == 1 and "4 record(s) capture more than the file's snaplen of 48 bytes (first at byte 24)" in said[0]
    (tmp_path / "s.pcap").write_bytes(data)
    assert _libpcap(tmp_path / "s.pcap") == ([(48, 60)] * 4, "")


def test_zero_length_records_are_skipped_counted_and_warned(tmp_path: Path) -> None:
    data = _file(lengths=[(60, 60), (0, 60), (0, 0), (60, 60)])
    recs, r, said = _read(data)
    assert [x.data for x in recs] == [FRAMES[0], FRAMES[3]] and r.empty == 2
    assert said == ["<stream>: 2 record(s) of no captured bytes (first at byte 100) skipped: no frame to send"]
    (tmp_path / "z.pcap").write_bytes(data)
    assert _libpcap(tmp_path / "z.pcap") == ([(60, 60), (0, 60), (0, 0), (60, 60)], "")


@pytest.mark.parametrize("tail, where", [(bytes(7), "record header at byte 328 cut short: the file ends after 7 of "
                                          "its 16 bytes"),
                                         (struct.pack("<IIII", 7, 0, 60, 60) + bytes(20),
                                          "record at byte 328 cut short: it claims 60 captured bytes, the file "
                                          "ends after 20")])  # fmt: skip
def test_truncated_records_are_located_errors(tmp_path: Path, tail: bytes, where: str) -> None:
    (tmp_path / "t.pcap").write_bytes(_file(tail=tail))
    got, msg = _libpcap(tmp_path / "t.pcap")
    assert len(got) == 4 and msg.startswith("truncated dump file"), msg
    with pytest.raises(PcapError) as e:
        list(PcapReader(tmp_path / "t.pcap"))
    assert str(e.value) == f"{tmp_path / 't.pcap'}: {where}"


def _capture(tmp_path: Path, records: list[tuple[int, int]]) -> Path:
    """A capture directory of generated frames, one a (time ns, captured bytes kept)
    record; the original length stays the frame's."""
    gen = tmp_path / "gen"
    assert npk("traffic", "gen", MIN64, "-o", gen, "--count", "4")[0] == 0
    frames = [r.data for r in PcapReader(gen / "port0.pcap")]
    out = bytearray(struct.pack("<IHHiIII", MAGIC_NSEC, 2, 4, 0, 0, 65535, 1))
    for f, (t, keep) in zip(frames, records, strict=False):
        out += struct.pack("<IIII", 0, t, keep, len(f)) + f[:keep]
    d = tmp_path / "in"
    d.mkdir()
    (d / "port0.pcap").write_bytes(bytes(out))
    return d


def test_a_run_skips_zero_length_records_and_says_so(tmp_path: Path) -> None:
    """The MSF was handed a frame of no bytes: the run ended in "the MSF refused the
    packets", naming neither file nor record."""
    inp = _capture(tmp_path, [(1000, 60), (5000, 0), (9000, 60)])
    elf = tmp_path / "router.elf"
    assert npk("link", "pipelined", "-o", elf)[0] == 0
    # a process of its own: the capture may be read in a forked child (readahead), whose
    # warning goes to the process's standard error
    cmd = [sys.executable, "-c", "from npkit.toolchain.cli import main; main()", "run", str(elf), "--traffic",
           str(inp), "--duration-ms", "0.05", "--json"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    s = json.loads(res.stdout)
    code = res.returncode
    assert code == 0 and s["totals"]["offered"] == 2 and s["verdict"]["ok"], (code, s["totals"], s["verdict"])
    err = res.stderr
    assert f"warning: {inp / 'port0.pcap'}: 1 record(s) of no captured bytes (first at byte 100) skipped" in err, err
