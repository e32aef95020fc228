"""The soak (`make soak`, issue 48): the router at 5 x 1 Gb/s, as a user runs it
(`npk link`, `npk run ... --control-socket`), while its control socket is abused and its
daemon killed, and with hostile frames on the wire.  Every run must end with verdict ok
and exit 0: nothing lost, nothing misrouted, the books balanced.

Rounds, in turn, for SOAK_MINUTES (default 25; never past 30) on both layouts:
  abuse    clients that send and never read, idle connections, over-long lines, routes
           the schema refuses, while an operator's `stats` must still be answered
  storm    a route add/del storm (valid routes) during the traffic
  kill     the storm, with the daemon killed and restarted mid-run
  hostile  seed-003 traffic and every error kind, with bytes of the frames mutated

Prints one JSON object (figures per round kind and the failures) and exits 1 on any
failed run.  Traffic goes to no address: everything is inside the emulator and over
Unix sockets in a temporary directory."""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NPK = str(ROOT / ".venv" / "bin" / "npk")
SPEC = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"
ERRORS_SPEC = ROOT / "examples" / "traffic" / "errors.yaml"
REFUSED_ROUTES = ["add 10.0.0.1/32 via 10.0.0.2", "add 10.0.1.0/24 via 10.0.0.2", "add 127.0.0.0/8 via 10.0.0.2",
                  "add 224.0.0.0/4 via 10.0.0.2", "add 0.0.0.0/0 via 10.0.0.2", "add 1.2.3.0/24 via 10.0.0.1",
                  "add 255.255.255.255/32 via 10.0.0.2", "add 1.2.3.0/24 via 10.0.0.255",
                  "show 300.1.1.1", "show\x00 1.2.3.4"]  # fmt: skip
NEXT_HOPS = [f"10.0.{p}.{h}" for p in range(5) for h in (2, 3)]


def connect(path: Path, timeout: float = 5.0) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    return s


def request(path: Path, line: str, timeout: float = 60.0) -> tuple[list[str] | None, float]:
    """One command, its answer lines as the daemon wrote them (an "error: ..." line
    included; None: no daemon answered) and the host seconds it took."""
    from npkit.toolchain.system.control import ControlSocketError, control_request

    t0 = time.monotonic()
    try:
        answer: list[str] | None = [*control_request(path, line, timeout_s=timeout), "ok"]
    except ControlSocketError as e:  # the daemon's own errors; the socket's name its path
        answer = None if str(e).startswith(str(path)) else [f"error: {e}"]
    return answer, time.monotonic() - t0


class Clients:
    """The abuse of one round, on threads, until `stop` is set."""

    def __init__(self, sock: Path, kind: str, seed: int) -> None:
        self.sock, self.kind, self.rng = sock, kind, random.Random(seed)
        self.stop = threading.Event()
        self.figures: dict[str, Any] = {"requests": 0, "answered": 0, "refused_as_expected": 0,
                                        "accepted_bad": [], "operator_s": [], "locked_out": 0}  # fmt: skip
        self.threads: list[threading.Thread] = []
        self.held: list[socket.socket] = []

    def start(self) -> None:
        for _ in range(200):  # the daemon opens its socket once it is up
            if self.sock.exists():
                break
            time.sleep(0.1)
        if self.kind == "abuse":
            self._spawn(self._abuse)
        if self.kind in ("storm", "kill"):
            self._spawn(self._storm)
        self._spawn(self._operator)

    def _spawn(self, fn: Any) -> None:
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)

    def _abuse(self) -> None:
        while not self.stop.is_set():
            for line in REFUSED_ROUTES:  # what the router-config schema refuses
                self._expect_refusal(line)
            for _ in range(4):  # idle connections
                s = connect(self.sock)
                if s is not None:
                    self.held.append(s)
            s = connect(self.sock)  # sends and never reads
            if s is not None:
                self.held.append(s)
                try:
                    s.settimeout(0.5)
                    for _ in range(200):
                        s.sendall(b"show\n")
                except OSError:
                    pass
            s = connect(self.sock)  # an over-long line whose tail is a command
            if s is not None:
                try:
                    s.sendall(b"X" * 511 + b"stats\n")
                except OSError:
                    pass
                s.close()
            self.stop.wait(2.0)

    def _expect_refusal(self, line: str) -> None:
        answer, _ = request(self.sock, line)
        if answer is None or self.stop.is_set():
            return
        self.figures["requests"] += 1
        self.figures["answered"] += 1
        if any("too many connections" in a for a in answer):
            self.figures["locked_out"] += 1
        elif any(a.startswith("error") for a in answer):
            self.figures["refused_as_expected"] += 1
        else:
            self.figures["accepted_bad"].append(line)

    def _storm(self) -> None:
        added: list[str] = []
        while not self.stop.is_set():
            if added and self.rng.random() < 0.4:
                line = f"del {added.pop(self.rng.randrange(len(added)))}"
            else:
                prefix = f"{self.rng.randrange(30, 60)}.{self.rng.randrange(256)}.{self.rng.randrange(256)}.0/24"
                line = f"add {prefix} via {self.rng.choice(NEXT_HOPS)}"
                added.append(prefix)
            answer, _ = request(self.sock, line, timeout=30.0)
            if answer is None:  # not up yet, restarting, or the run is over
                self.stop.wait(0.2)
                continue
            self.figures["requests"] += 1
            self.figures["answered"] += 1
            if any("too many connections" in a for a in answer):
                self.figures["locked_out"] += 1

    def _operator(self) -> None:
        while not self.stop.wait(0.5):
            answer, took = request(self.sock, "stats")
            if answer is None:
                continue
            if any("too many connections" in a for a in answer):
                self.figures["locked_out"] += 1
            else:
                self.figures["operator_s"].append(round(took, 3))

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        for s in self.held:
            s.close()
        ops = self.figures["operator_s"]
        self.figures["operator_max_s"] = max(ops, default=None)
        self.figures["operator_answers"] = len(ops)
        del self.figures["operator_s"]
        return self.figures


