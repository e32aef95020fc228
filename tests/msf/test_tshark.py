"""tshark (Wireshark's reader) reads the captures and agrees on count, lengths and
nanosecond timestamps with what the emulator transmitted."""

from __future__ import annotations

import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

from .conftest import passthrough_run, spec_traffic


def test_tshark_reads_the_captures(tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is installed by `make` (Debian package tshark)"
    traffic = spec_traffic("seed003.yaml", 100_000)
    run = passthrough_run(traffic, 120_000)
    rep = run.write_captures(tmp_path)
    assert rep["balanced"]
    for port in range(5):
        out = subprocess.run(
            [tshark, "-r", str(tmp_path / f"port{port}.pcap"), "-T", "fields", "-e", "frame.len",
             "-e", "frame.time_epoch", "-e", "ip.proto"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        rows = [line.split("\t") for line in out.stdout.splitlines()]
        ours = run.out[port]
        assert len(rows) == len(ours) > 0
        assert [int(r[0]) for r in rows] == [len(d) for _, d in ours]
        assert [int(Decimal(r[1]) * 1_000_000_000) for r in rows] == [t for t, _ in ours]
        assert {r[2] for r in rows} == {"17"}  # outer UDP of the tunnel packets
