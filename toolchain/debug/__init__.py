"""Source-level debugging, tracing and packet forensics over the emulator.

    npk debug IMAGE[@MES]...|LAYOUT [--batch FILE]    session.Session, cli.debug_cmd
    npk trace IMAGE[@MES]...|LAYOUT -o trace.json      trace.record_trace
    npk why PACKET_ID --image IMAGE[@MES] ...          why.explain

Every one opens its images as `npk run` does (target.open_targets) and reads -D alike
(target.sort_defines).

See docs/debugging.md for a walk-through.
"""
