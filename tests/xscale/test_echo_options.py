"""Echo replies to requests with IP options (RFC 1122 3.2.2.6, RFC 1812 4.3.3.6) and the
option processing they share with forwarding (RFC 791, RFC 1812 5.2.4, 5.3.13): one rule,
two implementations -- npkd's packet code (xscale/npkd/pkt.c, loaded here as a shared
library) and the oracle's model of the daemon (npkit.emulator.traffic.control) -- held
to the same bytes: on the RFC's cases with the bytes written out, and on thousands of
random option lists, well formed or not."""

from __future__ import annotations

import ctypes
import random
import struct
from pathlib import Path

import pytest

from npkit.emulator.traffic.control import (
    RouterModel,
    echo_reply,
    echo_reply_route,
    options_record,
    options_route,
)
from npkit.emulator.traffic.packet import ARP, ICMP, Ethernet, IPv4, arp_frame, ip, ipv4_frame, mac
from npkit.emulator.traffic.router_config import RouterConfig

ROOT = Path(__file__).resolve().parents[2]
LIB_PATH = ROOT / "xscale" / "build" / "libnpkd_pkt.so"
OWN = (ip("10.0.0.1"), ip("10.0.1.1"), ip("10.0.2.1"))
SRC = ip("198.18.0.1")
OUT_ADDR = ip("10.0.1.1")  # the interface the reply leaves by
TS = 80_000_123
HOST_MAC, ROUTER_MAC = mac("02:00:00:ff:00:01"), mac("02:4e:50:00:00:01")


class OptResult(ctypes.Structure):
    _fields_ = [("source_routed", ctypes.c_int), ("strict", ctypes.c_int), ("sr_exhausted", ctypes.c_int),
                ("pointer", ctypes.c_uint8), ("sr_at", ctypes.c_int), ("rr_at", ctypes.c_int),
                ("ts_at", ctypes.c_int), ("ts_ours", ctypes.c_int)]  # fmt: skip


@pytest.fixture(scope="module")
def lib(xscale_built: Path) -> ctypes.CDLL:
    so = ctypes.CDLL(str(LIB_PATH))
    u8p, u32p = ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32)
    so.build_echo_reply.argtypes = [ctypes.c_void_p, u8p, u8p, u8p, ctypes.c_uint32, u32p, ctypes.c_int,
                                    ctypes.c_uint32, ctypes.c_uint32]  # fmt: skip
    so.build_echo_reply.restype = ctypes.c_uint32
    so.echo_reply_route.argtypes = [u8p, ctypes.c_uint32, u32p, ctypes.c_int, u32p, ctypes.POINTER(ctypes.c_int)]
    so.ip_options_route.argtypes = [ctypes.c_void_p, u32p, ctypes.c_int, ctypes.POINTER(OptResult)]
    so.ip_options_record.argtypes = [ctypes.c_void_p, ctypes.POINTER(OptResult), ctypes.c_uint32,
                                     ctypes.c_uint32, ctypes.c_void_p]  # fmt: skip
    return so


def _own(own: tuple[int, ...]) -> ctypes.Array[ctypes.c_uint32]:
    return (ctypes.c_uint32 * len(own))(*own)


def c_echo(lib: ctypes.CDLL, req: bytes, own: tuple[int, ...] = OWN, out_addr: int = OUT_ADDR,
           ts: int = TS) -> bytes | None:  # fmt: skip
    out = ctypes.create_string_buffer(2048)
    n = lib.build_echo_reply(out, HOST_MAC, ROUTER_MAC, req, len(req), _own(own), len(own), out_addr, ts)
    return out.raw[:n] if n else None


def c_route(lib: ctypes.CDLL, req: bytes, own: tuple[int, ...] = OWN) -> tuple[int, bool] | None:
    dst, strict = ctypes.c_uint32(), ctypes.c_int()
    if lib.echo_reply_route(req, len(req), _own(own), len(own), ctypes.byref(dst), ctypes.byref(strict)):
        return None
    return dst.value, bool(strict.value)


def c_forward(lib: ctypes.CDLL, frame: bytes, own: tuple[int, ...], out_addr: int) -> tuple[int | None, bytes]:
    """pkt.c's two passes on a datagram to forward: (offending octet or None, the bytes after)."""
    buf = ctypes.create_string_buffer(frame, len(frame))
    r = OptResult()
    if lib.ip_options_route(buf, _own(own), len(own), ctypes.byref(r)):
        return r.pointer, buf.raw
    lib.ip_options_record(buf, ctypes.byref(r), out_addr, TS, None)
    return None, buf.raw