def mutate_captures(src: Path, dst: Path, seed: int) -> int:
    """Copy the pcaps of `src` into `dst` with bytes of one frame in three changed (header
    fields, options, lengths: what a careless or hostile sender puts on the wire)."""
    rng = random.Random(seed)
    dst.mkdir(parents=True, exist_ok=True)
    changed = 0
    for pcap in sorted(src.glob("port*.pcap")):
        data = bytearray(pcap.read_bytes())
        off = 24
        while off + 16 <= len(data):
            incl = struct.unpack_from("<I", data, off + 8)[0]
            frame = off + 16
            if incl >= 20 and rng.random() < 1 / 3:
                for _ in range(rng.randint(1, 4)):
                    k = frame + rng.randrange(min(incl, 64))
                    data[k] = rng.randrange(256)
                changed += 1
            off = frame + incl
        (dst / pcap.name).write_bytes(bytes(data))
    for other in src.iterdir():
        if other.suffix != ".pcap":
            (dst / other.name).write_bytes(other.read_bytes())
    return changed


def run_round(kind: str, layout: str, image: Path, work: Path, n: int, ms: float) -> dict[str, Any]:
    sock = work / f"npkd-{n}.sock"
    traffic: Path = SPEC
    extra: list[str] = []
    row: dict[str, Any] = {"round": n, "kind": kind, "layout": layout}
    if kind == "hostile":
        gen = work / f"gen-{n}"
        spec = SPEC if n % 2 else ERRORS_SPEC
        subprocess.run([NPK, "traffic", "gen", str(spec), "-o", str(gen), "--seed", str(1000 + n),
                        "--duration-ns", str(int(ms * 1e6))], check=True, capture_output=True)  # fmt: skip
        traffic = work / f"hostile-{n}"
        row["mutated_frames"] = mutate_captures(gen, traffic, n)
        row["traffic"] = spec.name
    if kind == "kill":
        extra = ["--kill-control-at", f"{ms * 0.3:g}", "--restart-control-at", f"{ms * 0.5:g}"]
    cmd = [NPK, "run", str(image), "--traffic", str(traffic), "--duration-ms", f"{ms:g}",
           "--control-socket", str(sock), "--json", *extra]  # fmt: skip
    clients = Clients(sock, kind, n)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients.start()
    out, err = proc.communicate()
    row["clients"] = clients.finish()
    row["host_s"] = round(time.monotonic() - t0, 1)
    row["exit"] = proc.returncode
    try:
        rep = json.loads(out)
    except json.JSONDecodeError:
        row["error"] = (err or out)[-2000:]
        return row
    verdict = rep.get("verdict", {})
    row["verdict_ok"] = bool(verdict.get("ok"))
    if not row["verdict_ok"]:
        row["reasons"] = verdict.get("reasons")
    totals = rep.get("totals") or rep.get("summary") or {}
    for key in ("offered", "forwarded", "dropped", "exceptions", "in_flight"):
        if key in totals:
            row[key] = totals[key]
    if row["clients"]["accepted_bad"]:
        row["verdict_ok"] = False
        row.setdefault("reasons", []).append(f"the daemon accepted {row['clients']['accepted_bad']}")
    if row["clients"]["locked_out"]:
        row["verdict_ok"] = False
        row.setdefault("reasons", []).append(f"{row['clients']['locked_out']} command(s) locked out by idle clients")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "25")))
    ap.add_argument("--ms", type=float, default=50.0, help="emulated ms of traffic per round")
    args = ap.parse_args()
    minutes = min(args.minutes, 30.0)
    deadline = time.monotonic() + minutes * 60
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="npk-soak-") as tmp:
        work = Path(tmp)
        images = {}
        for layout in ("pipelined", "parallel"):
            images[layout] = work / f"{layout}.elf"
            subprocess.run([NPK, "link", layout, "-o", str(images[layout])], check=True, capture_output=True)
        kinds = ("abuse", "storm", "kill", "hostile")
        n = 0
        while time.monotonic() < deadline or n < len(kinds):
            kind, layout = kinds[n % len(kinds)], ("pipelined", "parallel")[(n // len(kinds)) % 2]
            row = run_round(kind, layout, images[layout], work, n, args.ms)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            n += 1
    failed = [r for r in rows if r.get("exit") != 0 or not r.get("verdict_ok")]
    summary = {"minutes": round(minutes, 1), "rounds": len(rows), "failed": failed,
               "by_kind": {k: {"rounds": sum(1 for r in rows if r["kind"] == k),
                               "offered": sum(r.get("offered", 0) for r in rows if r["kind"] == k),
                               "forwarded": sum(r.get("forwarded", 0) for r in rows if r["kind"] == k),
                               "requests": sum(r["clients"]["requests"] for r in rows if r["kind"] == k),
                               "host_s": round(sum(r["host_s"] for r in rows if r["kind"] == k), 1),
                               "operator_max_s": max((r["clients"]["operator_max_s"] or 0 for r in rows
                                                      if r["kind"] == k), default=None)}
                           for k in ("abuse", "storm", "kill", "hostile")},
               "ok": not failed}  # fmt: skip
    print(json.dumps(summary, indent=1))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
