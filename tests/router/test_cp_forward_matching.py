"""Frames the control plane forwards after rewriting their IP options are matched to
their own input, not to another input the rewrite made them look like (issue 48, "the
judge").

Each case is a pair of legitimate packets A and B on one port where the daemon's rewrite
of A gives the bytes (all a router leaves alone, or all but the TTL) of B: a full
Timestamp option with overflow 14 (forwarded with the count raised to 15) next to one
with overflow 15 (Parameter Problem); a Record Route with two free slots next to one whose
first slot already holds the router's outgoing address; a loose source route through the
router next to the packet it becomes at its next hop.  The run used to credit A's frame to
B (`wrong_outcome` / `wrong_bytes`, "packet(s) with two fates") and fail a correct run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npkit.emulator.traffic.frames import TAG
from npkit.emulator.traffic.packet import UDP, Ethernet, IPv4, ip, mac
from npkit.emulator.traffic.pcap import write_pcap

from .test_ci_policy import npk

ME = mac("02:4e:50:00:00:00")  # port 0 of examples/traffic/router.yaml
HOST = mac("02:00:0a:00:00:0a")
OUT = bytes([10, 0, 2, 1])  # the address of port 2, where 1.2.3.0/24 leaves (routes.txt)


def _frame(opts: bytes, dst: str = "1.2.3.1", ttl: int = 64, tag: bytes = b"", final: str = "") -> bytes:
    """UDP from a host on port 0; its checksum over the `final` destination (a source
    route's last address: RFC 1122 3.2.1.8), by default `dst`."""
    src = ip("198.18.0.5")
    h = IPv4(src, ip(dst), 17, ttl=ttl, identification=7, options=opts)
    body = UDP(1000, 2000).pack(tag + b"x" * 30, src, ip(final or dst))
    return Ethernet(ME, HOST, 0x0800).pack() + h.pack(len(body)) + body


def _pair(kind: str, tag: bytes) -> tuple[bytes, bytes, dict[str, int]]:
    """(A, B, what the run must count): A's rewrite looks like B."""
    if kind == "timestamp_overflow":  # full (pointer 13 > length 12), flag 0
        a = _frame(bytes([68, 12, 13, 0xE0]) + bytes(8), tag=tag)
        b = _frame(bytes([68, 12, 13, 0xF0]) + bytes(8), tag=tag)
        return a, b, {"matched_forward": 1, "matched_exception": 2, "matched_control": 1}
    if kind == "record_route":
        a = _frame(bytes([7, 11, 4]) + bytes(8) + b"\0", tag=tag)
        b = _frame(bytes([7, 11, 8]) + OUT + bytes(4) + b"\0", tag=tag)
        return a, b, {"matched_forward": 2, "matched_exception": 2}
    assert kind == "loose_source_route"  # A to the router, which sends it on to 1.2.3.1
    hops = ip("1.2.3.1").to_bytes(4, "big") + ip("1.2.3.2").to_bytes(4, "big")
    a = _frame(bytes([131, 11, 4]) + hops + b"\0", dst="10.0.0.1", tag=tag, final="1.2.3.2")
    b = _frame(bytes([131, 11, 8]) + OUT + hops[4:] + b"\0", ttl=60, tag=tag, final="1.2.3.2")
    return a, b, {"matched_forward": 2, "matched_exception": 2}


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Path:
    elf = tmp_path_factory.mktemp("cp_forward") / "router.elf"
    assert npk("link", "pipelined", "-o", elf)[0] == 0
    return elf


@pytest.mark.parametrize("tagged", [False, True], ids=["untagged", "same_tag"])
@pytest.mark.parametrize("order", ["AB", "BA"])
@pytest.mark.parametrize("kind", ["timestamp_overflow", "record_route", "loose_source_route"])
def test_a_rewritten_frame_is_credited_to_its_own_input(router: Path, tmp_path: Path, kind: str, order: str,
                                                        tagged: bool) -> None:  # fmt: skip
    """same_tag: both frames carry the generator's tag of packet 0 (a pcap whose frame
    was copied and edited): the copy is known by its bytes, as untagged frames are."""
    a, b, want = _pair(kind, TAG + bytes(4) if tagged else b"")
    frames = [a, b] if order == "AB" else [b, a]
    inp = tmp_path / "in"
    inp.mkdir()
    write_pcap(inp / "port0.pcap", [(1000 + 4000 * k, f) for k, f in enumerate(frames)])
    code, text = npk("run", router, "--traffic", inp, "--duration-ms", "0.05", "--json")
    s = json.loads(text)
    cmp = s["comparison"]
    for key, n in want.items():
        assert cmp.get(key, 0) == n, (key, cmp)
    for key in ("wrong_outcome", "wrong_bytes", "wrong_port", "wrong_reason", "unmatched", "duplicates",
                "unexpected_control", "missing_control"):  # fmt: skip
        assert cmp.get(key, 0) == 0, (key, cmp)
    assert s["totals"]["offered"] == 2 and s["in_flight"]["count"] == 0, s["totals"]
    assert code == 0 and s["verdict"] == {"ok": True, "reasons": []}, s["verdict"]
