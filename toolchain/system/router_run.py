"""The whole router on the emulator: `npk demo`, and `run_router` for tests and benchmarks.

`run_router` links a layout with the MSF blocks (rx, tx), loads a route table, feeds a
traffic source through the modelled MSF (npkit.emulator.msf.TrafficRun) and accounts
for every packet: forwarded (matched to its input by the generator's tag), dropped by
the MSF or by the microcode, excepted (records read off the exception ring by the
host reader that stands in for the XScale daemon).  Microcode drops are counted per
reason, not per packet; they are attributed to the packets the oracle says are dropped
for that reason among those with no other fate, and `drops_match` says whether the
counters and that attribution agree.

    npk demo [--layout pipelined] [--ms 10] [--routes FILE] [--json]
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from .paths import ROOT

SEED003 = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"  # a permutation: no output oversubscribed
CLOCK_HZ = 1.4e9


def _tag_id(frame: bytes) -> int:
    from npkit.emulator.traffic.source import TAG

    k = frame.find(TAG)
    return int.from_bytes(frame[k + 4 : k + 8], "big") if 0 <= k and k + 8 <= len(frame) else -1


class RouterRun:
    """A linked router on a chip with the MSF device and traffic attached."""

    def __init__(self, layout: str = "pipelined", params: dict[str, Any] | None = None,
                 traffic: Any = None, routes: str | Path | None = None,
                 router_config: str | Path | None = None) -> None:  # fmt: skip
        from npkit.emulator.binding import Chip
        from npkit.emulator.loader import load_image
        from npkit.emulator.traffic.oracle import RefRouter
        from npkit.emulator.traffic.reasons import load_reasons
        from npkit.emulator.traffic.router_config import RouterConfig
        from npkit.emulator.traffic_run import TrafficRun
        from npkit.toolchain.system.link import link
        from npkit.toolchain.system.paths import DEFAULT_ROUTER

        params = dict(params or {})
        params.setdefault("io", "msf")
        self.image = link(layout, params, routes, router_config, host_stubs=True)
        self.chip = Chip("ixp2800")
        load_image(self.chip, self.image)
        self.traffic = traffic
        self.run = TrafficRun(self.chip, traffic, software=self._software)
        cfg = RouterConfig.load(router_config or DEFAULT_ROUTER)
        self.oracle = RefRouter(cfg)
        self.reasons = load_reasons()
        self.layout = layout
        self.params = params
        self._index: dict[tuple[int, bytes], list[int]] | None = None
        self._exc: list[tuple[int, str]] = []
        self._exc_taken: set[int] = set()
        self._exc_read = 0
        self.unattributed_drops: dict[str, int] = {}

    # the microcode's exceptions, per packet id: the host reads the exception log the
    # stand-in reader (microcode/host/host_sink.uc) keeps, finds each packet's id, and
    # gives the buffer back to the free list, as the XScale daemon will
    def service_exceptions(self) -> None:
        from npkit.toolchain.system.sysmap import HOST_EXC_BASE, SYS

        n = self.chip.read32("sram", HOST_EXC_BASE)
        for k in range(self._exc_read, n):
            pw = self.chip.read32("sram", HOST_EXC_BASE + 16 + 8 * k)
            rec = self.chip.read32("sram", HOST_EXC_BASE + 20 + 8 * k)
            i = pw & 0xFFFF
            length = self.chip.read32("sram", SYS.desc_addr(i) + 8) >> 16
            frame = self.chip.mem_read("dram", SYS.buf_addr(i), max(length, 1))
            pid = _tag_id(frame)
            if not 0 <= pid < len(self.traffic) or self.traffic.frames[pid] != frame:
                pid = self._by_bytes(frame, (rec >> 16) & 0xFF, self._exc_taken)
            self._exc_taken.add(pid)
            self._exc.append((pid, self.reasons.exception(rec & 0xFF).name))
            self._free(i)
        self._exc_read = n

    def _free(self, i: int) -> None:
        """Enqueue buffer i on the free list (the chip is paused between run slices)."""
        from npkit.toolchain.system.sysmap import SYS

        d = SYS.desc_addr(i)
        head, tail, count = (self.chip.read32("sram", SYS.freelist_q + 4 * j) for j in range(3))
        self.chip.write32("sram", d, 0)
        if count == 0:
            self.chip.write32("sram", SYS.freelist_q, d)
        else:
            self.chip.write32("sram", tail, d)
        self.chip.write32("sram", SYS.freelist_q + 4, d)
        self.chip.write32("sram", SYS.freelist_q + 8, count + 1)

    def exceptions(self) -> list[tuple[int, str]]:
        self.service_exceptions()
        return list(self._exc)

    def _by_bytes(self, frame: bytes, port: int, taken: set[int]) -> int:
        """The earliest input with these bytes on this port not yet attributed (frames
        the generator could not tag, e.g. ARP)."""
        if self._index is None:
            self._index = {}
            for i in range(len(self.traffic)):
                self._index.setdefault((self.traffic.ports[i], self.traffic.frames[i]), []).append(
                    i
                )
        for i in self._index.get((port, frame), []):
            if i not in taken:
                return i
        return -1

    def drop_counters(self) -> dict[str, int]:
        from npkit.toolchain.system.sysmap import read_counters

        return read_counters(self.chip)["drops"]

    def _software(self, chip: Any) -> dict[str, list[tuple[int, str]]]:
        from npkit.emulator.traffic.oracle import Drop

        exc = self.exceptions()
        seen = {pid for pid, _ in exc}
        fwd, _, _ = self.run._match()
        msf = {pid for pid, _, _ in self.run.msf_drops}
        counters = Counter(self.drop_counters())
        drops = []
        left: list[int] = []
        for pid in range(self.run.pushed):
            if pid in seen or pid in fwd or pid in msf:
                continue
            o = self.oracle.process(self.traffic.frames[pid], self.traffic.ports[pid])
            if isinstance(o, Drop) and counters[o.reason] > 0:
                counters[o.reason] -= 1
                drops.append((pid, o.reason))
            else:
                left.append(pid)
        # resource drops (no buffer, queue full, ...) depend on timing, not on the
        # packet: they go to the earliest packets with no other fate
        for name in ("buffer_exhausted", "queue_full", "exception_ring_full"):
            while counters[name] > 0 and left:
                counters[name] -= 1
                drops.append((left.pop(0), name))
        self.unattributed_drops = {k: v for k, v in counters.items() if v}
        return {"drops": drops, "exceptions": exc}

    def compare(self) -> dict[str, int]:
        """Every transmitted frame against the oracle's prediction for its input."""
        from npkit.emulator.traffic.oracle import Forward

        fwd, unmatched, dups = self.run._match()
        res: Counter[str] = Counter()
        last: dict[tuple[int, int], int] = {}
        for port, frames in self.run.out.items():
            for _t, data in frames:
                pid = _tag_id(data)
                if pid < 0:
                    res["untagged"] += 1
                    continue
                o = self.oracle.process(self.traffic.frames[pid], self.traffic.ports[pid])
                if not isinstance(o, Forward):
                    res["wrong_outcome"] += 1
                elif o.port != port:
                    res["wrong_port"] += 1
                elif o.data != data:
                    res["wrong_bytes"] += 1
                else:
                    res["matched_forward"] += 1
                flow = (self.traffic.ports[pid], port)
                if last.get(flow, -1) > pid:
                    res["reordered"] += 1
                last[flow] = pid
        for pid, reason in self.exceptions():
            if pid < 0:
                res["unmatched_exception"] += 1
                continue
            o = self.oracle.process(self.traffic.frames[pid], self.traffic.ports[pid])
            res["matched_exception" if getattr(o, "reason", "") == reason else "wrong_reason"] += 1
        res["unmatched"] += len(unmatched)
        res["duplicates"] += len(dups)
        return dict(res)


