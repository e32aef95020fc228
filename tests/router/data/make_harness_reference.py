"""How tests/router/data/harness_reference.json is made.

History: the file was first made with the in-memory harness of commit 33db36a (traffic
generated into memory, the Python oracle, outputs matched at the end), and the streaming
harness that replaced it reproduced it exactly: summaries, capture bytes, history hashes.
The control plane on the XScale (the daemon answering the exception path) then changed
the router itself: the queue manager serves the control ring, the Python drainer is gone,
the demo table gained the control plane's routes and the router sends ICMP/ARP frames of
its own.  So the file was re-made on that tree, with this script, which runs each case
exactly as tests/router/test_harness_reference.py does; every re-made case was checked
against the oracle (no unmatched, duplicate or missing frame, conservation balanced).
It was re-made the same way when the queue manager's enqueue context began to take two
messages a swap after one had come (microcode/README.md §4.5): every count stayed the
same; the capture bytes (departure times), history hashes, latencies and utilisations
moved.
2026-11-24: re-made when tx's poller began to credit a frame as soon as its last
element has left the TBUF, tx its tokens past contexts filling frames and its fill six
elements a batch (at most two frames of more than a batch filling at once), the qm's
schedulers to skip the scan when no packet is queued and the blocks to take tok_put
without a swap when it is there (microcode/README.md §4.5,
§4.6; the 1518-byte latency of issue 16): every packet count stayed the same and every
case agreed with the oracle; capture bytes, history hashes, latencies, utilisations,
the rates over the run and the XScale's instruction and wait counts (its polling
follows the timing) moved.
Re-made when npkd began to answer TCP and unknown protocols sent to the router with
Protocol Unreachable and gained counters (icmp_protocol_unreachable,
local_proto_unsupported, own_dropped_no_arp): errors.yaml's one datagram of another
protocol to the router now gets a 3/2 (one more frame of the router's own, local_counted
1 -> 0); every other packet count stayed the same and every case agreed with the oracle;
the daemon's instruction counts, and with them the timing of cases with exceptions
(captures, latencies), moved; the history hashes did not.
Re-made when npkd's echo replies began to return the request's IP options (RFC 1812
4.3.3.6) and its option code was shared with them (a prespecified timestamp matching any
of the router's addresses, a source route read on past the router's own addresses): no
case sends an echo request with options, so every frame (bytes and order on every port),
every disposition, every packet count and every history hash stayed the same and every
case agreed with the oracle; the daemon runs a few more instructions on the option and
echo paths (imix +78, errors +851 over the run), so its wait cycles, the departure
times of frames near the exceptions (captures of parallel-imix and pipelined-errors,
at most 4.7 us), their latencies and utilisations moved.
Re-made when npkd began to keep the table of the buffers it owns in SRAM (a buffer
marked from when it takes it until it gives it away; a daemon started after a kill gives
back what is marked: `buffers_reclaimed`) and the run began to audit the buffers when it
ends idle: every case gained `conservation.buffers` (4,096 buffers: 4,088 free, 8 rx
spares, none the daemon's, none leaked) and `buffers_reclaimed` 0 (in `control_plane`
and its counters); every packet count and disposition, every port's frames (as a
multiset, and in order within every flow) stayed the same and every case agreed with
the oracle.  The daemon runs more instructions: its first start clears the table (seed003
71,100 -> 75,258 over the run, sram_writes 64 -> 69: the table's header and one counter
more), and every buffer it takes or gives away reads and writes the table (imix +5.4k,
errors +3.5k instructions); slower per record, it took more records a wake-up (errors
29 -> 25 wake-ups, 28 -> 27 interrupts; imix 15 -> 14), so it published its statistics
less often (errors sram_writes 2,214 -> 2,145 despite the table's writes; imix 1,077 ->
1,085) and its wait cycles moved.  The XScale runs in quanta of 20,000 instructions: in
pipelined-errors the ARP request for the first exception (an arp_miss handled just
after the daemon booted) now falls in the next quantum and leaves 27.5 us later (87.9 ->
115.4 us), inside the first 100 us, where the queue manager's poll of the control ring
finds it later: that case's history hash moved (the other four did not).  The departure
times of frames near exceptions moved (errors: the daemon's first three frames, 87.9 to
119.6 us, by 25.8 to 27.5 us, the others by at most 14.2 us; imix by at most 7.4 us),
on imix with them the interleaving of frames of different flows on some ports, and the
latencies (errors mean 15.398 -> 17.082 us) and utilisations (by at most 0.002).
Re-made when the source route's walk past the router's own addresses moved from
npkd's options() into pkt.c ip_options_route (and the model's options_route), a change
of structure only: the daemon runs 12 to 49 fewer instructions over a case, so its wait
cycles and, in pipelined-errors, the departure times of frames near exceptions (every
capture's bytes), the p50 latency (6.549 -> 6.872 us) and tx's utilisation (+0.001)
moved; every packet count, disposition, comparison and history hash stayed the same.
Re-made when the run began to judge resource drops as `npk traffic compare` does
(npkit.emulator.traffic.fate): every case's totals gained `predicted_exception` (what
the C oracle's fast path excepts: 0, 15 or 47), `lost_by_outcome` ({forward: 0,
exception: 0}) and `dropped_early` (0); with those three keys taken out, the file is
the same as before, byte for byte in every other figure, capture hash and history hash.

Re-made when npkd began to get back, after a restart, the route trie's pool units its
predecessor had free or in limbo (LAYOUT.md §7 rule 7) and to free replaced nodes after
a grace (rule 4): no case changes a route or restarts the daemon, so none of that runs;
what every case sees is the new counter, `lpm_units_recovered` 0 (in `control_plane`'s
counters, and as `route_pool_units_recovered` 0), one more word of the statistics block
written at each publication (sram_writes seed003 69 -> 70, imix 1,085 -> 1,099, errors
2,145 -> 2,170) and a larger structure cleared at start: the daemon runs 145 (seed003),
496 (imix) and 709 (errors) more instructions over a case, with the same wake-ups and
interrupts.  Every packet count, disposition, comparison, history hash and seed003's
captures stayed the same; in errors and imix the same frames leave each port (bytes, as
multisets, and the dispositions), departing up to 0.7 us (errors), 1.4 us (pipelined
imix) and 1.5 us (parallel imix) earlier or later, which changes every capture's bytes
and in parallel-imix the interleaving of frames of different flows on four ports; the
latencies (errors mean 17.075 -> 17.114 us, p50 6.872 -> 6.501; pipelined imix mean
18.096 -> 18.062; parallel imix 17.982 -> 17.978), utilisations (by at most 0.002) and
the XScale's wait cycles moved with them.
Re-made when npkd began to keep, beside its owned table in SRAM, a record of its send
backlog and of its ARP cache (what the run reads the instant a daemon dies) and, once
started again, to count what its predecessor's backlog held (killed_backlog_own,
killed_backlog_forwarded); the run's model takes each ARP resolution's start from that
record.  Every case gained the two counters (0) and, in `control_plane`,
`killed_in_send_backlog` and `lost_in_send_backlog` ({own_frames: 0, forwarded_packets:
0}: no case kills its daemon or fills its control ring); every packet count,
disposition, comparison and history hash stayed the same, and so did seed003's captures.
The daemon writes more SRAM -- two more words at each publication of its statistics, the
ARP record's count at its first start, an ARP entry's record when it is made (3 words),
when a resolution begins (3) and when its state changes (1): sram_writes seed003 70 ->
73, imix 1,099 -> 1,132, errors 2,170 -> 2,195 -- and runs more instructions (seed003
+138, imix +1,147 / +1,151, errors +696).  In pipelined-errors it took its records in
one turn of its loop fewer (25 -> 24 wake-ups, 27 -> 25 interrupts) and the run went idle
a slice sooner (drain 600 -> 580 us, emulated 1.0 -> 0.98 ms).  In errors and imix the
same frames leave each port (as multisets, and in order within every flow), departing up
to 7.2 us (errors), 1.6 us (pipelined imix) and 4.9 us (parallel imix) earlier or later,
which changes every capture's bytes; the latencies (errors mean 17.114 -> 17.453 us, p50
6.501 -> 6.841; pipelined imix mean 18.062 -> 18.120; parallel imix mean 17.978 ->
18.027, p50 14.614 -> 14.778), utilisations (by at most 0.001) and the XScale's wait
cycles moved with them.
Re-made when the run began to drop (control_killed) the packets a killed daemon had taken
from the exception ring but not logged, found by their buffers' frames: every case
gained `control_plane.lost_half_handled` (0: no case kills its daemon); with that key
taken out the file is the same as before, byte for byte.
2026-11-25: re-made when npkd's route journal became write-ahead (a change prepared,
its journal line written, then published; the change under way kept in struct lpm and
struct tables, which the daemon clears at start) and began to mark a timed route
change's line with its index, so that a restarted daemon makes the timed changes its
predecessor had not (due while it was down, or cut by the kill at the journal's write),
late, and counts them (`timed_late`, one more word of the statistics block): every case
gained `control_plane.counters.timed_late` and `control_plane.timed_changes_late` (0: no
case changes a route or kills its daemon). The one more word written at each
publication (sram_writes seed003 73 -> 74, imix 1,132 -> 1,146) and the larger structs
made the daemon run more instructions (seed003 +493, imix +3,387 / +3,407, errors
+2,548); in pipelined-errors it took its records in one wake-up fewer (24 -> 23;
interrupts 25 -> 24; sram_writes 2,195 -> 2,150). Every packet count, disposition,
comparison and history hash stayed the same and every case agreed with the oracle; in
errors and imix the departure times of frames moved, so every capture's bytes, the
latencies (errors mean 17.453 -> 17.919 us, p50 6.841 -> 8.098; pipelined imix mean
18.120 -> 18.062; parallel imix 18.027 -> 18.002), utilisations (by at most 0.003) and
the XScale's wait cycles moved with them.
2026-11-25 (later): re-made when npkd began to make the timed changes due before the
first daemon had started (it skipped them; npkd.c's start-up now owes them to itself):
the one more branch at start-up makes the daemon run 7 more instructions (19 in
pipelined-errors) and wait 14-38 cycles less; in pipelined-errors the frames' departure
times moved a little, so its four capture hashes, the mean latency (17.919 -> 17.914 us)
and hdr_format's utilisation (0.386 -> 0.387) moved with them. Every packet count,
disposition, comparison and history hash stayed the same.
2026-11-25 (third): re-made when npkd began to write a change log record of a restarted
daemon's withdrawal of learnt ARP state (xscale/npkd/README.md "Restart"; no case
restarts its daemon): setting up the callback at start-up makes it run 8 (seed003) to
36 (errors) more instructions and wait 16-72 cycles less; those two XScale figures are
all that moved -- every packet count, disposition, comparison, capture hash and history
hash stayed the same.
Re-made when npkd's control socket gained its limits, a daemon with no socket stopped
looking at the connection slots before it sleeps, and IP timestamps began to be taken
from the clock read afresh instead of the turn's (a record taken late in a long turn had
a stamp from before it arrived; issue 48; no case has a socket): the larger socket state
and two more options at start-up make the daemon run 62 more instructions in seed003
(+61 imix; in pipelined-errors one wake-up fewer, 24 -> 23 interrupts, -2,823
instructions, sram_writes 2,150 -> 2,081); the XScale's wait cycles, the departure times
of frames in pipelined-errors and pipelined-imix (their capture hashes, errors' mean
latency 17.914 -> 18.003 us and p50 8.098 -> 8.560, imix's mean 18.062 -> 18.040) and
some utilisations (by 0.001) moved with them. Every packet count, disposition,
comparison and history hash stayed the same and every case agreed with the oracle.
2026-12-02: re-made when the layouts gained the parameters of issue 47's variants
(`lookup`, `rc_bits`, `rc_choice`, `batch`, `lookup_threads`, `hdr_threads`, `classify`,
`flow_cache`: every case's `params` lists them at their defaults, whose microcode is the
image of before word for word) and npkd its flow table and plugins (`-D classify=flows`:
a configuration it does not have costs a test a wake-up) and an application's exception
actions (read only when an unknown code arrives): the daemon runs 180 (seed003), about
205 (imix) and 176 (errors) more instructions over a case, so its wait cycles and the
departure times of frames near exceptions in pipelined-errors and pipelined-imix (their
capture hashes; imix mean latency 18.040 -> 18.099 us, errors 18.003 -> 18.044) and two
utilisations (by at most 0.003) moved. Every packet count, disposition, comparison and
history hash stayed the same, and so did the seed003 and parallel captures; every case
agreed with the oracle.
2026-12-02 (later): re-made when the emulator began to serve an SRAM enqueue on its
queue's channel (the first operand, 0x40000xxx: channel 1) instead of the channel of the
queue's address plus the buffer's (0x4001xxxx: channel 2), where it was not ordered with
the queue's dequeue (emulator/src/issue.h; tests/spp/test_spp_qm_state.py): the qm's
enqueues moved from channel 2 to channel 1, so every capture hash, every history hash
but pipelined-errors', the latencies (pipelined-seed003 mean 4.387 -> 4.438 us, parallel
4.776 -> 4.783; imix 18.099 -> 18.077 / 18.002 -> 18.012), tx rates (pipelined-seed003
4,979.7 -> 4,979.0 Mb/s, parallel 4,978.2 -> 4,976.6), utilisations (by at most 0.002)
and the XScale's wait cycles in imix moved. Every packet count, disposition and
comparison stayed the same and every case agreed with the oracle; pipelined-errors is
the same byte for byte.

    .venv/bin/python tests/router/data/make_harness_reference.py tests/router/data/harness_reference.json [case ...]

Each case: the demo's 10,000-route table (seed 1), a traffic spec, a layout; the run's
summary (without the host-time figures), the sha256 of every capture file, and the chip's
history hash over the first 100 us."""

