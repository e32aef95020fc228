"""One run of the router for an experiment: configuration in, flat responses out.

This module is the only place the experiment package touches the router harness
(npkit.toolchain.system.router_run.RouterRun on npkit.emulator.traffic_run.TrafficRun).  `run_one` is what a
worker executes (local process pool or Dask); it never raises: a failure comes back as
a record with the error.

A run has two parts:

- **steady**: the traffic spec as configured (e.g. 5 x 1 Gb/s) for `min_ms` .. `max_ms`
  of emulated time in windows of `window_us`; per window the output rate (wire bits of
  the frames whose first byte left in the window), the mean latency of those frames
  (first byte in -> first byte out) and the busy fraction of every ME and memory
  channel.  Warm-up is cut with MSER-5 and the run stops when the stopping responses'
  CIs are within the target precision (npkit.toolchain.experiment.steady).
- **capacity** (when the design asks for it): RFC 2544 trials at per-port link rates
  above 1 Gb/s (npkit.toolchain.experiment.capacity); every trial is a fresh router.

Chip config values come from a derived chip YAML written in the run's work directory;
per-port link rates from the traffic spec's `link_bps`, which the MSF follows.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .capacity import CapacitySettings, Trial, search
from .steady import SteadySettings, judge, mean_ci

# the numeric responses a run records (steady_run, capacity_run), and the families named
# after a block, unit, drop reason or series; a design's `responses:` are checked against them
RESPONSES = ("throughput_mbps", "throughput_ci_mbps", "throughput_pct_line", "offered_mbps",
             "throughput_pct_offered", "latency_mean_us", "latency_p50_us", "latency_p99_us", "loss_pct",
             "lost", "in_flight", "exceptions", "warmup_us", "measured_ms", "windows", "link_mbps", "ports",
             "util_me_max", "capacity_mbps", "capacity_link_mbps", "capacity_trials", "saturation_mbps",
             "capacity_mpps", "capacity_pct_line", "offered_mpps", "throughput_mpps", "rc_hit_rate", "rc_sets_filled",
             "rc_ranges_total", "batch_mean")  # fmt: skip
# group_mpps_<group>, group_latency_us_<group>: the packets a second of each group of the
# application's model (emulator/traffic/groups.py: the SPP's slices) that left, and their
# mean latency, over the kept windows; sched_: qm drr / dfq (sched_judge)
RESPONSE_FAMILIES = ("util_", "drop_", "ci_rel_", "sat_util_me_", "sched_", "group_mpps_", "group_latency_us_")
# losses to a resource (timing), as opposed to drops the oracle predicts for the packet
RESOURCE_DROPS = ("rbuf_full", "no_rx_thread", "tbuf_underrun", "buffer_exhausted", "queue_full",
                  "exception_ring_full")  # fmt: skip
IP_OFFSET = 34  # Ethernet + IPv4 header: `traffic.ip_payload` counts the bytes after it
# linked images by Env.link_key: a run's capacity trials, and the replicates of a design
# point that land on the same worker, link the same image once (bounded, per process)
_IMAGES: dict[str, Any] = {}
_IMAGES_MAX = 6
# whether a run reads its traffic ahead in a child process (TrafficRun's `ahead`; None:
# where safe); a pool worker's initializer sets it (read_ahead_for)
_READ_AHEAD: dict[str, bool | None] = {"ahead": None}


def read_ahead_for(workers: int, cores: int | None = None) -> bool | None:
    """The read-ahead of `workers` local workers on `cores` cores: each worker's child
    reader is a second busy process, so with more than half a core a worker they would
    compete with the workers themselves: off (False); otherwise where safe (None)."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return None if 2 * workers <= cores else False


def set_read_ahead(ahead: bool | None) -> None:
    """Pool worker initializer: the read-ahead of every run in this process."""
    _READ_AHEAD["ahead"] = ahead


def read_ahead() -> bool | None:
    """This process's read-ahead setting (set_read_ahead)."""
    return _READ_AHEAD["ahead"]


@dataclass
class Env:
    """A run's prepared inputs (files in its work directory)."""

    layout: str | dict[str, Any]
    params: dict[str, Any]
    chip: Path
    spec: dict[str, Any]
    routes: Path | None
    router: Path
    work: Path
    link_key: str = ""  # what the linked image depends on (not the chip, not the traffic)
    app: Any = None  # npkit.toolchain.system.app.App: the design's application (base.app), or None

    def spec_file(self, name: str, **top: Any) -> Path:
        spec = {**self.spec, **top}
        path = self.work / name
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path


