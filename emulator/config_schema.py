"""Chip config (emulator/configs/*.yaml): the schema of the file `Chip(config)` reads.

Ranges are those the C core accepts (emulator/src/chip.c cfg_valid, msf_dev.c cfg_ok)
narrowed to values that describe a chip: a control store of 17 words or a scratchpad of 7
bytes is refused here with the field's line, not run.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from npkit.asm.base.schema import U32, U64, at, irange

MIN_RING_BYTES = 128 * 4  # the smallest scratch ring: 128 longwords (HRM p.232)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UnitConfig(_Strict):
    """Timing of one shared unit (SRAM, DRAM, scratch, hash, CAP, MSF, PCI)."""

    channels: irange(1, 16) = Field(description="independent channels (SRAM and DRAM: 1..4)")
    cmd_overhead: U32 = Field(description="cycles from issue into the controller")
    read_latency: U32 = Field(description="cycles from service to the read data's signal")
    write_latency: U32 = Field(description="cycles from service to the write's signal")
    unit_bytes: irange(1, 256, power_of_two=True) = Field(description="bytes a channel moves per unit of time")
    cycles_per_unit: U32 = Field(description="cycles per unit_bytes (bandwidth)")
    queue_depth: irange(0, 1 << 20) = Field(description="commands a channel holds; 0 = unbounded")


class Units(_Strict):
    """The shared units, each with its timing."""

    sram: UnitConfig = Field(description="QDR SRAM controllers (channels 1..4)")
    dram: UnitConfig = Field(description="DRAM controllers (channels 1..4)")
    scratch: UnitConfig = Field(description="scratchpad (SHaC)")
    hash: UnitConfig = Field(description="hash unit (SHaC)")
    cap: UnitConfig = Field(description="CAP CSR access")
    msf: UnitConfig = Field(description="media switch fabric CSR/RBUF/TBUF access")
    pci: UnitConfig = Field(description="PCI target")

    @model_validator(mode="after")
    def _memory_channels(self) -> Units:
        for name in ("sram", "dram"):
            if getattr(self, name).channels > 4:
                raise at((name, "channels"), f"must be in 1..4, got {getattr(self, name).channels}")
        return self


class MsfConfig(_Strict):
    """The media switch fabric device (emulator/msf_device.py); every key optional."""

    ports: irange(1, 16) = Field(5, description="receive and transmit ports")
    rate_bps: irange(1000, 8_000_000_000_000) = Field(1_000_000_000, description="line rate of every port, bits/s")
    rbuf_elem_bytes: Literal[64, 128, 256] = Field(64, description="RBUF element size (HRM p.249)")
    rbuf_elems: irange(1, 128) = Field(128, description="RBUF elements (rbuf_elem_bytes x rbuf_elems <= 8192)")
    tbuf_elem_bytes: Literal[64, 128, 256] = Field(64, description="TBUF element size")
    tbuf_elems: irange(1, 128) = Field(128, description="TBUF elements (tbuf_elem_bytes x tbuf_elems <= 8192)")
    preamble_bytes: irange(0, 64) = Field(8, description="preamble + SFD on the wire")
    fcs_bytes: irange(0, 64) = Field(4, description="frame check sequence")
    ifg_bytes: irange(0, 1024) = Field(12, description="inter-frame gap")
    tx_fifo_bytes: irange(64, 1 << 24) = Field(4096, description="PHY transmit FIFO per port")
    spi_bps: irange(1000, 8_000_000_000_000) = Field(12_800_000_000, description="SPI-4 bus rate, bits/s")
    freelist_depth: irange(1, 1024) = Field(128, description="RX_THREAD_FREELIST entries")
    tx_start_bytes: irange(0, 1 << 24) = Field(0, description="0: store and forward; N: cut through after N bytes")

    @model_validator(mode="after")
    def _buffers(self) -> MsfConfig:
        for side in ("rbuf", "tbuf"):
            size, n = getattr(self, f"{side}_elem_bytes"), getattr(self, f"{side}_elems")
            if size * n > 8192:
                raise at(f"{side}_elems", f"{n} elements of {size} bytes exceed the {side.upper()}'s 8192 bytes")
        return self


class XScaleConfig(_Strict):
    """The XScale core (npkit.xscale): its clock against the ME clock, lockstep quantum."""

    clock_mhz: irange(1, 100_000) = Field(700, description="XScale clock, MHz")
    quantum: irange(1, 1_000_000_000) = Field(20000, description="XScale instructions between synchronisations with the MEs")
    gpe_link_latency_ns: irange(0, 1_000_000_000) = Field(1000, description="gpe placement: one access over the host link, ns")
    gpe_reply_timeout_s: irange(1, 86_400) = Field(
        60, description="gpe placement: host seconds to wait for the process's next request (no cycle budget can end it)")


TCAM_WINDOW_BYTES = 2 << 20  # the TCAM's address window (docs/tcam.md)


class TcamConfig(_Strict):
    """A ternary CAM on an SRAM channel (docs/tcam.md; emulator/include/npk_emu.h npk_tcam_cfg)."""

    channel: irange(0, 3) = Field(description="SRAM channel it sits on (< units.sram.channels)")
    window: irange(0, (1 << 26) - TCAM_WINDOW_BYTES, multiple_of=TCAM_WINDOW_BYTES) = Field(
        description="byte offset of its 2 MB window in the channel (2 MB aligned, inside sram_channel_bytes)")
    entries: irange(1, 8192) = Field(description="entries (128 bytes each in the window)")
    key_bits: Literal[72, 144, 288] = Field(description="key width in bits")
    result_bits: Literal[32, 64] = Field(64, description="result width in bits")
    lookup_latency: irange(0, 1 << 20) = Field(description="cycles a lookup adds to the SRAM read latency")
    cycles_per_lookup: irange(1, 1 << 20) = Field(description="cycles a lookup keeps the channel busy")


class ChipConfig(_Strict):
    """A chip model: sizes, timing, seeds (emulator/configs/ixp2800.yaml is the reference)."""

    name: Annotated[str, Field(min_length=1, max_length=31, pattern=r"^[A-Za-z0-9_.+-]+$")] = Field(
        "chip", description="model name shown in statistics (letters, digits, _ . + -)")
    clock_mhz: irange(1, 100_000) = Field(description="ME clock, MHz")
    num_me: irange(1, 16) = Field(description="microengines")
    me_per_cluster: Literal[0, 1, 2, 4, 8] = Field(
        0, description="MEs per cluster (IXP2800: 8, IXP2400: 4); 0: half of num_me rounded up to a power of two")
    ctx_per_me: Literal[8] = Field(description="hardware contexts per ME (the core models 8)")
    ustore_words: irange(256, 8192, power_of_two=True) = Field(
        description="control store, instructions (IXP2400: 4096, IXP2800: 8192)")
    lm_words: irange(16, 1024, multiple_of=16) = Field(description="local memory, 32-bit words")
    cam_entries: irange(1, 16) = Field(description="CAM entries per ME")
    nn_full_threshold: irange(1, 128) = Field(description="next-neighbour ring occupancy that asserts NN_FULL")
    branch_taken_penalty: U32 = Field(description="cycles lost on a taken branch without defer slots")
    ctx_swap_cost: U32 = Field(description="cycles a context swap costs")
    csr_write_to_use: U32 = Field(description="cycles before a local_csr_wr takes effect")
    timestamp_shift: irange(0, 16) = Field(description="TIMESTAMP counts cycles >> this")
    sram_channel_bytes: irange(4096, 1 << 26, power_of_two=True) = Field(
        description="SRAM bytes per channel (HRM table 71: up to 64 MB)")
    dram_bytes: irange(1 << 16, 1 << 30, power_of_two=True) = Field(
        description="DRAM bytes modelled (the emulator allocates and clears them)")
    dram_interleave: irange(16, 1 << 20, power_of_two=True) = Field(description="bytes per DRAM channel stripe")
    scratch_bytes: irange(4, 1 << 20, multiple_of=4) = Field(
        description="scratchpad bytes (at least 512 per scratch ring)")
    scratch_rings: irange(0, 16) = Field(description="scratch rings")
    history_capacity: irange(0, 1 << 22) = Field(description="history events kept (24 bytes each)")
    seed: U64 = Field(description="seed of PSEUDO_RANDOM_NUMBER and anything random in the chip")
    hash_mult48: irange(0, (1 << 48) - 1) = Field(description="48-bit hash multiplier")
    hash_mult64: U64 = Field(description="64-bit hash multiplier")
    hash_mult128_lo: U64 = Field(description="128-bit hash multiplier, low half")
    hash_mult128_hi: U64 = Field(description="128-bit hash multiplier, high half")
    units: Units = Field(description="shared units, each with its timing")
    msf: MsfConfig = Field(default_factory=MsfConfig, description="media switch fabric device")
    xscale: XScaleConfig = Field(default_factory=XScaleConfig, description="the XScale core")
    tcam: TcamConfig | None = Field(None, description="a TCAM on an SRAM channel (docs/tcam.md); absent: none")

    @model_validator(mode="after")
    def _cross(self) -> ChipConfig:
        if self.me_per_cluster and self.num_me > 2 * self.me_per_cluster:
            raise at("me_per_cluster", f"{self.num_me} MEs do not fit two clusters of {self.me_per_cluster}")
        if self.tcam is not None:
            if self.tcam.channel >= self.units.sram.channels:
                raise at(("tcam", "channel"), f"{self.tcam.channel}: the chip has SRAM channels 0..{self.units.sram.channels - 1}")
            if self.tcam.window + TCAM_WINDOW_BYTES > self.sram_channel_bytes:
                raise at(("tcam", "window"), f"0x{self.tcam.window:x}: the 2 MB window must lie inside the channel's "
                                             f"{self.sram_channel_bytes:#x} bytes (sram_channel_bytes)")  # fmt: skip
        need = self.scratch_rings * MIN_RING_BYTES
        if self.scratch_bytes < need:
            raise at("scratch_bytes", f"{self.scratch_bytes} bytes cannot hold {self.scratch_rings} scratch "
                                      f"rings of at least {MIN_RING_BYTES} bytes ({need} needed)")  # fmt: skip
        return self

