"""Memory and unit commands: data effects, atomics, rings, queues, hash, CAP, MSF."""

from __future__ import annotations

from .util import chip_with, ld32, run_prog


def test_sram_write_then_read() -> None:
    prog = ["immed[a1, 0x100]", "immed[$0, 0x1111]", "immed[$1, 0x2222]",
            "sram[write, $0, a1, 0, 2], ctx_swap[s1]",
            "sram[read, $4, a1, 0, 2], ctx_swap[s2]",
            "alu[a2, --, B, $4]", "alu[a3, --, B, $5]", "halt"]  # fmt: skip
    chip = run_prog(prog, cycles=5000)
    assert chip.read32("sram", 0x100) == 0x1111 and chip.read32("sram", 0x104) == 0x2222
    assert (chip.reg(0, "a2"), chip.reg(0, "a3")) == (0x1111, 0x2222)


def test_sram_channel_from_address_bits() -> None:
    prog = [*ld32("a1", 0x80000010), "immed[$0, 0x4242]", "sram[write, $0, a1, 0, 1], ctx_swap[s1]", "halt"]
    chip = run_prog(prog, cycles=5000)
    assert chip.read32("sram", 0x80000010) == 0x4242 and chip.read32("sram", 0x10) == 0
    assert chip.stats()["units"]["sram"][2]["commands"] == 1


