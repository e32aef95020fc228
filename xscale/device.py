"""/dev/ixp2800: the IXP2800 chip as its XScale sees it (physical windows in
xscale/include/npk_xscale.h, the one description both sides share).

Memory windows (DRAM, SRAM channels, scratch) map the emulator's own backing
store into the Unicorn core (mem_map_ptr: no copies; words stay big-endian as
the microengines store them).  CSR windows are MMIO callbacks onto the chip:
CAP CSRs, the scratch-ring get/put interface, the atomic alias windows and the
interrupt status.  Interrupts: microcode's cap[fast_wr, 0, XSCALE_INT_A|B] set
bits that `sample()` collects; a read of the device returns the interrupt count
(UIO style) once it changed, poll() reports POLLIN then.
"""

from __future__ import annotations

import errno as E
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from unicorn import unicorn_const as U

from .linux import POLLIN, POLLOUT, File

if TYPE_CHECKING:
    from npkit.emulator.binding import Chip

# physical bases (npk_xscale.h)
DRAM_BASE = 0x00000000
SRAM_BASE = 0x80000000
SRAM_CH_SHIFT = 28
CAP_BASE, CAP_SIZE = 0xC0000000, 0x10000
MSF_BASE, MSF_SIZE = 0xC8000000, 0x10000
SCRATCH_BASE = 0xCB000000
RING_BASE, RING_SIZE = 0xCB400000, 0x1000
SCR_ATOMIC, SCR_ATOMIC_SIZE = 0xCB800000, 8 << 16
SRAM_ATOMIC, SRAM_ATOMIC_SIZE = 0xE0000000, 8 << 25
INTC_BASE, INTC_SIZE = 0xD6000000, 0x1000
SRAM_QUEUE, SRAM_QUEUE_SIZE = 0xF0000000, 4 << 23
RING_COUNT, RING_FREE, RING_CFG = 0x100, 0x200, 0x300
CAP_INTERTHREAD_SIG = 0x4B30     # mev2.yaml cap_csrs: data [3:0] signal, [6:4] context, [11:7] ME

WINDOWS = ((CAP_BASE, CAP_SIZE, "CAP CSR window"), (MSF_BASE, MSF_SIZE, "MSF CSR window"),
           (RING_BASE, RING_SIZE, "scratch ring window"), (SCR_ATOMIC, SCR_ATOMIC_SIZE, "scratch atomic window"),
           (SRAM_ATOMIC, SRAM_ATOMIC_SIZE, "SRAM atomic window"), (INTC_BASE, INTC_SIZE, "interrupt window"),
           (SRAM_QUEUE, SRAM_QUEUE_SIZE, "SRAM queue window"))  # fmt: skip

OPS = {1: "set", 2: "clr", 3: "incr", 4: "decr", 5: "add", 6: "sub", 7: "swap"}


def apply_atomic(op: int, old: int, value: int) -> int:
    """The gasket's read-modify-write (HRM p.231), on 32-bit words."""
    if op == 1:
        return old | value
    if op == 2:
        return old & ~value & 0xFFFFFFFF
    if op == 3:
        return (old + 1) & 0xFFFFFFFF
    if op == 4:
        return (old - 1) & 0xFFFFFFFF
    if op == 5:
        return (old + value) & 0xFFFFFFFF
    if op == 6:
        return (old - value) & 0xFFFFFFFF
    return value & 0xFFFFFFFF


class DeviceFault(Exception):
    """A CSR-window access the chip refused (an SRAM queue whose element lies outside
    SRAM, a ring configured past scratch ...): a bus error of the program that made it."""


def window_name(phys: int) -> str:
    return next((name for base, size, name in WINDOWS if base <= phys < base + size), "device window")


class DeviceFile(File):
    def __init__(self, dev: Ixp2800Device) -> None:
        self.dev = dev

    def read(self, n: int) -> bytes | int | None:
        if n < 4:
            return -E.EINVAL
        self.dev.sample()
        if self.dev.count == self.dev.seen:
            return None
        self.dev.seen = self.dev.count
        return self.dev.count.to_bytes(4, "little")

    def write(self, data: bytes) -> int:
        return len(data)     # UIO's interrupt enable: always enabled here

    def poll(self) -> int:
        self.dev.sample()
        return POLLOUT | (POLLIN if self.dev.count != self.dev.seen else 0)

    def stat_mode(self) -> tuple[int, int]:
        return 0o20660, 0


