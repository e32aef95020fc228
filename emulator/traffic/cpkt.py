"""The generator's frame builder and the oracle at C speed (emulator/pkt, see
npkit.emulator.pktlib), for windows of packets held as flat arrays.

    router = c_router(config)                       # once per router configuration
    verdicts = oracle_window(router, data, off, lens, in_ports)
    CFrameBuilder(builder).build(kinds, lens, pids, out, off)

Both give exactly what the Python reference gives (`RefRouter.process`,
`FrameBuilder.build[kind]`): the C builder draws from the same MT19937 state as the
port's `random.Random`, and hands the state back to the Python builder for the kinds it
does not build, and for a port's normal packets when the port has `fields:` (tests
compare the two on every kind).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from npkit.emulator.pktlib import lib, mt_from_random, mt_to_random

from .oracle import Drop, Except, Forward, Outcome
from .router_config import RouterConfig
from .spec import KINDS

if TYPE_CHECKING:
    from .frames import FrameBuilder

# npk_pkt.h NPK_R_* in order (index 0: none)
REASONS = ("", "short_frame", "oversize_frame", "dst_mac_mismatch", "arp", "non_ipv4_ethertype",
           "bad_version", "bad_ihl", "bad_total_length", "ip_truncated", "bad_checksum", "ip_options",
           "martian_dst", "obsolete_broadcast", "broadcast", "multicast", "link_broadcast_unicast_ip",
           "local_delivery", "martian_src", "no_route", "ttl_expired", "redirect", "arp_miss")  # fmt: skip
FORWARD, DROP, EXCEPTION = 0, 1, 2
PYTHON = 3  # npk_pkt.h NPK_V_PYTHON: a verdict kind that leaves the packet to Python's judgement
# spec.KINDS index -> NPK_K_* (0: the Python builder)
_C_KINDS = {"normal": 1, "ttl_expiring": 2, "options": 3, "runt": 4}
KIND_CODE = bytes(_C_KINDS.get(k, 0) for k in KINDS).ljust(256, b"\0")
PROTO_CODE = {"udp": 0, "tcp": 1, "tunnel": 2}


def _without(table: bytes, kind: str) -> bytes:
    """A KIND_CODE table that leaves `kind` to the Python builder."""
    out = bytearray(table)
    out[KINDS.index(kind)] = 0
    return bytes(out)


class CRouter:
    """A RouterConfig as the C oracle and generator see it (npk_router), with the
    buffers it points into."""

    def __init__(self, cfg: RouterConfig) -> None:
        self.ffi, self.lib = lib()
        ffi = self.ffi
        self.cfg = cfg
        self.index = cfg.index
        ports = ffi.new("npk_rport[]", len(cfg.ports))
        for i, p in enumerate(cfg.ports):
            ports[i].address, ports[i].network = p.address, p.network
            ports[i].netmask, ports[i].broadcast = p.netmask, p.broadcast
            ports[i].mac = list(p.mac)
        self._ports = ports
        hosts = sorted(cfg.arp)
        self._arp_ip = array("I", hosts)
        self._arp_mac = b"".join(cfg.arp[h] for h in hosts) or b"\0"
        self._arp_ip_c = ffi.from_buffer("uint32_t[]", self._arp_ip) if hosts else ffi.NULL
        self._arp_mac_c = ffi.from_buffer("uint8_t[]", self._arp_mac)
        self._routes = self.index.c_routes()
        r = ffi.new("npk_router *")
        r.nports, r.ports = len(cfg.ports), ports
        r.routes = self._routes[0]
        r.arp.ip, r.arp.mac, r.arp.n = self._arp_ip_c, self._arp_mac_c, len(hosts)
        r.send_redirects = int(bool(cfg.send_redirects))
        self.c = r
        unicast = set(cfg.addresses)
        for p in cfg.ports:
            unicast |= {p.network, p.broadcast}
        self._not_unicast = array("I", sorted(unicast))
        self.not_unicast = ffi.from_buffer("uint32_t[]", self._not_unicast)
        self.n_not_unicast = len(self._not_unicast)


@lru_cache(maxsize=8)
def c_router(cfg: RouterConfig) -> CRouter:
    return CRouter(cfg)


@dataclass
class Verdicts:
    """The oracle on a window: per packet kind (FORWARD/DROP/EXCEPTION), reason code
    (REASONS), output port; `out` holds every frame, rewritten where forwarded, at the
    input's offsets."""

    kind: bytearray
    reason: bytearray
    port: bytearray
    out: bytearray
    names: tuple[str, ...] = REASONS  # reason code -> name (an application's model adds its own)

    def outcome(self, i: int, off: int, length: int) -> Outcome:
        k = self.kind[i]
        if k == FORWARD:
            return Forward(self.port[i], bytes(self.out[off : off + length]))
        return (Drop if k == DROP else Except)(self.names[self.reason[i]])


