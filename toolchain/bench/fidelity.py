"""Fidelity figures (`npk bench fidelity`): what the emulator's timing produces, to hold
against the chip configs' sources (emulator/configs/*.yaml say per figure what is cited
and what is an estimate).

fidelity.<chip>.<unit>_<read|write>_cycles / _ns
    unloaded round trip of one command from one thread: from the cycle the ME issues it
    to the cycle its completion signal reaches the thread (1 longword; DRAM 8 bytes;
    hash one 48-bit key; CAP a chip CSR; MSF a CSR through the device stub).
fidelity.linux_rxtx.<chip>.rx / .tx
    only with NPK_LINUX_IXP2000=DIR (a Linux 2.6 drivers/net/ixp2000 with the IXP2400
    microcode, not part of npkit): per ME, "forwarded/offered" with the Intel-built receive
    image on that ME and the transmit image on the next (.rx), or the receive image on
    ME 0x00 and the transmit image on that ME (.tx); npkit.emulator.linux_rxtx.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from npkit.asm.isa import encode
from npkit.emulator.binding import Chip
from npkit.toolchain.bench import benchmark

CHIPS = ("ixp2800", "ixp2400")
# unit, direction, the command (a1 = address 0x100; signal s1; DRAM signals in pairs)
COMMANDS = [
    ("sram", "read", "sram[read, $0, a1, 0, 1], ctx_swap[s1]"),
    ("sram", "write", "sram[write, $0, a1, 0, 1], ctx_swap[s1]"),
    ("dram", "read", "dram[read, $$0, a1, 0, 1], ctx_swap[s2]"),
    ("dram", "write", "dram[write, $$0, a1, 0, 1], ctx_swap[s2]"),
    ("scratch", "read", "scratch[read, $0, a1, 0, 1], ctx_swap[s1]"),
    ("scratch", "write", "scratch[write, $0, a1, 0, 1], ctx_swap[s1]"),
    ("hash", "read", "hash_48[$0, 1], ctx_swap[s1]"),
    ("cap", "read", "cap[read, $0, csr_0010, 1], ctx_swap[s1]"),
    ("cap", "write", "cap[write, $0, csr_0010, 1], ctx_swap[s1]"),
    ("msf", "read", "msf[read, $0, a1, 0, 1], ctx_swap[s1]"),
    ("msf", "write", "msf[write, $0, a1, 0, 1], ctx_swap[s1]"),
    ("pci", "read", "pci[read, $0, a1, 0, 1], ctx_swap[s1]"),
]


def round_trip(config: str, command: str) -> int:
    """Cycles from the issue of `command` by ME 0 ctx 0 to its completion signal."""
    chip = Chip(config)
    chip.load(0, [encode("immed[a1, 0x100]"), encode(command), encode("halt")])
    chip.enable(0, 0x01)
    chip.history_enable(1)
    chip.run(100_000)
    events = chip.history()
    issue = next(e.cycle for e in events if e.kind == "mem_issue")
    signal = next(e.cycle for e in events if e.kind == "signal" and e.cycle >= issue)
    return signal - issue


def latencies(config: str) -> dict[str, Any]:
    clock = float(Chip(config).config["clock_mhz"])
    out: dict[str, Any] = {}
    for unit, rw, cmd in COMMANDS:
        cycles = round_trip(config, cmd)
        out[f"fidelity.{config}.{unit}_{rw}_cycles"] = cycles
        out[f"fidelity.{config}.{unit}_{rw}_ns"] = round(cycles * 1000 / clock, 1)
    return out


def linux_rxtx(directory: str, quick: bool) -> dict[str, Any]:
    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.linux_rxtx import find_images, run_every_me, run_tx_every_me

    spec = Path(__file__).resolve().parents[2] / "examples" / "passthrough" / "min64.yaml"
    traffic = load_traffic_source(spec, duration_ns=10_000 if quick else 50_000)
    images = find_images(directory)
    out: dict[str, Any] = {}
    for config in CHIPS:
        run_ns = 200_000 if quick else 400_000
        res = run_every_me(images, config, traffic, run_ns)
        out[f"fidelity.linux_rxtx.{config}.rx"] = {r["rx"]: f"{r['forwarded']}/{r['offered']}" for r in res}
        res = run_tx_every_me(images, config, traffic, run_ns)
        out[f"fidelity.linux_rxtx.{config}.tx"] = {r["tx"]: f"{r['forwarded']}/{r['offered']}" for r in res}
    return out


@benchmark("fidelity")
def bench_fidelity(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for config in CHIPS:
        out.update(latencies(config))
    directory = os.environ.get("NPK_LINUX_IXP2000")
    if directory:
        out.update(linux_rxtx(directory, quick))
    return out
