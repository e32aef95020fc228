"""The debugger and the TCAM (docs/tcam.md): `print tcam[N]`, `tcam` / `info tcam` (valid
entries and counters), `watch tcam[N]` stopping when microcode writes the entry, and the
errors on a chip without one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from npkit.toolchain.debug.session import DebugError, Session
from npkit.toolchain.debug.target import open_target
from npkit.toolchain.debug.trace import record_trace

ROOT = Path(__file__).resolve().parents[2]
SPP = str(ROOT / "examples" / "chips" / "ixp2850_spp.yaml")
INCLUDE = ROOT / "microcode" / "include"

# look 10.1.2.3 up, then invalidate entry 3 (the control word last, as tcam.h says)
PROG = """\
#define NUM_CONTEXTS 8
#include "tcam.h"
.reg slot k r a idx
.reg write $k0 $k1 $k2 $k3 $k4
.reg read $r0 $r1 $r2 $r3
.xfer_order $k0 $k1 $k2 $k3 $k4
.xfer_order $r0 $r1 $r2 $r3
    tcam_slot(slot)
    immed[k, 0x0a010203]
    alu[$k0, --, b, k]
    immed[$k1, 0]
    immed[$k2, 0]
    immed[$k3, 0]
    immed[$k4, 0]
    tcam_lookup($r0, $k0, TCAM_KEY_LW, slot)
    alu[r, --, b, $r0]
    immed[idx, 3]
    tcam_entry_addr(a, idx)
    immed[$k0, 0]
    sram[write, $k0, a, TCAM_E_CONTROL, 1], ctx_swap[s1]
    ctx_arb[kill]
"""


def _session(tmp_path: Path, config: str = SPP) -> Session:
    src = tmp_path / "look.uc"
    src.write_text(PROG)
    s = Session(open_target(src, config=config, include_dirs=[INCLUDE]))
    if s.chip.tcam_info() is not None:
        s.chip.tcam_write(3, [0x0A000000], [0xFF000000], 0x33)
        s.chip.tcam_write(5, [0x0A010000], [0xFFFF0000], 0x55)
    return s


def test_print_list_and_watch_entries(tmp_path: Path) -> None:
    s = _session(tmp_path)
    out = s.execute("print tcam[3]")
    assert out.strip() == ("tcam[3]: valid key 0a000000 00000000 00000000 00000000 00000000 mask ff000000 00000000 "
                           "00000000 00000000 00000000 result 0x0000000000000033")  # fmt: skip
    assert "tcam[4]: invalid" in s.execute("print tcam[2 + 2]")
    listed = s.execute("tcam").splitlines()
    assert listed[0].startswith("tcam at sram 0x80600000: 8192 entries of 144-bit keys; lookups 0")
    assert [ln.split(":")[0] for ln in listed[1:]] == ["tcam[3]", "tcam[5]"]
    assert s.execute("info tcam").splitlines() == listed
    assert "watchpoint 1: tcam[3] (sram 0x80600180 len 84)" in s.execute("watch tcam[3]")
    out = s.execute("run")
    assert "watchpoint 1" in out
    assert s.reg_value("r") == 0x80000002  # the lookup before: hit, two matches
    assert "tcam[3]: invalid" in s.execute("print tcam[3]")
    # (every context runs the program: each lookup before the write hit both entries)
    n = int(re.search(r"lookups (\d+) hits \1 multi-hits \1$", s.execute("tcam").splitlines()[0])[1])
    assert 1 <= n <= 8
    assert [ln.split(":")[0] for ln in s.execute("tcam").splitlines()[1:]] == ["tcam[5]"]


def test_errors(tmp_path: Path) -> None:
    s = _session(tmp_path)
    with pytest.raises(DebugError, match=r"tcam\[8192\]: the TCAM has entries 0..8191"):
        s.execute("print tcam[8192]")
    with pytest.raises(DebugError, match="has no TCAM"):
        _session(tmp_path, "ixp2800").execute("tcam")


def test_trace_records_lookups(tmp_path: Path) -> None:
    s = _session(tmp_path)
    out = tmp_path / "trace.json"
    summary = record_trace(s.target, 20000, 0, None, out)
    doc = json.loads(out.read_text())
    looks = [e for e in doc["traceEvents"] if e.get("cat") == "tcam"]
    assert summary["tcam_lookups"] == len(looks) == 8  # every context looked up once
    first = looks[0]
    assert first["name"] == "tcam hit" and first["ph"] == "i"
    a = first["args"]
    assert a["key"] == ["0x0a010203", "0x00000000", "0x00000000", "0x00000000", "0x00000000"]
    assert (a["hit"], a["count"], a["index"], a["result"]) == (True, 2, 3, 0x33)
    assert a["slot"] == first["tid"]  # ME 0: slot = context


def test_back_restores_the_tcam(tmp_path: Path) -> None:
    """The TCAM's state is SRAM bytes and chip counters: going back (a replay) restores both."""
    src = tmp_path / "look.uc"
    src.write_text(PROG)
    s = Session(open_target(src, config=SPP, include_dirs=[INCLUDE]))
    # the entries written with `set` (recorded, so the replay writes them too; a host call
    # outside the session would not be)
    for n, key, mask, result in ((3, 0x0A000000, 0xFF000000, 0x33), (5, 0x0A010000, 0xFFFF0000, 0x55)):
        e = 0x80600000 + 128 * n
        for off, v in ((0, key), (36, mask), (76, result), (80, 0x80000000)):
            s.execute(f"set sram[{e + off:#x}] = {v:#x}")
    assert "tcam[5]: valid key 0a010000" in s.execute("print tcam[5]")
    s.execute("watch tcam[3]")
    s.execute("run")
    assert "tcam[3]: invalid" in s.execute("print tcam[3]")
    after = s.execute("tcam").splitlines()[0]
    s.execute("back 1")  # before the thread's last instruction: the write of the control word
    assert "tcam[3]: valid" in s.execute("print tcam[3]")
    before = s.execute("tcam").splitlines()[0]
    s.execute("delete")
    s.execute("run")
    assert "tcam[3]: invalid" in s.execute("print tcam[3]")
    assert before.startswith("tcam at sram 0x80600000") and after.startswith("tcam at sram 0x80600000")
