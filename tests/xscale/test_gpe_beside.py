"""Two host processes on the gpe placement in one run (System.attach_beside): one clock
loop serves both links in emulated-time order, so two programs that talk through
scratch rings (the SPP's i3d relaying records to npkd) make progress together, and the
run is deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.binding import Chip
from npkit.xscale.core import XScaleError
from npkit.xscale.system import System
from npkit.xscale.toolchain import build

# ping N: puts 1..N on ring 1, sums the answers got on ring 2.  pong N: answers each
# word w of ring 1 with 2w+1 on ring 2.  Both poll with a deadline (WAIT_UNTIL).
PINGPONG_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "npk_xscale.h"

static uint32_t get(npk_dev *d, unsigned ring) {
    uint32_t w;
    while (!npk_ring_get(d, ring, &w)) npk_dev_wait_until(d, npk_dev_now_ns(d) + 2000);
    return w;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    unsigned n = (unsigned)atoi(argv[2]);
    npk_dev d;
    if (npk_dev_open(&d) != 0) return 3;
    if (!strcmp(argv[1], "ping")) {
        uint64_t sum = 0;
        for (unsigned i = 1; i <= n; i++) {
            while (!npk_ring_put(&d, 1, i)) npk_dev_wait_until(&d, npk_dev_now_ns(&d) + 2000);
            sum += get(&d, 2);
        }
        printf("ping got %llu at %llu ns\n", (unsigned long long)sum, (unsigned long long)npk_dev_now_ns(&d));
    } else {
        for (unsigned i = 0; i < n; i++) {
            uint32_t w = get(&d, 1);
            while (!npk_ring_put(&d, 2, 2 * w + 1)) npk_dev_wait_until(&d, npk_dev_now_ns(&d) + 2000);
        }
        printf("pong answered %u\n", n);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory: pytest.TempPathFactory, xscale_built: Path) -> Path:
    tmp = tmp_path_factory.mktemp("beside")
    src = tmp / "pingpong.c"
    src.write_text(PINGPONG_C)
    return build([src], tmp / "pingpong", native=True)


def run_pair(prog: Path, n: int) -> tuple[System, str, str, int]:
    chip = Chip("ixp2800")
    chip.scratch_ring(1, 0x1000, 128)
    chip.scratch_ring(2, 0x2000, 128)
    system = System(chip)
    first = system.attach_xscale(prog, ["ping", str(n)], placement="gpe")
    second = system.attach_beside(prog, ["pong", str(n)])
    try:
        for _ in range(200):
            system.run(100_000)
            if first.state != "running" and second.state != "running":
                break
        return system, first.stdout.decode(), second.stdout.decode(), system.cycle
    finally:
        system.close()


def test_two_gpe_processes_talk_through_rings_in_one_clock_loop(pingpong: Path) -> None:
    system, ping, pong, _ = run_pair(pingpong, 20)
    assert "pong answered 20" in pong
    assert f"ping got {sum(2 * i + 1 for i in range(1, 21))} at" in ping
    st = system.status()
    assert st is not None and st["state"] == "exited" and st["beside"]["state"] == "exited"
    assert st["requests"] > 40 and st["beside"]["requests"] > 40


def test_the_pair_is_deterministic(pingpong: Path) -> None:
    a = run_pair(pingpong, 8)
    b = run_pair(pingpong, 8)
    assert a[1] == b[1] and a[2] == b[2]


def test_a_second_program_needs_a_first_on_the_gpe(pingpong: Path) -> None:
    system = System(Chip("ixp2800"))
    with pytest.raises(XScaleError, match="first program on the gpe"):
        system.attach_beside(pingpong, ["pong", "1"])
    system.close()