def oracle_window(router: CRouter, data: bytes | bytearray, off: array[int], lens: array[int],
                  in_ports: array[int]) -> Verdicts:  # fmt: skip
    """RefRouter.process on every packet of a window (C)."""
    n = len(lens)
    ffi = router.ffi
    v = Verdicts(bytearray(n), bytearray(n), bytearray(n), bytearray(len(data)))
    if n:
        router.lib.npk_oracle_run(router.c, n, ffi.from_buffer("uint8_t[]", data), ffi.from_buffer("uint64_t[]", off),
                                  ffi.from_buffer("uint16_t[]", lens), ffi.from_buffer("uint8_t[]", in_ports),
                                  ffi.from_buffer("uint8_t[]", v.kind), ffi.from_buffer("uint8_t[]", v.reason),
                                  ffi.from_buffer("uint8_t[]", v.port), ffi.from_buffer("uint8_t[]", v.out))  # fmt: skip
        if 255 in v.kind:
            bad = in_ports[v.kind.index(255)]
            raise ValueError(f"in_port {bad}: the router has ports 0..{len(router.cfg.ports) - 1}")
    return v


class CFrameBuilder:
    """A FrameBuilder's frames built in C; kinds the C builder does not do go to the
    Python builder, with the random state handed over and back."""

    def __init__(self, builder: FrameBuilder) -> None:
        self.py = builder
        self.router = c_router(builder.cfg)
        ffi = self.ffi = self.router.ffi
        self.lib = self.router.lib
        g = self.g = ffi.new("npk_gen *")
        mt_from_random(builder.rng, g.rng)
        g.ident = builder.ident
        g.src_mac = list(builder.src_mac)
        g.me_mac = list(builder.me.mac)
        protos = builder.protos
        g.nprotos = len(protos)
        for i, name in enumerate(protos):
            g.protos[i] = PROTO_CODE[name]
            g.proto_cum[i] = builder._proto_cum[i]
        g.proto_total = builder._proto_total
        pool = builder._dest_pool
        self._pool = pool
        g.pool_n = len(pool)
        g.pool_prefix = ffi.from_buffer("uint32_t[]", pool.prefix) if len(pool) else ffi.NULL
        g.pool_len = ffi.from_buffer("uint8_t[]", pool.length) if len(pool) else ffi.NULL
        g.forwardable = int(builder._forwardable)
        g.via_port = -1 if builder._via_port is None else builder._via_port
        g.router = self.router.c
        g.not_unicast, g.n_not_unicast = self.router.not_unicast, self.router.n_not_unicast
        # a port with `fields:` has its normal packets built in Python (frames.py
        # _fields_normal); the C builder keeps the other kinds it does
        self.kind_code = KIND_CODE if builder.fields is None else _without(KIND_CODE, "normal")
        self.c_frames = 0
        self.py_frames = 0

    def build(self, kinds: bytes, lens: array[int], pids: array[int], out: bytearray, off: array[int]) -> None:
        """Frames i = 0..n-1 (KINDS indices `kinds`, lengths, ids) into out at off[i]."""
        n = len(lens)
        ffi = self.ffi
        codes = kinds.translate(self.kind_code)
        c_out = ffi.from_buffer("uint8_t[]", out)
        i = 0
        while i < n:
            got = self.lib.npk_gen_frames(self.g, n - i, ffi.from_buffer("uint8_t[]", codes, require_writable=False) + i,
                                          ffi.from_buffer("uint16_t[]", lens) + i, ffi.from_buffer("uint32_t[]", pids) + i,
                                          c_out, ffi.from_buffer("uint64_t[]", off) + i)  # fmt: skip
            done = got if got >= 0 else -1 - got
            self.c_frames += done
            i += done
            if i >= n:
                break
            # the Python builder: this frame's kind (and the next ones the C builder does
            # not do), or the error the C builder leaves it
            self._to_python()
            while True:
                frame = self.py.build[KINDS[kinds[i]]](lens[i], pids[i])
                assert len(frame) == lens[i], (KINDS[kinds[i]], len(frame), lens[i])
                out[off[i] : off[i] + len(frame)] = frame
                self.py_frames += 1
                i += 1
                if i >= n or codes[i]:
                    break
            self._from_python()

    def _to_python(self) -> None:
        mt_to_random(self.g.rng, self.py.rng)
        self.py.ident = int(self.g.ident)

    def _from_python(self) -> None:
        mt_from_random(self.py.rng, self.g.rng)
        self.g.ident = self.py.ident

    def sync(self) -> None:
        """Leave the Python builder where the C builder is (its rng and ident)."""
        self._to_python()
