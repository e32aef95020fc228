"""Write the seed corpus of the core fuzzer (emulator/tests/fuzz/corpus/seed-*)
from real assembled programs: the examples (hello, ring ping/pong on two MEs,
the debugger's ttl example, the MSF passthrough with packets) and the linked
router, pipelined and parallel, with a few packets of examples/traffic; and
the regression inputs of the defects issue 10 reported (crash-issue10-*).
The input format is described at the top of fuzz_core.c.

    .venv/bin/python emulator/tests/fuzz/make_seeds.py [CORPUS_DIR]

Inputs the fuzzer itself found (crash-fuzz-*, copied from its artifacts) are
left alone here."""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npkit.asm.assembler import assemble
from npkit.emulator.binding import MEM_SPACES, parse_reg

ROOT = Path(__file__).resolve().parents[3]
CORPUS = Path(__file__).resolve().parent / "corpus"
EXAMPLES = ROOT / "examples"
MAX_WORDS = 1024  # per ME (fuzz_core.c MAX_WORDS)
MEM_BUDGET = 4096  # bytes of initial memory kept per example program
ROUTER_BUFS = 128  # packet buffers on the router's free list (the real system has 4096)

# record tags (fuzz_core.c)
WORDS, REG, MEM, RING, SIG, RUN, ENABLE, RX = 0, 1, 2, 4, 5, 6, 11, 10
LOCKSTEP_TOO = 32  # header flag: run again in lock-step and compare