class ChipWindows:
    """The CSR side of the device, independent of who accesses it (the Unicorn
    core's MMIO callbacks, or a gpe process's link requests)."""

    def __init__(self, chip: Chip) -> None:
        self.chip = chip
        self.count = 0          # interrupts counted (UIO count)
        self.seen = 0           # count the program last read
        self.raw = [0, 0]       # latched XSCALE_INT_A / _B bits, until cleared by the program
        self.ring_base: dict[int, int] = {}
        self.unmodelled: set[int] = set()
        self.now_cycle: Callable[[], int] = lambda: chip.cycle    # the XScale host: the core's own time
        self.me_mhz = int(chip.config["clock_mhz"])

    def sample(self) -> int:
        """Collect interrupt bits raised by microcode; return the new ones."""
        bits = self.chip.xscale_irq(clear=True)
        if bits:
            self.raw[0] |= bits & 0xFFFF
            self.raw[1] |= bits >> 16
            self.count += bin(bits).count("1")
        return bits

    # -- word access by physical address
    def read(self, phys: int) -> int:
        """The word at `phys` in a CSR window; DeviceFault when the chip refuses the access."""
        with self._fault(phys, "read"):
            return self._read(phys)

    def write(self, phys: int, value: int) -> None:
        """Write `value` at `phys` in a CSR window; DeviceFault when the chip refuses the access."""
        with self._fault(phys, "write"):
            self._write(phys, value)

    @contextmanager
    def _fault(self, phys: int, what: str) -> Iterator[None]:
        from npkit.emulator.binding import EmulatorError

        try:
            yield
        except EmulatorError as e:
            raise DeviceFault(f"{window_name(phys)}: {what} at {phys:#010x}: {e}") from None

    def _read(self, phys: int) -> int:
        if CAP_BASE <= phys < CAP_BASE + CAP_SIZE:
            return self.chip.cap_csr((phys - CAP_BASE) & ~3)
        if RING_BASE <= phys < RING_BASE + RING_SIZE:
            return self._ring_read(phys - RING_BASE)
        if INTC_BASE <= phys < INTC_BASE + INTC_SIZE:
            off = phys - INTC_BASE
            if off in (0x10, 0x14):
                ns = self.now_cycle() * 1000 // self.me_mhz
                return ns & 0xFFFFFFFF if off == 0x10 else ns >> 32
            self.sample()
            return self.raw[0] if off == 0 else self.raw[1] if off == 4 else self.count if off == 8 else 0
        if SRAM_QUEUE <= phys < SRAM_QUEUE + SRAM_QUEUE_SIZE:
            return self._queue(phys, None)
        at = self._atomic(phys)
        if at is not None:
            space, addr, _op = at
            return self.chip.read32(space, addr)
        self._unmodelled(phys)
        return 0

    def _write(self, phys: int, value: int) -> None:
        value &= 0xFFFFFFFF
        if CAP_BASE <= phys < CAP_BASE + CAP_SIZE:
            csr = (phys - CAP_BASE) & ~3
            self.chip.lib.npk_cap_csr_write(self.chip._chip, csr, value)
            number, ctx, sig = (value >> 7) & 0x1F, (value >> 4) & 7, value & 0xF
            me = self.chip.lib.npk_me_index(self.chip._chip, number)  # the field is the hardware ME number
            if csr == CAP_INTERTHREAD_SIG and sig and me >= 0:
                self.chip.set_signal(me, sig, ctx)       # wake a microengine thread, as microcode can
            return
        if RING_BASE <= phys < RING_BASE + RING_SIZE:
            self._ring_write(phys - RING_BASE, value)
            return
        if INTC_BASE <= phys < INTC_BASE + INTC_SIZE:
            off = phys - INTC_BASE
            if off in (0, 4):
                self.raw[off // 4] &= ~value
            return
        if SRAM_QUEUE <= phys < SRAM_QUEUE + SRAM_QUEUE_SIZE:
            self._queue(phys, value)
            return
        at = self._atomic(phys)
        if at is not None:
            space, addr, op = at
            self.chip.write32(space, addr, apply_atomic(op, self.chip.read32(space, addr), value))
            return
        self._unmodelled(phys)

    def swap(self, phys: int, value: int) -> int:
        old = self.read(phys)
        self.write(phys, value)
        return old

    def _queue(self, phys: int, element: int | None) -> int:
        """An SRAM queue-array dequeue (element None) or enqueue, in one step, as the
        SRAM unit does sram[dequeue] / sram[enqueue] (head, tail, count; linked through
        each element's first longword)."""
        off = phys - SRAM_QUEUE
        q = ((off >> 23) << 30) | (off & 0x7FFFFC)
        chip = self.chip
        head, tail, count = (chip.read32("sram", q + 4 * i) for i in range(3))
        if element is None:
            if not count or not head:
                return 0
            nxt = chip.read32("sram", head)
            chip.write32("sram", q, 0 if count == 1 else nxt)
            if count == 1:
                chip.write32("sram", q + 4, 0)
            chip.write32("sram", q + 8, count - 1)
            return head
        element &= ~3
        chip.write32("sram", element, 0)
        chip.write32("sram", q if count == 0 else tail, element)
        chip.write32("sram", q + 4, element)
        chip.write32("sram", q + 8, count + 1)
        return 0

    def _unmodelled(self, phys: int) -> None:
        self.unmodelled.add(phys)

    def _atomic(self, phys: int) -> tuple[str, int, int] | None:
        if SCR_ATOMIC <= phys < SCR_ATOMIC + SCR_ATOMIC_SIZE:
            off = phys - SCR_ATOMIC
            return "scratch", off & 0xFFFC, off >> 16
        if SRAM_ATOMIC <= phys < SRAM_ATOMIC + SRAM_ATOMIC_SIZE:
            off = phys - SRAM_ATOMIC
            return "sram", (((off >> 23) & 3) << 30) | (off & 0x7FFFFC), off >> 25
        return None

    def _ring_read(self, off: int) -> int:
        ring = (off & 0xFF) >> 2
        if ring >= int(self.chip.config["scratch_rings"]):
            return 0
        if off < RING_COUNT:
            w = self.chip.scratch_ring_get(ring)
            return 0 if w is None else w
        if off < RING_FREE:
            return self.chip.scratch_ring_count(ring)
        if off < RING_CFG:
            info = self.chip.scratch_ring_info(ring)
            return max(0, info["size"] - info["count"])
        return 0

    def _ring_write(self, off: int, value: int) -> None:
        if off < RING_COUNT:
            ring = off >> 2
            if ring < int(self.chip.config["scratch_rings"]):
                self.chip.scratch_ring_put(ring, value)
            return
        if RING_CFG <= off < RING_CFG + 8 * 16:
            ring, field = divmod(off - RING_CFG, 8)
            if field == 0:
                self.ring_base[ring] = value
            elif field == 4:
                self.chip.scratch_ring(ring, self.ring_base.get(ring, 0), value)


class Ixp2800Device(ChipWindows):
    """The device as the Unicorn XScale core's Linux layer serves it."""

    def __init__(self, chip: Chip, uc: Any, on_fault: Callable[[str], None]) -> None:
        """on_fault(why): a CSR access through a window the chip refused; it must stop the core."""
        super().__init__(chip)
        self.uc = uc
        self.on_fault = on_fault
        self.file = DeviceFile(self)
        self.stores = {name: chip.backing(name) for name in ("sram", "dram", "scratch")}
        self.sram_ch = int(chip.config["sram_channel_bytes"])

    def open(self) -> DeviceFile:
        return self.file

    def _memory(self, phys: int, size: int) -> int | None:
        """Host address of the backing store behind [phys, phys+size), or None."""
        def fit(name: str, off: int) -> int | None:
            ptr, _size, mapped, _fd = self.stores[name]
            return ptr + off if off + size <= mapped else None

        if SCRATCH_BASE <= phys < SCRATCH_BASE + 0x100000:
            return fit("scratch", phys - SCRATCH_BASE)
        if SRAM_BASE <= phys < CAP_BASE:
            ch, off = (phys - SRAM_BASE) >> SRAM_CH_SHIFT, (phys - SRAM_BASE) & ((1 << SRAM_CH_SHIFT) - 1)
            if ch >= int(self.chip.config["units"]["sram"]["channels"]) or off + size > self.sram_ch:
                return None
            return fit("sram", ch * self.sram_ch + off)
        if phys < SRAM_BASE:
            return fit("dram", phys - DRAM_BASE)
        return None

    def mmap(self, va: int, size: int, phys: int) -> int:
        host = self._memory(phys, size)
        if host is not None:
            self.uc.mem_map_ptr(va, size, U.UC_PROT_READ | U.UC_PROT_WRITE, host)
            return 0
        if not any(b <= phys and phys + size <= b + n for b, n, _name in WINDOWS):
            return -E.EINVAL

        # an exception must not escape into Unicorn's ctypes callback: a refused access
        # stops the core as a bus error of the program (on_fault)
        def rd(_uc: Any, off: int, _size: int, _user: Any) -> int:
            try:
                return self.read(phys + (off & ~3))
            except DeviceFault as e:
                self.on_fault(str(e))
                return 0

        def wr(_uc: Any, off: int, _size: int, value: int, _user: Any) -> None:
            try:
                self.write(phys + (off & ~3), value)
            except DeviceFault as e:
                self.on_fault(str(e))

        self.uc.mmio_map(va, size, rd, None, wr, None)
        return 0

    def munmap(self, va: int, size: int) -> None:
        self.uc.mem_unmap(va, size)