# ---------------------------------------------------------------------------- inputs


def _set_path(tree: dict[str, Any], dotted: str, value: Any, scale: bool = False) -> None:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    node = tree
    for k in keys[:-1]:
        nxt = node.get(k)
        if not isinstance(nxt, dict):
            if scale:
                raise ValueError(f"{dotted}: no value to scale")
            nxt = node[k] = {}
        node = nxt
    last = keys[-1]
    if scale:
        if not isinstance(node.get(last), (int, float)) or isinstance(node.get(last), bool):
            raise ValueError(f"{dotted}: no numeric value to scale (found {node.get(last)!r})")
        old = node[last]
        new = old * float(value)
        node[last] = int(round(new)) if isinstance(old, int) else new
    else:
        node[last] = value


def _chip_yaml(cfg: dict[str, Any], work: Path) -> Path:
    from npkit.emulator.binding import load_config

    raw = load_config(cfg["chip"])
    for k, v in cfg["chip_set"].items():
        _set_path(raw, k, v)
    for k, v in cfg["chip_scale"].items():
        _set_path(raw, k, v, scale=True)
    path = work / "chip.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    load_config(path)  # the result must still be a complete chip config
    return path


def _apply_payload(spec: dict[str, Any], payload: int) -> None:
    """Frame size for `payload` bytes after the IPv4 header, per the spec's wire model
    and protocol (never below the smallest frame the protocol fits in)."""
    from npkit.emulator.traffic.spec import MIN_PCAP_LEN, WIRE_PRESETS

    d = spec.setdefault("defaults", {})
    wire = d.get("wire", spec.get("wire", "ethernet"))
    fcs = (WIRE_PRESETS.get(wire) or {}).get("fcs", 4) if isinstance(wire, str) else int(wire.get("fcs", 4))
    proto = d.get("protocol", "udp")
    protos = [proto] if isinstance(proto, str) else [p for p, w in proto.items() if w > 0]
    smallest = max(MIN_PCAP_LEN[p] for p in protos) + fcs
    d["size"] = max(smallest, IP_OFFSET + int(payload) + fcs)


def prepare(cfg: dict[str, Any], work: Path) -> Env:
    """Write the run's chip config, route table, router config and traffic spec."""
    from npkit.asm.base.reading import load_yaml
    from npkit.toolchain.system.paths import DEFAULT_ROUTER
    from npkit.toolchain.system.tables import demo_routes, router_with_routes

    app = _app(cfg)
    base_router = (app.file("router") or DEFAULT_ROUTER) if app is not None else DEFAULT_ROUTER
    spec_path = Path(cfg["traffic"])
    routes: Path | None = None
    if isinstance(cfg["routes"], int):
        # the cached table, not a copy in `work`: the image a worker keeps for the next
        # run (router_run) names it, and the control plane reads it when that run starts
        routes = demo_routes(cfg["routes"], router=base_router)
    elif cfg["routes"]:
        routes = Path(cfg["routes"])
    spec = load_yaml(spec_path, what="traffic spec").data  # a regular file, bounded (and checked below)
    if routes is not None:
        router = router_with_routes(routes, base_router)
        spec["router"] = str(router)
    else:
        router = Path(str(spec["router"]))
        router = router if router.is_absolute() else (Path(cfg["traffic"]).parent / router).resolve()
        spec["router"] = str(router)
    spec["seed"] = cfg["seed"]
    payload = None
    for k, v in cfg["traffic_set"].items():
        if k == "ip_payload":
            payload = v
        else:
            _set_path(spec, k, v)
    for k, v in cfg["traffic_scale"].items():
        _set_path(spec, k, v, scale=True)
    if payload is not None:
        _apply_payload(spec, payload)
    layout: str | dict[str, Any] = cfg["layout"] if app is None else app.layout_file(cfg["layout"])
    if cfg["blocks"]:
        from npkit.toolchain.system.paths import LAYOUTS

        file = Path(str(layout)) if app is not None else LAYOUTS / f"{layout}.yaml"
        lay = yaml.safe_load(file.read_text())
        for name, changes in cfg["blocks"].items():
            if name not in lay["blocks"]:
                raise ValueError(f"block {name}: not in layout {layout} (has {', '.join(lay['blocks'])})")
            blk = lay["blocks"][name]
            for fld, v in changes.items():
                if fld == "defines":
                    blk.setdefault("defines", {}).update(v)
                elif fld == "variant":
                    blk.pop("source", None)
                    blk["variant"] = v
                else:
                    blk[fld] = v
        layout = lay
    key = json.dumps([layout, cfg["params"], cfg["routes"], cfg["traffic"], cfg["traffic_set"].get("router"),
                      *([cfg["app"]] if app is not None else [])], sort_keys=True)  # fmt: skip
    return Env(layout, dict(cfg["params"]), _chip_yaml(cfg, work), spec, routes, router, work, key, app)