@dataclass
class Seed:
    """Header fields (fuzz_core.c) and the records that follow."""

    flags: int = 0
    sram: int = 3 | (3 << 2)  # 4 channels of 1 MB
    memory: int = 3  # 2 MB DRAM, 16 KB scratch, 640 words of local memory
    ustore: int = 3 << 2  # 8192 words, 16 CAM entries
    num_me: int = 15  # 16 MEs
    ctx_mask: int = 0xFF
    cycles: int = 255  # final run: 64 * 256 cycles
    timing: int = 4 | (3 << 5)  # timestamp shift 4, csr write-to-use 3
    msf: tuple[int, ...] = (4, 128, 128, 128, 0)  # 5 ports, 64 B elements, 128 + 128, freelist 128
    body: bytearray = field(default_factory=bytearray)

    def header(self) -> bytes:
        h = bytes([self.flags, self.sram, self.memory, self.ustore, self.num_me, self.ctx_mask, self.cycles,
                   self.timing, *self.msf])  # fmt: skip
        return h.ljust(16, b"\0")

    def words(self, me: int, words: list[int], ctx_mode: int = 8) -> None:
        words = words[:MAX_WORDS]
        for i in range(0, len(words), 255):
            chunk = words[i : i + 255]
            self.body += bytes([WORDS, me | (0x80 if ctx_mode == 4 else 0), len(chunk)])
            for w in chunk:
                self.body += w.to_bytes(5, "little")

    def reg(self, me: int, ctx: int, kind: int, index: int, value: int) -> None:
        self.body += struct.pack("<BBbBHI", REG, me, ctx, kind, index, value & 0xFFFFFFFF)

    def mem(self, space: str, addr: int, data: bytes) -> None:
        for i in range(0, len(data), 255):
            chunk = data[i : i + 255]
            self.body += struct.pack("<BBQB", MEM, MEM_SPACES[space], addr + i, len(chunk)) + chunk

    def mem_sparse(self, space: str, addr: int, data: bytes) -> None:
        """Only the runs of non-zero longwords (the chip's memory starts zeroed)."""
        words = [data[i : i + 4] for i in range(0, len(data), 4)]
        i = 0
        while i < len(words):
            if words[i].strip(b"\0"):
                j = i
                while j < len(words) and words[j].strip(b"\0"):
                    j += 1
                self.mem(space, addr + 4 * i, b"".join(words[i:j]))
                i = j
            else:
                i += 1

    def ring(self, ring: int, base: int, size: int, margin: int) -> None:
        self.body += struct.pack("<BBIII", RING, ring, base, size, margin)

    def sig(self, me: int, sig: int) -> None:
        self.body += struct.pack("<BBbB", SIG, me, -1, sig)

    def enable(self, me: int, mask: int) -> None:
        self.body += bytes([ENABLE, me, mask])

    def run(self, cycles: int) -> None:
        self.body += struct.pack("<BH", RUN, cycles // 4)

    def rx(self, port: int, frame: bytes, gap_ns: int) -> None:
        frame = frame[:2047]
        self.body += struct.pack("<BBHH", RX, port, len(frame), gap_ns) + frame

    def program(self, prog: Any, mes: list[int], enable: int | None = None) -> None:
        """A Program (npkit.asm.image) on `mes`: words, initial registers,
        signals, memory (up to MEM_BUDGET bytes), enabled contexts."""
        budget = MEM_BUDGET
        for space, addr, data in prog.init_mem:
            if budget <= 0:
                break
            self.mem(space, addr, bytes(data[:budget]))
            budget -= len(data)
        for me in mes:
            self.words(me, list(prog.words), prog.ctx_mode)
            for name, ctx, value in prog.init_regs:
                for c in [ctx] if ctx is not None else range(0, 8, 8 // prog.ctx_mode):
                    ref = parse_reg(str(name), c, prog.ctx_mode)
                    self.reg(me, c, ref.kind, ref.index, value)
            for s in prog.set_sigs:
                self.sig(me, s)
            self.enable(me, enable if enable is not None else (0xFF if prog.ctx_mode == 8 else 0x55))

    def data(self) -> bytes:
        return self.header() + bytes(self.body)


def _asm(path: Path) -> Any:
    return assemble(path, include_dirs=[path.parent]).program


def _packets(spec: str, n: int) -> list[tuple[int, bytes]]:
    from npkit.emulator.traffic.source import load_traffic_source

    tr = load_traffic_source(str(EXAMPLES / "traffic" / spec), duration_ns=200_000)
    return [(tr.ports[i], tr.frames[i]) for i in range(min(n, len(tr)))]


def example_seeds() -> dict[str, bytes]:
    seeds: dict[str, bytes] = {}
    s = Seed(num_me=0, flags=LOCKSTEP_TOO)
    s.program(_asm(EXAMPLES / "hello.uc"), [0])
    seeds["hello"] = s.data()

    s = Seed(num_me=1, flags=LOCKSTEP_TOO)
    s.ring(0, 0x1000, 128, 4)
    s.ring(1, 0x1200, 128, 4)
    s.program(_asm(EXAMPLES / "ring_ping.uc"), [0], enable=1)
    s.program(_asm(EXAMPLES / "ring_pong.uc"), [1], enable=1)
    seeds["ring_pingpong"] = s.data()

    s = Seed(num_me=0, flags=1)  # with history
    s.program(_asm(EXAMPLES / "debug" / "ttl.uc"), [0])
    seeds["ttl"] = s.data()

    s = Seed(num_me=0, flags=4 | LOCKSTEP_TOO)  # the MSF device
    s.program(_asm(EXAMPLES / "passthrough" / "passthrough.uc"), [0])
    for port, frame in _packets("min64.yaml", 6):
        s.rx(port, frame, 700)
    s.run(40_000)
    seeds["passthrough"] = s.data()
    return seeds


def _router_memory(s: Seed, image: Any) -> None:
    """The linked image's initial memory (route tables), with a free list of
    ROUTER_BUFS buffers instead of the system's 4096 (the fuzzer's DRAM is small)."""
    from npkit.toolchain.system.sysmap import SYS

    for prog in image.programs:
        for space, addr, data in prog.init_mem:
            if (space, addr) not in (("sram", SYS.desc_base), ("sram", SYS.freelist_q)):
                s.mem_sparse(space, addr, bytes(data))
        prog.init_mem = []
    n = ROUTER_BUFS
    for i in range(n):
        nxt = SYS.desc_addr(i + 1) if i + 1 < n else 0
        s.mem("sram", SYS.desc_addr(i), struct.pack(">II", nxt, SYS.buf_addr(i)))
    s.mem("sram", SYS.freelist_q, struct.pack(">4I", SYS.desc_addr(0), SYS.desc_addr(n - 1), n, 0))


def router_seeds() -> dict[str, bytes]:
    from npkit.toolchain.system.link import link

    seeds: dict[str, bytes] = {}
    for layout in ("pipelined", "parallel"):
        image = link(layout, {"io": "msf"}, EXAMPLES / "traffic" / "routes.txt")
        s = Seed(flags=4)
        for r in image.meta["rings"].values():
            s.ring(r["ring"], r["base"], r["size"], r["margin"])
        _router_memory(s, image)
        for prog in image.programs:
            s.program(prog, list(prog.mes), enable=1 if prog.name.startswith("host_") else None)
        for port, frame in _packets("errors.yaml", 8):
            s.rx(port, frame, 800)
        s.run(40_000)
        seeds[f"router_{layout}"] = s.data()
    return seeds


def regression_inputs() -> dict[str, bytes]:
    """The defects of issue 10 part 3, each as an input that crashed the core before."""
    out: dict[str, bytes] = {}
    s = Seed(num_me=0, ctx_mask=1)  # scratch address 0xFFFFFFFC: the bound check wrapped
    s.words(0, [0xF0800C0C00, 0x1110008000, 0x1010008000, 0xE000020000])
    out["scratch_wrap"] = s.data()
    s = Seed(num_me=0)  # init_mem at 2^64 - 1: written before the DRAM buffer
    s.mem("dram", 2**64 - 1, b"AAAA")
    s.mem("scratch", 2**64 - 1, b"AAAA")
    out["mem_wrap"] = s.data()
    s = Seed(num_me=0)  # a local CSR of context 100 through the API
    ref = parse_reg("ACTIVE_CTX_FUTURE_COUNT", 0, 8)
    s.reg(0, 100, ref.kind, ref.index, 5)
    out["csr_ctx"] = s.data()
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else CORPUS
    out.mkdir(parents=True, exist_ok=True)
    files = {f"seed-{k}": v for k, v in {**example_seeds(), **router_seeds()}.items()}
    files.update({f"crash-issue10-{k}": v for k, v in regression_inputs().items()})
    for name, data in files.items():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
