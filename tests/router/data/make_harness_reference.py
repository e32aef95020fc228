"""How tests/router/data/harness_reference.json was made: with the harness of commit
33db36a (traffic generated into memory, the Python oracle, outputs kept and matched at
the end), in a checkout of that commit given this branch's microcode/ and the linker's
split_macros (flow-hash steering) and its order check keyed by flow (input port,
protocol, addresses) instead of (input port, output port):

    git worktree add /tmp/ref 33db36a && make -C /tmp/ref
    cp -r microcode /tmp/ref/    # + split_macros and the flow key, as said above
    cd /tmp/ref && .venv/bin/python .../make_harness_reference.py OUT.json [case ...]

This script runs against that old API (it does not run on this tree);
tests/router/test_harness_reference.py runs the same cases through the streaming harness.

Each case: the demo's 10,000-route table (seed 1), a traffic spec, a layout; the run's
summary (without the host-time figures), the sha256 of every capture file, and the chip's
history hash over the first 100 us."""
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from npkit.emulator.traffic_run import load_traffic_source
from npkit.toolchain.commands.demo import make_routes, router_with_routes
from npkit.toolchain.system.paths import ROOT
from npkit.toolchain.system.router_run import RouterRun

T = ROOT / "examples" / "traffic"
CASES = {
    "pipelined-seed003": ("pipelined", T / "seed003_balanced.yaml", 1_000_000),
    "pipelined-errors": ("pipelined", T / "errors.yaml", 400_000),
    "pipelined-imix": ("pipelined", T / "imix.yaml", 500_000),
    "parallel-seed003": ("parallel", T / "seed003_balanced.yaml", 1_000_000),
    "parallel-imix": ("parallel", T / "imix.yaml", 500_000),
}
HOST = ("host_s", "emulated_ms_per_host_s")


def run_case(layout: str, spec: Path, dur: int, tmp: Path) -> dict:
    routes = tmp / "routes-10k.txt"
    make_routes(str(routes), 10_000)
    ry = router_with_routes(tmp, routes)
    out = {}
    for hist in (True, False):
        tr = load_traffic_source(spec, dur, overrides={"router": str(ry)})
        rr = RouterRun.link(layout, {"io": "msf"}, tr, routes, ry)
        if hist:
            rr.chip.history_enable(1)
            rr.run_traffic(100_000)
            out["history_hash_100us"] = rr.chip.history_hash()
            continue
        rr.run_traffic(dur)
        rr.drain()
        s = rr.summary(0.0)
        rr.run.write_captures(tmp / "out")
        out["summary"] = {k: v for k, v in s.items() if k not in HOST}
        out["captures"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                           for p in sorted((tmp / "out").iterdir())}
    return out


def main() -> None:
    names = sys.argv[2:] or list(CASES)
    path = Path(sys.argv[1])
    ref = json.loads(path.read_text()) if path.exists() else {}
    for name in names:
        layout, spec, dur = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            ref[name] = {"layout": layout, "traffic": str(spec.relative_to(ROOT)), "duration_ns": dur,
                         **run_case(layout, spec, dur, Path(tmp))}
        print(name, ref[name]["summary"]["comparison"], file=sys.stderr)
    path.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
