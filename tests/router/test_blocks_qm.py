"""The queue manager alone: per-port FIFO queues in SRAM queue arrays, weighted round
robin with configurable quanta, a queue limit (queue_full drops), the port-ready flow
control from tx; and the stub variant (straight through, in order)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from npkit.emulator.traffic.reasons import load_reasons
from npkit.toolchain.system.harness import Harness
from npkit.toolchain.system.sysmap import SYS

from .test_blocks_parse import single_block

QUEUE_FULL = load_reasons().drop("queue_full").code
NPORTS = 5
ME = 1  # single_block puts the block under test on ME 1


def qm_layout(source: str, threads: int, qm: dict[str, Any]) -> dict[str, Any]:
    lay = single_block(source, threads)
    lay["qm"] = qm
    return lay


def send_packets(h: Harness, ports: list[int]) -> list[int]:
    pws = []
    for port in ports:
        pw = h.packet(bytes(60), 0)
        h.send(pw, port)
        pws.append(pw)
    return pws


def per_port_in_order(pws: list[int], ports: list[int], outs: list[tuple[int, int]]) -> None:
    want: dict[int, list[int]] = {p: [] for p in range(NPORTS)}
    for pw, port in zip(pws, ports, strict=True):
        want[port].append(pw & 0xFFFF)
    got: dict[int, list[int]] = {p: [] for p in range(NPORTS)}
    for pw, w1 in outs:
        got[w1 & 0xFF].append(pw & 0xFFFF)
    assert got == want


@pytest.mark.parametrize(("source", "threads"), [("qm/qm.uc", 8), ("qm/qm.uc", 4), ("qm/qm_stub.uc", 8),
                                                 ("qm/qm_stub.uc", 4)])  # fmt: skip
def test_every_packet_leaves_once_in_port_order(source: str, threads: int) -> None:
    h = Harness(qm_layout(source, threads, {}))
    rng = random.Random(1)
    ports = [rng.randrange(NPORTS) for _ in range(300)]
    pws = send_packets(h, ports)
    h.run(800_000)
    outs = h.outputs()
    per_port_in_order(pws, ports, outs)
    if "stub" in source:  # the stub keeps the global order too
        assert [pw for pw, _ in outs] == pws
    else:  # the qm tells tx the frame length (read from the descriptor)
        assert all(w1 >> 16 == 60 for _, w1 in outs)
    assert h.drops() == {}


def lm(h: Harness, word: int, value: int | None = None) -> int:
    if value is not None:
        h.chip.set_reg(ME, f"lm{word}", value)
    return h.chip.reg(ME, f"lm{word}")


WINDOW = 200  # TBUF elements: above a dequeue's reservation, so WRR runs unhindered


def block_all_ports(h: Harness, blocked: bool) -> None:
    """tx-done counters: -window (every port has a full window in flight) or 0."""
    for p in range(NPORTS):
        h.chip.write32("scratch", SYS.txdone_base + 4 * p, (-WINDOW if blocked else 0) & 0xFFFFFFFF)


def wrr_model(backlog: list[int], quanta: list[int], cur: int, rem: int) -> list[int]:
    out = []
    backlog = list(backlog)
    tries = 0
    while any(backlog):
        if rem and backlog[cur]:
            out.append(cur)
            backlog[cur] -= 1
            rem -= 1
            tries = 0
            continue
        cur = (cur + 1) % len(backlog)
        rem = quanta[cur]
        tries += 1
        assert tries < 100
    return out


def test_wrr_quanta_queue_limit_and_flow_control() -> None:
    quanta = [3, 1, 2, 1, 1]
    h = Harness(qm_layout("qm/qm.uc", 8, {"quanta": quanta, "qlimit": 10, "tx_window": WINDOW}))
    block_all_ports(h, True)  # every port looks busy: nothing may leave
    h.run(5_000)  # initialisation done, the qm's poller has read the counters
    assert all(lm(h, 8 * p + 2) == -WINDOW & 0xFFFFFFFF for p in range(NPORTS))
    counts = [12, 4, 10, 7, 9]  # port 0 above the limit of 10
    ports = [p for p in range(NPORTS) for _ in range(counts[p])]
    random.Random(3).shuffle(ports)
    pws = send_packets(h, ports)
    h.run(300_000)
    assert h.outputs() == []  # flow control held everything back
    assert h.drops() == {QUEUE_FULL: 2}
    assert [lm(h, 8 * p) for p in range(NPORTS)] == [10, 4, 10, 7, 9]
    block_all_ports(h, False)  # tx reports progress: all ports ready at once
    h.run(300_000)
    outs = h.outputs()
    seq = [w1 & 0xFF for _, w1 in outs]
    backlog = [10, 4, 10, 7, 9]
    assert len(seq) == sum(backlog)
    starts = [(c, r) for c in range(NPORTS) for r in range(quanta[c] + 1)]
    assert any(wrr_model(backlog, quanta, c, r) == seq for c, r in starts), seq
    # per-port FIFO: the two dropped were port 0's last arrivals
    kept = []
    seen0 = 0
    for pw, port in zip(pws, ports, strict=True):
        if port == 0:
            seen0 += 1
            if seen0 > 10:
                continue
        kept.append((pw, port))
    per_port_in_order([pw for pw, _ in kept], [p for _, p in kept], outs)
    assert h.free_count() == SYS.n_bufs - len(pws) + 2  # the dropped buffers came back


def test_tx_window_limits_packets_in_flight() -> None:
    h = Harness(qm_layout("qm/qm.uc", 8, {"tx_window": 3}), tx_confirm=False)
    ports = [p % NPORTS for p in range(40)]
    send_packets(h, ports)
    h.run(300_000)
    got = [w1 & 0xFF for _, w1 in h.outputs()]
    assert sorted(got) == sorted(list(range(NPORTS)) * 3)  # 3 a port, then tx must confirm
    h.chip.write32("scratch", SYS.txdone_base + 4 * 2, 2)  # port 2: two sent (one element each)
    h.run(300_000)
    got = [w1 & 0xFF for _, w1 in h.outputs()]
    assert got.count(2) == 5 and all(got.count(p) == 3 for p in (0, 1, 3, 4))
