"""Source-level debugging, tracing and packet forensics over the emulator.

    npk debug IMAGE|LAYOUT [--batch FILE]     session.Session, cli.debug_cmd
    npk trace IMAGE|LAYOUT -o trace.json      trace.record_trace
    npk why PACKET_ID --image IMAGE ...       why.explain

See docs/debugging.md for a walk-through.
"""