def py_echo(req: bytes, own: tuple[int, ...] = OWN, out_addr: int = OUT_ADDR, ts: int = TS) -> bytes | None:
    made = echo_reply(HOST_MAC, ROUTER_MAC, req, set(own), out_addr, ts)
    return None if made is None else made[0]


def py_forward(frame: bytes, own: tuple[int, ...], out_addr: int) -> tuple[int | None, bytes]:
    f = bytearray(frame)
    r = options_route(f, set(own))
    if r.bad is not None:
        return r.bad, bytes(f)
    options_record(f, r, out_addr, TS)
    return None, bytes(f)


def request(options: bytes, src: int = SRC, dst: int = OWN[0], payload: bytes = bytes(range(20))) -> bytes:
    eth = Ethernet(ROUTER_MAC, HOST_MAC, 0x0800)
    return ipv4_frame(eth, IPv4(src, dst, 1, identification=0x1234, options=options),
                      ICMP(8, 0, struct.pack("!HH", 0xAB, 7)), payload)  # fmt: skip


def a4(text: str) -> bytes:
    return ip(text).to_bytes(4, "big")


T4 = TS.to_bytes(4, "big")
S4 = SRC.to_bytes(4, "big")
# request's options -> (reply's options, padded; reply's destination; strict)
VECTORS: dict[str, tuple[bytes, bytes, int, bool]] = {
    "nops": (bytes([1, 1, 1, 0]), b"", SRC, False),
    "rr": (bytes([7, 11, 4]) + bytes(8), bytes([7, 11, 8]) + a4("10.0.1.1") + bytes(5), SRC, False),
    "rr_full": (bytes([7, 7, 8]) + a4("1.2.3.4"), bytes([7, 7, 8]) + a4("1.2.3.4") + bytes(1), SRC, False),
    "ts0": (bytes([68, 12, 5, 0x20]) + bytes(8), bytes([68, 12, 9, 0x20]) + T4 + bytes(4), SRC, False),
    "ts0_full": (bytes([68, 8, 9, 0x20]) + a4("0.0.0.9"), bytes([68, 8, 9, 0x30]) + a4("0.0.0.9"), SRC, False),
    "ts1": (bytes([68, 12, 5, 1]) + bytes(8), bytes([68, 12, 13, 1]) + a4("10.0.1.1") + T4, SRC, False),
    "ts1_full": (bytes([68, 12, 13, 1]) + a4("1.2.3.4") + bytes(4),
                 bytes([68, 12, 13, 0x11]) + a4("1.2.3.4") + bytes(4), SRC, False),
    "ts3_ours": (bytes([68, 12, 5, 3]) + a4("10.0.2.1") + bytes(4),
                 bytes([68, 12, 13, 3]) + a4("10.0.2.1") + T4, SRC, False),
    "ts3_other": (bytes([68, 12, 5, 3]) + a4("10.0.9.1") + bytes(4),
                  bytes([68, 12, 5, 3]) + a4("10.0.9.1") + bytes(4), SRC, False),
    "ts3_full": (bytes([68, 12, 13, 3]) + a4("10.0.2.1") + a4("0.0.0.1"),
                 bytes([68, 12, 13, 0x13]) + a4("10.0.2.1") + a4("0.0.0.1"), SRC, False),
    "lsrr": (bytes([131, 11, 12]) + a4("1.1.1.1") + a4("2.2.2.2"),
             bytes([131, 11, 4]) + a4("1.1.1.1") + S4 + bytes(1), ip("2.2.2.2"), False),
    "ssrr": (bytes([137, 7, 8]) + a4("10.0.1.2"), bytes([137, 7, 4]) + S4 + bytes(1), ip("10.0.1.2"), True),
    "ssrr_3": (bytes([137, 15, 16]) + a4("1.1.1.1") + a4("2.2.2.2") + a4("3.3.3.3"),
               bytes([137, 15, 4]) + a4("2.2.2.2") + a4("1.1.1.1") + S4 + bytes(1), ip("3.3.3.3"), True),
    "case_b": (bytes([131, 11, 12]) + S4 + a4("2.2.2.2"), bytes([131, 7, 4]) + S4 + bytes(1), ip("2.2.2.2"), False),
    "case_b_alone": (bytes([131, 7, 8]) + S4, b"", SRC, False),
    # the last hop is the router's own (a hop it made to itself): not a hop back
    "own_last": (bytes([131, 11, 12]) + a4("1.1.1.1") + a4("10.0.2.1"), bytes([131, 7, 4]) + S4 + bytes(1),
                 ip("1.1.1.1"), False),
    "empty_route": (bytes([131, 3, 4]), b"", SRC, False),
    "unknown_only": (bytes([148, 4, 0, 0, 136, 4, 0, 1]), b"", SRC, False),
    "all": (bytes([1, 148, 4, 0, 0, 68, 8, 5, 0]) + bytes(4) + bytes([7, 7, 4]) + bytes(4) + bytes([137, 11, 12])
            + a4("1.1.1.1") + a4("10.0.1.2") + bytes([1, 0]),
            bytes([137, 11, 4]) + a4("1.1.1.1") + S4 + bytes([7, 7, 8]) + a4("10.0.1.1")
            + bytes([68, 8, 9, 0]) + T4 + bytes(2), ip("10.0.1.2"), True),
}  # fmt: skip