def _app(cfg: dict[str, Any]) -> Any:
    """The run's application (a design's base.app), None without one."""
    if not cfg.get("app"):
        return None
    from npkit.toolchain.system.app import load_app

    return load_app(cfg["app"])


def check_config(cfg: dict[str, Any]) -> None:
    """What a run of `cfg` reads (chip config, traffic spec, layout and its parameters),
    checked without running it; ValueError names no file of the scratch directory."""
    from npkit.emulator.binding import EmulatorError
    from npkit.emulator.traffic.spec import spec_from_dict
    from npkit.toolchain.system.layout import load_layout

    with tempfile.TemporaryDirectory(prefix="npk-check-") as tmp:
        work = Path(tmp)
        try:
            env = prepare(cfg, work)
            spec_from_dict(env.spec, Path(cfg["traffic"]).parent)
            load_layout(env.layout, {"io": "msf", **env.params}, env.app.source_dirs if env.app is not None else None)
        except (ValueError, OSError, KeyError, TypeError, EmulatorError) as e:
            # the scratch chip config's lines mean nothing to the reader of the design
            text = re.sub(re.escape(str(work / "chip.yaml")) + r"(:\d+)?", "chip config", str(e))
            text = text.replace(str(work), "")
            raise ValueError(text.replace("<traffic spec>", f"traffic spec {cfg['traffic']}")) from None


def router_run(env: Env, traffic: Any) -> Any:
    """A RouterRun on the run's chip config.  Every capacity trial of a run (and the
    replicates of a design point on the same worker) link the same image: it is linked
    once and kept (bounded, per process)."""
    from npkit.toolchain.system.link import link
    from npkit.toolchain.system.router_run import RouterRun

    params = {"io": "msf", **env.params}
    key = env.link_key + json.dumps(params, sort_keys=True, default=str)
    if key not in _IMAGES:
        while len(_IMAGES) >= _IMAGES_MAX:
            del _IMAGES[next(iter(_IMAGES))]
        _IMAGES[key] = link(env.layout, params, env.routes, env.router, app=env.app)
    # the per-window series read every transmitted frame (`record` keeps them in run.out)
    return RouterRun(_IMAGES[key], traffic, chip_config=str(env.chip), record=True, ahead=read_ahead())


def _wire_over(tr: Any, port: int) -> int:
    pre, fcs, ifg = tr.wire.get(port, (8, 4, 12))
    return pre + fcs + ifg


# ---------------------------------------------------------------------------- windows


