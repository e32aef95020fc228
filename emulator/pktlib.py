"""The packet library (emulator/pkt, libnpkpkt.so) as Python sees it: cffi bindings and the
few conversions between Python objects and its C structures.

The C code repeats, bit for bit, what the Python reference implementations do
(the generator's frame builder, the oracle, the route parser, longest-prefix match, the
LPM trie build); tests hold the two against each other.  Everything that uses it keeps
the Python path for what the C code does not cover.
"""

from __future__ import annotations

import os
import random
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any

from .binding import cdef_block
from .cffi_cache import ffi_for

HERE = Path(__file__).resolve().parent
HEADER = HERE / "pkt" / "npk_pkt.h"
LIBRARY = HERE / "build" / "libnpkpkt.so"


class PktLibError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def lib() -> tuple[Any, Any]:
    ffi = ffi_for("npkpkt", cdef_block(HEADER, PktLibError))
    path = Path(os.environ.get("NPKPKT_LIB", str(LIBRARY)))
    if not path.exists():
        raise PktLibError(f"packet library {path} is missing: run `make` at the top of the tree "
                          "(or `make -C emulator PY=.venv/bin/python pkt`)")  # fmt: skip
    return ffi, ffi.dlopen(str(path))


def mt_from_random(rng: random.Random, dest: Any) -> None:
    """Copy a random.Random's MT19937 state into an npk_mt (cdata)."""
    version, internal, _gauss = rng.getstate()
    if version != 3 or len(internal) != 625:
        raise PktLibError(f"unexpected random.Random state (version {version})")
    ffi, _ = lib()
    ffi.memmove(dest.state, array("I", internal[:624]), 4 * 624)
    dest.index = internal[624]


def mt_to_random(src: Any, rng: random.Random) -> None:
    """Put an npk_mt's state back into a random.Random (the Python builder goes on from it)."""
    _version, _internal, gauss = rng.getstate()
    ffi, _ = lib()
    state = array("I", bytes(ffi.buffer(src.state)))
    state.append(int(src.index))
    rng.setstate((3, tuple(state), gauss))


def port_load(ports: Any, lens: Any, over: array[int], kind: Any = None, want: int = 0) -> dict[int, tuple[int, int]]:
    """{port: (wire bits, frames)} over frames (ports[i], lens[i]) -- only those with
    kind[i] == want when kind is given -- each adding over[port] bytes on the wire
    (npk_port_load).  ports and kind: bytes-like; lens: array("H"); over: array("I") of 256."""
    n = len(lens)
    if not n:
        return {}
    ffi, c = lib()
    bits = ffi.new("uint64_t[256]")
    pkts = ffi.new("uint64_t[256]")
    c.npk_port_load(n, ffi.from_buffer("uint8_t[]", ports), ffi.from_buffer("uint16_t[]", lens),
                    ffi.from_buffer("uint8_t[]", kind) if kind is not None else ffi.NULL, want,
                    ffi.from_buffer("uint32_t[]", over), bits, pkts)  # fmt: skip
    top = max(ports) + 1  # only ports that occur can have counts
    frames, wire = ffi.unpack(pkts, top), ffi.unpack(bits, top)
    return {p: (wire[p], k) for p, k in enumerate(frames) if k}