def latency_us(run: RouterRun) -> list[float]:
    """Per forwarded packet: departure (first wire byte out) - arrival (first in), us."""
    tr = run.traffic
    out = []
    for _port, frames in run.run.out.items():
        for t, data in frames:
            pid = _tag_id(data)
            if 0 <= pid < len(tr):
                out.append((t - tr.times[pid]) / 1000.0)
    return out


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def run_router(layout: str, params: dict[str, Any] | None, traffic: Any, duration_ns: int,
               drain_ns: int = 300_000, routes: str | Path | None = None,
               router_config: str | Path | None = None, progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """Run, then summarise: per port throughput, loss, latency, ME use, conservation."""
    rr = RouterRun(layout, params, traffic, routes, router_config)
    t0 = time.perf_counter()

    def show(now: int) -> None:
        rr.service_exceptions()
        if progress and now % 500_000 < 20_000:
            print(f"\r  {now / 1e6:6.2f} ms emulated", end="", file=sys.stderr, flush=True)

    rr.run.run(duration_ns, progress=show)
    measured_cycles = rr.chip.cycle
    me_busy = {m["me"]: (m["executing_cycles"] + m["aborted_cycles"]) / max(1, rr.chip.cycle)
               for m in rr.chip.stats()["mes"]}  # fmt: skip
    rr.run.run(drain_ns, progress=show)
    if progress:
        print(file=sys.stderr)
    host_s = time.perf_counter() - t0
    rep = rr.run.report()
    cmp_ = rr.compare()
    lat = latency_us(rr)
    tr = rr.traffic
    seconds = duration_ns / 1e9
    # what the oracle sends to each output port: above 1 Gb/s a port cannot keep up
    to_port: Counter[int] = Counter()
    for i in range(rr.run.pushed):
        o = rr.oracle.process(tr.frames[i], tr.ports[i])
        if getattr(o, "kind", "") == "forward":
            pre, fcs, ifg = tr.wire.get(int(o.port), (8, 4, 12))  # type: ignore[attr-defined]
            to_port[int(o.port)] += (tr.lens[i] + pre + fcs + ifg) * 8  # type: ignore[attr-defined]
    ports = []
    for row in rep["ports"]:
        p = row["port"]
        pre, fcs, ifg = tr.wire.get(p, (8, 4, 12))
        over = pre + fcs + ifg  # wire bytes a frame costs beyond its pcap bytes
        tx_bits = sum((len(d) + over) * 8 for t, d in rr.run.out[p] if t < duration_ns)
        offered_bits = sum((tr.lens[i] + over) * 8 for i in range(len(tr)) if tr.ports[i] == p)
        ports.append({
            "port": p, "offered": row["offered"], "forwarded": row["forwarded"],
            "transmitted": row["transmitted"], "dropped": row["dropped"],
            "exceptions": row["exceptions"], "in_flight": row["in_flight"],
            "tx_mbps": round(tx_bits / seconds / 1e6, 1),
            "offered_mbps": round(offered_bits / seconds / 1e6, 1),
            "demand_out_mbps": round(to_port[p] / seconds / 1e6, 1),
        })  # fmt: skip
    blocks = {}
    for prog in rr.image.programs:
        blocks[prog.name] = round(sum(me_busy[m] for m in prog.mes) / len(prog.mes), 3)
    tot = rep["totals"]
    offered = tot["offered"]
    lost = offered - tot["forwarded"] - sum(tot["exceptions"].values()) - sum(
        v for k, v in tot["dropped"].items()
        if k not in ("rbuf_full", "no_rx_thread", "buffer_exhausted", "queue_full", "tbuf_underrun",
                     "exception_ring_full")
    )  # fmt: skip
    predicted_fwd = sum(
        1 for i in range(rr.run.pushed)
        if getattr(rr.oracle.process(tr.frames[i], tr.ports[i]), "kind", "") == "forward"
    )  # fmt: skip
    return {
        "layout": layout, "params": rr.params, "duration_ms": duration_ns / 1e6,
        "emulated_cycles": measured_cycles, "host_s": round(host_s, 2),
        "emulated_ms_per_host_s": round((duration_ns + drain_ns) / 1e6 / host_s, 2),
        "ports": ports,
        "totals": {**tot, "predicted_forward": predicted_fwd, "lost": lost,
                   "loss_pct": round(100 * (predicted_fwd - tot["forwarded"]) / max(1, predicted_fwd), 3)},
        "latency_us": {"mean": round(sum(lat) / len(lat), 3) if lat else 0.0,
                       "p50": round(pct(lat, 50), 3), "p99": round(pct(lat, 99), 3),
                       "max": round(max(lat), 3) if lat else 0.0},
        "me_utilisation": blocks,
        "comparison": cmp_,
        "conservation": {"balanced": rep["balanced"], "problems": rep["problems"],
                         "in_flight": tot["in_flight"],
                         "unattributed_drops": getattr(rr, "unattributed_drops", {})},
    }  # fmt: skip


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"router {s['layout']} {s['params']}: {s['duration_ms']} ms emulated in {s['host_s']} s "
             f"({s['emulated_ms_per_host_s']} ms/s)", "",
             f"{'port':>4} {'offered':>8} {'fwd':>8} {'Mb/s in':>8} {'Mb/s out':>9} {'demand':>8}  drops / exceptions",
             "  (demand: what the oracle routes to the port, Mb/s on the wire; above 1000 it must queue and drop)"]  # fmt: skip
    for p in s["ports"]:
        lines.append(f"{p['port']:>4} {p['offered']:>8} {p['forwarded']:>8} {p['offered_mbps']:>8} "
                     f"{p['tx_mbps']:>9} {p['demand_out_mbps']:>8}  {p['dropped'] or ''} {p['exceptions'] or ''}")  # fmt: skip
    t = s["totals"]
    lat = s["latency_us"]
    lines += ["", f"forwarded {t['forwarded']} of {t['predicted_forward']} the oracle forwards "
              f"(loss {t['loss_pct']} %), in flight {t['in_flight']}",
              f"latency us: mean {lat['mean']} p50 {lat['p50']} p99 {lat['p99']} max {lat['max']}",
              "ME utilisation: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in s["me_utilisation"].items()),
              f"comparison with the oracle: {s['comparison']}",
              f"conservation: {'balanced' if s['conservation']['balanced'] else 'NOT balanced'}"
              + (f" {s['conservation']['problems']}" if s["conservation"]["problems"] else "")]  # fmt: skip
    return "\n".join(lines)


