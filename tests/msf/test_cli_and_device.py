"""`npk run --traffic`: the table, JSON, captures and the exit status; the device's
registers that microcode polls (TX_SEQUENCE, Tx_Port_Status); bad configurations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npkit.asm.image import Image, Program, write_image
from npkit.emulator.binding import Chip
from npkit.emulator.msf_device import MsfDevice
from npkit.emulator.traffic.source import Traffic
from npkit.emulator.traffic_run import MsfError, TrafficRun
from npkit.toolchain.commands.run import run_cmd

from .conftest import PASSTHROUGH, program, words_of

# Sends one 8-byte frame no input packet explains, reads TX_SEQUENCE_0 and port 0's
# status before and after, logs them to SRAM, and never receives.
ROGUE = """
.sig done
.reg a t
// (two-word constants go through a GPR: immed_w1 cannot merge into a transfer register)
.reg write $x0 $x1
.xfer_order $x0 $x1
.reg read $r0
.reg write $w0
    br!=ctx[0, idle#]
    immed[a, 0]
    immed[t, 0x60]
    msf[read, $r0, t, 0, 1], ctx_swap[done]
    alu[$w0, --, b, $r0]
    sram[write, $w0, a, 0, 1], ctx_swap[done]
    immed[t, 0x0304]
    immed_w1[t, 0x0102]
    alu[$x0, --, b, t]
    immed[t, 0x0708]
    immed_w1[t, 0x0506]
    alu[$x1, --, b, t]
    immed[t, 0x2000]
    msf[write, $x0, t, 0, 2], ctx_swap[done]
    immed[t, 0x0300]
    immed_w1[t, 0x0800]
    alu[$x0, --, b, t]
    immed[$x1, 0]
    immed[t, 0x1800]
    msf[write, $x0, t, 0, 2], ctx_swap[done]
    immed[t, 0x400]
    msf[read, $r0, t, 0, 1], ctx_swap[done]
    alu[$w0, --, b, $r0]
    sram[write, $w0, a, 4, 1], ctx_swap[done]
    immed[a, 2000]
wait#:
    alu[a, a, -, 1]
    bne[wait#]
    immed[t, 0x60]
    msf[read, $r0, t, 0, 1], ctx_swap[done]
    alu[$w0, --, b, $r0]
    sram[write, $w0, a, 8, 1], ctx_swap[done]
    halt
idle#:
    ctx_arb[kill]
"""


def _elf(tmp_path: Path, words: list[int], name: str) -> Path:
    path = tmp_path / f"{name}.elf"
    write_image(path, Image(programs=[Program(name=name, words=words)]))
    return path


def test_npk_run_traffic_table_json_and_captures(tmp_path: Path) -> None:
    words, _ = program()
    elf = _elf(tmp_path, list(words), "passthrough")
    cap = tmp_path / "cap"
    args = [
        str(elf),
        "--traffic",
        str(PASSTHROUGH / "min64.yaml"),
        "--duration-ms",
        "0.05",
        "--capture",
        str(cap),
    ]
    res = CliRunner().invoke(run_cmd, args)
    assert res.exit_code == 0, res.output
    assert "conservation: balanced" in res.output and "offered" in res.output
    assert sorted(p.name for p in cap.iterdir()) == [
        "dispositions.json",
        *(f"port{i}.pcap" for i in range(5)),
    ]
    res = CliRunner().invoke(run_cmd, [*args, "--json"])
    out = json.loads(res.output)
    assert out["msf"]["balanced"] and out["msf"]["totals"]["offered"] == 5 * 75
    assert out["msf"]["totals"]["forwarded"] == 5 * 75 and out["mes"][0]["me"] == 0


def test_npk_run_traffic_unbalanced_exits_nonzero(tmp_path: Path) -> None:
    elf = _elf(tmp_path, words_of(ROGUE), "rogue")
    res = CliRunner().invoke(
        run_cmd, [str(elf), "--traffic", str(PASSTHROUGH / "min64.yaml"), "--duration-ms", "0.02"]
    )
    assert res.exit_code == 1
    assert "CONSERVATION FAILED" in res.output and "match no input packet" in res.output


def test_tx_sequence_and_port_status_registers() -> None:
    chip = Chip("ixp2800")
    chip.load(0, words_of(ROGUE))
    chip.enable(0, 0xFF)
    run = TrafficRun(chip, Traffic(), record=True)
    run.run(20_000)
    before, status, after = (chip.read32("sram", 4 * i) for i in range(3))
    assert before == 0x80000000  # TBUF idle, nothing sent yet
    assert status & 3 in (0, 1) and status >> 16 >= 4096 - 8  # starving/hungry, room left
    assert after == 0x80000001  # idle again, one element sent
    assert run.out[0] == [(run.out[0][0][0], bytes(range(1, 9)))]
    rep = run.report()
    assert not rep["balanced"] and rep["totals"]["transmitted"] == 1


def test_bad_configs_are_refused() -> None:
    chip = Chip("ixp2800")
    with pytest.raises(MsfError):
        MsfDevice(chip, rbuf_elem_bytes=96)
    with pytest.raises(MsfError):
        MsfDevice(chip, rbuf_elem_bytes=256, rbuf_elems=64)  # 16 KB > the 8 KB RBUF
    with pytest.raises(MsfError):
        MsfDevice(chip, no_such_key=1)
    tr = Traffic()
    tr.add(0, 7, bytes(60))
    with pytest.raises(MsfError, match="port"):
        TrafficRun(chip, tr)


def test_untagged_frames_are_matched_by_bytes_even_when_rewritten() -> None:
    """Frames without the generator's tag are matched by their bytes; a frame whose MACs,
    TTL and IP checksum were rewritten (bytes 0..25) still matches its input packet, and
    a frame matching nothing makes the run unbalanced."""
    chip = Chip("ixp2800")
    tr = Traffic()
    for i in range(3):
        tr.add(1000 * i, i, bytes([i + 1]) * 80)
    run = TrafficRun(chip, tr)
    run.run(10_000)  # no program: packets wait in the RBUF, none is transmitted
    rewritten = bytes(26) + tr.frames[2][26:]
    assert run.identify(rewritten) == 2 and run.identify(bytes(80)) is None
    run.departed(0, 5000, tr.frames[0])  # as if these had left port 0
    run.departed(0, 6000, rewritten)
    rep = run.report()
    assert rep["balanced"] and rep["totals"]["forwarded"] == 2 and rep["totals"]["in_flight"] == 1
    run.departed(1, 7000, bytes(80))
    rep = run.report()
    assert not rep["balanced"] and "1 transmitted frame(s) match no input packet (first: port 1 frame 0)" in rep["problems"][0]


# Commits 100 TBUF elements of 64 bytes for port 0 as fast as it can, then logs
# TX_PORT_STATUS_0 and TX_SEQUENCE_0 to SRAM.
FLOOD = """
.reg i t a tcw
.reg write $x0 $x1
.xfer_order $x0 $x1
.reg read $r
.reg write $w
.sig s
    br!=ctx[0, idle#]
    immed[i, 0]
    immed[tcw, 0x0300]
    immed_w1[tcw, 0x4000]
loop#:
    alu[$x0, --, b, tcw]
    immed[$x1, 0]
    immed[t, 0x1800]
    alu_shf[t, t, or, i, <<3]
    msf[write, $x0, t, 0, 2], ctx_swap[s]
    alu[i, i, +, 1]
    alu[--, i, -, 100]
    bne[loop#]
    immed[a, 0]
    immed[t, 0x400]
    msf[read, $r, t, 0, 1], ctx_swap[s]
    alu[$w, --, b, $r]
    sram[write, $w, a, 0, 1], ctx_swap[s]
    immed[t, 0x60]
    msf[read, $r, t, 0, 1], ctx_swap[s]
    alu[$w, --, b, $r]
    sram[write, $w, a, 4, 1], ctx_swap[s]
    halt
idle#:
    ctx_arb[kill]
"""


def test_backlog_fills_the_phy_fifo_and_leaves_at_wire_rate() -> None:
    """More frames than the wire can take at once: the port's PHY FIFO fills, its
    status says satisfied, the TBUF waits (TX_SEQUENCE lags), and the frames leave
    back to back, exactly one wire time apart (8 + 64 + 4 + 12 bytes = 704 ns)."""
    chip = Chip("ixp2800")
    chip.load(0, words_of(FLOOD))
    chip.enable(0, 0xFF)
    run = TrafficRun(chip, Traffic(), record=True)
    run.run(100_000)
    status, seq = chip.read32("sram", 0), chip.read32("sram", 4)
    assert status & 3 == 2 and status >> 16 < 4096 // 4  # satisfied, little room
    assert seq >> 31 == 0 and 60 <= seq & 0xFFFF < 100  # elements still waiting
    times = [t for t, _ in run.out[0]]
    assert len(times) == 100 and {len(d) for _, d in run.out[0]} == {64}
    assert {b - a for a, b in zip(times, times[1:], strict=False)} == {704}
    assert run.dev.stats()["tx_sequence"] == 100


def _one_element(quadwords: int, payload: int, msf_addr: int = 0x2000) -> str:
    """Microcode that sends one frame of one element: DRAM 0x400 -> TBUF at `msf_addr`
    (0x2000: element 0) in one dram[tbuf_wr] of `quadwords` (indirect_ref: [25] + [24:21]
    = quadwords - 1, [4] + [20:5] = the MSF address), then element 0's transmit control
    word (`payload` bytes, SOP, EOP, port 0)."""
    ind = (1 << 25) | ((quadwords - 1) << 21) | (1 << 4) | (msf_addr << 5)
    return f"""
.sig done
.reg a t ind
.reg write $c0 $c1
.xfer_order $c0 $c1
    br!=ctx[0, idle#]
    immed[a, 0x400]
    immed[ind, 0x{ind & 0xFFFF:x}]
    immed_w1[ind, 0x{ind >> 16:x}]
    alu[--, --, b, ind]
    dram[tbuf_wr, --, a, 0, 1], indirect_ref, ctx_swap[done]
    immed[t, 0x0300]
    immed_w1[t, 0x{payload << 8:x}]
    alu[$c0, --, b, t]
    immed[$c1, 0]
    immed[t, 0x1800]
    msf[write, $c0, t, 0, 2], ctx_swap[done]
    halt
idle#:
    ctx_arb[kill]
"""


def _send_one_element(quadwords: int, payload: int, msf_addr: int = 0x2000,
                      **msf: int) -> tuple[Chip, TrafficRun, bytes]:
    chip = Chip("ixp2800")
    chip.load(0, words_of(_one_element(quadwords, payload, msf_addr)))
    chip.enable(0, 0xFF)
    data = bytes((7 * i + 3) & 0xFF for i in range(8 * quadwords))
    chip.mem_write("dram", 0x400, data)
    run = TrafficRun(chip, Traffic(), record=True, **msf)
    run.run(50_000)
    assert chip.me_status(0)["state"] == "halt"
    return chip, run, data


def test_a_128_byte_tbuf_element_filled_by_one_dram_command_leaves_whole() -> None:
    chip, run, data = _send_one_element(16, 128, tbuf_elem_bytes=128, tbuf_elems=64)
    assert [d for _, d in run.out[0]] == [data]
    assert chip.faults()["total"] == 0 and run.dev.stats()["bad_tcw"] == 0


def test_a_tbuf_write_past_the_buffers_end_wraps_and_is_faulted() -> None:
    # 64 bytes written 32 bytes before the end of the 8 KB TBUF: the last 32 go to its
    # start (element 0, which the control word sends) and the write is faulted
    chip, run, data = _send_one_element(8, 32, msf_addr=0x2000 + 8192 - 32)
    assert [d for _, d in run.out[0]] == [data[32:]]
    faults = chip.faults()
    assert faults["counts"] == {"msf": 1} and faults["last"][-1]["address"] == 0x2000 + 8192 - 32


def test_a_control_word_naming_bytes_past_its_element_is_counted_bad() -> None:
    # 100 payload bytes in a 64-byte element: the element's 64 go out, and the word is
    # counted bad and faulted at its address (before, the frame was cut without a word)
    chip, run, data = _send_one_element(8, 100)
    assert [d for _, d in run.out[0]] == [data]
    assert run.dev.stats()["bad_tcw"] == 1
    faults = chip.faults()
    assert faults["counts"] == {"msf": 1} and faults["last"][-1]["address"] == 0x1800
