"""The MSF device (emulator/src/units/msf_dev.c) as Python sees it: configuration and
the bulk calls that hand packets in and take transmitted frames out.  Model and register
map: the "MSF device" section of emulator/include/npk_emu.h and
examples/passthrough/README.md."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

from .binding import Chip

DROP_NAMES = {2: "oversize_frame", 32: "rbuf_full", 33: "no_rx_thread", 37: "tbuf_underrun"}
PORT_FIELDS = ["rx_offered", "rx_received", "rx_bytes", "rx_mpackets", "rx_drop_rbuf_full",
               "rx_drop_no_rx_thread", "tx_elements", "tx_frames", "tx_bytes", "tx_drop_underrun",
               "tx_orphans", "rx_pending", "rx_drop_oversize"]  # fmt: skip


@dataclass
class Drained:
    """Departed frames: output port, departure ns (first wire byte), length, aborted
    (nonzero), and the frames back to back."""

    port: array[int]
    t: array[int]
    len: array[int]
    aborted: bytearray
    data: bytearray


class MsfError(ValueError):
    """Bad MSF configuration or traffic that the device cannot take."""


def msf_config(chip: Chip, **overrides: int) -> dict[str, int]:
    """The chip config's `msf:` section (defaults filled in by its schema), then overrides,
    checked by the same schema."""
    from npkit.asm.base.cache import checked

    given = {**(chip.config.get("msf") or {}), **overrides}
    return checked("msf-config/1", given, lambda: _checked_msf(given))


def _checked_msf(given: dict[str, Any]) -> dict[str, int]:
    """msf_config without the cache: the schema's defaults (config_schema.py), then `given`."""
    # the schema (and pydantic) only when the cache has no result for these settings
    from npkit.asm.base.schema import validate

    from .config_schema import MsfConfig

    cfg = {**MsfConfig().model_dump(), **given}
    return validate(MsfConfig, cfg, "msf config", error=MsfError).model_dump()


class MsfDevice:
    """The C MSF device attached to `chip` (replaces any other MSF plug-in)."""

    def __init__(self, chip: Chip, **overrides: int) -> None:
        self.chip = chip
        self.ffi, self.lib = chip.ffi, chip.lib
        self.cfg = msf_config(chip, **overrides)
        c = self.ffi.new("npk_msf_cfg *")
        for k, v in self.cfg.items():
            setattr(c, k, v)
        self._dev = self.lib.npk_msf_create(chip._chip, c)
        if self._dev == self.ffi.NULL:
            raise MsfError(f"the emulator rejected the MSF config {self.cfg}")
        chip._msf_keep = self  # keeps the device alive as long as the chip uses it

    @property
    def ports(self) -> int:
        return self.cfg["ports"]

    def close(self) -> None:
        """Detach the device from its chip and free it (the chip gets the loopback stub)."""
        if self._dev != self.ffi.NULL:
            chip_alive = getattr(self.chip, "_chip", self.ffi.NULL) != self.ffi.NULL
            (self.lib.npk_msf_destroy if chip_alive else self.lib.npk_msf_release)(self._dev)
            self._dev = self.ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def set_wire(self, port: int, preamble: int, fcs: int, ifg: int) -> None:
        if self.lib.npk_msf_port_wire(self._dev, port, preamble, fcs, ifg) < 0:
            raise MsfError(
                f"bad wire model for port {port}: preamble {preamble} fcs {fcs} ifg {ifg}"
            )

    def push(
        self, times: array[int], ports: array[int], ids: array[int], lens: array[int], data: bytes
    ) -> None:
        n = len(times)
        if not n:
            return
        ffi = self.ffi
        rc = self.lib.npk_msf_rx_add(
            self._dev, n, ffi.from_buffer("uint64_t[]", times), ffi.from_buffer("uint8_t[]", ports),
            ffi.from_buffer("uint32_t[]", ids), ffi.from_buffer("uint16_t[]", lens),
            ffi.from_buffer("uint8_t[]", data or b"\0"),
        )  # fmt: skip
        if rc < 0:
            raise MsfError("the MSF refused the packets (port out of range or frame too long)")

    def drain_raw(self) -> Drained | None:
        """Frames that have departed, as arrays (None: none)."""
        ffi = self.ffi
        nb = ffi.new("size_t *")
        n = self.lib.npk_msf_tx_ready(self._dev, nb)
        if not n:
            return None
        d = Drained(array("B", bytes(n)), array("Q", bytes(8 * n)), array("H", bytes(2 * n)), bytearray(n),
                    bytearray(max(1, nb[0])))  # fmt: skip
        got = self.lib.npk_msf_tx_drain(self._dev, ffi.from_buffer("uint8_t[]", d.port), ffi.from_buffer("uint64_t[]", d.t),
                                        ffi.from_buffer("uint16_t[]", d.len), ffi.from_buffer("uint8_t[]", d.aborted),
                                        ffi.from_buffer("uint8_t[]", d.data), n, nb[0])  # fmt: skip
        if got < n:
            for col in (d.port, d.t, d.len, d.aborted):
                del col[got:]
        return d

    def drain(self) -> list[tuple[int, int, bytes, bool]]:
        """Frames that have departed: (port, departure ns, bytes, aborted)."""
        d = self.drain_raw()
        if d is None:
            return []
        out = []
        off = 0
        blob = bytes(d.data)
        for p, t, k, ab in zip(d.port, d.t, d.len, d.aborted, strict=True):
            out.append((p, t, blob[off : off + k], bool(ab)))
            off += k
        return out

    def drops(self) -> list[tuple[int, int, int]]:
        """(packet id, port, reason code) of MSF drops since the last call."""
        n = self.lib.npk_msf_drops(self._dev, self.ffi.NULL, self.ffi.NULL, self.ffi.NULL, 0)
        if not n:
            return []
        ids = self.ffi.new("uint32_t[]", n)
        ports = self.ffi.new("uint8_t[]", n)
        reasons = self.ffi.new("uint8_t[]", n)
        got = self.lib.npk_msf_drops(self._dev, ids, ports, reasons, n)
        return [(ids[i], ports[i], reasons[i]) for i in range(got)]

    def port_stats(self, port: int) -> dict[str, int]:
        st = self.ffi.new("npk_msf_port_stats *")
        if self.lib.npk_msf_port_stats_get(self._dev, port, st) < 0:
            raise MsfError(f"no port {port}")
        return {k: int(getattr(st, k)) for k in PORT_FIELDS}

    def stats(self) -> dict[str, int]:
        st = self.ffi.new("npk_msf_stats *")
        self.lib.npk_msf_stats_get(self._dev, st)
        keys = ["rsw_pushed", "freelist_overflow", "bad_element_done", "bad_tcw", "rbuf_free",
                "rbuf_full_list", "rbuf_held", "freelist_len", "tbuf_valid", "tx_sequence"]  # fmt: skip
        return {k: int(getattr(st, k)) for k in keys}


