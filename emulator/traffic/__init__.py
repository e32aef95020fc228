"""npkit.emulator.traffic: the packet side of the emulator, in pure Python.

What lives here and why it is separate from the C core: the emulated chip consumes
and produces Ethernet frames; everything that makes, stores, predicts and checks
those frames is ordinary Python that needs no emulator to run.

- `packet`        build and parse Ethernet / 802.1Q / ARP / IPv4 / UDP / TCP / ICMP
- `pcap`          libpcap files (nanosecond and microsecond), streaming
- `routes`        route-table text format, longest-prefix match, random tables
- `router_config` the router's ports, ARP table and routes (YAML)
- `reasons`       drop and exception reason codes (from microcode/reasons.yaml)
- `oracle`        the behavioural reference router (RFC 1812): the test oracle
- `spec`          the traffic specification (YAML)
- `generator`     traffic generation from a spec: per-port pcaps + manifest
- `dataset`       reading a traffic directory back (manifest + pcaps)
- `compare`       per-packet diff of emulator output against the oracle
- `cli`           `npk traffic ...`
"""