import hashlib
import json
import sys
import tempfile
from pathlib import Path

from npkit.emulator.traffic.source import load_traffic_source
from npkit.toolchain.commands.demo import DEMO_ROUTES, demo_routes, router_with_routes
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
    routes = demo_routes(DEMO_ROUTES)
    router = router_with_routes(routes)

    def source() -> object:
        return load_traffic_source(spec, dur, overrides={"router": str(router)})

    out: dict = {}
    rr = RouterRun.link(layout, {"io": "msf"}, source(), routes, router)
    rr.chip.history_enable(1)
    rr.run_traffic(100_000)
    out["history_hash_100us"] = rr.chip.history_hash()
    rr = RouterRun.link(layout, {"io": "msf"}, source(), routes, router, capture=tmp / "out")
    rr.run_traffic(dur)
    rr.drain()
    s = rr.summary(0.0)
    if s.pop("faults") != {"total": 0, "counts": {}, "last": []}:  # (the test leaves them out too)
        raise SystemExit(f"{layout} {spec.name}: chip faults: not a reference")
    c = s["comparison"]
    bad = {k: c.get(k, 0) for k in ("unmatched", "duplicates", "unexpected_control", "missing_control", "wrong_bytes")}
    if any(bad.values()) or not s["conservation"]["balanced"]:
        raise SystemExit(f"{layout} {spec.name}: the oracle disagrees ({bad}, {s['conservation']}): not a reference")
    rr.run.write_captures(tmp / "out")
    out["summary"] = {k: v for k, v in s.items() if k not in HOST}
    out["captures"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((tmp / "out").iterdir())}
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