@pytest.mark.parametrize("name", list(VECTORS))
def test_echo_reply_options_the_rfcs_cases(lib: ctypes.CDLL, name: str) -> None:
    """Each case's reply, from npkd's code and from the model, is the one written out: the
    options (source route reversed, RR and TS with this router added, nothing else), the
    reply's IP destination (the return route's first hop) and whether that hop must be
    on-link; the rest is the reply to a request without options."""
    opts, want, to, strict = VECTORS[name]
    req = request(opts)
    c, py = c_echo(lib, req), py_echo(req)
    assert c is not None and c == py, (name, c and c.hex(), py and py.hex())
    plain = py_echo(request(b""))
    assert plain is not None
    h = IPv4.unpack(c[14:])
    assert h.header_len == 20 + len(want) and c[34 : 34 + len(want)] == want, (name, c[34:h.header_len + 14].hex())
    assert h.src == OWN[0] and h.dst == to and h.identification == 0x1234 and h.ttl == 64
    assert c[14 + h.header_len :] == plain[34:]  # the ICMP message, as to a request without options
    assert c_route(lib, req) == echo_reply_route(req, set(OWN)) == (to, strict)


def test_malformed_options_no_reply(lib: ctypes.CDLL) -> None:
    """Options the forwarding path rejects (Parameter Problem) build no reply either."""
    for opts in (bytes([7, 2, 0, 0]), bytes([68, 8, 9, 0xF0, 0, 0, 0, 0]), bytes([131, 7, 2, 0, 0, 0, 0, 0]),
                 bytes([7, 7, 4, 0, 0, 0, 0, 7, 7, 4, 0, 0, 0, 0])):  # fmt: skip
        req = request(opts)
        assert c_echo(lib, req) is None and py_echo(req) is None
        assert c_route(lib, req) is None and echo_reply_route(req, set(OWN)) is None


def test_prespecified_timestamp_any_of_the_routers_addresses(lib: ctypes.CDLL) -> None:
    """RFC 1812 5.3.13.6: forwarding, a flag-3 timestamp is added when the next address
    named is any of the router's, not only the outgoing interface's."""
    frame = request(bytes([68, 12, 5, 3]) + a4("10.0.2.1") + bytes(4), dst=ip("1.9.9.9"))
    for side in (c_forward(lib, frame, OWN, ip("10.0.0.1")), py_forward(frame, OWN, ip("10.0.0.1"))):
        bad, out = side
        assert bad is None and out[34:46] == bytes([68, 12, 13, 3]) + a4("10.0.2.1") + T4
    assert c_forward(lib, frame, OWN[:2], ip("10.0.0.1")) == py_forward(frame, OWN[:2], ip("10.0.0.1")) == (None, frame)


# ---- random option lists: the two implementations byte for byte ---------------------------------

ADDRS = [*OWN, SRC, ip("1.1.1.1"), ip("10.0.1.2"), ip("127.0.0.1"), 0]


def _addr(rng: random.Random) -> bytes:
    return (rng.choice(ADDRS) if rng.random() < 0.7 else rng.getrandbits(32)).to_bytes(4, "big")