@click.command("demo")
@click.option("--layout", default="pipelined", show_default=True)
@click.option("-D", "defines", multiple=True, metavar="PARAM=VAL", help="layout parameter")
@click.option(
    "--ms", "ms", default=10.0, show_default=True, help="emulated milliseconds of traffic"
)
@click.option("--routes", type=click.Path(exists=True, dir_okay=False),
              help="route file (default: 10,000 random prefixes)")  # fmt: skip
@click.option("--traffic", type=click.Path(exists=True), default=str(SEED003), show_default=True)
@click.option("--json", "as_json", is_flag=True)
def demo_cmd(layout: str, defines: tuple[str, ...], ms: float, routes: str | None, traffic: str,
             as_json: bool) -> None:  # fmt: skip
    """Build the router, load a route table, run 5 x 1 Gb/s of seed 003's packets."""
    import tempfile

    from npkit.emulator.traffic.source import load_traffic_source
    from npkit.toolchain.system.layout import coerce

    params = {}
    for d in defines:
        k, _, v = d.partition("=")
        params[k] = coerce(v)
    duration = int(ms * 1e6)
    with tempfile.TemporaryDirectory() as tmp:
        if routes is None:
            routes = str(Path(tmp) / "routes-10k.txt")
            make_routes(routes, 10_000)
        router_yaml, spec = with_routes(Path(tmp), Path(routes), Path(traffic))
        tr = load_traffic_source(spec, duration)
        s = run_router(layout, params, tr, duration, routes=routes, router_config=router_yaml,
                       progress=not as_json and sys.stderr.isatty())  # fmt: skip
    click.echo(json.dumps(s, indent=2) if as_json else format_summary(s))


def make_routes(path: str, count: int) -> None:
    """A random BGP-like table for the example router (`npk traffic routes`)."""
    from click.testing import CliRunner

    from npkit.toolchain.cli import main

    res = CliRunner().invoke(main, ["traffic", "routes", "--count", str(count), "--seed", "1",
                                    "--config", str(ROOT / "examples" / "traffic" / "router.yaml"),
                                    "-o", path])  # fmt: skip
    if res.exit_code != 0:
        raise click.ClickException(f"npk traffic routes failed: {res.output}")


def with_routes(tmp: Path, routes: Path, traffic: Path) -> tuple[Path, Path]:
    """The example router with `routes` as its table, and a copy of the traffic spec
    that uses it: the microcode, the oracle and the generator's destinations then all
    see the same table."""
    import yaml

    router = yaml.safe_load((ROOT / "examples" / "traffic" / "router.yaml").read_text())
    router["routes"] = str(routes.resolve())
    router_yaml = tmp / "router.yaml"
    router_yaml.write_text(yaml.safe_dump(router))
    if traffic.is_dir():
        return router_yaml, traffic
    spec = yaml.safe_load(traffic.read_text())
    spec["router"] = str(router_yaml)
    spec_path = tmp / "traffic.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    return router_yaml, spec_path