class Recorder:
    """Per-window series of a running RouterRun: output, latency, ME and unit busy."""

    def __init__(self, rr: Any, window_ns: int) -> None:
        self.rr = rr
        self.w = window_ns
        self.blocks = {p.name: list(p.mes) for p in rr.image.programs if not p.name.startswith("host_")}
        self.bits: list[float] = []
        self.pkts: list[int] = []
        self.lat_sum: list[float] = []
        self.lats: list[list[float]] = []
        self._seen = dict.fromkeys(rr.run.out, 0)
        self.me_busy: list[dict[str, float]] = []
        self.unit_busy: list[dict[str, float]] = []
        self._last = self._snapshot()

    def _snapshot(self) -> tuple[int, dict[int, int], dict[str, list[int]]]:
        st = self.rr.chip.stats()
        mes = {m["me"]: m["executing_cycles"] + m["aborted_cycles"] for m in st["mes"]}
        units = {u: [c["busy_cycles"] for c in chans] for u, chans in st["units"].items()}
        return st["cycle"], mes, units

    def sample(self) -> None:
        """Call after each window of emulated time."""
        now = self._snapshot()
        cyc = max(1, now[0] - self._last[0])
        self.me_busy.append({b: sum(now[1][m] - self._last[1][m] for m in mes) / (cyc * len(mes))
                             for b, mes in self.blocks.items()})  # fmt: skip
        self.unit_busy.append({u: sum(a - b for a, b in zip(now[2][u], self._last[2][u], strict=True))
                               / (cyc * max(1, len(now[2][u]))) for u in now[2]})  # fmt: skip
        self._last = now
        self._collect()

    def _grow(self, k: int) -> None:
        while len(self.bits) <= k:
            self.bits.append(0.0)
            self.pkts.append(0)
            self.lat_sum.append(0.0)
            self.lats.append([])

    def _collect(self) -> None:
        from npkit.toolchain.system.router_run import tag_id

        tr = self.rr.traffic
        for port, frames in self.rr.run.out.items():
            over = _wire_over(tr, port)
            for t, data in frames[self._seen[port] :]:
                k = t // self.w
                self._grow(k)
                self.bits[k] += (len(data) + over) * 8
                self.pkts[k] += 1
                pid = tag_id(data)
                if 0 <= pid < len(tr):
                    lat = (t - tr.times[pid]) / 1000.0
                    self.lat_sum[k] += lat
                    self.lats[k].append(lat)
            self._seen[port] = len(frames)

    def complete(self) -> int:
        """Windows whose departures are all known (a frame is drained once it has left)."""
        lag = 1 + math.ceil(15_000 / self.w)  # a 1518-byte frame takes 12.3 us at 1 Gb/s
        return max(0, min(len(self.me_busy), self.rr.run.now_ns // self.w) - lag)

    def series(self) -> dict[str, list[float]]:
        n = self.complete()
        self._grow(n)
        mbps = [self.bits[k] / self.w * 1e3 for k in range(n)]
        lat = [self.lat_sum[k] / len(self.lats[k]) if self.lats[k] else math.nan for k in range(n)]
        # an empty window (nothing left the router) carries the latency before it
        last = next((x for x in lat if not math.isnan(x)), 0.0)
        for k in range(n):
            if math.isnan(lat[k]):
                lat[k] = last
            last = lat[k]
        return {"throughput_mbps": mbps, "latency_mean_us": lat}


# ---------------------------------------------------------------------------- steady part


def _offered_bits(tr: Any, lo_ns: int, hi_ns: int) -> float:
    return sum((tr.lens[i] + _wire_over(tr, tr.ports[i])) * 8 for i in range(len(tr))
               if lo_ns <= tr.times[i] < hi_ns)  # fmt: skip


def _pct(xs: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(xs, q)) if xs else math.nan


def steady_run(env: Env, s: SteadySettings) -> tuple[dict[str, Any], dict[str, Any]]:
    from npkit.emulator.traffic.source import load_traffic_source

    w = int(s.window_us * 1000)
    cap_ns = int(s.max_ms * 1e6)
    tr = load_traffic_source(env.spec_file("steady.yaml"), cap_ns).collect()
    rr = router_run(env, tr)
    rec = Recorder(rr, w)
    if rr.groups is not None:
        rr.groups.bin_ns = w
    check_ns = int(s.min_ms * 1e6)
    verdicts: dict[str, Any] = {}
    while True:
        rr.run.run(w)
        rec.sample()
        now = rr.run.now_ns
        if now < check_ns and now < cap_ns:
            continue
        series = rec.series()
        verdicts = {r: judge(series[r], s.confidence, s.precision) for r in s.stop_on if r in series}
        if all(v.precise(s.precision) for v in verdicts.values()) or now >= cap_ns:
            break
        check_ns = now + int(s.step_ms * 1e6)
    series = rec.series()
    n = len(series["throughput_mbps"])
    cut = max([v.cut for v in verdicts.values()], default=0)
    settled = all(v.settled for v in verdicts.values())
    precise = all(v.precise(s.precision) for v in verdicts.values())
    measured_ns = rr.run.now_ns
    rr.run.run(int(s.drain_us * 1000))
    rep = rr.run.report()
    rc = rr.range_cache() if "range_cache" in rr.image.meta else None  # lookup=range_cache: its counters
    batching = rr.batching() if int(env.params.get("batch", 1) or 1) > 1 else None  # batch=N: mean batch
    sched = rr.sched.summary() if rr.sched is not None else None  # qm drr / dfq: the scheduler's judge
    rr.close()  # its read-ahead child ends now, not when the collector finds the run
    lo_ns, hi_ns = cut * w, n * w
    kept = range(cut, n)
    nports = len(set(tr.ports)) or 1
    link = (tr.link_bps or 1_000_000_000) * nports
    lats = [x for k in kept for x in rec.lats[k]]
    thr_mean, thr_half = mean_ci(series["throughput_mbps"][cut:], s.confidence)  # over the kept part
    offered = _offered_bits(tr, lo_ns, hi_ns) / max(1, hi_ns - lo_ns) * 1e3
    tot = rep["totals"]
    drops = dict(tot["dropped"])
    lost = sum(v for k, v in drops.items() if k in RESOURCE_DROPS)
    me = {b: sum(rec.me_busy[k][b] for k in kept) / max(1, len(kept)) for b in rec.blocks}
    units = {u: sum(rec.unit_busy[k][u] for k in kept) / max(1, len(kept)) for u in rec.unit_busy[0]} if rec.unit_busy else {}
    resp: dict[str, Any] = {
        "throughput_mbps": thr_mean, "throughput_ci_mbps": thr_half,
        "throughput_pct_line": 100 * thr_mean * 1e6 / link,
        "offered_mbps": offered, "throughput_pct_offered": 100 * thr_mean / offered if offered else math.nan,
        "latency_mean_us": sum(lats) / len(lats) if lats else math.nan,
        "latency_p50_us": _pct(lats, 50), "latency_p99_us": _pct(lats, 99),
        "loss_pct": 100 * lost / max(1, tot["offered"]), "lost": lost,
        "in_flight": tot["in_flight"], "exceptions": sum(tot["exceptions"].values()),
        "warmup_us": lo_ns / 1000, "measured_ms": measured_ns / 1e6, "windows": n,
        "settled": settled, "precise": precise, "balanced": bool(rep["balanced"]),
        "link_mbps": (tr.link_bps or 1_000_000_000) / 1e6, "ports": nports,
    }  # fmt: skip
    resp["batch_mean"] = batching["mean_batch"] if batching is not None else 1.0  # unbatched: one at a time
    if rc is not None:
        resp.update({"rc_hit_rate": rc["hit_rate"], "rc_sets_filled": rc["sets_filled"],
                     "rc_ranges_total": rc["ranges_total"]})  # fmt: skip
    seconds = max(1, hi_ns - lo_ns) / 1e9
    resp["offered_mpps"] = sum(1 for i in range(len(tr)) if lo_ns <= tr.times[i] < hi_ns) / seconds / 1e6
    resp["throughput_mpps"] = sum(rec.pkts[k] for k in kept) / seconds / 1e6
    if rr.groups is not None:
        for name, mpps in rr.groups.rates_mpps(cut, n).items():
            resp[f"group_mpps_{name}"] = mpps
        for name, us in rr.groups.latency_means_us(cut, n).items():
            resp[f"group_latency_us_{name}"] = us
    if sched is not None:
        from npkit.toolchain.system.sched_judge import sched_responses

        resp.update(sched_responses(sched))
    for r, v in verdicts.items():
        resp[f"ci_rel_{r}"] = v.rel if math.isfinite(v.rel) else None
        resp[f"settled_{r}"] = v.settled
    for reason in sorted(set(RESOURCE_DROPS) | set(drops)):
        resp[f"drop_{reason}"] = drops.get(reason, 0)
    for b, v in me.items():
        resp[f"util_me_{b}"] = v
    if me:
        resp["util_me_max"] = max(me.values())
        resp["busiest_block"] = max(me, key=me.__getitem__)
    for u, v in units.items():
        if any(rec.unit_busy[k][u] for k in kept):
            resp[f"util_{u}"] = v
    out_series = {"window_us": s.window_us, "cut": cut, **series,
                  "me_max": [max(x.values()) if x else 0.0 for x in rec.me_busy[:n]]}  # fmt: skip
    return resp, out_series


# ---------------------------------------------------------------------------- capacity


def capacity_trial(env: Env, s: CapacitySettings, rate_mbps: float) -> Trial:
    from npkit.emulator.traffic.source import load_traffic_source

    t_ns = int(s.trial_ms * 1e6)
    tr = load_traffic_source(env.spec_file("trial.yaml", link_bps=int(rate_mbps * 1e6)), t_ns).collect()
    rr = router_run(env, tr)
    rr.run.run(t_ns)
    st = rr.chip.stats()
    busy = {m["me"]: (m["executing_cycles"] + m["aborted_cycles"]) / max(1, st["cycle"]) for m in st["mes"]}
    util = {p.name: sum(busy[m] for m in p.mes) / len(p.mes) for p in rr.image.programs
            if not p.name.startswith("host_")}  # fmt: skip
    half = t_ns // 2
    n_in = sum(1 for t in tr.times if half <= t < t_ns)
    n_out = 0
    out_bits = 0
    for port, frames in rr.run.out.items():
        over = _wire_over(tr, port)
        for t, d in frames:
            if half <= t < t_ns:
                n_out += 1
                out_bits += (len(d) + over) * 8
    rr.run.run(int(s.drain_us * 1000))
    tot = rr.run.report()["totals"]
    rr.close()
    drops = {k: v for k, v in tot["dropped"].items() if k in RESOURCE_DROPS}
    lost = sum(drops.values()) + max(0, tot["in_flight"])
    nports = len(set(tr.ports)) or 1
    keeps_pace = n_out >= n_in * (1 - s.keep_pace) - nports
    offered = _offered_bits(tr, 0, t_ns) / t_ns * 1e3
    detail = {"drops": drops, "keeps_pace": keeps_pace, "offered_mpps": round(len(tr) / t_ns * 1e3, 4),
              "util_me": {k: round(v, 4) for k, v in util.items()}}  # fmt: skip
    return Trial(rate_mbps, lost == 0 and keeps_pace, offered, out_bits / max(1, t_ns - half) * 1e3, lost, detail)


def capacity_run(env: Env, s: CapacitySettings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    res = search(lambda rate: capacity_trial(env, s, rate), s)
    sat = res["saturation"]
    resp: dict[str, Any] = {
        "capacity_mbps": res["capacity_mbps"], "capacity_link_mbps": res["capacity_per_port_mbps"],
        "capacity_censored": res["capacity_censored"], "capacity_trials": len(res["trials"]),
        "saturation_mbps": sat["out_mbps"],
        "capacity_mpps": res["best"]["offered_mpps"] if res["best"] else 0.0,
    }  # fmt: skip
    util = sat.get("util_me") or {}
    for b, v in util.items():
        resp[f"sat_util_me_{b}"] = v
    if util:
        resp["sat_busiest_block"] = max(util, key=util.__getitem__)
    drops = Counter(sat.get("drops") or {})
    resp["sat_top_drop"] = drops.most_common(1)[0][0] if drops else ""
    return resp, res["trials"]


# ---------------------------------------------------------------------------- entry


def run_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Execute one configuration: {"responses", "series", "capacity_trials"}."""
    steady = SteadySettings.from_dict(cfg["steady"])
    with tempfile.TemporaryDirectory(prefix="npk-exp-") as tmp:
        env = prepare(cfg, Path(tmp))
        resp, series = steady_run(env, steady)
        trials: list[dict[str, Any]] = []
        if cfg.get("capacity") is not None:
            cap = CapacitySettings.from_dict(cfg["capacity"])
            cresp, trials = capacity_run(env, cap)
            resp.update(cresp)
            resp["capacity_pct_line"] = 100 * resp["capacity_mbps"] / (resp["link_mbps"] * resp["ports"])
    return {"responses": resp, "series": series, "capacity_trials": trials}


def run_one(run: dict[str, Any]) -> dict[str, Any]:
    """Worker entry: one RunSpec (as a dict) -> the stored record. Never raises."""
    t0 = time.time()
    rec: dict[str, Any] = {k: run[k] for k in ("run_id", "point", "replicate", "seed", "levels", "config_hash")}
    rec["code_hash"] = run.get("code_hash", "")
    rec["started"] = t0
    try:
        rec.update(run_config(run["config"]))
        rec["status"] = "ok"
        rec["error"] = ""
    except Exception as e:  # a failed run is recorded, the others go on
        rec["status"] = "failed"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc(limit=8)
        rec["responses"] = {}
    rec["host_s"] = round(time.time() - t0, 3)
    return rec
