"""Receive status words and RBUF elements per the HRM (Table 90), for 64-, 128- and
256-byte elements: a frame is split into mpackets of the element size, the first
marked SOP and the last EOP; byte count (0 = 256), element number (RBUF offset >> 6),
port, and the 16-bit one's complement checksum of the element's bytes; the element's
data is readable with msf[read] at 0x2000 + offset until RBUF_ELEMENT_DONE frees it.

A one-thread program logs every status word and the element's first 8 bytes to SRAM.
"""

from __future__ import annotations

import random

import pytest

from npkit.emulator.binding import Chip
from npkit.emulator.traffic.source import Traffic
from npkit.emulator.traffic_run import TrafficRun

from .conftest import words_of

DUMP = """
#define RX_THREAD_FREELIST_0    0x0030
#define RBUF_ELEMENT_DONE       0x0044
.sig rsw_ready done
.reg freelist_cmd n addr t elem
.reg read $rsw0 $rsw1
.xfer_order $rsw0 $rsw1
.reg read $d0 $d1
.xfer_order $d0 $d1
.reg write $w0 $w1 $w2 $w3
.xfer_order $w0 $w1 $w2 $w3
    br!=ctx[0, idle#]
    immed[freelist_cmd, RX_THREAD_FREELIST_0]
    immed_w1[freelist_cmd, (&$rsw0 | (&rsw_ready << 12))]
    local_csr_rd[ACTIVE_CTX_STS]
    immed[t, 0]
    alu[t, t, and, 0x7f]
    alu_shf[freelist_cmd, freelist_cmd, or, t, <<20]
    immed[n, 0]
loop#:
    msf[fast_wr, --, freelist_cmd, 0]
    ctx_arb[rsw_ready]
    alu_shf[elem, 0x7f, and, $rsw0, >>24]
    alu_shf[addr, --, b, elem, <<6]
    immed[t, 0x2000]
    alu[addr, addr, +, t]
    msf[read, $d0, addr, 0, 2], ctx_swap[done]
    alu[$w0, --, b, $rsw0]
    alu[$w1, --, b, $rsw1]
    alu[$w2, --, b, $d0]
    alu[$w3, --, b, $d1]
    alu_shf[addr, --, b, n, <<4]
    sram[write, $w0, addr, 0, 4], ctx_swap[done]
    alu[n, n, +, 1]
    alu_shf[t, RBUF_ELEMENT_DONE, or, elem, <<16]
    msf[fast_wr, --, t, 0]
    br[loop#]
idle#:
    ctx_arb[kill]
"""
SIZES = [1518, 64, 65, 127, 128, 129, 255, 256, 257, 60, 1514]


def csum(b: bytes) -> int:
    s = sum((b[i] << 8) | b[i + 1] for i in range(0, len(b) - 1, 2))
    if len(b) % 2:
        s += b[-1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


@pytest.mark.parametrize("elem", [64, 128, 256])
def test_status_words_split_frames_into_elements(elem: int) -> None:
    rng = random.Random(elem)
    traffic = Traffic()
    t = 1000
    for size in SIZES:
        traffic.add(t, 2, bytes(rng.randrange(256) for _ in range(size)))
        t += 30_000
    chip = Chip("ixp2800")
    chip.load(0, words_of(DUMP))
    chip.enable(0, 0xFF)
    run = TrafficRun(chip, traffic, rbuf_elem_bytes=elem, rbuf_elems=8192 // elem)
    run.run(t)
    rep = run.report()
    assert rep["totals"]["offered"] == len(SIZES) and not rep["totals"]["dropped"]
    n = 0
    for frame in traffic.frames:
        chunks = [frame[i : i + elem] for i in range(0, len(frame), elem)]
        if len(frame) == 1518:
            assert len(chunks) == {64: 24, 128: 12, 256: 6}[elem]
        for k, chunk in enumerate(chunks):
            rsw0, rsw1, d0, d1 = (chip.read32("sram", 16 * n + 4 * i) for i in range(4))
            n += 1
            assert rsw0 & 0xFF == 2  # port
            assert (rsw0 >> 16) & 0xFF == len(chunk) & 0xFF  # byte count, 0 = 256
            assert (rsw0 >> 15) & 1 == (k == 0)  # SOP
            assert (rsw0 >> 14) & 1 == (k == len(chunks) - 1)  # EOP
            assert (rsw0 >> 8) & 0x3F == 0 and rsw0 >> 31 == 0  # no errors, not null, SPI-4
            offset = ((rsw0 >> 24) & 0x7F) << 6
            assert offset % elem == 0 and offset + elem <= 8192
            assert rsw1 == csum(chunk)
            assert (d0.to_bytes(4, "big") + d1.to_bytes(4, "big"))[: len(chunk)] == chunk[:8]
    assert chip.read32("sram", 16 * n) == 0  # nothing more was logged
    assert run.dev.stats()["rbuf_free"] == 8192 // elem  # every element came back