def _option(rng: random.Random) -> bytes:
    kind = rng.choice(["nop", "eol", "rr", "ts", "lsrr", "ssrr", "unknown", "junk"])
    if kind == "nop":
        return b"\x01"
    if kind == "eol":
        return b"\x00"
    if kind == "unknown":
        return bytes([rng.choice([130, 136, 148, 25]), 4, 0, rng.getrandbits(8)])
    if kind == "junk":
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 6)))
    slots = rng.randrange(0, 5)
    if kind == "ts":
        flg = rng.choice([0, 1, 3, 3, rng.randrange(16)])
        size = 4 if flg == 0 else 8
        ln = 4 + size * slots + (rng.randrange(4) if rng.random() < 0.2 else 0)
        p = 5 + size * rng.randrange(0, slots + 1) + (rng.randrange(-2, 3) if rng.random() < 0.2 else 0)
        body = b"".join(_addr(rng) + _addr(rng) for _ in range(slots))[: ln - 4]
        return bytes([68, ln, max(0, min(255, p)), rng.randrange(16) << 4 | flg]) + body.ljust(ln - 4, b"\0")
    ln = 3 + 4 * slots + (rng.randrange(4) if rng.random() < 0.2 else 0)
    p = 4 + 4 * rng.randrange(0, slots + 1) + (rng.randrange(-2, 3) if rng.random() < 0.2 else 0)
    body = b"".join(_addr(rng) for _ in range(slots + 1))[: ln - 3]
    return bytes([{"rr": 7, "lsrr": 131, "ssrr": 137}[kind], ln, max(0, min(255, p))]) + body.ljust(ln - 3, b"\0")


def _options(rng: random.Random) -> bytes:
    out = b""
    for _ in range(rng.randrange(1, 4)):
        out += _option(rng)
    return out[:40]


def test_random_options_npkd_and_model_agree(lib: ctypes.CDLL) -> None:
    """3,000 echo requests with random option lists (well formed or not), to one of the
    router's addresses, from a source or from one of its own: the reply (or none), where
    it goes first, and the forwarding passes on the same datagram are the same bytes
    from pkt.c and from the model; a good share of them are replies with options."""
    rng = random.Random(1812)
    replied = with_options = 0
    for _ in range(3000):
        opts = _options(rng)
        src = rng.choice([SRC, SRC, OWN[1]])
        req = request(opts, src=src, dst=rng.choice(OWN))
        out_addr = rng.choice(OWN)
        c, py = c_echo(lib, req, OWN, out_addr), py_echo(req, OWN, out_addr)
        assert c == py, (opts.hex(), c and c.hex(), py and py.hex())
        assert c_route(lib, req) == echo_reply_route(req, set(OWN)), opts.hex()
        assert c_forward(lib, req, OWN, out_addr) == py_forward(req, OWN, out_addr), opts.hex()
        replied += c is not None
        with_options += c is not None and c[14] != 0x45
    assert replied > 1000 and with_options > 500, (replied, with_options)


# ---- the model: a reply held for ARP keeps its timestamps' offsets -----------------------------

def test_model_reply_held_for_arp_keeps_its_timestamps() -> None:
    """An echo request with a timestamp option from an on-link host not yet resolved: the
    model sends an ARP request, and once the host answers, the reply -- its timestamp
    offset known, so a run matches npkd's frame to within the clock's tolerance."""
    cfg = RouterConfig.load(ROOT / "examples" / "traffic" / "router.yaml")
    model = RouterModel(cfg)
    host, host_mac = ip("10.0.1.51"), mac("02:00:0a:00:01:33")
    eth = Ethernet(cfg.ports[1].mac, host_mac, 0x0800)
    req = ipv4_frame(eth, IPv4(host, ip("10.0.1.1"), 1, options=bytes([68, 8, 5, 0, 0, 0, 0, 0])),
                     ICMP(8, 0, struct.pack("!HH", 1, 1)), b"x" * 20)  # fmt: skip
    model.process(0, req, 1, 1_000_000)
    assert [e.frame[12:14] for e in model.emitted] == [b"\x08\x06"]
    reply = arp_frame(Ethernet(cfg.ports[1].mac, host_mac, 0x0806), ARP(2, host_mac, host, cfg.ports[1].mac,
                                                                        cfg.ports[1].address))  # fmt: skip
    model.process(1, reply, 1, 1_100_000)
    sent = model.emitted[-1]
    assert sent.port == 1 and sent.frame[0:6] == host_mac and sent.pid == 0 and sent.timestamps == (38,)
    stamp = int.from_bytes(sent.frame[38:42], "big")
    assert stamp == (model.epoch_ms_of_day + 1) % 86_400_000 and sent.frame[34:38] == bytes([68, 8, 9, 0])