def test_sram_atomics_return_old_values() -> None:
    prog = ["immed[a1, 0x40]",
            "immed[$0, 5]", "sram[test_and_add, $0, a1, 0], ctx_swap[s1]", "alu[a2, --, B, $0]",
            "immed[$1, 0xf0]", "sram[test_and_set, $1, a1, 0], ctx_swap[s1]", "alu[a3, --, B, $1]",
            "immed[$2, 0x3]", "sram[clr, $2, a1, 0], ctx_swap[s1]",
            "sram[incr, --, a1, 0]", "sram[test_and_incr, $3, a1, 0], ctx_swap[s1]", "alu[a4, --, B, $3]",
            "immed[$4, 0x77]", "sram[swap, $4, a1, 0], ctx_swap[s1]", "alu[a5, --, B, $4]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.write32("sram", 0x40, 10)
    chip.run(10000)
    # 10 -> +5=15 -> |0xf0=0xff -> &~3=0xfc -> +1=0xfd -> +1=0xfe -> swap 0x77
    assert [chip.reg(0, r) for r in ("a2", "a3", "a4", "a5")] == [10, 15, 0xFD, 0xFE]
    assert chip.read32("sram", 0x40) == 0x77


def test_dram_read_signals_a_pair() -> None:
    # dram[...], sig_done[s4] then ctx_arb[s4, s5] as in the Linux ixp2400_rx code
    prog = ["immed[a1, 0x1000]", "dram[read, $$0, a1, 0, 2], sig_done[s4]", "ctx_arb[s4, s5]",
            "alu[a2, --, B, $$0]", "alu[a3, --, B, $$3]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.mem_write("dram", 0x1000, bytes(range(16)))
    chip.run(5000)
    assert chip.me_status(0)["state"] == "halt"
    assert (chip.reg(0, "a2"), chip.reg(0, "a3")) == (0x00010203, 0x0C0D0E0F)


def test_dram_write() -> None:
    prog = ["immed[a1, 0x2000]", "immed[$$0, 0xabcd]", "immed[$$1, 0x1234]",
            "dram[write, $$0, a1, 0, 1], ctx_swap[s2]", "halt"]  # fmt: skip
    chip = run_prog(prog, cycles=5000)
    assert chip.mem_read("dram", 0x2000, 8) == bytes.fromhex("0000abcd00001234")


def test_scratch_atomics_and_sub() -> None:
    prog = ["immed[a1, 0x20]", "immed[$0, 3]", "scratch[test_and_sub, $0, a1, 0], ctx_swap[s1]",
            "alu[a2, --, B, $0]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.write32("scratch", 0x20, 100)
    chip.run(5000)
    assert chip.reg(0, "a2") == 100 and chip.read32("scratch", 0x20) == 97


def test_scratch_ring_put_get_and_status() -> None:
    prog = ["immed[a1, 12]",  # ring 3 (address bits 5:2)
            "immed[$0, 0xa]", "immed[$1, 0xb]", "scratch[put, $0, a1, 0, 2], ctx_swap[s1]",
            "br_inp_state[SCR_RING3_STATUS, full#]", "immed[a5, 1]",
            "scratch[get, $4, a1, 0, 1], ctx_swap[s1]", "alu[a2, --, B, $4]",
            "scratch[get, $4, a1, 0, 2], ctx_swap[s1]", "alu[a3, --, B, $4]", "halt",
            "full#: immed[a5, 2]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.scratch_ring(3, 0x1000, 128, full_margin=0)
    chip.run(5000)
    assert (chip.reg(0, "a5"), chip.reg(0, "a2"), chip.reg(0, "a3")) == (1, 0xA, 0)  # second get: empty
    assert chip.scratch_ring_count(3) == 1


def test_scratch_ring_full_input_state() -> None:
    prog = ["immed[a1, 4]", "loop#: br_inp_state[SCR_RING1_STATUS, full#]", "immed[$0, 1]",
            "scratch[put, $0, a1, 0, 1], ctx_swap[s1]", "alu[a2, a2, +, 1]", "br[loop#]",
            "full#: halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.scratch_ring(1, 0x800, 128, full_margin=8)
    chip.run(200000)
    assert chip.me_status(0)["state"] == "halt"
    assert chip.reg(0, "a2") == 120 and chip.scratch_ring_count(1) == 120


def test_sram_queue_array_enqueue_dequeue() -> None:
    q = 0x200  # descriptor: head, tail, count
    prog = [f"immed[a1, 0x{q:x}]", "immed[b1, 0x1000]", "immed[b2, 0x2000]", "immed[b3, 0x3000]",
            "sram[enqueue, --, a1, b1]", "sram[enqueue, --, a1, b2]", "sram[enqueue, --, a1, b3]",
            "sram[rd_qdesc_head, $0, a1, 0, 3], ctx_swap[s1]",
            "sram[dequeue, $4, a1, 0], ctx_swap[s1]", "alu[a2, --, B, $4]",
            "sram[dequeue, $4, a1, 0], ctx_swap[s1]", "alu[a3, --, B, $4]",
            "sram[dequeue, $4, a1, 0], ctx_swap[s1]", "alu[a4, --, B, $4]",
            "sram[dequeue, $4, a1, 0], ctx_swap[s1]", "alu[a5, --, B, $4]", "halt"]  # fmt: skip
    chip = run_prog(prog, cycles=20000)
    assert [chip.reg(0, f"${i}") for i in range(3)] == [0x1000, 0x3000, 3]
    assert [chip.reg(0, r) for r in ("a2", "a3", "a4", "a5")] == [0x1000, 0x2000, 0x3000, 0]
    assert chip.read32("sram", q + 8) == 0


def test_an_enqueue_goes_to_its_queues_channel_in_order_with_its_dequeue() -> None:
    """A queue and its buffers in SRAM channel 1 (npkit's layout: QD_BASE 0x40000000,
    DESC_BASE 0x40010000): the enqueue is served by channel 1's controller (the Q_array is
    a channel's, HRM p.215), not by channel 2 (the sum of the two addresses), so a dequeue
    issued after it, without waiting, finds the buffer even while channel 2 is busy (ME 1
    keeps it so).  The enqueue used to queue behind channel 2's reads and the dequeue came
    back empty (qm_drr's local-memory state at the SPP's Figure 11 0-byte all-I3 point)."""
    q, buf = 0x40000200, 0x40010020
    prog = [f"immed_w1[a1, 0x{q >> 16:x}]", f"immed_w0[a1, 0x{q & 0xFFFF:x}]",
            f"immed_w1[b1, 0x{buf >> 16:x}]", f"immed_w0[b1, 0x{buf & 0xFFFF:x}]",
            "immed[a3, 200]", "wait#: alu[a3, a3, -, 1]", "bne[wait#]",  # channel 2 fills meanwhile
            "sram[enqueue, --, a1, b1]", "sram[dequeue, $4, a1, 0], ctx_swap[s1]",
            "alu[a2, --, B, $4]", "halt"]  # fmt: skip
    hammer = ["immed_w1[a1, 0x8000]", "loop#: sram[read, $0, a1, 0, 8], sig_done[s1]", "br[loop#]"]
    chip = chip_with({0: prog, 1: hammer})
    chip.enable(1, 0xFF)
    chip.run(20_000)
    assert chip.me_status(0)["state"] == "halt"
    assert chip.reg(0, "a2") == buf
    sram = chip.stats()["units"]["sram"]
    assert sram[1]["commands"] == 2        # the enqueue and the dequeue, both on the queue's channel


def test_sram_ring_put_get() -> None:
    d = 0x300  # ring descriptor: head, tail, count, base, size
    prog = [f"immed[a1, 0x{d:x}]", "immed[$0, 0x51]", "immed[$1, 0x52]", "immed[$2, 0x53]",
            "sram[put, $0, a1, 0, 3], ctx_swap[s1]", "sram[get, $4, a1, 0, 2], ctx_swap[s1]",
            "alu[a2, --, B, $4]", "alu[a3, --, B, $5]", "halt"]  # fmt: skip
    chip = chip_with({0: prog})
    chip.write32("sram", d + 12, 0x4000)
    chip.write32("sram", d + 16, 64)
    chip.run(10000)
    assert (chip.reg(0, "a2"), chip.reg(0, "a3")) == (0x51, 0x52)
    assert chip.read32("sram", d + 8) == 1


def test_hash_is_deterministic_and_depends_on_key() -> None:
    prog = ["immed[$0, 0]", "immed[$1, 1]", "immed[$2, 0]", "immed[$3, 2]",
            "hash_64[$0, 2], ctx_swap[s1]", "halt"]  # fmt: skip
    c1, c2 = run_prog(prog, cycles=5000), run_prog(prog, cycles=5000)
    h = [c1.reg(0, f"${i}") for i in range(4)]
    assert h == [c2.reg(0, f"${i}") for i in range(4)]
    assert (h[0], h[1]) != (h[2], h[3])
    # GF(2) multiplication: key 1 hashes to the multiplier itself
    mult = c1.config["hash_mult64"]
    assert ((h[0] << 32) | h[1]) == mult


def test_cap_fast_wr_raises_xscale_interrupt() -> None:
    chip = chip_with({3: ["cap[fast_wr, 5, XSCALE_INT_A]", "immed[a1, 0x100]", "w#: alu[a1, a1, -, 1]",
                          "bne[w#]", "halt"]}, ctx_mask=1)  # fmt: skip
    chip.run(5000)
    assert chip.xscale_irq() == 1 << 3
    assert chip.cap_csr(0x4B20) == 5
    chip.xscale_irq(clear=True)
    assert chip.xscale_irq() == 0


def test_interthread_signal_through_cap() -> None:
    # ME 0 signals ME 1 ctx 2 signal 5 through INTERTHREAD_SIG: [3:0] sig, [6:4] ctx, [11:7] ME
    val = 5 | (2 << 4) | (1 << 7)
    chip = chip_with({0: [f"immed[$0, 0x{val:x}]", "cap[write, $0, INTERTHREAD_SIG, 1], ctx_swap[s1]", "halt"],
                      1: ["br!=ctx[2, k#]", "ctx_arb[s5]", "immed[a1, 0x5a]", "halt", "k#: ctx_arb[kill]"]},
                     ctx_mask=0x5)  # fmt: skip
    chip.run(5000)
    assert chip.reg(1, "a1", ctx=2) == 0x5A


def test_msf_stub_loopback_and_counts() -> None:
    prog = ["immed[a1, 0x80]", "immed[$0, 0x1234]", "msf[write, $0, a1, 0, 1], ctx_swap[s1]",
            "msf[read, $2, a1, 0, 1], ctx_swap[s1]", "alu[a2, --, B, $2]",
            "msf[fast_wr, --, a1, 3]", "halt"]  # fmt: skip
    chip = run_prog(prog, cycles=5000)
    assert chip.reg(0, "a2") == 0x1234
    assert chip.msf_stub_counts() == {"read": 1, "write": 1, "fast_wr": 1, "rbuf_rd": 0, "tbuf_wr": 0}


def test_rbuf_rd_and_tbuf_wr_with_indirect_ref() -> None:
    # indirect_ref: previous ALU result [4] + [20:5] = MSF buffer address, [25] + [24:21] = count - 1
    ind_rd = (1 << 25) | (1 << 21) | (1 << 4) | (0x40 << 5)     # 2 quadwords from MSF 0x40
    ind_wr = (1 << 25) | (0 << 21) | (1 << 4) | (0x100 << 5)    # 1 quadword to MSF 0x100
    prog = ["immed[a1, 0x80]", "immed[$0, 0x0102]", "immed_w1[$0, 0x0304]", "immed[$1, 0x0506]",
            "immed_w1[$1, 0x0708]", "msf[write, $0, a1, 0, 2], ctx_swap[s1]",
            "immed[a3, 0x40]", "immed[$0, 0x0a0b]", "msf[write, $0, a3, 0, 1], ctx_swap[s1]",
            *ld32("a2", ind_rd), "alu[--, --, B, a2]",
            "dram[rbuf_rd, --, a1, 0, 1], indirect_ref, sig_done[s2]", "ctx_arb[s2, s3]",
            *ld32("a2", ind_wr), "alu[--, --, B, a2]",
            "dram[tbuf_wr, --, a1, 0, 1], indirect_ref, sig_done[s2]", "ctx_arb[s2, s3]",
            "immed[a4, 0x100]", "msf[read, $4, a4, 0, 2], ctx_swap[s1]", "halt"]  # fmt: skip
    chip = run_prog(prog, cycles=20000)
    assert chip.me_status(0)["state"] == "halt"
    got = chip.mem_read("dram", 0x80, 16)
    assert got[:4] == bytes.fromhex("00000a0b")
    assert got[4:16] == bytes(12)
    assert chip.msf_stub_counts()["rbuf_rd"] == 1 and chip.msf_stub_counts()["tbuf_wr"] == 1
    assert chip.reg(0, "$4") == 0x00000A0B


def test_pci_read_returns_zero_and_counts() -> None:
    prog = ["immed[$0, 0x99]", "pci[read, $0, a1, 0, 1], ctx_swap[s1]", "alu[a2, --, B, $0]", "halt"]
    chip = chip_with({0: prog})
    chip.set_reg(0, "$0", 0x99)
    chip.run(5000)
    assert chip.reg(0, "a2") == 0
    assert chip.stats()["units"]["pci"][0]["commands"] == 1


def test_cap_address_form_write_and_read() -> None:
    prog = ["immed[a1, 0x4b24]", "immed[$0, 0x31]", "cap[write, $0, a1, 0, 1], ctx_swap[s1]",
            "cap[read, $1, a1, 0, 1], ctx_swap[s1]", "alu[a2, --, B, $1]", "halt"]  # fmt: skip
    chip = chip_with({4: prog})
    chip.run(5000)
    assert chip.reg(4, "a2") == 0x31
    assert chip.xscale_irq() == 1 << (16 + 4)  # XSCALE_INT_B


class _Device:
    """A tiny MSF device: remembers writes, answers reads, delivers one receive
    status word to ME 0 ctx 1 at cycle 500."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, list[int]]] = []
        self.fast: list[tuple[int, int]] = []
        self.tbuf = b""
        self.delivered = False
        self.chip: object = None

    def read(self, me: int, ctx: int, addr: int, n: int) -> list[int]:
        return [addr + i for i in range(n)]

    def write(self, me: int, ctx: int, addr: int, words: list[int]) -> None:
        self.writes.append((addr, words))

    def fast_wr(self, me: int, addr: int, data: int) -> None:
        self.fast.append((addr, data))

    def rbuf_rd(self, addr: int, n: int) -> bytes:
        return bytes((addr + i) & 0xFF for i in range(n))

    def tbuf_wr(self, addr: int, data: bytes) -> None:
        self.tbuf = data

    def next_event(self) -> int | None:
        return None if self.delivered else 500

    def advance(self, now: int) -> None:
        if now >= 500 and not self.delivered:
            self.delivered = True
            self.chip.msf_deliver(0, 1, 16 + 3, [0xABCD], 9)  # type: ignore[attr-defined]


def test_python_msf_device() -> None:
    prog = ["br=ctx[1, rx#]", "immed[a1, 0x10]", "msf[read, $0, a1, 0, 2], ctx_swap[s1]",
            "immed[$2, 0x55]", "msf[write, $2, a1, 4, 1], ctx_swap[s1]", "msf[fast_wr, --, a1, 9]",
            "immed[a2, 0x40]", "dram[rbuf_rd, --, a2, 0, 1], sig_done[s2]", "ctx_arb[s2, s3]",
            "dram[tbuf_wr, --, a2, 0, 1], sig_done[s2]", "ctx_arb[s2, s3]", "ctx_arb[kill]",
            "rx#: ctx_arb[s9]", "alu[a5, --, B, $3]", "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mask=0x3)
    dev = _Device()
    dev.chip = chip
    chip.set_msf(dev)
    assert chip.run(100_000) == "halted"
    assert (chip.reg(0, "$0"), chip.reg(0, "$1")) == (0x10, 0x11)
    assert dev.writes == [(0x14, [0x55])] and dev.fast == [(0x10, 9)]
    assert chip.mem_read("dram", 0x40, 8) == bytes(range(8))
    assert dev.tbuf == bytes(range(8))
    assert chip.reg(0, "a5", ctx=1) == 0xABCD
    assert chip.msf_stub_counts() == {"read": 1, "write": 1, "fast_wr": 1, "rbuf_rd": 1, "tbuf_wr": 1}
    chip.set_msf(None)  # back to the loopback stub


class _Counting:
    """An MSF device that counts the advance() calls; with `at`, it names one event."""

    def __init__(self, at: int | None, has_next: bool) -> None:
        self.at, self.calls = at, []
        if has_next:
            self.next_event = lambda: self.at

    def advance(self, now: int) -> None:
        self.calls.append(now)
        if self.at is not None and now >= self.at:
            self.at = None


def test_an_msf_device_is_advanced_when_its_next_event_comes() -> None:
    busy = ["loop#: alu[a1, a1, +, 1]", "sram[read, $0, a1, 0, 1], ctx_swap[s1]", "br[loop#]"]
    named, unnamed = _Counting(3000, has_next=True), _Counting(None, has_next=False)
    for dev in (named, unnamed):
        chip = chip_with({0: busy}, ctx_mask=0xFF)
        chip.set_msf(dev)
        chip.run(10_000)
    assert named.calls == [3000]          # the one event it named, at its cycle
    assert len(unnamed.calls) > 1000      # without next_event: every step of the loop


# indirect_ref: [25] + [24:21] quadwords - 1 (up to 16), [4] + [20:5] the MSF buffer address
def _ind(quadwords: int, msf_addr: int = 0) -> int:
    return (1 << 25) | ((quadwords - 1) << 21) | ((1 << 4) | (msf_addr << 5) if msf_addr else 0)


def test_dram_moves_128_bytes_between_dram_and_the_msf_buffers() -> None:
    # HRM p.197: a DRAM access may name up to 16 quadwords (128 bytes); rbuf_rd and tbuf_wr
    # move them without transfer registers, so the whole 128 bytes go across
    prog = ["immed[a1, 0x400]", *ld32("a2", _ind(16, 0x80)), "alu[--, --, B, a2]",
            "dram[rbuf_rd, --, a1, 0, 1], indirect_ref, sig_done[s2]", "ctx_arb[s2, s3]",
            *ld32("a2", _ind(16, 0x200)), "alu[--, --, B, a2]",
            "dram[tbuf_wr, --, a1, 0, 1], indirect_ref, sig_done[s2]", "ctx_arb[s2, s3]",
            "ctx_arb[kill]"]  # fmt: skip
    chip = chip_with({0: prog})
    dev = _Device()
    dev.chip = chip
    dev.delivered = True
    chip.set_msf(dev)
    assert chip.run(100_000) == "halted"
    moved = bytes((0x80 + i) & 0xFF for i in range(128))
    assert chip.mem_read("dram", 0x400, 136) == moved + bytes(8)
    assert dev.tbuf == moved
    assert chip.faults()["total"] == 0
    chip.set_msf(None)


def test_a_4_context_dram_read_of_16_quadwords_fills_32_transfer_registers() -> None:
    # 4-context mode: a context has 32 DRAM read transfer registers, room for 128 bytes
    prog = ["immed[a1, 0x800]", *ld32("a2", _ind(16)), "alu[--, --, B, a2]",
            "dram[read, $$0, a1, 0, 1], indirect_ref, ctx_swap[s2]", "halt"]  # fmt: skip
    chip = chip_with({0: prog}, ctx_mode=4)
    chip.mem_write("dram", 0x800, bytes(range(128)))
    chip.run(10_000)
    assert chip.me_status(0)["state"] == "halt"
    words = [chip.reg(0, f"$${i}") for i in range(32)]
    assert words == [int.from_bytes(bytes(range(4 * i, 4 * i + 4)), "big") for i in range(32)]
    assert chip.stats()["units"]["dram"][0]["bytes"] + chip.stats()["units"]["dram"][1]["bytes"] + \
        chip.stats()["units"]["dram"][2]["bytes"] == 128
