"""Linux's IXP2400 receive and transmit microcode on the emulator, on any microengine.

Linux 2.6 shipped an IXP2400 network driver (drivers/net/ixp2000) with two microengine
programs, ixp2400_rx.uc and ixp2400_tx.uc, and their Intel-assembled images
ixp2400_rx.ucode and ixp2400_tx.ucode.  They are GPL and not part of npkit: give the
directory that holds them (a Linux 2.6 tree's drivers/net/ixp2000, or copies) to
`run_every_me` / `npk bench fidelity` through NPK_LINUX_IXP2000.  A `.ucode` file (the
Intel build) runs as it is; a `.uc` file is assembled with npk asm.

The driver's host side (ixpdev.c) is played by examples/linux_ixp2400/host.uc on a third
ME: it hands the receive code its buffers on scratch ring 0, takes filled descriptors
off ring 1 and gives each packet to the transmit code on ring 2 with the channel it
came in on, and recycles the buffers the transmit code returns on ring 3.  A packet
that comes out of the MSF on its input port, byte for byte, was received by one image
and transmitted by the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.traffic.source import Traffic
from npkit.emulator.traffic_run import TrafficRun

from .paths import ROOT

HOST_UC = ROOT / "examples" / "linux_ixp2400" / "host.uc"
RX_DESC = 0x1000      # SRAM: receive descriptor i at RX_DESC + 16 i
TX_OFF = 0x1000       # its transmit descriptor TX_OFF bytes above
NDESC = 128         # receive buffers (64 are too few to ride out a line-rate burst of 64-byte frames)
BUF_BASE = 0x200000   # DRAM buffer i at BUF_BASE + BUF_SIZE i
BUF_SIZE = 2048
RING_WORDS = 256
RINGS = {0: 0x0000, 1: 0x0400, 2: 0x0800, 3: 0x0C00}  # scratch base of rings 0..3 (as ixpdev.c)


class LinuxRxTxError(ValueError):
    """The Linux images are missing or unreadable."""


@dataclass(frozen=True)
class Images:
    rx: tuple[int, ...]
    tx: tuple[int, ...]
    source: str          # where they came from (file names)


def _read_program(path: Path) -> tuple[int, ...]:
    from npkit.asm.assembler import assemble
    from npkit.asm.disasm import read_words
    from npkit.asm.errors import AsmError, Diagnostics

    try:
        if path.suffix == ".uc":
            return tuple(assemble(path, diags=Diagnostics()).program.words)
        return tuple(read_words(path)[0].words)
    except AsmError as e:
        raise LinuxRxTxError(f"{path}: {e}") from None


def find_images(directory: str | os.PathLike[str], prefer: str = ".ucode") -> Images:
    """ixp2400_rx / ixp2400_tx from `directory`: the Intel-built `.ucode` (prefer=".ucode")
    or the sources assembled by npkit (prefer=".uc")."""
    d = Path(directory)
    found = []
    for name in ("ixp2400_rx", "ixp2400_tx"):
        cands = [d / f"{name}{prefer}", d / f"{name}{'.uc' if prefer == '.ucode' else '.ucode'}"]
        path = next((p for p in cands if p.is_file()), None)
        if path is None:
            raise LinuxRxTxError(f"{d}: no {name}.ucode or {name}.uc (Linux drivers/net/ixp2000)")
        found.append(path)
    return Images(_read_program(found[0]), _read_program(found[1]), ", ".join(p.name for p in found))


def host_program() -> tuple[int, ...]:
    from npkit.asm.assembler import assemble
    from npkit.asm.errors import Diagnostics

    defines = {"RX_DESC": hex(RX_DESC), "TX_OFF": hex(TX_OFF), "NDESC": str(NDESC)}
    return tuple(assemble(HOST_UC, defines=defines, diags=Diagnostics()).program.words)


def _setup(chip: Chip) -> None:
    for ring, base in RINGS.items():
        chip.scratch_ring(ring, base, RING_WORDS)
    for i in range(NDESC):
        chip.write32("sram", RX_DESC + 16 * i, BUF_BASE + BUF_SIZE * i)
        chip.write32("sram", RX_DESC + 16 * i + 4, BUF_SIZE)


def run_pair(images: Images, config: str, rx_me: int, tx_me: int, host_me: int, traffic: Traffic,
             run_ns: int) -> dict[str, Any]:  # fmt: skip
    """Receive on `rx_me`, transmit on `tx_me` (flat indices), host on `host_me`; offer
    `traffic` and run `run_ns` of emulated time.  Returns the run's totals and balance."""
    chip = Chip(config)
    _setup(chip)
    for me, words, mask in ((rx_me, images.rx, 0xFF), (tx_me, images.tx, 0xFF), (host_me, host_program(), 0x01)):
        chip.load(me, list(words), 8)
        chip.enable(me, mask)
    run = TrafficRun(chip, traffic)
    run.run(run_ns)
    rep = run.report()
    t = rep["totals"]
    return {"rx": chip.me_name(rx_me), "tx": chip.me_name(tx_me), "host": chip.me_name(host_me),
            "offered": t["offered"], "forwarded": t["forwarded"], "in_flight": t["in_flight"],
            "dropped": sum(t["dropped"].values()), "balanced": rep["balanced"],
            "halted": [chip.me_name(m) for m in (rx_me, tx_me, host_me)
                       if chip.me_status(m)["state"] not in ("running", "idle")]}  # fmt: skip


def run_every_me(images: Images, config: str, traffic: Traffic, run_ns: int) -> list[dict[str, Any]]:
    """Receive on every ME in turn (transmit on the next, host on the one after), so that
    every ME runs the receive image once and the transmit image once."""
    n = int(Chip(config).num_me)
    return [run_pair(images, config, i, (i + 1) % n, (i + 2) % n, traffic, run_ns) for i in range(n)]


def run_tx_every_me(images: Images, config: str, traffic: Traffic, run_ns: int) -> list[dict[str, Any]]:
    """Transmit on every ME but the first two, receiving on ME 0x00 (host on 0x01): the
    transmit image on its own, wherever the receive image cannot run."""
    n = int(Chip(config).num_me)
    return [run_pair(images, config, 0, i, 1, traffic, run_ns) for i in range(2, n)]
