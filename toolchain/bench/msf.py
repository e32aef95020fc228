"""MSF benchmarks (`npk bench msf`).

msf.passthrough_kpps        thousands of packets per host second through the MSF
                            and examples/passthrough at 5 x 1 Gb/s of 64-byte frames
                            (7.44 Mpkt/s emulated), traffic generation excluded.
msf.passthrough_loss        packets lost in that run (must be 0).
msf.passthrough_seed003_kpps  the same for seed 003's 78-byte packets (two mpackets each).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from npkit.emulator.binding import Chip
from npkit.emulator.traffic_run import TrafficRun, load_traffic_source
from npkit.toolchain.bench import benchmark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "passthrough"


def _run(spec: str, duration_ns: int) -> tuple[float, int]:
    from npkit.asm.assembler import assemble
    from npkit.asm.errors import Diagnostics

    prog = assemble(EXAMPLE / "passthrough.uc", diags=Diagnostics()).program
    traffic = load_traffic_source(EXAMPLE / spec, duration_ns=duration_ns)
    chip = Chip("ixp2800")
    chip.load(0, list(prog.words), prog.ctx_mode)
    chip.enable(0, 0xFF)
    run = TrafficRun(chip, traffic)
    t0 = time.perf_counter()
    run.run(duration_ns + 20_000)
    rep = run.report()
    dt = time.perf_counter() - t0
    t = rep["totals"]
    lost = t["offered"] - t["forwarded"] + (0 if rep["balanced"] else 1)
    return run.read / dt / 1000, lost + (run.read - t["offered"])


@benchmark("msf")
def bench_msf(quick: bool) -> dict[str, Any]:
    duration = 1_000_000 if quick else 5_000_000
    kpps, lost = _run("min64.yaml", duration)
    kpps3, lost3 = _run("seed003.yaml", duration)
    return {
        "msf.passthrough_kpps": round(kpps, 1),
        "msf.passthrough_loss": lost + lost3,
        "msf.passthrough_seed003_kpps": round(kpps3, 1),
    }
