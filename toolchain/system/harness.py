"""A linked router on a chip, driven from the host through stand-in blocks (tests, benchmarks)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from npkit.emulator.loader import load_image

from .layout import load_layout
from .link import link
from .sysmap import HOST_EXC_BASE, HOST_SINK_BASE, HOST_SRC_BASE, SYS


class Harness:
    """A linked system on a Chip, with the host stand-ins of `_host_blocks`.

    `packet(frame, in_port)` takes a buffer off the free list, writes the frame into
    DRAM at offset PKT_PAD and its descriptor (README §2), and returns its packet word;
    `send(w0, w1)` queues a message on the input ring of the layout's first block;
    `outputs()` / `exceptions()` read what the sinks logged; `drops()` reads the drop
    counters; `frame(pw)` reads a buffer's frame back."""

    def __init__(self, layout: str | Path | dict[str, Any], params: dict[str, Any] | None = None,
                 routes: str | Path | None = None, router_config: str | Path | None = None,
                 chip_config: str = "ixp2800", tx_confirm: bool = True, app: Any = None) -> None:  # fmt: skip
        """`app`: the application (npkit.toolchain.system.app.App) the layout is one of, or
        whose folders a layout file's blocks come from (its reasons and tables linked in)."""
        from npkit.emulator.binding import Chip

        params = dict(params or {})
        lay_params = {} if isinstance(layout, dict) else load_layout(layout, None, app.source_dirs if app else None).params
        if "io" in lay_params:
            params.setdefault("io", "host")  # rx/tx stand-ins instead of the MSF blocks
        if "control" in lay_params:
            params.setdefault("control", "host")  # the exception ring logged for the tests
        self.image = link(
            layout,
            params,
            routes,
            router_config,
            chip_config,
            tx_confirm=tx_confirm,
            app=app,
        )
        self.chip = Chip(chip_config)
        load_image(self.chip, self.image)
        self.sent = 0
        self.lengths: dict[int, int] = {}

    # memory helpers
    def _r(self, addr: int, n: int = 1) -> list[int]:
        return list(struct.unpack(f">{n}I", self.chip.mem_read("sram", addr, 4 * n)))

    def _w(self, addr: int, *words: int) -> None:
        self.chip.mem_write("sram", addr, struct.pack(f">{len(words)}I", *words))

    def alloc(self) -> int:
        """Pop a buffer index off the free list (as rx will)."""
        head, tail, count, _ = self._r(SYS.freelist_q, 4)
        if not count or not head:
            raise RuntimeError("free list empty")
        nxt = self._r(head)[0]
        self._w(SYS.freelist_q, nxt if count > 1 else 0, tail if count > 1 else 0, count - 1)
        return (head - SYS.desc_base) >> SYS.desc_shift

    def free_count(self) -> int:
        return self._r(SYS.freelist_q + 8)[0]

    def packet(self, frame: bytes, in_port: int) -> int:
        i = self.alloc()
        self.chip.mem_write(
            "dram", SYS.buf_addr(i), bytes(SYS.pkt_pad) + frame + bytes(-(len(frame) + 2) % 8)
        )
        self._w(
            SYS.desc_addr(i) + 4,
            SYS.buf_addr(i),
            len(frame) << 16 | SYS.pkt_pad,
            in_port << 24,
            0,
            0,
        )
        self.lengths[i] = len(frame)
        return 0x8000_0000 | (in_port & 7) << 28 | i

    def send(self, w0: int, w1: int) -> None:
        self._w(HOST_SRC_BASE + 16 + 8 * self.sent, w0, w1)
        self.sent += 1
        self._w(HOST_SRC_BASE, self.sent)

    def inject(self, frame: bytes, in_port: int) -> int:
        """A received frame as rx hands it on: (packet word, length)."""
        pw = self.packet(frame, in_port)
        self.send(pw, len(frame))
        return pw

    def run(self, cycles: int) -> None:
        self.chip.run(cycles)

    def _log(self, base: int) -> list[tuple[int, int]]:
        n = self._r(base)[0]
        if not n:
            return []
        w = self._r(base + 16, 2 * n)
        return [(w[2 * k], w[2 * k + 1]) for k in range(n)]

    def outputs(self) -> list[tuple[int, int]]:
        return self._log(HOST_SINK_BASE)

    def exceptions(self) -> list[tuple[int, int]]:
        return self._log(HOST_EXC_BASE)

    def frame(self, pw: int, length: int | None = None) -> bytes:
        i = pw & 0xFFFF
        n = length if length is not None else self._r(SYS.desc_addr(i) + 8)[0] >> 16
        return self.chip.mem_read("dram", SYS.buf_addr(i) + SYS.pkt_pad, n)

    def counter(self, addr: int) -> int:
        return self.chip.read32("scratch", addr)

    def drops(self) -> dict[int, int]:
        raw = self.chip.mem_read("scratch", SYS.stat_drop_base, 1024)
        return {c: v for c, v in enumerate(struct.unpack(">256I", raw)) if v}

    def exception_counts(self) -> dict[int, int]:
        raw = self.chip.mem_read("scratch", SYS.stat_exc_base, 1024)
        return {c: v for c, v in enumerate(struct.unpack(">256I", raw)) if v}
